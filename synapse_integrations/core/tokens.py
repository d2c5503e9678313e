"""The tokenizer shared by the lexical index and the query: lower-cased word tokens
without English function words.

>>> tokenize("What is the name of Sam's dog?")
['name', 'sam', 'dog']
"""

from __future__ import annotations

import re

__all__ = ["FIRST_PERSON", "STOPWORDS", "tokenize"]

_TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")
#: A text in the first person (a question about the one asking it, a turn about its speaker).
FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|our|us)\b", re.I)


#: English function words left out of the lexical index. In a small memory their IDF is
#: high ("is" may occur in two turns of six), so without this list "What is the name of
#: Sam's dog?" matches "Sam is learning the cello" on "is" and "the". Content words,
#: numbers and names are kept, and so are question words' answers (dates, places).
STOPWORDS = frozenset("""
a an and are as at be been being but by can could did do does doing done for from had has
have having he her here hers herself him himself his how i if in into is it its itself just
me my myself no nor not of off on once only or other our ours ourselves out over own same
she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves about above after again against
all am any because before below between both during each few further more most s t ll re ve
d m o y don isn wasn weren won aren didn doesn hasn haven
""".split())


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of length >= 2 without English function words (the same
    rule for documents and queries).

    >>> tokenize("What is the name of Sam's dog?")
    ['name', 'sam', 'dog']
    """
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in STOPWORDS]

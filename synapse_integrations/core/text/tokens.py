"""The tokenizer shared by the lexical index and the query: lower-cased word tokens
without English function words.

>>> tokenize("What is the name of Sam's dog?")
['name', 'sam', 'dog']
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import Stemmer
from breame.spelling import get_american_spelling
from lemminflect import getAllLemmas

from .lexicon import INDEX_STOPWORDS, MONTH

__all__ = ["DATE_EXPRESSION", "NUMERIC_DATE", "YEAR", "sentences", "stem", "terms", "tokenize",
           "without_dates"]

_TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")

#: A year of the last two centuries and a numeric date ("2023-12-08", "8/12/2023").
YEAR = r"(?:19|20)\d\d"
NUMERIC_DATE = r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
#: A date as a question writes it: a day and a month ("25 May, 2022", "8th of December",
#: "December 8, 2023"), a month and a year ("May 2022"), a year or a numeric date. A
#: month's name alone is no date ("May I ask ...", "the March for Science").
DATE_EXPRESSION = re.compile(
    rf"\b{_DAY}\s+(?:of\s+)?{MONTH}\b\.?(?:,?\s+{YEAR}\b)?|\b{MONTH}\.?\s+{_DAY}\b(?:,?\s+{YEAR}\b)?|"
    rf"\b{MONTH}\.?,?\s+{YEAR}\b|\b{NUMERIC_DATE}\b|\b{YEAR}\b", re.I)


def without_dates(text: str) -> str:
    """``text`` with its date expressions (:data:`DATE_EXPRESSION`) blanked: a date is
    matched against the memories' times (core/signals/focus.py), not against their words.

    >>> without_dates("What did Nate do for Joanna on 25 May, 2022?")
    'What did Nate do for Joanna on  ?'
    >>> without_dates("May I ask what Sam did in March 2023 and on 2023-04-01?")
    'May I ask what Sam did in   and on  ?'
    """
    return DATE_EXPRESSION.sub(" ", text)


_SENTENCE_RE = re.compile(r"[^.!?;\n]+(?:[.!?;]+|$)", re.MULTILINE)


def sentences(text: str) -> list[str]:
    r"""``text`` cut after each run of ``. ! ? ;`` and at line breaks, every piece as written
    (its spaces and end marks kept): a line that ends without a mark (a list's item) is a
    sentence too.

    >>> sentences("I moved. Where to? Lisbon; near the sea\n- a flat\n- a cat.")
    ['I moved.', ' Where to?', ' Lisbon;', ' near the sea', '- a flat', '- a cat.']
    """
    return _SENTENCE_RE.findall(text)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of length >= 2 without English function words (the same
    rule for documents and queries).

    >>> tokenize("What is the name of Sam's dog?")
    ['name', 'sam', 'dog']
    """
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in INDEX_STOPWORDS]


_STEMMER = Stemmer.Stemmer("english")
_STEM_LOCK = threading.Lock()


def _verb_lemma(word: str) -> str:
    """The lemma of an irregular verb form ("wrote", "written" -> "write"; "taught" ->
    "teach"), from LemmInflect's dictionary, when the word reads only as that one verb;
    any other word as it is. A word with another reading keeps its own form: "felt" (the
    cloth), "left" (the side), "rose" (the flower and the name), "saw" (the tool)."""
    readings = getAllLemmas(word)
    lemmas = readings.get("VERB", ())
    return lemmas[0] if len(readings) == 1 and len(lemmas) == 1 else word


@lru_cache(maxsize=1 << 17)
def stem(word: str) -> str:
    """The lexical term of a lower-case word: its English Snowball stem (PyStemmer), so
    that "moved", "moving" and "moves" are one term, taken from the verb's lemma for an
    irregular verb form, so that "wrote" and "written" meet "write" (Snowball cuts
    suffixes only), and from the American spelling of a British one (Breame's list), so
    that "favourite colour" meets "favorite color". Numbers and codes are left as they are.

    >>> [stem(w) for w in ("moved", "relocation", "issues", "heron57", "qm")]
    ['move', 'reloc', 'issu', 'heron57', 'qm']
    >>> [stem(w) for w in ("wrote", "written", "writing", "taught", "felt", "rose")]
    ['write', 'write', 'write', 'teach', 'felt', 'rose']
    >>> [stem(w) for w in ("favourite", "colours", "organised", "travelled")]
    ['favorit', 'color', 'organiz', 'travel']
    """
    if not word.isalpha():  # "heron57", "5521": identifiers match exactly
        return word
    word = get_american_spelling(word)
    with _STEM_LOCK:  # a Stemmer object is not safe to share between threads
        return _STEMMER.stemWord(_verb_lemma(word))


_HYPHENATED = re.compile(r"(?u)\b\w+(?:-\w+)+\b")


def terms(text: str) -> list[str]:
    """The lexical index's terms of ``text``: its :func:`tokenize` tokens, stemmed, then
    each hyphenated compound written as one word too, so that "de-stress" and "destress",
    "non-stop" and "nonstop" meet (both parts stay terms: "ice-cream" still matches "ice
    cream").

    >>> terms("Rachel moved to Chicago; she is moving again")
    ['rachel', 'move', 'chicago', 'move']
    >>> terms("Running helps me de-stress"), terms("How do you destress?")
    (['run', 'help', 'de', 'stress', 'destress'], ['destress'])
    """
    out = [stem(t) for t in tokenize(text)]
    if "-" in text:
        out += [stem(w) for w in (c.replace("-", "") for c in _HYPHENATED.findall(text.lower()))
                if w not in INDEX_STOPWORDS]
    return out

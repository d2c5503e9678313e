"""What a question is about: the speakers it names and its attribute terms (the words
the gate's checks and the version ranking read)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .lexicon import FRAME_WORDS
from .tokens import tokenize, without_dates

__all__ = ["attribute_terms", "name_tokens", "named_subjects"]


@functools.lru_cache(maxsize=4096)
def name_tokens(name: str) -> tuple[str, ...]:
    """A name's tokens (its lowercased whole when it has none); cached: every question
    reads every speaker's name."""
    return tuple(tokenize(name)) or (name.lower(),)


def named_subjects(question: str, speakers: Sequence[str]) -> list[str]:
    """The speakers the question names (every token of the name appears in it), in the
    order given.

    >>> named_subjects("Did Sam and Riley meet in June?", ["Riley", "Sam", "Dana"])
    ['Riley', 'Sam']
    >>> named_subjects("Where does my sister live?", ["user", "assistant"])
    []
    """
    words = set(tokenize(question))
    return [s for s in speakers if s and all(t in words for t in name_tokens(s))]


def attribute_terms(question: str, names: Sequence[str]) -> list[str]:
    """The question's content tokens (:func:`~synapse_integrations.core.text.tokens.tokenize`)
    without the tokens of ``names``, :data:`FRAME_WORDS` and its dates (a date is the
    memories' time, not their words: :func:`~synapse_integrations.core.text.tokens.without_dates`),
    in order, once each.

    >>> attribute_terms("What is the name of Sam's dog?", ["Sam"])
    ['dog']
    >>> attribute_terms("What did Nate do for Joanna on 25 May, 2022?", ["Joanna", "Nate"])
    []
    """
    skip = {t for n in names for t in name_tokens(n)} | FRAME_WORDS
    return list(dict.fromkeys(t for t in tokenize(without_dates(question)) if t not in skip))

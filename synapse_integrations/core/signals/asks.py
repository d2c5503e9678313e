"""What a turn asks is evidence of what was asked, not of the answer (``asked``).

A turn that only asks ("Where does my sister live?") states nothing: it shares the words
of every later question about the same thing, and an agent that records its user's
questions holds many of them. Ranked on its words, such a question outranks the statement
that answers it ("My sister Ana moved to Lisbon last year."), and an agent acting on the
first hit edits the question. So every turn keeps ``1 - (1 - w) x`` its *asked share* of
its score (:func:`discount_asked`, ``w`` = ``question_weight``): the asked share is the
part of its text in sentences that end in "?" (:func:`asked_share`), so "That looks
great! Seen any good movies lately?" keeps more than a turn that only asks, and a long
turn that tells and then asks ("I just got a Mazda; how do I clean the seats?") keeps the
score of what it tells. A question that was answered hands its place to the answer, which
inherits the question's rank before this discount (:mod:`.replies`).

Unless the query is about what was asked ("What did I ask you about Lisbon?",
:func:`about_asking`, the lexicon's :data:`~..text.lexicon.ASKING_WORDS`): then what a
turn asked is what the query wants, and no score changes.

The change (0 or negative) is the ``asked`` score component.

>>> from synapse_integrations.core.graph.graph import Compiled
>>> v = Compiled.from_arrays(["s", "q"], np.eye(2), src=[], dst=[], weight=[],
...     is_episode=[True] * 2, attrs={"speaker": ["Ann", "Ann"], "metadata": [{}] * 2,
...     "text": ["Ann: My sister lives in Lisbon.", "Ann: Where does my sister live?"]})
>>> score, change = discount_asked(v, np.arange(2), np.array([0.6, 0.8]), 0.25)
>>> score.round(2).tolist(), change.round(2).tolist()
([0.6, 0.2], [0.0, -0.6])
>>> about_asking("What did I ask you about Lisbon?"), about_asking("Where does Ana live?")
(True, False)
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..text.documents import without_speaker
from ..text.lexicon import ASKING_WORDS
from ..text.tokens import tokenize
from .base import Candidates, Signal

__all__ = ["Asks", "about_asking", "asked_share", "asked_shares", "discount_asked"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def asked_share(text: str, speaker: str | None = None) -> float:
    """The share of ``text``'s characters (its speaker's ``"Name: "`` left out) in
    sentences that end in a question mark (closing quotes and brackets aside).

    >>> asked_share("Seen any good movies lately?"), asked_share("I went skiing.")
    (1.0, 0.0)
    >>> round(asked_share("Ann: Wow, that looks great! Seen any good movies?", "Ann"), 1)
    0.5
    """
    text = without_speaker(speaker, text)
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    total = sum(len(s) for s in sentences)
    if total == 0:
        return 0.0
    asked = sum(len(s) for s in sentences if s.rstrip("\"')]}»”’ ").endswith("?"))
    return asked / total


def _shares(view: Any, start: int = 0) -> np.ndarray:
    """Each node's :func:`asked_share` from ``start`` on (0 without a ``?``: none asked)."""
    texts, speakers = view.node_values("text")[start:], view.node_values("speaker")[start:]
    return np.fromiter((asked_share(t, s) if t and "?" in t else 0.0
                        for t, s in zip(texts, speakers)), dtype=np.float64,
                       count=view.n - start)


def asked_shares(view: Any) -> np.ndarray:
    """Every node's :func:`asked_share` (concepts: 0), kept per node of the view."""
    return view.per_node("asks.shares", _shares)


def about_asking(query: str) -> bool:
    """Whether ``query`` is about what was asked (it holds one of
    :data:`~..text.lexicon.ASKING_WORDS`)."""
    return not ASKING_WORDS.isdisjoint(tokenize(query))


def discount_asked(view: Any, cand: np.ndarray, score: np.ndarray, weight: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate keeps ``1 - (1 - weight) x`` its asked share of its score (module
    docstring; ``weight`` 1: unchanged). Returns the scores and the change per candidate
    (0, or negative)."""
    score = np.asarray(score, dtype=np.float64)
    if weight >= 1.0 or cand.size == 0:
        return score, np.zeros(score.shape)
    share = asked_shares(view)[cand]
    change = 0.0 - (1.0 - weight) * share * np.maximum(score, 0.0)  # 0.0 - x: no -0.0
    return score + change, change


class Asks(Signal):
    """A turn's asked share of its score is discounted (``asked``, :func:`discount_asked`),
    unless the query is about what was asked (:func:`about_asking`)."""

    name = "asked"
    section = "signals.asks"

    def adjust(self, ctx: Candidates, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        weight = 1.0 if about_asking(ctx.asked) else ctx.cfg.question_weight
        return discount_asked(ctx.view, ctx.cand, score, weight)

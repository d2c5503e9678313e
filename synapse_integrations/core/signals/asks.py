"""What a turn asks is evidence of what was asked, not of the answer (``asked``).

A turn that only asks ("Where does my sister live?") states nothing: it shares the words
of every later question about the same thing, and an agent that records its user's
questions holds many of them. Ranked on its words, such a question outranks the statement
that answers it ("My sister Ana moved to Lisbon last year."), and an agent acting on the
first hit edits the question. So a question *whose answer memory holds* keeps
``1 - (1 - w) x`` its *asked share* of its score (:func:`discount_asked`, ``w`` =
``question_weight``): the asked share is the part of its text in sentences that end in
"?" (:func:`asked_share`), so "That looks great! Seen any good movies lately?" keeps more
than a turn that only asks. Memory holds the answer when the next turn answers it (another
speaker, not the assistant: :func:`~.replies.replies_to`; the reply inherits the
question's rank before this discount) or when, as it was stored, memory's statements
already held what it asks (:func:`mark`): the nearest stored turn that mostly tells is at
a cosine of at least :data:`ASKED_COSINE`, or the statements hold every word it asks about
(:func:`asked_terms`: an answer told in other words is below the cosine, but its
words are in memory), or it tells nothing of its asker (:func:`discloses`: not in the
first person; "When did Melanie paint a sunrise?" asks about the conversation, whatever
words it brings). Only a question about its asker that brings something new keeps its
score: "What are some simple ways to keep my living room dust-free, with a cat that sheds
a lot?" is all a LongMemEval memory holds of the user's cat; discounting every question
cost LongMemEval dev recall@10 95.3 -> 85.5 (docs/benchmarks.md, "The agent loop").

Unless the query is about what was asked ("What did I ask you about Lisbon?",
:func:`about_asking`, the lexicon's :data:`~..text.lexicon.ASKING_WORDS`): then what a
turn asked is what the query wants, and no score changes.

The change (0 or negative) is the ``asked`` score component.

>>> from synapse_integrations.core.graph.graph import Compiled
>>> v = Compiled.from_arrays(["s", "q"], np.eye(2), src=[], dst=[], weight=[],
...     is_episode=[True] * 2, attrs={"speaker": ["Ann", "Ann"], "seq": [1, 2],
...     "metadata": [{}, {"asks_about": "s"}],
...     "text": ["Ann: My sister lives in Lisbon.", "Ann: Where does my sister live?"]})
>>> score, change = discount_asked(v, np.arange(2), np.array([0.6, 0.8]), 0.25)
>>> score.round(2).tolist(), change.round(2).tolist()
([0.6, 0.2], [0.0, -0.6])
>>> about_asking("What did I ask you about Lisbon?"), about_asking("Where does Ana live?")
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..graph.roles import is_role, role_turns
from ..text.documents import without_speaker
from ..text.lexicon import ASKING_WORDS, EXTRACTOR_STOPWORDS, FIRST_PERSON, NAME_TITLES
from ..text.subjects import attribute_terms
from ..text.tokens import stem, terms, tokenize
from .base import Candidates, Signal, WriteContext
from .replies import replies_to

__all__ = ["ASKED_COSINE", "Asks", "about_asking", "asked_share", "asked_shares",
           "asked_terms", "discloses", "discount_asked", "mark", "told_terms"]

# a sentence ends at ".", "!" or "?" and a space, but not after an honorific or an initial
# ("Would Caroline have Dr. Seuss books?", "...books by C. S. Lewis?" each ask once)
_SENTENCE_END = re.compile(r"(?<=[.!?])" + "".join(rf"(?<!\b{t}\.)" for t in NAME_TITLES)
                           + r"(?<!\b[A-Z]\.)\s+")

#: Least cosine between a question and a stored statement for memory to hold its answer.
#: MiniLM, documents with their speaker: LoCoMo dev questions, asked as their evidence
#: arrived, reach a statement stored before them at 0.49 / 0.61 (10th percentile / median);
#: LongMemEval's user questions at 0.38 (median; 40 haystacks), 5 of their 6
#: question-shaped evidence turns below 0.5. At 0.6 an agent's stored questions kept 4.5 of
#: the 10 first places (conv-26), at 0.5 1.9.
ASKED_COSINE = 0.5
#: A turn asks (and is marked) when at least this share of it is questions.
ASKS_MOSTLY = 0.5


def asked_share(text: str, speaker: str | None = None) -> float:
    """The share of ``text``'s characters (its speaker's ``"Name: "`` left out) in
    sentences that end in a question mark (closing quotes and brackets aside).

    >>> asked_share("Seen any good movies lately?"), asked_share("I went skiing.")
    (1.0, 0.0)
    >>> round(asked_share("Ann: Wow, that looks great! Seen any good movies?", "Ann"), 1)
    0.5
    >>> asked_share("Would Tim enjoy books by C. S. Lewis or Dr. Seuss?")
    1.0
    """
    text = without_speaker(speaker, text)
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    total = sum(len(s) for s in sentences)
    if total == 0:
        return 0.0
    asked = sum(len(s) for s in sentences if s.rstrip("\"')]}»”’ ").endswith("?"))
    return asked / total


def asked_terms(text: str, speaker: str | None = None) -> frozenset[str]:
    """The lexical terms (stemmed) of what ``text`` asks about: its attribute terms (its
    speaker's name, the frame words and dates left out:
    :func:`~..text.subjects.attribute_terms`) less the extractor's function words
    ("anything", "really").

    >>> sorted(asked_terms("Ann: What kind of dogs does Sam have now?", "Ann"))
    ['dog', 'sam']
    >>> sorted(asked_terms("Anything fun lately?")), sorted(asked_terms("How about you?"))
    (['fun'], [])
    """
    text = without_speaker(speaker, text)
    return frozenset(stem(t) for t in attribute_terms(text, [speaker] if speaker else [])
                     if t not in EXTRACTOR_STOPWORDS)


def discloses(text: str, speaker: str | None = None) -> bool:
    """Whether ``text`` (its speaker's ``"Name: "`` left out) is in the first person: a
    question about its asker's own life ("...my living room dust-free, with a cat that
    sheds a lot?") tells memory something; one about others or the world ("When did
    Melanie paint a sunrise?") tells it nothing.

    >>> discloses("Any tips for my cat that sheds a lot?"), discloses("When did Ann paint?")
    (True, False)
    """
    return FIRST_PERSON.search(without_speaker(speaker, text)) is not None


def told_terms(text: str, speaker: str | None = None) -> set[str]:
    """The lexical terms of a statement (:func:`~..text.tokens.terms`, its speaker's
    ``"Name: "`` left out): what it tells memory the words of.

    >>> sorted(told_terms("Ann: My dogs love the beach.", "Ann"))
    ['beach', 'dog', 'love']
    """
    return set(terms(without_speaker(speaker, text)))


def mark(rows: Sequence[dict[str, Any]], embs: np.ndarray, state: Any) -> int:
    """Mark the rows that mostly ask (:data:`ASKS_MOSTLY`; not the assistant's) whose
    answer memory already holds: the nearest turn stored before it (or earlier in
    ``rows``) that mostly tells is at a cosine of at least :data:`ASKED_COSINE`, or those
    turns hold every one of its :func:`asked_terms` (one at least), or the row tells
    nothing of its asker (not :func:`discloses`). That nearest turn
    becomes its ``metadata["asks_about"]``. ``embs`` are the rows' unit embeddings.
    Returns how many were marked; an ``asks_about`` already in the metadata is kept."""
    asking = [k for k, row in enumerate(rows)
              if "?" in str(row.get("text") or "") and "asks_about" not in row["metadata"]
              and not is_role(row, "assistant")
              and asked_share(str(row["text"]), row.get("speaker")) >= ASKS_MOSTLY]
    if not asking:
        return 0
    # the stored statements, every one (the nearest few by cosine are mostly other
    # questions: in an agent's memory, questions resemble questions)
    view = state.compiled()
    tells = np.flatnonzero(view.per_node("asks.tells", _telling))
    told = _told_words(view)
    # one product over the whole matrix (stored column by column: no copy), then the rows
    sims = np.asarray(view.embeddings @ np.asarray(embs[asking], dtype=np.float32).T,
                      dtype=np.float64).reshape(view.n, len(asking))[tells]
    batch_told: set[str] = set()  # the words of the batch's statements before the row
    marked, done = 0, 0
    for col, k in enumerate(asking):
        for j in range(done, k):
            if _tells(rows[j]):
                batch_told |= told_terms(str(rows[j].get("text") or ""), rows[j].get("speaker"))
        done = k
        row = rows[k]
        best, best_cos = None, -np.inf
        if tells.size:
            at = int(np.argmax(sims[:, col]))
            best, best_cos = view.ids[tells[at]], float(sims[at, col])
        for j in range(k):  # the batch's earlier rows are not stored yet
            cos = float(np.dot(embs[j], embs[k]))
            if cos > best_cos and _tells(rows[j]):
                best, best_cos = rows[j]["id"], cos
        asked = asked_terms(str(row["text"]), row.get("speaker"))
        if best is not None and (best_cos >= ASKED_COSINE or not discloses(
                str(row["text"]), row.get("speaker")) or (
                asked and all(t in told or t in batch_told for t in asked))):
            row["metadata"] = {**row["metadata"], "asks_about": best}
            marked += 1
    return marked


def _told_words(view: Any) -> set[str]:
    """The :func:`told_terms` of every stored turn that mostly tells. Grown in place as
    the view extends (a write costs its own turns, not the memory's), so a view it was
    taken over from sees the words of later turns too: only :func:`mark` reads it, on
    the newest view. Built again after nodes leave."""
    return view.derived("asks.told", lambda v: _grow_told(set(), v, 0), _grow_told)


def _grow_told(told: set[str], view: Any, start: int) -> set[str]:
    texts, speakers = view.node_values("text"), view.node_values("speaker")
    for i in np.flatnonzero(view.per_node("asks.tells", _telling)[start:]) + start:
        told |= told_terms(texts[i] or "", speakers[i])
    return told


def _tells(turn: Mapping[str, Any]) -> bool:
    """A turn that mostly tells (not the assistant's: it answers about the world)."""
    return not is_role(turn, "assistant") and \
        asked_share(str(turn.get("text") or ""), turn.get("speaker")) < ASKS_MOSTLY


def _telling(view: Any, start: int = 0) -> np.ndarray:
    """Which nodes from ``start`` on are turns that mostly tell (:func:`_tells`)."""
    return view.is_episode[start:] & (asked_shares(view)[start:] < ASKS_MOSTLY) \
        & ~role_turns(view, "assistant", start)


def _held(view: Any, start: int = 0) -> np.ndarray:
    """Whether memory held each node's answer when it was stored (``asks_about``), from
    ``start`` on."""
    return np.fromiter((bool(m) and isinstance(m, Mapping) and "asks_about" in m
                        for m in view.node_values("metadata")[start:]), dtype=bool,
                       count=view.n - start)


def _shares(view: Any, start: int = 0) -> np.ndarray:
    """Each node's :func:`asked_share` from ``start`` on (0 without a ``?``: none asked)."""
    texts, speakers = view.node_values("text")[start:], view.node_values("speaker")[start:]
    return np.fromiter((asked_share(t, s) if t and "?" in t else 0.0
                        for t, s in zip(texts, speakers)), dtype=np.float64,
                       count=view.n - start)


def asked_shares(view: Any) -> np.ndarray:
    """Every node's :func:`asked_share` (concepts: 0), kept per node of the view."""
    return view.per_node("asks.shares", _shares)


def _answered(view: Any) -> np.ndarray:
    """Whether memory holds each node's answer: the next turn answers it, or it was marked
    (:func:`mark`)."""
    out = view.per_node("asks.held", _held).copy()
    replied = replies_to(view)
    out[replied[replied >= 0]] = True
    return out


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
    share = np.where(view.derived("asks.answered", _answered)[cand], asked_shares(view)[cand],
                     0.0)
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

    def write(self, rows: Sequence[dict[str, Any]], embs: np.ndarray, ctx: WriteContext) -> None:
        mark(rows, embs, ctx.state)

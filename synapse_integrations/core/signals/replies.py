"""Conversational context: what a short turn means depends on the turns it answers.

"She moved to Chicago." or "I'm a teacher." says little on its own; the question it
answers ("Which city does Rachel live in?", "What do you do for work?") holds the words a
later question repeats. A turn *replies to* the turn stored right before it (ingestion
order) when that turn is by another speaker, asks something (holds a ``?``) and came at
most :data:`REPLY_WINDOW` seconds earlier (event time; always when either time is
unknown). A reply is a candidate whenever its question is (:func:`with_replies`), and
scores the better of its own score and ``weight`` times its question's: one hop from what
the question found, paying what a hop pays (the spreading factor, as the entity-feedback
pass does). Replies by the assistant are left alone: an assistant answers *about the
world*, and lifting its long answers above the user's own statements cost LongMemEval 2.8
points of recall@5 (docs/benchmarks.md, "Conversational context").

A short question often *follows up* what its asker just heard: "Last week we took the
kids to the military memorial." / "How did they react?" / "They were awestruck." The
answer continues its own speaker's statement two turns back, in words neither the
question nor a later question about the memorial repeats. So a reply also inherits from
the turn its question followed (:func:`follow_ups`: the turn right before the question,
by the reply's speaker, within the same window) at ``follow_up_weight``: two hops, the
spreading factor squared by default. Only a question of at most
:data:`FOLLOW_UP_CHARS` characters follows up: a long turn that holds a ``?`` is an answer
of its own (an assistant's reply that ends in an offer), and what comes after it answers
that, not the turn before it (LongMemEval, docs/benchmarks.md, "Follow-up questions").

Once a question has been answered, the answer is the memory: the reply inherits the
question's rank as found, and the question then keeps only part of its score, as every
turn that asks does (:mod:`.asks`, which runs after this signal). The lift (>= 0) is
reported as the ``reply`` score component, so an item's terms still add up to its score.
(What a question names, a speaker or a date, is :mod:`.focus`.)

>>> import numpy as np
>>> from synapse_integrations.core.graph.graph import Compiled
>>> v = Compiled.from_arrays(["q", "a", "b"], np.eye(3), src=[], dst=[], weight=[],
...     is_episode=[True] * 3, attrs={"seq": [1, 2, 3], "ts": [0.0, 5.0, 9.0],
...     "speaker": ["Ann", "Bo", "Ann"], "metadata": [{}] * 3,
...     "text": ["Ann: Where do you work?", "Bo: At the bakery.", "Ann: Cool."]})
>>> replies_to(v).tolist(), follow_ups(v).tolist()
([-1, 0, -1], [-1, -1, -1])
>>> score, lift = lift_replies(v, np.array([0, 1]), np.array([0.9, 0.2]), 0.8)
>>> score.round(2).tolist(), lift.round(2).tolist()
([0.9, 0.72], [0.0, 0.52])
>>> v = Compiled.from_arrays(["s", "q", "a"], np.eye(3), src=[], dst=[], weight=[],
...     is_episode=[True] * 3, attrs={"seq": [1, 2, 3], "ts": [0.0, 5.0, 9.0],
...     "speaker": ["Bo", "Ann", "Bo"], "metadata": [{}] * 3,
...     "text": ["Bo: We went to the memorial.", "Ann: How did the kids react?",
...              "Bo: Awestruck."]})
>>> follow_ups(v).tolist()
[-1, -1, 0]
>>> lift_replies(v, np.arange(3), np.array([0.9, 0.1, 0.2]), 0.8, 0.64)[0].round(3).tolist()
[0.9, 0.1, 0.576]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph.roles import role_turns
from ..kernels import scoring
from .base import Candidates, Signal

__all__ = ["FOLLOW_UP_CHARS", "REPLY_WINDOW", "follow_ups", "lift_replies", "replies_to",
           "with_replies"]

#: Longest pause (event-time seconds) between a question and the turn that answers it,
#: and between a statement and the question that follows it up.
REPLY_WINDOW = 600.0

#: Longest question turn (characters) read as a follow-up of the turn before it: a line or
#: two of chat. LoCoMo's turns that hold a ``?`` run to 282 characters at the 95th
#: percentile (the speaker's name included), LongMemEval's assistant turns that do from 393
#: at the 5th (median 2,000).
FOLLOW_UP_CHARS = 300


def _asks(view: Any, start: int = 0) -> np.ndarray:
    """Whether each node from ``start`` on holds a ``?``."""
    return np.fromiter(("?" in (t or "") for t in view.node_values("text")[start:]), dtype=bool,
                       count=view.n - start)


def _short(view: Any, start: int = 0) -> np.ndarray:
    """Whether each node's text from ``start`` on is short enough to follow up a statement."""
    return np.fromiter((len(t or "") <= FOLLOW_UP_CHARS for t in view.node_values("text")[start:]),
                       dtype=bool, count=view.n - start)


def _seq(view: Any, start: int = 0) -> np.ndarray:
    """Each node's creation number from ``start`` on (0 where it has none)."""
    return np.fromiter((s or 0 for s in view.node_values("seq", 0)[start:]), dtype=np.int64,
                       count=view.n - start)


def _pairs(view: Any, episodes: np.ndarray, out: np.ndarray, start: int = 0) -> np.ndarray:
    """Set ``out``'s rows (module docstring: the question a turn replies to, column 0, and
    the statement that question followed up, column 1) for the turns of ``episodes``
    (compiled indices in ingestion order) from its ``start + 1``-th on; the ones before
    are read as what a question answered there followed up. What each turn is on its own
    (asks, is short, is the assistant's) is kept per node (:meth:`Compiled.per_node`), so
    a view without some turns pairs the rest again without reading their texts."""
    if episodes.size < 2:
        return out
    speakers = view.speakers()[episodes]
    q, a = episodes[:-1], episodes[1:]
    other = speakers[1:] != speakers[:-1]
    gap = np.diff(view.times()[episodes])
    with np.errstate(invalid="ignore"):
        timely = np.isnan(gap) | ((gap >= 0) & (gap <= REPLY_WINDOW))
    ok = view.per_node("conversation.asks", _asks)[q] & timely & other \
        & ~view.per_node("conversation.assistant",
                         lambda v, start: role_turns(v, "assistant", start))[a]
    ok[:start] = False
    j = np.flatnonzero(ok)
    out[a[j], 0] = q[j]
    # the question followed up the turn before it, when that is the reply's speaker's, in
    # time, and the question is short
    before = np.zeros(q.size, dtype=bool)  # turn j - 1 is by the speaker of turn j + 1
    before[1:] = (speakers[2:] == speakers[:-2]) & timely[:-1]
    f = j[before[j] & view.per_node("conversation.short", _short)[q[j]]]
    out[a[f], 1] = episodes[f - 1]
    return out


def _in_order(view: Any, episodes: np.ndarray) -> np.ndarray:
    return episodes[np.argsort(view.per_node("conversation.seq", _seq)[episodes], kind="stable")]


def _context(view: Any) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_pairs` over every turn, and the last two turns in ingestion order (what
    :func:`_grow_context` reads the turns stored after them with)."""
    episodes = _in_order(view, np.flatnonzero(view.is_episode))
    return _pairs(view, episodes, np.full((view.n, 2), -1, dtype=np.int64)), episodes[-2:]


def _grow_context(old: tuple[np.ndarray, np.ndarray], view: Any, m: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_context` of ``view`` from ``old``, its first ``m`` nodes': only the turns
    stored after them are paired (read with the two before them), when they come after
    them in ingestion order too."""
    rows, tail = old
    new = _in_order(view, m + np.flatnonzero(view.is_episode[m:]))
    seq = view.per_node("conversation.seq", _seq)
    if tail.size and new.size and seq[new[0]] <= seq[tail[-1]]:
        return _context(view)  # stored out of order: pair them all again
    episodes = np.concatenate([tail, new])
    out = np.concatenate([rows, np.full((view.n - m, 2), -1, dtype=np.int64)])
    return _pairs(view, episodes, out, max(tail.size - 1, 0)), episodes[-2:]


def _replies(view: Any) -> np.ndarray:
    """Per node, the compiled index of the question it replies to (column 0) and of the
    statement that question followed up (column 1); -1 for none. Derived once per view
    and grown with it."""
    return view.derived("replies", _context, _grow_context)[0]


def replies_to(view: Any) -> np.ndarray:
    """The question each node of the view replies to (compiled index, -1 for none);
    derived once per compiled view."""
    return _replies(view)[:, 0]


def follow_ups(view: Any) -> np.ndarray:
    """The statement each reply's question followed up (compiled index, -1 for none;
    see the module docstring); derived once per compiled view."""
    return _replies(view)[:, 1]


def _answers(view: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The view's replies (positions, ascending), the question each replies to and the
    statement that question followed up (-1: none): what :func:`with_replies` reads for
    every query, once per view."""
    context = _replies(view)
    answers = np.flatnonzero(context[:, 0] >= 0)
    return answers, context[answers, 0], context[answers, 1]


def with_replies(view: Any, cand: np.ndarray, questions: bool = True,
                 follow_up: bool = False) -> np.ndarray:
    """``cand`` (sorted indices) plus the replies to the questions among them (with
    ``questions``) and the replies whose question followed up a turn among them (with
    ``follow_up``)."""
    if not (questions or follow_up) or cand.size == 0:
        return cand
    answers, asked, said = view.derived("conversation.answers", _answers)
    if answers.size == 0:
        return cand
    member = np.zeros(view.n, dtype=bool)
    member[cand] = True
    found = member[asked] if questions else np.zeros(answers.size, dtype=bool)
    if follow_up:
        found |= (said >= 0) & member[np.maximum(said, 0)]
    extra = answers[found & ~member[answers]]
    return cand if extra.size == 0 else np.union1d(cand, extra)


def lift_replies(view: Any, cand: np.ndarray, score: np.ndarray, weight: float,
                 follow_up_weight: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Each reply among ``cand`` scores the best of its score, ``weight`` times its
    question's and ``follow_up_weight`` times the statement its question followed up
    (each when a candidate too). Returns the scores and the lift per candidate (0, or
    positive)."""
    score = np.asarray(score, dtype=np.float64)
    lift = np.zeros(score.shape)
    if (weight <= 0 and follow_up_weight <= 0) or cand.size == 0:
        return score, lift
    context = _replies(view)[cand]
    replies = np.flatnonzero(context[:, 0] >= 0)
    if replies.size == 0:
        return score, lift
    position = np.full(view.n, -1, dtype=np.int64)
    position[cand] = np.arange(cand.size)
    best = score[replies]
    for column, discount in ((0, weight), (1, follow_up_weight)):
        if discount <= 0:
            continue
        source = context[replies, column]
        pos = np.where(source >= 0, position[np.maximum(source, 0)], -1)
        hop = np.full(replies.size, -np.inf)
        hop[pos >= 0] = score[pos[pos >= 0]]
        # one hop from the question, two from the statement: a hop pays what feedback pays
        best, _ = scoring.hop_best(best, hop, discount)
    lift[replies] = best - score[replies]
    return score + lift, lift


class Replies(Signal):
    """The conversation (``reply``): a reply scores with the question it answers and the
    statement that question followed up (:func:`lift_replies`). The lift is lent by the
    question, not the reply's own evidence."""

    name = "reply"
    section = "signals.replies"
    lent = True

    def widen(self, view: Any, cfg: Any, cand: np.ndarray) -> np.ndarray:
        return with_replies(view, cand, cfg.reply_weight > 0, cfg.follow_up_weight > 0)

    def adjust(self, ctx: Candidates, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cfg = ctx.cfg
        return lift_replies(ctx.view, ctx.cand, score, cfg.reply_weight, cfg.follow_up_weight)

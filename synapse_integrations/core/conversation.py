"""Conversational context: what a short turn means depends on the turn it answers.

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

The lift is reported as the ``reply`` score component (>= 0), so an item's terms still add
up to its score. (What a question names, a speaker or a date, is :mod:`.focus`.)

>>> import numpy as np
>>> from synapse_integrations.core.graph import Compiled
>>> v = Compiled.from_arrays(["q", "a", "b"], np.eye(3), src=[], dst=[], weight=[],
...     is_episode=[True] * 3, attrs={"seq": [1, 2, 3], "ts": [0.0, 5.0, 9.0],
...     "speaker": ["Ann", "Bo", "Ann"], "metadata": [{}] * 3,
...     "text": ["Ann: Where do you work?", "Bo: At the bakery.", "Ann: Cool."]})
>>> replies_to(v).tolist()
[-1, 0, -1]
>>> score, lift = lift_replies(v, np.array([0, 1]), np.array([0.9, 0.2]), 0.8)
>>> score.round(2).tolist(), lift.round(2).tolist()
([0.9, 0.72], [0.0, 0.52])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import scoring
from .echoes import is_role

__all__ = ["REPLY_WINDOW", "lift_replies", "replies_to", "with_replies"]

#: Longest pause (event-time seconds) between a question and the turn that answers it.
REPLY_WINDOW = 600.0


def _replies(view: Any) -> np.ndarray:
    """Compiled index of the question each node replies to (-1: none); see the module
    docstring. Vectorised but for the few pairs left to check for the assistant's role."""
    out = np.full(view.n, -1, dtype=np.int64)
    episodes = np.flatnonzero(view.is_episode)
    if episodes.size < 2:
        return out
    seq_all = view.node_values("seq", 0)
    episodes = episodes[np.argsort([seq_all[i] or 0 for i in episodes.tolist()], kind="stable")]
    order = episodes.tolist()
    speakers_all, texts = view.node_values("speaker"), view.node_values("text")
    speakers = [speakers_all[i] for i in order]
    asks = np.fromiter(("?" in (texts[i] or "") for i in order[:-1]), dtype=bool,
                       count=len(order) - 1)
    other = np.fromiter((x != y for x, y in zip(speakers, speakers[1:])), dtype=bool,
                        count=len(order) - 1)
    gap = np.diff(view.times()[episodes])
    with np.errstate(invalid="ignore"):
        timely = np.isnan(gap) | ((gap >= 0) & (gap <= REPLY_WINDOW))
    q, a = episodes[:-1], episodes[1:]
    ok = np.flatnonzero(asks & timely & other)
    metas = view.node_values("metadata")
    for j in ok.tolist():
        if not is_role({"speaker": speakers_all[a[j]], "metadata": metas[a[j]] or {}}, "assistant"):
            out[a[j]] = q[j]
    return out


def replies_to(view: Any) -> np.ndarray:
    """The question each node of the view replies to (compiled index, -1 for none);
    derived once per compiled view."""
    return view.derived("replies", _replies)


def with_replies(view: Any, cand: np.ndarray) -> np.ndarray:
    """``cand`` (sorted indices) plus the replies to the questions among them."""
    asked = replies_to(view)
    answers = np.flatnonzero(asked >= 0)
    if answers.size == 0 or cand.size == 0:
        return cand
    member = np.zeros(view.n, dtype=bool)
    member[cand] = True
    extra = answers[member[asked[answers]] & ~member[answers]]
    return cand if extra.size == 0 else np.union1d(cand, extra)


def lift_replies(view: Any, cand: np.ndarray, score: np.ndarray, weight: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Each reply among ``cand`` scores the better of its score and ``weight`` times its
    question's (when the question is a candidate too). Returns the scores and the lift per
    candidate (0, or positive)."""
    score = np.asarray(score, dtype=np.float64)
    lift = np.zeros(score.shape)
    if weight <= 0 or cand.size == 0:
        return score, lift
    asked = replies_to(view)[cand]
    replies = np.flatnonzero(asked >= 0)
    if replies.size == 0:
        return score, lift
    position = np.full(view.n, -1, dtype=np.int64)
    position[cand] = np.arange(cand.size)
    pos = position[asked[replies]]
    ok = pos >= 0
    replies, pos = replies[ok], pos[ok]
    best, _ = scoring.hop_best(score[replies], score[pos], weight)  # one hop, as feedback pays
    lift[replies] = best - score[replies]
    return score + lift, lift

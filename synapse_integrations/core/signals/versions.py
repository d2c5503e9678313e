"""Versions ranked together (the read half of reconsolidation: mnemos' MutableRAG,
SYNAPSE's knowledge updates).

A version and its replacement that are both candidates rank together at the better of
their two scores, the newest first (its history right below it): :func:`rank_versions`.
A superseded version whose replacement was not reached keeps ``superseded_weight`` of its
score; for a question about the past (:func:`query_tense`: "before", "previous", "used
to"...) all of it. Versions no write linked are found at question time
(:func:`rank_recent`, ``SynapseConfig.version_recency``): the newest user turn that holds
most of the question's words is placed above older ones holding no other. The write half
(which turn supersedes which) is :mod:`~synapse_integrations.core.lifecycle.reconsolidation`.

>>> query_tense("What was my previous goal?"), query_tense("Where do I live now?")
('past', 'current')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ..graph.roles import is_role, speaker_names
from ..text.lexicon import CURRENT_CUES, PAST_CUES
from ..text.subjects import attribute_terms
from ..text.tokens import tokenize
from .base import Candidates, Signal

__all__ = ["RECENT_COVERAGE", "RECENT_OLDER_SHARE", "RECENT_WINDOW", "SUCCESSOR_SHARE",
           "VERSION_MARGIN", "query_tense", "rank_recent", "rank_versions", "settle_versions"]


#: How far apart (in the score) a version is placed from the one it is ranked with.
VERSION_MARGIN = 1e-6


def query_tense(query: str) -> Literal["past", "current", "neutral"]:
    """Whether a question asks about the past (older versions first), the present, or
    neither (treated as the present: the newest version first)."""
    if PAST_CUES.search(query):
        return "past"
    return "current" if CURRENT_CUES.search(query) else "neutral"


def _root(word: str) -> str:
    """A cruder stem for matching a question's words ("move", "moved", "moving": "mov")."""
    word = word.split("'")[0]
    for end in ("ing", "ed", "es", "s", "e"):
        if word.endswith(end) and len(word) - len(end) >= 3:
            return word[:-len(end)]
    return word


def rank_versions(view: Any, cand: np.ndarray, score: np.ndarray, *, weight: float,
                  tense: str = "neutral", placed: list[tuple[int, int]] | None = None,
                  as_of: float | None = None) -> np.ndarray:
    """Scores with versions ranked together (see the module docstring). ``view`` is the
    compiled graph (``node_values("superseded_by")``), ``cand`` the candidates' indices;
    a replacement made after ``as_of`` (its ``superseded_at``) is not one yet.
    ``placed``, when given, receives each pair ranked together as ``(newer, older)``
    positions in ``cand`` (:func:`settle_versions` keeps them so after a later merge).

    >>> from synapse_integrations.core.graph.graph import Compiled
    >>> v = Compiled.from_arrays(["old", "new", "x"], np.eye(3), src=[], dst=[], weight=[],
    ...     is_episode=[True] * 3, attrs={"superseded_by": ["new", None, None]})
    >>> rank_versions(v, np.arange(3), np.array([0.9, 0.4, 0.5]), weight=0.5).round(3)
    array([0.9, 0.9, 0.5])
    >>> rank_versions(v, np.array([0, 2]), np.array([0.9, 0.5]), weight=0.5)
    array([0.45, 0.5 ])
    """
    score = np.asarray(score, dtype=np.float64).copy()
    newer = view.node_values("superseded_by")
    when = view.node_values("superseded_at") if as_of is not None else None
    pairs = []
    pos = {int(c): j for j, c in enumerate(cand)}
    for j, c in enumerate(cand.tolist()):
        nid = newer[c]
        if nid is None or (when is not None and when[c] is not None and when[c] > as_of):
            continue
        k = pos.get(view.index.get(nid, -1))
        if k is None:
            if tense != "past":
                score[j] *= weight
        else:
            pairs.append((j, k))
    if placed is not None:
        placed.extend((k, j) for j, k in pairs)
    for _ in range(len(pairs)):  # chains of versions settle in at most len(pairs) sweeps
        changed = False
        for j, k in pairs:  # j: the older version, k: its replacement
            first, second = k, j  # the newest first, the history right below it
            best = max(score[j], score[k])
            want = (best, best - VERSION_MARGIN)
            if (score[first], score[second]) != want:
                score[first], score[second] = want
                changed = True
        if not changed:
            break
    return score


#: The newest user turn holding this share of a question's IDF mass is lifted by
#: :func:`rank_recent` ...
RECENT_COVERAGE = 0.6


#: ... above the older user turns holding at least this share and no other of its words ...
RECENT_OLDER_SHARE = 0.3


#: ... among this many best candidates.
RECENT_WINDOW = 15


#: A later turn of the same speaker restating this share of an older answer's own words
#: (their IDF mass) is its successor, for a question about the present.
SUCCESSOR_SHARE = 0.2


def rank_recent(view: Any, cand: np.ndarray, score: np.ndarray, idf: Callable[[str], float],
                query: str, *, tense: str = "neutral", names: Sequence[str] = (),
                coverage: float = RECENT_COVERAGE,
                older_share: float = RECENT_OLDER_SHARE,
                window: int = RECENT_WINDOW,
                successor_share: float = SUCCESSOR_SHARE,
                placed: list[tuple[int, int]] | None = None,
                as_of: float | None = None) -> np.ndarray:
    """Versions found at question time (the newest above older ones, whether or not a
    write linked them). Among the ``window`` best candidates, the user turns (not the
    assistant's) with an event time are compared by the question's words they hold (by a
    crude stem, each weighted by ``idf``, the mass being that of the question's words some
    of them hold). The newest turn holding at least ``coverage`` of the mass is placed
    right above the best older turn that holds at least ``older_share`` of it and no
    question word the newest lacks: what the older turn says about the question, the newer
    says too, later. A question about the past (:func:`query_tense`) is left alone. The
    question's words are its attribute terms
    (:func:`~synapse_integrations.core.text.subjects.attribute_terms`), without the ``names`` of the
    memory's speakers (every turn of theirs carries one in its speaker prefix) and frame
    words ("now", "name"): they say nothing of what changed.

    A question about the present ("now", "currently", "these days": ``tense="current"``)
    also lifts successors that do not repeat its words: each older turn holding at least
    ``older_share`` of the mass (an answer by words) gets its newest successor, a later
    turn of the same speaker restating at least ``successor_share`` of the IDF mass of the
    answer's own words (the question's words and the speakers' names left out), placed
    right above it.

    ``placed``, when given, receives each newer turn and the older one it was placed above
    as ``(newer, older)`` positions in ``cand`` (:func:`settle_versions`). With ``as_of``
    only the turns said by then are compared.

    >>> from synapse_integrations.core.graph.graph import Compiled
    >>> def three_turns(*texts):  # the user's turns at times 1, 2, 3
    ...     return Compiled.from_arrays(["a", "b", "c"], np.eye(3), src=[], dst=[], weight=[],
    ...         is_episode=[True] * 3, attrs={"text": [f"user: {t}" for t in texts],
    ...         "speaker": ["user"] * 3, "ts": [1.0, 2.0, 3.0], "metadata": [{}] * 3})
    >>> v = three_turns("I earned $350 at the farmers market", "the weather was nice",
    ...                 "I earned $420 at the farmers market on my latest visit")
    >>> q = "How much did I earn at the farmers market?"
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0, q).round(3)
    array([0.9, 0.5, 0.9])
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0, q, tense="past")
    array([0.9, 0.5, 0.4])
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0,
    ...             "What does the user do now?", names=["user"])  # only a name: nothing moves
    array([0.9, 0.5, 0.4])
    >>> v = three_turns("My gym is IronWorks, near home", "the weather was nice",
    ...                 "I cancelled IronWorks and joined Pulse Fitness")
    >>> q = "Which gym do I go to now?"
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0, q,
    ...             tense="current", names=["user"]).round(3)  # "IronWorks": its successor
    array([0.9, 0.5, 0.9])
    >>> rank_recent(v, np.arange(3), np.array([0.9, 0.5, 0.4]), lambda t: 1.0, q,
    ...             names=["user"])  # no word of the present: the words alone decide
    array([0.9, 0.5, 0.4])
    """
    score = np.asarray(score, dtype=np.float64).copy()
    if tense == "past" or cand.size < 2:
        return score
    asked: dict[str, str] = {}
    for t in attribute_terms(query, names):
        asked.setdefault(_root(t), t)
    texts, speakers = view.node_values("text"), view.node_values("speaker")
    metas, ts = view.node_values("metadata"), view.node_values("ts")
    top = [int(j) for j in np.argsort(-score, kind="stable")[:window]]
    users = [j for j in top if view.is_episode[cand[j]] and ts[cand[j]] is not None
             and (as_of is None or ts[cand[j]] <= as_of)
             and not is_role({"speaker": speakers[cand[j]], "metadata": metas[cand[j]] or {}},
                             "assistant")]
    rooted = view.memo("recent.rooted")  # node -> its words, kept as the view grows
    for j in users:
        if int(cand[j]) not in rooted:
            rooted[int(cand[j])] = _rooted(texts[cand[j]])
    words = {j: rooted[int(cand[j])] for j in users}  # root -> the first word with it
    held = {j: words[j].keys() & asked.keys() for j in users}
    weight = {r: idf(t) for r, t in asked.items() if any(r in h for h in held.values())}
    mass = sum(weight.values())
    if mass <= 0:
        return score
    share = {j: sum(weight[r] for r in held[j]) / mass for j in users}
    full = [j for j in users if share[j] >= coverage]
    if full:
        newest = max(full, key=lambda j: (ts[cand[j]], -j))
        older = [j for j in users if ts[cand[j]] < ts[cand[newest]]
                 and held[j] <= held[newest] and share[j] >= older_share]
        if older:
            best = max(older, key=lambda j: score[j])
            if score[newest] < score[best]:
                score[newest] = score[best] + VERSION_MARGIN
            if placed is not None:
                placed.append((newest, best))
    if tense == "current":  # "now", "currently", "these days": the answers' successors
        skip = set(asked) | {_root(t) for n in names for t in tokenize(n)}
        answers = [j for j in users if share[j] >= older_share]
        score = _lift_successors(view, cand, score, words, answers, skip, idf, successor_share,
                                 placed)
    return score


def settle_versions(score: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``score`` with each ``(newer, older)`` pair of ``pairs`` (positions in ``score``)
    in order: a newer version at or below its older one is placed right above it
    (``VERSION_MARGIN``). Returns the scores and what each gained. Rankings merged from
    two passes keep the versions each pass placed (:func:`rank_versions`,
    :func:`rank_recent`): the older turn's better score in the other pass must not take
    it back above the turn that replaced it.

    >>> s, lift = settle_versions(np.array([0.5, 0.7, 0.2]), np.array([[0, 1], [2, 0]]))
    >>> (s - np.array([0.7, 0.7, 0.7])).round(7).tolist(), (lift > 0).tolist()
    ([1e-06, 0.0, 2e-06], [True, False, True])
    >>> settle_versions(np.array([0.9, 0.4]), np.array([[0, 1]]))[1].tolist()  # in order
    [0.0, 0.0]
    """
    out = np.asarray(score, dtype=np.float64).copy()
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    for _ in range(len(pairs)):  # a chain settles in at most len(pairs) sweeps
        changed = False
        for new, old in pairs.tolist():
            if out[new] <= out[old]:
                out[new] = out[old] + VERSION_MARGIN
                changed = True
        if not changed:
            break
    return out, out - np.asarray(score, dtype=np.float64)


def _rooted(text: str | None) -> dict[str, str]:
    """A text's crude stems (:func:`_root`), each with the first word that has it."""
    out: dict[str, str] = {}
    for t in tokenize(text or ""):
        out.setdefault(_root(t), t)
    return out


def _lift_successors(view: Any, cand: np.ndarray, score: np.ndarray,
                     words: Mapping[int, Mapping[str, str]], answers: list[int], skip: set[str],
                     idf: Callable[[str], float], share_min: float,
                     placed: list[tuple[int, int]] | None = None) -> np.ndarray:
    """Each of the ``answers`` (best first) with its newest successor among the turns of
    ``words`` (candidate -> its :func:`_rooted` words) placed right above it: a later turn
    of the same speaker that restates at least ``share_min`` of the answer's own words
    (their IDF mass; the roots in ``skip`` left out). "I cancelled IronWorks and joined
    Pulse Fitness" restates "My gym is IronWorks" without the question's word "gym"."""
    speakers, ts = view.node_values("speaker"), view.node_values("ts")
    for a in sorted(answers, key=lambda j: -score[j]):
        own = {r: t for r, t in words[a].items() if r not in skip}
        mass = sum(idf(t) for t in own.values())
        if mass <= 0:
            continue
        later = [j for j in words if ts[cand[j]] > ts[cand[a]]
                 and speakers[cand[j]] == speakers[cand[a]]
                 and sum(idf(t) for r, t in own.items() if r in words[j]) / mass >= share_min]
        if later:
            newest = max(later, key=lambda j: (ts[cand[j]], -j))
            if score[newest] <= score[a]:
                score[newest] = score[a] + VERSION_MARGIN
            if placed is not None:
                placed.append((newest, a))
    return score


class Versions(Signal):
    """Version ranking (``superseded``): an older version placed below the turn that
    replaced it (:func:`rank_versions`), and with ``version_recency`` the newest of the
    versions found at question time above the older ones (:func:`rank_recent`). The pass
    keeps the ``versions`` it placed and left in order; merged passes keep each pass's
    (:func:`settle_versions`)."""

    name = "superseded"
    section = "signals.versions"
    stands_in = True
    carries = "versions"

    def adjust(self, ctx: Candidates, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        view, cand, cfg = ctx.view, ctx.cand, ctx.cfg
        tense = query_tense(ctx.asked)
        placed: list[tuple[int, int]] = []  # (newer, older) positions in cand
        out = rank_versions(view, cand, score, weight=cfg.superseded_weight, tense=tense,
                            placed=placed, as_of=ctx.as_of)
        if cfg.version_recency:  # versions found at question time: the newest above
            out = rank_recent(view, cand, out, ctx.state.bm25.idf, ctx.asked, tense=tense,
                              names=speaker_names(view), placed=placed, as_of=ctx.as_of)
        ctx.notes[self.name] = placed
        return out, out - score

    def settle(self, ctx: Candidates, score: np.ndarray) -> np.ndarray:
        """The version pairs still in order once the later signals had their say
        (compiled positions, one (newer, older) row each)."""
        cand = ctx.cand
        return np.array([(cand[n], cand[o]) for n, o in ctx.notes.get(self.name, ())
                         if score[n] > score[o]], dtype=np.int64).reshape(-1, 2)

    def merge(self, cand: np.ndarray, score: np.ndarray, kept: Sequence[Any]
              ) -> tuple[np.ndarray, np.ndarray | None, Any]:
        versions = np.concatenate([v for v in kept if v is not None]
                                  or [np.zeros((0, 2), dtype=np.int64)])
        score, lift = settle_versions(score, np.searchsorted(cand, versions))
        return score, lift, versions

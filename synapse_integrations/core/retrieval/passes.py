"""One retrieval pass, and the merge of the entity-feedback pass into the first.

:func:`run_pass`: triggers -> model -> hybrid score -> the ranking signals
(:mod:`synapse_integrations.core.signals`, applied in their registered order, each
adjustment kept by name) -> the order of the returnable candidates.
:func:`feedback_entities` picks the entities the feedback pass adds to the question, and
:func:`merge_feedback` merges the two passes into one ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...config import SynapseConfig
from ..graph.graph import NOT_ENTITY_TYPES, Compiled
from ..kernels import scoring
from ..models import Activation, Query, RetrievalModel
from ..signals import HOP, Candidates, Signal, focus, own_evidence, signals
from ..state.state import MemoryState
from ..text.tokens import tokenize
from .scope import Scope
from .triggers import anchor_scope, triggers

__all__ = ["Pass", "Spikes", "explain_feedback", "feedback_entities", "merge_feedback",
           "run_pass"]


@dataclass
class Pass:
    """One retrieval pass: candidates (indices into the compiled graph), their scores and
    the signals behind them. ``adjustments``: each ranking signal's adjustment per
    candidate by name, in the order they applied (after :func:`merge_feedback`, also
    :data:`~synapse_integrations.core.signals.HOP`); ``kept``: what the signals kept for
    the merge, by their ``carries`` name. Both read as attributes too (``run.reply``,
    ``run.versions``)."""

    cand: np.ndarray
    order: np.ndarray
    score: np.ndarray
    sim: np.ndarray
    activation: np.ndarray
    pr: np.ndarray
    lexical: np.ndarray | None
    distinct: np.ndarray | None
    adjustments: dict[str, np.ndarray]
    parents: np.ndarray | None
    dense_rank: dict[str, int]
    bm25_rank: dict[str, int]
    activated: set[str] | None  # nodes at activation >= dormancy_epsilon (None: no model ran)
    own_score: bool = False  # the model ranked by its own score (not the hybrid score)
    spikes: Spikes | None = None  # stimuli the model asks the engine to record
    # after entity feedback (merge_feedback): which pass scored each candidate (0: the
    # question's, 1: the feedback pass)
    source: np.ndarray | None = None
    kept: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if not name.startswith("__"):
            for part in ("adjustments", "kept"):
                if name in d.get(part, ()):
                    return d[part][name]
        raise AttributeError(f"'Pass' object has no attribute {name!r}")


@dataclass(frozen=True)
class Spikes:
    """Stimuli to record in the nodes' spike trains (SynapticRAG): ``values[i]`` for node
    ``ids[i]`` at ``time`` (epoch seconds)."""

    ids: tuple[str, ...]
    values: tuple[float, ...]
    time: float


def _widen(view: Compiled, cfg: SynapseConfig, cand: np.ndarray,
           active: Sequence[Signal]) -> np.ndarray:
    for s in active:  # the candidates a signal brings (the answers to what was found)
        cand = s.widen(view, cfg, cand)
    return cand


def run_pass(view: Compiled, state: MemoryState, cfg: SynapseConfig, model: RetrievalModel,
             text: str, qv: np.ndarray, sim_all: np.ndarray, k: int,
             scope: Scope | None = None, at: float | None = None,
             asked: tuple[str, np.ndarray] | None = None) -> Pass | None:
    """Triggers, model, score and signals for one query text asked at time ``at`` (None:
    no anchor at all). ``order`` ranks the returnable candidates only. ``asked`` is the
    question as the user asked it and its cosines, when ``text`` and ``sim_all`` widen it
    (entity feedback): the exact tokens that single a turn out, the question's tense and
    what it names are the question's own."""
    asked, asked_sim = (text, sim_all) if asked is None else asked
    scope = scope or Scope()
    active = signals()
    # the query's BM25 scores over the view, once for the trigger and the lexical term
    lex_all = state.bm25.scores_for(text, view.index, view.n) \
        if cfg.use_bm25 or cfg.uses_lexical_score else None
    dated = focus.date_scope(view, asked, at) if cfg.date_weight < 1.0 else None
    anchors = triggers(view, state, cfg, text, sim_all, anchor_scope(view, cfg, scope.anchors),
                       lex_all, dated)
    if anchors.indices.size == 0:
        return None
    parents = None
    activated = None
    own_score = None
    spikes = None
    if cfg.use_activation:
        act = model.activate(view, Query(text, qv, sim_all, anchors.indices, at), cfg)
        spikes = _spikes(view, act)
        act_all = act.activation
        parents = act.parents
        hit = np.flatnonzero(act_all > 0)
        activated = {view.ids[i] for i in hit[act_all[hit] >= cfg.dormancy_epsilon]}
        reached = hit if act.reached is None else np.asarray(act.reached, dtype=np.int64)
        cand = np.arange(view.n) if cfg.score_all_nodes else np.union1d(anchors.indices, reached)
        cand = _widen(view, cfg, cand, active)
        activation = act_all[cand]
        own_score = None if act.score is None else np.asarray(act.score, dtype=np.float64)[cand]
    else:
        cand = np.arange(view.n) if cfg.score_all_nodes else anchors.indices
        cand = _widen(view, cfg, cand, active)
        activation = np.zeros(cand.size)
    sim = sim_all[cand].astype(np.float64)
    pr = state.graph.pagerank_array(cand) if cfg.uses_pagerank else np.zeros(cand.size)
    lexical = distinct = None
    if cfg.uses_lexical_score:
        assert lex_all is not None
        best = float(lex_all.max()) if lex_all.size else 0.0
        lexical = lex_all[cand] / best if best > 0 else np.zeros(cand.size)
    if cfg.uses_distinct_score:  # rare tokens only one turn (in scope) contains
        turns = view.is_episode if scope.anchors is None else view.is_episode & scope.anchors
        share = state.bm25.exclusive_share(asked, view.index, view.n, turns)
        # the exact token singles a turn out only if the turn is about the question too
        # (its cosine within distinct_similarity_ratio of the best turn's): in a small
        # memory every word is rare, and "now" alone must not lift "Sending it now"
        best_sim = float(asked_sim[turns].max()) if turns.any() else 0.0
        share[asked_sim < cfg.distinct_similarity_ratio * best_sim] = 0.0
        distinct = scoring.singled_out(share)[cand]
    score = own_score if own_score is not None else scoring.hybrid_score(
        sim, activation, pr, **cfg.score_weights(), lexical=lexical, distinct=distinct)
    ctx = Candidates(view, state, cfg, cand, asked, at, scope.as_of)
    adjustments: dict[str, np.ndarray] = {}
    for s in active:  # each signal adjusts the score the ones before it left
        score, adjustments[s.name] = s.adjust(ctx, score)
    order = _top(score, cand, scope, k)
    kept = {s.carries: s.settle(ctx, score) for s in active if s.carries}
    return Pass(cand, order, score, sim, activation, pr, lexical, distinct, adjustments,
                parents, anchors.dense_rank, anchors.bm25_rank, activated,
                own_score is not None, spikes, kept=kept)


def _top(score: np.ndarray, cand: np.ndarray, scope: Scope, k: int) -> np.ndarray:
    """The best ``k`` returnable candidates, best first (positions in ``cand``)."""
    if scope.returnable is None:
        return scoring.top_k(score, min(k, cand.size))
    keep = np.flatnonzero(scope.returnable[cand])
    return keep[scoring.top_k(score[keep], min(k, keep.size))]


def _spikes(view: Compiled, act: Activation) -> Spikes | None:
    """The stimuli a model asked to record (nodes with a positive value), or None."""
    if act.spikes is None or act.spike_time is None:
        return None
    values = np.asarray(act.spikes, dtype=np.float64)
    hit = np.flatnonzero(values > 0)
    if hit.size == 0:
        return None
    return Spikes(tuple(view.ids[i] for i in hit), tuple(values[hit].tolist()),
                  float(act.spike_time))


def feedback_entities(state: MemoryState, view: Compiled, run: Pass, top_r: int,
                      query: str) -> dict[str, str]:
    """Named-entity concepts linked to the first pass's ``top_r`` episodes: not topics,
    not speakers (a speaker concept links to everything its speaker said), and not
    already named in the query. The episodes are ranked by their own evidence, without
    the lift a reply borrows from its question (a reply's words are not about the
    question; feeding them back drifted the second pass: docs/benchmarks.md, "Follow-up
    questions"). Returns ``{entity id: the episode it came from}`` in order of first
    appearance."""
    g = state.graph.g
    qwords = set(tokenize(query))
    found: dict[str, str] = {}
    own = own_evidence(run.score, run.adjustments, signals())[run.order]
    ranked = run.order[np.argsort(-own, kind="stable")]
    tops = [view.ids[run.cand[j]] for j in ranked
            if g.nodes[view.ids[run.cand[j]]]["kind"] == "episode"][:top_r]
    for ep in tops:
        speaker = str(g.nodes[ep].get("speaker") or "").lower()
        for n in g.successors(ep):
            d = g.nodes[n]
            if d["kind"] != "concept" or d.get("ctype") in NOT_ENTITY_TYPES:
                continue
            if (d.get("attributes") or {}).get("kind") == "speaker" or \
                    str(d["name"]).lower() == speaker:
                continue
            words = set(tokenize(d["name"]))
            if words and not words <= qwords:
                found.setdefault(n, ep)
    return found


def explain_feedback(state: MemoryState, view: Compiled, first: Pass, second: Pass,
                      found: Mapping[str, str]) -> None:
    """Anchors that only the expanded lexical trigger found were reached through an
    entity of a first-pass episode: record that path (episode -> entity -> anchor)."""
    if second.parents is None:
        return
    g = state.graph.g
    anchors = {**second.bm25_rank, **second.dense_rank}
    # an entity hangs off its episode only when that episode is an anchor of this pass
    # (parent -1), so the chains stay acyclic: anchor -> entity -> new anchor
    linked = [e for e, ep in found.items()
              if e in view.index and ep in anchors and second.parents[view.index[ep]] == -1]
    for e in linked:
        second.parents[view.index[e]] = view.index[found[e]]
    seen_before = set(first.bm25_rank) | set(first.dense_rank)
    for node_id in anchors:
        if node_id in seen_before or node_id in found:
            continue
        via = next((e for e in linked if g.has_edge(e, node_id)), None)
        if via is not None:
            second.parents[view.index[node_id]] = view.index[via]


def merge_feedback(first: Pass, second: Pass, scope: Scope, k: int, discount: float,
                   sources: Sequence[int] = ()) -> Pass:
    """The first pass and the entity-feedback pass as one ranking: each candidate keeps
    the better of its first-pass score and its second-pass score discounted for the hop
    (``discount`` times it: the spreading factor S, what activation pays per hop;
    :func:`~synapse_integrations.core.kernels.scoring.hop_best`). The feedback pass can add the
    memories its entities lead to, but never take a first-pass memory's place by the
    drift of a widened query; the episodes that supplied the entities (``sources``,
    compiled positions) keep their first-pass score: their own names in the widened
    query would lift them by their own words (in a small memory the second-best turn
    then took the first place). The versions each pass placed newer above older stay so
    (each signal's :meth:`~synapse_integrations.core.signals.Signal.merge`: for the
    versions, :func:`~synapse_integrations.core.signals.versions.settle_versions`; the
    lift shows in the ``superseded`` component). Each candidate's signals are those of the pass that
    scored it; the stimuli recorded (spike trains) are the question's own, the first
    pass's."""
    cand = np.union1d(first.cand, second.cand)
    at1, at2 = np.searchsorted(cand, first.cand), np.searchsorted(cand, second.cand)

    def spread(values: np.ndarray, at: np.ndarray, fill: float) -> np.ndarray:
        out = np.full(cand.size, fill, dtype=np.float64)
        out[at] = values
        return out

    second_score = spread(second.score, at2, -np.inf)
    if len(sources):
        second_score[np.isin(cand, np.asarray(sources, dtype=np.int64))] = -np.inf
    score, from_second = scoring.hop_best(spread(first.score, at1, -np.inf), second_score,
                                          discount)
    hop = np.where(from_second, score - second_score, 0.0)

    def pick(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
        if a is None or b is None:
            return a if b is None else b
        return np.where(from_second, spread(b, at2, 0.0), spread(a, at1, 0.0))

    names = [n for n in dict.fromkeys([*first.adjustments, *second.adjustments]) if n != HOP]
    adjustments = {n: pick(first.adjustments.get(n), second.adjustments.get(n)) for n in names}
    kept: dict[str, Any] = {}
    for s in signals():  # e.g. each pass's versions stay in the order it gave them
        score, change, keep = s.merge(cand, score, [p.kept.get(s.carries) if s.carries else None
                                                    for p in (first, second)])
        if change is not None and s.name in adjustments:
            adjustments[s.name] = adjustments[s.name] + change
        if s.carries:
            kept[s.carries] = keep
    adjustments[HOP] = hop
    return Pass(cand, _top(score, cand, scope, k), score, pick(first.sim, second.sim),
                pick(first.activation, second.activation), pick(first.pr, second.pr),
                pick(first.lexical, second.lexical), pick(first.distinct, second.distinct),
                adjustments, first.parents,
                first.dense_rank, first.bm25_rank,  # each item shows its own pass's (items)
                second.activated, first.own_score, first.spikes,
                from_second.astype(np.int8), kept)

"""The retrieval pipeline (SYNAPSE sections 3.2-3.4): triggers -> model -> score -> gate
-> items.

One pass (:func:`run_pass`) over the compiled graph:

1. **triggers**: the dense top ``anchor_top_k`` (exact cosines against the in-memory
   vectors) and the BM25 top ``anchor_top_k`` are the anchors;
2. **model**: the configured retrieval model (:mod:`synapse_integrations.core.models`;
   SYNAPSE's spreading activation by default) activates the graph from the anchors;
3. **score**: the anchors and the nodes activation reached are ranked by the hybrid
   score (cosine, activation, PageRank, normalised BM25), or by the model's own score;

then :meth:`Retriever.run` applies the **gate** to the first pass's top item, runs the
optional entity-feedback second pass, and builds the **items**. The pipeline only reads
the memory: what it activated is returned (:attr:`Retrieval.activated`) for the engine to
pass to the dormancy ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...config import SynapseConfig
from ...errors import InvalidInputError, InvalidTypeError
from ...types import RetrievalResult, RetrievedItem, ScoreComponents
from ..graph.graph import FACT_TYPE, NOT_ENTITY_TYPES, Compiled
from ..graph.roles import speaker_names
from ..kernels import scoring
from ..kernels.scoring import lend_similarity
from ..models import Activation, Query, RetrievalModel, get_model
from ..signals import echoes, focus
from ..signals import replies as conversation
from ..signals.versions import query_tense, rank_recent, rank_versions, settle_versions
from ..state.filters import Filter
from ..state.state import MemoryState
from ..state.validation import from_epoch
from ..text.tokens import tokenize
from . import gate

__all__ = ["DEFAULT_KINDS", "Anchors", "Pass", "Scope", "Retrieval", "Spikes", "RetrievalSteps", "Retriever", "build_item", "led_by",
           "cosines", "feedback_entities", "merge_feedback", "run_pass", "scope_of", "triggers"]

#: What retrieve() returns by default: memories, not the concepts that found them.
DEFAULT_KINDS = ("episode",)
KINDS = ("episode", "concept")


@dataclass(frozen=True)
class Scope:
    """Which nodes a query may use: ``anchors`` may be picked by the triggers (None: all),
    ``returnable`` may be ranked and returned (None: all). A filter restricts both to the
    matching episodes (concepts still anchor and bridge); ``kinds`` restricts what is
    returned."""

    anchors: np.ndarray | None = None
    returnable: np.ndarray | None = None

    @classmethod
    def build(cls, view: Compiled, kinds: tuple[str, ...], flt: Filter | None) -> Scope:
        is_ep = view.is_episode
        matching = is_ep if flt is None else _matching_episodes(view, flt)
        returnable = np.zeros(view.n, dtype=bool)
        if "episode" in kinds:
            returnable |= matching
        if "concept" in kinds:
            returnable |= ~is_ep
        everything = flt is None and set(kinds) >= set(KINDS)
        return cls(None if flt is None else matching | ~is_ep,
                   None if everything else returnable)


def scope_of(kinds: Sequence[str], speakers: Any, since: Any, until: Any,
              where: Any) -> tuple[tuple[str, ...], Filter | None]:
    """Validated ``kinds`` and filter of a retrieval (errors name the bad argument)."""
    if isinstance(kinds, str) or not isinstance(kinds, Iterable):
        raise InvalidTypeError(f"kinds must be a list of node kinds, got {kinds!r}")
    kinds = tuple(dict.fromkeys(kinds))
    if not kinds or not set(kinds) <= set(KINDS):
        raise InvalidInputError(f"kinds must be a non-empty subset of {list(KINDS)}, got {list(kinds)}")
    return kinds, Filter.build(speakers=speakers, since=since, until=until, where=where)


def _matching_episodes(view: Compiled, flt: Filter) -> np.ndarray:
    """Episodes of the view that match ``flt`` (vectorised for speakers and time)."""
    ok = view.is_episode.copy()
    if flt.speakers is not None:
        speakers = view.node_values("speaker")
        ok &= np.fromiter((sp in flt.speakers for sp in speakers), dtype=bool, count=view.n)
    if flt.since is not None or flt.until is not None:
        ts = view.times()
        with np.errstate(invalid="ignore"):
            if flt.since is not None:
                ok &= ts >= flt.since
            if flt.until is not None:
                ok &= ts < flt.until
    if flt.where is not None:
        metadata = view.node_values("metadata")
        for i in np.flatnonzero(ok):
            ok[i] = flt.where(metadata[i] or {})
    return ok


@dataclass(frozen=True)
class Anchors:
    """What the triggers picked: 1-based ranks by id, and the union as sorted indices."""

    dense_rank: dict[str, int]
    bm25_rank: dict[str, int]
    indices: np.ndarray


@dataclass
class Pass:
    """One retrieval pass: candidates (indices into the compiled graph) and their signals."""

    cand: np.ndarray
    order: np.ndarray
    score: np.ndarray
    sim: np.ndarray
    activation: np.ndarray
    pr: np.ndarray
    lexical: np.ndarray | None
    distinct: np.ndarray | None
    echo: np.ndarray  # the echo demotion (0, or negative): core/echoes.py
    superseded: np.ndarray  # version ranking (core/reconsolidation.py): older below newer
    salience: np.ndarray  # the low-salience demotion (core/surprisal.py; 0, or negative)
    reply: np.ndarray  # a reply's lift from its question or the statement that question
    #                    followed up (positive), an answered question's hand-over
    #                    (negative): core/conversation.py
    focus: np.ndarray  # outside what the question names (core/focus.py; 0, or negative)
    parents: np.ndarray | None
    dense_rank: dict[str, int]
    bm25_rank: dict[str, int]
    activated: set[str] | None  # nodes at activation >= dormancy_epsilon (None: no model ran)
    own_score: bool = False  # the model ranked by its own score (not the hybrid score)
    spikes: Spikes | None = None  # stimuli the model asks the engine to record
    # after entity feedback (merge_feedback): the hop discount of each candidate (0, or
    # negative), and which pass scored it (0: the question's, 1: the feedback pass)
    hop: np.ndarray | None = None
    source: np.ndarray | None = None
    # the versions the pass ranked newer above older and left so (compiled positions, one
    # (newer, older) row each): merge_feedback keeps them in that order
    versions: np.ndarray | None = None


@dataclass(frozen=True)
class Spikes:
    """Stimuli to record in the nodes' spike trains (SynapticRAG): ``values[i]`` for node
    ``ids[i]`` at ``time`` (epoch seconds)."""

    ids: tuple[str, ...]
    values: tuple[float, ...]
    time: float


@dataclass(frozen=True)
class Retrieval:
    """The result, what each pass activated (for the dormancy ledger), and the stimuli the
    model asks to record (for the spike trains)."""

    result: RetrievalResult
    activated: tuple[set[str], ...]
    spikes: Spikes | None = None


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


def _kind_is_fact(view: Compiled, start: int = 0) -> np.ndarray:
    return np.fromiter((t == FACT_TYPE for t in view.node_values("ctype")[start:]), dtype=bool,
                       count=view.n - start)


def _facts(view: Compiled) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which nodes are sleep's facts, and the fact -> source episode edges (two arrays)."""
    is_fact = view.per_node("fact-nodes", _kind_is_fact)  # by kind: grows with the view
    drawn = is_fact[view.src] & view.is_episode[view.dst]
    return is_fact, view.src[drawn], view.dst[drawn]


def cosines(view: Compiled, qv: np.ndarray, cfg: SynapseConfig,
            names: focus.Names | None = None) -> np.ndarray:
    """Cosine of every node of the view to the query vector ``qv``, without the ``names``
    the question holds (core/focus.py: :func:`~.focus.names_out`); with ``fact_role``
    ``"evidence"`` an episode's is the best of its own and its facts' (core/sleep.py)."""
    sim = np.clip(view.product(qv), -1.0, 1.0)
    if names is not None:
        sim = names.cosines(sim, qv)
    if cfg.fact_role == "evidence":
        _, facts, sources = view.derived("facts", _facts)
        sim = lend_similarity(sim, facts, sources)
    return sim


def _anchor_scope(view: Compiled, cfg: SynapseConfig, allowed: np.ndarray | None
                  ) -> np.ndarray | None:
    """The nodes the triggers may pick: ``allowed``, less the facts when they are
    their sources' evidence rather than anchors."""
    if cfg.fact_role != "evidence":
        return allowed
    is_fact = view.derived("facts", _facts)[0]
    if not is_fact.any():
        return allowed
    return ~is_fact if allowed is None else allowed & ~is_fact


def triggers(view: Compiled, state: MemoryState, cfg: SynapseConfig, text: str,
             sim_all: np.ndarray, allowed: np.ndarray | None = None,
             lex_all: np.ndarray | None = None, dated: np.ndarray | None = None) -> Anchors:
    """The dual trigger (section 3.2): dense and BM25 anchors, among the ``allowed``
    nodes (all when None). ``lex_all``: the BM25 scores of ``text`` over the view, when
    the caller has them already. ``dated``: the turns of the dates the question names
    (:func:`~synapse_integrations.core.signals.focus.date_scope`); their dense top ``anchor_top_k``
    are anchors too (without a dense rank of their own)."""
    dense_rank: dict[str, int] = {}
    bm25_rank: dict[str, int] = {}
    if cfg.use_dense:
        sims = sim_all if allowed is None else np.where(allowed, sim_all, -np.inf)
        top_dense = scoring.top_k(sims, min(cfg.anchor_top_k, view.n if allowed is None
                                            else int(allowed.sum())))
        if cfg.anchor_similarity_ratio > 0 and top_dense.size and sims[top_dense[0]] > 0:
            # only the hits about the question: in a small memory the top-k is everything
            top_dense = top_dense[sims[top_dense] >= cfg.anchor_similarity_ratio
                                  * sims[top_dense[0]]]
        dense_rank = {view.ids[i]: r + 1 for r, i in enumerate(top_dense)}
    if cfg.use_bm25:
        lex = state.bm25.scores_for(text, view.index, view.n) if lex_all is None else lex_all
        if allowed is not None:
            lex = np.where(allowed, lex, 0.0)
        hits = np.flatnonzero(lex > 0)  # the few turns holding a query term
        top = hits[scoring.top_k(lex[hits], cfg.anchor_top_k)]
        bm25_rank = {view.ids[i]: r + 1 for r, i in enumerate(top)}
    picked = {view.index[i] for i in (*dense_rank, *bm25_rank)}
    if dated is not None and cfg.use_dense:
        inside = np.flatnonzero(dated if allowed is None else dated & allowed)
        picked.update(int(i) for i in inside[scoring.top_k(sim_all[inside], cfg.anchor_top_k)])
    indices = np.array(sorted(picked), dtype=np.int64)
    return Anchors(dense_rank, bm25_rank, indices)


def run_pass(view: Compiled, state: MemoryState, cfg: SynapseConfig, model: RetrievalModel,
             text: str, qv: np.ndarray, sim_all: np.ndarray, k: int,
             scope: Scope | None = None, at: float | None = None,
             asked: tuple[str, np.ndarray] | None = None) -> Pass | None:
    """Triggers, model and score for one query text asked at time ``at`` (None: no anchor
    at all). ``order`` ranks the returnable candidates only. ``asked`` is the question as
    the user asked it and its cosines, when ``text`` and ``sim_all`` widen it (entity
    feedback): the exact tokens that single a turn out and the question's tense are the
    question's own."""
    asked, asked_sim = (text, sim_all) if asked is None else asked
    scope = scope or Scope()
    # the query's BM25 scores over the view, once for the trigger and the lexical term
    lex_all = state.bm25.scores_for(text, view.index, view.n) \
        if cfg.use_bm25 or cfg.uses_lexical_score else None
    dated = focus.date_scope(view, asked, at) if cfg.date_weight < 1.0 else None
    anchors = triggers(view, state, cfg, text, sim_all, _anchor_scope(view, cfg, scope.anchors),
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
        active = np.flatnonzero(act_all > 0)
        activated = {view.ids[i] for i in active[act_all[active] >= cfg.dormancy_epsilon]}
        reached = active if act.reached is None else np.asarray(act.reached, dtype=np.int64)
        cand = np.arange(view.n) if cfg.score_all_nodes else np.union1d(anchors.indices, reached)
        cand = conversation.with_replies(view, cand, cfg.reply_weight > 0,  # the answers to
                                         cfg.follow_up_weight > 0)          # what was found
        activation = act_all[cand]
        own_score = None if act.score is None else np.asarray(act.score, dtype=np.float64)[cand]
    else:
        cand = np.arange(view.n) if cfg.score_all_nodes else anchors.indices
        cand = conversation.with_replies(view, cand, cfg.reply_weight > 0, cfg.follow_up_weight > 0)
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
    hybrid = score
    score = _salience(view, cand, score, cfg.low_salience_weight)
    salience = score - hybrid
    tense = query_tense(asked)
    placed: list[tuple[int, int]] = []  # (newer, older) positions in cand
    score = rank_versions(view, cand, score, weight=cfg.superseded_weight, tense=tense,
                          placed=placed)
    if cfg.version_recency:  # versions found at question time: the newest above
        score = rank_recent(view, cand, score, state.bm25.idf, asked, tense=tense,
                            names=speaker_names(view), placed=placed)
    superseded = score - hybrid - salience  # shown as score components, like the echo demotion
    score, echo = echoes.demote(view, cand, score)  # an echo ranks below its source
    # the conversation: a reply scores with its question and what the question followed
    # up; then an answered question hands its place to the answer
    score, reply = conversation.lift_replies(view, cand, score, cfg.reply_weight,
                                             cfg.follow_up_weight)
    score, handed = conversation.hand_over(view, cand, score, cfg.answered_question_weight)
    reply = reply + handed
    # what the question names (a speaker, dates): the memories outside it demoted
    score, focused = focus.focus(view, cand, score, asked, speaker_weight=cfg.named_speaker_weight,
                                 role_weight=cfg.first_person_weight,
                                 date_weight=cfg.date_weight, asked_at=at)
    if scope.returnable is None:
        order = scoring.top_k(score, min(k, cand.size))
    else:
        keep = np.flatnonzero(scope.returnable[cand])
        order = keep[scoring.top_k(score[keep], min(k, keep.size))]
    # the version pairs still in order once the later stages had their say
    versions = np.array([(cand[n], cand[o]) for n, o in placed if score[n] > score[o]],
                        dtype=np.int64).reshape(-1, 2)
    return Pass(cand, order, score, sim, activation, pr, lexical, distinct, echo, superseded,
                salience, reply, focused, parents, anchors.dense_rank, anchors.bm25_rank,
                activated, own_score is not None, spikes, versions=versions)


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


def _low_salience(view: Compiled, start: int = 0) -> np.ndarray:
    return np.array([bool(v) for v in view.node_values("low_salience", False)[start:]],
                    dtype=bool)


def _salience(view: Compiled, cand: np.ndarray, score: np.ndarray, weight: float) -> np.ndarray:
    """Episodes the surprisal gate marked low-salience score ``weight`` of their score."""
    if weight == 1.0:
        return score
    low = view.per_node("low-salience", _low_salience)[cand]
    return np.where(low, score * weight, score) if low.any() else score


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
    own = run.score[run.order] - run.reply[run.order]
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


def _explain_feedback(state: MemoryState, view: Compiled, first: Pass, second: Pass,
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
    (:func:`~synapse_integrations.core.signals.versions.settle_versions`; the lift shows
    in the ``superseded`` component). Each candidate's signals are those of the pass that
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
    # each pass's versions stay in the order it gave them: the older turn's better score
    # in the other pass must not take it back above the turn that replaced it
    versions = np.concatenate([p.versions for p in (first, second) if p.versions is not None]
                              or [np.zeros((0, 2), dtype=np.int64)])
    score, lift = settle_versions(score, np.searchsorted(cand, versions))

    def pick(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
        if a is None or b is None:
            return a if b is None else b
        return np.where(from_second, spread(b, at2, 0.0), spread(a, at1, 0.0))

    if scope.returnable is None:
        order = scoring.top_k(score, min(k, cand.size))
    else:
        keep = np.flatnonzero(scope.returnable[cand])
        order = keep[scoring.top_k(score[keep], min(k, keep.size))]
    return Pass(cand, order, score, pick(first.sim, second.sim),
                pick(first.activation, second.activation), pick(first.pr, second.pr),
                pick(first.lexical, second.lexical), pick(first.distinct, second.distinct),
                pick(first.echo, second.echo), pick(first.superseded, second.superseded) + lift,
                pick(first.salience, second.salience), pick(first.reply, second.reply),
                pick(first.focus, second.focus), first.parents,
                first.dense_rank, first.bm25_rank,  # each item shows its own pass's (_item)
                second.activated, first.own_score, first.spikes, hop,
                from_second.astype(np.int8), versions)


def _shown_weights(cfg: SynapseConfig) -> dict[str, float]:
    """The hybrid score's weights by component name (what an item's terms are multiplied by)."""
    return {name.removeprefix("weight_"): w for name, w in cfg.score_weights().items()}


def activation_vector(view: Compiled, run: Pass) -> np.ndarray:
    """This pass's activation of every node of the view (0 outside the candidates)."""
    full = np.zeros(view.n)
    full[run.cand] = run.activation
    return full


def led_by(view: Compiled, rows: np.ndarray, activation: np.ndarray | None,
           most: int = 5) -> list[tuple[str, ...]]:
    """For each of ``rows`` (positions in ``view``), the names of the concepts it links to
    that this query activated, strongest first, ties by position (at most ``most``): the
    concepts that led to it. Nothing for a row that is no episode, or without
    ``activation`` (every node's). Read for all rows at once (their out-edges are slices
    of the view's edge arrays): read item by item, the small array operations cost about
    0.2 ms more per retrieval of ``top_k`` (30) items (3.24 -> 3.03 ms p50 at 1,000 turns).

    >>> v = Compiled.from_arrays(["e1", "e2", "c1", "c2"], np.eye(4, dtype=np.float32),
    ...                          src=[0, 0, 1, 2], dst=[2, 3, 3, 0], weight=[1.0] * 4,
    ...                          is_episode=[True, True, False, False],
    ...                          attrs={"name": ["", "", "a", "b"]})
    >>> led_by(v, np.array([0, 1, 2]), np.array([0.9, 0.1, 0.2, 0.5]))
    [('b', 'a'), ('b',), ()]
    """
    out: list[tuple[str, ...]] = [()] * len(rows)
    if activation is None or len(rows) == 0:
        return out
    rows = np.asarray(rows, dtype=np.int64)
    lo = np.searchsorted(view.src, rows)
    counts = np.where(view.is_episode[rows], np.searchsorted(view.src, rows + 1) - lo, 0)
    total = int(counts.sum())
    if total == 0:
        return out
    owner = np.repeat(np.arange(rows.size), counts)
    nbrs = view.dst[np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(total)]
    keep = ~view.is_episode[nbrs] & (activation[nbrs] > 0)
    owner, nbrs = owner[keep], nbrs[keep]
    order = np.lexsort((nbrs, -activation[nbrs], owner))
    owner, nbrs = owner[order], nbrs[order]
    top = np.arange(owner.size) - np.searchsorted(owner, owner) < most
    names = view.node_values("name")
    found: dict[int, list[str]] = {}
    for o, i in zip(owner[top].tolist(), nbrs[top].tolist()):
        found.setdefault(o, []).append(names[i])
    for o, got in found.items():
        out[o] = tuple(got)
    return out


def build_item(state: MemoryState, view: Compiled, idx: int, score: float,
               comp: ScoreComponents, parents: np.ndarray | None,
               concepts: tuple[str, ...] = ()) -> RetrievedItem:
    """The returned memory for compiled position ``idx``, with its activation path and
    the ``concepts`` that led to it (:func:`led_by`)."""
    node_id = view.ids[idx]
    d = state.graph.node(node_id)
    path: list[str] = []
    if parents is not None:
        j, seen = idx, set()
        while j >= 0 and j not in seen:  # parent chains are acyclic; never loop anyway
            seen.add(j)
            path.append(view.ids[j])
            j = int(parents[j])
        path.reverse()
    return RetrievedItem(
        id=node_id, text=d["text"], kind=d["kind"], score=score, components=comp,
        speaker=d.get("speaker"), timestamp=from_epoch(d.get("ts")),
        metadata=dict(d.get("metadata") or {}) if d["kind"] == "episode"
        else {"type": d.get("ctype"), "mentions": d.get("mentions"), "aliases": list(d.get("aliases", []))},
        path=tuple(path),
        concepts=concepts,
        superseded_by=d.get("superseded_by"),
        superseded_at=from_epoch(d.get("superseded_at")),
        supersedes=d.get("supersedes"),
    )


def _item(state: MemoryState, view: Compiled, run: Pass, j: int, passes: Sequence[Pass],
          weights: dict[str, float] | None, concepts: tuple[str, ...]) -> RetrievedItem:
    """Candidate ``j`` of ``run`` as a returned memory: its anchor ranks and activation path
    are those of the pass that scored it (``passes``: the first, then the feedback pass);
    ``concepts``: those that led to it."""
    node_id = view.ids[run.cand[j]]
    own = passes[0 if run.source is None else int(run.source[j])]
    comp = ScoreComponents(float(run.sim[j]), float(run.activation[j]), float(run.pr[j]),
                           own.bm25_rank.get(node_id), own.dense_rank.get(node_id),
                           float(run.lexical[j]) if run.lexical is not None else 0.0,
                           float(run.distinct[j]) if run.distinct is not None else 0.0,
                           float(run.echo[j]), weights, float(run.superseded[j]),
                           float(run.salience[j]), 0.0 if run.hop is None else float(run.hop[j]),
                           float(run.reply[j]), float(run.focus[j]))
    return build_item(state, view, int(run.cand[j]), float(run.score[j]), comp, own.parents,
                      concepts)


class Retriever:
    """Runs the pipeline on one memory; keeps one instance of each model it used."""

    def __init__(self, state: MemoryState,
                 options: Mapping[str, Mapping[str, Any]] | None = None,
                 words: gate.WordVectors | None = None) -> None:
        self.state = state
        self.options = dict(options or {})  # model name -> what its factory is given
        self.words = words  # embeds question words for the gate's presence check
        self._models: dict[str, RetrievalModel] = {}

    def names(self, view: Compiled, query: str, cfg: SynapseConfig) -> focus.Names | None:
        """The names ``query`` holds, to leave out of its cosines (``speaker_free_cosine``;
        :func:`~synapse_integrations.core.signals.focus.names_out`)."""
        return focus.names_out(view, query, self.words) if cfg.speaker_free_cosine else None

    def model(self, name: str) -> RetrievalModel:
        """The memory's instance of the model registered as ``name``."""
        model = self._models.get(name)
        if model is None:
            model = self._models[name] = get_model(name, **self.options.get(name, {}))
        return model

    def run(self, query: str, qv: np.ndarray, k: int, cfg: SynapseConfig, *,
            kinds: tuple[str, ...] = DEFAULT_KINDS, flt: Filter | None = None,
            at: float | None = None) -> Retrieval:
        """Rank memories for ``query`` (its unit vector ``qv``, validated by the caller),
        asked at time ``at`` (epoch seconds, or None), and apply the gate. Only nodes of
        ``kinds`` that match ``flt`` are returned."""
        view = self.state.compiled()
        if view.n == 0:
            return Retrieval(RetrievalResult(query, (), cfg.use_gate, 0.0, cfg.gate_tau), ())
        model = self.model(cfg.model)
        # cosines of every active node: one float32 mat-vec over the in-memory copy of the
        # vectors Chroma holds. Exact (Chroma's HNSW is approximate, so its top-k could
        # differ after a reload) and cheaper than a Chroma round trip.
        named = self.names(view, query, cfg)
        sim_all = cosines(view, qv, cfg, named)
        scope = Scope.build(view, kinds, flt)
        run = run_pass(view, self.state, cfg, model, query, qv, sim_all, k, scope, at)
        if run is None or run.order.size == 0:  # nothing (that the filters allow) to return
            return Retrieval(RetrievalResult(query, (), cfg.use_gate, 0.0, cfg.gate_tau),
                             () if run is None or run.activated is None else (run.activated,),
                             None if run is None else run.spikes)
        activated = [run.activated]
        passes = [run]  # whose activation paths the items show
        # the gate judges the top memory returned for the question as asked (the feedback
        # pass only re-ranks), of those its relevance placed: a version lifted above the
        # turn it updates (core/reconsolidation.py) stands in for that turn, and need not
        # be about the question's words ("I cancelled IronWorks" for "Which gym ...?");
        # and the conversation's hand-overs aside (a reply lifted by its question, an
        # answered question below its answer: core/conversation.py), by its own score
        placed = run.order[run.superseded[run.order] <= 1e-9]  # lifts are >= VERSION_MARGIN
        own = run.score[placed] - run.reply[placed]
        top = placed[int(np.argmax(own))] if placed.size else run.order[0]
        if cfg.gate_signal == "score":
            confidence = float(run.score[top])
        elif cfg.gate_signal == "similarity" or not cfg.use_activation:
            # the memory's own cosine, not the one its facts lend it (fact_role): the
            # threshold is one on whole turns, and a sentence is closer to any question
            confidence = float(np.clip(view.embeddings[run.cand[top]] @ qv, -1.0, 1.0))
        else:
            confidence = float(run.activation[top])
        verdict = None
        if cfg.use_gate:  # topic, attribution and presence checks (core/gate.py)
            turns = view.is_episode if scope.anchors is None else view.is_episode & scope.anchors
            verdict = gate.evaluate(view, self.state.bm25, query, cfg, confidence, turns,
                                    self.words, run.cand[run.order])
        rejected = verdict is not None and verdict.rejected
        if cfg.entity_feedback and cfg.use_graph:
            found = feedback_entities(self.state, view, run, cfg.entity_feedback, query)
            if found:
                # the entities join the query: their names the lexical trigger's text,
                # their mean vector the query vector (Rocchio-style, weight
                # feedback_weight), and the whole pass runs again
                g = self.state.graph
                ev = _unit(np.mean([g.vectors[e] for e in found], axis=0))
                q2 = _unit(qv + np.float32(cfg.feedback_weight) * ev)
                names = " ".join(g.node(e)["name"] for e in found)
                again = run_pass(view, self.state, cfg, model, f"{query} {names}", q2,
                                 cosines(view, q2, cfg, named), k, scope, at,
                                 asked=(query, sim_all))
                if again is not None:
                    _explain_feedback(self.state, view, run, again, found)
                    activated.append(again.activated)
                    passes.append(again)
                    run = merge_feedback(run, again, scope, k, cfg.spreading_factor,
                                         [view.index[ep] for ep in found.values()])
        activation = activation_vector(view, run) if cfg.use_activation else None
        weights = None if run.own_score else _shown_weights(cfg)
        led = led_by(view, run.cand[run.order], activation)
        items = tuple(_item(self.state, view, run, j, passes, weights, concepts)
                      for j, concepts in zip(run.order.tolist(), led))
        return Retrieval(RetrievalResult(query, items, bool(rejected), confidence, cfg.gate_tau,
                                         verdict), tuple(a for a in activated if a is not None),
                         run.spikes)


class RetrievalSteps:
    """The pipeline one stage at a time, for benchmarks and explanations (see
    :meth:`Synapse.inspect_retrieval`, which holds the memory's lock meanwhile)."""

    def __init__(self, state: MemoryState, retriever: Retriever) -> None:
        self.state = state
        self.retriever = retriever
        self.view = state.compiled()

    def query(self, text: str, vector: np.ndarray, cfg: SynapseConfig) -> Query:
        """The triggers' stage: cosines of every node and the anchors for ``text``."""
        qv = np.asarray(vector, dtype=np.float32)
        sim = cosines(self.view, qv, cfg, self.retriever.names(self.view, text, cfg))
        dated = focus.date_scope(self.view, text) if cfg.date_weight < 1.0 else None
        anchors = triggers(self.view, self.state, cfg, text, sim, _anchor_scope(self.view, cfg, None),
                           dated=dated)
        return Query(text, qv, sim, anchors.indices)

    def activate(self, query: Query, cfg: SynapseConfig) -> Activation:
        """The model's stage for a prepared :meth:`query`."""
        return self.retriever.model(cfg.model).activate(self.view, query, cfg)

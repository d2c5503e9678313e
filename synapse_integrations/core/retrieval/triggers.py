"""The dual trigger (SYNAPSE section 3.2): the query's cosines with every node, and the
dense and BM25 anchors the retrieval model spreads from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config import SynapseConfig
from ..graph.graph import FACT_TYPE, Compiled
from ..kernels import scoring
from ..kernels.scoring import lend_similarity
from ..signals import focus
from ..state.state import MemoryState

__all__ = ["Anchors", "anchor_scope", "cosines", "fact_sources", "triggers"]


@dataclass(frozen=True)
class Anchors:
    """What the triggers picked: 1-based ranks by id, and the union as sorted indices."""

    dense_rank: dict[str, int]
    bm25_rank: dict[str, int]
    indices: np.ndarray


def _kind_is_fact(view: Compiled, start: int = 0) -> np.ndarray:
    return np.fromiter((t == FACT_TYPE for t in view.node_values("ctype")[start:]), dtype=bool,
                       count=view.n - start)


def fact_sources(view: Compiled) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which nodes are sleep's facts, and the fact -> source episode edges (two arrays)."""
    is_fact = view.per_node("fact-nodes", _kind_is_fact)  # by kind: grows with the view
    drawn = is_fact[view.src] & view.is_episode[view.dst]
    return is_fact, view.src[drawn], view.dst[drawn]


def cosines(view: Compiled, qv: np.ndarray, cfg: SynapseConfig,
            names: focus.Names | None = None) -> np.ndarray:
    """Cosine of every node of the view to the query vector ``qv``, without the ``names``
    the question holds (core/signals/focus.py: :func:`~.focus.names_out`); with ``fact_role``
    ``"evidence"`` an episode's is the best of its own and its facts' (core/lifecycle/sleep.py)."""
    sim = np.clip(view.product(qv), -1.0, 1.0)
    if names is not None:
        sim = names.cosines(sim, qv)
    if cfg.fact_role == "evidence":
        _, facts, sources = view.derived("facts", fact_sources)
        sim = lend_similarity(sim, facts, sources)
    return sim


def anchor_scope(view: Compiled, cfg: SynapseConfig, allowed: np.ndarray | None
                  ) -> np.ndarray | None:
    """The nodes the triggers may pick: ``allowed``, less the facts when they are
    their sources' evidence rather than anchors."""
    if cfg.fact_role != "evidence":
        return allowed
    is_fact = view.derived("facts", fact_sources)[0]
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

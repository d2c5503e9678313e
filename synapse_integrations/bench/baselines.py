"""The benchmarks' baselines: rankings of a memory's episodes by one signal or a plain
fusion, and one walk over the graph.

* ``dense``: Chroma's cosine top-k over the episodes (``Synapse.search_vectors``);
* ``bm25``: the engine's tokenizer and BM25 (bm25s) over the episode texts;
* ``hybrid_rrf``: the reciprocal-rank fusion (constant 60) of those two lists;
* ``fusion``: a normalised weighted score fusion over every episode,
  ``w * minmax(bm25) + (1 - w) * minmax(cos)`` with ``w = FUSION_WEIGHT`` (chosen on the
  dev data by a sweep, docs/benchmarks.md); ``fusion-w<x>`` is the same with ``w = x``
  (the sweep's methods);
* ``ppr``: HippoRAG-style personalised PageRank over the memory's own graph, seeded by the
  query's anchors (the engine's dense and BM25 triggers, teleport weights their cosines),
  damping ``PPR_DAMPING``; the episodes are ranked by their PPR score and by nothing else
  of the engine's pipeline (no hybrid score, feedback pass, replies, focus or version
  ranking). ``ppr-d<x>`` is the same with damping ``x`` (the sweep's methods). The
  engine's ``model:ppr`` is the other reading: the same walk inside the whole pipeline.

:func:`rrf_fuse` and :func:`fuse_scores` are pure kernels; :func:`ppr_rank` the walk over
an ingested memory; :class:`BaselineRanker` holds one memory's BM25 index and episode
vectors and ranks queries with any of them.

>>> fuse_scores(np.array([0.0, 2.0, 4.0]), np.array([0.5, 0.3, 0.1]), weight=0.5).tolist()
[0.5, 0.5, 0.5]
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import SynapseConfig
from ..errors import InvalidInputError

__all__ = [
    "BASELINES",
    "FUSION_WEIGHT",
    "PPR_DAMPING",
    "RRF_CONSTANT",
    "BaselineRanker",
    "fuse_scores",
    "fusion_weight",
    "is_baseline",
    "needs_memory",
    "ppr_damping",
    "ppr_rank",
    "rrf_fuse",
]

RRF_CONSTANT = 60
#: ``fusion``'s BM25 weight, chosen on LoCoMo dev and LongMemEval-S dev
#: (docs/benchmarks.md, "The fusion baseline").
FUSION_WEIGHT = 0.4
#: ``ppr``'s damping (the probability of following an edge at each step): HippoRAG's
#: value. A sweep (0.3 ... 0.85, docs/benchmarks.md "The PageRank baseline") found no one
#: value best on both benchmarks (LoCoMo dev: 0.7, LongMemEval-S dev: 0.3); 0.5 is within
#: 0.7 points of the best on each, and the bench compares per column with the sweep's best.
PPR_DAMPING = 0.5
#: The baselines every benchmark runs by default (names are a contract).
BASELINES: tuple[str, ...] = ("dense", "bm25", "hybrid_rrf", "fusion", "ppr")
_SWEPT = {"fusion": (re.compile(r"^fusion-w(\d+(?:\.\d+)?)$"), FUSION_WEIGHT, 1.0, "fusion weight"),
          "ppr": (re.compile(r"^ppr-d(\d+(?:\.\d+)?)$"), PPR_DAMPING, 0.99, "damping")}


def _swept(family: str, name: str) -> float | None:
    """The parameter of ``family``'s method ``name`` (``None`` for another name)."""
    pattern, default, top, what = _SWEPT[family]
    if name == family:
        return default
    m = pattern.match(name)
    if m is None:
        return None
    x = float(m[1])
    if not 0.0 <= x <= top:
        raise InvalidInputError(f"{name}: the {what} must lie in [0, {top:g}]")
    return x


def fusion_weight(name: str) -> float | None:
    """The BM25 weight of a fusion method name (``None`` for any other name).

    >>> fusion_weight("fusion"), fusion_weight("fusion-w0.3"), fusion_weight("bm25")
    (0.4, 0.3, None)
    """
    return _swept("fusion", name)


def ppr_damping(name: str) -> float | None:
    """The damping of a PageRank baseline name (``None`` for any other name).

    >>> ppr_damping("ppr"), ppr_damping("ppr-d0.85"), ppr_damping("model:ppr")
    (0.5, 0.85, None)
    """
    return _swept("ppr", name)


def is_baseline(name: str) -> bool:
    """True for the names of :data:`BASELINES` and the swept ``fusion-w<x>``, ``ppr-d<x>``."""
    return name in BASELINES or fusion_weight(name) is not None or ppr_damping(name) is not None


def needs_memory(name: str) -> bool:
    """True for the baselines that read the ingested memory (its Chroma collection, or
    its graph)."""
    return name in ("dense", "hybrid_rrf") or ppr_damping(name) is not None


def rrf_fuse(rankings: Sequence[Sequence[str]], *, constant: int = RRF_CONSTANT) -> list[str]:
    """Reciprocal-rank fusion: ``score(d) = sum over lists of 1 / (constant + rank)``, rank
    from 1; ties keep the order of first appearance.

    >>> rrf_fuse([["a", "b", "c"], ["c", "a"]], constant=60)
    ['a', 'c', 'b']
    """
    score: dict[str, float] = {}
    for ranking in rankings:
        for r, doc in enumerate(ranking, 1):
            score[doc] = score.get(doc, 0.0) + 1.0 / (constant + r)
    order = {d: i for i, d in enumerate(score)}
    return sorted(score, key=lambda d: (-score[d], order[d]))


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:  # constant (or empty): the signal cannot tell candidates apart
        return np.zeros_like(x)
    return (x - lo) / (hi - lo)


def fuse_scores(lexical: np.ndarray, cosine: np.ndarray, *, weight: float) -> np.ndarray:
    """``weight * minmax(lexical) + (1 - weight) * minmax(cosine)`` over the candidates.

    Min-max normalisation maps each signal to [0, 1] over the candidate set (a signal that
    is constant over it contributes 0), so ``weight`` trades the two off on the same scale
    whatever BM25's range for the query.

    >>> fuse_scores(np.array([0.0, 1.0]), np.array([0.9, 0.1]), weight=0.25).tolist()
    [0.75, 0.25]
    """
    lex = np.asarray(lexical, dtype=np.float64)
    cos = np.asarray(cosine, dtype=np.float64)
    if lex.shape != cos.shape or lex.ndim != 1:
        raise InvalidInputError(f"lexical and cosine must be 1-D arrays of one length, "
                                f"got shapes {lex.shape} and {cos.shape}")
    if not 0.0 <= weight <= 1.0:
        raise InvalidInputError(f"weight must lie in [0, 1], got {weight!r}")
    if lex.size == 0:
        return lex
    return weight * _minmax(lex) + (1.0 - weight) * _minmax(cos)


def ppr_rank(memory: Any, query: str, q: np.ndarray, depth: int, *,
             damping: float = PPR_DAMPING, config: SynapseConfig | None = None) -> list[str]:
    """The ``depth`` episodes of ``memory`` (a :class:`~synapse_integrations.Synapse`) with
    the highest personalised PageRank for ``query`` (its unit vector ``q``): the engine's
    anchors and PPR kernel (:mod:`synapse_integrations.core.models.ppr`) over the memory's
    graph, read through :meth:`~synapse_integrations.Synapse.inspect_retrieval`; episodes
    the walk does not reach are not ranked. ``config``: whose triggers pick the anchors
    (default: the memory's own configuration)."""
    from ..core.kernels.scoring import top_k

    cfg = (config or memory.config).with_model("ppr", damping=damping)
    with memory.inspect_retrieval() as steps:
        act = steps.activate(steps.query(query, q, cfg), cfg)
        view = steps.view
        score = np.asarray(act.activation, dtype=np.float64)
        eps = np.flatnonzero(view.is_episode & (score > 0))
        return [view.ids[i] for i in eps[top_k(score[eps], depth)]]


class BaselineRanker:
    """Ranks one memory's episodes for queries with the baselines.

    ``ids``/``texts``/``vectors`` are the episodes (vectors: unit rows, the same the engine
    was given); ``memory`` is the ingested :class:`~synapse_integrations.Synapse` the
    ``dense`` and ``ppr`` baselines read (``None`` when none of them is asked for);
    ``config`` the benchmark's base configuration (default ``SynapseConfig()``): BM25
    stems its terms as the engine does, and ``ppr`` takes its anchors as the base's triggers
    do, whichever configuration the memory was opened with.
    """

    def __init__(self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray,
                 memory: Any | None = None, config: SynapseConfig | None = None) -> None:
        from ..core.index.bm25 import BM25Index

        self.ids = list(ids)
        self.index = {d: i for i, d in enumerate(self.ids)}
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.memory = memory
        self.config = config or SynapseConfig()
        self.bm25 = BM25Index(stemming=self.config.lexical_stemming)  # the engine's terms
        self.bm25.set(dict(zip(self.ids, texts)))

    def warm(self, query: str, q: np.ndarray, methods: Sequence[str] = BASELINES) -> None:
        """Build the lazy indexes ``methods`` read (BM25; Chroma's; the graph's view and
        its walk) once, untimed."""
        self.bm25.query(query, 1)
        if self.memory is None:
            return
        if {"dense", "hybrid_rrf"} & set(methods):
            self.memory.search_vectors(q, 1, kind="episode")
        if any(ppr_damping(m) is not None for m in methods):
            ppr_rank(self.memory, query, q, 1, config=self.config)

    def rank(self, methods: Sequence[str], query: str, q: np.ndarray, depth: int,
             ) -> dict[str, tuple[list[str], float]]:
        """``{method: (ranked episode ids, seconds)}``; the time of a fused method includes
        the signals it fuses (measured once, shared)."""
        depth = min(depth, len(self.ids))
        out: dict[str, tuple[list[str], float]] = {}
        wanted = set(methods)
        dense = lexical = None
        t_dense = t_lex = 0.0
        if wanted & {"dense", "hybrid_rrf"}:
            if self.memory is None:
                raise InvalidInputError("the dense baselines need the ingested memory")
            t0 = time.perf_counter()
            dense, _ = self.memory.search_vectors(q, depth, kind="episode")
            t_dense = time.perf_counter() - t0
        if wanted & {"bm25", "hybrid_rrf"}:
            t0 = time.perf_counter()
            lexical, _ = self.bm25.query(query, depth)
            t_lex = time.perf_counter() - t0
        if "dense" in wanted:
            out["dense"] = (list(dense or []), t_dense)
        if "bm25" in wanted:
            out["bm25"] = (list(lexical or []), t_lex)
        if "hybrid_rrf" in wanted:
            t0 = time.perf_counter()
            fused = rrf_fuse([dense or [], lexical or []])
            out["hybrid_rrf"] = (fused, t_dense + t_lex + time.perf_counter() - t0)
        dampings = {m: d for m in methods if (d := ppr_damping(m)) is not None}
        if dampings:
            if self.memory is None:
                raise InvalidInputError("the PageRank baselines need the ingested memory")
            for m, d in dampings.items():
                t0 = time.perf_counter()
                ranked = ppr_rank(self.memory, query, q, depth, damping=d, config=self.config)
                out[m] = (ranked, time.perf_counter() - t0)
        weights = {m: w for m in methods if (w := fusion_weight(m)) is not None}
        if weights:
            t0 = time.perf_counter()
            lex = self.bm25.scores_for(query, self.index, len(self.ids))
            cos = self.vectors @ np.asarray(q, dtype=np.float32)
            t_signals = time.perf_counter() - t0
            from ..core.kernels.scoring import top_k

            for m, w in weights.items():
                t0 = time.perf_counter()
                order = top_k(fuse_scores(lex, cos, weight=w), depth)
                out[m] = ([self.ids[i] for i in order],
                          t_signals + time.perf_counter() - t0)
        return out

"""Personalised PageRank over the memory graph (HippoRAG-style retrieval).

HippoRAG ranks the nodes of its knowledge graph by a PageRank whose teleport distribution
sits on the query's nodes. Here the graph is our own episodic-semantic graph (``view.src``,
``view.dst``, ``view.weight``) and the teleport distribution sits on the query's anchors
(the dense and BM25 triggers), in proportion to their cosine with the query::

    x = damping * (T x + (dangling mass of x) * p) + (1 - damping) * p

``T[i, j] = w_ji / sum_i' w_ji'`` (a node hands its rank to its out-neighbours in
proportion to the edge weights), ``p`` the teleport distribution; a node without
out-edges hands its rank back to ``p``. This is ``networkx.pagerank(G, alpha=damping,
personalization=p)`` exactly, which the tests check.

DECISION (damping): 0.5, HippoRAG's value: half of the rank returns to the anchors at
every step, so the walk stays near the query (0.85, the web-search value, lets it drift
into hubs of the graph; both are tested). It also makes the power iteration converge in
about 20 steps at ``tol=1e-6``.

>>> import numpy as np
>>> T, dangling = transition_matrix(np.array([0, 1]), np.array([1, 2]), np.ones(2), 3)
>>> personalized_pagerank(T, dangling, np.array([1.0, 0.0, 0.0]), damping=0.5).round(4)
array([0.5714, 0.2857, 0.1429])
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ...errors import InvalidInputError
from ..kernels.dynamics import propagation_matrix
from . import _params as prm
from .base import Activation, LearnableEdges, Query

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ...config import SynapseConfig
    from ..graph.graph import Compiled as GraphView

__all__ = [
    "PPRModel",
    "personalized_pagerank",
    "personalized_pagerank_reference",
    "teleport_distribution",
    "transition_matrix",
]

logger = logging.getLogger(__name__)


def transition_matrix(src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
                      n: int) -> tuple[sp.csr_array, np.ndarray]:
    """``(T, dangling)``: ``T[i, j] = w_ji / (sum of j's out-weights)``, and the mask of
    nodes whose out-weights sum to 0. Edges are validated as in
    :func:`~synapse_integrations.core.kernels.dynamics.propagation_matrix`."""
    A_t = propagation_matrix(src, dst, weight, n, use_fan_effect=False)  # A_t[i, j] = w_ji
    out_weight = np.asarray(A_t.sum(axis=0)).ravel()
    dangling = out_weight <= 0
    inv = np.zeros(n)
    inv[~dangling] = 1.0 / out_weight[~dangling]
    T = sp.csr_array(A_t.multiply(inv[None, :]))
    return T, dangling


def teleport_distribution(n: int, anchors: np.ndarray, sim: np.ndarray) -> np.ndarray:
    """The anchors' cosines (clipped at 0), normalised to sum 1; uniform over the anchors
    when none is positive; all zeros without anchors.

    >>> teleport_distribution(4, np.array([1, 3]), np.array([0.0, 0.6, 0.9, 0.2]))
    array([0.  , 0.75, 0.  , 0.25])
    """
    p = np.zeros(n)
    anchors = np.asarray(anchors, dtype=np.int64)
    if anchors.size == 0:
        return p
    w = np.clip(np.nan_to_num(np.asarray(sim, dtype=np.float64)[anchors]), 0.0, None)
    p[anchors] = w / w.sum() if w.sum() > 0 else 1.0 / anchors.size
    return p


def _check(teleport: np.ndarray, n: int, damping: float) -> np.ndarray:
    p = np.asarray(teleport, dtype=np.float64)
    if p.shape != (n,) or not np.isfinite(p).all() or (p < 0).any():
        raise InvalidInputError(f"teleport must be a non-negative finite array of shape ({n},)")
    if p.sum() <= 0:
        raise InvalidInputError("teleport must put weight on at least one node")
    if not 0.0 <= damping < 1.0:
        raise InvalidInputError(f"damping must be in [0, 1), got {damping!r}")
    return p / p.sum()


def personalized_pagerank(T: sp.csr_array, dangling: np.ndarray, teleport: np.ndarray, *,
                          damping: float, tol: float = 1e-6,
                          max_iter: int = 100) -> np.ndarray:
    """Power iteration from ``x = p`` until the L1 change is below ``tol`` (a warning is
    logged if ``max_iter`` comes first). Returns a distribution (sums to 1)."""
    n = T.shape[0]
    p = _check(teleport, n, damping)
    x = p.copy()
    for _ in range(max_iter):
        previous = x
        x = damping * (T @ previous + previous[dangling].sum() * p) + (1.0 - damping) * p
        if np.abs(x - previous).sum() < tol:
            break
    else:
        logger.warning("personalized_pagerank: no convergence to tol=%g in %d iterations",
                       tol, max_iter)
    return x


def personalized_pagerank_reference(src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
                                    n: int, *, teleport: np.ndarray, damping: float,
                                    tol: float = 1e-12, max_iter: int = 10_000) -> np.ndarray:
    """The same fixed point from the edge list, one edge at a time (tests only)."""
    p = _check(teleport, n, damping).tolist()
    edges = list(zip(np.asarray(src).tolist(), np.asarray(dst).tolist(),
                     np.asarray(weight, dtype=np.float64).tolist()))
    out_weight = [0.0] * n
    for j, _, w in edges:
        out_weight[j] += w
    x = list(p)
    for _ in range(max_iter):
        lost = sum(x[j] for j in range(n) if out_weight[j] <= 0)
        nxt = [(1.0 - damping) * p[i] + damping * lost * p[i] for i in range(n)]
        for j, i, w in edges:
            if out_weight[j] > 0:
                nxt[i] += damping * x[j] * w / out_weight[j]
        done = sum(abs(a - b) for a, b in zip(nxt, x)) < tol
        x = nxt
        if done:
            break
    return np.array(x, dtype=np.float64)


def _damping(v: object) -> str | None:
    ok = prm.unit_interval(v) is None and v < 1  # type: ignore[operator]
    return None if ok else "must be a number in [0, 1)"


PARAMS = prm.ParamSpec("ppr", {
    "damping": (0.5, _damping),
    "tol": (1e-6, prm.positive),
    "max_iter": (100, prm.positive_int),
    "candidates": (200, prm.positive_int),
    "rank": ("model", prm.choice("model", "hybrid")),
})


class PPRModel:
    """Personalised PageRank from the query's anchors (``SynapseConfig(model="ppr")``).

    Hyperparameters, ``SynapseConfig(model_params={"ppr": {...}})``:

    ``damping`` 0.5
        probability of following an edge at each step (HippoRAG's value; see the module).
    ``tol`` 1e-6, ``max_iter`` 100
        the power iteration's stopping rule (L1 change).
    ``candidates`` 200 (ours)
        the nodes with the highest PPR scores ranked besides the anchors (a walk reaches
        most of a connected memory; scoring all of them costs more than the walk).
    ``rank`` "model"
        ``"model"``: rank by the PPR score, as HippoRAG does; ``"hybrid"``: leave the
        ranking to the engine's hybrid score.

    Activation: the PPR score divided by its maximum (so the top node has 1.0, as with the
    engine's PageRank); the ``candidates`` best nodes with a positive score are ranked. The transition
    matrix is built once per graph version. Without edges (or ``use_graph=False``) the
    walk cannot leave the anchors: the score is the teleport distribution.
    """

    name = "ppr"

    def activate(self, view: GraphView, query: Query, config: SynapseConfig) -> Activation:
        p = prm.read_params(config, PARAMS)
        n = view.n
        teleport = teleport_distribution(n, query.anchors, query.sim)
        if teleport.sum() <= 0:
            return Activation(np.zeros(n))
        if config.use_graph:
            T, dangling = view.derived("ppr.transition", lambda v: transition_matrix(
                v.src, v.dst, v.weight, v.n))
            x = personalized_pagerank(T, dangling, teleport, damping=p["damping"],
                                      tol=p["tol"], max_iter=p["max_iter"])
        else:
            x = teleport
        x = np.clip(x, 0.0, None)
        a = x / x.max()
        positive = np.flatnonzero(a > 0)
        if positive.size > p["candidates"]:
            positive = positive[np.argpartition(-a[positive], p["candidates"] - 1)[:p["candidates"]]]
        return Activation(a, reached=np.sort(positive), score=a if p["rank"] == "model" else None)

    def learnable_edges(self, view: GraphView, config: SynapseConfig) -> LearnableEdges:
        """The memory graph's own edges (the walk's transitions; feedback marks them
        ``learned``)."""
        return LearnableEdges("memory", view.src, view.dst, view.weight)

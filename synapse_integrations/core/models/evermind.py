"""Evermind: context-triggered linear spreading over a k-NN memory graph (seed paper 003,
sections 4.3-4.6, 5.3, 5.7), with the two mechanisms the paper proposes and never tests:
confidence-gated spreading (6.3, 6.5 recommendation 4) and learned edge weights (4.5).

The dynamics (Eq. 1 of the paper, its vectorised form in 5.3)::

    a(t+1) = gamma * a(t) + (1 - gamma) * P a(t),      P[i, j] = w_ji / outdeg(j)

from ``a(0)`` = the query's cosine on its ``init_k`` most similar memories (0 elsewhere),
for ``rounds`` rounds, over the k-NN graph of the memories' embeddings: each memory linked
to its ``k`` nearest others, only where the link is mutual (both in each other's top-k; the
paper's default) or from every node to its top-k (the "open" variant of 5.7), and only
where the cosine is at least ``floor``; the weight of a link is its cosine. ``gamma = 1``
is plain dense retrieval of the ``init_k`` seeds.

Kernels (arrays in, arrays out): :func:`knn_edges`, :func:`seed_activation`,
:func:`spread_is_needed`, :func:`linear_spread` (with :func:`linear_spread_reference`),
:func:`feedback_signal`, :func:`learn_edge_weights` and :func:`update_edge_weights` (with
:func:`update_edge_weights_reference`). :class:`EvermindModel` is the retrieval model.

>>> import numpy as np
>>> from synapse_integrations.core.kernels.dynamics import propagation_matrix
>>> P = propagation_matrix(np.array([0, 1]), np.array([1, 0]), np.array([0.8, 0.8]), 2,
...                        use_fan_effect=True, fan_exponent=1.0)
>>> linear_spread(np.array([1.0, 0.0]), P, gamma=0.5, rounds=1)
array([0.5, 0.4])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ...errors import InvalidInputError
from ..kernels.dynamics import propagation_matrix, strongest_inflow
from ..kernels.scoring import top_k
from . import _params as prm
from ._neighbors import NeighborIndex, NeighborTable, neighbor_table
from .base import Activation, LearnableEdges, Query

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ...config import SynapseConfig
    from ..graph.graph import Compiled as GraphView

__all__ = [
    "EvermindModel",
    "feedback_signal",
    "knn_edges",
    "learn_edge_weights",
    "linear_spread",
    "linear_spread_reference",
    "seed_activation",
    "spread_is_needed",
    "spread_with_parents",
    "update_edge_weights",
    "update_edge_weights_reference",
    "with_learned_weights",
]


# --------------------------------------------------------------------------------------------
# graph construction (4.6, 5.3, 5.7)
# --------------------------------------------------------------------------------------------
def knn_edges(index: np.ndarray, sim: np.ndarray, *, k: int, mutual: bool,
              floor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Directed edges ``src -> dst`` (weight: the cosine) of the k-NN graph of a table.

    ``index``/``sim`` are a top-k table (:func:`._neighbors.top_k_neighbors`, at least
    ``k`` wide; only the first ``k`` columns count). Open: ``i -> j`` for each ``j`` in
    ``i``'s top-k with cosine >= ``floor``. Mutual: ``i -> j`` and ``j -> i`` only when each
    is in the other's top-k (and the cosine >= ``floor``). Edges are sorted by (src, dst).

    >>> idx = np.array([[1], [0], [1]]); s = np.array([[0.9], [0.9], [0.5]])
    >>> [a.tolist() for a in knn_edges(idx, s, k=1, mutual=True, floor=0.35)]
    [[0, 1], [1, 0], [0.9, 0.9]]
    >>> [a.tolist() for a in knn_edges(idx, s, k=1, mutual=False, floor=0.35)]
    [[0, 1, 2], [1, 0, 1], [0.9, 0.9, 0.5]]
    """
    index = np.asarray(index, dtype=np.int64)
    sim = np.asarray(sim, dtype=np.float64)
    if index.shape != sim.shape or index.ndim != 2 or index.shape[1] < k:
        raise InvalidInputError(f"index and sim must be (m, >= {k}) arrays of the same shape")
    m = index.shape[0]
    idx, s = index[:, :k], sim[:, :k]
    src = np.repeat(np.arange(m), k)
    dst, w = idx.ravel(), s.ravel()
    keep = (dst >= 0) & (w >= floor)
    if mutual:
        forward = np.sort((src * m + dst)[dst >= 0])
        back = dst * m + src
        pos = np.searchsorted(forward, back)
        inside = pos < forward.size
        found = np.zeros(keep.size, dtype=bool)
        found[inside] = forward[pos[inside]] == back[inside]
        keep &= found
    src, dst, w = src[keep], dst[keep], w[keep]
    order = np.lexsort((dst, src))
    return src[order], dst[order], w[order]


# --------------------------------------------------------------------------------------------
# seeding, the confidence gate and the spreading (4.2, 4.3, 5.3, 6.3)
# --------------------------------------------------------------------------------------------
def seed_activation(sim: np.ndarray, *, init_k: int,
                    eligible: np.ndarray | None = None) -> np.ndarray:
    """``a(0)``: the cosine of the ``init_k`` most similar eligible nodes (ties to the lower
    index), clipped at 0; 0 elsewhere.

    >>> seed_activation(np.array([0.2, 0.9, -0.1, 0.5]), init_k=2)
    array([0. , 0.9, 0. , 0.5])
    """
    sim = np.asarray(sim, dtype=np.float64)
    key = np.where(np.isnan(sim), -np.inf, sim)
    if eligible is not None:
        key = np.where(np.asarray(eligible, dtype=bool), key, -np.inf)
    top = top_k(key, init_k)
    top = top[key[top] > -np.inf]
    a0 = np.zeros(sim.size)
    a0[top] = np.clip(sim[top], 0.0, None)
    return a0


def spread_is_needed(top_sims: np.ndarray, *, top1_below: float, gap_below: float,
                     gap_rank: int) -> bool:
    """The confidence gate of 6.3/6.5: spread only when the first pass is unsure, i.e.
    the best cosine is below ``top1_below`` or the gap between the best cosine and the
    ``gap_rank``-th (1-based) is below ``gap_below``. ``top_sims`` is sorted decreasing.

    >>> spread_is_needed(np.array([0.8, 0.7, 0.6]), top1_below=0.5, gap_below=0.05, gap_rank=3)
    False
    >>> spread_is_needed(np.array([0.8, 0.79, 0.78]), top1_below=0.5, gap_below=0.05, gap_rank=3)
    True
    """
    s = np.asarray(top_sims, dtype=np.float64)
    if s.size == 0:
        return False
    if s[0] < top1_below:
        return True
    if s.size >= gap_rank >= 2:
        return bool(s[0] - s[gap_rank - 1] < gap_below)
    return False


def linear_spread(a0: np.ndarray, P: sp.csr_array | np.ndarray, *, gamma: float,
                  rounds: int) -> np.ndarray:
    """``rounds`` rounds of ``a = gamma * a + (1 - gamma) * P @ a`` (Eq. 1 / 5.3).

    ``P[i, j]`` is what node ``j`` passes to ``i`` per unit of activation:
    :func:`~synapse_integrations.core.kernels.dynamics.propagation_matrix` with the fan effect and
    exponent 1 gives the paper's ``w_ji / d_j``.
    """
    a = _check_spread(a0, P, gamma, rounds)
    P = sp.csr_array(P)
    for _ in range(rounds):
        a = gamma * a + (1.0 - gamma) * (P @ a)
    return a


def linear_spread_reference(a0: np.ndarray, src: np.ndarray, dst: np.ndarray,
                            weight: np.ndarray, n: int, *, gamma: float,
                            rounds: int) -> np.ndarray:
    """Eq. 1 literally, from the edge list: each node keeps ``gamma`` of its activation and
    receives ``(1 - gamma) * w_ji / d_j * a_j`` from each in-neighbour ``j`` (tests only)."""
    a = [float(x) for x in np.asarray(a0, dtype=np.float64)]
    edges = list(zip(np.asarray(src).tolist(), np.asarray(dst).tolist(),
                     np.asarray(weight, dtype=np.float64).tolist()))
    out_degree = [0] * n
    for j, _, _ in edges:
        out_degree[j] += 1
    for _ in range(rounds):
        nxt = [gamma * x for x in a]
        for j, i, w in edges:
            nxt[i] += (1.0 - gamma) * w / out_degree[j] * a[j]
        a = nxt
    return np.array(a, dtype=np.float64)


def _check_spread(a0: np.ndarray, P: Any, gamma: float, rounds: int) -> np.ndarray:
    a = np.array(a0, dtype=np.float64)
    if a.ndim != 1 or not np.isfinite(a).all():
        raise InvalidInputError("a0 must be a finite 1-D array")
    if P.shape != (a.size, a.size):
        raise InvalidInputError(f"P must have shape ({a.size}, {a.size}), got {P.shape}")
    if not 0.0 <= gamma <= 1.0:
        raise InvalidInputError(f"gamma must be in [0, 1], got {gamma!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 0:
        raise InvalidInputError(f"rounds must be an int >= 0, got {rounds!r}")
    return a


def spread_with_parents(a0: np.ndarray, P: sp.csr_array | np.ndarray, *, gamma: float,
                        rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`linear_spread`, also returning for each node first reached on some round (not
    a seed) the in-neighbour ``j`` that passed it the most, ``P[i, j] * a_j`` of the round
    before (lowest ``j`` on ties); -1 for seeds and unreached nodes."""
    a = _check_spread(a0, P, gamma, rounds)
    P = sp.csr_array(P)
    P.sort_indices()
    parent = np.full(a.size, -1, dtype=np.int64)
    reached = a > 0
    for _ in range(rounds):
        nxt = gamma * a + (1.0 - gamma) * (P @ a)
        fresh = np.flatnonzero((nxt > 0) & ~reached)
        if fresh.size:
            parent[fresh] = strongest_inflow(P, a, fresh)
            reached[fresh] = True
        a = nxt
    return a, parent


# --------------------------------------------------------------------------------------------
# learned edge weights (4.5): the pure update; the engine's feedback API calls it
# --------------------------------------------------------------------------------------------
def feedback_signal(src: np.ndarray, dst: np.ndarray, *, useful: np.ndarray,
                    spread_unused: np.ndarray, active: np.ndarray) -> np.ndarray:
    """The signal of Eq. 2 per edge ``src -> dst``: ``+1`` when both ends were retrieved
    and marked useful; ``-1`` when ``dst`` was reached by spreading, retrieved and marked
    not useful, and ``src`` was active in that spreading (the energy came from it); ``0``
    otherwise.

    Args:
        useful: node indices retrieved and marked useful.
        spread_unused: node indices that spreading (not seeding) brought into the result
            and that were marked not useful; disjoint from ``useful``.
        active: node indices with positive activation in that retrieval (the seeds and the
            nodes spreading reached).

    >>> feedback_signal(np.array([0, 1, 1]), np.array([1, 0, 2]), useful=np.array([0, 1]),
    ...                 spread_unused=np.array([2]), active=np.array([0, 1, 2]))
    array([ 1,  1, -1], dtype=int8)
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.shape != dst.shape or src.ndim != 1:
        raise InvalidInputError("src and dst must be 1-D arrays of the same length")
    useful = np.asarray(useful, dtype=np.int64)
    unused = np.asarray(spread_unused, dtype=np.int64)
    if np.intersect1d(useful, unused).size:
        raise InvalidInputError("a node cannot be both useful and spread_unused: "
                                f"{np.intersect1d(useful, unused).tolist()}")
    plus = np.isin(src, useful) & np.isin(dst, useful)
    minus = np.isin(dst, unused) & np.isin(src, np.asarray(active, dtype=np.int64))
    return plus.astype(np.int8) - minus.astype(np.int8)


def learn_edge_weights(weight: np.ndarray, signal: np.ndarray, *,
                       alpha: float = 0.1) -> np.ndarray:
    """Eq. 2: ``w <- clip(w + alpha * signal, 0, 1)``, per edge; returns new weights.

    >>> learn_edge_weights(np.array([0.5, 0.95, 0.05, 0.3]), np.array([1, 1, -1, 0]))
    array([0.6, 1. , 0. , 0.3])
    """
    w = np.asarray(weight, dtype=np.float64)
    s = np.asarray(signal)
    if w.shape != s.shape:
        raise InvalidInputError(f"weight and signal must have the same shape, got "
                                f"{w.shape} and {s.shape}")
    if not (np.isfinite(alpha) and alpha >= 0):
        raise InvalidInputError(f"alpha must be a finite number >= 0, got {alpha!r}")
    if s.size and not np.isin(s, (-1, 0, 1)).all():
        raise InvalidInputError("signal must hold only -1, 0 and +1")
    return np.clip(w + alpha * s, 0.0, 1.0)


def update_edge_weights(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, *,
                        useful: np.ndarray, spread_unused: np.ndarray, active: np.ndarray,
                        alpha: float = 0.1) -> np.ndarray:
    """One feedback step on edge arrays: :func:`feedback_signal` then
    :func:`learn_edge_weights`; returns the new weights (the inputs are not changed).

    >>> update_edge_weights(np.array([0, 1]), np.array([1, 2]), np.array([0.5, 0.5]),
    ...                     useful=np.array([0, 1]), spread_unused=np.array([2]),
    ...                     active=np.array([0, 1, 2]))
    array([0.6, 0.4])
    """
    signal = feedback_signal(src, dst, useful=useful, spread_unused=spread_unused, active=active)
    return learn_edge_weights(weight, signal, alpha=alpha)


def update_edge_weights_reference(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, *,
                                 useful: np.ndarray, spread_unused: np.ndarray,
                                 active: np.ndarray, alpha: float = 0.1) -> np.ndarray:
    """:func:`feedback_signal` then :func:`learn_edge_weights`, one edge at a time (tests)."""
    useful_set = set(np.asarray(useful).tolist())
    unused_set = set(np.asarray(spread_unused).tolist())
    active_set = set(np.asarray(active).tolist())
    out = []
    for j, i, w in zip(np.asarray(src).tolist(), np.asarray(dst).tolist(),
                       np.asarray(weight, dtype=np.float64).tolist()):
        signal = 0
        if j in useful_set and i in useful_set:
            signal = 1
        elif i in unused_set and j in active_set:
            signal = -1
        out.append(min(1.0, max(0.0, w + alpha * signal)))
    return np.array(out, dtype=np.float64)


def with_learned_weights(src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
                         learned_src: np.ndarray, learned_dst: np.ndarray,
                         learned_weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The k-NN edges with the learned weights applied: a learned pair that is an edge
    takes its learned weight; one that is not (a link feedback created, or a k-NN link
    the graph lost as it grew) is added. Sorted by (src, dst).

    >>> [a.tolist() for a in with_learned_weights(np.array([0, 1]), np.array([1, 0]),
    ...     np.array([0.5, 0.5]), np.array([1, 2]), np.array([0, 0]), np.array([0.9, 0.1]))]
    [[0, 1, 2], [1, 0, 0], [0.5, 0.9, 0.1]]
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    weight = np.array(weight, dtype=np.float64)
    ls = np.asarray(learned_src, dtype=np.int64)
    ld = np.asarray(learned_dst, dtype=np.int64)
    lw = np.asarray(learned_weight, dtype=np.float64)
    if not (src.shape == dst.shape == weight.shape and ls.shape == ld.shape == lw.shape):
        raise InvalidInputError("edge arrays and learned arrays must each have one length")
    if ls.size == 0:
        return src, dst, weight
    m = int(max(src.max(initial=-1), dst.max(initial=-1), ls.max(), ld.max())) + 1
    code = src * m + dst
    lcode = ls * m + ld
    pos = {int(c): k for k, c in enumerate(code)}
    extra = []
    for k, c in enumerate(lcode.tolist()):
        j = pos.get(c)
        if j is None:
            extra.append(k)
        else:
            weight[j] = lw[k]
    src = np.concatenate([src, ls[extra]])
    dst = np.concatenate([dst, ld[extra]])
    weight = np.concatenate([weight, lw[extra]])
    order = np.lexsort((dst, src))
    return src[order], dst[order], weight[order]


# --------------------------------------------------------------------------------------------
# the retrieval model
# --------------------------------------------------------------------------------------------
def _gamma(v: Any) -> str | None:
    return None if prm.positive(v) is None and v <= 1 else "must be a number in (0, 1]"


def _gap_rank(v: Any) -> str | None:
    return None if prm.positive_int(v) is None and v >= 2 else "must be an int >= 2"


PARAMS = prm.ParamSpec("evermind", {
    "gamma": (0.95, _gamma),
    "rounds": (3, prm.non_negative_int),
    "init_k": (5, prm.positive_int),
    "k": (3, prm.positive_int),
    "mutual": (True, prm.boolean),
    "floor": (0.35, prm.cosine),
    "gate": (False, prm.boolean),
    "gate_top1": (0.5, prm.cosine),
    "gate_gap": (0.05, prm.non_negative),
    "gate_rank": (3, _gap_rank),
    "learn_links": (False, prm.boolean),
    "rank": ("model", prm.choice("model", "hybrid")),
})


class EvermindModel:
    """Evermind's spreading as a retrieval model (``SynapseConfig(model="evermind")``).

    Hyperparameters, ``SynapseConfig(model_params={"evermind": {...}})`` (paper defaults):

    ``gamma`` 0.95
        share of activation a node keeps per round (the paper sweeps 0.70-1.0; 1.0 is no
        spreading: only the seeds are scored; the bench's ``evermind-g<x>`` methods).
    ``rounds`` 3
        rounds of spreading.
    ``init_k`` 5
        seeds: the most similar episodes, activation = their cosine.
    ``k`` 3, ``mutual`` True, ``floor`` 0.35
        the k-NN graph over the episodes' embeddings (``mutual=False``: the open variant).
    ``gate`` False, ``gate_top1`` 0.5, ``gate_gap`` 0.05, ``gate_rank`` 3
        confidence-gated spreading (proposed in the paper, untested there; the thresholds
        are ours): with ``gate`` on, spread only when the best seed's cosine is below
        ``gate_top1`` or its lead over the ``gate_rank``-th best is below ``gate_gap``;
        otherwise ``a = a(0)``.
    ``learn_links`` False
        usage feedback (:meth:`Synapse.feedback`) on two used memories that are not linked
        creates the link (weight ``alpha``) instead of leaving them apart (ours: Eq. 2
        updates existing edges only).
    ``rank`` "model"
        ``"model"``: rank by the final activation, as the paper does; ``"hybrid"``: leave
        the ranking to the engine's hybrid score (the activation enters it).

    Learned weights (``view.learned["evermind"]``, from feedback) replace the cosine of
    the pairs they name, and add the links feedback created.

    The graph holds episodes only (concepts get no activation); it is built once per graph
    version and, through the model's :class:`~._neighbors.NeighborIndex`, updated rather
    than rebuilt when the graph grows.
    """

    name = "evermind"

    def __init__(self) -> None:
        self.neighbors = NeighborIndex()

    def graph(self, view: GraphView, config: SynapseConfig) -> tuple[np.ndarray, np.ndarray,
                                                                       np.ndarray]:
        """The k-NN edges ``(src, dst, weight)`` in view indices (cached on the view)."""
        p = prm.read_params(config, PARAMS)
        return self._edges(view, p)

    def _edges(self, view: GraphView, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
        table: NeighborTable = neighbor_table(view, subset="episodes", k=p["k"],
                                              index=self.neighbors)

        def build(v: GraphView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            s, d, w = knn_edges(table.index, table.sim, k=p["k"], mutual=p["mutual"],
                                floor=p["floor"])
            learned = [(v.index.get(a), v.index.get(b), x)
                       for (a, b), x in v.learned.get(self.name, {}).items()]
            learned = [t for t in learned if t[0] is not None and t[1] is not None]
            ls, ld, lw = (np.array(c) for c in zip(*learned)) if learned else \
                (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
            return with_learned_weights(table.rows[s], table.rows[d], w, ls, ld, lw)

        return view.derived(f"evermind.edges:{p['k']}:{p['mutual']}:{p['floor']!r}", build)

    def learnable_edges(self, view: GraphView, config: SynapseConfig) -> LearnableEdges:
        """The k-NN edges with their current (learned) weights; learned weights are kept
        in ``MemoryGraph.learned["evermind"]``."""
        p = prm.read_params(config, PARAMS)
        src, dst, w = self._edges(view, p)
        return LearnableEdges(self.name, src, dst, w, grow=p["learn_links"])

    def activate(self, view: GraphView, query: Query, config: SynapseConfig) -> Activation:
        p = prm.read_params(config, PARAMS)
        a0 = seed_activation(query.sim, init_k=p["init_k"], eligible=view.is_episode)
        seeds = np.flatnonzero(a0 > 0)
        spread = p["rounds"] > 0 and p["gamma"] < 1.0 and config.use_graph
        if spread and p["gate"]:
            ep_sim = np.where(view.is_episode, np.asarray(query.sim, dtype=np.float64), -np.inf)
            top = ep_sim[top_k(ep_sim, p["gate_rank"])]
            spread = spread_is_needed(top[top > -np.inf], top1_below=p["gate_top1"],
                                      gap_below=p["gate_gap"], gap_rank=p["gate_rank"])
        if not spread or seeds.size == 0:
            return Activation(a0, parents=np.full(view.n, -1, dtype=np.int64),
                              score=a0 if p["rank"] == "model" else None)

        def build(v: GraphView) -> sp.csr_array:
            src, dst, w = self._edges(v, p)
            return propagation_matrix(src, dst, w, v.n, use_fan_effect=True, fan_exponent=1.0)

        P = view.derived(f"evermind.P:{p['k']}:{p['mutual']}:{p['floor']!r}", build)
        a, parents = spread_with_parents(a0, P, gamma=p["gamma"], rounds=p["rounds"])
        return Activation(a, parents=parents, score=a if p["rank"] == "model" else None)

"""SynapticRAG: temporal binding scores and leaky integrate-and-fire recall (seed paper 002).

Every node carries a *spike train*: the times it was stimulated, with the stimulus values.
A stimulus starts at the query and passes from node to node:

- From a parent ``X`` (the query first) it reaches ``X``'s neighbours in vector space whose
  cosine with ``X`` is at least ``cos_th`` (at most ``max_children`` of them, the nearest:
  the paper searches a Faiss index). The child ``Y`` receives ``stim(X) * B(X, Y)``
  (``stim(query) = 1``), so a stimulus is the product of the binding scores along its chain.
- Binding score (Eqs. 1-3): ``B = B_scale * T * cos(X, Y)``, ``T = sigmoid(sum_i f(d_i))``,
  ``f(d) = exp(-d / tau)``, the ``d_i`` read from the DTW cumulative distance matrix of the
  two spike-time series (``dtaidistance``).
- Each stimulated node is a dynamic leaky integrate-and-fire neuron (Eqs. 4-6):
  ``tau dI/dt = -I + sum S delta(t - t_f)``, ``tau dV/dt = -V + I``; ``tau`` grows by
  ``(1 - e^-dt) / (1 + e^-dt)`` at each stimulus (``dt``: time since the previous one);
  a node whose ``V`` reaches ``v_th`` fires: ``V, I <- V_rest, I_rest`` (``tau`` is kept).
- Fired nodes are the result and do not pass the stimulus on; a node that did not fire
  passes it on (once) when its stimulus is at least ``stim_th``
  (:func:`~.stimulus.propagate_stimulus`, in :mod:`.stimulus` with its slow reference).

DECISIONS (the paper leaves these open; docs/models.md explains each):

- Spike trains are derived from the view: an episode was stimulated when it happened
  (``ts``, else ``ingest_ts``), a concept each time one of its linked episodes happened,
  each with stimulus 1; plus any stimuli recorded in a node's ``spikes`` attribute (a list
  of ``[epoch seconds, value]``): the stimuli of earlier retrievals, which the engine
  records after each one (the model returns them as ``Activation.spikes``: a model must
  not write during ``activate``; the last ``MAX_SPIKES`` are kept). The query is a node
  stimulated once, at the query time (``query_time``, else the query's own time, else the
  latest event in the view).
- Times are in ``time_unit`` (days by default), times ``t_scale``.
- ``tau`` of Eq. 1 ("the average strength of the connected memory nodes") is
  ``tau_scale`` times the mean of the two nodes' LIF time constants, each that of Eq. 4
  after the node's own spike train (the query: ``tau_init``).
- The ``d_i`` are the cumulative distances on the optimal warping path (``dtw_cells=
  "path"``) or every cell of the matrix (``"matrix"``); dtaidistance's matrix holds the
  square root of the accumulated squared differences. A node without a spike train has no
  temporal evidence: ``T = sigmoid(0) = 0.5``.
- The LIF equations are integrated exactly between stimuli (the input current jumps by
  ``S / tau`` at a stimulus, Eq. 5 integrated across the delta); a node fires when ``V``
  reaches ``v_th`` at any time after a stimulus (the peak of the free evolution, before
  the next stimulus), and is reset at the crossing. All stimuli of one retrieval arrive
  at the query time.

>>> tau_increment(np.array([0.0, 1.0, 50.0])).round(4)
array([0.    , 0.4621, 1.    ])
>>> lif_free(np.array([0.0]), np.array([1.0]), tau=np.array([1.0]), dt=np.array([1.0]))[0].round(4)
array([0.3679])
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import expit

from ...errors import InvalidInputError, MissingDependencyError
from ..state.validation import MAX_SPIKES
from . import _params as prm
from ._neighbors import NeighborIndex, neighbor_table
from .base import Activation, Query
from .lif import (  # noqa: F401  (re-exported: the neuron is part of the model)
    LIFState,
    lif_advance,
    lif_free,
    lif_peak,
    lif_run,
    lif_run_reference,
    tau_after,
    tau_increment,
)
from .stimulus import propagate_stimulus

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ...config import SynapseConfig
    from ..graph.graph import Compiled as GraphView

__all__ = [
    "MAX_SPIKES",
    "LIFState",
    "SynapticModel",
    "binding_score",
    "lif_advance",
    "lif_free",
    "lif_peak",
    "lif_run",
    "lif_run_reference",
    "event_trains",
    "spike_trains",
    "tau_after",
    "tau_increment",
    "temporal_score",
    "temporal_scores_one_spike",
]


_SECONDS = {"seconds": 1.0, "minutes": 60.0, "hours": 3600.0, "days": 86400.0}
_CACHE_SIZE = 1_000_000  # entries per cache; cleared when full


# --------------------------------------------------------------------------------------------
# Eqs. 1-3: temporal and binding scores (DTW from dtaidistance)
# --------------------------------------------------------------------------------------------
def _dtw() -> Any:
    try:
        from dtaidistance import dtw
    except ImportError as exc:  # pragma: no cover - it is a dependency
        raise MissingDependencyError(
            "the SynapticRAG model needs dtaidistance: pip install dtaidistance") from exc
    return dtw


def temporal_score(times_x: Sequence[float], times_y: Sequence[float], *, tau: float,
                   cells: str = "path") -> float:
    """Eq. 2: ``T = sigmoid(sum_i exp(-d_i / tau))``, the ``d_i`` from dtaidistance's
    cumulative DTW matrix of the two spike-time series: the cells of the optimal warping
    path (``cells="path"``) or all cells (``"matrix"``). ``T`` is 0.5 when a series is empty.

    >>> round(temporal_score([0.0], [0.0], tau=1.0), 4)  # d = 0: f = 1
    0.7311
    >>> round(temporal_score([0.0], [2.0, 3.0], tau=1.0), 4)  # d = 2, sqrt(4 + 9)
    0.5405
    """
    if not (math.isfinite(tau) and tau > 0):
        raise InvalidInputError(f"tau must be a finite number > 0, got {tau!r}")
    if cells not in ("path", "matrix"):
        raise InvalidInputError(f"cells must be 'path' or 'matrix', got {cells!r}")
    x = np.ascontiguousarray(times_x, dtype=np.float64)
    y = np.ascontiguousarray(times_y, dtype=np.float64)
    if x.size == 0 or y.size == 0:
        return 0.5
    dtw = _dtw()
    _, paths = dtw.warping_paths(x, y, use_c=True)
    if cells == "path":
        d = np.array([paths[i + 1, j + 1] for i, j in dtw.best_path(paths)])
    else:
        d = paths[1:, 1:].ravel()
    return float(expit(np.exp(-d / tau).sum()))


def binding_score(times_x: Sequence[float], times_y: Sequence[float], cos: float, *,
                  tau: float, b_scale: float = 1.0, cells: str = "path") -> float:
    """Eq. 3 (with the paper's ``B_scale``): ``b_scale * T * cos``.

    >>> round(binding_score([0.0], [0.0], 0.5, tau=1.0), 4)
    0.3655
    """
    return float(b_scale * temporal_score(times_x, times_y, tau=tau, cells=cells) * cos)


def temporal_scores_one_spike(single: np.ndarray, flat: np.ndarray, lengths: np.ndarray, *,
                              tau: np.ndarray) -> np.ndarray:
    """:func:`temporal_score` for many pairs at once where one train of each pair holds a
    single spike ``single[r]`` and the other the ``lengths[r]`` times that follow each other
    in ``flat``. With one spike on a side the DTW matrix is a single row: one warping path
    through every cell, whose cumulative distances are ``sqrt(sum_{l <= j} (x - y_l)^2)``
    (the same in ``"path"`` and ``"matrix"`` mode); :func:`temporal_score`, through
    dtaidistance, is the reference the tests hold this to. A pair with an empty train gets
    0.5.

    >>> temporal_scores_one_spike(np.array([0.0, 5.0]), np.array([2.0, 3.0, 5.0]),
    ...                           np.array([2, 1]), tau=np.ones(2)).round(4)
    array([0.5405, 0.7311])
    """
    single = np.asarray(single, dtype=np.float64)
    flat = np.asarray(flat, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.int64)
    tau = np.asarray(tau, dtype=np.float64)
    out = np.full(single.size, 0.5)
    if flat.size == 0:
        return out
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    owner = np.repeat(np.arange(single.size), lengths)
    sq = np.cumsum((single[owner] - flat) ** 2)
    before = np.concatenate(([0.0], sq))[np.repeat(starts, lengths)]
    f = np.exp(-np.sqrt(np.maximum(sq - before, 0.0)) / tau[owner])
    has = lengths > 0
    out[has] = expit(np.add.reduceat(f, starts[has]))
    return out


# --------------------------------------------------------------------------------------------
# spike trains from the view
# --------------------------------------------------------------------------------------------
def _seconds(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


Train = tuple[tuple[float, ...], tuple[float, ...]]


def event_trains(view: GraphView) -> list[Train]:
    """Each node's spike train from the memory's own events, ``(times, values)`` sorted:
    an episode's event time (``ts``, else ``ingest_ts``), a concept's linked episodes'
    event times (edges either way), each with value 1 (built once per graph version)."""
    n = view.n
    ts = view.node_values("ts", None)
    ingest = view.node_values("ingest_ts", None)
    own = [_seconds(a) if _seconds(a) is not None else _seconds(b) for a, b in zip(ts, ingest)]
    events: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    ep = view.is_episode
    for k in np.flatnonzero(ep):
        if own[k] is not None:
            events[k].append((own[k], 1.0))
    src, dst = np.asarray(view.src), np.asarray(view.dst)
    link = ep[src] != ep[dst]
    concept = np.where(ep[src[link]], dst[link], src[link])
    episode = np.where(ep[src[link]], src[link], dst[link])
    pairs = sorted(set(zip(concept.tolist(), episode.tolist())))
    for c, e in pairs:
        if own[e] is not None:
            events[c].append((own[e], 1.0))
    out = []
    for ev in events:
        ev.sort()
        out.append((tuple(t for t, _ in ev), tuple(v for _, v in ev)))
    return out


def spike_trains(view: GraphView, base: Sequence[Train] | None = None) -> list[Train]:
    """Each node's spike train ``(times, values)``, times in epoch seconds, sorted: its
    :func:`event_trains` (``base``, computed when not given) plus the stimuli recorded at
    retrieval in its ``spikes`` attribute (``[[seconds, value], ...]``). A node without
    recorded stimuli keeps its base train object."""
    base = event_trains(view) if base is None else base
    out = list(base)
    for k, rec in enumerate(view.node_values("spikes", None)):
        if rec:
            ev = list(zip(*base[k]))
            for item in rec:
                t, val = (_seconds(item[0]), _seconds(item[1])) if len(item) == 2 else (None, None)
                if t is not None and val is not None:
                    ev.append((t, val))
            ev.sort()
            out[k] = (tuple(t for t, _ in ev), tuple(v for _, v in ev))
    return out


# --------------------------------------------------------------------------------------------
# the retrieval model
# --------------------------------------------------------------------------------------------
def _ranges(lengths: np.ndarray) -> np.ndarray:
    """``concat(arange(l) for l in lengths)``."""
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    return np.arange(int(lengths.sum())) - np.repeat(starts, lengths)


PARAMS = prm.ParamSpec("synaptic", {
    "cos_th": (0.5, prm.cosine),
    "stim_th": (0.1, prm.non_negative),
    "v_th": (0.05, prm.positive),
    "v_rest": (0.0, prm.finite),
    "i_rest": (0.0, prm.non_negative),
    "tau_init": (1.0, prm.positive),
    "tau_scale": (1.0, prm.positive),
    "t_scale": (1.0, prm.positive),
    "b_scale": (1.0, prm.positive),
    "time_unit": ("days", prm.choice(*_SECONDS)),
    "max_children": (10, prm.positive_int),
    "max_generations": (5, prm.positive_int),
    "dtw_cells": ("path", prm.choice("path", "matrix")),
    "query_time": (None, prm.optional(prm.finite)),
    "record_spikes": (True, prm.boolean),
    "rank": ("model", prm.choice("model", "hybrid")),
})


class SynapticModel:
    """SynapticRAG's stimulus propagation and LIF firing (``SynapseConfig(model="synaptic")``).

    Hyperparameters, ``SynapseConfig(model_params={"synaptic": {...}})``. The paper tunes nine of
    them with Optuna and publishes no values: every default below is ours.

    ``cos_th`` 0.5, ``max_children`` 10
        a stimulus reaches a node's (or the query's) ``max_children`` nearest nodes whose
        cosine is at least ``cos_th``.
    ``stim_th`` 0.1
        a node that did not fire passes the stimulus on when it is at least this.
    ``v_th`` 0.05, ``v_rest`` 0, ``i_rest`` 0, ``tau_init`` 1
        the neuron: firing threshold, reset values, initial time constant. With these, a
        node stimulated once after a long quiet spell (``tau`` about 2) fires when its
        stimulus is at least ``v_th * tau * e``, about 0.27.
    ``tau_scale`` 1, ``t_scale`` 1, ``b_scale`` 1, ``time_unit`` "days"
        the paper's scaling constants for ``tau`` (binding), time and ``B``; the unit of
        time of Eqs. 1 and 4.
    ``max_generations`` 5
        a cap on the chain length (the thresholds usually stop it earlier).
    ``dtw_cells`` "path"
        which cells of the DTW matrix give the ``d_i``.
    ``query_time`` None
        epoch seconds of the query; None: the query's own time (``retrieve(..., at=)``),
        else the latest event in the view.
    ``record_spikes`` True
        ask the engine to record each stimulated node's stimulus, at the query time, in
        its spike train (``spikes`` attribute; the last ``MAX_SPIKES`` are kept).
    ``rank`` "model"
        ``"model"``: rank by peak potential over threshold (fired nodes score >= 1; only
        fired nodes join the anchors as candidates), as the paper returns fired nodes;
        ``"hybrid"``: leave the ranking to the engine's hybrid score (the stimulus enters
        it as the activation).

    Concepts take part (their spike trains are their episodes' times). The spike trains,
    the neurons' states after them and the vector-space neighbours are built once per
    graph version; binding scores are cached per pair of spike trains.
    """

    name = "synaptic"

    def __init__(self) -> None:
        self.neighbors = NeighborIndex()
        self._lock = threading.Lock()
        self._binding_cache: dict[tuple[Any, ...], float] = {}
        self._state_cache: dict[tuple[Any, ...], LIFState] = {}
        # per neuron setting: (view, trains, states) of the last build (see _states)
        self._last_states: dict[tuple[Any, ...], tuple[Any, list[Train], np.ndarray]] = {}

    # -- per view ---------------------------------------------------------------------------
    def _trains(self, view: GraphView) -> list[Train]:
        # the events' trains live under another prefix than "synaptic.": recording spikes
        # drops only the merged trains and what depends on them
        base = view.derived("synaptic-events", event_trains)
        return view.derived("synaptic.trains", lambda v: spike_trains(v, base))

    def _flat_times(self, view: GraphView) -> tuple[np.ndarray, np.ndarray]:
        """Every node's spike times, concatenated (epoch seconds), and each node's offset."""
        def build(v: GraphView) -> tuple[np.ndarray, np.ndarray]:
            trains = self._trains(v)
            lengths = np.array([len(t) for t, _ in trains], dtype=np.int64)
            flat = np.fromiter((x for t, _ in trains for x in t), dtype=np.float64,
                               count=int(lengths.sum()))
            return flat, np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        return view.derived("synaptic.flat", build)

    def _states(self, view: GraphView, p: dict[str, Any]) -> tuple[np.ndarray, ...]:
        unit = _SECONDS[p["time_unit"]] / p["t_scale"]
        key = (unit, p["tau_init"], p["v_th"], p["v_rest"], p["i_rest"])

        def build(v: GraphView) -> tuple[np.ndarray, ...]:
            trains = self._trains(v)
            out = np.empty((len(trains), 4))
            # after spikes were recorded on the same view, only the changed trains are new
            # objects: the other rows are copied from the last build
            last = self._last_states.get(key)
            same = last is not None and last[0] is v and len(last[1]) == len(trains)
            for k, train in enumerate(trains):
                if same and last[1][k] is train:
                    out[k] = last[2][k]
                    continue
                times, values = train
                ck = (key, times, values)
                with self._lock:
                    st = self._state_cache.get(ck)
                if st is None:
                    st = lif_run([t / unit for t in times], values, tau_init=p["tau_init"],
                                 v_th=p["v_th"], v_rest=p["v_rest"], i_rest=p["i_rest"])
                    with self._lock:
                        if len(self._state_cache) >= _CACHE_SIZE:
                            self._state_cache.clear()
                        self._state_cache[ck] = st
                out[k] = (st.v, st.i, st.tau, st.t_last * unit if times else -np.inf)
            self._last_states[key] = (v, trains, out)
            return tuple(out.T)

        return view.derived(f"synaptic.states:{key!r}", build)

    # -- the query --------------------------------------------------------------------------
    def activate(self, view: GraphView, query: Query, config: SynapseConfig) -> Activation:
        p = prm.read_params(config, PARAMS)
        n = view.n
        if n == 0:
            return Activation(np.zeros(0))
        unit = _SECONDS[p["time_unit"]] / p["t_scale"]
        trains = self._trains(view)
        v0, i0, tau0, t_last = self._states(view, p)
        t_query = p["query_time"] if p["query_time"] is not None else query.time
        if t_query is None:
            finite = t_last[np.isfinite(t_last)]
            t_query = float(finite.max()) if finite.size else 0.0
        idle = np.where(np.isfinite(t_last), np.maximum(t_query - t_last, 0.0) / unit, 0.0)

        sim = np.nan_to_num(np.asarray(query.sim, dtype=np.float64), nan=-1.0)
        kk = min(p["max_children"], n)
        first = np.argpartition(-sim, kk - 1)[:kk] if kk else np.zeros(0, dtype=np.int64)
        first = first[np.lexsort((first, -sim[first]))]
        if config.use_graph:
            table = neighbor_table(view, subset="all", k=p["max_children"], index=self.neighbors)
            nbr, nbr_cos = table.index, table.sim
        else:  # no spreading between memories: only the query's own stimulus
            nbr = np.full((n, 1), -1, dtype=np.int64)
            nbr_cos = np.full((n, 1), -np.inf, dtype=np.float32)
        flat, offsets = self._flat_times(view)
        lengths = np.diff(offsets)
        bkey = (unit, p["tau_init"], p["tau_scale"], p["dtw_cells"])

        def binding(parents: np.ndarray, children: np.ndarray, cos: np.ndarray) -> np.ndarray:
            query_side = parents < 0
            pa = np.maximum(parents, 0)
            la = np.where(query_side, 1, lengths[pa])
            lb = lengths[children]
            tau_b = p["tau_scale"] * (np.where(query_side, p["tau_init"], tau0[pa])
                                      + tau0[children]) / 2.0
            T = np.full(children.size, 0.5)
            # one side a single spike (the query always is): vectorised, no DTW call
            one = (np.minimum(la, lb) >= 1) & ((la == 1) | (lb == 1))
            if one.any():
                a_single = la[one] == 1  # else the child holds the single spike
                from_query = a_single & query_side[one]
                x = np.empty(a_single.size)
                x[from_query] = t_query
                x[a_single & ~from_query] = flat[offsets[pa[one][a_single & ~from_query]]]
                x[~a_single] = flat[offsets[children[one][~a_single]]]
                other = np.where(a_single, children[one], pa[one])
                n_other = lengths[other]
                pos = np.repeat(offsets[other], n_other) + _ranges(n_other)
                T[one] = temporal_scores_one_spike(x / unit, flat[pos] / unit, n_other,
                                                   tau=tau_b[one])
            # both sides with several spikes: dtaidistance, cached per pair of trains
            for r in np.flatnonzero((la > 1) & (lb > 1)):
                a, b = int(parents[r]), int(children[r])
                ta, tb = trains[a][0], trains[b][0]
                ck = (bkey, ta, tb)
                with self._lock:
                    t = self._binding_cache.get(ck)
                if t is None:
                    t = temporal_score([x / unit for x in ta], [x / unit for x in tb],
                                       tau=float(tau_b[r]), cells=p["dtw_cells"])
                    with self._lock:
                        if len(self._binding_cache) >= _CACHE_SIZE:
                            self._binding_cache.clear()
                        self._binding_cache[ck] = t
                T[r] = t
            return p["b_scale"] * T * cos

        prop = propagate_stimulus(
            first, sim[first], nbr, nbr_cos, binding, v=v0, i=i0, tau=tau0, idle=idle,
            cos_th=p["cos_th"], stim_th=p["stim_th"], v_th=p["v_th"], v_rest=p["v_rest"],
            i_rest=p["i_rest"], max_generations=p["max_generations"])
        fired = np.flatnonzero(prop.fired)
        record = dict(spikes=prop.stimulus, spike_time=float(t_query)) \
            if p["record_spikes"] else {}
        if p["rank"] == "model":
            return Activation(prop.stimulus, parents=prop.parent, reached=fired,
                              score=prop.peak / p["v_th"], **record)
        return Activation(prop.stimulus, parents=prop.parent, **record)

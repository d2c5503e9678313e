"""mnemos: BFS energy spreading over a cosine graph, and affective routing (seed paper 004,
sections 3.3, 3.5, 5.2, 5.3).

Spreading (3.5). The memories are linked where their cosine is at least ``threshold``
(0.6; the weight of a link is its cosine). The closest memory to the query is the seed; it
gets energy ``E0 = 1``; energy then moves outwards breadth-first, a node passing
``E * (1 - delta) * w`` to each neighbour (``delta = 0.2``), for at most ``max_hops`` hops;
every node whose accumulated energy is at least 0.3 is returned.

How the paper's numbers pin the BFS down (its 4-node chain, 5.3, edge weight 0.8): a node
accumulates everything it receives, including energy sent back from later hops
(``delta = 0.2``: the seed ends at ``1 + 0.64 * 0.64 = 1.41``); it passes on only the
energy it *arrived* with (not the total), once; and nothing leaves the third hop
(``delta = 0``: the last node sends nothing back, 0.64 stays 0.64). With these rules the
chain gives the paper's [1.41, 0.90, 0.41, 0.26] and [1.64, 1.31, 0.64, 0.51]
(:func:`bfs_energy`, tested). DECISION: where several nodes of one hop reach a new node,
it arrives with the largest of their transfers (the paper's chain never says; the mnemos
queue takes whichever parent it happened to dequeue first).

Affective routing (3.3). Each text is tagged with a cognitive state ``(valence, arousal,
complexity)`` in ``[-1, 1] x [0, 1] x [0, 1]``; a candidate scores
``0.7 * sim + 0.3 * (1 - d_state)``, ``d_state`` the Euclidean distance between the
query's state and the candidate's divided by its maximum ``sqrt(6)``. The taggers and the
score are in :mod:`.affect` (:class:`~.affect.AffectTagger`:
:class:`~.affect.LexiconAffectTagger`, offline, or :class:`~.affect.LLMAffectTagger`, any
LangChain chat model).

>>> import numpy as np
>>> indptr, indices, w = np.array([0, 1, 3, 5, 6]), np.array([1, 0, 2, 1, 3, 2]), np.full(6, 0.8)
>>> bfs_energy(indptr, indices, w, 0, decay=0.2, max_hops=3)[0].round(2)
array([1.41, 0.9 , 0.41, 0.26])
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidInputError, InvalidTypeError
from . import _params as prm
from ._neighbors import NeighborIndex, neighbor_table
from .affect import AffectTagger, LexiconAffectTagger, affective_score, stored_state
from .base import Activation, Query

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ...config import SynapseConfig
    from ..graph.graph import Compiled as GraphView

__all__ = [
    "MnemosModel",
    "bfs_energy",
    "bfs_energy_reference",
    "cosine_graph",
]

_TAG_CACHE_SIZE = 1_000_000


# --------------------------------------------------------------------------------------------
# the cosine graph and the BFS (3.5, 5.3)
# --------------------------------------------------------------------------------------------
def cosine_graph(index: np.ndarray, sim: np.ndarray, *,
                 threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The undirected graph ``i -- j`` where ``j`` is in ``i``'s neighbour table (or ``i``
    in ``j``'s) with cosine >= ``threshold``, as CSR arrays ``(indptr, indices, weight)``
    (neighbours sorted by index; weight: the cosine).

    With a table as wide as the graph is large this is every pair above the threshold
    (the paper); a narrower table caps the degree (the model's ``max_neighbors``).

    >>> idx = np.array([[1, 2], [0, 2], [0, 1]]); s = np.array([[0.9, 0.5], [0.9, 0.7], [0.5, 0.7]])
    >>> [a.tolist() for a in cosine_graph(idx, s, threshold=0.6)]
    [[0, 1, 3, 4], [1, 0, 2, 1], [0.9, 0.9, 0.7, 0.7]]
    """
    index = np.asarray(index, dtype=np.int64)
    sim = np.asarray(sim, dtype=np.float64)
    if index.shape != sim.shape or index.ndim != 2:
        raise InvalidInputError("index and sim must be 2-D arrays of the same shape")
    m, k = index.shape
    src = np.repeat(np.arange(m), k)
    dst, w = index.ravel(), sim.ravel()
    keep = (dst >= 0) & (w >= threshold)
    src, dst, w = src[keep], dst[keep], w[keep]
    both_src = np.concatenate([src, dst])
    both_dst = np.concatenate([dst, src])
    both_w = np.concatenate([w, w])
    code = both_src * m + both_dst
    order = np.lexsort((-both_w, code))  # by pair, strongest first
    code, both_w = code[order], both_w[order]
    first = np.ones(code.size, dtype=bool)
    first[1:] = code[1:] != code[:-1]
    code, both_w = code[first], both_w[first]
    rows, cols = code // max(m, 1), code % max(m, 1)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]).astype(np.int64)
    return indptr, cols.astype(np.int64), both_w


def _check_bfs(indptr: np.ndarray, indices: np.ndarray, weight: np.ndarray, seed: int,
               decay: float, max_hops: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    m = indptr.size - 1
    if m < 1 or indices.shape != weight.shape or indptr[-1] != indices.size:
        raise InvalidInputError("indptr, indices, weight must be CSR arrays of one graph")
    if not 0 <= int(seed) < m:
        raise InvalidInputError(f"seed must be a node index in [0, {m}), got {seed!r}")
    if not 0.0 <= decay <= 1.0:
        raise InvalidInputError(f"decay must be in [0, 1], got {decay!r}")
    if isinstance(max_hops, bool) or not isinstance(max_hops, (int, np.integer)) or max_hops < 0:
        raise InvalidInputError(f"max_hops must be an int >= 0, got {max_hops!r}")
    return indptr, indices, weight


def bfs_energy(indptr: np.ndarray, indices: np.ndarray, weight: np.ndarray, seed: int, *,
               energy: float = 1.0, decay: float = 0.2,
               max_hops: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Energy of every node after the BFS of 3.5 from ``seed`` (module docstring: the
    rules), and each reached node's parent (the node it arrived from; -1 for the seed and
    unreached nodes). One vectorised step per hop over the frontier's edges.

    Returns ``(energy, parent)``.
    """
    indptr, indices, weight = _check_bfs(indptr, indices, weight, seed, decay, max_hops)
    m = indptr.size - 1
    E = np.zeros(m)
    E[seed] = energy
    parent = np.full(m, -1, dtype=np.int64)
    visited = np.zeros(m, dtype=bool)
    visited[seed] = True
    frontier = np.array([seed], dtype=np.int64)
    arrived = np.array([float(energy)])
    for _ in range(max_hops):
        starts = indptr[frontier]
        counts = indptr[frontier + 1] - starts
        if counts.sum() == 0:
            break
        first = np.concatenate(([0], np.cumsum(counts)[:-1]))
        pos = np.arange(counts.sum()) - np.repeat(first - starts, counts)
        nbr = indices[pos]
        sender = np.repeat(frontier, counts)
        transfer = np.repeat(arrived, counts) * (1.0 - decay) * weight[pos]
        E += np.bincount(nbr, weights=transfer, minlength=m)
        new = ~visited[nbr]
        if not new.any():
            break
        nbr, sender, transfer = nbr[new], sender[new], transfer[new]
        # strongest transfer per new node, lowest sender on ties
        order = np.lexsort((sender, -transfer, nbr))
        nbr, sender, transfer = nbr[order], sender[order], transfer[order]
        head = np.ones(nbr.size, dtype=bool)
        head[1:] = nbr[1:] != nbr[:-1]
        frontier, arrived = nbr[head], transfer[head]
        parent[frontier] = sender[head]
        visited[frontier] = True
    return E, parent


def bfs_energy_reference(neighbors: dict[int, list[tuple[int, float]]], m: int, seed: int, *,
                         energy: float = 1.0, decay: float = 0.2,
                         max_hops: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """The same BFS hop by hop with Python lists (tests only); ``neighbors[i]`` lists
    ``(j, w)``."""
    E = [0.0] * m
    E[seed] = energy
    parent = [-1] * m
    visited = {seed}
    frontier = [(seed, energy)]
    for _ in range(max_hops):
        best: dict[int, tuple[float, int]] = {}
        for node, arrived in frontier:
            for j, w in neighbors.get(node, []):
                t = arrived * (1.0 - decay) * w
                E[j] += t
                if j not in visited:
                    cur = best.get(j)
                    if cur is None or t > cur[0] or (t == cur[0] and node < cur[1]):
                        best[j] = (t, node)
        if not best:
            break
        frontier = []
        for j in sorted(best):
            visited.add(j)
            parent[j] = best[j][1]
            frontier.append((j, best[j][0]))
    return np.array(E), np.array(parent, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# the retrieval model
# --------------------------------------------------------------------------------------------
PARAMS = prm.ParamSpec("mnemos", {
    "threshold": (0.6, prm.cosine),
    "max_neighbors": (32, prm.positive_int),
    "energy": (1.0, prm.positive),
    "decay": (0.2, prm.unit_interval),
    "max_hops": (3, prm.non_negative_int),
    "return_threshold": (0.3, prm.non_negative),
    "affective": (True, prm.boolean),
    "weight_similarity": (0.7, prm.non_negative),
    "weight_state": (0.3, prm.non_negative),
    "rank": ("model", prm.choice("model", "hybrid")),
})


class MnemosModel:
    """mnemos' spreading and affective routing (``SynapseConfig(model="mnemos")``).

    Hyperparameters, ``SynapseConfig(model_params={"mnemos": {...}})`` (paper defaults unless
    marked):

    ``threshold`` 0.6
        cosine above which two episodes are linked.
    ``max_neighbors`` 32 (ours)
        at most this many strongest links per episode (plus those of nodes linking to it):
        keeps the graph sparse where many turns are alike; the paper has no cap.
    ``energy`` 1.0, ``decay`` 0.2, ``max_hops`` 3, ``return_threshold`` 0.3
        the BFS: seed energy, loss per hop, hop limit (implied by the paper's numbers),
        energy a node needs to be returned.
    ``affective`` True, ``weight_similarity`` 0.7, ``weight_state`` 0.3
        re-rank by ``0.7 * sim + 0.3 * (1 - d_state)``; the query's state is its text's tags.
    ``rank`` "model"
        ``"model"``: rank the returned nodes by the affective score (by energy with
        ``affective=False``), as mnemos does; ``"hybrid"``: leave the ranking to the
        engine's hybrid score (the energy enters it as the activation).

    The graph holds episodes only: the seed is the closest episode, concepts get no
    energy (their affective score is computed from their text). A node's tags are its
    ``affect`` attribute when the engine stored one at ingestion, else computed from its
    text with the model's tagger and cached per text.
    ``MnemosModel(tagger=LLMAffectTagger(chat_model))`` tags with an LLM.
    """

    name = "mnemos"

    def __init__(self, tagger: AffectTagger | None = None) -> None:
        if tagger is not None and not isinstance(tagger, AffectTagger):
            raise InvalidTypeError(f"tagger must have tag(text), got {type(tagger).__name__}")
        self._tagger = tagger
        self._tags: dict[str, tuple[float, float, float]] = {}
        self._lock = threading.Lock()
        self.neighbors = NeighborIndex()

    @property
    def tagger(self) -> AffectTagger:
        if self._tagger is None:
            self._tagger = LexiconAffectTagger()
        return self._tagger

    def tag(self, text: str) -> tuple[float, float, float]:
        """The cognitive state of ``text`` (cached per text)."""
        with self._lock:
            hit = self._tags.get(text)
        if hit is None:
            hit = tuple(float(x) for x in self.tagger.tag(text))  # type: ignore[assignment]
            with self._lock:
                if len(self._tags) >= _TAG_CACHE_SIZE:  # queries add texts too: stay bounded
                    self._tags.clear()
                self._tags[text] = hit  # type: ignore[assignment]
        return hit  # type: ignore[return-value]

    def states(self, view: GraphView) -> np.ndarray:
        """``(n, 3)`` cognitive states of the view's nodes (cached on the view): a node's
        stored ``affect`` attribute (``[valence, arousal, complexity]``, the engine's hook
        for tags computed at ingestion) where it has a valid one, else its text's tags."""
        def build(v: GraphView) -> np.ndarray:
            texts = v.node_values("text", "")
            stored = v.node_values("affect", None)
            out = np.zeros((v.n, 3))
            ok = np.zeros(v.n, dtype=bool)
            for k, a in enumerate(stored):  # the common case: a stored [v, a, c] list
                if type(a) is list and len(a) == 3:
                    try:
                        out[k] = a
                        ok[k] = True
                    except (TypeError, ValueError):
                        pass
            ok &= np.isfinite(out).all(axis=1)
            out = np.clip(out, [-1.0, 0.0, 0.0], [1.0, 1.0, 1.0])
            for k in np.flatnonzero(~ok):  # no valid stored tags: tag the text
                t = texts[k]
                out[k] = stored_state(stored[k]) or self.tag(t if isinstance(t, str) else "")
            return out
        return view.derived("mnemos.states", build)

    def graph(self, view: GraphView, config: SynapseConfig) -> tuple[np.ndarray, np.ndarray,
                                                                       np.ndarray, np.ndarray]:
        """``(rows, indptr, indices, weight)``: the cosine graph over the episodes (CSR in
        positions of ``rows``, the episodes' view indices), cached on the view."""
        return self._graph(view, prm.read_params(config, PARAMS))

    def _graph(self, view: GraphView, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray, np.ndarray]:
        table = neighbor_table(view, subset="episodes", k=p["max_neighbors"],
                               index=self.neighbors)
        return view.derived(
            f"mnemos.graph:{p['max_neighbors']}:{p['threshold']!r}",
            lambda v: (table.rows, *cosine_graph(table.index, table.sim,
                                                 threshold=p["threshold"])))

    def activate(self, view: GraphView, query: Query, config: SynapseConfig) -> Activation:
        p = prm.read_params(config, PARAMS)
        n = view.n
        sim = np.asarray(query.sim, dtype=np.float64)
        energy = np.zeros(n)
        parents = np.full(n, -1, dtype=np.int64)
        episodes = np.flatnonzero(view.is_episode)
        if episodes.size:
            seed = int(episodes[np.argmax(np.nan_to_num(sim[episodes], nan=-np.inf))])
            if config.use_graph:
                rows, indptr, indices, w = self._graph(view, p)
                local = int(np.searchsorted(rows, seed))
                e, par = bfs_energy(indptr, indices, w, local, energy=p["energy"],
                                    decay=p["decay"], max_hops=p["max_hops"])
                energy[rows] = e
                parents[rows[par >= 0]] = rows[par[par >= 0]]
            else:
                energy[seed] = p["energy"]
        reached = np.flatnonzero(energy >= p["return_threshold"])
        score = None
        if p["rank"] == "model":
            if p["affective"]:
                score = affective_score(sim, self.states(view), self.tag(query.text),
                                        weight_similarity=p["weight_similarity"],
                                        weight_state=p["weight_state"])
            else:
                score = energy
        return Activation(energy, parents=parents, reached=reached, score=score)

"""Exact nearest-neighbour tables over a view's embeddings (shared by the seed models).

Evermind spreads over a k-NN graph of the memories, mnemos over a cosine-threshold graph,
SynapticRAG passes a stimulus to a node's neighbours in vector space: all three need, for
each node, its nearest other nodes by cosine. :func:`top_k_neighbors` computes that table
exactly, with one matrix product per block of rows (the block is sized so that the
``block x m`` similarity matrix stays near 64 MiB); :func:`top_k_neighbors_reference` is the
slow, obvious version the tests compare it with.

The table is a structure derived from the view, so it would be rebuilt whenever the graph
changes (every ingested turn). A cold build costs ``m^2 * d`` multiply-adds: seconds at
10,000 nodes, minutes at 100,000. :class:`NeighborIndex` keeps the last table and turns
the next view into an *update* (:func:`update_top_k`): rows of new (or changed) nodes are
computed in full, every other row only merges the new nodes as candidates, and rows that
lost a neighbour to a removed node are recomputed -- exact, and about ``(added) * m * d``
work, a mat-vec per new turn.

Order: each row lists its neighbours by decreasing cosine, ties to the lower index; a node
is never its own neighbour; rows with fewer than ``k`` other nodes are padded with index
``-1`` and cosine ``-inf``.

>>> emb = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
>>> idx, sim = top_k_neighbors(emb, k=1)
>>> idx.ravel().tolist(), [round(float(x), 2) for x in sim.ravel()]
([1, 0, 1], [0.8, 0.8, 0.6])
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from ...errors import InvalidInputError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..graph.graph import Compiled as GraphView

__all__ = [
    "NeighborIndex",
    "NeighborTable",
    "Subset",
    "neighbor_table",
    "subset_rows",
    "top_k_neighbors",
    "top_k_neighbors_reference",
    "update_top_k",
]

Subset = Literal["episodes", "all"]

#: Size of one block of the similarity matrix (rows x all nodes, float32).
BLOCK_BYTES = 64 * 2**20


@dataclass(frozen=True)
class NeighborTable:
    """The ``k`` nearest nodes of every node of a subset of a view.

    Attributes:
        rows: view indices of the nodes the table covers, ascending (``m`` of them).
        index: ``(m, k)`` positions *into rows* of each node's neighbours (-1: padding).
        sim: ``(m, k)`` float32 cosines, decreasing along each row (-inf: padding).
    """

    rows: np.ndarray
    index: np.ndarray
    sim: np.ndarray


# --------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------
def _check(emb: np.ndarray, k: int) -> np.ndarray:
    emb = np.asarray(emb)
    if emb.ndim != 2:
        raise InvalidInputError(f"embeddings must be a 2-D array, got shape {emb.shape}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InvalidInputError(f"k must be an int >= 1, got {k!r}")
    return np.ascontiguousarray(emb, dtype=np.float32)


def _block_rows(m: int, block_bytes: int) -> int:
    return int(max(1, min(m, block_bytes // (4 * max(m, 1)))))


def _top_by_key(vals: np.ndarray, keys: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` entries of each row of ``vals`` by (value desc, key asc), as ``(keys,
    values)`` padded to ``k``; an entry of value -inf (the row's own node, padding) comes
    out as padding. ``keys``: ``(c,)`` or the shape of ``vals``."""
    b, c = vals.shape
    keys = np.broadcast_to(keys, vals.shape)
    kk = min(k, c)
    idx = np.full((b, k), -1, dtype=np.int64)
    sim = np.full((b, k), -np.inf, dtype=np.float32)
    if kk == 0 or b == 0:
        return idx, sim
    part = np.argpartition(vals, c - kk, axis=1)[:, c - kk:]
    v = np.take_along_axis(vals, part, axis=1)
    kth = v.min(axis=1)
    # argpartition breaks ties at the k-th value arbitrarily: redo those rows in full order
    for r in np.flatnonzero((vals >= kth[:, None]).sum(axis=1) > kk):
        part[r] = np.lexsort((keys[r], -vals[r]))[:kk]
        v[r] = vals[r, part[r]]
    key = np.take_along_axis(keys, part, axis=1)
    order = np.lexsort((key, -v), axis=1)
    idx[:, :kk] = np.take_along_axis(key, order, axis=1)
    sim[:, :kk] = np.take_along_axis(v, order, axis=1)
    idx[~np.isfinite(sim)] = -1
    sim[idx < 0] = -np.inf
    return idx, sim


def _full_rows(emb: np.ndarray, rows: np.ndarray, k: int,
               block_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` rows for the nodes ``rows`` against every node of ``emb``."""
    m = emb.shape[0]
    idx = np.empty((rows.size, k), dtype=np.int64)
    sim = np.empty((rows.size, k), dtype=np.float32)
    step = _block_rows(m, block_bytes)
    cols = np.arange(m)
    for start in range(0, rows.size, step):
        chunk = rows[start:start + step]
        S = emb[chunk] @ emb.T
        S[np.arange(chunk.size), chunk] = -np.inf
        idx[start:start + step], sim[start:start + step] = _top_by_key(S, cols, k)
    return idx, sim


def top_k_neighbors(emb: np.ndarray, *, k: int,
                    block_bytes: int = BLOCK_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``k`` nearest other rows of every row of ``emb`` (unit rows: cosine).

    Returns ``(index, sim)``, both ``(m, k)``: see the module docstring for the order and
    the padding. One float32 matrix product per block of rows. (Computing only the upper
    half of the symmetric similarity matrix saves half the multiply-adds but, measured at
    10,000 rows, doubles the time: selecting from transposed blocks costs more than the
    products it saves.)
    """
    emb = _check(emb, k)
    return _full_rows(emb, np.arange(emb.shape[0]), k, block_bytes)


def top_k_neighbors_reference(emb: np.ndarray, *, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Same contract as :func:`top_k_neighbors`, one pair at a time (tests only)."""
    emb = _check(emb, k)
    m = emb.shape[0]
    idx = np.full((m, k), -1, dtype=np.int64)
    sim = np.full((m, k), -np.inf, dtype=np.float32)
    for i in range(m):
        pairs = sorted(((-float(np.dot(emb[i], emb[j])), j) for j in range(m) if j != i))
        for c, (neg, j) in enumerate(pairs[:k]):
            idx[i, c], sim[i, c] = j, -neg
    return idx, sim


def update_top_k(
    emb: np.ndarray,
    prev_index: np.ndarray,
    prev_sim: np.ndarray,
    *,
    new_of_old: np.ndarray,
    k: int,
    block_bytes: int = BLOCK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """The table of :func:`top_k_neighbors` for ``emb``, updated from the previous one.

    Args:
        emb: ``(m, d)`` the current rows.
        prev_index, prev_sim: the previous table, rows and entries in *old* positions.
        new_of_old: ``(m_old,)`` the current position of each old row, or -1 where that
            node is gone or its vector changed (it then counts as removed and re-added).
        k: the table's width (that of the previous table).

    Rows of nodes that are new, or lost a neighbour, are computed in full; every other row
    merges the new nodes as candidates. The result equals a full rebuild (up to float32
    rounding of the cosines, which a block's matrix product and a new row's may round
    differently); when more than a quarter of the rows would be recomputed, it is one.
    """
    emb = _check(emb, k)
    m = emb.shape[0]
    prev_index = np.asarray(prev_index, dtype=np.int64)
    prev_sim = np.asarray(prev_sim, dtype=np.float32)
    new_of_old = np.asarray(new_of_old, dtype=np.int64)
    if prev_index.shape != prev_sim.shape or prev_index.ndim != 2 or prev_index.shape[1] != k \
            or new_of_old.shape != (prev_index.shape[0],):
        raise InvalidInputError("prev_index, prev_sim must be (m_old, k) and new_of_old (m_old,)")
    kept_old = np.flatnonzero(new_of_old >= 0)
    old_of_new = np.full(m, -1, dtype=np.int64)
    old_of_new[new_of_old[kept_old]] = kept_old
    fresh = np.flatnonzero(old_of_new < 0)
    kept = np.flatnonzero(old_of_new >= 0)

    # the previous rows of kept nodes, in current positions
    idx = np.full((m, k), -1, dtype=np.int64)
    sim = np.full((m, k), -np.inf, dtype=np.float32)
    old_rows = prev_index[old_of_new[kept]]
    remapped = np.where(old_rows >= 0, new_of_old[np.maximum(old_rows, 0)], -1)
    lost = ((old_rows >= 0) & (remapped < 0)).any(axis=1)
    idx[kept] = remapped
    sim[kept] = prev_sim[old_of_new[kept]]
    redo = np.union1d(fresh, kept[lost])
    if redo.size * 4 > m:
        return _full_rows(emb, np.arange(m), k, block_bytes)
    if not np.all(np.diff(new_of_old[kept_old]) > 0):  # kept nodes were reordered
        order = np.lexsort((idx[kept], -sim[kept]), axis=1)
        idx[kept] = np.take_along_axis(idx[kept], order, axis=1)
        sim[kept] = np.take_along_axis(sim[kept], order, axis=1)

    clean = np.ones(m, dtype=bool)
    clean[redo] = False
    step = _block_rows(m, block_bytes)
    for start in range(0, fresh.size, step):
        chunk = fresh[start:start + step]
        S = emb[chunk] @ emb.T
        S[np.arange(chunk.size), chunk] = -np.inf
        idx[chunk], sim[chunk] = _top_by_key(S, np.arange(m), k)
        _merge(idx, sim, np.flatnonzero(clean), chunk, S, k)
    stale = kept[lost]
    if stale.size:
        idx[stale], sim[stale] = _full_rows(emb, stale, k, block_bytes)
    return idx, sim


def _merge(idx: np.ndarray, sim: np.ndarray, rows: np.ndarray, cand: np.ndarray,
           S: np.ndarray, k: int) -> None:
    """Offer the nodes ``cand`` (their cosines to every node: ``S``, one row per
    candidate) to the table rows ``rows``, in place."""
    C = S[:, rows].T  # (rows, cand)
    worst_sim = sim[rows, k - 1][:, None]
    worst_idx = idx[rows, k - 1][:, None]
    beats = (C > worst_sim) | ((C == worst_sim) & (cand[None, :] < worst_idx))
    hit = np.flatnonzero(beats.any(axis=1))
    if hit.size == 0:
        return
    r = rows[hit]
    all_idx = np.concatenate([idx[r], np.broadcast_to(cand, (hit.size, cand.size))], axis=1)
    all_sim = np.concatenate([sim[r], C[hit]], axis=1)
    key_idx = np.where(all_idx < 0, np.iinfo(np.int64).max, all_idx)
    order = np.lexsort((key_idx, -all_sim), axis=1)[:, :k]
    idx[r] = np.take_along_axis(all_idx, order, axis=1)
    sim[r] = np.take_along_axis(all_sim, order, axis=1)


# --------------------------------------------------------------------------------------------
# the stateful shell: one per model instance
# --------------------------------------------------------------------------------------------
def subset_rows(view: GraphView, subset: Subset) -> np.ndarray:
    """View indices of the nodes a table covers: the episodes, or every node."""
    if subset == "episodes":
        return np.flatnonzero(view.is_episode)
    if subset == "all":
        return np.arange(view.n)
    raise InvalidInputError(f"subset must be 'episodes' or 'all', got {subset!r}")


class NeighborIndex:
    """Keeps the last table per ``(subset, k)`` so the next view's table is an update.

    A model holds one; the engine should keep one model instance per memory for the updates
    to apply (a fresh instance per query still works, with a cold build per graph version).
    ``last_build`` records how the latest table was made and how long it took.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (subset, k) -> (ids, fingerprints, index, sim)
        self._last: dict[tuple[str, int], tuple[list[str], np.ndarray, np.ndarray, np.ndarray]] = {}
        self.last_build: dict[str, object] = {}

    def table(self, view: GraphView, *, subset: Subset, k: int) -> NeighborTable:
        rows = subset_rows(view, subset)
        emb = view.embeddings if subset == "all" else view.embeddings[rows]
        ids = [view.ids[r] for r in rows] if subset != "all" else list(view.ids)
        fp = _fingerprints(emb)
        t0 = time.perf_counter()
        with self._lock:
            prev = self._last.get((subset, k))
            how = "full"
            if prev is not None and prev[2].shape[0] and emb.shape[0]:
                new_of_old = _match(prev[0], prev[1], ids, fp)
                idx, sim = update_top_k(emb, prev[2], prev[3], new_of_old=new_of_old, k=k)
                how = "update"
            else:
                idx, sim = top_k_neighbors(emb, k=k) if emb.shape[0] else (
                    np.zeros((0, k), dtype=np.int64), np.zeros((0, k), dtype=np.float32))
            self._last[(subset, k)] = (ids, fp, idx, sim)
            self.last_build = {"how": how, "seconds": time.perf_counter() - t0,
                               "rows": int(emb.shape[0]), "k": k, "subset": subset}
        return NeighborTable(rows, idx, sim)


def _fingerprints(emb: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """Two exact integer checksums per row (the float32 bit patterns times fixed random odd
    multipliers, modulo 2^32, summed): equal rows give equal checksums whatever matrix
    they sit in; a changed vector changes them (but for a chance of about 2^-64)."""
    e = np.ascontiguousarray(emb, dtype=np.float32)
    d = e.shape[1] if e.ndim == 2 else 0
    mult = np.random.default_rng(12345).integers(0, 2**31, size=(2, d), dtype=np.uint32) * 2 + 1
    out = np.empty((e.shape[0], 2), dtype=np.uint64)
    for start in range(0, e.shape[0], chunk):
        bits = e[start:start + chunk].view(np.uint32)
        for c in range(2):
            out[start:start + chunk, c] = (bits * mult[c]).sum(axis=1, dtype=np.uint64)
    return out


def _match(old_ids: Sequence[str], old_fp: np.ndarray, ids: Sequence[str],
           fp: np.ndarray) -> np.ndarray:
    pos = {n: i for i, n in enumerate(ids)}
    new_of_old = np.fromiter((pos.get(n, -1) for n in old_ids), dtype=np.int64,
                             count=len(old_ids))
    kept = np.flatnonzero(new_of_old >= 0)
    same = np.all(old_fp[kept] == fp[new_of_old[kept]], axis=1)
    new_of_old[kept[~same]] = -1
    return new_of_old


def neighbor_table(view: GraphView, *, subset: Subset, k: int,
                   index: NeighborIndex | None = None) -> NeighborTable:
    """The view's ``k``-NN table over ``subset``, cached on the view (``view.derived``);
    built through ``index`` (an update of its last table) when given."""
    def build(v: GraphView) -> NeighborTable:
        if index is not None:
            return index.table(v, subset=subset, k=k)
        rows = subset_rows(v, subset)
        emb = v.embeddings if subset == "all" else v.embeddings[rows]
        if emb.shape[0] == 0:
            return NeighborTable(rows, np.zeros((0, k), dtype=np.int64),
                                 np.zeros((0, k), dtype=np.float32))
        return NeighborTable(rows, *top_k_neighbors(emb, k=k))

    return view.derived(f"neighbors:{subset}:{k}", build)

"""The compiled view of the graph: the arrays retrieval reads (core/graph/graph.py builds it).

:class:`Compiled` holds the active nodes in a fixed order (node ``k`` is ``ids[k]``), their
unit vectors as matrix rows, the edges as parallel arrays ``src -> dst`` with ``weight``,
in ``(src, dst)`` order, and caches of what is derived from them: node attribute values,
the sparse propagation operators, and the structures other mechanisms derive
(core/graph/derived.py). :meth:`~synapse_integrations.core.graph.graph.MemoryGraph.compiled` builds it,
and extends it in place of a rebuild after a write that only appends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..kernels import threads
from ..kernels.dynamics import propagation_by_source
from .derived import Derived, Grow, Shrink

__all__ = ["Compiled", "column_major", "edge_order", "with_rows", "without_rows"]

#: rows transposed per block when a matrix is stored column by column (a whole-matrix
#: transpose strides through memory: 0.40 s against 0.10 s for 157,000 x 384 in blocks)
_BLOCK = 512


def _aligned(values: Mapping[str, float], ids: Sequence[str]) -> np.ndarray:
    return np.fromiter((values.get(n, 0.0) for n in ids), dtype=np.float64, count=len(ids))


#: ``node_attr(name, default)``: an attribute of every node of a view, in order.
NodeAttr = Callable[[str, Any], list[Any]]


def _kept_rows(values: np.ndarray, keep: np.ndarray, remap: np.ndarray) -> np.ndarray:
    return values[keep]


def _moved_positions(values: np.ndarray, keep: np.ndarray, remap: np.ndarray) -> np.ndarray:
    out = values[keep]
    held = out >= 0
    out[held] = remap[out[held]]
    return out


def _moved_keys(memo: dict[Any, Any], keep: np.ndarray, remap: np.ndarray) -> dict[Any, Any]:
    out = {}
    for key, value in memo.items():
        at = remap[key[0] if isinstance(key, tuple) else key]
        if at >= 0:
            out[(int(at), *key[1:]) if isinstance(key, tuple) else int(at)] = value
    return out


def column_major(rows: np.ndarray | Sequence[np.ndarray], spare: int = 0) -> np.ndarray:
    """``rows`` (``n`` vectors of one length ``d``) as an ``(n, d)`` float32 matrix stored
    column by column: the transpose of the first ``n`` columns of a C-ordered ``(d, n +
    spare)`` buffer, whose ``spare`` columns take rows added later (:func:`with_rows`).

    The view keeps its vectors this way for the query's cosines, one matrix-vector
    product over every node: BLAS's gemv over column-major storage streams each of the
    ``d`` columns once, and ran twice as fast as over the same matrix row by row
    (157,000 x 384: 5.3-6.2 against 10.3 ms, docs/benchmarks.md, "The view's vectors
    column by column"). Row access still works, at a stride.

    >>> m = column_major(np.arange(6, dtype=np.float32).reshape(3, 2), spare=1)
    >>> m.tolist(), m.strides, m.base.shape  # column k of the buffer is row k
    ([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], (4, 16), (2, 4))
    """
    n = len(rows)
    d = len(rows[0]) if n else np.shape(rows)[-1]
    buf = np.empty((d, n + spare), dtype=np.float32)
    for s in range(0, n, _BLOCK):
        e = min(n, s + _BLOCK)
        buf[:, s:e] = np.asarray(rows[s:e], dtype=np.float32).T
    return buf[:, :n].T


def _buffer(mat: np.ndarray) -> np.ndarray | None:
    """The C-ordered ``(d, capacity)`` buffer whose first columns ``mat`` (a
    :func:`column_major` matrix) is the transpose of; None when it is not one."""
    n, d, buf = mat.shape[0], mat.shape[1], mat.base
    if (isinstance(buf, np.ndarray) and buf.ndim == 2 and buf.shape[0] == d
            and buf.shape[1] >= n and buf.flags.c_contiguous and buf.dtype == np.float32
            and buf.ctypes.data == mat.ctypes.data and mat.strides == (4, 4 * buf.shape[1])):
        return buf
    return None


def with_rows(mat: np.ndarray, rows: Sequence[np.ndarray]) -> np.ndarray:
    """``mat`` (a :func:`column_major` matrix) with ``rows`` after it, in the spare columns
    of its buffer when it has them (a new buffer, a quarter larger, when not): an extended
    view shares its old rows with the view it replaces, which is not used again.

    >>> m = column_major(np.ones((2, 3), dtype=np.float32))
    >>> m2 = with_rows(m, [np.zeros(3, dtype=np.float32)])
    >>> m2.shape, m2[2].tolist(), with_rows(m2, []).base is m2.base
    ((3, 3), [0.0, 0.0, 0.0], True)
    """
    n, need, buf = mat.shape[0], mat.shape[0] + len(rows), _buffer(mat)
    if buf is None or buf.shape[1] < need:
        grown = column_major(mat, spare=need - n + need // 4 + 64)
        buf = grown.base
    if len(rows):
        buf[:, n:need] = np.asarray(rows, dtype=np.float32).T
    return buf[:, :need].T


def without_rows(mat: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``mat`` (a :func:`column_major` matrix) with only the rows ``keep`` marks, moved up
    in place in its buffer, which keeps its spare columns: like :func:`with_rows`, the
    matrix of a view that the new one replaces and that is not used again. Only the rows
    after the first one dropped move, a block at a time (each block is read before it is
    written, and never over a row a later block reads).

    >>> m = with_rows(column_major(np.arange(8, dtype=np.float32).reshape(4, 2)), [])
    >>> m2 = without_rows(m, np.array([True, False, True, True]))
    >>> m2.tolist(), m2.base is m.base
    ([[0.0, 1.0], [4.0, 5.0], [6.0, 7.0]], True)
    """
    keep = np.asarray(keep, dtype=bool)
    buf = _buffer(mat)
    if buf is None:
        return column_major(np.asarray(mat)[keep])
    kept = np.flatnonzero(keep)
    first = kept.size if keep.all() else int(np.argmin(keep))  # rows before it stay put
    for s in range(first, kept.size, _BLOCK):
        e = min(kept.size, s + _BLOCK)
        buf[:, s:e] = buf[:, kept[s:e]]  # kept[j] >= j: a later block reads past column e
    return buf[:, :kept.size].T


def edge_order(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """The permutation that puts edges ``src -> dst`` among ``n`` nodes in ``(src, dst)`` order.

    >>> edge_order(np.array([1, 0, 1]), np.array([0, 2, 1]), 3).tolist()
    [1, 0, 2]
    """
    return np.argsort(np.asarray(src, dtype=np.int64) * max(n, 1) + dst, kind="stable")


@dataclass
class Compiled:
    """Array view of the active graph used by retrieval (derived, cached until the graph
    changes). This is the ``GraphView`` a retrieval model reads
    (:mod:`synapse_integrations.core.models`): node ``k`` is ``ids[k]``, edges are the
    parallel arrays ``src -> dst`` with ``weight``, in ``(src, dst)`` order (:func:`edge_order`):
    a node's out-edges are one slice (:meth:`out_neighbors`), and the sparse operators are
    built without sorting.

    >>> import numpy as np
    >>> view = Compiled.from_arrays(["a", "b"], np.eye(2, dtype=np.float32),
    ...                             src=[0], dst=[1], weight=[0.5], is_episode=[True, False])
    >>> view.n, view.index["b"], float(view.propagation(use_fan_effect=True).toarray()[1, 0])
    (2, 1, 0.5)
    >>> view.derived("double", lambda v: 2 * v.n)
    4
    """

    ids: list[str]
    index: dict[str, int]
    embeddings: np.ndarray  # (n, d) unit rows, stored column by column (column_major)
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    is_episode: np.ndarray
    # attribute name -> value per node (aligned with ids); None when built from arrays
    node_attr: NodeAttr | None = None
    #: learned weights of derived graphs, ``{graph: {(src id, dst id): weight}}`` (read only)
    learned: Mapping[str, Mapping[tuple[str, str], float]] = field(default_factory=dict)
    _matrices: dict[tuple[bool, float, float], sp.csc_array] = field(default_factory=dict)
    _derived: Derived = field(default_factory=Derived)
    # cached node_values: key -> (name, default, values aligned with ids)
    _attrs: dict[str, tuple[str, Any, list[Any]]] = field(default_factory=dict)

    @classmethod
    def from_arrays(cls, ids: Sequence[str], embeddings: np.ndarray, *, src: Sequence[int],
                    dst: Sequence[int], weight: Sequence[float], is_episode: Sequence[bool],
                    attrs: dict[str, Sequence[Any]] | None = None) -> Compiled:
        """A view built directly from arrays (tests, benchmarks, hand-made graphs);
        ``attrs`` maps an attribute name to its value per node."""
        ids = list(ids)
        table = {k: list(v) for k, v in (attrs or {}).items()}
        s, d = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        order = edge_order(s, d, len(ids))
        return cls(ids, {n: k for k, n in enumerate(ids)},
                   column_major(np.asarray(embeddings, dtype=np.float32)),
                   s[order], d[order],
                   np.asarray(weight, dtype=np.float64)[order], np.asarray(is_episode, dtype=bool),
                   node_attr=lambda name, default: table.get(name, [default] * len(ids)))

    def without(self, gone: Sequence[int], node_attr: Callable[[list[str]], NodeAttr] | None = None
                ) -> Compiled:
        """This view without the nodes at positions ``gone`` and their edges (nodes archived
        or forgotten): the others keep their order and move up, as in a view rebuilt from
        the graph. Their vectors move up in place (:func:`without_rows`: this view is not
        used again), the node attributes read so far and the derived structures that say
        how they shrink are carried over (core/graph/derived.py), the rest is built again when
        asked. ``node_attr(ids)`` reads node attributes for the new view.

        >>> v = Compiled.from_arrays(["a", "b", "c"], np.eye(3, dtype=np.float32),
        ...     src=[0, 1, 2], dst=[2, 2, 0], weight=[0.1, 0.2, 0.3], is_episode=[True] * 3,
        ...     attrs={"speaker": ["Ann", "Bo", "Cy"]})
        >>> _ = v.node_values("speaker")
        >>> w = v.without([1])
        >>> w.ids, w.index, w.src.tolist(), w.dst.tolist(), w.weight.tolist()
        (['a', 'c'], {'a': 0, 'c': 1}, [0, 1], [1, 0], [0.1, 0.3])
        >>> w.node_values("speaker"), w.embeddings.tolist()
        (['Ann', 'Cy'], [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
        """
        keep = np.ones(self.n, dtype=bool)
        keep[np.asarray(gone, dtype=np.int64)] = False
        remap = np.cumsum(keep) - 1
        remap[~keep] = -1
        ids = list(compress(self.ids, keep))
        edges = keep[self.src] & keep[self.dst]
        view = Compiled(ids, {n: k for k, n in enumerate(ids)},
                        without_rows(self.embeddings, keep), remap[self.src[edges]],
                        remap[self.dst[edges]], self.weight[edges], self.is_episode[keep],
                        node_attr=None if node_attr is None else node_attr(ids),
                        learned=self.learned)
        view.carry_attributes([(name, default, list(compress(values, keep)))
                               for name, default, values in self.cached_attributes()])
        view.adopt_derived(self.shrinking(keep, remap))
        return view

    @property
    def n(self) -> int:
        return len(self.ids)

    def out_neighbors(self, i: int) -> np.ndarray:
        """The heads of node ``i``'s out-edges, ascending (one slice of the edge arrays).

        >>> v = Compiled.from_arrays(["a", "b", "c"], np.eye(3, dtype=np.float32),
        ...                          src=[1, 0, 1], dst=[2, 1, 0], weight=[1.0] * 3,
        ...                          is_episode=[True] * 3)
        >>> v.out_neighbors(1).tolist(), v.out_neighbors(2).tolist()
        ([0, 2], [])
        """
        lo, hi = np.searchsorted(self.src, (i, i + 1))
        return self.dst[lo:hi]

    def products(self, vectors: np.ndarray) -> np.ndarray:
        """Every node's vector times each of ``vectors`` (``(k, d)``): an ``(n, k)`` array,
        computed in the form that suits the column-major storage (:func:`column_major`;
        ``embeddings @ vectors.T`` reads it row by row, 27 against 17 ms for two vectors
        over 157,000 nodes). One vector: ``embeddings @ vector`` is the fast form already.

        >>> v = Compiled.from_arrays(["a", "b"], np.eye(2, dtype=np.float32), src=[], dst=[],
        ...                          weight=[], is_episode=[True, True])
        >>> v.products(np.array([[1.0, 2.0]], dtype=np.float32)).tolist()
        [[1.0], [2.0]]
        """
        vectors = np.asarray(vectors, dtype=np.float32)
        out = np.empty((len(vectors), self.n), dtype=np.result_type(vectors, self.embeddings))

        def block(a: int, b: int) -> None:
            out[:, a:b] = vectors @ self.embeddings[a:b].T

        threads.split_rows(self.n, block)  # a large product on every core (core/kernels/threads.py)
        return out.T

    def product(self, vector: np.ndarray) -> np.ndarray:
        """Every node's vector times ``vector`` (``(d,)``): an ``(n,)`` array, on every core
        for a large view (:func:`~synapse_integrations.core.kernels.threads.split_rows`).

        >>> v = Compiled.from_arrays(["a", "b"], np.eye(2, dtype=np.float32), src=[], dst=[],
        ...                          weight=[], is_episode=[True, True])
        >>> v.product(np.array([1.0, 2.0], dtype=np.float32)).tolist()
        [1.0, 2.0]
        """
        vector = np.asarray(vector)
        out = np.empty(self.n, dtype=np.result_type(vector, self.embeddings))
        threads.split_rows(self.n, lambda a, b: np.matmul(self.embeddings[a:b], vector,
                                                          out=out[a:b]))
        return out

    def aligned(self, values: dict[str, float], vector: np.ndarray | None = None) -> np.ndarray:
        """``values`` (id -> number) as an array aligned with :attr:`ids` (0 where a node has
        none; ``vector`` when the caller has it already); cached for as long as the same dict
        object is passed, and grown with the view."""
        cached = self.derived("aligned", lambda v: (values, _aligned(values, v.ids)),
                              lambda old, v, m: (old[0], np.concatenate(
                                  [old[1], _aligned(old[0], v.ids[m:])])),
                              lambda old, keep, remap: (old[0], old[1][keep]))
        if cached[0] is not values:
            cached = self._derived.set("aligned", (values, _aligned(values, self.ids)
                                                   if vector is None else vector))
        return cached[1]

    def edge_positions(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Where the edges ``src[k] -> dst[k]`` (node positions) are in the edge arrays
        (a binary search: they are in (src, dst) order); -1 for a pair that is no edge,
        or names a position outside the view.

        >>> v = Compiled.from_arrays(["a", "b", "c"], np.eye(3, dtype=np.float32), src=[2, 0],
        ...                          dst=[0, 1], weight=[1.0, 1.0], is_episode=[True] * 3)
        >>> v.edge_positions([2, 0, 1, 0], [0, 1, 2, 3]).tolist()
        [1, 0, -1, -1]
        """
        key = self.derived("edge-keys", lambda v: v.src * v.n + v.dst)  # ascending
        a, b = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        inside = (a >= 0) & (a < self.n) & (b >= 0) & (b < self.n)
        if key.size == 0:
            return np.full(a.shape, -1, dtype=np.int64)
        want = a * self.n + b
        at = np.minimum(np.searchsorted(key, want), key.size - 1)
        return np.where(inside & (key[at] == want), at, -1)

    def set_weights(self, positions: np.ndarray, weights: np.ndarray) -> None:
        """Change edge weights in place (``weight[positions] = weights``). The derived
        matrices and structures are dropped and rebuilt from the arrays when next asked
        (a vectorised step); the view itself, its ids and embeddings, stay."""
        self.weight[np.asarray(positions, dtype=np.int64)] = np.asarray(weights, dtype=np.float64)
        self._matrices.clear()
        self._derived.drop()

    def attribute_changed(self, name: str, derived_prefix: str) -> None:
        """Node attribute ``name`` changed in the graph: drop its cached values and the
        derived structures whose key starts with ``derived_prefix`` (the rest of the view
        stays)."""
        for key in [k for k, (attr, _, _) in self._attrs.items() if attr == name]:
            del self._attrs[key]
        self.drop_derived(derived_prefix)

    def drop_derived(self, prefix: str) -> None:
        """Forget the derived structures whose key starts with ``prefix`` (rebuilt when next
        asked): after a learned-weight update of one model's graph."""
        self._derived.drop(prefix)

    def derived(self, key: str, build: Callable[[Compiled], Any], grow: Grow | None = None,
                shrink: Shrink | None = None) -> Any:
        """A structure derived from this view (a model's k-NN graph, say), built once per
        view by ``build(view)`` and dropped with it when the graph changes; with ``grow``
        (``shrink``), taken over by the views that extend (shrink) this one
        (core/graph/derived.py)."""
        return self._derived.get(self, key, build, grow, shrink)

    def per_node(self, key: str, build: Callable[[Compiled, int], np.ndarray], *,
                 positions: bool = False) -> np.ndarray:
        """A value per node derived from that node's own attributes (:meth:`derived`):
        ``build(view, start)`` computes it for the nodes from ``start`` on, so a view that
        extends this one computes it for its new nodes alone, and one without some nodes
        keeps the others' values. With ``positions``, a value is another node's position
        (-1 for none), which moves with it (-1 once that node is gone).

        >>> v = Compiled.from_arrays(["a", "b"], np.eye(2, dtype=np.float32), src=[], dst=[],
        ...                          weight=[], is_episode=[True, False])
        >>> v.per_node("episode?", lambda view, start: view.is_episode[start:].copy()).tolist()
        [True, False]
        """
        return self.derived(key, lambda v: build(v, 0),
                            lambda old, v, m: np.concatenate([old, build(v, m)]),
                            _moved_positions if positions else _kept_rows)

    def memo(self, key: str) -> dict[Any, Any]:
        """A dict of per-node values keyed by position (or by a tuple that starts with
        one), kept as the view grows and shrinks (:meth:`derived`); a value belongs to its
        node alone."""
        return self.derived(key, lambda _: {}, lambda memo, view, m: memo, _moved_keys)

    def growing(self) -> list[tuple[str, Any, Grow, int]]:
        """What a view that extends this one takes over (:meth:`Derived.growing`)."""
        return self._derived.growing(self.n)

    def carry_derived(self, growing: Iterable[tuple[str, Any, Grow, int]]) -> None:
        """Take over the :meth:`growing` structures of the view this one extends."""
        self._derived.carry(growing)

    def shrinking(self, keep: np.ndarray, remap: np.ndarray
                  ) -> list[tuple[str, Any, Grow | None, Shrink]]:
        """What a view of the nodes ``keep`` marks takes over (:meth:`Derived.shrinking`)."""
        return self._derived.shrinking(keep, remap)

    def adopt_derived(self, shrunk: Iterable[tuple[str, Any, Grow | None, Shrink]]) -> None:
        """Take over the :meth:`shrinking` structures of the view this one shrinks."""
        self._derived.adopt(shrunk)

    def times(self) -> np.ndarray:
        """Every node's event time (``ts``, epoch seconds) as floats, NaN where it has none;
        derived once per view."""
        return self.per_node("times", lambda v, start: np.array(
            [np.nan if t is None else t for t in v.node_values("ts")[start:]], dtype=np.float64))

    def speakers(self) -> np.ndarray:
        """Every node's speaker (None for concepts) as an object array; derived once per
        view."""
        return self.per_node("speakers", lambda v, start: np.array(
            v.node_values("speaker")[start:], dtype=object))

    def node_values(self, name: str, default: Any = None) -> list[Any]:
        """The node attribute ``name`` for every node, aligned with :attr:`ids` (``default``
        where a node lacks it): ``ts`` (event time, epoch seconds), ``speaker``, ...
        Cached per view."""
        key = f"{name}\x00{default!r}"
        if key not in self._attrs:
            self._attrs[key] = (name, default, self.node_attr(name, default)
                                if self.node_attr is not None else [default] * self.n)
        return self._attrs[key][2]

    def cached_attributes(self) -> list[tuple[str, Any, list[Any]]]:
        """The node attributes read so far through :meth:`node_values`, as ``(name,
        default, values)`` (what an extended view can carry over instead of reading again)."""
        return list(self._attrs.values())

    def carry_attributes(self, cached: Iterable[tuple[str, Any, list[Any]]]) -> None:
        """Seed the :meth:`node_values` cache with values already aligned with :attr:`ids`."""
        for name, default, values in cached:
            if len(values) != self.n:
                raise ValueError(f"{name!r}: {len(values)} values for {self.n} nodes")
            self._attrs[f"{name}\x00{default!r}"] = (name, default, values)

    def propagation(self, *, use_fan_effect: bool, fan_exponent: float = 1.0,
                    fan_in_exponent: float = 0.0) -> sp.csc_array:
        """The propagation operator of Eq. 2 over this view's edges
        (:func:`~.dynamics.propagation_by_source`: stored by column, built from the edges'
        ``(src, dst)`` order without sorting), cached per view and parameters."""
        key = (use_fan_effect, float(fan_exponent) if use_fan_effect else 0.0,
               float(fan_in_exponent) if use_fan_effect else 0.0)
        m = self._matrices.get(key)
        if m is None:
            m = propagation_by_source(self.src, self.dst, self.weight, self.n,
                                      use_fan_effect=use_fan_effect, fan_exponent=fan_exponent,
                                      fan_in_exponent=fan_in_exponent)
            self._matrices[key] = m
        return m

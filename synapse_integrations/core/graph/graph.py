"""The episodic-semantic graph (section 3.1, Algorithm 1 of appendix A.1).

:class:`MemoryGraph` owns the NetworkX ``DiGraph`` (the record of nodes, edges and their
attributes), the in-memory copy of node embeddings, and the archive of dormant nodes.
Everything the retrieval kernels need (index arrays, the sparse propagation matrix,
PageRank) is derived from it by :meth:`MemoryGraph.compiled` and cached until the graph
changes. Node attributes are JSON-friendly, so a snapshot is NetworkX node-link data.

Node attributes: ``kind`` ("episode" | "concept"), ``text``, ``seq`` (creation order),
episodes: ``speaker``, ``ts`` (event time, epoch seconds), ``ingest_ts``, ``metadata``;
concepts: ``name``, ``ctype``, ``confidence``, ``attributes``, ``mentions``, ``aliases``.
Edge attributes: ``kind`` ("temporal" | "abstraction" | "association" | "relation"),
``weight``, ``rel`` for relation edges, and ``learned: True`` on an edge whose weight usage
feedback set (:meth:`MemoryGraph.set_edge_weights`): consolidation never changes that
weight again, nor prunes the edge.

Learned weights of graphs that are *derived* from the memory rather than stored in it
(Evermind's k-NN graph) live in :attr:`MemoryGraph.learned`, ``{graph name: {(src id, dst
id): weight}}``, persisted with the graph and handed to the models through the view.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from ...errors import NodeNotFoundError, SnapshotError
from .compiling import ViewDelta, attribute_reader, build_view, extend_view
from .ranks import PendingRank, Ranks
from .view import Compiled

__all__ = ["EDGE_KINDS", "FACT_TYPE", "NOT_ENTITY_TYPES", "Compiled", "MemoryGraph", "temporal_weight"]


#: The kinds of edge the graph holds.
EDGE_KINDS = ("temporal", "abstraction", "association", "relation")
#: The concept type of sleep's semantic facts.
FACT_TYPE = "Fact"
#: Concept types that are not names: the extractor's topics and sleep's facts (sentences).
#: Every other type (``Person``, ``Entity``, an LLM extractor's own) names someone or something.
NOT_ENTITY_TYPES = frozenset({"Topic", FACT_TYPE})


def temporal_weight(dt_seconds: float, *, rho: float, seconds_per_unit: float) -> float:
    """``exp(-rho * |dt|)`` with ``dt`` measured in the configured time unit.

    >>> round(temporal_weight(3600 * 24, rho=0.01, seconds_per_unit=3600), 4)  # one day, hours
    0.7866
    """
    return math.exp(-rho * abs(dt_seconds) / seconds_per_unit)


@dataclass
class _Rows:
    """Vectors of some nodes as matrix rows (``mat`` has spare rows at the end)."""

    ids: list[str]
    row: dict[str, int]
    mat: np.ndarray


class MemoryGraph:
    """Nodes, edges, embeddings and archive of one namespace (not thread-safe by itself:
    the engine holds the lock).

    The compiled view is kept up to date incrementally: a write that only adds turns,
    concepts and edges, strengthens or prunes edges, moves a concept's vector or takes
    nodes out (the lifecycle's archive, forgetting) is recorded as a
    :class:`~.compiling.ViewDelta`, and the next :meth:`compiled` shrinks and extends the
    previous view's arrays (and the node attributes it had read) instead of reading the
    whole NetworkX graph again; so the first query after a write costs about what a warm
    one does.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.g = nx.DiGraph()
        self.vectors: dict[str, np.ndarray] = {}
        # archived node id -> {"node": attrs, "edges": [[u, v, attrs], ...]}; the vectors of
        # archived nodes live in the namespace's archive collection in Chroma
        self.archive: dict[str, dict[str, Any]] = {}
        self._ranks = Ranks()  # the PageRank, and a refresh not computed yet (.ranks)
        # learned weights of derived graphs: {graph name: {(src id, dst id): weight}}
        self.learned: dict[str, dict[tuple[str, str], float]] = {}
        self._seq = 0
        self._compiled: Compiled | None = None
        self._delta: ViewDelta | None = None  # changes the compiled view has not taken yet
        # ids that left the view since it was last built: other nodes' values may name
        # them (an echo's source, -1 once it left), so one written again rebuilds the view
        self._left: set[str] = set()
        # node ids by kind, in graph (insertion) order; derived, kept in step by the
        # mutators below and rebuilt when it disagrees with the graph's node count
        self._kinds: dict[str, dict[str, None]] | None = None
        # the active concepts' vectors as rows (consolidation compares every new concept
        # with all of them, once per window): derived, kept in step by add_node and
        # set_vector, dropped when a concept leaves or comes back
        self._concept_rows: _Rows | None = None

    # -- basic access ---------------------------------------------------------------------
    def __contains__(self, node_id: str) -> bool:
        return node_id in self.g

    def __len__(self) -> int:
        return self.g.number_of_nodes()

    def node(self, node_id: str) -> dict[str, Any]:
        try:
            return self.g.nodes[node_id]
        except KeyError:
            raise NodeNotFoundError(f"no memory with id {node_id!r}") from None

    @property
    def pagerank(self) -> dict[str, float]:
        """The cached, max-normalised PageRank (id -> score); a deferred refresh
        (:meth:`defer_pagerank`) is computed here, on the graph as it stood then."""
        return self._ranks.read(self._compiled)

    @pagerank.setter
    def pagerank(self, values: dict[str, float]) -> None:
        self._ranks.due, self._ranks.values = None, values

    def set_attributes(self, node_id: str, **attrs: Any) -> None:
        """Set node attributes; the compiled view is kept when it has not taken the node in
        yet (added since it was built: an extension reads them), rebuilt otherwise."""
        self.node(node_id).update(attrs)
        if self._compiled is not None and node_id in self._compiled.index:
            self.invalidate()

    def ids(self, kind: str | None = None) -> list[str]:
        """Active node ids (of one ``kind``), in insertion order. O(answer), not O(graph):
        consolidation asks for the concepts once per window."""
        if kind is None:
            return list(self.g.nodes)
        return list(self._kind_index().get(kind, ()))

    def newest_first(self, kind: str) -> Iterator[str]:
        """Active node ids of one ``kind``, the most recently added first: a lazy walk, for
        callers that need only the newest few (the sleep buffer)."""
        return reversed(self._kind_index().get(kind, {}))

    def _kind_index(self) -> dict[str, dict[str, None]]:
        kinds = self._kinds
        if kinds is None or sum(map(len, kinds.values())) != self.g.number_of_nodes():
            kinds = {}
            for n, d in self.g.nodes(data=True):
                kinds.setdefault(d["kind"], {})[n] = None
            self._kinds = kinds
        return kinds

    def _kinds_add(self, node_id: str, kind: str) -> None:
        if self._kinds is not None:
            if any(node_id in ids for ids in self._kinds.values()):
                self._kinds = None  # re-added or changed kind: rebuild when next asked
            else:
                self._kinds.setdefault(kind, {})[node_id] = None

    def _kinds_drop(self, node_id: str) -> None:
        if self._kinds is not None:
            for ids in self._kinds.values():
                ids.pop(node_id, None)
        if self._concept_rows is not None and node_id in self._concept_rows.row:
            self._concept_rows = None

    def concept_matrix(self) -> tuple[list[str], np.ndarray]:
        """The active concepts' ids (insertion order) and their vectors as the rows of one
        matrix. Both are read-only views, valid until the next change to the graph.
        Amortised O(1) per added concept: the rows grow in place (doubling), a vector
        change rewrites its row, and only a removal rebuilds them."""
        want = self._kind_index().get("concept", {})
        rows = self._concept_rows
        if rows is None or len(rows.ids) != len(want):
            ids = list(want)
            mat = np.zeros((max(64, 2 * len(ids)), self.dim), dtype=np.float32)
            if ids:
                mat[:len(ids)] = np.stack([self.vectors[c] for c in ids])
            rows = self._concept_rows = _Rows(ids, {c: r for r, c in enumerate(ids)}, mat)
        return rows.ids, rows.mat[:len(rows.ids)]

    def _concept_row_set(self, node_id: str, vector: np.ndarray, kind: Any) -> None:
        """Keep the concept rows in step with a concept's new or changed vector."""
        rows = self._concept_rows
        if rows is None:
            return
        r = rows.row.get(node_id)
        if r is not None:
            rows.mat[r] = vector
        elif kind == "concept":
            if len(rows.ids) == rows.mat.shape[0]:
                rows.mat = np.concatenate((rows.mat, np.zeros_like(rows.mat)))
            rows.row[node_id] = len(rows.ids)
            rows.mat[len(rows.ids)] = vector
            rows.ids.append(node_id)

    def next_seq(self) -> int:
        """A new creation number (higher than any given so far)."""
        self._seq += 1
        return self._seq

    def note_seq(self, seq: int) -> None:
        """Make sure later creation numbers are above ``seq`` (a node re-attached with the
        number it was written with)."""
        self._seq = max(self._seq, seq)

    def invalidate(self) -> None:
        """Drop the compiled view: the next :meth:`compiled` rebuilds it from the graph."""
        self._compiled = None
        self._delta = None

    def _pending(self) -> ViewDelta | None:
        """The delta to record an appendable change in (None: no view to keep up to date)."""
        if self._compiled is None:
            return None
        if self._delta is None:
            self._delta = ViewDelta()
        return self._delta

    def _leave_view(self, ids: Iterable[str]) -> None:
        """Nodes that left the graph: the view drops them when next asked (:meth:`compiled`)."""
        view, delta = self._compiled, self._pending()
        if view is None or delta is None:
            return
        ids = set(ids)
        self._left |= ids
        delta.dropped.update(i for i in ids if i in view.index)
        # added since the view and gone again: one added once more goes at the end
        delta.nodes = [n for n in delta.nodes if n not in ids]

    # -- mutation -------------------------------------------------------------------------
    def add_node(self, node_id: str, vector: np.ndarray, **attrs: Any) -> None:
        attrs.setdefault("seq", self.next_seq())
        existed = node_id in self.g
        self._kinds_add(node_id, attrs.get("kind"))
        self.g.add_node(node_id, **attrs)
        self.vectors[node_id] = np.asarray(vector, dtype=np.float32)
        self._concept_row_set(node_id, self.vectors[node_id], self.g.nodes[node_id].get("kind"))
        # an id that left the view and comes back: rebuilt, as a restore is (what other
        # nodes derived from it, an echo's source, points at it again)
        delta = None if existed or node_id in self._left else self._pending()
        if delta is None:
            self.invalidate()
        else:
            delta.nodes.append(node_id)

    def set_vector(self, node_id: str, vector: np.ndarray) -> None:
        self.vectors[node_id] = np.asarray(vector, dtype=np.float32)
        if node_id in self.g:
            self._concept_row_set(node_id, self.vectors[node_id], self.g.nodes[node_id].get("kind"))
        delta = self._pending() if node_id in self.g else None
        if delta is None:
            self.invalidate()
        else:
            delta.vectors.add(node_id)

    def add_edge(self, u: str, v: str, *, kind: str, weight: float, **attrs: Any) -> None:
        """Add (or strengthen to the max weight) the edge u -> v. An edge whose weight was
        learned from feedback (``learned``) keeps its weight and kind: what usage taught is
        never undone by consolidation seeing the pair again."""
        if u == v:
            return
        delta = self._pending() if u in self.g and v in self.g else None
        if self.g.has_edge(u, v):
            data = self.g.edges[u, v]
            if weight > data["weight"] and not data.get("learned"):
                data.update(kind=kind, weight=float(weight), **attrs)
                if delta is not None:
                    delta.reweighted.add((u, v))
        else:
            self.g.add_edge(u, v, kind=kind, weight=float(weight), **attrs)
            if delta is not None:
                delta.edges.append((u, v))
        if delta is None:
            self.invalidate()

    def set_edge_weights(self, edges: Sequence[tuple[str, str]], weights: Sequence[float]) -> int:
        """Set the weight of existing edges ``u -> v`` (a learned update) and mark them
        ``learned``: unlike :meth:`add_edge` a lower weight is kept, and consolidation
        leaves the edge alone from then on (:meth:`add_edge`, :meth:`prune_incoming`). The
        compiled view, when there is one, is updated in place instead of rebuilt. Returns
        the number of edges changed; edges that do not exist are skipped."""
        changed: list[tuple[str, str, float]] = []
        _ = self.pagerank  # a deferred refresh reads the weights before they change
        for (u, v), w in zip(edges, weights):
            if self.g.has_edge(u, v):
                self.g.edges[u, v].update(weight=float(w), learned=True)
                changed.append((u, v, float(w)))
        c = self.compiled() if self._compiled is not None else None  # take pending changes
        if changed and c is not None:
            pos = c.edge_positions(np.array([c.index[u] for u, _, _ in changed]),
                                   np.array([c.index[v] for _, v, _ in changed]))
            held = pos >= 0  # all of them: the view took the pending changes above
            c.set_weights(pos[held], np.array([w for _, _, w in changed])[held])
        return len(changed)

    def append_to_attribute(self, name: str, values: Mapping[str, Any], *, keep: int,
                            derived_prefix: str) -> int:
        """Append ``values[id]`` to the list attribute ``name`` of each active node, keeping
        its last ``keep`` entries; the compiled view refreshes only that attribute and the
        derived structures under ``derived_prefix``. Returns the nodes changed."""
        n = 0
        for node_id, value in values.items():
            if node_id in self.g:
                d = self.g.nodes[node_id]
                d[name] = [*(d.get(name) or []), value][-keep:]
                n += 1
        if n and self._compiled is not None:
            self._compiled.attribute_changed(name, derived_prefix)
        return n

    def set_learned(self, graph: str, pairs: Sequence[tuple[str, str]],
                    weights: Sequence[float]) -> int:
        """Record learned weights of the derived graph ``graph`` (a model's, e.g.
        ``"evermind"``) for the pairs ``(src id, dst id)`` of active nodes; the compiled
        view drops that model's derived structures (``"<graph>."`` keys) so the next query
        rebuilds them with the new weights. Returns the number of pairs recorded."""
        table = self.learned.setdefault(graph, {})
        n = 0
        for (u, v), w in zip(pairs, weights):
            if u in self.g and v in self.g and u != v:
                table[(u, v)] = float(w)
                n += 1
        if n and self._compiled is not None:
            self._compiled.drop_derived(f"{graph}.")
        return n

    def prune_incoming(self, nodes: Iterable[str], top_k: int) -> int:
        """Keep only the ``top_k`` strongest incoming edges of each node; ties keep the
        edge from the newer source (higher ``seq``). Learned edges (feedback) are never
        pruned and count toward ``top_k``. Returns the number of edges removed."""
        removed = 0
        for v in nodes:
            if v not in self.g:
                continue
            preds = list(self.g.in_edges(v, data=True))
            if len(preds) <= top_k:
                continue
            preds.sort(key=lambda e: (bool(e[2].get("learned")), e[2]["weight"],
                                      self.g.nodes[e[0]]["seq"]), reverse=True)
            drop = [(u, v) for u, v, d in preds[top_k:] if not d.get("learned")]
            self.g.remove_edges_from(drop)
            removed += len(drop)
            delta = self._pending()
            if delta is not None:
                delta.removed.update(drop)
        return removed

    def remove_nodes(self, ids: Iterable[str]) -> list[str]:
        """Remove nodes (active or archived) for good; returns the ids that existed."""
        gone = []
        for i in ids:
            if i in self.g:
                self.g.remove_node(i)
                self._kinds_drop(i)
                self.vectors.pop(i, None)
                self.pagerank.pop(i, None)
                gone.append(i)
            if self.archive.pop(i, None) is not None:
                gone.append(i)
        gone_set = set(gone)
        for name, table in self.learned.items():  # a forgotten node takes its learned links
            pairs = [p for p in table if p[0] in gone_set or p[1] in gone_set]
            for pair in pairs:
                del table[pair]
            if pairs and self._compiled is not None:
                self._compiled.drop_derived(f"{name}.")
        for rec in self.archive.values():  # drop archived edges that point at removed nodes
            rec["edges"] = [e for e in rec["edges"] if e[0] not in gone_set and e[1] not in gone_set]
        self._leave_view(gone)
        return gone

    # -- archive --------------------------------------------------------------------------
    def archive_nodes(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Move nodes and their edges out of the active graph into the archive.
        Returns the moved nodes' vectors (the caller stores them in the archive collection)."""
        moved: dict[str, np.ndarray] = {}
        for i in ids:
            if i not in self.g:
                continue
            edges = [[u, v, dict(d)] for u, v, d in self.g.in_edges(i, data=True)]
            edges += [[u, v, dict(d)] for u, v, d in self.g.out_edges(i, data=True)]
            self.archive[i] = {"node": dict(self.g.nodes[i]), "edges": edges}
            self.g.remove_node(i)
            self._kinds_drop(i)
            self.pagerank.pop(i, None)
            moved[i] = self.vectors.pop(i)
        self._leave_view(moved)
        return moved

    def restore_nodes(self, vectors: dict[str, np.ndarray]) -> list[str]:
        """Bring archived nodes back (``vectors``: id -> embedding), with their edges to
        active nodes."""
        restored = []
        for i in vectors:
            rec = self.archive.pop(i, None)
            if rec is None:
                if i in self.g:
                    continue
                raise NodeNotFoundError(f"no archived memory with id {i!r}")
            self._kinds_add(i, rec["node"].get("kind"))
            self._concept_rows = None
            self.g.add_node(i, **rec["node"])
            self.vectors[i] = np.asarray(vectors[i], dtype=np.float32)
            restored.append(i)
            for u, v, d in rec["edges"]:
                other = v if u == i else u
                if other in self.g:
                    self.g.add_edge(u, v, **d)
                elif other in self.archive:
                    other_edges = self.archive[other]["edges"]
                    if not any(e[0] == u and e[1] == v for e in other_edges):
                        other_edges.append([u, v, d])
        if restored:  # rebuilt: what other nodes derive from it (an echo's source) comes back
            self.invalidate()
        return restored

    # -- derived state --------------------------------------------------------------------
    def compiled(self) -> Compiled:
        """Arrays for retrieval: extended with the changes since it was built
        (:class:`~.compiling.ViewDelta`, :func:`~.compiling.extend_view`), rebuilt from the
        graph (:func:`~.compiling.build_view`) only after other changes."""
        if self._compiled is not None and self._delta is not None:
            old, delta = self._compiled, self._delta
            self.invalidate()  # while the old view's vectors move: rebuilt if this fails
            if delta.dropped:
                nodes = self.g.nodes
                old = old.without([old.index[i] for i in delta.dropped],
                                  lambda ids: attribute_reader(nodes, ids))
            self._compiled = extend_view(old, delta, self.g, self.vectors, learned=self.learned)
        if self._compiled is None:
            self._left.clear()
            self._compiled = build_view(self.g, self.vectors, dim=self.dim, learned=self.learned)
        return self._compiled

    def refresh_pagerank(self, *, damping: float) -> None:
        """Recompute the cached, max-normalised PageRank now."""
        self.defer_pagerank(damping=damping)
        _ = self.pagerank

    def defer_pagerank(self, *, damping: float) -> None:
        """Refresh the cached PageRank on the graph as it stands now, computed when first
        read (:class:`~.ranks.PendingRank`): writes in a row pay for it once."""
        self._ranks.due = PendingRank(self.compiled(), damping=damping)

    def pagerank_array(self, ids_idx: np.ndarray) -> np.ndarray:
        """Cached PageRank of compiled positions ``ids_idx`` (0 for nodes added since the
        last refresh); the aligned vector is rebuilt only when the graph or the PageRank
        changed, so a query pays one gather."""
        return self.compiled().aligned(self.pagerank)[np.asarray(ids_idx, dtype=np.int64)]

    # -- persistence ----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """Node-link data of the active graph plus archive, pagerank and counters."""
        return {
            "graph": nx.node_link_data(self.g, edges="edges"),
            "archive": self.archive,
            "pagerank": self.pagerank,
            "seq": self._seq,
            "learned": {name: [[u, v, w] for (u, v), w in table.items()]
                        for name, table in self.learned.items() if table},
        }

    @classmethod
    def from_json(cls, data: Any, *, dim: int) -> MemoryGraph:
        """Inverse of :meth:`to_json` (vectors are filled in by the engine from Chroma)."""
        if not isinstance(data, dict) or "graph" not in data:
            raise SnapshotError("graph snapshot has no 'graph' section")
        mg = cls(dim)
        try:
            mg.g = nx.node_link_graph(data["graph"], directed=True, edges="edges")
        except Exception as exc:  # malformed node-link data
            raise SnapshotError(f"graph snapshot is malformed: {exc}") from exc
        if not isinstance(mg.g, nx.DiGraph):
            raise SnapshotError("graph snapshot is not a directed graph")
        for n, d in mg.g.nodes(data=True):
            if d.get("kind") not in ("episode", "concept") or not isinstance(d.get("text"), str):
                raise SnapshotError(f"graph snapshot node {n!r} lacks a valid kind/text")
        archive = data.get("archive", {})
        pagerank = data.get("pagerank", {})
        if not isinstance(archive, dict) or not isinstance(pagerank, dict):
            raise SnapshotError("graph snapshot archive/pagerank sections are malformed")
        mg.archive = archive
        mg.pagerank = {str(k): float(v) for k, v in pagerank.items()}
        learned = data.get("learned", {})
        if not isinstance(learned, dict) or not all(
                isinstance(rows, list) and all(isinstance(r, list) and len(r) == 3
                                               and isinstance(r[0], str) and isinstance(r[1], str)
                                               and isinstance(r[2], (int, float))
                                               and not isinstance(r[2], bool) for r in rows)
                for rows in learned.values()):
            raise SnapshotError("graph snapshot learned-weights section is malformed")
        mg.learned = {str(name): {(u, v): float(w) for u, v, w in rows}
                      for name, rows in learned.items()}
        mg.note_seq(int(data.get("seq", mg.g.number_of_nodes())))
        return mg

"""The read half of a memory's state: nodes, records, episodes, counts and what a forget
doomed, read from the graph and its archive without changing anything.

:class:`StateReads` is the base of :class:`~synapse_integrations.core.state.state.MemoryState`
(the one write path, which owns the attributes these methods read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...config import SynapseConfig
from ...errors import NodeNotFoundError
from ..graph.graph import FACT_TYPE, Compiled, MemoryGraph
from ..text.documents import node_document
from . import validity

__all__ = ["StateReads"]


class StateReads:
    """What :class:`~.state.MemoryState` answers without writing (see the module docstring)."""

    config: SynapseConfig
    graph: MemoryGraph
    pending: list[str]
    tombstones: dict[str, int]
    windows: int

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.graph

    def knows(self, node_id: str) -> bool:
        """``node_id`` is an active or an archived node."""
        return node_id in self.graph or node_id in self.graph.archive

    def document(self, attrs: Mapping[str, Any]) -> str:
        """What the embedder and BM25 read for a node (:func:`.documents.node_document`)."""
        return node_document(attrs, enabled=self.config.speaker_in_document)

    def node(self, node_id: str) -> dict[str, Any]:
        """The attributes of an active node (:class:`NodeNotFoundError` if none)."""
        return self.graph.node(node_id)

    def any_node(self, node_id: str) -> dict[str, Any]:
        """The attributes of an active or archived node (:class:`NodeNotFoundError`)."""
        return self.graph.node(node_id) if node_id in self.graph else self.archived_node(node_id)

    def record(self, node_id: str, *, include_archived: bool = False) -> dict[str, Any]:
        """A node's attributes with its ``id``; an archived node's too when
        ``include_archived`` (marked ``"archived": True``). :class:`NodeNotFoundError` if none."""
        if include_archived and node_id not in self and node_id in self.graph.archive:
            return {"id": node_id, **self.archived_node(node_id), "archived": True}
        return {"id": node_id, **self.node(node_id)}

    def validity(self, node_id: str) -> tuple[float | None, float | None]:
        """When an active node held, ``(valid_from, valid_until)`` in event time (None:
        unknown start, or it holds now): an episode's own, a fact's from the episodes it
        was drawn from, none for another concept (:mod:`.validity`)."""
        d = self.graph.node(node_id)
        if d.get("kind") == "episode":
            return validity.interval(d)
        if d.get("ctype") == FACT_TYPE:
            g = self.graph.g
            return validity.fact_interval(g.nodes[n] for n in g.successors(node_id)
                                          if g.nodes[n].get("kind") == "episode")
        return None, None

    def archived_node(self, node_id: str) -> dict[str, Any]:
        """The attributes of an archived node (:class:`NodeNotFoundError` if none)."""
        rec = self.graph.archive.get(node_id)
        if rec is None:
            raise NodeNotFoundError(f"no archived memory with id {node_id!r}")
        return rec["node"]

    def dead(self, node_id: str, gen: Any = 0) -> bool:
        """Was ``node_id`` forgotten after this version of it (generation ``gen``) was
        written? A forgotten turn written again under its id gets a newer generation."""
        tomb = self.tombstones.get(node_id)
        return tomb is not None and (gen if isinstance(gen, int) else 0) < tomb

    def dead_nodes(self) -> list[str]:
        """Nodes (active or archived) that a forget, here or in another engine, doomed."""
        if not self.tombstones:
            return []
        g = self.graph
        out = [n for n, d in g.g.nodes(data=True) if self.dead(n, d.get("gen", 0))]
        return out + [n for n, rec in g.archive.items() if self.dead(n, rec["node"].get("gen", 0))]

    def compiled(self) -> Compiled:
        """The array view retrieval reads (rebuilt only after the graph changed)."""
        return self.graph.compiled()

    def episodes(self, *, include_archived: bool = True) -> list[dict[str, Any]]:
        """Episodic nodes as ``{"id", "text", "speaker", "ts", "seq", "metadata", ...}``
        dicts (copies), in ingestion order, archived ones included unless asked otherwise."""
        rows = [{"id": n, **d} for n, d in self.graph.g.nodes(data=True) if d.get("kind") == "episode"]
        if include_archived:
            rows += [{"id": i, **rec["node"]} for i, rec in self.graph.archive.items()
                     if rec["node"].get("kind") == "episode"]
        rows.sort(key=lambda r: r.get("seq", 0))
        return rows

    def archived(self) -> list[dict[str, Any]]:
        """The archived nodes: ``{"id", "kind", "text", ...}`` each."""
        return [{"id": i, **rec["node"]} for i, rec in self.graph.archive.items()]

    def stats(self) -> dict[str, int]:
        """Counts of nodes by kind, edges by kind, archived nodes, pending turns, windows."""
        g = self.graph.g
        out = {"episodes": 0, "concepts": 0}
        for _, d in g.nodes(data=True):
            out[d["kind"] + "s"] += 1
        edges: dict[str, int] = {}
        for _, _, kind in g.edges(data="kind"):
            edges[kind] = edges.get(kind, 0) + 1
        return {**out, "edges": g.number_of_edges(),
                **{f"edges_{k}": v for k, v in sorted(edges.items())},
                "archived": len(self.graph.archive), "pending": len(self.pending),
                "windows": self.windows}

"""The one write path of a memory: the graph, the vectors in Chroma and the BM25 index
change together here, and nowhere else.

:class:`MemoryState` owns one namespace's stores and the bookkeeping that goes with them
(turns waiting for consolidation, the last episode, counters). The mechanisms
(ingestion, consolidation, forgetting, consistency) call its methods; none of them
writes a store directly. It holds no lock: the engine does. What only reads the stores is
in :mod:`.reads` (:class:`~.reads.StateReads`, the class it extends).

>>> from synapse_integrations.core.state.state import episode_metadata
>>> episode_metadata({"seq": 3, "ingest_ts": 1.0, "metadata": {}, "speaker": "Sam", "ts": 2.0})["kind"]
'episode'
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...config import SynapseConfig
from ...errors import NodeNotFoundError, StorageError
from ...storage.vectors import ChromaVectors
from ...types import VectorWrite
from ..graph import provenance
from ..graph.graph import MemoryGraph, temporal_weight
from ..index.bm25 import BM25Index
from . import validity
from .events import EventBus
from .reads import StateReads
from .validation import MAX_SPIKES

logger = logging.getLogger(__name__)

__all__ = ["MemoryState", "archived_metadata", "episode_metadata"]


def episode_metadata(r: Mapping[str, Any]) -> dict[str, Any]:
    """The Chroma metadata of an episode row (``seq``, ``ingest_ts``, ``metadata``, and
    ``speaker`` / ``ts`` when set)."""
    meta = {"kind": "episode", "seq": r["seq"], "ingest_ts": r["ingest_ts"],
            "metadata_json": json.dumps(r["metadata"], ensure_ascii=False)}
    if r["speaker"] is not None:
        meta["speaker"] = r["speaker"]
    if r["ts"] is not None:
        meta["ts"] = r["ts"]
    if r.get("gen"):
        meta["gen"] = r["gen"]
    return meta


def archived_metadata(node: Mapping[str, Any]) -> dict[str, Any]:
    """The Chroma metadata of an archived node's row: an episode's as its active row had it
    (:func:`episode_metadata`), so the row alone is enough to re-attach it; a concept's
    kind (concepts are derived, and re-extracted when lost)."""
    if node.get("kind") != "episode":
        return {"kind": node.get("kind", "concept")}
    meta = episode_metadata({"seq": node.get("seq") or 0, "ingest_ts": node.get("ingest_ts"),
                             "metadata": node.get("metadata") or {}, "speaker": node.get("speaker"),
                             "ts": node.get("ts"), "gen": node.get("gen", 0)})
    return {k: v for k, v in meta.items() if v is not None}


class MemoryState(StateReads):
    """The stores of one namespace and their bookkeeping (see the module docstring); its
    reads (nodes, records, episodes, counts, what a forget doomed) are :class:`StateReads`'.

    Attributes:
        config: the configuration the graph is built with.
        graph: the episodic-semantic graph, its in-memory vectors and its archive.
        vectors: the namespace's two Chroma collections (active, archive).
        bm25: the lexical index over the active nodes' texts.
        pending: episode ids not consolidated yet, oldest first.
        last_episode: the newest episode (the next one gets a temporal edge from it).
        windows: consolidation windows run so far.
        windows_since_snapshot: windows since the last snapshot.
        stale_pagerank: the graph changed since PageRank was last computed.
        needs_repair: a storage error left the stores out of step.
        tombstones: forgotten ids -> generation (ids only, never text; persisted in
            Chroma beside the collections, so every engine and every open sees them): a
            node or Chroma row of that id with a lower ``gen`` is dead and never comes
            back (see :meth:`dead`).
    """

    def __init__(self, config: SynapseConfig, vectors: ChromaVectors,
                 events: EventBus | None = None) -> None:
        self.config = config
        self.events = events or EventBus()
        self.graph = MemoryGraph(config.embedding_dim)
        self.vectors = vectors
        self.bm25 = BM25Index(stemming=config.lexical_stemming)
        self.pending: list[str] = []
        self.last_episode: str | None = None
        self.windows = 0
        self.windows_since_snapshot = 0
        self.stale_pagerank = False
        self.needs_repair = False
        self.tombstones: dict[str, int] = {}
        self.slept: dict[str, Any] = {}  # the last sleep: {"seq", "ts"} (core/lifecycle/sleep.py)
        self._tombstone_count = -1  # rows seen in Chroma's record of them (-1: not read)
        # concept vectors written once per batch instead of once per window (None: write
        # at once); flushed before any snapshot is taken
        self._deferred: set[str] | None = None

    # ------------------------------------------------------------------------------------
    # forgotten ids (what they doom is read in :class:`~.reads.StateReads`)
    # ------------------------------------------------------------------------------------
    def read_tombstones(self, *, if_changed: bool = False) -> bool:
        """Load the record of forgotten ids from Chroma (``if_changed``: only when it grew
        since the last read; one count round trip). Returns True when it was read."""
        if if_changed:
            count = self.vectors.forgotten.count()
            if count == self._tombstone_count:
                return False
        self.tombstones, self._tombstone_count = self.vectors.forgotten.read()
        return True

    def record_tombstones(self, ids: Sequence[str]) -> None:
        """Persist that ``ids`` are forgotten (before they are removed): each gets the
        generation after the newest one written."""
        marks = {}
        for i in ids:
            gen = 0
            if i in self.graph:
                gen = self.graph.node(i).get("gen", 0)
            elif i in self.graph.archive:
                gen = self.graph.archive[i]["node"].get("gen", 0)
            marks[i] = max(int(gen or 0), self.tombstones.get(i, 0)) + 1
        if marks:
            self.vectors.forgotten.add(marks)
            self.tombstones.update(marks)
            self._tombstone_count = -1

    # ------------------------------------------------------------------------------------
    # episodes
    # ------------------------------------------------------------------------------------
    def write_episodes(self, rows: Sequence[Mapping[str, Any]], embs: np.ndarray) -> None:
        """Make turns durable: one upsert of their vectors, texts and metadata into the
        active collection (:class:`StorageError` if Chroma fails)."""
        self.vectors.active.upsert([r["id"] for r in rows], embs, [r["text"] for r in rows],
                                   [episode_metadata(r) for r in rows])

    def link_episode(self, node_id: str, vector: np.ndarray, *, text: str, speaker: str | None,
                     ts: float | None, ingest_ts: float | None, metadata: dict[str, Any],
                     seq: int | None = None, gen: int = 0,
                     affect: Sequence[float] | None = None) -> None:
        """Add a stored turn to the graph (with its temporal edge from the previous
        episode, and its ``affect`` tags when given), to the BM25 index and to the turns
        awaiting consolidation."""
        attrs: dict[str, Any] = {"kind": "episode", "text": text, "speaker": speaker, "ts": ts,
                                 "ingest_ts": ingest_ts, "metadata": metadata, "dormant": 0}
        if affect is not None:
            attrs["affect"] = [float(x) for x in affect]
        if gen:
            attrs["gen"] = gen
        if seq is not None:
            attrs["seq"] = seq
            self.graph.note_seq(seq)
        self.graph.add_node(node_id, vector, **attrs)
        prev = self.last_episode
        if prev is not None and prev in self.graph:
            prev_ts = self.graph.node(prev)["ts"]
            dt = (ts - prev_ts) if (ts is not None and prev_ts is not None) else 0.0
            cfg = self.config
            w = temporal_weight(dt, rho=cfg.temporal_rho, seconds_per_unit=cfg.seconds_per_time_unit)
            self.graph.add_edge(prev, node_id, kind="temporal", weight=w)
            if cfg.temporal_bidirectional:
                self.graph.add_edge(node_id, prev, kind="temporal", weight=w)
        self.last_episode = node_id
        self.pending.append(node_id)
        self.bm25.add(node_id, self.document(attrs))

    def set_salience(self, node_id: str, salience: float, *, low: bool) -> None:
        """Record an episode's surprisal (:mod:`.surprisal`); ``low``: under the gate's tau."""
        self.graph.set_attributes(node_id, salience=float(salience),
                                  **({"low_salience": True} if low else {}))

    def newest_episode(self) -> str | None:
        """The active episode with the highest ``seq`` (None when there is none)."""
        eps = self.graph.ids("episode")
        return max(eps, key=lambda n: self.graph.node(n)["seq"]) if eps else None

    def supersede(self, old: str, new: str, *, at: float) -> None:
        """Record that episode ``new`` replaces episode ``old`` (both kept): ``old`` gets
        ``superseded_by`` and ``superseded_at``, ``new`` gets ``supersedes``."""
        self.graph.node(old).update(superseded_by=new, superseded_at=at)
        self.graph.node(new)["supersedes"] = old
        self.graph.invalidate()  # the compiled view caches node attributes

    # ------------------------------------------------------------------------------------
    # concepts and edges (consolidation)
    # ------------------------------------------------------------------------------------
    def add_concept(self, cid: str, vector: np.ndarray, *, name: str, ctype: str,
                    confidence: float, attributes: dict[str, Any],
                    source: provenance.Entry) -> None:
        """A new concept node, indexed for BM25 under its name; ``source`` says which
        turns it was extracted from (:mod:`.provenance`)."""
        attrs: dict[str, Any] = {}
        if attributes:
            attrs["attribute_sources"] = provenance.merge(provenance.new_entry(), source)
        self.graph.add_node(cid, vector, kind="concept", text=name, name=name, ctype=ctype,
                            confidence=float(confidence), attributes=dict(attributes),
                            mentions=1, aliases=[name], dormant=0, sources={name: source},
                            **attrs)
        self.bm25.add(cid, name)

    def merge_concept(self, cid: str, vector: np.ndarray, alias: str,
                      source: provenance.Entry) -> None:
        """A concept seen again: its (EMA-updated) vector, one more mention, the alias and
        the turns it was extracted from this time."""
        self.graph.set_vector(cid, vector)
        node = self.graph.node(cid)
        node["mentions"] = node.get("mentions", 1) + 1
        if alias not in node["aliases"]:
            node["aliases"].append(alias)
        sources = node.setdefault("sources", {})
        provenance.merge(sources.setdefault(alias, provenance.new_entry()), source)

    def note_relation(self, u: str, v: str, window: Sequence[str]) -> None:
        """Record that the relation edge ``u -> v`` was extracted from ``window``."""
        if self.graph.g.has_edge(u, v) and self.graph.g.edges[u, v].get("kind") == "relation":
            data = self.graph.g.edges[u, v]
            provenance.add(data.setdefault("sources", provenance.new_entry()), window=window)

    def add_edge(self, u: str, v: str, *, kind: str, weight: float, **attrs: Any) -> None:
        """Add (or strengthen to the max weight) the edge ``u -> v``."""
        self.graph.add_edge(u, v, kind=kind, weight=weight, **attrs)

    def record_spikes(self, spikes: Any, *, keep: int = MAX_SPIKES) -> int:
        """Append ``[spikes.time, value]`` to the spike train (``spikes`` attribute) of each
        node of ``spikes.ids`` (values ``spikes.values``: SynapticRAG's stimuli recorded at
        retrieval), keeping the last ``keep``. ``None`` records nothing. Returns the nodes
        changed."""
        if spikes is None:
            return 0
        return self.graph.append_to_attribute(
            "spikes", {i: [float(spikes.time), float(v)] for i, v in zip(spikes.ids, spikes.values)},
            keep=keep, derived_prefix="synaptic.")

    def learn_weights(self, graph: str, pairs: Sequence[tuple[str, str]],
                      weights: Sequence[float]) -> int:
        """Learned edge weights from usage feedback (:mod:`.feedback`): on the memory
        graph's own edges (``graph="memory"``, marked ``learned``) or in a model's table of
        learned weights for its derived graph. Returns how many were recorded."""
        if graph == "memory":
            n = self.graph.set_edge_weights(pairs, weights)
            self.stale_pagerank = self.stale_pagerank or n > 0
            return n
        return self.graph.set_learned(graph, pairs, weights)

    def prune_incoming(self, nodes: Sequence[str], top_k: int) -> int:
        """Keep the ``top_k`` strongest incoming edges of each node; returns edges removed."""
        return self.graph.prune_incoming(nodes, top_k)

    def write_concept_vectors(self, ids: Sequence[str]) -> None:
        """Write concepts' current vectors to Chroma: at once, or at the end of the batch
        when :meth:`batched_concept_writes` is open."""
        if self._deferred is not None:
            self._deferred.update(ids)
        elif ids:
            self.upsert_vectors(list(ids), np.stack([self.graph.vectors[i] for i in ids]))

    @contextmanager
    def batched_concept_writes(self) -> Iterator[None]:
        """Collect the concept vectors the windows inside touch and write them to Chroma in
        one upsert on the way out (their latest values; concepts archived meanwhile are
        skipped). Nothing reads Chroma's copy of a concept in between, and snapshots are
        only taken after the flush, so a crash leaves no snapshot naming an unwritten
        concept: its windows' turns are re-consolidated on the next open. Nested uses
        join the outer batch."""
        if self._deferred is not None:
            yield
            return
        self._deferred = set()
        try:
            yield
        finally:
            try:
                self.flush_concept_vectors()
            finally:
                self._deferred = None

    def flush_concept_vectors(self) -> int:
        """Write the concept vectors collected so far (if batching) and keep batching.
        Returns how many were written."""
        ids = self._deferred
        if not ids:
            return 0
        self._deferred = set()
        live = [i for i in ids if i in self.graph and i in self.graph.vectors]
        if live:
            t0 = time.perf_counter()
            try:
                self.upsert_vectors(live, np.stack([self.graph.vectors[i] for i in live]))
            except StorageError:
                self.needs_repair = True  # repair() writes the graph's vectors again
                raise
            self.events.emit(VectorWrite("concept", len(live), time.perf_counter() - t0))
        return len(live)

    # ------------------------------------------------------------------------------------
    # vectors in Chroma
    # ------------------------------------------------------------------------------------
    def upsert_vectors(self, ids: Sequence[str], embs: np.ndarray) -> None:
        """Write active nodes' vectors with their text and metadata (from the graph)."""
        metas = []
        for i in ids:
            d = self.graph.node(i)
            if d["kind"] == "episode":
                metas.append(episode_metadata(d))
            else:
                metas.append({"kind": "concept", "seq": d["seq"]})
        self.vectors.active.upsert(list(ids), embs, [self.graph.node(i)["text"] for i in ids],
                                   metas)

    def upsert_archived(self, ids: Sequence[str], embs: np.ndarray) -> None:
        """Write archived nodes' vectors to the archive collection, with their text and,
        for an episode, the whole record its active row held (:func:`archived_metadata`):
        until the next snapshot the archive row is the only copy of a turn archived since
        the last one, and the open re-attaches it from there (:mod:`.consistency`)."""
        recs = [self.graph.archive[i]["node"] for i in ids]
        self.vectors.archive.upsert(ids, embs, [r["text"] for r in recs],
                                    [archived_metadata(r) for r in recs])

    def adopt_archived(self, node_id: str, *, text: str, speaker: str | None,
                       ts: float | None, ingest_ts: float | None, metadata: dict[str, Any],
                       seq: int | None = None, gen: int = 0) -> None:
        """Record an archived turn that the graph does not know (archived after the last
        snapshot, found again in the archive collection): it stays archived, without the
        edges it had (its concepts are derived data), and comes back whole on restore."""
        attrs: dict[str, Any] = {"kind": "episode", "text": text, "speaker": speaker, "ts": ts,
                                 "ingest_ts": ingest_ts, "metadata": metadata, "dormant": 0}
        if gen:
            attrs["gen"] = gen
        if seq is not None:
            attrs["seq"] = seq
            self.graph.note_seq(seq)
        self.graph.archive[node_id] = {"node": attrs, "edges": []}

    # ------------------------------------------------------------------------------------
    # archive, restore, remove
    # ------------------------------------------------------------------------------------
    def archive(self, ids: Sequence[str]) -> list[str]:
        """Move nodes out of the active graph, their vectors to the archive collection and
        their texts out of the BM25 index. Returns the ids moved."""
        vectors = self.graph.archive_nodes(ids)
        if not vectors:
            return []
        moved = list(vectors)
        self.upsert_archived(moved, np.stack(list(vectors.values())))
        self.vectors.active.delete(moved)
        self.bm25.remove(moved)
        self.pending = [p for p in self.pending if p not in vectors]
        self.stale_pagerank = True
        logger.info("archived %d node(s)", len(moved))
        return moved

    def restore(self, ids: Sequence[str], embedder: Any) -> list[str]:
        """Bring archived nodes back into the active graph (their vectors from the archive
        collection, or embedded again from their text when lost there)."""
        missing = [i for i in ids if i not in self.graph.archive]
        if missing:
            raise NodeNotFoundError(f"no archived memory with id(s) {missing[:5]}")
        got, matrix, _ = self.vectors.archive.get(list(ids))
        vectors = dict(zip(got, matrix))
        lost = [i for i in ids if i not in vectors]
        if lost:  # vector lost from the archive collection: embed the text again
            texts = [self.document(self.graph.archive[i]["node"]) for i in lost]
            vectors.update(zip(lost, embedder.embed_documents(texts)))
        restored = self.graph.restore_nodes({i: vectors[i] for i in ids})
        if not restored:  # nothing asked, or only ids that are active already
            return []
        for i in restored:
            self.graph.node(i)["dormant"] = 0
        self.upsert_vectors(restored, np.stack([vectors[i] for i in restored]))
        self.vectors.archive.delete(restored)
        for i in restored:
            self.bm25.add(i, self.document(self.graph.node(i)))
        self.stale_pagerank = True
        return restored

    def remove(self, ids: Sequence[str], *, chroma: bool = True) -> list[str]:
        """Remove ``ids`` for good from the graph, the archive, both collections (unless
        ``chroma`` is False) and the indexes. A Chroma row of an id written again after it
        was forgotten (a newer generation, by another engine on the same Chroma) stays.
        Returns the ids that existed in the graph or the archive. Versions that stay are
        linked over the gap (:func:`~.validity.splice`)."""
        relinked = validity.splice(lambda i: self.any_node(i) if self.knows(i) else None, ids)
        removed = list(dict.fromkeys(self.graph.remove_nodes(ids)))
        for node_id, attrs in relinked.items():
            d = self.any_node(node_id)
            for name, value in attrs.items():
                if value is None:
                    d.pop(name, None)
                else:
                    d[name] = value
        if relinked:
            self.graph.invalidate()  # the compiled view caches node attributes
        if chroma:
            for col in (self.vectors.active, self.vectors.archive):
                col.delete([i for i, gen in col.generations(ids).items() if self.dead(i, gen)
                            or i not in self.tombstones])
        self.bm25.remove(ids)
        gone = set(ids)
        self._prune_provenance(gone)
        self.pending = [p for p in self.pending if p not in gone]
        if self.last_episode in gone:
            self.last_episode = self.newest_episode()
        return removed

    def _prune_provenance(self, gone: set[str]) -> None:
        """Forgotten turns leave every provenance entry; attributes and relation edges
        nothing justifies any more (only forgotten turns said them) go
        (:mod:`.provenance`). Concepts whose name nothing justifies were removed by the
        caller (:func:`~.forgetting.select` names them)."""
        g = self.graph.g

        def prune_node(d: dict[str, Any]) -> None:
            for entry in (d.get("sources") or {}).values():
                provenance.prune(entry, gone)
            attrs = d.get("attribute_sources")
            if attrs is not None and not provenance.justified(provenance.prune(attrs, gone), ()):
                d["attributes"] = {}  # said only by forgotten turns: they go, the concept stays
                del d["attribute_sources"]

        def stale(d: dict[str, Any]) -> bool:
            return d.get("sources") is not None and \
                not provenance.justified(provenance.prune(d["sources"], gone), ())

        for _, d in g.nodes(data=True):
            prune_node(d)
        dropped = [(u, v) for u, v, d in g.edges(data=True) if stale(d)]
        g.remove_edges_from(dropped)
        for rec in self.graph.archive.values():
            prune_node(rec["node"])
            rec["edges"] = [e for e in rec["edges"] if not stale(e[2])]
        if dropped:
            self.graph.invalidate()
            logger.info("removed %d relation edge(s) extracted from forgotten turns", len(dropped))

    # ------------------------------------------------------------------------------------
    # derived state
    # ------------------------------------------------------------------------------------
    def refresh_pagerank(self) -> None:
        """Recompute the cached PageRank now."""
        self.graph.refresh_pagerank(damping=self.config.pagerank_damping)
        self.stale_pagerank = False

    def refresh_pagerank_if_stale(self) -> None:
        """Refresh PageRank once after the graph changed (consolidation, archive): on the
        graph as it stands now, computed when it is first read (a query, a snapshot), so
        that a bulk import pays for it once, not once per chunk
        (:meth:`~..graph.graph.MemoryGraph.defer_pagerank`)."""
        if self.stale_pagerank:
            self.graph.defer_pagerank(damping=self.config.pagerank_damping)
            self.stale_pagerank = False

    # ------------------------------------------------------------------------------------
    # snapshots
    # ------------------------------------------------------------------------------------
    def snapshot_files(self) -> dict[str, Any]:
        """What a snapshot holds (JSON): the graph and the ingestion bookkeeping."""
        return {"graph": self.graph.to_json(),
                "state": {"pending": self.pending, "last_episode": self.last_episode,
                          "windows": self.windows, "slept": self.slept}}

    def load_snapshot(self, files: Mapping[str, Any]) -> None:
        """Replace the graph and bookkeeping with a snapshot's (validated beforehand).
        Vectors are filled in from Chroma by the consistency check that follows."""
        self.graph = MemoryGraph.from_json(files.get("graph"), dim=self.config.embedding_dim)
        state = files.get("state") or {}
        self.pending = [i for i in state.get("pending", []) if i in self.graph]
        self.last_episode = state.get("last_episode")
        self.windows = int(state.get("windows", 0))
        slept = state.get("slept")
        self.slept = {k: slept[k] for k in ("seq", "ts") if isinstance(slept.get(k), (int, float))
                      and not isinstance(slept.get(k), bool)} if isinstance(slept, dict) else {}

"""The one stateful facade: :class:`Synapse`.

It owns one namespace's graph, its Chroma collections, its BM25 index and its snapshots,
and exposes ingestion (``add_turn`` / ``add_turns``), consolidation, retrieval,
forgetting, archiving and persistence, each with an ``a``-prefixed async twin.

>>> from synapse_integrations import Synapse
>>> mem = Synapse()                                           # doctest: +SKIP
>>> mem.add_turn("I went skiing in Whistler with Dana.", speaker="Sam")  # doctest: +SKIP
'ep-...'
>>> mem.retrieve("Who came on the ski trip?").items[0].text  # doctest: +SKIP
'I went skiing in Whistler with Dana.'
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import math
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp

from ..config import SynapseConfig
from ..embeddings import as_embedder
from ..errors import (
    ExtractionError,
    InvalidInputError,
    InvalidTypeError,
    NamespaceError,
    NodeNotFoundError,
    SnapshotError,
    StorageError,
    UnknownNamespaceError,
)
from ..firewall import Firewall, FirewallConfig
from ..storage.chroma import ChromaVectors, close_client, list_namespaces, persistent_client
from ..storage.lock import DirectoryLock
from ..storage.snapshots import SnapshotStore, write_atomic
from ..types import (
    Concept,
    RetrievalResult,
    RetrievedItem,
    ScoreComponents,
    Turn,
)
from . import dynamics, scoring
from .extraction import OfflineExtractor
from .graph import MemoryGraph, temporal_weight
from .triggers import BM25Index, tokenize

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_NAMESPACE_LEN = 256
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SLUG_RE = re.compile(r"[^A-Za-z0-9_-]+")


def validate_namespace(namespace: Any) -> str:
    """Return ``namespace`` if it is usable, else raise :class:`NamespaceError`.

    Any printable string of 1-256 characters is allowed; it is never used as a path
    (folders and collections are named from a hash of it).
    """
    if not isinstance(namespace, str):
        raise NamespaceError(f"namespace must be a str, got {type(namespace).__name__}")
    if not namespace.strip():
        raise NamespaceError("namespace must not be empty or whitespace")
    if len(namespace) > MAX_NAMESPACE_LEN:
        raise NamespaceError(f"namespace is {len(namespace)} characters; at most {MAX_NAMESPACE_LEN}")
    if _CONTROL_RE.search(namespace):
        raise NamespaceError("namespace must not contain control characters")
    if not _utf8_ok(namespace):
        raise NamespaceError("namespace is not valid Unicode (it holds a lone surrogate)")
    return namespace


def namespace_dirname(namespace: str) -> str:
    """A safe folder name for a namespace: a readable slug plus a hash (no traversal)."""
    import hashlib

    slug = _SLUG_RE.sub("_", namespace).strip("_")[:40] or "ns"
    return f"{slug}-{hashlib.sha256(namespace.encode('utf-8')).hexdigest()[:16]}"


_MIN_EPOCH = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
_MAX_EPOCH = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()


def to_epoch(timestamp: Any) -> float:
    """Seconds since the epoch (UTC) for a datetime, an epoch number or an ISO 8601 string.
    Naive datetimes are taken as UTC. Times outside the years 1-9999 (UTC) are refused:
    they could not be turned back into a datetime."""
    ts = _to_epoch(timestamp)
    if not _MIN_EPOCH <= ts <= _MAX_EPOCH:
        raise InvalidInputError(f"timestamp {timestamp!r} is outside the years 1-9999 (UTC)")
    return ts


def _to_epoch(timestamp: Any) -> float:
    if isinstance(timestamp, bool):
        raise InvalidTypeError("timestamp must be a datetime, an ISO 8601 string or epoch seconds, not bool")
    if isinstance(timestamp, datetime):
        dt = timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=timezone.utc)
        return dt.timestamp()
    if isinstance(timestamp, (int, float)):
        if not math.isfinite(timestamp):
            raise InvalidInputError(f"timestamp must be finite, got {timestamp!r}")
        return float(timestamp)
    if isinstance(timestamp, str):
        try:
            return _to_epoch(datetime.fromisoformat(timestamp.strip().replace("Z", "+00:00")))
        except ValueError:
            raise InvalidInputError(f"timestamp {timestamp!r} is not ISO 8601") from None
    raise InvalidTypeError(
        f"timestamp must be a datetime, an ISO 8601 string or epoch seconds, got {type(timestamp).__name__}"
    )


def from_epoch(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc)


def _stored_config(data: Any, *, warn: bool = True) -> SynapseConfig:
    """The config saved with a snapshot. Fields this version does not know (written by a
    newer version) are ignored with a warning instead of making the memory unreadable."""
    if isinstance(data, Mapping):
        known = {f.name for f in dataclasses.fields(SynapseConfig)}
        unknown = sorted(set(data) - known)
        if unknown:
            if warn:
                logger.warning("the snapshot's config has field(s) this version does not know, "
                               "ignored: %s", ", ".join(map(str, unknown)))
            data = {k: v for k, v in data.items() if k in known}
        if "abstraction_scope" not in data:
            # written before the field existed (0.1.0 betas): those memories linked each
            # concept to its whole window unless ``extra`` asked for mentions
            extra = data.get("extra") if isinstance(data.get("extra"), Mapping) else {}
            data = {**data, "abstraction_scope": extra.get("abstraction_scope", "window")}
    return SynapseConfig.from_dict(data)


MAX_TEXT_CHARS = 100_000
"""Longest turn text accepted (characters). Longer text is refused with a clear error
rather than chunked: one turn is one episodic node, and the embedder reads only its first
~256 tokens anyway. Split long documents into several turns."""

_NAME_CACHE_SIZE = 4096  # concept-name embeddings kept per engine

#: Concept types that are not named entities, for ``entity_feedback`` (the offline
#: extractor's key phrases).
_NOT_ENTITY_TYPES = frozenset({"Topic"})


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


@dataclass
class _Pass:
    """One retrieval pass: candidates (indices into the compiled graph) and their signals."""

    cand: np.ndarray
    order: np.ndarray
    score: np.ndarray
    sim: np.ndarray
    activation: np.ndarray
    pr: np.ndarray
    lexical: np.ndarray | None
    parents: np.ndarray | None
    dense_rank: dict[str, int]
    bm25_rank: dict[str, int]

_EDGE_KINDS = ("temporal", "abstraction", "association", "relation")


def _utf8_ok(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class ConsistencyReport:
    """What :meth:`Synapse.verify` found (and :meth:`Synapse.repair` did).

    ``ok`` is True when the graph, the Chroma collections, the BM25 index and the
    in-memory vectors agree (after repair: when they agree now). Id tuples list the
    disagreements found; ``actions`` says, in words, what repair changed.
    """

    ok: bool
    episodes: int
    concepts: int
    archived: int
    vectors: int
    missing_vectors: tuple[str, ...] = ()      # graph nodes with no vector in Chroma
    orphan_vectors: tuple[str, ...] = ()       # Chroma vectors with no graph node
    archive_missing: tuple[str, ...] = ()      # archived nodes with no archived vector
    archive_orphans: tuple[str, ...] = ()      # archived vectors with no archived node
    problems: tuple[str, ...] = ()             # everything found, in words
    actions: tuple[str, ...] = ()              # what repair did, in words
    repaired: bool = False
    seconds: float = 0.0


@dataclass(frozen=True)
class ConsolidationReport:
    """What one call of :meth:`Synapse.consolidate` did."""

    windows: int
    episodes: int
    concepts_created: int
    concepts_merged: int
    edges_pruned: int
    archived: int
    seconds: float


class Synapse:
    """SYNAPSE memory for one namespace (a user, a thread...).

    Args:
        path: folder holding the embedded Chroma files and the graph snapshots. ``None``
            gives a throwaway memory in a temporary folder, removed by :meth:`close`.
        namespace: which memory inside ``path``; each has its own collections and graph.
        config: hyperparameters (defaults: the paper's); stored with the snapshots.
        embedder: any object with ``embed_documents`` / ``embed_query`` (a LangChain
            ``Embeddings`` works); default: the packaged all-MiniLM-L6-v2.
        client: a Chroma client to use instead of the embedded one, e.g.
            ``synapse_integrations.storage.chroma.http_client("127.0.0.1", 8000)``.
        extractor: the concept extractor (default :class:`OfflineExtractor`; an
            :class:`LLMExtractor` takes any LangChain chat model).
        snapshot_every: write a snapshot every this many consolidation windows (turns are
            durable in Chroma as soon as ``add_turn`` returns; see docs/concepts.md).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        namespace: str = "default",
        config: SynapseConfig | None = None,
        embedder: Any | None = None,
        client: Any | None = None,
        extractor: Any | None = None,
        snapshot_every: int = 20,
        create: bool = True,
        firewall: FirewallConfig | None = None,
    ) -> None:
        self.namespace = validate_namespace(namespace)
        if config is not None and not isinstance(config, SynapseConfig):
            raise InvalidTypeError(f"config must be a SynapseConfig, got {type(config).__name__}")
        if isinstance(snapshot_every, bool) or not isinstance(snapshot_every, int):
            raise InvalidTypeError(f"snapshot_every must be an int, got {type(snapshot_every).__name__}")
        if path is not None and not isinstance(path, (str, Path)):
            raise InvalidTypeError(f"path must be a str or Path, got {type(path).__name__}")
        self._firewall = Firewall(firewall)
        self._owns_path = path is None
        self.path = Path(tempfile.mkdtemp(prefix="synapse-")) if path is None else Path(path)
        if not create and client is None and not (self.path / "chroma").exists():
            raise UnknownNamespaceError(
                f"no memory named {namespace!r} under {self.path} (pass create=True to start one)"
            )
        self._lock = threading.RLock()
        self._closed = False
        self.snapshot_every = max(1, snapshot_every)
        self._needs_repair = False
        self._recovered: set[str] = set()  # ids re-attached by a repair: a retried add is a no-op
        self._unconfirmed: dict[str, tuple[Any, ...]] = {}  # id -> content of a failed write
        self._owns_client = client is None  # an embedded client we made is closed by close()
        self._client: Any = None
        self._dirlock = DirectoryLock(self.path).acquire()  # MemoryLockedError in a 2nd process
        try:
            self._open(config, embedder, client, extractor, create)
        except BaseException:
            self._closed = True
            self._release()
            raise

    def _open(self, config: SynapseConfig | None, embedder: Any, client: Any, extractor: Any,
              create: bool) -> None:
        namespace = self.namespace
        self._ns_dir = self.path / "namespaces" / namespace_dirname(namespace)
        self._snapshots = SnapshotStore(self._ns_dir / "snapshots")
        self._snapshots.clean_leftovers()  # we hold the lock: any temp folder is a dead writer's
        self._client = client if client is not None else persistent_client(self.path / "chroma")
        loaded = self._snapshots.load_latest(validate=self._validate_snapshot)
        if loaded is None and not create and namespace not in list_namespaces(self._client):
            raise UnknownNamespaceError(
                f"no memory named {namespace!r} under {self.path} (pass create=True to start one)"
            )
        stored_cfg = _stored_config(loaded[0]["config"]) if loaded else None
        self.config = config or stored_cfg or SynapseConfig()
        if stored_cfg and stored_cfg.embedding_dim != self.config.embedding_dim:
            raise InvalidInputError(
                f"this memory was built with embedding_dim={stored_cfg.embedding_dim}, "
                f"the config asks for {self.config.embedding_dim}"
            )
        self._embedder = as_embedder(embedder, dim=self.config.embedding_dim)
        self._extractor = extractor or OfflineExtractor(max_concepts=self.config.max_concepts_per_window)
        self._vectors = ChromaVectors(
            self._client, namespace,
            sqlite_path=self.path / "chroma" / "chroma.sqlite3" if client is None else None)

        self._graph = MemoryGraph(self.config.embedding_dim)
        self._bm25 = BM25Index()
        self._pending: list[str] = []
        self._last_episode: str | None = None
        self._windows = 0
        self._windows_since_snapshot = 0
        self._queries_in_window = 0
        self._window_active: set[str] = set()
        self._stale_pagerank = False  # PageRank is refreshed once after consolidation windows
        # concept name -> embedding: speakers and recurring names are embedded once, not
        # once per window (bounded; the embedder is fixed for the engine's life)
        self._name_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        # concept vectors written once per add_turns()/consolidate() call instead of once
        # per window (None: write at once); flushed before any snapshot is taken
        self._deferred_concepts: set[str] | None = None
        self._restore_state(loaded)
        self._vectors.clear_index_slack()  # Chroma may have just rewritten its HNSW files

    # ------------------------------------------------------------------------------------
    # opening, saving, closing
    # ------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, *, namespace: str = "default", **kwargs: Any) -> Synapse:
        """Open an existing memory; :class:`UnknownNamespaceError` if there is none."""
        return cls(path, namespace=namespace, create=False, **kwargs)

    def _validate_snapshot(self, manifest: dict[str, Any], files: dict[str, Any]) -> None:
        """Reject (with :class:`SnapshotError`) a snapshot whose checksums match but whose
        content is not what this engine writes; the store then falls back to an older one."""
        if manifest.get("namespace") not in (None, self.namespace):
            raise SnapshotError(f"snapshot belongs to namespace {manifest.get('namespace')!r}, "
                                f"not {self.namespace!r}")
        try:
            _stored_config(manifest.get("config"), warn=False)
        except Exception as exc:  # any malformed config is a bad snapshot
            raise SnapshotError(f"snapshot config is unusable: {exc}") from None
        try:
            mg = MemoryGraph.from_json(files.get("graph"), dim=1)
        except SnapshotError:
            raise
        except Exception as exc:
            raise SnapshotError(f"graph snapshot is malformed: {exc}") from None
        for n, d in mg.g.nodes(data=True):
            if not isinstance(n, str) or isinstance(d.get("seq"), bool) or not isinstance(d.get("seq"), int):
                raise SnapshotError(f"graph snapshot node {n!r} lacks a valid id/seq")
            if d["kind"] == "episode":
                ts = d.get("ts")
                if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float))
                                       or not math.isfinite(ts)):
                    raise SnapshotError(f"graph snapshot node {n!r} has a bad timestamp")
                if not isinstance(d.get("metadata", {}), dict) or \
                        not isinstance(d.get("speaker"), (str, type(None))):
                    raise SnapshotError(f"graph snapshot node {n!r} has bad speaker/metadata")
            elif not isinstance(d.get("aliases", []), list):
                raise SnapshotError(f"graph snapshot concept {n!r} has bad aliases")
        for u, v, d in mg.g.edges(data=True):
            w = d.get("weight")
            if d.get("kind") not in _EDGE_KINDS or isinstance(w, bool) \
                    or not isinstance(w, (int, float)) or not math.isfinite(w):
                raise SnapshotError(f"graph snapshot edge {u!r}->{v!r} has a bad kind/weight")
        for n, rec in mg.archive.items():
            if not (isinstance(rec, dict) and isinstance(rec.get("node"), dict)
                    and rec["node"].get("kind") in ("episode", "concept")
                    and isinstance(rec["node"].get("text"), str)
                    and isinstance(rec.get("edges"), list)
                    and all(isinstance(e, list) and len(e) == 3 and isinstance(e[2], dict)
                            for e in rec["edges"])):
                raise SnapshotError(f"graph snapshot archive record {n!r} is malformed")
        state = files.get("state", {})
        if not isinstance(state, dict) or not isinstance(state.get("pending", []), list) \
                or not all(isinstance(i, str) for i in state.get("pending", [])) \
                or not isinstance(state.get("last_episode"), (str, type(None))) \
                or isinstance(state.get("windows", 0), bool) \
                or not isinstance(state.get("windows", 0), int):
            raise SnapshotError("snapshot state section is malformed")

    def _restore_state(self, loaded: tuple[dict[str, Any], dict[str, Any]] | None) -> None:
        if loaded is not None:
            _, files = loaded
            self._graph = MemoryGraph.from_json(files.get("graph"), dim=self.config.embedding_dim)
            state = files.get("state") or {}
            self._pending = [i for i in state.get("pending", []) if i in self._graph]
            self._last_episode = state.get("last_episode")
            self._windows = int(state.get("windows", 0))
        journal = self._read_forget_journal()
        if journal is not None:  # a forget() was interrupted: finish it before anything else
            logger.warning("finishing an interrupted forget() of %d id(s)", len(journal))
            self._apply_forget(journal)
        self.load_report = self._reconcile(fix=True, loading=True)
        if journal is not None:
            self._finish_forget(journal)

    # -- consistency ----------------------------------------------------------------------
    def verify(self) -> ConsistencyReport:
        """Check that the graph, both Chroma collections, the BM25 index and the in-memory
        vectors agree; changes nothing. ``report.ok`` is the verdict, ``report.problems``
        says what disagrees (see :meth:`repair`).

        >>> mem.verify().ok                                      # doctest: +SKIP
        True
        """
        with self._lock:
            self._check_open()
            return self._reconcile(fix=False)

    def repair(self) -> ConsistencyReport:
        """Bring the stores back into agreement, then verify: graph nodes whose vectors
        are missing are re-embedded, episodes found only in Chroma are re-attached, stray
        concept vectors are removed, misplaced archive vectors are moved, derived indexes
        are rebuilt. Everything done is logged and listed in ``report.actions``; the
        graph (the snapshot) is the record, Chroma's episodes are never dropped."""
        with self._lock:
            self._check_open()
            fixed = self._reconcile(fix=True)
            after = self._reconcile(fix=False)
            self._needs_repair = not after.ok
            return ConsistencyReport(
                ok=after.ok, episodes=after.episodes, concepts=after.concepts,
                archived=after.archived, vectors=after.vectors,
                missing_vectors=fixed.missing_vectors, orphan_vectors=fixed.orphan_vectors,
                archive_missing=fixed.archive_missing, archive_orphans=fixed.archive_orphans,
                problems=fixed.problems + tuple(f"after repair: {p}" for p in after.problems),
                actions=fixed.actions, repaired=True, seconds=fixed.seconds + after.seconds)

    def _reconcile(self, *, fix: bool, loading: bool = False) -> ConsistencyReport:
        t0 = time.perf_counter()
        g = self._graph
        dim = self.config.embedding_dim
        problems: list[str] = []
        actions: list[str] = []
        ids, matrix, _ = self._vectors.active.get()
        vec = dict(zip(ids, matrix))
        a_ids, a_matrix, _ = self._vectors.archive.get()
        avec = dict(zip(a_ids, a_matrix))

        both = [n for n in g.archive if n in g.g]
        if both:
            problems.append(f"{len(both)} node(s) both active and archived")
            if fix:
                for n in both:
                    g.archive.pop(n, None)
                actions.append(f"dropped the stale archive record of {len(both)} active node(s)")
        bad_edges = [(u, v) for u, v, d in g.g.edges(data=True)
                     if d.get("kind") not in _EDGE_KINDS or not isinstance(d.get("weight"), (int, float))
                     or not math.isfinite(d.get("weight"))]
        if bad_edges:
            problems.append(f"{len(bad_edges)} edge(s) with a bad kind or weight")
            if fix:
                g.g.remove_edges_from(bad_edges)
                actions.append(f"removed {len(bad_edges)} bad edge(s)")
        bad_nodes = [n for n, d in g.g.nodes(data=True)
                     if d.get("kind") not in ("episode", "concept") or not isinstance(d.get("text"), str)]
        if bad_nodes:
            problems.append(f"{len(bad_nodes)} node(s) without a valid kind/text: {bad_nodes[:5]}")

        def good(v: Any) -> bool:
            return v is not None and np.shape(v) == (dim,) and bool(np.all(np.isfinite(v)))

        missing = [n for n in g.g.nodes if n not in vec]
        if missing:
            problems.append(f"{len(missing)} graph node(s) have no vector in Chroma")
            if fix:
                embs, reembed = [], []
                for n in missing:
                    h = g.vectors.get(n)
                    h = h if good(h) else avec.get(n)
                    if not good(h):
                        reembed.append(n)
                    embs.append(h)
                if reembed:
                    new = dict(zip(reembed, self._embedder.embed_documents(
                        [g.g.nodes[n]["text"] for n in reembed])))
                    embs = [new.get(n, h) for n, h in zip(missing, embs)]
                self._upsert(missing, np.stack(embs))
                vec.update(zip(missing, embs))
                actions.append(f"wrote {len(missing)} missing vector(s) to Chroma "
                               f"({len(reembed)} re-embedded from their text)")
        orphans = [i for i in ids if i not in g.g]
        if orphans:
            problems.append(f"{len(orphans)} Chroma vector(s) have no graph node")
            if fix:
                misplaced = [i for i in orphans if i in g.archive]
                if misplaced:
                    lost = [i for i in misplaced if i not in avec]
                    if lost:
                        self._upsert_archived(lost, np.stack([vec[i] for i in lost]))
                        avec.update((i, vec[i]) for i in lost)
                    self._vectors.active.delete(misplaced)
                    actions.append(f"moved {len(misplaced)} archived node vector(s) out of the "
                                   f"active collection")
                rest = [i for i in orphans if i not in g.archive]
                if rest:
                    attached, dropped = self._reattach(rest, vec)
                    self._recovered.update(attached)
                    if attached:
                        actions.append(f"re-attached {len(attached)} episode(s) found only in Chroma")
                    if dropped:
                        actions.append(f"removed {len(dropped)} stray concept vector(s) "
                                       f"(re-extracted at the next consolidation)")
        archive_missing = [n for n in g.archive if n not in avec]
        if archive_missing:
            problems.append(f"{len(archive_missing)} archived node(s) have no archived vector")
            if fix:
                reembed = [n for n in archive_missing if not good(vec.get(n))]
                new = dict(zip(reembed, self._embedder.embed_documents(
                    [g.archive[n]["node"]["text"] for n in reembed]))) if reembed else {}
                self._upsert_archived(
                    archive_missing, np.stack([new[n] if n in new else vec[n] for n in archive_missing]))
                actions.append(f"wrote {len(archive_missing)} missing archived vector(s) "
                               f"({len(reembed)} re-embedded)")
        archive_orphans = [i for i in a_ids if i not in g.archive]
        if archive_orphans:
            problems.append(f"{len(archive_orphans)} archived vector(s) have no archived node")
            if fix:
                self._vectors.archive.delete(archive_orphans)
                actions.append(f"removed {len(archive_orphans)} stray archived vector(s)")

        # derived, in-memory state
        if fix:
            for n in g.g.nodes:
                if not good(g.vectors.get(n)) and n in vec:
                    g.vectors[n] = np.asarray(vec[n], dtype=np.float32)
            for n in [n for n in g.vectors if n not in g.g]:
                del g.vectors[n]
        bad_mem = [n for n in g.g.nodes if not good(g.vectors.get(n))]
        if bad_mem and not loading:
            problems.append(f"{len(bad_mem)} node(s) without a usable in-memory vector")
        texts = {n: d.get("text") for n, d in g.g.nodes(data=True)}
        if getattr(self._bm25, "_texts", texts) != texts:
            if not loading:
                problems.append("the BM25 index does not match the graph")
        bad_pending = [p for p in self._pending if p not in g.g or g.g.nodes[p].get("kind") != "episode"]
        if bad_pending:
            problems.append(f"{len(bad_pending)} pending id(s) are not episodes of the graph")
        if self._last_episode is not None and self._last_episode not in g.g:
            if not loading:
                problems.append("the last-episode pointer names a missing node")
        if fix:
            self._bm25.set(texts)
            self._pending = [p for p in self._pending if p not in bad_pending]
            if self._last_episode not in g.g:
                eps = g.ids("episode")
                self._last_episode = max(eps, key=lambda n: g.g.nodes[n]["seq"]) if eps else None
            g.invalidate()
        counts = {"episode": 0, "concept": 0}
        for _, d in g.g.nodes(data=True):
            counts[d.get("kind", "episode")] = counts.get(d.get("kind", "episode"), 0) + 1
        report = ConsistencyReport(
            ok=not problems if not fix else not bad_nodes,
            episodes=counts["episode"], concepts=counts["concept"], archived=len(g.archive),
            vectors=len(ids), missing_vectors=tuple(missing), orphan_vectors=tuple(orphans),
            archive_missing=tuple(archive_missing), archive_orphans=tuple(archive_orphans),
            problems=tuple(problems), actions=tuple(actions), repaired=fix,
            seconds=time.perf_counter() - t0)
        for a in actions:
            logger.warning("repair of namespace %r: %s", self.namespace, a)
        if problems and not fix:
            logger.warning("verify of namespace %r: %s", self.namespace, "; ".join(problems))
        return report

    def _reattach(self, orphans: list[str], vec: dict[str, np.ndarray]) -> tuple[list[str], list[str]]:
        """Vectors written to Chroma after the last snapshot: episodes come back into the
        graph (and into the pending window), in their original order; concepts are dropped
        (re-extracted later). Returns (re-attached episode ids, removed ids)."""
        try:
            got = self._vectors.active._col.get(ids=orphans, include=["documents", "metadatas"])
        except Exception as exc:
            raise StorageError(f"Chroma get from {self._vectors.active.name} failed: {exc}") from exc
        rows = sorted(zip(got["ids"], got["documents"], got["metadatas"]),
                      key=lambda r: (r[2] or {}).get("seq", 0))
        stale: list[str] = []
        attached: list[str] = []
        for node_id, text, meta in rows:
            meta = meta or {}
            if meta.get("kind") != "episode" or not isinstance(text, str):
                stale.append(node_id)
                continue
            try:
                metadata = json.loads(meta.get("metadata_json", "{}"))
            except ValueError:
                metadata = {}
            seq = meta.get("seq")
            seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
            if seq is not None:
                self._graph._seq = max(self._graph._seq, seq)
            self._link_episode(node_id, vec[node_id], text=text, speaker=meta.get("speaker"),
                               ts=meta.get("ts"), ingest_ts=meta.get("ingest_ts"),
                               metadata=metadata if isinstance(metadata, dict) else {}, seq=seq)
            attached.append(node_id)
        if stale:
            self._vectors.active.delete(stale)
        if attached:
            logger.info("re-attached %d episode(s) written after the last snapshot", len(attached))
        return attached, stale

    def save(self) -> int:
        """Write a snapshot of the graph (atomic). Returns its version number."""
        with self._lock:
            self._check_open()
            self._flush_deferred_concepts()  # a snapshot never names an unwritten concept
            version = self._snapshots.save(
                {
                    "graph": self._graph.to_json(),
                    "state": {"pending": self._pending, "last_episode": self._last_episode,
                              "windows": self._windows},
                },
                meta={"namespace": self.namespace, "config": self.config.to_dict(),
                      "nodes": len(self._graph), "archived": len(self._graph.archive)},
            )
            self._windows_since_snapshot = 0
            return version

    def close(self) -> None:
        """Save (for a persistent memory) and release the directory lock; a throwaway
        memory is deleted."""
        with self._lock:
            if self._closed:
                return
            try:
                if not self._owns_path:
                    self.save()
            finally:
                self._closed = True
                self._release()
                if self._owns_path:
                    shutil.rmtree(self.path, ignore_errors=True)

    def _release(self) -> None:
        # the embedded Chroma client first (its in-process cache would go stale once
        # another process writes the folder), then the directory lock
        try:
            if self._owns_client and self._client is not None:
                close_client(self._client)
                if getattr(self, "_vectors", None) is not None:
                    self._vectors.clear_index_slack()  # at rest, no stale heap bytes on disk
        finally:
            self._dirlock.release()

    def __enter__(self) -> Synapse:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidInputError("this Synapse memory is closed")

    # ------------------------------------------------------------------------------------
    # ingestion
    # ------------------------------------------------------------------------------------
    def add_turn(
        self,
        text: str,
        *,
        speaker: str | None = None,
        timestamp: datetime | float | str | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> str:
        """Record one conversation turn as an episodic node; returns its id.

        Every ``consolidation_interval`` turns, concepts are extracted and linked.

        >>> mem.add_turn("Dana got into vet school!", speaker="Sam",
        ...              timestamp="2024-03-02T10:00:00Z")   # doctest: +SKIP
        """
        return self.add_turns([{"text": text, "speaker": speaker, "timestamp": timestamp,
                                "metadata": metadata, "id": id}])[0]

    def add_turns(self, turns: Iterable[str | Mapping[str, Any]]) -> list[str]:
        """Record many turns at once (embedded in one batch). Each turn is a string or a
        mapping with ``text`` and optional ``speaker``, ``timestamp``, ``metadata``, ``id``."""
        if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Iterable):
            raise InvalidTypeError("add_turns() takes a list of turns (use add_turn for one)")
        self._check_open()
        rows = [self._validate_turn(t) for t in turns]  # pure: no lock needed
        if not rows:
            return []
        # embedded before taking the lock, so that the model does not hold up other writers
        # and readers (the lock guards the stores, not the embedder)
        all_embs = self._embedder.embed_documents([r["text"] for r in rows])
        with self._lock:
            self._check_open()
            if self._needs_repair:  # an earlier storage error left the stores out of step
                self.repair()
            # a retry of a write whose reply was lost (re-attached by repair) is a no-op
            result = [self._retried(r) for r in rows]
            fresh_rows = [k for k, hit in enumerate(result) if hit is None]
            rows = [rows[k] for k in fresh_rows]
            if not rows:
                return [h for h in result if h is not None]
            ids = [r["id"] for r in rows]
            taken = [i for i in ids if i in self._graph or i in self._graph.archive]
            if taken or len(set(ids)) != len(ids):
                raise InvalidInputError(f"memory id(s) already used: {sorted(set(taken) or ids)[:5]}")
            embs = all_embs[fresh_rows]
            now = time.time()
            for r in rows:
                r["ingest_ts"] = now
                r["seq"] = self._graph.next_seq()
            try:
                self._vectors.active.upsert(
                    ids, embs, [r["text"] for r in rows],
                    [self._episode_meta(r) for r in rows],
                )
            except StorageError:
                self._needs_repair = True  # the server may have applied it before failing
                for r in rows:  # remembered so that a retry does not store them twice
                    self._unconfirmed[r["id"]] = self._signature(r)
                while len(self._unconfirmed) > 10_000:
                    del self._unconfirmed[next(iter(self._unconfirmed))]
                raise
            # the turns are durable now; a storage failure while consolidating must not
            # look like a failed write (the caller would retry and duplicate them)
            failed: StorageError | ExtractionError | None = None
            n = self.config.consolidation_interval
            try:
                with self._batched_concept_writes():
                    for r, h in zip(rows, embs):
                        self._link_episode(r["id"], h, text=r["text"], speaker=r["speaker"],
                                           ts=r["ts"], ingest_ts=now, metadata=r["metadata"],
                                           seq=r["seq"])
                        if failed is None and n and len(self._pending) >= n:
                            pending = list(self._pending)
                            try:
                                self._consolidate(self._pending[:n])
                            except (StorageError, ExtractionError) as exc:
                                self._pending = pending  # retried at the next write
                                failed = exc
            except StorageError as exc:  # the batched concept write
                failed = failed or exc
            if failed is None:
                try:
                    self._after_windows()
                except StorageError as exc:
                    failed = exc
            if failed is not None:
                self._needs_repair = isinstance(failed, StorageError) or self._needs_repair
                logger.warning("turns stored, but consolidation/snapshot failed (retried on the "
                               "next write; repair() fixes the stores): %s", failed)
            fresh = iter(ids)
            return [h if h is not None else next(fresh) for h in result]

    @staticmethod
    def _signature(r: Mapping[str, Any]) -> tuple[Any, ...]:
        # what identifies a retried turn that had no explicit id (a defaulted timestamp
        # differs between attempts, so it is left out)
        return (r["text"], r["speaker"], json.dumps(r["metadata"], sort_keys=True),
                None if r["auto_ts"] else r["ts"])

    def _retried(self, r: Mapping[str, Any]) -> str | None:
        """The id under which this turn is already stored if it repeats a write that
        failed with a :class:`StorageError` but reached Chroma anyway (re-attached by
        repair): by its explicit id, or, without one, by identical content."""
        node = self._graph.g.nodes.get(r["id"]) if r["id"] in self._recovered else None
        if node is not None and node.get("text") == r["text"]:
            self._unconfirmed.pop(r["id"], None)
            return r["id"]
        if r["auto_id"] and self._unconfirmed:
            sig = self._signature(r)
            for uid, s in self._unconfirmed.items():
                if s == sig and uid in self._recovered and uid in self._graph:
                    del self._unconfirmed[uid]
                    return uid
        return None

    def _after_windows(self) -> None:
        if self._stale_pagerank:
            self._graph.refresh_pagerank(damping=self.config.pagerank_damping)
            self._stale_pagerank = False
        if self._windows_since_snapshot >= self.snapshot_every:
            self.save()

    @staticmethod
    def _episode_meta(r: Mapping[str, Any]) -> dict[str, Any]:
        meta = {"kind": "episode", "seq": r["seq"], "ingest_ts": r["ingest_ts"],
                "metadata_json": json.dumps(r["metadata"], ensure_ascii=False)}
        if r["speaker"] is not None:
            meta["speaker"] = r["speaker"]
        if r["ts"] is not None:
            meta["ts"] = r["ts"]
        return meta

    def _validate_turn(self, turn: str | Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(turn, str):
            turn = {"text": turn}
        if not isinstance(turn, Mapping):
            raise InvalidTypeError(f"a turn must be a str or a mapping, got {type(turn).__name__}")
        unknown = set(turn) - {"text", "speaker", "timestamp", "metadata", "id"}
        if unknown:
            raise InvalidInputError(f"unknown turn field(s): {sorted(unknown)}")
        text = turn.get("text")
        if not isinstance(text, str):
            raise InvalidTypeError(f"turn text must be a str, got {type(text).__name__}")
        if not text.strip():
            raise InvalidInputError("turn text must not be empty or whitespace")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidInputError(
                f"turn text is {len(text)} characters; at most {MAX_TEXT_CHARS} are accepted "
                f"(split long documents into several turns)")
        if not _utf8_ok(text):
            raise InvalidInputError("turn text is not valid Unicode (it holds a lone surrogate)")
        speaker = turn.get("speaker")
        if speaker is not None and not isinstance(speaker, str):
            raise InvalidTypeError(f"speaker must be a str or None, got {type(speaker).__name__}")
        if speaker is not None and (len(speaker) > 1000 or not _utf8_ok(speaker)):
            raise InvalidInputError("speaker must be valid Unicode of at most 1000 characters")
        ts = turn.get("timestamp")
        ts = time.time() if ts is None else to_epoch(ts)
        metadata = turn.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise InvalidTypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
        try:
            metadata = json.loads(json.dumps(dict(metadata), allow_nan=False))
            json.dumps(metadata, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"metadata must be JSON-serialisable: {exc}") from None
        if len(json.dumps(metadata)) > MAX_TEXT_CHARS:
            raise InvalidInputError(f"metadata is larger than {MAX_TEXT_CHARS} characters as JSON")
        node_id = turn.get("id")
        if node_id is None:
            node_id = f"ep-{uuid.uuid4().hex}"
        elif not isinstance(node_id, str) or not node_id.strip():
            raise InvalidInputError(f"id must be a non-empty str, got {node_id!r}")
        elif len(node_id) > 512 or not _utf8_ok(node_id) or _CONTROL_RE.search(node_id):
            raise InvalidInputError("id must be printable Unicode of at most 512 characters")
        # the write firewall: nothing below this line sees the original secrets
        fw = self._firewall
        text = fw.check_text(text, what="turn text")
        if speaker is not None:
            speaker = fw.check_value(speaker, what="speaker")
        metadata = fw.check_value(metadata, what="turn metadata")
        return {"text": text, "speaker": speaker, "ts": ts, "metadata": metadata, "id": node_id,
                "auto_id": turn.get("id") is None, "auto_ts": turn.get("timestamp") is None}

    def _link_episode(self, node_id: str, vector: np.ndarray, *, text: str, speaker: str | None,
                      ts: float | None, ingest_ts: float | None, metadata: dict[str, Any],
                      seq: int | None = None) -> None:
        attrs: dict[str, Any] = {"kind": "episode", "text": text, "speaker": speaker, "ts": ts,
                                 "ingest_ts": ingest_ts, "metadata": metadata, "dormant": 0}
        if seq is not None:
            attrs["seq"] = seq
        self._graph.add_node(node_id, vector, **attrs)
        prev = self._last_episode
        if prev is not None and prev in self._graph:
            prev_ts = self._graph.g.nodes[prev]["ts"]
            dt = (ts - prev_ts) if (ts is not None and prev_ts is not None) else 0.0
            w = temporal_weight(dt, rho=self.config.temporal_rho,
                                seconds_per_unit=self.config.seconds_per_time_unit)
            self._graph.add_edge(prev, node_id, kind="temporal", weight=w)
            if self.config.temporal_bidirectional:
                self._graph.add_edge(node_id, prev, kind="temporal", weight=w)
        self._last_episode = node_id
        self._pending.append(node_id)
        self._bm25.add(node_id, text)

    def _upsert_archived(self, ids: Sequence[str], embs: np.ndarray) -> None:
        """Write archived nodes' vectors to the archive collection (text and kind from
        their archive records)."""
        recs = [self._graph.archive[i]["node"] for i in ids]
        self._vectors.archive.upsert(ids, embs, [r["text"] for r in recs],
                                     [{"kind": r["kind"]} for r in recs])

    def _upsert(self, ids: Sequence[str], embs: np.ndarray) -> None:
        nodes = self._graph.g.nodes
        metas = []
        for i in ids:
            d = nodes[i]
            if d["kind"] == "episode":
                metas.append(self._episode_meta({**d, "seq": d["seq"]}))
            else:
                metas.append({"kind": "concept", "seq": d["seq"]})
        self._vectors.active.upsert(list(ids), embs, [nodes[i]["text"] for i in ids], metas)

    def _embed_names(self, names: Sequence[str]) -> np.ndarray:
        """Embeddings of concept names, from the name cache where possible."""
        cache = self._name_vectors
        missing = list(dict.fromkeys(n for n in names if n not in cache))
        if missing:
            for n, h in zip(missing, self._embedder.embed_documents(missing)):
                cache[n] = h
        out = []
        for n in names:
            cache.move_to_end(n)
            out.append(cache[n])
        while len(cache) > _NAME_CACHE_SIZE:
            cache.popitem(last=False)
        return np.stack(out)

    @contextmanager
    def _batched_concept_writes(self) -> Iterator[None]:
        """Collect the concept vectors the windows inside touch and write them to Chroma in
        one upsert on the way out (their latest values; concepts archived meanwhile are
        skipped). Nothing reads Chroma's copy of a concept in between, and snapshots are
        only taken after the flush, so a crash leaves no snapshot naming an unwritten
        concept: its windows' turns are re-consolidated on the next open. Nested uses
        join the outer batch."""
        if self._deferred_concepts is not None:
            yield
            return
        self._deferred_concepts = set()
        try:
            yield
        finally:
            try:
                self._flush_deferred_concepts()
            finally:
                self._deferred_concepts = None

    def _flush_deferred_concepts(self) -> None:
        """Write the concept vectors collected so far (if batching) and keep batching."""
        ids = self._deferred_concepts
        if not ids:
            return
        self._deferred_concepts = set()
        live = [i for i in ids if i in self._graph and i in self._graph.vectors]
        if live:
            try:
                self._upsert(live, np.stack([self._graph.vectors[i] for i in live]))
            except StorageError:
                self._needs_repair = True  # repair() writes the graph's vectors again
                raise

    # ------------------------------------------------------------------------------------
    # consolidation (Algorithm 1, lines 9-28)
    # ------------------------------------------------------------------------------------
    def consolidate(self) -> ConsolidationReport:
        """Consolidate every pending turn now (in windows of ``consolidation_interval``)."""
        with self._lock:
            self._check_open()
            start = time.perf_counter()
            n = self.config.consolidation_interval or max(1, len(self._pending))
            totals = [0, 0, 0, 0, 0, 0]
            with self._batched_concept_writes():
                while self._pending:
                    window = self._pending[:n]
                    for k, v in enumerate(self._consolidate(window)):
                        totals[k] += v
            self._after_windows()
            return ConsolidationReport(totals[0], totals[1], totals[2], totals[3], totals[4],
                                       totals[5], time.perf_counter() - start)

    def _consolidate(self, window: list[str]) -> tuple[int, ...]:
        cfg = self.config
        g = self._graph
        self._pending = self._pending[len(window):]
        turns = [Turn(i, g.g.nodes[i]["text"], g.g.nodes[i]["speaker"], from_epoch(g.g.nodes[i]["ts"]))
                 for i in window if i in g]
        try:
            extraction = self._extractor.extract(turns)
        except Exception as exc:
            self._pending = list(window) + self._pending  # the window is not lost: retried later
            raise ExtractionError(f"concept extraction failed: {exc}") from exc
        concepts: list[Concept] = []
        seen: set[str] = set()
        for c in extraction.concepts:
            key = c.name.strip().lower()
            if key and key not in seen:
                seen.add(key)
                concepts.append(c)
        concepts = concepts[: cfg.max_concepts_per_window]
        created = merged = 0
        touched: dict[str, np.ndarray] = {}
        by_name: dict[str, str] = {}
        if concepts:
            embs = self._embed_names([c.name.strip() for c in concepts])
            cids = g.ids("concept")
            mat = np.stack([g.vectors[c] for c in cids]) if cids else np.zeros((0, g.dim), np.float32)
            window_set = set(turns_ids := [t.id for t in turns])
            for c, h in zip(concepts, embs):
                best = -1
                if len(cids):
                    sims = mat @ h
                    best = int(np.argmax(sims))
                if best >= 0 and sims[best] > cfg.dedup_threshold:
                    cid = cids[best]
                    m = cfg.ema_momentum
                    new = m * g.vectors[cid] + (1.0 - m) * h
                    new = (new / np.linalg.norm(new)).astype(np.float32)
                    g.set_vector(cid, new)
                    mat[best] = new
                    node = g.g.nodes[cid]
                    node["mentions"] = node.get("mentions", 1) + 1
                    if c.name.strip() not in node["aliases"]:
                        node["aliases"].append(c.name.strip())
                    merged += 1
                else:
                    cid = f"c-{uuid.uuid4().hex}"
                    g.add_node(cid, h, kind="concept", text=c.name.strip(), name=c.name.strip(),
                               ctype=c.type, confidence=float(c.confidence),
                               attributes=dict(c.attributes), mentions=1,
                               aliases=[c.name.strip()], dormant=0)
                    cids.append(cid)
                    mat = np.vstack([mat, h[None, :]])
                    created += 1
                    self._bm25.add(cid, c.name.strip())
                touched[cid] = g.vectors[cid]
                by_name[c.name.strip().lower()] = cid
                targets = turns_ids
                if cfg.abstraction_scope == "mentions" and c.source_ids:
                    targets = [i for i in c.source_ids if i in window_set] or turns_ids
                for e in targets:
                    g.add_edge(e, cid, kind="abstraction", weight=cfg.abstraction_weight)
                    g.add_edge(cid, e, kind="abstraction", weight=cfg.abstraction_weight)
            for r in extraction.relations:
                s, t = by_name.get(r.src.strip().lower()), by_name.get(r.tgt.strip().lower())
                if s and t:
                    g.add_edge(s, t, kind="relation", weight=float(min(max(r.weight, 0.0), 1.0)),
                               rel=r.rel)
            # association edges between concepts (line 23-28), top-k per node
            for cid, h in touched.items():
                sims = mat @ h
                order = np.argsort(-sims)
                picked = 0
                for j in order:
                    if picked >= cfg.association_top_k or sims[j] <= cfg.association_threshold:
                        break
                    if cids[j] == cid:
                        continue
                    g.add_edge(cid, cids[j], kind="association", weight=float(sims[j]))
                    g.add_edge(cids[j], cid, kind="association", weight=float(sims[j]))
                    picked += 1
            if self._deferred_concepts is not None:
                self._deferred_concepts.update(touched)
            else:
                self._upsert(list(touched), np.stack(list(touched.values())))
        pruned = g.prune_incoming(list(touched) + window, cfg.prune_top_k)
        archived = self._dormancy_step()
        self._windows += 1
        self._windows_since_snapshot += 1
        self._stale_pagerank = True
        return (1, len(turns), created, merged, pruned, archived)

    def _dormancy_step(self) -> int:
        """Count, per node, the windows in which it stayed below epsilon while the memory
        was queried; archive nodes dormant for ``dormancy_windows`` windows."""
        cfg = self.config
        if self._queries_in_window == 0 or cfg.dormancy_windows == 0:
            return 0
        dormant = []
        for n, d in self._graph.g.nodes(data=True):
            if n in self._window_active:
                d["dormant"] = 0
            else:
                d["dormant"] = d.get("dormant", 0) + 1
                if d["dormant"] >= cfg.dormancy_windows:
                    dormant.append(n)
        self._queries_in_window = 0
        self._window_active = set()
        if dormant:
            self._archive(dormant)
        return len(dormant)

    # ------------------------------------------------------------------------------------
    # archive
    # ------------------------------------------------------------------------------------
    def _archive(self, ids: Sequence[str]) -> None:
        vectors = self._graph.archive_nodes(ids)
        if not vectors:
            return
        moved = list(vectors)
        self._upsert_archived(moved, np.stack(list(vectors.values())))
        self._vectors.active.delete(moved)
        self._bm25.remove(moved)
        self._pending = [p for p in self._pending if p not in vectors]
        logger.info("archived %d dormant node(s)", len(moved))

    def archive(self, ids: Sequence[str]) -> list[str]:
        """Move nodes out of the active graph by hand (restorable with :meth:`restore`)."""
        with self._lock:
            self._check_open()
            missing = [i for i in ids if i not in self._graph]
            if missing:
                raise NodeNotFoundError(f"not active memory id(s): {missing[:5]}")
            self._archive(list(ids))
            self._stale_pagerank = True
            self._after_windows()
            return list(ids)

    def archived(self) -> list[dict[str, Any]]:
        """The archived nodes: ``{"id", "kind", "text", ...}`` each."""
        with self._lock:
            return [{"id": i, **{k: v for k, v in rec["node"].items()}}
                    for i, rec in self._graph.archive.items()]

    def restore(self, ids: Sequence[str]) -> list[str]:
        """Bring archived nodes back into the active graph."""
        with self._lock:
            self._check_open()
            missing = [i for i in ids if i not in self._graph.archive]
            if missing:
                raise NodeNotFoundError(f"no archived memory with id(s) {missing[:5]}")
            got, matrix, _ = self._vectors.archive.get(list(ids))
            vectors = dict(zip(got, matrix))
            lost = [i for i in ids if i not in vectors]
            if lost:  # vector lost from the archive collection: embed the text again
                texts = [self._graph.archive[i]["node"]["text"] for i in lost]
                vectors.update(zip(lost, self._embedder.embed_documents(texts)))
            restored = self._graph.restore_nodes({i: vectors[i] for i in ids})
            for i in restored:
                self._graph.g.nodes[i]["dormant"] = 0
            self._upsert(restored, np.stack([vectors[i] for i in restored]))
            self._vectors.archive.delete(restored)
            for i in restored:
                self._bm25.add(i, self._graph.g.nodes[i]["text"])
            self._stale_pagerank = True
            self._after_windows()
            return restored

    # ------------------------------------------------------------------------------------
    # retrieval (sections 3.2-3.4)
    # ------------------------------------------------------------------------------------
    def retrieve(self, query: str, k: int | None = None, *,
                 config: SynapseConfig | None = None) -> RetrievalResult:
        """Rank memories for ``query`` and apply the uncertainty gate.

        ``config`` overrides the retrieval settings for this call only (see
        :meth:`retrieve_by_vector`), e.g. a second pass through named entities:

        >>> res = mem.retrieve("What is Dana studying?", k=5)     # doctest: +SKIP
        >>> res.rejected, res.items[0].components.activation     # doctest: +SKIP
        >>> mem.retrieve("What is the person from the ski trip studying?",
        ...              config=mem.config.replace(entity_feedback=1))  # doctest: +SKIP
        """
        if not isinstance(query, str):
            raise InvalidTypeError(f"query must be a str, got {type(query).__name__}")
        if not query.strip():
            raise InvalidInputError("query must not be empty or whitespace")
        if k is None:
            k = (config or self.config).top_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError(f"k must be an int >= 1, got {k!r}")
        q = self._embedder.embed_query(query)
        return self.retrieve_by_vector(query, q, k=k, config=config)

    def retrieve_by_vector(self, query: str, q: np.ndarray, *, k: int | None = None,
                           config: SynapseConfig | None = None) -> RetrievalResult:
        """:meth:`retrieve` with the query embedding already computed (used by benchmarks).

        ``config`` overrides the memory's own *retrieval* settings for this call only
        (anchors, dynamics, scoring, gate, mechanism switches); the graph itself was built
        with :attr:`config`, so graph-construction fields of the override are ignored. This
        lets the retrieval-only ablations share one ingested memory.
        """
        if config is not None and not isinstance(config, SynapseConfig):
            raise InvalidTypeError(f"config must be a SynapseConfig, got {type(config).__name__}")
        cfg = config or self.config
        k = cfg.top_k if k is None else k
        with self._lock:
            self._check_open()
            c = self._graph.compiled()
            if c.n == 0:
                return RetrievalResult(query, (), cfg.use_gate, 0.0, cfg.gate_tau)
            # cosines of every active node: one float32 mat-vec over the in-memory copy of
            # the vectors Chroma holds. Exact (Chroma's HNSW is approximate, so its top-k
            # could differ after a reload) and cheaper than a Chroma round trip.
            qv = np.asarray(q, dtype=np.float32)
            if qv.shape != (c.embeddings.shape[1],) or not np.all(np.isfinite(qv)):
                raise InvalidInputError(
                    f"query vector must be a finite array of shape ({c.embeddings.shape[1]},), "
                    f"got shape {qv.shape}")
            sim_all = np.clip(c.embeddings @ qv, -1.0, 1.0)
            run = self._retrieval_pass(c, cfg, query, sim_all, k)
            if run is None:
                return RetrievalResult(query, (), cfg.use_gate, 0.0, cfg.gate_tau)
            # the gate judges the question as asked (the feedback pass only re-ranks)
            top = run.order[0]
            if cfg.gate_signal == "score":
                confidence = float(run.score[top])
            elif cfg.gate_signal == "similarity" or not cfg.use_activation:
                confidence = float(run.sim[top])
            else:
                confidence = float(run.activation[top])
            rejected = cfg.use_gate and scoring.gate(confidence, tau=cfg.gate_tau)
            if cfg.entity_feedback and cfg.use_graph:
                found = self._feedback_entities(c, run, cfg.entity_feedback, query)
                if found:
                    # the entities join the query: their names the lexical trigger's text,
                    # their mean vector the query vector (Rocchio-style, weight
                    # feedback_weight), and the whole pass runs again
                    ev = _unit(np.mean([self._graph.vectors[e] for e in found], axis=0))
                    q2 = _unit(qv + np.float32(cfg.feedback_weight) * ev)
                    names = " ".join(self._graph.g.nodes[e]["name"] for e in found)
                    again = self._retrieval_pass(c, cfg, f"{query} {names}",
                                                 np.clip(c.embeddings @ q2, -1.0, 1.0), k)
                    if again is not None:
                        self._explain_feedback(c, run, again, found)
                        run = again
            items = tuple(
                self._item(c, int(run.cand[j]), float(run.score[j]),
                           ScoreComponents(float(run.sim[j]), float(run.activation[j]),
                                           float(run.pr[j]), run.bm25_rank.get(c.ids[run.cand[j]]),
                                           run.dense_rank.get(c.ids[run.cand[j]]),
                                           float(run.lexical[j]) if run.lexical is not None else 0.0),
                           run.parents)
                for j in run.order
            )
            return RetrievalResult(query, items, bool(rejected), confidence, cfg.gate_tau)

    def _retrieval_pass(self, c: Any, cfg: SynapseConfig, query: str, sim_all: np.ndarray,
                        k: int) -> _Pass | None:
        """Triggers, dynamics and hybrid score for one query text (None: no anchor at all)."""
        dense_rank: dict[str, int] = {}
        bm25_rank: dict[str, int] = {}
        if cfg.use_dense:
            top_dense = scoring.top_k(sim_all, min(cfg.anchor_top_k, c.n))
            dense_rank = {c.ids[i]: r + 1 for r, i in enumerate(top_dense)}
        if cfg.use_bm25:
            ids, _ = self._bm25.query(query, cfg.anchor_top_k)
            bm25_rank = {i: r + 1 for r, i in enumerate(ids) if i in c.index}
        anchors = np.array(sorted({c.index[i] for i in (*dense_rank, *bm25_rank)}), dtype=np.int64)
        if anchors.size == 0:
            return None

        anchor_sim = sim_all[anchors].astype(np.float64)
        parents = None
        if cfg.use_activation:
            a0 = np.zeros(c.n)
            a0[anchors] = cfg.alpha * np.clip(anchor_sim, 0.0, None)
            P = (c.propagation(use_fan_effect=cfg.use_fan_effect, fan_exponent=cfg.fan_exponent)
                 if cfg.use_graph else sp.csr_array((c.n, c.n)))
            spread = dynamics.spread_activation(
                a0, P, iterations=cfg.iterations, spreading_factor=cfg.spreading_factor,
                decay=cfg.decay if cfg.use_decay else 0.0,
                inhibition_beta=cfg.inhibition_beta, inhibition_top_m=cfg.inhibition_top_m,
                gamma=cfg.sigmoid_gamma, theta=cfg.sigmoid_theta,
                use_inhibition=cfg.use_inhibition, track_parents=True,
            )
            act_all = spread.activation
            parents = spread.parent
            active = np.flatnonzero(act_all > 0)
            self._queries_in_window += 1
            self._window_active.update(
                c.ids[i] for i in active[act_all[active] >= cfg.dormancy_epsilon])
            cand = np.arange(c.n) if cfg.score_all_nodes else np.union1d(anchors, active)
            activation = act_all[cand]
        else:
            cand = np.arange(c.n) if cfg.score_all_nodes else anchors
            activation = np.zeros(cand.size)
        sim = sim_all[cand].astype(np.float64)
        pr = (self._graph.pagerank_array(cand) if (cfg.use_pagerank and cfg.use_graph)
              else np.zeros(cand.size))
        lexical = None
        if cfg.use_bm25 and cfg.weight_lexical > 0:
            lex_all = self._bm25.scores_for(query, c.index, c.n)
            best = float(lex_all.max()) if lex_all.size else 0.0
            lexical = lex_all[cand] / best if best > 0 else np.zeros(cand.size)
        score = scoring.hybrid_score(
            sim, activation, pr, weight_similarity=cfg.weight_similarity,
            weight_activation=cfg.weight_activation if cfg.use_activation else 0.0,
            weight_pagerank=cfg.weight_pagerank if (cfg.use_pagerank and cfg.use_graph) else 0.0,
            lexical=lexical, weight_lexical=cfg.weight_lexical,
        )
        order = scoring.top_k(score, min(k, cand.size))
        return _Pass(cand, order, score, sim, activation, pr, lexical, parents, dense_rank,
                     bm25_rank)

    def _feedback_entities(self, c: Any, run: _Pass, top_r: int, query: str) -> dict[str, str]:
        """Named-entity concepts linked to the first pass's ``top_r`` episodes: not topics,
        not speakers (a speaker concept links to everything its speaker said), and not
        already named in the query. Returns ``{entity id: the episode it came from}`` in
        order of first appearance."""
        g = self._graph.g
        qwords = set(tokenize(query))
        found: dict[str, str] = {}
        tops = [c.ids[run.cand[j]] for j in run.order
                if g.nodes[c.ids[run.cand[j]]]["kind"] == "episode"][:top_r]
        for ep in tops:
            speaker = str(g.nodes[ep].get("speaker") or "").lower()
            for n in g.successors(ep):
                d = g.nodes[n]
                if d["kind"] != "concept" or d.get("ctype") in _NOT_ENTITY_TYPES:
                    continue
                if (d.get("attributes") or {}).get("kind") == "speaker" or \
                        str(d["name"]).lower() == speaker:
                    continue
                words = set(tokenize(d["name"]))
                if words and not words <= qwords:
                    found.setdefault(n, ep)
        return found

    def _explain_feedback(self, c: Any, first: _Pass, second: _Pass,
                          found: Mapping[str, str]) -> None:
        """Anchors that only the expanded lexical trigger found were reached through an
        entity of a first-pass episode: record that path (episode -> entity -> anchor)."""
        if second.parents is None:
            return
        g = self._graph.g
        anchors = {**second.bm25_rank, **second.dense_rank}
        # an entity hangs off its episode only when that episode is an anchor of this pass
        # (parent -1), so the chains stay acyclic: anchor -> entity -> new anchor
        linked = [e for e, ep in found.items()
                  if e in c.index and ep in anchors and second.parents[c.index[ep]] == -1]
        for e in linked:
            second.parents[c.index[e]] = c.index[found[e]]
        seen_before = set(first.bm25_rank) | set(first.dense_rank)
        for node_id in anchors:
            if node_id in seen_before or node_id in found:
                continue
            via = next((e for e in linked if g.has_edge(e, node_id)), None)
            if via is not None:
                second.parents[c.index[node_id]] = c.index[via]

    def search_vectors(self, q: np.ndarray, k: int, *, kind: str | None = None
                       ) -> tuple[list[str], np.ndarray]:
        """Plain dense search: the ``k`` active nodes nearest to the embedding ``q`` (Chroma
        cosine), optionally only episodes or concepts (``kind``). Returns ids and cosines,
        best first. This is the vector-only baseline the benchmark compares against."""
        if kind not in (None, "episode", "concept"):
            raise InvalidInputError(f"kind must be None, 'episode' or 'concept', got {kind!r}")
        with self._lock:
            self._check_open()
            return self._vectors.active.query(q, k, where={"kind": kind} if kind else None)

    def _item(self, c: Any, idx: int, score: float, comp: ScoreComponents,
              parents: np.ndarray | None) -> RetrievedItem:
        node_id = c.ids[idx]
        d = self._graph.g.nodes[node_id]
        path: list[str] = []
        if parents is not None:
            j, seen = idx, set()
            while j >= 0 and j not in seen:  # parent chains are acyclic; never loop anyway
                seen.add(j)
                path.append(c.ids[j])
                j = int(parents[j])
            path.reverse()
        return RetrievedItem(
            id=node_id, text=d["text"], kind=d["kind"], score=score, components=comp,
            speaker=d.get("speaker"), timestamp=from_epoch(d.get("ts")),
            metadata=dict(d.get("metadata") or {}) if d["kind"] == "episode"
            else {"type": d.get("ctype"), "mentions": d.get("mentions"), "aliases": list(d.get("aliases", []))},
            path=tuple(path),
        )

    # ------------------------------------------------------------------------------------
    # forgetting
    # ------------------------------------------------------------------------------------
    def forget(
        self,
        ids: Sequence[str] | None = None,
        *,
        speaker: str | None = None,
        since: datetime | float | str | None = None,
        until: datetime | float | str | None = None,
        where: Mapping[str, Any] | None = None,
        everything: bool = False,
    ) -> list[str]:
        """Remove episodes for good: by ids, speaker, event-time range [since, until),
        metadata equality filter, or ``everything=True``. Criteria combine with AND.
        Concepts left with no episode are removed too, and so are concepts whose name or an
        alias occurs in the forgotten text but in none of their remaining episodes (a concept
        must not keep a forgotten word alive). Older snapshots are deleted so the
        forgotten text does not survive in them, and (embedded Chroma) the text is scrubbed
        from Chroma's log and free pages. Crash-safe: an interrupted forget is finished on
        the next open. Returns the removed ids (see docs/safety.md)."""
        with self._lock:
            self._check_open()
            if not everything and ids is None and speaker is None and since is None \
                    and until is None and where is None:
                raise InvalidInputError("forget() needs ids, a filter, or everything=True")
            if ids is not None and (isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable)):
                raise InvalidTypeError("forget(ids=...) takes a list of ids, not a single str")
            ids = list(ids) if ids is not None else None
            if ids is not None and not all(isinstance(i, str) for i in ids):
                raise InvalidTypeError("forget(ids=...): every id must be a str")
            if speaker is not None and not isinstance(speaker, str):
                raise InvalidTypeError(f"speaker must be a str, got {type(speaker).__name__}")
            if where is not None and not isinstance(where, Mapping):
                raise InvalidTypeError(f"where must be a mapping, got {type(where).__name__}")
            if not isinstance(everything, bool):
                raise InvalidTypeError("everything must be a bool")
            lo = to_epoch(since) if since is not None else -math.inf
            hi = to_epoch(until) if until is not None else math.inf
            idset = set(ids) if ids is not None else None
            g = self._graph
            candidates = [(n, d) for n, d in g.g.nodes(data=True)]
            candidates += [(n, rec["node"]) for n, rec in g.archive.items()]
            doomed = []
            for n, d in candidates:
                if idset is not None and n not in idset:
                    continue
                if everything or idset is not None and d["kind"] == "concept":
                    doomed.append(n)
                    continue
                if d["kind"] != "episode":
                    continue
                if speaker is not None and d.get("speaker") != speaker:
                    continue
                ts = d.get("ts")
                if (since is not None or until is not None) and (ts is None or not lo <= ts < hi):
                    continue
                if where is not None and any((d.get("metadata") or {}).get(key) != v
                                             for key, v in where.items()):
                    continue
                doomed.append(n)
            if idset is not None:  # ids known only to Chroma (written before a crash) go too
                doomed += [i for i in idset if i not in g.g and i not in g.archive]
            if everything:  # also vectors that no node names (left by a crash)
                doomed += self._vectors.active.get()[0] + self._vectors.archive.get()[0]
            doomed_set = set(doomed)

            def kind_of(n: str) -> str | None:
                if n in g.g:
                    return g.g.nodes[n].get("kind")
                rec = g.archive.get(n)
                return rec["node"].get("kind") if rec else None

            def text_of(n: str) -> str:
                d = g.g.nodes[n] if n in g.g else g.archive[n]["node"]
                return str(d.get("text", "")).casefold()

            def orphaned(node: Mapping[str, Any], nbrs: set[str]) -> bool:
                # a concept goes when every supporting episode goes, or when its name or
                # an alias occurs in forgotten text but in none of the episodes it keeps
                support = [e for e in nbrs if kind_of(e) == "episode"]
                gone = [e for e in support if e in doomed_set]
                if not gone:
                    return False
                kept = [text_of(e) for e in support if e not in doomed_set]
                if not kept:
                    return True
                said = [text_of(e) for e in gone]
                attrs = node.get("attributes") or {}
                terms = {str(t).casefold() for t in [node.get("text", ""), *node.get("aliases", []),
                                                     *(v for v in attrs.values() if isinstance(v, str))]}
                return any(t and any(t in x for x in said) and not any(t in x for x in kept)
                           for t in terms)

            # an archived node keeps its edges in its archive record
            archived_links: dict[str, set[str]] = {}
            for n, rec in g.archive.items():
                for u, v, _ in rec["edges"]:
                    archived_links.setdefault(v if u == n else u, set()).add(n)
            # concepts (active or archived) that would outlive the text they came from
            for n, d in list(g.g.nodes(data=True)):
                if d["kind"] == "concept" and n not in doomed_set and \
                        orphaned(d, set(g.g.predecessors(n)) | set(g.g.successors(n))
                                 | archived_links.get(n, set())):
                    doomed.append(n)
            for n, rec in list(g.archive.items()):
                if rec["node"].get("kind") == "concept" and n not in doomed_set and \
                        orphaned(rec["node"], {u if v == n else v for u, v, _ in rec["edges"]}):
                    doomed.append(n)
            doomed = list(dict.fromkeys(doomed))
            if not doomed:
                return []
            self._write_forget_journal(doomed)
            removed = self._apply_forget(doomed)
            self._graph.refresh_pagerank(damping=self.config.pagerank_damping)
            self._stale_pagerank = False
            self._finish_forget(doomed)
            return removed

    def _forget_journal_path(self) -> Path:
        return self._ns_dir / "forget-journal.json"

    def _write_forget_journal(self, ids: list[str]) -> None:
        """Write-ahead record of a forget (ids only, never text): a crash half-way through
        is finished on the next open, so forgotten text cannot come back from an older
        snapshot."""
        self._ns_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self._forget_journal_path(),
                     json.dumps({"ids": ids}, ensure_ascii=False).encode("utf-8"))

    def _read_forget_journal(self) -> list[str] | None:
        path = self._forget_journal_path()
        if not path.exists():
            return None
        try:
            ids = json.loads(path.read_text("utf-8"))["ids"]
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ValueError("ids must be a list of str")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SnapshotError(f"the forget journal {path} is unreadable ({exc}); it records an "
                                f"interrupted forget(): fix or remove it, then forget again") from None
        return ids

    def _apply_forget(self, ids: list[str]) -> list[str]:
        """Remove ``ids`` from the graph, the archive, both collections and the indexes."""
        g = self._graph
        removed = list(dict.fromkeys(g.remove_nodes(ids)))
        self._vectors.active.delete(ids)
        self._vectors.archive.delete(ids)
        self._bm25.remove(ids)
        gone = set(ids)
        self._pending = [p for p in self._pending if p not in gone]
        self._window_active -= gone
        self._recovered -= gone
        if self._last_episode in gone:
            eps = g.ids("episode")
            self._last_episode = max(eps, key=lambda n: g.g.nodes[n]["seq"]) if eps else None
        return removed

    def _finish_forget(self, ids: list[str]) -> None:
        """After a forget: a fresh snapshot, every older version and temp folder deleted,
        deleted text scrubbed from Chroma's files, then the journal removed."""
        version = self.save()
        for v in self._snapshots.versions():
            if v != version:
                try:
                    shutil.rmtree(self._snapshots._dir(v))
                except OSError as exc:
                    raise StorageError(f"could not delete old snapshot v{v:06d} holding forgotten "
                                       f"text: {exc}") from exc
        self._snapshots.clean_leftovers()
        self._vectors.scrub(ids)
        self._forget_journal_path().unlink(missing_ok=True)

    # ------------------------------------------------------------------------------------
    # inspection
    # ------------------------------------------------------------------------------------
    def get(self, node_id: str) -> dict[str, Any]:
        """A node's attributes (``id``, ``kind``, ``text``, ...)."""
        with self._lock:
            return {"id": node_id, **self._graph.node(node_id)}

    def stats(self) -> dict[str, int]:
        """Counts of nodes by kind, edges by kind, archived nodes, pending turns, windows."""
        with self._lock:
            g = self._graph.g
            out = {"episodes": 0, "concepts": 0}
            for _, d in g.nodes(data=True):
                out[d["kind"] + "s"] += 1
            edges: dict[str, int] = {}
            for _, _, kind in g.edges(data="kind"):
                edges[kind] = edges.get(kind, 0) + 1
            return {**out, "edges": g.number_of_edges(),
                    **{f"edges_{k}": v for k, v in sorted(edges.items())},
                    "archived": len(self._graph.archive), "pending": len(self._pending),
                    "windows": self._windows}

    @property
    def graph(self) -> Any:
        """The live NetworkX graph (read it; do not modify it)."""
        return self._graph.g

    @staticmethod
    def namespaces(path: str | Path) -> list[str]:
        """Namespaces stored in the embedded Chroma under ``path``."""
        client = persistent_client(Path(path) / "chroma")
        try:
            return list_namespaces(client)
        finally:
            close_client(client)

    # ------------------------------------------------------------------------------------
    # async twins (same code, run in a worker thread; the lock serialises mutation)
    # ------------------------------------------------------------------------------------
    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))

    async def aadd_turn(self, text: str, **kwargs: Any) -> str:
        """Async twin of :meth:`add_turn`."""
        return await self._run(self.add_turn, text, **kwargs)

    async def aadd_turns(self, turns: Iterable[str | Mapping[str, Any]]) -> list[str]:
        """Async twin of :meth:`add_turns`."""
        return await self._run(self.add_turns, list(turns))

    async def aconsolidate(self) -> ConsolidationReport:
        """Async twin of :meth:`consolidate`."""
        return await self._run(self.consolidate)

    async def aretrieve(self, query: str, k: int | None = None, *,
                        config: SynapseConfig | None = None) -> RetrievalResult:
        """Async twin of :meth:`retrieve`."""
        return await self._run(self.retrieve, query, k, config=config)

    async def aforget(self, ids: Sequence[str] | None = None, **kwargs: Any) -> list[str]:
        """Async twin of :meth:`forget`."""
        return await self._run(self.forget, ids, **kwargs)

    async def asave(self) -> int:
        """Async twin of :meth:`save`."""
        return await self._run(self.save)

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await self._run(self.close)

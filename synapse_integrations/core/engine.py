"""The one stateful facade: :class:`Synapse`.

It owns one namespace's memory: its stores (:class:`~.state.MemoryState`: graph, Chroma
collections, BM25), its snapshots and its lock, and hands each job to the module that
does it. Read this class as a table of contents:

==================  ==================================================================
lifecycle           ``__init__`` / :meth:`load` / :meth:`save` / :meth:`close` / :meth:`drop`
ingestion           :meth:`add_turn`, :meth:`add_turns`, :meth:`update` (:mod:`.ingestion`,
                    :mod:`.validation`, :mod:`.documents`)
consolidation       :meth:`consolidate` (:mod:`.consolidation`), :meth:`sleep` (:mod:`.sleep`)
archive             :meth:`archive`, :meth:`archived`, :meth:`restore`
retrieval           :meth:`retrieve`, :meth:`retrieve_by_vector`, :meth:`search_vectors`,
                    :meth:`feedback` (:mod:`.retrieval`, :mod:`.models`, :mod:`.feedback`)
forgetting          :meth:`forget` (:mod:`.forgetting`, :mod:`..storage.journal`)
consistency         :meth:`verify`, :meth:`repair` (:mod:`.consistency`)
inspection          :meth:`get`, :meth:`contains`, :meth:`episodes`, :meth:`stats`,
                    :attr:`graph`, :meth:`namespaces`, :meth:`subscribe`,
                    :meth:`inspect_retrieval`
async twins         every method above with an ``a`` prefix
==================  ==================================================================

>>> from synapse_integrations import Synapse
>>> mem = Synapse()                                           # doctest: +SKIP
>>> mem.add_turn("I went skiing in Whistler with Dana.", speaker="Sam")  # doctest: +SKIP
'ep-...'
>>> mem.retrieve("Who came on the ski trip?").items[0].text  # doctest: +SKIP
'I went skiing in Whistler with Dana.'
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..config import SynapseConfig
from ..embeddings import as_embedder
from ..errors import (
    InvalidInputError,
    InvalidTypeError,
    NodeNotFoundError,
    StorageError,
    UnknownNamespaceError,
)
from ..firewall import Firewall, FirewallConfig
from ..storage.chroma import close_client, list_namespaces, persistent_client
from ..storage.journal import ForgetJournal
from ..storage.lock import DirectoryLock, NamespaceClaim
from ..storage.snapshots import SnapshotStore
from ..types import (
    ConsistencyReport,
    ConsolidationReport,
    FeedbackReport,
    ForgetResult,
    RetrievalResult,
)
from .ingest.consolidation import Consolidator, NameVectors
from .ingest.extraction import OfflineExtractor
from .ingest.pipeline import Ingestor
from .kernels import threads
from .lifecycle import consistency, forgetting
from .lifecycle import feedback as usage
from .lifecycle.detectors import Lifecycle
from .lifecycle.sleep import SleepReport
from .models.mnemos import AffectTagger, as_tagger
from .retrieval.pipeline import DEFAULT_KINDS, RetrievalSteps, Retriever, scope_of
from .state.events import EventBus
from .state.filters import Filter
from .state.state import MemoryState
from .state.validation import (
    MAX_TEXT_CHARS,
    WRITE_CHUNK,
    check_k,
    check_query,
    namespace_dirname,
    query_vector,
    stored_config,
    successor_turn,
    to_epoch,
    validate_namespace,
    validate_snapshot,
)
from .twins import AsyncTwins

logger = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["MAX_TEXT_CHARS", "ConsistencyReport", "ConsolidationReport", "Synapse",
           "namespace_dirname", "to_epoch", "validate_namespace"]


class Synapse(AsyncTwins):
    """SYNAPSE memory for one namespace (a user, a thread...).

    Args:
        path: folder holding the embedded Chroma files and the graph snapshots. ``None``
            gives a throwaway memory in a temporary folder, removed by :meth:`close`.
        namespace: which memory inside ``path``; each has its own collections and graph.
        config: hyperparameters (defaults: see :class:`SynapseConfig`); stored with the
            snapshots.
        embedder: any object with ``embed_documents`` / ``embed_query`` (a LangChain
            ``Embeddings`` works); default: the packaged all-MiniLM-L6-v2.
        client: a Chroma client to use instead of the embedded one, e.g.
            ``synapse_integrations.storage.chroma.http_client("127.0.0.1", 8000)``.
        extractor: the concept extractor (default :class:`OfflineExtractor`; an
            :class:`LLMExtractor` takes any LangChain chat model).
        snapshot_every: write a snapshot every this many consolidation windows (turns are
            durable in Chroma as soon as ``add_turn`` returns; see docs/concepts.md).
        create: create the memory if it does not exist (``False``:
            :class:`UnknownNamespaceError` instead).
        firewall: what the write firewall does with secrets and personal data.
        lifecycle: how reconsolidation, the surprisal gate and sleep decide
            (:class:`~.lifecycle.Lifecycle`: offline rules, or ``Lifecycle.llm(chat_model)``).
        affect_tagger: tags each turn's ``affect`` (mnemos): ``None`` the offline lexicon, a
            LangChain chat model or any ``AffectTagger``; ``False``: none (docs/models.md).
    """

    # ------------------------------------------------------------------------------------
    # lifecycle
    # ------------------------------------------------------------------------------------
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
        lifecycle: Lifecycle | None = None,
        affect_tagger: Any = None,
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
                f"no memory named {namespace!r} under {self.path} (pass create=True to start one)")
        self._lock = threading.RLock()
        self._closed = False
        self.snapshot_every = max(1, snapshot_every)
        self._events = EventBus()
        self._owns_client = client is None  # an embedded client we made is closed by close()
        self._client: Any = None
        self._state: MemoryState | None = None
        self._writers: dict[int, int] = {}  # threads inside add_turns (released between chunks)
        self._idle = threading.Condition(self._lock)
        self._claim = NamespaceClaim(self.path, self.namespace)
        self._dirlock = DirectoryLock(self.path).acquire()  # MemoryLockedError in a 2nd process
        try:
            self._claim.acquire(self)  # MemoryLockedError for a 2nd live engine in this process
            self._open(config, embedder, client, extractor, create, lifecycle, as_tagger(affect_tagger))
        except BaseException:
            self._closed = True
            self._release()
            raise

    def _open(self, config: SynapseConfig | None, embedder: Any, client: Any, extractor: Any,
              create: bool, lifecycle: Lifecycle | None, tagger: AffectTagger | None) -> None:
        namespace = self.namespace
        self._ns_dir = self.path / "namespaces" / namespace_dirname(namespace)
        self._snapshots = SnapshotStore(self._ns_dir / "snapshots")
        self._snapshots.clean_leftovers()  # we hold the lock: any temp folder is a dead writer's
        self._journal = ForgetJournal(self._ns_dir / "forget-journal.json")
        self._client = client if client is not None else persistent_client(self.path / "chroma")
        loaded = self._snapshots.load_latest(
            validate=lambda manifest, files: validate_snapshot(manifest, files, namespace=namespace))
        if loaded is None and not create and namespace not in list_namespaces(self._client):
            raise UnknownNamespaceError(
                f"no memory named {namespace!r} under {self.path} (pass create=True to start one)")
        stored_cfg = stored_config(loaded[0]["config"]) if loaded else None
        self.config = config or stored_cfg or SynapseConfig()
        if stored_cfg and stored_cfg.embedding_dim != self.config.embedding_dim:
            raise InvalidInputError(
                f"this memory was built with embedding_dim={stored_cfg.embedding_dim}, "
                f"the config asks for {self.config.embedding_dim}")
        self._embedder = as_embedder(embedder, dim=self.config.embedding_dim)
        extractor = extractor or OfflineExtractor(max_concepts=self.config.max_concepts_per_window,
                                                  per_turn=self.config.concepts_per_turn)
        sqlite = self.path / "chroma" / "chroma.sqlite3" if client is None else None
        vectors = consistency.open_vectors(self._client, namespace, sqlite,
                                           self._embedder.embed_documents, self.config)
        self._state = state = MemoryState(self.config, vectors, self._events)
        self._consolidator = Consolidator(state, extractor, NameVectors(self._embedder))
        self._ingestor = Ingestor(state, self._consolidator, self._firewall, lifecycle, tagger)
        self._retriever = Retriever(state, {"mnemos": {"tagger": tagger}} if tagger else None, self._consolidator.names.embed)
        self._eraser = forgetting.Eraser(
            state, self._snapshots, self._journal,
            (self._consolidator.dormancy, self._ingestor.retries), self._consolidator.names,
            save=self.save)
        if loaded is not None:
            state.load_snapshot(loaded[1])
        state.read_tombstones()  # forgotten ids: authoritative for every open and engine
        journal = self._journal.read()
        if journal is not None:  # a forget() was interrupted: finish it before anything else
            logger.warning("finishing an interrupted forget() of %d id(s)", len(journal))
            state.record_tombstones([i for i in journal if i not in state.tombstones])
            self._eraser.remove(journal)
        self.load_report, attached, dropped = consistency.repair(state, self._embedder, loading=True)
        self._ingestor.retries.recovered.update(attached)
        if journal is not None or dropped:
            self._eraser.finish(list(journal or []) + dropped)
        vectors.clear_index_slack()  # Chroma may have just rewritten its HNSW files

    @classmethod
    def load(cls, path: str | Path, *, namespace: str = "default", **kwargs: Any) -> Synapse:
        """Open an existing memory; :class:`UnknownNamespaceError` if there is none."""
        return cls(path, namespace=namespace, create=False, **kwargs)

    def save(self) -> int:
        """Write a snapshot of the graph (atomic). Returns its version number."""
        with self._lock:
            state = self._open_state()
            state.flush_concept_vectors()  # a snapshot never names an unwritten concept
            version = self._snapshots.save(
                state.snapshot_files(),
                meta={"namespace": self.namespace, "config": self.config.to_dict(),
                      "nodes": len(state.graph), "archived": len(state.graph.archive)})
            state.windows_since_snapshot = 0
            return version

    def close(self) -> None:
        """Save (for a persistent memory) and release the directory lock; a throwaway
        memory is deleted."""
        with self._lock:
            self._wait_for_writers()
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

    def drop(self) -> None:
        """Erase this namespace for good: its Chroma collections with their rows and index
        folders (embedded Chroma: the database is vacuumed, so no deleted row stays in
        its free pages), every snapshot, the namespace's folder; then close. Other
        namespaces under the same path stay."""
        with self._lock:
            self._wait_for_writers()
            state = self._open_state()
            state.vectors.forgotten.count()  # look it up: another engine may have created it
            folders = state.vectors.segment_folders()
            state.vectors.drop()
            self._snapshots.delete_all()
            shutil.rmtree(self._ns_dir, ignore_errors=True)
            self._closed = True
            self._release()
            for folder in folders:  # in case closing the client wrote them back
                shutil.rmtree(folder, ignore_errors=True)
            if self._owns_path:
                shutil.rmtree(self.path, ignore_errors=True)

    def _release(self) -> None:
        # the embedded Chroma client first (its in-process cache would go stale once
        # another process writes the folder), then the directory lock
        try:
            if self._owns_client and self._client is not None:
                close_client(self._client)
                if self._state is not None:
                    self._state.vectors.clear_index_slack()  # at rest, no stale heap bytes on disk
        finally:
            self._claim.release()
            self._dirlock.release()

    @contextmanager
    def _working(self) -> Iterator[None]:
        """The lock, numpy's BLAS kept off the encoder's cores (:mod:`.threads`)."""
        with self._lock, threads.engine_blas():
            yield

    def _wait_for_writers(self) -> None:
        """(lock held) Let an ``add_turns`` of another thread finish its batch: it releases
        the lock between chunks, and a close in between would cut it."""
        me = threading.get_ident()
        while any(t != me for t in self._writers):
            self._idle.wait()

    @property
    def closed(self) -> bool:
        """The memory was closed (or dropped)."""
        return self._closed

    def __enter__(self) -> Synapse:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _open_state(self) -> MemoryState:
        if self._closed or self._state is None:
            raise InvalidInputError("this Synapse memory is closed")
        return self._state

    def _read_state(self) -> MemoryState:
        """The state for reads, which a closed memory still answers from what it held."""
        if self._state is None:
            raise InvalidInputError("this Synapse memory is closed")
        return self._state

    def _after_windows(self) -> None:
        """After consolidation windows or archive changes: PageRank once, and a snapshot
        every ``snapshot_every`` windows."""
        state = self._open_state()
        state.refresh_pagerank_if_stale()
        if state.windows_since_snapshot >= self.snapshot_every:
            self.save()

    # ------------------------------------------------------------------------------------
    # ingestion
    # ------------------------------------------------------------------------------------
    def add_turn(self, text: str, *, speaker: str | None = None,
                 timestamp: datetime | float | str | None = None,
                 metadata: Mapping[str, Any] | None = None, id: str | None = None) -> str:
        """Record one conversation turn as an episodic node; returns its id.

        Every ``consolidation_interval`` turns, concepts are extracted and linked.

        >>> mem.add_turn("Dana got into vet school!", speaker="Sam",
        ...              timestamp="2024-03-02T10:00:00Z")   # doctest: +SKIP
        """
        return self.add_turns([{"text": text, "speaker": speaker, "timestamp": timestamp,
                                "metadata": metadata, "id": id}])[0]

    def add_turns(self, turns: Iterable[str | Mapping[str, Any]]) -> list[str]:
        """Record many turns at once. Each turn is a string or a mapping with ``text`` and
        optional ``speaker``, ``timestamp``, ``metadata``, ``id``. The batch is validated
        and embedded as a whole (a refused batch stores nothing), then written in chunks
        of ``WRITE_CHUNK`` turns, the lock released between chunks so that readers are
        not held up by a large import (at most ``MAX_BATCH_TURNS`` per call)."""
        return self._add_turns(turns, None)

    def _add_turns(self, turns: Iterable[str | Mapping[str, Any]],
                   cancel: threading.Event | None) -> list[str]:
        self._open_state()
        rows = self._ingestor.prepare(turns)  # pure: no lock needed
        if not rows:
            return []
        embs = self._ingestor.embed(rows, self._embedder)  # outside the lock
        me = threading.get_ident()
        ids: list[str] = []
        with self._lock:
            self._writers[me] = self._writers.get(me, 0) + 1
        try:
            for k in range(0, len(rows), WRITE_CHUNK):
                chunk = rows[k:k + WRITE_CHUNK]
                try:
                    got = self._write_chunk(chunk, embs[k:k + WRITE_CHUNK], cancel)
                except BaseException:
                    # what earlier chunks stored is recognised if the caller retries the batch
                    self._ingestor.retries.landed(rows[:k])
                    raise
                if got is None:  # cancelled: the rest is not written
                    self._ingestor.retries.landed(rows[:k])
                    return ids
                ids += got
                time.sleep(0)  # a waiting reader gets the lock now (locks are not fair)
            if cancel is not None:  # acknowledged by the async caller when it gets them
                self._ingestor.retries.landed(rows)
            return ids
        finally:
            with self._lock:
                self._writers[me] -= 1
                if not self._writers[me]:
                    del self._writers[me]
                self._idle.notify_all()

    def _write_chunk(self, rows: list[dict[str, Any]], embs: np.ndarray,
                     cancel: threading.Event | None) -> list[str] | None:
        """One hold of the lock: store ``rows`` and consolidate (None when cancelled)."""
        with self._working():
            if cancel is not None and cancel.is_set():
                return None
            state = self._open_state()
            self._sync()
            if state.needs_repair:  # an earlier storage error left the stores out of step
                self.repair()
            ids, failed = self._ingestor.write(rows, embs)
            if failed is None:
                try:
                    self._after_windows()
                except StorageError as exc:
                    failed = exc
            if failed is not None:
                state.needs_repair = isinstance(failed, StorageError) or state.needs_repair
                logger.warning("turns stored, but consolidation/snapshot failed (retried on the "
                               "next write; repair() fixes the stores): %s", failed)
            return ids

    def update(self, node_id: str, text: str | None = None, *,
               metadata: Mapping[str, Any] | None = None, speaker: str | None = None,
               timestamp: datetime | float | str | None = None,
               keep_history: bool = True) -> str:
        """Store a new version of an episode; returns the new episode's id.

        The new version takes ``text``, ``metadata`` and ``speaker`` where given and the
        old episode's otherwise; its time is ``timestamp`` (default: now). It is validated,
        firewalled and written like any turn *before* the old one changes, so a refused
        update leaves the memory as it was. Then the old episode is kept and marked
        ``superseded_by`` the new one (ranked below it, shown with its history), or, with
        ``keep_history=False``, forgotten for good (:meth:`forget`).

        >>> new = mem.update(old_id, "I live in Lisbon now.")        # doctest: +SKIP
        >>> mem.get(old_id)["superseded_by"] == new                  # doctest: +SKIP
        True
        """
        if not isinstance(keep_history, bool):
            raise InvalidTypeError("keep_history must be a bool")
        with self._working():
            state = self._open_state()
            old = state.node(node_id)  # NodeNotFoundError for an unknown or archived id
            turn = successor_turn(node_id, old, text=text, speaker=speaker, metadata=metadata,
                                  timestamp=timestamp)
            new_id = self.add_turns([turn])[0]  # raises before anything changed
            if keep_history:
                state.supersede(node_id, new_id, at=time.time())
                self.save()  # the supersession is durable when update returns
            else:
                self.forget(ids=[node_id])
            return new_id

    # ------------------------------------------------------------------------------------
    # consolidation
    # ------------------------------------------------------------------------------------
    def consolidate(self) -> ConsolidationReport:
        """Consolidate every pending turn now (in windows of ``consolidation_interval``)."""
        with self._working():
            self._open_state()
            windows = self._ingestor.consolidate_pending()
            self._after_windows()
            return ConsolidationReport(
                len(windows), *(sum(getattr(w, f) for w in windows) for f in
                                ("episodes", "concepts_created", "concepts_merged",
                                 "edges_pruned", "archived")),
                sum(w.seconds for w in windows))

    def sleep(self) -> SleepReport:
        """Consolidate the episodes stored since the last sleep into semantic facts, linked
        to their sources (:mod:`.sleep`; ``sleep_auto`` runs it on its own)."""
        with self._working():
            self._open_state()
            report = self._ingestor.sleep()
            self._after_windows()
            return report

    # ------------------------------------------------------------------------------------
    # archive
    # ------------------------------------------------------------------------------------
    def archive(self, ids: Sequence[str]) -> list[str]:
        """Move nodes out of the active graph by hand (restorable with :meth:`restore`)."""
        with self._working():
            state = self._open_state()
            missing = [i for i in ids if i not in state]
            if missing:
                raise NodeNotFoundError(f"not active memory id(s): {missing[:5]}")
            state.archive(list(ids))
            state.stale_pagerank = True
            self._after_windows()
            return list(ids)

    def archived(self) -> list[dict[str, Any]]:
        """The archived nodes: ``{"id", "kind", "text", ...}`` each."""
        with self._lock:
            return self._read_state().archived()

    def restore(self, ids: Sequence[str]) -> list[str]:
        """Bring archived nodes back into the active graph."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise InvalidTypeError("restore() takes a list of ids, not a single str")
        with self._working():
            restored = self._open_state().restore(list(ids), self._embedder)
            self._after_windows()
            return restored

    # ------------------------------------------------------------------------------------
    # retrieval (sections 3.2-3.4)
    # ------------------------------------------------------------------------------------
    def retrieve(self, query: str, k: int | None = None, *,
                 config: SynapseConfig | None = None, kinds: Sequence[str] = DEFAULT_KINDS,
                 speakers: str | Sequence[str] | None = None,
                 since: datetime | float | str | None = None,
                 until: datetime | float | str | None = None,
                 where: Mapping[str, Any] | None = None,
                 at: datetime | float | str | None = None) -> RetrievalResult:
        """Rank memories for ``query`` and apply the uncertainty gate.

        Returns the ``k`` best memories: episodes (the turns), each with the concepts and
        the path that led to it; ``kinds=("episode", "concept")`` also returns the concept
        nodes themselves. Filters restrict what may be returned before anything is
        ranked: ``speakers`` (one or several), an event-time range ``[since, until)``, and
        ``where``, a condition on the turn metadata in Chroma's ``where`` language
        (``{"topic": "ski"}``, ``{"n": {"$gte": 3}}``, ``{"$or": [...]}``; see
        :mod:`synapse_integrations.core.state.filters`). ``config`` overrides the retrieval
        settings for this call only (see :meth:`retrieve_by_vector`); ``at``: when it is asked.

        >>> res = mem.retrieve("What is Dana studying?", k=5)     # doctest: +SKIP
        >>> res.rejected, res.items[0].concepts, res.items[0].components  # doctest: +SKIP
        >>> mem.retrieve("What did I say about skiing?", speakers="user",
        ...              since="2024-01-01", where={"channel": "mobile"})   # doctest: +SKIP
        """
        check_query(query)
        k = check_k((config or self.config).top_k if k is None else k)
        scope = scope_of(kinds, speakers, since, until, where)  # checked before embedding
        q = self._embedder.embed_query(query)
        return self.retrieve_by_vector(query, q, k=k, config=config, kinds=kinds,
                                       speakers=speakers, since=since, until=until, where=where,
                                       at=at, _scope=scope)

    def retrieve_by_vector(self, query: str, q: np.ndarray, *, k: int | None = None,
                           config: SynapseConfig | None = None,
                           kinds: Sequence[str] = DEFAULT_KINDS,
                           speakers: str | Sequence[str] | None = None,
                           since: datetime | float | str | None = None,
                           until: datetime | float | str | None = None,
                           where: Mapping[str, Any] | None = None,
                           at: datetime | float | str | None = None,
                           _scope: tuple[tuple[str, ...], Filter | None] | None = None
                           ) -> RetrievalResult:
        """:meth:`retrieve` with the query embedding already computed (used by benchmarks).

        ``config`` overrides the memory's own *retrieval* settings for this call only
        (anchors, model, dynamics, scoring, gate, mechanism switches); the graph itself was
        built with :attr:`config`, so graph-construction fields of the override are
        ignored. This lets the retrieval-only ablations share one ingested memory.
        """
        if config is not None and not isinstance(config, SynapseConfig):
            raise InvalidTypeError(f"config must be a SynapseConfig, got {type(config).__name__}")
        cfg = config or self.config
        k = cfg.top_k if k is None else k
        kinds, flt = _scope or scope_of(kinds, speakers, since, until, where)
        with self._working():
            state = self._open_state()
            self._sync(best_effort=True)
            qv = query_vector(q, state.graph.dim) if len(state.graph) else np.asarray(q, np.float32)
            out = self._retriever.run(query, qv, k, cfg, kinds=kinds, flt=flt, at=None if at is None else to_epoch(at))
            for activated in out.activated:  # what a read records: dormancy, model's spikes
                self._consolidator.dormancy.observe(activated)
            state.record_spikes(out.spikes)
            return out.result

    def feedback(self, query: str, used_ids: Sequence[str], unused_ids: Sequence[str] = (), *,
                 config: SynapseConfig | None = None, alpha: float = usage.DEFAULT_ALPHA) -> FeedbackReport:
        """Learn which memories an answer to ``query`` used and which not (Evermind's learned
        edge weights on the model's graph: :mod:`.feedback`). Durable with the next snapshot."""
        asked = usage.prepare(query, used_ids, unused_ids, alpha, config, self._embedder)
        with self._working():
            return usage.learn(self._open_state(), self._retriever, *asked, config or self.config)

    def search_vectors(self, q: np.ndarray, k: int, *, kind: str | None = None
                       ) -> tuple[list[str], np.ndarray]:
        """Plain dense search: the ``k`` active nodes nearest to the embedding ``q`` (Chroma
        cosine), optionally only episodes or concepts (``kind``). Returns ids and cosines,
        best first. This is the vector-only baseline the benchmark compares against."""
        if kind not in (None, "episode", "concept"):
            raise InvalidInputError(f"kind must be None, 'episode' or 'concept', got {kind!r}")
        with self._lock:
            return self._open_state().vectors.active.query(q, k, where={"kind": kind} if kind else None)

    @contextmanager
    def inspect_retrieval(self) -> Iterator[RetrievalSteps]:
        """Hold the memory and step through the retrieval pipeline one stage at a time
        (triggers, then the model): for benchmarks and explanations. Reads only.

        >>> with mem.inspect_retrieval() as steps:                  # doctest: +SKIP
        ...     query = steps.query("Who came skiing?", vector, mem.config)
        ...     activation = steps.activate(query, mem.config)
        """
        with self._lock:
            yield RetrievalSteps(self._open_state(), self._retriever)

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
    ) -> ForgetResult:
        """Remove episodes for good: by ids, speaker, event-time range [since, until),
        a metadata filter in the language of :meth:`retrieve` (``where={}`` is refused), or
        ``everything=True``. Criteria combine with AND. Concepts go too when only
        forgotten turns justify their name (whatever the extractor called them; their
        attributes and relations likewise). The ids are recorded as forgotten for every
        engine and every later open, older snapshots are deleted and (embedded Chroma) the
        text is scrubbed from Chroma's files. Crash-safe: an interrupted forget is
        finished on the next open. Returns the removed ids: a :class:`ForgetResult`, whose
        ``.memories`` were asked for and ``.derived`` went with them (docs/safety.md)."""
        with self._working():
            state = self._open_state()
            self._sync()
            doomed = forgetting.select(state, ids, speaker=speaker, since=since, until=until,
                                       where=where, everything=everything)
            asked = forgetting.asked_for(state, doomed, ids)
            return ForgetResult(self._eraser.erase(doomed) if doomed else [], memories=asked)

    def _sync(self, *, best_effort: bool = False) -> None:
        """(lock held) Drop what another engine on the same Chroma forgot (only for a
        client this engine did not make: see :meth:`forgetting.Eraser.sync`)."""
        if not self._owns_client and self._state is not None:
            self._eraser.sync(best_effort=best_effort)

    def _acknowledge(self, ids: list[str]) -> None:
        self._ingestor.retries.acknowledge(ids)

    # ------------------------------------------------------------------------------------
    # consistency
    # ------------------------------------------------------------------------------------
    def verify(self) -> ConsistencyReport:
        """Check that the graph, both Chroma collections, the BM25 index and the in-memory
        vectors agree; changes nothing. ``report.ok`` is the verdict, ``report.problems``
        says what disagrees (see :meth:`repair`).

        >>> mem.verify().ok                                      # doctest: +SKIP
        True
        """
        with self._working():
            return consistency.verify(self._open_state())

    def repair(self) -> ConsistencyReport:
        """Bring the stores back into agreement, then verify: graph nodes whose vectors
        are missing are re-embedded, episodes found only in Chroma are re-attached, stray
        concept vectors are removed, misplaced archive vectors are moved, derived indexes
        are rebuilt. Everything done is logged and listed in ``report.actions``; the
        graph (the snapshot) is the record, Chroma's episodes are never dropped."""
        with self._working():
            state = self._open_state()
            self._sync()
            fixed, attached, dropped = consistency.repair(state, self._embedder)
            self._ingestor.retries.recovered.update(attached)
            if dropped:
                self._eraser.finish(dropped)
            return consistency.after_repair(state, fixed)

    # ------------------------------------------------------------------------------------
    # inspection
    # ------------------------------------------------------------------------------------
    def get(self, node_id: str, *, include_archived: bool = False) -> dict[str, Any]:
        """A node's attributes (``id``, ``kind``, ``text``, ...); archived nodes too when
        ``include_archived`` (with ``"archived": True``). :class:`NodeNotFoundError` if
        there is no such node."""
        with self._lock:
            return self._read_state().record(node_id, include_archived=include_archived)

    def contains(self, node_id: str) -> bool:
        """``node_id`` is in this memory (active or archived)."""
        with self._lock:
            return self._read_state().knows(node_id)

    def episodes(self, *, include_archived: bool = True) -> list[dict[str, Any]]:
        """The episodes as ``{"id", "text", "speaker", "ts", "seq", "metadata", ...}`` dicts
        in ingestion order (archived ones included unless asked otherwise)."""
        with self._lock:
            return self._read_state().episodes(include_archived=include_archived)

    def stats(self) -> dict[str, int]:
        """Counts of nodes by kind, edges by kind, archived nodes, pending turns, windows."""
        with self._lock:
            return self._read_state().stats()

    @property
    def graph(self) -> Any:
        """The live NetworkX graph (read it; do not modify it)."""
        return self._read_state().graph.g

    def subscribe(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``callback(event)`` after each consolidation window
        (:class:`~synapse_integrations.types.WindowReport`) and each batched vector write
        (:class:`~synapse_integrations.types.VectorWrite`), on the writing thread. Returns
        a function that unsubscribes."""
        return self._events.subscribe(callback)

    @staticmethod
    def namespaces(path: str | Path) -> list[str]:
        """Namespaces stored in the embedded Chroma under ``path``."""
        client = persistent_client(Path(path) / "chroma")
        try:
            return list_namespaces(client)
        finally:
            close_client(client)

"""The one stateful facade: :class:`Synapse`.

It owns one namespace's memory: its stores (:class:`~.state.MemoryState`: graph, Chroma
collections, BM25), its snapshots and its lock, and hands each job to the module that
does it. Read this class as a table of contents:

==================  ==================================================================
lifecycle           ``__init__`` / :meth:`load`; :meth:`save` / :meth:`close` / :meth:`drop`
                    and the lock (:mod:`.lifetime`)
ingestion           :meth:`add_turn`, :meth:`add_turns`, :meth:`update`,
                    :meth:`supersede` (:mod:`.ingest`, :mod:`.state.validity`,
                    :mod:`.state.validation`, :mod:`.text.documents`)
consolidation       :meth:`consolidate` (:mod:`.ingest.consolidation`), :meth:`sleep`
                    (:mod:`.lifecycle.sleep`)
retrieval           :meth:`retrieve`, :meth:`retrieve_by_vector`, :meth:`feedback`
                    (:mod:`.retrieval`, :mod:`.signals`, :mod:`.models`,
                    :mod:`.lifecycle.feedback`)
upkeep              :meth:`archive`, :meth:`archived`, :meth:`restore`, :meth:`forget`,
                    :meth:`verify`, :meth:`repair` (:mod:`.upkeep`:
                    :mod:`.lifecycle.forgetting`, :mod:`.lifecycle.consistency`)
inspection          :meth:`get`, :meth:`contains`, :meth:`episodes`, :meth:`history`,
                    :meth:`stats`, :attr:`graph`, :meth:`namespaces`, :meth:`subscribe`,
                    :meth:`search_vectors`, :meth:`inspect_retrieval` (:mod:`.inspection`)
async twins         every method above with an ``a`` prefix (:mod:`.twins`)
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
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..config import SynapseConfig
from ..embeddings import as_embedder
from ..errors import (
    InvalidInputError,
    InvalidTypeError,
    StorageError,
    UnknownNamespaceError,
)
from ..firewall import Firewall, FirewallConfig
from ..storage.chroma import has_namespace, persistent_client
from ..storage.journal import ForgetJournal
from ..storage.lock import DirectoryLock, NamespaceClaim
from ..storage.snapshots import SnapshotStore
from ..types import (
    ConsistencyReport,
    ConsolidationReport,
    FeedbackReport,
    RetrievalResult,
)
from .ingest.consolidation import Consolidator, NameVectors
from .ingest.extraction import OfflineExtractor
from .ingest.pipeline import Ingestor
from .inspection import Inspection
from .lifecycle import consistency, forgetting
from .lifecycle import feedback as usage
from .lifecycle.detectors import Lifecycle
from .lifecycle.sleep import SleepReport
from .lifetime import Lifetime
from .models.affect import AffectTagger, as_tagger
from .retrieval.pipeline import Retriever
from .retrieval.scope import DEFAULT_KINDS, scope_of, timeline_of
from .state.events import EventBus
from .state.filters import Filter
from .state.snapshot_checks import stored_config, validate_snapshot
from .state.state import MemoryState
from .state.validation import (
    MAX_TEXT_CHARS,
    WRITE_CHUNK,
    check_k,
    check_query,
    namespace_dirname,
    query_vector,
    successor_turn,
    to_epoch,
    validate_namespace,
)
from .twins import AsyncTwins
from .upkeep import Upkeep

logger = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["MAX_TEXT_CHARS", "ConsistencyReport", "ConsolidationReport", "Synapse",
           "namespace_dirname", "to_epoch", "validate_namespace"]


class Synapse(Lifetime, Upkeep, Inspection, AsyncTwins):
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
        if loaded is None and not create and not has_namespace(self._client, namespace):
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
            if keep_history and old.get("superseded_by"):
                raise InvalidInputError(f"{node_id} was already replaced by "
                                        f"{old['superseded_by']}: update the newest version")
            turn = successor_turn(node_id, old, text=text, speaker=speaker, metadata=metadata,
                                  timestamp=timestamp)
            new_id = self.add_turns([turn])[0]  # raises before anything changed
            if keep_history:
                self.supersede(node_id, new_id)
            else:
                self.forget(ids=[node_id])
            return new_id

    def supersede(self, old_id: str, new_id: str) -> None:
        """Record that the episode ``new_id`` replaces ``old_id`` (both kept): ``old_id``
        stops holding when ``new_id`` started (its event time), is ranked below it, hidden
        by ``current_only`` and shown in :meth:`history`. Durable when it returns. For
        turns already stored (an import, an agent that finds a memory outdated);
        :meth:`update` writes the new version and links it in one call.

        >>> mem.supersede(old_id, new_id); mem.history(new_id)[0]["id"] == old_id  # doctest: +SKIP
        True
        """
        with self._working():
            state = self._open_state()
            old, new = state.node(old_id), state.node(new_id)  # NodeNotFoundError
            if old.get("kind") != "episode" or new.get("kind") != "episode" or old_id == new_id:
                raise InvalidInputError("supersede links two different episodes (turns)")
            if old.get("superseded_by") or new.get("supersedes"):
                raise InvalidInputError(
                    f"{old_id if old.get('superseded_by') else new_id} is already linked to "
                    "another version; versions form one chain (see history())")
            state.supersede(old_id, new_id, at=new.get("ts") or time.time())
            self.save()

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
    # retrieval (sections 3.2-3.4)
    # ------------------------------------------------------------------------------------
    def retrieve(self, query: str, k: int | None = None, *,
                 config: SynapseConfig | None = None, kinds: Sequence[str] = DEFAULT_KINDS,
                 speakers: str | Sequence[str] | None = None,
                 since: datetime | float | str | None = None,
                 until: datetime | float | str | None = None,
                 where: Mapping[str, Any] | None = None,
                 at: datetime | float | str | None = None,
                 as_of: datetime | float | str | None = None,
                 current_only: bool = False) -> RetrievalResult:
        """Rank memories for ``query`` and apply the uncertainty gate.

        Returns the ``k`` best memories: episodes (the turns), each with the concepts and
        the path that led to it; ``kinds=("episode", "concept")`` also returns the concept
        nodes themselves. Filters restrict what may be returned before anything is
        ranked: ``speakers`` (one or several), an event-time range ``[since, until)``, and
        ``where``, a condition on the turn metadata in Chroma's ``where`` language
        (``{"topic": "ski"}``, ``{"n": {"$gte": 3}}``, ``{"$or": [...]}``; see
        :mod:`synapse_integrations.core.state.filters`). ``config`` overrides the retrieval
        settings for this call only (see :meth:`retrieve_by_vector`); ``at``: when it is asked
        (its relative dates, "two weeks ago", are read against it; default now).

        Time (docs/concepts.md, "Time and versions"): ``as_of`` reads the memory as it stood
        then: nothing that started later (by event time), replacements made later undone,
        and the question asked then (``at`` defaults to it). ``current_only`` hides the
        versions replaced by then (by :meth:`update`, :meth:`supersede` or
        reconsolidation); by default they are returned, ranked right below what replaced
        them (and a restatement the ranking finds at question time above the older turn).

        >>> res = mem.retrieve("What is Dana studying?", k=5)     # doctest: +SKIP
        >>> res.rejected, res.items[0].concepts, res.items[0].components  # doctest: +SKIP
        >>> mem.retrieve("What did I say about skiing?", speakers="user",
        ...              since="2024-01-01", where={"channel": "mobile"})   # doctest: +SKIP
        >>> mem.retrieve("Where do I live?", as_of="2024-03-01")   # doctest: +SKIP
        """
        check_query(query)
        k = check_k((config or self.config).top_k if k is None else k)
        scope = scope_of(kinds, speakers, since, until, where)  # checked before embedding
        timeline_of(as_of, current_only, at)
        q = self._embedder.embed_query(query)
        return self.retrieve_by_vector(query, q, k=k, config=config, kinds=kinds,
                                       speakers=speakers, since=since, until=until, where=where,
                                       at=at, as_of=as_of, current_only=current_only,
                                       _scope=scope)

    def retrieve_by_vector(self, query: str, q: np.ndarray, *, k: int | None = None,
                           config: SynapseConfig | None = None,
                           kinds: Sequence[str] = DEFAULT_KINDS,
                           speakers: str | Sequence[str] | None = None,
                           since: datetime | float | str | None = None,
                           until: datetime | float | str | None = None,
                           where: Mapping[str, Any] | None = None,
                           at: datetime | float | str | None = None,
                           as_of: datetime | float | str | None = None,
                           current_only: bool = False,
                           _scope: tuple[tuple[str, ...], Filter | None] | None = None
                           ) -> RetrievalResult:
        """:meth:`retrieve` with the query embedding already computed (used by benchmarks).

        ``config`` overrides the memory's own *query-time* settings for this call only
        (anchors, model, dynamics, scoring, gate, ranking signals, mechanism switches); the
        graph itself was built with :attr:`config`, so a change to a graph-time field is a
        :class:`~synapse_integrations.errors.ConfigError` naming it
        (:meth:`SynapseConfig.query_override`). This lets the retrieval-only ablations
        share one ingested memory.
        """
        if config is not None and not isinstance(config, SynapseConfig):
            raise InvalidTypeError(f"config must be a SynapseConfig, got {type(config).__name__}")
        cfg = self.config.query_override(config)  # a graph-time change: ConfigError
        k = cfg.top_k if k is None else k
        kinds, flt = _scope or scope_of(kinds, speakers, since, until, where)
        timeline = timeline_of(as_of, current_only, at)
        with self._working():
            state = self._open_state()
            self._sync(best_effort=True)
            qv = query_vector(q, state.graph.dim) if len(state.graph) else np.asarray(q, np.float32)
            out = self._retriever.run(query, qv, k, cfg, kinds=kinds, flt=flt, at=timeline.at,
                                      timeline=timeline)
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
            return usage.learn(self._open_state(), self._retriever, *asked,
                               self.config.query_override(config))

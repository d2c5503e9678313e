"""What the servers serve: :class:`MemoryService`, every operation on the memories of one
folder, scoped to a namespace and answered in JSON-ready form.

The REST API (:mod:`.rest`) and the MCP server (:mod:`.mcp`) are thin translations of
these methods, so both speak the same operations with the same checks and the same
errors. One service owns one memory folder (it holds the engines through an
:class:`~synapse_integrations.pool.EnginePool` and, with it, the folder's directory lock);
any number of clients share it.

Reads of a namespace that does not exist are refused (:class:`UnknownNamespaceError`,
a 404), so that a typo or a probing client never creates a memory; the first stored turn
creates one.

>>> from synapse_integrations.embeddings import HashingEmbedder
>>> svc = MemoryService(None, embedder=HashingEmbedder())
>>> svc.add_turns("u1", [{"text": "Dana studies architecture in Lisbon.", "speaker": "Sam"}])[:1]
['ep-...']
>>> svc.retrieve("u1", "Where does Dana study architecture?")["gate"]["decision"]
'accepted'
>>> svc.stats("u2")
Traceback (most recent call last):
...
synapse_integrations.errors.UnknownNamespaceError: no memory named 'u2' on this server (storing a turn creates it)
>>> svc.close()
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._adapter_utils import holding_memory
from ..config import SynapseConfig
from ..core.state.validation import WRITE_CHUNK, normalise_text, validate_namespace
from ..core.text.documents import document
from ..errors import (
    InvalidInputError,
    InvalidTypeError,
    NodeNotFoundError,
    StorageError,
    SynapseError,
    UnknownNamespaceError,
)
from ..group_commit import GroupCommit
from ..namespace_keys import typed_key
from ..pool import EnginePool
from ..storage.lock import DirectoryLock
from ..types import RetrievalResult
from . import wire
from .embedders import VectorHints, make_embedder, model_of
from .overrides import retrieval_config

__all__ = ["MAX_PAGE", "MemoryService", "VectorHints", "make_embedder", "retrieval_config"]

#: The most episodes one page of :meth:`MemoryService.episodes` returns.
MAX_PAGE = 1000

def _operation(name: str, *, writes: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A service method that is one memory operation: timed and traced as ``name`` (see
    :meth:`MemoryService.operation`); one that ``writes`` is refused while its namespace
    is frozen (:meth:`MemoryService.freeze`)."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(self: MemoryService, namespace: Any, *args: Any, **kwargs: Any) -> Any:
            with self.operation(name, namespace):
                if writes and self._frozen and isinstance(namespace, str) \
                        and validate_namespace(namespace) in self._frozen:
                    raise StorageError(f"namespace {namespace!r} is being moved to another memory "
                                       f"server: its writes are refused until the move ends; retry")
                return fn(self, namespace, *args, **kwargs)
        return run
    return wrap


def _page_arg(value: Any, name: str, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < lo or (hi is not None and value > hi):
        raise InvalidInputError(f"{name} must be in [{lo}, {hi if hi is not None else 'inf'}], got {value}")
    return value


class MemoryService:
    """Every memory operation, scoped to a namespace, over one memory folder.

    Args:
        path: the memory folder (``None``: a temporary one, removed by :meth:`close`).
        embedder: the embedder every namespace uses (default: the packaged MiniLM, loaded
            once for all namespaces); tests pass ``HashingEmbedder()``.
        **engine_kwargs: passed to every ``Synapse(...)`` (``config``, ``client``: a
            Chroma server's client, ``extractor``, ``firewall``...).
    """

    def __init__(self, path: str | Path | None, *, embedder: Any = None, **engine_kwargs: Any) -> None:
        self.embedder = VectorHints(embedder if embedder is not None else make_embedder())
        self.pool = EnginePool(path, embedder=self.embedder, **engine_kwargs)
        self.path = self.pool.path
        # the folder is this server's from the start (MemoryLockedError if another process
        # has it), not only once a namespace is opened
        self._dirlock = DirectoryLock(self.path).acquire()
        self.started = time.time()
        self._lock = threading.Lock()
        self.telemetry: Any = None  # see enable_telemetry()
        self._frozen: set[str] = set()  # see freeze()
        # concurrent writes to one namespace share one commit (see ..group_commit); a batch
        # refused as input (any SynapseError but a storage failure) is retried per request
        self.writes: GroupCommit[Any, str] = GroupCommit(
            self._write, max_items=WRITE_CHUNK,
            isolate=lambda e: isinstance(e, SynapseError) and not isinstance(e, StorageError))
        client = engine_kwargs.get("client")
        if client is not None:  # a Chroma server holds the vectors: its collections name them
            from ..storage.chroma import list_namespaces

            self._known: set[str] = set(list_namespaces(client))
        else:
            self._known = set(self.pool.namespaces())

    # -- telemetry -----------------------------------------------------------------------
    def enable_telemetry(self, *, tracer_provider: Any = None) -> Any:
        """Start recording metrics and spans (:class:`~.telemetry.Telemetry`, needs
        ``prometheus-client``: the ``server`` extra; ``tracer_provider``: where the spans
        go, default OpenTelemetry's global one); returns it. The REST app calls it;
        idempotent."""
        if self.telemetry is None:
            from .telemetry import service_telemetry

            self.telemetry = service_telemetry(self, tracer_provider=tracer_provider)
        return self.telemetry

    def operation(self, name: str, namespace: Any = None, **attributes: Any) -> Any:
        """A context for one memory operation: timed and traced when telemetry is on
        (:meth:`enable_telemetry`), nothing otherwise."""
        if self.telemetry is None:
            return contextlib.nullcontext()
        return self.telemetry.operation(name, namespace if isinstance(namespace, str) else None,
                                        **attributes)

    # -- namespaces ----------------------------------------------------------------------
    def _checked(self, namespace: Any, create: bool) -> str:
        """``namespace`` validated; :class:`UnknownNamespaceError` unless it exists or
        ``create``. A name starting with ``@`` is an adapter's typed key (a
        :class:`RemotePool` sends the keys its adapters build); it must be one
        :func:`~synapse_integrations.pool.namespace_key` builds."""
        ns = validate_namespace(namespace)
        if ns.startswith("@"):
            ns = typed_key(ns)
        with self._lock:
            name = self.pool.resolve(ns)
            if name not in self._known and not create:
                raise UnknownNamespaceError(
                    f"no memory named {ns!r} on this server (storing a turn creates it)")
            self._known.add(name)
        return ns

    def engine(self, namespace: Any, *, create: bool = False) -> Any:
        """A handle on the memory of ``namespace`` (a
        :class:`~synapse_integrations.pool.PooledMemory`: each call takes the engine from
        the pool, so another namespace's request may evict it in between and the next call
        reopens it); :class:`UnknownNamespaceError` unless it exists or ``create``. An
        operation of several calls holds the engine with :meth:`lease`."""
        return self.pool.get(self._checked(namespace, create))

    @contextlib.contextmanager
    def lease(self, namespace: Any, *, create: bool = False) -> Iterator[Any]:
        """Hold the engine of ``namespace`` for a block (see :meth:`engine`): no eviction
        closes it meanwhile, so the block's calls see one engine, one moment.

        >>> with svc.lease("u1") as engine:                                # doctest: +SKIP
        ...     engine.archived(), engine.episodes()
        """
        with self.pool.lease(self._checked(namespace, create)) as engine:
            yield engine

    def create(self, namespace: Any) -> bool:
        """Make ``namespace`` an (empty) memory; False if it existed."""
        existed = validate_namespace(namespace) in self.namespaces()
        self.engine(namespace, create=True)
        return not existed

    def freeze(self, namespace: Any, frozen: bool = True) -> bool:
        """Refuse (``frozen``) or accept again the writes to ``namespace``: while a move to
        another server copies it (``synapse shards rebalance``), its writes are a 503
        to retry, its reads are served. In memory only: a restarted server accepts them
        again, and the move's last step copies what was written meanwhile. Returns
        whether it was frozen before."""
        if not isinstance(frozen, bool):
            raise InvalidTypeError("frozen must be a bool")
        self._checked(namespace, False)
        ns = validate_namespace(namespace)  # as the write operations check it
        with self._lock:
            was = ns in self._frozen
            (self._frozen.add if frozen else self._frozen.discard)(ns)
        return was

    def namespaces(self) -> list[str]:
        """The namespaces of this folder."""
        with self._lock:
            return sorted(self._known)

    def health(self) -> dict[str, Any]:
        """Liveness: ``{"status": "ok", "version", "uptime_s", "namespaces", "open"}``."""
        from .. import __version__

        return {"status": "ok", "version": __version__,
                "uptime_s": round(time.time() - self.started, 3),
                "namespaces": len(self.namespaces()), "open": len(self.pool.opened())}

    # -- writes --------------------------------------------------------------------------
    @_operation("add_turns", writes=True)
    def add_turns(self, namespace: Any, turns: Any) -> list[str]:
        """Store turns (dicts with ``text`` and optional ``speaker``, ``timestamp``,
        ``metadata``, ``id``, and ``vector``: the embedding to store instead of embedding
        the text again); returns their ids. Creates the namespace."""
        if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Sequence):
            raise InvalidTypeError("turns must be a list of turns")
        return self.writes.submit(self._checked(namespace, True), turns)

    def _write(self, namespace: str, turns: list[Any]) -> list[str]:
        """One commit of the turns that :attr:`writes` gathered for ``namespace``."""
        with self.operation("commit", namespace, turns=len(turns)), \
                self.lease(namespace, create=True) as engine:
            ids = self._add_turns(engine, turns)
        if self.telemetry is not None:
            self.telemetry.commit_turns.observe(len(turns))
        return ids

    def _add_turns(self, engine: Any, turns: Sequence[Any]) -> list[str]:
        clean, vectors = [], {}
        for turn in turns:
            if isinstance(turn, Mapping) and "vector" in turn:
                turn = dict(turn)
                vector = turn.pop("vector")
                if vector is not None:  # keyed by what the engine will embed for the turn
                    text = turn.get("text")
                    key = document(normalise_text(text)[0], turn.get("speaker")
                                   if isinstance(turn.get("speaker"), str) else None,
                                   enabled=engine.config.speaker_in_document) \
                        if isinstance(text, str) else text
                    vectors[key] = self._vector(vector, engine.config.embedding_dim)
            clean.append(turn)
        if not vectors:
            return engine.add_turns(clean)
        with self.embedder.preset(vectors):
            return engine.add_turns(clean)

    @staticmethod
    def _vector(value: Any, dim: int) -> np.ndarray:
        try:
            v = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidTypeError("vector must be a list of numbers") from None
        if v.shape != (dim,) or not np.all(np.isfinite(v)) or not np.any(v):
            raise InvalidInputError(f"vector must be {dim} finite numbers, not all zero; got shape {v.shape}")
        return v

    @_operation("update", writes=True)
    def update(self, namespace: Any, node_id: Any, text: Any = None, *, metadata: Any = None,
               speaker: Any = None, timestamp: Any = None, keep_history: Any = True) -> str:
        """Change a stored turn (see ``Synapse.update``); returns its new id."""
        if not isinstance(node_id, str):
            raise InvalidTypeError(f"id must be a str, got {type(node_id).__name__}")
        if not isinstance(keep_history, bool):
            raise InvalidTypeError("keep_history must be a bool")
        return self.engine(namespace).update(node_id, text, metadata=metadata, speaker=speaker,
                                             timestamp=timestamp, keep_history=keep_history)

    @_operation("holding")
    def holding(self, namespace: Any, about: Any) -> dict[str, Any]:
        """The memory holding the fact ``about`` describes, for a tool that changes memory by
        description: the best-ranked statement for it (not a question asked about it:
        :func:`~synapse_integrations._adapter_utils.holding_memory`). Changes nothing.
        Returns ``{"changed": False, "holding": item or None, "message"}``."""
        if not isinstance(about, str) or not about.strip():
            raise InvalidInputError("about must be a non-empty description of the memory")
        result, _ = self.retrieve_result(namespace, about, None)
        found = holding_memory(result)
        if found is None:
            return {"changed": False, "holding": None,
                    "message": "nothing in memory states that; nothing was changed"}
        return {"changed": False, "holding": wire.item_to_wire(found),
                "message": f"the memory holding that is {found.id}; nothing was changed: "
                           f"call again with its id to change it"}

    @_operation("forget", writes=True)
    def forget(self, namespace: Any, ids: Any = None, *, speaker: Any = None, since: Any = None,
               until: Any = None, where: Any = None, everything: Any = False) -> list[str]:
        """Remove episodes for good (see ``Synapse.forget``); returns the removed ids."""
        return self.engine(namespace).forget(ids, speaker=speaker, since=since, until=until,
                                             where=where, everything=everything)

    @_operation("feedback", writes=True)
    def feedback(self, namespace: Any, query: Any, used_ids: Any, unused_ids: Any = (), *,
                 alpha: Any = 0.1) -> dict[str, Any]:
        """Usage feedback (see ``Synapse.feedback``); returns the report as a dict."""
        report = self.engine(namespace).feedback(query, used_ids, unused_ids, alpha=alpha)
        return dataclasses.asdict(report)

    @_operation("consolidate", writes=True)
    def consolidate(self, namespace: Any) -> dict[str, Any]:
        return wire.report_to_wire(self.engine(namespace).consolidate())

    @_operation("archive", writes=True)
    def archive(self, namespace: Any, ids: Any) -> list[str]:
        return self.engine(namespace).archive(self._ids(ids))

    @_operation("restore", writes=True)
    def restore(self, namespace: Any, ids: Any) -> list[str]:
        """Bring archived nodes back; ids that are not archived are a NodeNotFoundError
        (checked here: the engine's restore() fails on them with a bare ValueError)."""
        ids = self._ids(ids)
        with self.lease(namespace) as engine:
            archived = {a["id"] for a in engine.archived()}
            missing = [i for i in ids if i not in archived]
            if missing:
                raise NodeNotFoundError(f"not archived memory id(s): {missing[:5]}")
            return engine.restore(ids) if ids else []

    @_operation("archived")
    def archived(self, namespace: Any) -> list[dict[str, Any]]:
        """The archived nodes (episodes and concepts)."""
        return self.engine(namespace).archived()

    @staticmethod
    def _ids(ids: Any) -> list[str]:
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence) \
                or not all(isinstance(i, str) for i in ids):
            raise InvalidTypeError("ids must be a list of str")
        return list(ids)

    @_operation("save")
    def save(self, namespace: Any) -> int:
        return self.engine(namespace).save()

    @_operation("verify")
    def verify(self, namespace: Any) -> dict[str, Any]:
        return wire.report_to_wire(self.engine(namespace).verify())

    @_operation("repair")
    def repair(self, namespace: Any) -> dict[str, Any]:
        return wire.report_to_wire(self.engine(namespace).repair())

    # -- reads ---------------------------------------------------------------------------
    @_operation("retrieve")
    def retrieve_result(self, namespace: Any, query: Any, k: Any = None, *, kinds: Any = None,
                        speakers: Any = None, since: Any = None, until: Any = None,
                        where: Any = None, config: Any = None, as_of: Any = None,
                        current_only: Any = False, at: Any = None
                        ) -> tuple[RetrievalResult, SynapseConfig]:
        """The engine's :class:`RetrievalResult` and the config it ran with."""
        with self.lease(namespace) as engine:
            cfg = retrieval_config(engine.config, config)
            result = engine.retrieve(query, k, config=cfg if config is not None else None,
                                     kinds=("episode",) if kinds is None else kinds,
                                     speakers=speakers, since=since, until=until, where=where,
                                     as_of=as_of, current_only=current_only, at=at)
        return result, cfg

    def retrieve(self, namespace: Any, query: Any, k: Any = None, *, for_model: bool = False,
                 **kwargs: Any) -> dict[str, Any]:
        """Rank memories for ``query`` with the filters (``speakers``, ``since``, ``until``,
        ``where``), the moment (``as_of``, ``current_only``, ``at``) and the gate's decision and
        reason (see :func:`.wire.result_to_wire`; ``for_model``: no items when the gate
        rejects)."""
        result, cfg = self.retrieve_result(namespace, query, k, **kwargs)
        return wire.result_to_wire(result, signal=cfg.gate_signal, gate_enabled=cfg.use_gate,
                                   for_model=for_model)

    @_operation("episodes")
    def episodes(self, namespace: Any, *, offset: Any = 0, limit: Any = 100,
                 include_archived: Any = True) -> dict[str, Any]:
        """One page of the episodes in ingestion order: ``{"episodes", "total", "offset",
        "limit", "next_offset"}`` (``next_offset`` is None on the last page); archived
        episodes carry ``"archived": true``."""
        offset = _page_arg(offset, "offset", 0)
        limit = _page_arg(limit, "limit", 1, MAX_PAGE)
        if not isinstance(include_archived, bool):
            raise InvalidTypeError("include_archived must be a bool")
        with self.lease(namespace) as engine:
            rows = engine.episodes(include_archived=include_archived)
            archived = {a["id"] for a in engine.archived()} if include_archived else set()
        page = [{**r, "archived": r["id"] in archived} for r in rows[offset:offset + limit]]
        end = offset + len(page)
        return {"episodes": page, "total": len(rows), "offset": offset, "limit": limit,
                "next_offset": end if end < len(rows) else None}

    @_operation("get")
    def get(self, namespace: Any, node_id: Any, *, include_archived: Any = False) -> dict[str, Any]:
        if not isinstance(node_id, str):
            raise InvalidTypeError(f"id must be a str, got {type(node_id).__name__}")
        if not isinstance(include_archived, bool):
            raise InvalidTypeError("include_archived must be a bool")
        return self.engine(namespace).get(node_id, include_archived=include_archived)

    @_operation("history")
    def history(self, namespace: Any, node_id: Any) -> list[dict[str, Any]]:
        """A memory's versions, oldest first: each one's record (as :meth:`get`) with
        ``valid_from`` / ``valid_until`` (event times, epoch seconds like ``ts``;
        ``valid_until`` null for the one that holds now)."""
        if not isinstance(node_id, str):
            raise InvalidTypeError(f"id must be a str, got {type(node_id).__name__}")
        return self.engine(namespace).history(node_id)

    @_operation("supersede", writes=True)
    def supersede(self, namespace: Any, old_id: Any, new_id: Any) -> list[dict[str, Any]]:
        """Link two stored turns as versions (``new_id`` replaces ``old_id``); returns the
        history they now share."""
        for name, value in (("old_id", old_id), ("new_id", new_id)):
            if not isinstance(value, str):
                raise InvalidTypeError(f"{name} must be a str, got {type(value).__name__}")
        self.engine(namespace).supersede(old_id, new_id)
        return self.history(namespace, new_id)

    @_operation("contains")
    def contains(self, namespace: Any, node_id: Any) -> bool:
        if not isinstance(node_id, str):
            raise InvalidTypeError(f"id must be a str, got {type(node_id).__name__}")
        return self.engine(namespace).contains(node_id)

    @_operation("stats")
    def stats(self, namespace: Any) -> dict[str, int]:
        return self.engine(namespace).stats()

    @_operation("inspect")
    def inspect(self, namespace: Any, node_id: Any = None, *, query: Any = None) -> dict[str, Any]:
        """A namespace (``node_id`` None): its folder, stats, config and embedder; or one
        memory: its attributes, its links in the graph (strongest first) and, with
        ``query``, how that query ranks it (rank, score, components, path, concepts)."""
        with self.lease(namespace) as engine:
            if node_id is None:
                return {"namespace": engine.namespace, "path": str(engine.path),
                        "stats": engine.stats(), "config": engine.config.to_dict(),
                        "embedder": type(model_of(self.embedder)).__name__}
            node = self.get(namespace, node_id, include_archived=True)
            links = []
            with engine.inspect_retrieval():  # holds the memory's lock while the graph is read
                g = engine.graph
                if node_id in g:
                    for _, other, data in g.out_edges(node_id, data=True):
                        links.append({"id": other, "kind": g.nodes[other].get("kind"),
                                      "text": g.nodes[other].get("text"), "edge": data.get("kind"),
                                      "weight": float(data.get("weight", 0.0))})
            links.sort(key=lambda x: -x["weight"])
            out: dict[str, Any] = {"memory": node, "archived": bool(node.get("archived", False)),
                                   "links": links[:50]}
            if query is not None:
                counts = engine.stats()
                k = min(max(counts["episodes"] + counts["concepts"], 1), MAX_PAGE)
                result, cfg = self.retrieve_result(namespace, query, k, kinds=("episode", "concept"))
                rank = next((k for k, it in enumerate(result.items, 1) if it.id == node_id), None)
                out["query"] = {"query": query, "rank": rank,
                                "item": wire.item_to_wire(result.items[rank - 1]) if rank else None,
                                "gate": wire.result_to_wire(result, signal=cfg.gate_signal,
                                                            gate_enabled=cfg.use_gate)["gate"]}
            return out

    @_operation("export")
    def export(self, namespace: Any, *, with_vectors: bool = False) -> list[dict[str, Any]]:
        """Every episode as an export line (see :mod:`.transfer`), read under the memory's
        lock (the engine held: no eviction in between) so that the export is one
        consistent moment."""
        from .transfer import export_lines

        with self.lease(namespace) as engine:
            return export_lines(engine, with_vectors=with_vectors)

    def close(self) -> None:
        """Snapshot and close every engine; release the folder."""
        try:
            self.pool.close()
        finally:
            self._dirlock.release()

"""A Python client of the REST API that is a memory: :class:`RemoteMemory`.

It implements the :class:`~synapse_integrations.types.MemoryEngine` protocol the adapters
use (``add_turn(s)``, ``retrieve`` returning a real
:class:`~synapse_integrations.types.RetrievalResult`, ``forget``, ``episodes``,
``contains``, ``get``, ``stats``, ``save``, ``close`` and the async twins), plus the
operator calls (``update``, ``consolidate``, ``verify``, ``repair``, ``inspect``,
``export``...). Every adapter works against a remote memory unchanged:

>>> from synapse_integrations.server.client import RemoteMemory, RemotePool
>>> mem = RemoteMemory("http://127.0.0.1:8765", "user_id=42")          # doctest: +SKIP
>>> SynapseRetriever(engine=mem, k=5).invoke("Where did Sam ski?")    # doctest: +SKIP
>>> SynapseMemoryNodes(RemotePool("http://127.0.0.1:8765"))            # doctest: +SKIP

Errors are the engine's own (``InvalidInputError``, ``NodeNotFoundError``,
``UnknownNamespaceError``...), rebuilt from the server's answer; a server that cannot be
reached, or does not answer within ``timeout``, is a
:class:`~synapse_integrations.errors.StorageError`. A request that never left (connection
refused) is retried ``retries`` times; a write whose answer was lost is not retried:
give your turns an ``id`` (an idempotency key) and retry yourself; a reused id is refused
with a 409 (``InvalidInputError``), which then means "already stored". A busy memory (held
by another request or process) is a 503 with ``Retry-After`` (``MemoryLockedError``): the
request may be sent again. A key that may not use the namespace is a 403
(:class:`~.access.AccessDeniedError`, naming the key's patterns).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from .._adapter_utils import require
from ..config import SynapseConfig
from ..core.state.validation import validate_namespace
from ..errors import InvalidTypeError
from ..pool import EnginePool
from ..types import (
    ConsistencyReport,
    ConsolidationReport,
    FeedbackReport,
    ForgetResult,
    RetrievalResult,
)
from . import wire
from .connection import AuthenticationError, ServerConnection, segment

httpx = require("httpx", "server")

__all__ = ["AuthenticationError", "RemoteMemory", "RemotePool"]

_DEFAULT_KINDS = ("episode",)
_PAGE = 1000


def _time(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _turn(turn: Any) -> Any:
    if isinstance(turn, str):
        return {"text": turn}
    if isinstance(turn, Mapping):
        out = {k: v for k, v in turn.items() if v is not None}
        if "timestamp" in out:
            out["timestamp"] = _time(out["timestamp"])
        if "vector" in out and hasattr(out["vector"], "tolist"):
            out["vector"] = out["vector"].tolist()
        return out
    return turn  # the server names the problem


def _feedback_body(query: str, used: Any, unused: Any, alpha: float) -> dict[str, Any]:
    for what, ids in (("used_ids", used), ("unused_ids", unused)):
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise InvalidTypeError(f"{what} must be a list of memory ids")
    return {"query": query, "used_ids": list(used), "unused_ids": list(unused), "alpha": alpha}


def _report(data: Mapping[str, Any]) -> FeedbackReport:
    return FeedbackReport(**{**data, "used": tuple(data["used"]),
                             "unused": tuple(data["unused"])})


class RemoteMemory(ServerConnection):
    """One namespace of a memory server, behind the ``MemoryEngine`` protocol.

    Args:
        base_url: the server, e.g. ``"http://127.0.0.1:8765"``.
        namespace: which memory (validated here as the engine does).
        api_key: the server's API key (sent as ``X-API-Key``); default: none.
        timeout: seconds to wait for an answer (then :class:`StorageError`).
        retries: how often a request that could not be sent (connection refused) is tried
            again, 0.25 s apart, doubling.
        create: like ``Synapse(path, namespace)``, use the namespace as an (empty) memory
            if the server does not hold it yet: it is created on the server at the first
            call that needs it. ``False``: such calls raise :class:`UnknownNamespaceError`
            (like ``Synapse.load``).
        transport: an httpx transport (tests).
    """

    def __init__(self, base_url: str, namespace: str = "default", *, api_key: str | None = None,
                 timeout: float = 60.0, retries: int = 2, create: bool = True,
                 transport: Any = None) -> None:
        self.namespace = validate_namespace(namespace)
        self.base_url = base_url.rstrip("/")
        self.path = self.base_url  # where this memory lives, for messages
        self._prefix = f"/v1/namespaces/{segment(self.namespace)}"
        self._headers = {"X-API-Key": api_key} if api_key else {}
        self._timeout = timeout
        self._retries = max(0, int(retries))
        self._transport = transport
        self._client = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=timeout,
                                    transport=transport)
        self._aclients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._alock = threading.Lock()
        self._config: SynapseConfig | None = None
        self._closed = False
        self._create = create

    def __repr__(self) -> str:
        return f"RemoteMemory({self.base_url!r}, {self.namespace!r})"

    # -- request bodies ------------------------------------------------------------------
    @staticmethod
    def _turns_body(turns: Any) -> dict[str, Any]:
        if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Iterable):
            raise InvalidTypeError("add_turns() takes a list of turns (use add_turn for one)")
        return {"turns": [_turn(t) for t in turns]}

    def _retrieve_body(self, query: Any, k: Any, config: Any, kinds: Any, speakers: Any,
                       since: Any, until: Any, where: Any, as_of: Any = None,
                       current_only: Any = False, at: Any = None) -> dict[str, Any]:
        if not isinstance(query, str):
            raise InvalidTypeError(f"query must be a str, got {type(query).__name__}")
        if isinstance(kinds, str):
            raise InvalidTypeError(f"kinds must be a list of node kinds, got {kinds!r}")
        body: dict[str, Any] = {"query": query, "k": k, "kinds": list(kinds),
                                "speakers": list(speakers) if isinstance(speakers, (list, tuple)) else speakers,
                                "since": _time(since), "until": _time(until), "where": where,
                                "as_of": _time(as_of), "current_only": current_only,
                                "at": _time(at)}
        if config is not None:
            if not isinstance(config, SynapseConfig):
                raise InvalidTypeError(f"config must be a SynapseConfig, got {type(config).__name__}")
            mine = self.config
            mine.query_override(config)  # a graph-time change: ConfigError, as in Synapse
            body["config"] = {f: v for f, v in config.to_dict().items()
                              if f not in SynapseConfig.GRAPH_FIELDS and f != "extra"
                              and v != getattr(mine, f)}
        return {key: v for key, v in body.items() if v is not None}

    @staticmethod
    def _forget_body(ids: Any, speaker: Any, since: Any, until: Any, where: Any,
                     everything: Any) -> dict[str, Any]:
        if ids is not None and (isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable)):
            raise InvalidTypeError("forget(ids=...) takes a list of ids, not a single str")
        body = {"ids": list(ids) if ids is not None else None, "speaker": speaker,
                "since": _time(since), "until": _time(until), "where": where, "everything": everything}
        return {k: v for k, v in body.items() if v is not None}

    @staticmethod
    def _update_body(node_id: Any, text: Any, metadata: Any, speaker: Any, timestamp: Any,
                     keep_history: Any) -> dict[str, Any]:
        body = {"id": node_id, "text": text, "metadata": metadata, "speaker": speaker,
                "timestamp": _time(timestamp), "keep_history": keep_history}
        return {k: v for k, v in body.items() if v is not None}

    @staticmethod
    def _id(node_id: Any) -> str:
        if not isinstance(node_id, str):
            raise InvalidTypeError(f"id must be a str, got {type(node_id).__name__}")
        return segment(node_id)

    @staticmethod
    def _strip(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for row in rows:  # the same dicts a local engine returns
            row.pop("archived", None)
        return rows

    # -- the MemoryEngine protocol -------------------------------------------------------
    def add_turn(self, text: str, *, speaker: str | None = None, timestamp: Any = None,
                 metadata: Mapping[str, Any] | None = None, id: str | None = None) -> str:
        """Store one turn; returns its id (durable when this returns)."""
        return self.add_turns([{"text": text, "speaker": speaker, "timestamp": timestamp,
                                "metadata": metadata, "id": id}])[0]

    def add_turns(self, turns: Iterable[str | Mapping[str, Any]]) -> list[str]:
        """Store turns (strings or dicts with ``text``, ``speaker``, ``timestamp``,
        ``metadata``, ``id``, and optionally ``vector``); returns their ids."""
        return self._call("POST", "turns", json=self._turns_body(turns))["ids"]

    async def aadd_turn(self, text: str, **kwargs: Any) -> str:
        return (await self.aadd_turns([{"text": text, **kwargs}]))[0]

    async def aadd_turns(self, turns: Iterable[str | Mapping[str, Any]]) -> list[str]:
        return (await self._acall("POST", "turns", json=self._turns_body(turns)))["ids"]

    def retrieve(self, query: str, k: int | None = None, *, config: SynapseConfig | None = None,
                 kinds: Sequence[str] = _DEFAULT_KINDS, speakers: Any = None, since: Any = None,
                 until: Any = None, where: Mapping[str, Any] | None = None, as_of: Any = None,
                 current_only: bool = False, at: Any = None) -> RetrievalResult:
        """Rank memories for ``query`` (same arguments and result as ``Synapse.retrieve``)."""
        body = self._retrieve_body(query, k, config, kinds, speakers, since, until, where,
                                   as_of, current_only, at)
        return wire.result_from_wire(self._call("POST", "retrieve", json=body))

    async def aretrieve(self, query: str, k: int | None = None, *, config: SynapseConfig | None = None,
                        kinds: Sequence[str] = _DEFAULT_KINDS, speakers: Any = None, since: Any = None,
                        until: Any = None, where: Mapping[str, Any] | None = None, as_of: Any = None,
                        current_only: bool = False, at: Any = None) -> RetrievalResult:
        body = self._retrieve_body(query, k, config, kinds, speakers, since, until, where,
                                   as_of, current_only, at)
        return wire.result_from_wire(await self._acall("POST", "retrieve", json=body))

    def retrieve_explained(self, query: str, k: int | None = None, **kwargs: Any) -> dict[str, Any]:
        """:meth:`retrieve` as the server's JSON, with ``gate.decision`` and ``gate.reason``."""
        kw = {"config": None, "kinds": _DEFAULT_KINDS, "speakers": None, "since": None,
              "until": None, "where": None, **kwargs}
        return self._call("POST", "retrieve", json=self._retrieve_body(query, k, **kw))

    def feedback(self, query: str, used_ids: Sequence[str], unused_ids: Sequence[str] = (), *,
                 alpha: float = 0.1) -> FeedbackReport:
        """Usage feedback (``Synapse.feedback``) on the server's memory."""
        return _report(self._call("POST", "feedback", json=_feedback_body(
            query, used_ids, unused_ids, alpha)))

    async def afeedback(self, query: str, used_ids: Sequence[str],
                        unused_ids: Sequence[str] = (), *, alpha: float = 0.1) -> FeedbackReport:
        """Async twin of :meth:`feedback`."""
        return _report(await self._acall("POST", "feedback", json=_feedback_body(
            query, used_ids, unused_ids, alpha)))

    def forget(self, ids: Sequence[str] | None = None, *, speaker: str | None = None,
               since: Any = None, until: Any = None, where: Mapping[str, Any] | None = None,
               everything: bool = False) -> ForgetResult:
        """Remove episodes for good; returns the removed ids (a ``list[str]`` with
        ``.memories`` and ``.derived``, as ``Synapse.forget``)."""
        body = self._forget_body(ids, speaker, since, until, where, everything)
        return wire.forget_from_wire(self._call("POST", "forget", json=body))

    async def aforget(self, ids: Sequence[str] | None = None, *, speaker: str | None = None,
                      since: Any = None, until: Any = None, where: Mapping[str, Any] | None = None,
                      everything: bool = False) -> ForgetResult:
        body = self._forget_body(ids, speaker, since, until, where, everything)
        return wire.forget_from_wire(await self._acall("POST", "forget", json=body))

    def episodes(self, *, include_archived: bool = True) -> list[dict[str, Any]]:
        """Every episode in ingestion order (fetched page by page)."""
        rows: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = self.episodes_page(offset=offset, limit=_PAGE, include_archived=include_archived)
            rows += page["episodes"]
            offset = page["next_offset"]
        return self._strip(rows)

    def episodes_page(self, *, offset: int = 0, limit: int = 100,
                      include_archived: bool = True) -> dict[str, Any]:
        """One page: ``{"episodes", "total", "offset", "limit", "next_offset"}``; archived
        episodes carry ``"archived": true``."""
        return self._call("GET", "episodes", params={"offset": offset, "limit": limit,
                                                     "include_archived": include_archived})

    async def aepisodes(self, *, include_archived: bool = True) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = await self._acall("GET", "episodes", params={
                "offset": offset, "limit": _PAGE, "include_archived": include_archived})
            rows += page["episodes"]
            offset = page["next_offset"]
        return self._strip(rows)

    def contains(self, node_id: str) -> bool:
        """``node_id`` is in this memory (active or archived)."""
        return self._call("GET", f"memories/{self._id(node_id)}/exists")["exists"]

    async def acontains(self, node_id: str) -> bool:
        return (await self._acall("GET", f"memories/{self._id(node_id)}/exists"))["exists"]

    def get(self, node_id: str, *, include_archived: bool = False) -> dict[str, Any]:
        """A memory's attributes (:class:`NodeNotFoundError` if none)."""
        return self._call("GET", f"memories/{self._id(node_id)}",
                          params={"include_archived": include_archived})

    async def aget(self, node_id: str, *, include_archived: bool = False) -> dict[str, Any]:
        return await self._acall("GET", f"memories/{self._id(node_id)}",
                                 params={"include_archived": include_archived})

    def history(self, node_id: str) -> list[dict[str, Any]]:
        """A memory's versions, oldest first, with ``valid_from`` / ``valid_until`` (as
        ``Synapse.history``)."""
        return self._call("GET", f"memories/{self._id(node_id)}/history")["versions"]

    async def ahistory(self, node_id: str) -> list[dict[str, Any]]:
        return (await self._acall("GET", f"memories/{self._id(node_id)}/history"))["versions"]

    def supersede(self, old_id: str, new_id: str) -> None:
        """Link two stored turns as versions (as ``Synapse.supersede``)."""
        self._call("POST", "supersede", json={"old_id": old_id, "new_id": new_id})

    async def asupersede(self, old_id: str, new_id: str) -> None:
        await self._acall("POST", "supersede", json={"old_id": old_id, "new_id": new_id})

    def stats(self) -> dict[str, int]:
        """Counts of nodes and edges by kind, archived nodes, pending turns, windows."""
        return self._call("GET", "stats")

    async def astats(self) -> dict[str, int]:
        return await self._acall("GET", "stats")

    def save(self) -> int:
        """Ask the server for a snapshot now (turns are durable without one); returns its
        version."""
        return self._call("POST", "save")["version"]

    async def asave(self) -> int:
        return (await self._acall("POST", "save"))["version"]

    def close(self) -> None:
        """Close this client's connections (the server keeps the memory)."""
        if self._closed:
            return
        self._closed = True
        self._client.close()
        clients, self._aclients = list(self._aclients.items()), weakref.WeakKeyDictionary()
        for loop, client in clients:
            if loop.is_closed():
                continue
            try:
                if loop.is_running():
                    loop.call_soon_threadsafe(lambda c=client: asyncio.ensure_future(c.aclose()))
                else:
                    loop.run_until_complete(client.aclose())
            except RuntimeError:
                pass

    async def aclose(self) -> None:
        client = self._aclients.get(asyncio.get_running_loop())
        if client is not None:
            await client.aclose()
            self._aclients.pop(asyncio.get_running_loop(), None)
        self.close()

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- beyond the protocol: the rest of the engine's API -------------------------------
    @property
    def config(self) -> SynapseConfig:
        """The memory's config (as the server holds it; fetched once)."""
        if self._config is None:
            self._config = SynapseConfig.from_dict(self.inspect()["config"])
        return self._config

    def update(self, node_id: str, text: str | None = None, *, metadata: Mapping[str, Any] | None = None,
               speaker: str | None = None, timestamp: Any = None, keep_history: bool = True) -> str:
        """Change a stored turn; returns its new id (see ``Synapse.update``)."""
        body = self._update_body(node_id, text, metadata, speaker, timestamp, keep_history)
        return self._call("POST", "update", json=body)["id"]

    async def aupdate(self, node_id: str, text: str | None = None, **kwargs: Any) -> str:
        body = self._update_body(node_id, text, kwargs.get("metadata"), kwargs.get("speaker"),
                                 kwargs.get("timestamp"), kwargs.get("keep_history", True))
        return (await self._acall("POST", "update", json=body))["id"]

    def consolidate(self) -> ConsolidationReport:
        return wire.consolidation_from_wire(self._call("POST", "consolidate"))

    async def aconsolidate(self) -> ConsolidationReport:
        return wire.consolidation_from_wire(await self._acall("POST", "consolidate"))

    def verify(self) -> ConsistencyReport:
        return wire.consistency_from_wire(self._call("POST", "verify"))

    async def averify(self) -> ConsistencyReport:
        return wire.consistency_from_wire(await self._acall("POST", "verify"))

    def repair(self) -> ConsistencyReport:
        return wire.consistency_from_wire(self._call("POST", "repair"))

    async def arepair(self) -> ConsistencyReport:
        return wire.consistency_from_wire(await self._acall("POST", "repair"))

    def archive(self, ids: Sequence[str]) -> list[str]:
        return self._call("POST", "archive", json={"ids": list(ids)})["ids"]

    def freeze(self, frozen: bool = True) -> bool:
        """Refuse (or, ``frozen=False``, accept again) this namespace's writes on the
        server, while a move copies it; returns whether it was frozen before."""
        return bool(self._call("POST", "freeze", json={"frozen": frozen})["was_frozen"])

    def archived(self) -> list[dict[str, Any]]:
        """The archived nodes (``{"id", "kind", "text", ...}`` each)."""
        return self._call("GET", "archived")

    def restore(self, ids: Sequence[str]) -> list[str]:
        return self._call("POST", "restore", json={"ids": list(ids)})["ids"]

    def inspect(self, node_id: str | None = None, *, query: str | None = None) -> dict[str, Any]:
        """The namespace (folder, stats, config) or one memory (links; with ``query`` its
        rank, components and path)."""
        if node_id is None:
            return self._call("GET", "")
        return self._call("GET", f"memories/{self._id(node_id)}/inspect",
                          params={"query": query} if query is not None else None)

    def export(self, *, with_vectors: bool = False) -> Iterator[dict[str, Any]]:
        """Every episode as an export line (see :mod:`.transfer`), streamed."""
        import json

        self.stats()  # the namespace exists (or is created, or UnknownNamespaceError)
        url = self._url("export")
        with self._client.stream("GET", url, params={"with_vectors": with_vectors}) as response:
            if response.status_code >= 400:
                response.read()
                self._answer(response)
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)

    def namespaces(self) -> list[str]:
        """Every namespace on the server."""
        return self._call("GET", "", url="/v1/namespaces")["namespaces"]

    def health(self) -> dict[str, Any]:
        return self._call("GET", "", url="/health")


class RemotePool(EnginePool):
    """An :class:`~synapse_integrations.pool.EnginePool` whose memories live on a server:
    ``get(namespace)`` is a :class:`RemoteMemory`. Pass it wherever an adapter takes a
    pool (LangGraph nodes and store, agent middleware and tools).

    >>> pool = RemotePool("http://127.0.0.1:8765", api_key="...")   # doctest: +SKIP
    >>> pool.get("user_id=42").retrieve("ski trip")                  # doctest: +SKIP
    """

    #: what :meth:`get` builds (a subclass may serve its own)
    memory_class: type[RemoteMemory] = RemoteMemory

    def __init__(self, base_url: str, **client_kwargs: Any) -> None:  # no folder: no super()
        self.base_url = base_url.rstrip("/")
        self.path = None
        self._owns_path = False
        self._kwargs = dict(client_kwargs)
        self._engines: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, namespace: str) -> RemoteMemory:
        with self._lock:
            engine = self._engines.get(namespace)
            if engine is None:
                engine = self._engines[namespace] = self.memory_class(self.base_url, namespace, **self._kwargs)
            return engine

    def opened(self) -> list[str]:
        with self._lock:
            return sorted(self._engines)

    def namespaces(self) -> list[str]:
        """Namespaces stored on the server plus those opened here."""
        with RemoteMemory(self.base_url, **{**self._kwargs, "create": False}) as probe:
            stored = set(probe.namespaces())
        return sorted(stored | set(self.opened()))

    def save(self) -> None:
        with self._lock:
            engines = list(self._engines.values())
        for engine in engines:
            engine.save()

    def close(self) -> None:
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.close()

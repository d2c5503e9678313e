"""The MCP server: the memory as tools and resources for agents that speak MCP (coding
agents, LangGraph agents through ``langchain-mcp-adapters``, ...), over stdio or
streamable HTTP, built with the official ``mcp`` SDK (FastMCP).

Tools (every one takes a ``namespace``, validated like the engine's; required, unless the
server has API keys bound to one namespace each: a connection made with such a key uses
its own, and a ``namespace`` outside a key's patterns is refused, see :mod:`.access`):

=================  ==================================================================
``store_turns``    store turns (text, speaker, timestamp, metadata, id); returns ids
``retrieve``       rank memories; filters ``speakers``, ``since``, ``until``, ``where``;
                   the moment ``as_of`` and ``current_only``; the gate's ``decision``
                   and ``reason`` (no items when it rejects, unless ``include_rejected``)
``consolidate``    consolidate pending turns now
``forget``         remove for good: ids, speaker, time range, metadata, or everything
``update``         change a stored turn (text, metadata, speaker, time); returns its new id
``history``        a memory's versions, oldest first, with when each held
``feedback``       which memories an answer to a query used and which it did not: learned
                   edge weights (``Synapse.feedback``); returns what was learned
``list_episodes``  the episodes in order, one page at a time
``inspect``        a namespace (folder, stats, config) or one memory (attributes, links,
                   and with ``query`` its rank, score components and activation path)
``stats``          counts of nodes and edges by kind
``health``         the server's liveness and this namespace's state
=================  ==================================================================

Resources: ``synapse://architecture`` (docs/architecture.md), ``synapse://namespaces``
and ``synapse://namespaces/{namespace}/stats``.

An engine error comes back as a tool error whose text starts with the error's name and
HTTP-like status (``InvalidInputError (400): k must be an int >= 1, got 0``).

Over HTTP the server is stateless and answers in JSON (``stateless_http``,
``json_response``): every request carries its key and stands alone, so no session state
is held per client, and a client that ends its session leaves no stream behind (in the
SDK's stateful mode the end of every session logged ``ClosedResourceError``: the
session's teardown closed the receiving end of its standalone SSE stream while that
stream's writer was still reading it).
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from pathlib import Path
from typing import Any, Callable, Optional, Union
from urllib.parse import unquote

import anyio

from .._adapter_utils import require
from ..errors import InvalidInputError
from ..core.state.validation import validate_namespace
from . import wire
from .access import STATE_KEY, AccessDeniedError, ApiKey, KeyRing, bind_namespace, key_ring
from .service import MemoryService

require("mcp", "server")

from mcp.server.fastmcp import FastMCP  # noqa: E402
from mcp.server.fastmcp.exceptions import ToolError  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field  # noqa: E402

logger = logging.getLogger(__name__)

__all__ = ["architecture_text", "create_mcp_server", "run_mcp"]

INSTRUCTIONS = (
    "Long-term memory (SYNAPSE). Every tool takes a `namespace`: one memory per user or "
    "thread, e.g. 'user_id=42'. Store what is worth remembering with store_turns; before "
    "answering from memory call retrieve. When gate.decision is 'rejected', memory holds "
    "nothing relevant: items is empty and gate.reason says why."
)
BOUND = (" A connection whose API key is bound to one namespace may leave `namespace` out: "
         "its own is used, and no other is allowed.")


class Turn(BaseModel):
    """One conversation turn to store."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="what was said, or the fact to remember")
    speaker: Optional[str] = Field(None, description="who said it, e.g. 'user'")
    timestamp: Union[str, float, None] = Field(
        None, description="when it happened: ISO 8601 or epoch seconds (default: now)")
    metadata: Optional[dict[str, Any]] = Field(None, description="JSON metadata, filterable with `where`")
    id: Optional[str] = Field(None, description="your id (idempotency key); default: a new one")


def architecture_text() -> str:
    """docs/architecture.md when the source tree is at hand, else the engine's overview."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
    try:
        return doc.read_text("utf-8")
    except OSError:
        from ..core import engine

        return "# Architecture\n\n" + (engine.__doc__ or "")


def _request_key(server: FastMCP) -> ApiKey | None:
    """The API key the HTTP access check found for the request being handled (None over
    stdio, or on a server without keys)."""
    try:
        request = server.get_context().request_context.request
    except (LookupError, ValueError):
        return None
    scope = getattr(request, "scope", None) or {}
    return (scope.get("state") or {}).get(STATE_KEY)


def _namespace_of(server: FastMCP, keys: KeyRing | None, namespace: str | None) -> str:
    """The namespace a call may use (:func:`~.access.bind_namespace` with the request's
    key); with keys, a request that carries none is refused."""
    key = _request_key(server)
    if keys is not None and key is None:
        raise AccessDeniedError("this MCP server needs an API key on every request")
    return bind_namespace(key, namespace)


def _tools(server: FastMCP, keys: KeyRing | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The decorator of every tool: bind its ``namespace`` to the request's API key, run the
    service call in a worker thread (the engine blocks) and turn engine errors into tool
    errors that name the error and its status. When some key is bound to exactly one
    namespace, ``namespace`` becomes optional in the tool's schema."""
    optional = keys is not None and any(k.only is not None for k in keys.keys)

    def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def run(**kwargs: Any) -> Any:
            try:
                kwargs["namespace"] = _namespace_of(server, keys, kwargs.get("namespace"))
                return await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))
            except Exception as exc:
                body = wire.error_to_wire(exc)["error"]
                if body["status"] >= 500 and wire.retry_after(exc) is None:
                    logger.exception("MCP tool %s failed", fn.__name__)
                raise ToolError(f"{body['type']} ({body['status']}): {body['message']}") from exc

        sig = inspect.signature(fn, eval_str=True)
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in sig.parameters.values()]
        if optional:
            params = [p.replace(annotation=Optional[str], default=None) if p.name == "namespace" else p
                      for p in params]
        run.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return run
    return tool


def create_mcp_server(service: MemoryService, *, name: str = "synapse-memory",
                      host: str = "127.0.0.1", port: int = 8000,
                      streamable_http_path: str = "/mcp", keys: KeyRing | None = None,
                      **settings: Any) -> FastMCP:
    """The MCP server over ``service`` (its tools and resources; see the module doc).
    ``host``/``port`` matter for HTTP (DNS-rebinding protection is on for localhost);
    ``keys``: the API keys its HTTP requests carry (checked by
    :class:`~.middleware.AccessControl`), which bind each call to the key's namespaces."""
    settings.setdefault("log_level", "WARNING")  # FastMCP configures the root logger with it
    settings.setdefault("stateless_http", True)  # see the module doc
    settings.setdefault("json_response", True)
    bound = keys is not None and any(k.only is not None for k in keys.keys)
    server = FastMCP(name, instructions=INSTRUCTIONS + (BOUND if bound else ""), host=host, port=port,
                     streamable_http_path=streamable_http_path, **settings)
    svc = service
    _tool = _tools(server, keys)

    @server.tool()
    @_tool
    def store_turns(namespace: str, turns: list[Turn]) -> dict[str, Any]:
        """Store conversation turns or facts in the namespace's memory (created on first
        use); returns their ids. A turn is durable when this returns."""
        return {"ids": svc.add_turns(namespace, [t.model_dump(exclude_none=True) for t in turns])}

    @server.tool()
    @_tool
    def retrieve(namespace: str, query: str, k: int = 10, speakers: Optional[list[str]] = None,
                 since: Union[str, float, None] = None, until: Union[str, float, None] = None,
                 where: Optional[dict[str, Any]] = None, include_concepts: bool = False,
                 include_rejected: bool = False, as_of: Union[str, float, None] = None,
                 current_only: bool = False, at: Union[str, float, None] = None) -> dict[str, Any]:
        """Recall memories relevant to `query`, best first, each with its score components,
        activation path and the concepts that led to it. Filters: `speakers`, event time
        in [since, until), `where` on metadata (Chroma style: {"topic": "ski"},
        {"n": {"$gte": 3}}). `as_of` (ISO date or epoch seconds) reads the memory as it
        stood then; `current_only=true` leaves out versions replaced by a later one (by
        default they come right below what replaced them, with `superseded_by`, `valid_from`
        and `valid_until`). `at` (ISO date or epoch seconds): when the question is asked,
        so "last week" in it is read against that time (default: `as_of`, else now).
        `gate.decision` is 'rejected' when memory holds nothing
        relevant; `gate.reason` says why, and `items` is then empty (`withheld` counts the
        memories ranked anyway; include_rejected=true lists them, for inspection only)."""
        return svc.retrieve(namespace, query, k, speakers=speakers, since=since, until=until,
                            where=where, kinds=("episode", "concept") if include_concepts else ("episode",),
                            for_model=not include_rejected, as_of=as_of, current_only=current_only,
                            at=at)

    @server.tool()
    @_tool
    def consolidate(namespace: str) -> dict[str, Any]:
        """Consolidate every pending turn into concepts and links now."""
        return svc.consolidate(namespace)

    @server.tool()
    @_tool
    def forget(namespace: str, ids: Optional[list[str]] = None, speaker: Optional[str] = None,
               since: Union[str, float, None] = None, until: Union[str, float, None] = None,
               where: Optional[dict[str, Any]] = None, everything: bool = False,
               about: Optional[str] = None) -> dict[str, Any]:
        """Remove memories for good: by ids, speaker, event time [since, until), metadata
        `where`, or everything=true (criteria combine with AND). Returns the removed ids:
        `memories` (what was asked for), `derived` (concepts that went with them), and a
        `message` saying so. With `about` alone (a description of a fact), nothing is
        removed: it returns the memory holding that fact (`holding`), to forget by its id."""
        if about is not None:
            if ids is not None or speaker is not None or since is not None or until is not None \
                    or where is not None or everything:
                raise InvalidInputError("forget takes either `about` or the other criteria")
            return svc.holding(namespace, about)
        return wire.forget_to_wire(svc.forget(namespace, ids, speaker=speaker, since=since,
                                              until=until, where=where, everything=everything))

    @server.tool()
    @_tool
    def update(namespace: str, id: Optional[str] = None, text: Optional[str] = None,
               metadata: Optional[dict[str, Any]] = None, speaker: Optional[str] = None,
               timestamp: Union[str, float, None] = None, keep_history: bool = True,
               about: Optional[str] = None) -> dict[str, Any]:
        """Correct a stored memory (its text, metadata, speaker or time); returns its new id.
        Instead of `id`, `about` (a description of the fact) changes nothing and returns the
        memory holding that fact (`holding`: a statement, not a question asked about it),
        to update by its id."""
        if (id is None) == (about is None):
            raise InvalidInputError("update takes either `id` or `about`")
        if about is not None:
            return svc.holding(namespace, about)
        return {"id": svc.update(namespace, id, text, metadata=metadata, speaker=speaker,
                                 timestamp=timestamp, keep_history=keep_history)}

    @server.tool()
    @_tool
    def history(namespace: str, id: str) -> dict[str, Any]:
        """The versions of a memory, oldest first (what it said before each update), each
        with `valid_from` and `valid_until` (epoch seconds of event time; `valid_until` is
        null for the version that holds now)."""
        return {"versions": svc.history(namespace, id)}

    @server.tool()
    @_tool
    def feedback(namespace: str, query: str, used_ids: list[str],
                 unused_ids: Optional[list[str]] = None, alpha: float = 0.1) -> dict[str, Any]:
        """After answering `query` from retrieved memories: the ids the answer used
        (`used_ids`) and those it did not (`unused_ids`). Strengthens the links between
        used memories and weakens those that brought in unused ones (learned edge
        weights); returns which graph learned and how many edges changed. Ids must be
        active memories, never both used and unused; `alpha` (learning rate) in [0, 1]."""
        return svc.feedback(namespace, query, used_ids, () if unused_ids is None else unused_ids,
                            alpha=alpha)

    @server.tool()
    @_tool
    def list_episodes(namespace: str, offset: int = 0, limit: int = 50,
                      include_archived: bool = True) -> dict[str, Any]:
        """The stored turns in order, one page at a time (`next_offset` is the next page)."""
        return svc.episodes(namespace, offset=offset, limit=limit, include_archived=include_archived)

    @server.tool()
    @_tool
    def inspect(namespace: str, id: Optional[str] = None, query: Optional[str] = None) -> dict[str, Any]:
        """Without `id`: the memory's folder, stats and config. With `id`: that memory's
        attributes and graph links and, with `query`, its rank, score components and
        activation path for that query."""
        return svc.inspect(namespace, id, query=query)

    @server.tool()
    @_tool
    def stats(namespace: str) -> dict[str, Any]:
        """Counts of episodes, concepts, edges by kind, archived nodes, pending turns."""
        return svc.stats(namespace)

    @server.tool()
    @_tool
    def health(namespace: str) -> dict[str, Any]:
        """The server's liveness, and whether this namespace exists and how many episodes
        it holds."""
        out = svc.health()
        ns = validate_namespace(namespace)
        exists = ns in svc.namespaces()
        out["namespace"] = {"name": ns, "exists": exists,
                            "episodes": svc.stats(ns)["episodes"] if exists else 0}
        return out

    @server.resource("synapse://architecture", name="architecture", mime_type="text/markdown",
                     description="How the memory works: modules, how a turn and a query flow")
    def architecture() -> str:
        return architecture_text()

    @server.resource("synapse://namespaces", name="namespaces", mime_type="application/json",
                     description="The namespaces of this memory folder")
    async def namespaces() -> str:
        key = _request_key(server)
        return json.dumps({"namespaces": [ns for ns in svc.namespaces() if key is None or key.allows(ns)]})

    @server.resource("synapse://namespaces/{namespace}/stats", name="stats",
                     mime_type="application/json",
                     description="Counts of one namespace (percent-encode the namespace)")
    async def namespace_stats(namespace: str) -> str:
        stats = await anyio.to_thread.run_sync(svc.stats, _namespace_of(server, keys, unquote(namespace)))
        return json.dumps(stats)

    return server


def run_mcp(service: MemoryService, *, transport: str = "stdio", host: str = "127.0.0.1",
            port: int = 8000, api_key: str | None = None, keys: KeyRing | None = None,
            log_level: str = "warning") -> None:
    """Serve until stopped (stdio: until the client closes the pipe; http: SIGINT/SIGTERM),
    then snapshot and close every memory. Over HTTP, ``api_key`` and/or ``keys`` (see
    :mod:`.access`) guard ``/mcp``."""
    if transport == "stdio":
        try:
            create_mcp_server(service, host=host, port=port, log_level=log_level.upper()).run("stdio")
        finally:
            service.close()
        return
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from .middleware import AccessControl
    from .serving import run_uvicorn, stop_signals

    with stop_signals():  # SIGTERM: a graceful stop, the final snapshot, exit 0
        try:
            ring = key_ring(api_key, keys)
            server = create_mcp_server(service, host=host, port=port, log_level=log_level.upper(), keys=ring)

            @server.custom_route("/health", methods=["GET"])
            async def health(request: Request) -> JSONResponse:
                return JSONResponse(service.health())

            app: Any = server.streamable_http_app()
            if ring is not None:
                app.add_middleware(AccessControl, keys=ring, open_paths=("/health",))
            run_uvicorn(app, host=host, port=port, log_level=log_level)
        finally:
            service.close()

"""The REST API: :func:`create_app` builds a FastAPI app over one memory folder.

Routes (``{namespace}`` and ``{id}`` are single path segments, percent-encoded, so any
namespace or id the engine accepts can be named, ``/`` included)::

    GET  /health                                       liveness (no key needed)
    GET  /metrics                                      Prometheus metrics (an unscoped key)
    GET  /v1/namespaces                                the namespaces of the folder
    GET  /v1/namespaces/{namespace}                    inspect: folder, stats, config
    PUT  /v1/namespaces/{namespace}                    create it, empty (a stored turn does too)
    POST /v1/namespaces/{namespace}/turns              store turns (creates the namespace)
    POST /v1/namespaces/{namespace}/retrieve           rank memories, filters, the gate's decision
    POST /v1/namespaces/{namespace}/forget             remove for good (ids, speaker, time, where, everything)
    POST /v1/namespaces/{namespace}/update             change a turn (new id; history kept)
    POST /v1/namespaces/{namespace}/supersede          link two stored turns as versions
    POST /v1/namespaces/{namespace}/feedback           which memories an answer used (learned weights)
    GET  /v1/namespaces/{namespace}/episodes           episodes in order, paged
    GET  /v1/namespaces/{namespace}/memories/{id}      one memory's attributes
    GET  /v1/namespaces/{namespace}/memories/{id}/exists
    GET  /v1/namespaces/{namespace}/memories/{id}/history   its versions, when each held
    GET  /v1/namespaces/{namespace}/memories/{id}/inspect   links, and how a query ranks it
    GET  /v1/namespaces/{namespace}/stats
    POST /v1/namespaces/{namespace}/consolidate | verify | repair | save | archive | restore
    POST /v1/namespaces/{namespace}/freeze             refuse its writes (a 503) while it moves
    GET  /v1/namespaces/{namespace}/archived           the archived nodes
    GET  /v1/namespaces/{namespace}/export             JSONL (NDJSON), one turn per line
    GET  /v1/namespaces/{namespace}/overview | timeline; POST .../explain | forget/preview
                                                       the explorer's reads (:mod:`.explain`)
    GET  /ui/                                          the explorer page, with ``ui=True``

OpenAPI at ``/openapi.json``, docs at ``/docs``. Errors are
``{"error": {"type", "message", "status"}}`` with the engine's own message; the status of
each engine error is in :data:`.wire.ERRORS`. A client's mistake is never a 5xx::

    400  a bad value (InvalidInputError, NamespaceError, ConfigError)
    401  no valid API key                   403  the key may not use this namespace
    404  no such namespace or memory id     409  a reused id: that turn is already stored
    413  a body over MAX_BODY_BYTES         422  a wrong type, a body that fails the schema, the firewall
    503  retry (Retry-After): the memory is busy (MemoryLockedError) or its store failed

Request bodies are counted as they arrive, in every transfer encoding, and refused with
413 past the limit before anything parses them (:class:`.middleware.BodyLimit`). With API keys
(``api_key``, or ``keys`` bound to namespace patterns: :mod:`.access`), every route but
``/health`` and the docs needs ``X-API-Key: KEY`` or ``Authorization: Bearer KEY``, checked
on the headers before the body is read (:class:`.middleware.AccessControl`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote

from .._adapter_utils import require
from . import wire
from .access import AccessDeniedError, KeyRing, key_ring
from .middleware import (
    API_KEY_HEADER,
    MAX_BODY_BYTES,
    AccessControl,
    BodyLimit,
    ErrorResponse,
    RawSegments,
    error_json,
    key_matches,
    key_of,
)
from .rest_paths import namespace_of
from .service import MAX_PAGE, MemoryService
from .telemetry import METRICS_PATH, HttpMetrics

require("fastapi", "server")

from fastapi import APIRouter, Depends, FastAPI, Query, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from fastapi.security import APIKeyHeader  # noqa: E402
from starlette.exceptions import HTTPException  # noqa: E402

from .bodies import (  # noqa: E402
    ConsistencyOut,
    ConsolidationOut,
    EpisodesOut,
    ErrorOut,
    FeedbackIn,
    ForgetIn,
    FreezeIn,
    HealthOut,
    IdsIn,
    IdsOut,
    RemovedOut,
    RetrieveIn,
    RetrieveOut,
    SupersedeIn,
    TurnsIn,
    UpdateIn,
)

logger = logging.getLogger(__name__)

__all__ = ["API_KEY_HEADER", "MAX_BODY_BYTES", "AccessControl", "BodyLimit", "RawSegments", "create_app",
           "key_matches", "key_of"]


# ---------------------------------------------------------------------------------------
# errors (the request plumbing, raw path segments, body size and API keys, is in .middleware)
# ---------------------------------------------------------------------------------------
_ns = namespace_of


def _id(node_id: str) -> str:
    try:
        return unquote(node_id, errors="strict")
    except UnicodeDecodeError:
        from ..errors import InvalidInputError

        raise InvalidInputError("the memory id in the URL is not percent-encoded UTF-8") from None


#: How much of a refused value an error echoes back: characters of a string, items of a
#: list or object, levels of nesting.
_ECHO_CHARS, _ECHO_ITEMS, _ECHO_DEPTH = 200, 20, 6


def _echo(value: Any, depth: int = 0) -> Any:
    """A refused request's value as an error may echo it: JSON-encodable (``NaN`` and the
    infinities as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, since JSON has no
    such numbers; bytes and other objects as text) and small (long strings, long lists and
    objects, deep nesting cut), so that answering a client's mistake can neither fail nor
    send its body back."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (dict, list, tuple)):
        if depth >= _ECHO_DEPTH:
            return "..."
        if isinstance(value, dict):
            return {_echo(str(k), depth + 1): _echo(v, depth + 1) for k, v in list(value.items())[:_ECHO_ITEMS]}
        return [_echo(v, depth + 1) for v in value[:_ECHO_ITEMS]]
    text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return text if len(text) <= _ECHO_CHARS else f"{text[:_ECHO_CHARS]}... ({len(text)} characters)"


def _install_errors(app: FastAPI) -> None:
    from ..errors import SynapseError

    @app.exception_handler(SynapseError)
    async def synapse_error(request: Request, exc: SynapseError) -> JSONResponse:
        body = wire.error_to_wire(exc)
        status = body["error"]["status"]
        retry = wire.retry_after(exc)
        if status >= 500:
            (logger.warning if retry else logger.error)("%s %s failed: %s", request.method,
                                                        request.url.path, exc)
        return ErrorResponse(body, status_code=status,
                            headers={"Retry-After": str(retry)} if retry else None)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = _echo(list(exc.errors()))
        first = details[0] if details else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        message = f"{where}: {first.get('msg', 'invalid request')}" if where else first.get("msg", "invalid request")
        return ErrorResponse(error_json("RequestValidationError", message, 422, details=details),
                            status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return ErrorResponse(error_json("HTTPError", str(exc.detail), exc.status_code),
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("%s %s failed", request.method, request.url.path)
        return ErrorResponse(error_json("InternalError", f"internal error ({type(exc).__name__}); "
                                        "see the server log", 500), status_code=500)


_ERRORS_DOC = {status: {"model": ErrorOut} for status in (400, 404, 409, 413, 422, 503)}


# ---------------------------------------------------------------------------------------
# the app
# ---------------------------------------------------------------------------------------
def create_app(path: str | Path | None = None, *, service: MemoryService | None = None,
               embedder: Any = None, api_key: str | None = None, keys: KeyRing | None = None,
               mcp: bool = False, host: str = "127.0.0.1", ui: bool = False,
               **engine_kwargs: Any) -> FastAPI:
    """The REST API over the memory folder ``path`` (or over ``service``).

    Args:
        path: the memory folder this server owns (``None``: a temporary one).
        service: an existing :class:`MemoryService` instead of ``path``.
        embedder: the embedder of every namespace (default: the packaged MiniLM).
        api_key: when set, every route but ``/health`` and the docs needs it
            (``X-API-Key`` or Bearer), and it may use every namespace (one-user setups).
        keys: API keys bound to namespace patterns (:class:`~.access.KeyRing`, one per app
            or tenant), with or instead of ``api_key``.
        mcp: also serve the MCP tools over streamable HTTP at ``/mcp`` on the same
            memories (so REST clients and MCP agents share one memory).
        host: the address the server binds (the MCP endpoint's DNS-rebinding protection
            allows only localhost names when it is a loopback address).
        ui: also serve the explorer page at ``/ui/`` (:mod:`.ui`; it calls this API with
            the key its user types, so the key rules are the API's).
        **engine_kwargs: passed to every ``Synapse(...)`` (``config``, ...).
    """
    ring = key_ring(api_key, keys)
    svc = service if service is not None else MemoryService(path, embedder=embedder, **engine_kwargs)
    mcp_server = None
    if mcp:
        from .mcp import create_mcp_server

        mcp_server = create_mcp_server(svc, host=host, streamable_http_path="/mcp", keys=ring)
        mcp_app = mcp_server.streamable_http_app()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            if mcp_server is not None:
                async with mcp_server.session_manager.run():
                    yield
            else:
                yield
        finally:
            if service is None:
                svc.close()

    from .. import __version__

    app = FastAPI(title="SYNAPSE memory", version=__version__, lifespan=lifespan,
                  description=__doc__.split("\n\n", 1)[0] + " See docs/deployment.md.")
    app.state.service = svc
    telemetry = svc.enable_telemetry()
    _install_errors(app)

    security: list[Any] = []
    if ring is not None:
        header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False,
                              description="an API key of the server (or Authorization: Bearer)")

        def check_key(request: Request, _: Optional[str] = Depends(header)) -> None:
            """The key in the OpenAPI spec; :class:`AccessControl` checked it before the
            body was read, and this refuses any request that did not pass there."""
            if key_of(request) is None:
                raise HTTPException(401, "a valid API key is needed", headers={"WWW-Authenticate": "Bearer"})
        security = [Depends(check_key)]

    @app.get("/health", response_model=HealthOut, tags=["server"])
    def health() -> dict[str, Any]:
        """Liveness and a few counts; needs no key."""
        return svc.health()

    @app.get(METRICS_PATH, tags=["server"], dependencies=security,
             response_class=Response,
             responses={200: {"content": {"text/plain": {}}}, 401: {"model": ErrorOut},
                        403: {"model": ErrorOut}})
    def metrics(request: Request) -> Response:
        """Prometheus metrics of the whole server (:mod:`.telemetry`). With API keys it
        needs a key that may use every namespace (the counts span all tenants)."""
        key = key_of(request)
        if key is not None and not key.unscoped:
            raise AccessDeniedError(f"{key.rule()} only; the server's metrics need a key "
                                    f"for every namespace ('*')")
        body, content_type = telemetry.exposition()
        return Response(body, media_type=content_type)

    v1 = APIRouter(prefix="/v1", dependencies=security,
                   responses={401: {"model": ErrorOut}, 403: {"model": ErrorOut}, **_ERRORS_DOC})
    _routes(v1, svc)
    from .explain import router as explorer_routes

    v1.include_router(explorer_routes(svc))
    app.include_router(v1)
    if mcp_server is not None:
        app.router.routes.extend(mcp_app.routes)  # /mcp, run by the lifespan above

    # outermost last: the path as the router sees it, then the key, then the body
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    if ring is not None:
        app.add_middleware(AccessControl, keys=ring)
    app.add_middleware(RawSegments)
    if ui:  # outside the key check: a browser opens the page without a header
        from .ui import StaticUI

        app.add_middleware(StaticUI)
    # outermost: every request counted, the ones the middlewares above refuse included
    # (labelled by the routes' templates: the app's own, and the /v1 router's)
    labels = [r for r in app.router.routes if hasattr(r, "path")] + list(v1.routes)
    app.add_middleware(HttpMetrics, telemetry=telemetry, routes=labels)
    return app


def _routes(r: APIRouter, svc: MemoryService) -> None:
    tag = ["memory"]

    @r.get("/namespaces", tags=["server"])
    def namespaces(request: Request) -> dict[str, list[str]]:
        """The namespaces stored in this folder (those the API key may use)."""
        key = key_of(request)
        return {"namespaces": [ns for ns in svc.namespaces() if key is None or key.allows(ns)]}

    @r.get("/namespaces/{namespace}", tags=tag)
    def inspect_namespace(namespace: str) -> dict[str, Any]:
        """The namespace's folder, stats, config and embedder."""
        return svc.inspect(_ns(namespace))

    @r.put("/namespaces/{namespace}", tags=tag)
    def create(namespace: str) -> dict[str, Any]:
        """Create the namespace as an empty memory (nothing happens if it exists)."""
        name = _ns(namespace)
        return {"namespace": name, "created": svc.create(name)}

    @r.post("/namespaces/{namespace}/turns", response_model=IdsOut, tags=tag)
    def add_turns(namespace: str, body: TurnsIn) -> dict[str, Any]:
        """Store turns; returns their ids in order. A turn is durable when this returns.
        Pass your own ``id`` per turn to make retries safe (a reused id is a 409)."""
        turns = [t.model_dump(exclude_none=True) for t in body.turns]
        return {"ids": svc.add_turns(_ns(namespace), turns)}

    @r.post("/namespaces/{namespace}/retrieve", response_model=RetrieveOut, tags=tag)
    def retrieve(namespace: str, body: RetrieveIn) -> dict[str, Any]:
        """Rank memories for a query, with filters, and the uncertainty gate's decision
        and reason (``rejected``: memory holds nothing relevant)."""
        return svc.retrieve(_ns(namespace), body.query, body.k, kinds=tuple(body.kinds),
                            speakers=body.speakers, since=body.since, until=body.until,
                            where=body.where, config=body.config, as_of=body.as_of,
                            current_only=body.current_only, at=body.at)

    @r.post("/namespaces/{namespace}/forget", response_model=RemovedOut, tags=tag)
    def forget(namespace: str, body: ForgetIn) -> dict[str, Any]:
        """Remove episodes for good: by ids, speaker, time range, metadata, or everything."""
        return wire.forget_to_wire(svc.forget(_ns(namespace), body.ids, speaker=body.speaker,
                                              since=body.since, until=body.until, where=body.where,
                                              everything=body.everything))

    @r.post("/namespaces/{namespace}/feedback", tags=tag)
    def feedback(namespace: str, body: FeedbackIn) -> dict[str, Any]:
        """Usage feedback: the memories an answer to ``query`` used and those it did not
        (``Synapse.feedback``); returns what was learned."""
        return svc.feedback(_ns(namespace), body.query, body.used_ids, body.unused_ids,
                            alpha=body.alpha)

    @r.post("/namespaces/{namespace}/update", tags=tag)
    def update(namespace: str, body: UpdateIn) -> dict[str, str]:
        """Change a stored turn's text, metadata, speaker or time; returns its new id."""
        return {"id": svc.update(_ns(namespace), body.id, body.text, metadata=body.metadata,
                                 speaker=body.speaker, timestamp=body.timestamp,
                                 keep_history=body.keep_history)}

    @r.post("/namespaces/{namespace}/supersede", tags=tag)
    def supersede(namespace: str, body: SupersedeIn) -> dict[str, Any]:
        """Link two stored turns as versions (``new_id`` replaces ``old_id``); returns
        the history they now share."""
        return {"versions": svc.supersede(_ns(namespace), body.old_id, body.new_id)}

    @r.get("/namespaces/{namespace}/episodes", response_model=EpisodesOut, tags=tag)
    def episodes(namespace: str, offset: int = Query(0, ge=0), limit: int = Query(100, ge=1, le=MAX_PAGE),
                 include_archived: bool = True) -> dict[str, Any]:
        """The episodes in ingestion order, one page at a time (follow ``next_offset``)."""
        return svc.episodes(_ns(namespace), offset=offset, limit=limit, include_archived=include_archived)

    @r.get("/namespaces/{namespace}/memories/{id}", tags=tag)
    def get(namespace: str, id: str, include_archived: bool = False) -> dict[str, Any]:
        """One memory's attributes (404 if there is none)."""
        return svc.get(_ns(namespace), _id(id), include_archived=include_archived)

    @r.get("/namespaces/{namespace}/memories/{id}/exists", tags=tag)
    def exists(namespace: str, id: str) -> dict[str, bool]:
        """Whether the memory holds this id (active or archived)."""
        return {"exists": svc.contains(_ns(namespace), _id(id))}

    @r.get("/namespaces/{namespace}/memories/{id}/history", tags=tag)
    def history(namespace: str, id: str) -> dict[str, Any]:
        """The memory's versions, oldest first, each with ``valid_from`` and
        ``valid_until`` (epoch seconds; null while it holds)."""
        return {"versions": svc.history(_ns(namespace), _id(id))}

    @r.get("/namespaces/{namespace}/memories/{id}/inspect", tags=tag)
    def inspect_memory(namespace: str, id: str, query: Optional[str] = None) -> dict[str, Any]:
        """One memory: attributes, links in the graph and, with ``query``, its rank, score
        components and activation path for that query."""
        return svc.inspect(_ns(namespace), _id(id), query=query)

    @r.get("/namespaces/{namespace}/stats", tags=tag)
    def stats(namespace: str) -> dict[str, int]:
        """Counts of nodes and edges by kind, archived, pending turns, windows."""
        return svc.stats(_ns(namespace))

    @r.post("/namespaces/{namespace}/consolidate", response_model=ConsolidationOut, tags=tag)
    def consolidate(namespace: str) -> dict[str, Any]:
        """Consolidate every pending turn now."""
        return svc.consolidate(_ns(namespace))

    @r.post("/namespaces/{namespace}/verify", response_model=ConsistencyOut, tags=["operations"])
    def verify(namespace: str) -> dict[str, Any]:
        """Check that graph, vectors and indexes agree (changes nothing)."""
        return svc.verify(_ns(namespace))

    @r.post("/namespaces/{namespace}/repair", response_model=ConsistencyOut, tags=["operations"])
    def repair(namespace: str) -> dict[str, Any]:
        """Bring the stores back into agreement, then verify."""
        return svc.repair(_ns(namespace))

    @r.post("/namespaces/{namespace}/save", tags=["operations"])
    def save(namespace: str) -> dict[str, int]:
        """Write a snapshot now; returns its version."""
        return {"version": svc.save(_ns(namespace))}

    @r.post("/namespaces/{namespace}/freeze", tags=["operations"])
    def freeze(namespace: str, body: FreezeIn) -> dict[str, Any]:
        """Refuse (``frozen``: true) or accept again the namespace's writes (a 503 to
        retry meanwhile; reads are served): what a move to another shard does."""
        name = _ns(namespace)
        return {"namespace": name, "frozen": body.frozen, "was_frozen": svc.freeze(name, body.frozen)}

    @r.post("/namespaces/{namespace}/archive", response_model=IdsOut, tags=["operations"])
    def archive(namespace: str, body: IdsIn) -> dict[str, Any]:
        """Move memories out of the active graph (restorable)."""
        return {"ids": svc.archive(_ns(namespace), body.ids)}

    @r.get("/namespaces/{namespace}/archived", tags=["operations"])
    def archived(namespace: str) -> list[dict[str, Any]]:
        """The archived nodes (restorable)."""
        return svc.archived(_ns(namespace))

    @r.post("/namespaces/{namespace}/restore", response_model=IdsOut, tags=["operations"])
    def restore(namespace: str, body: IdsIn) -> dict[str, Any]:
        """Bring archived memories back."""
        return {"ids": svc.restore(_ns(namespace), body.ids)}

    @r.get("/namespaces/{namespace}/export", tags=["operations"], response_class=StreamingResponse,
           responses={200: {"content": {"application/x-ndjson": {}},
                            "description": "one turn per line (see synapse_integrations.server.transfer)"}})
    def export(namespace: str, with_vectors: bool = False) -> StreamingResponse:
        """Every episode as JSONL, in ingestion order (a backup; ``synapse import`` reads it)."""
        lines = svc.export(_ns(namespace), with_vectors=with_vectors)
        return StreamingResponse((json.dumps(line, ensure_ascii=False) + "\n" for line in lines),
                                 media_type="application/x-ndjson")

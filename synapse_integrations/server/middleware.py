"""The request plumbing of the HTTP servers, as plain ASGI middleware (Starlette's response
classes only; no FastAPI): :class:`RawSegments` (a namespace or id holding ``/`` stays one
path segment), :class:`AccessControl` (API keys and their namespaces, decided on the
headers) and :class:`BodyLimit` (the body counted as it arrives). :mod:`.rest` stacks them
in that order, outermost first, so a request is refused for its key (401) or namespace
(403) before one byte of its body is read, and for its size (413) before anything parses
it; ``synapse serve mcp --transport http`` uses :class:`AccessControl` on its own.
"""

from __future__ import annotations

import collections
import json
from typing import Any
from urllib.parse import unquote

from .._adapter_utils import require
from . import wire
from .access import STATE_KEY, AccessDeniedError, ApiKey, KeyRing, presented_key

require("starlette", "server")

from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402

__all__ = ["API_KEY_HEADER", "MAX_BODY_BYTES", "AccessControl", "BodyLimit", "ErrorResponse", "RawSegments", "error_json",
           "key_matches", "key_of"]

API_KEY_HEADER = "X-API-Key"
#: Requests with a larger body are refused with 413 (an export with vectors of a big
#: memory is imported in batches by ``synapse import``).
MAX_BODY_BYTES = 32 * 1024 * 1024
_PREFIX = "/v1/namespaces/"
_OPEN_PATHS = ("/health", "/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect")


class ErrorResponse(JSONResponse):
    """An error's JSON body, ASCII-escaped: any text an error carries (an engine message,
    an echoed value with a lone surrogate) encodes, so answering a mistake cannot fail."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


class RawSegments:
    """Route ``/v1/namespaces/...`` on the raw (still percent-encoded) path, so that a
    namespace or an id holding ``/`` stays one segment; the handlers decode it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(_PREFIX):
            raw = scope.get("raw_path")
            if raw:
                path = raw.split(b"?", 1)[0].decode("latin-1")
                if path.startswith(_PREFIX):
                    scope = {**scope, "path": path}
        await self.app(scope, receive, send)


class BodyLimit:
    """Read each request's body before the app sees it, counting the bytes as they arrive
    (whatever the framing: ``Content-Length`` or chunked), and refuse it with 413 the moment
    it is over ``limit`` bytes; the rest of the body is never read. The app then gets the
    body, replayed, so that no parser, handler or per-request work ever runs on a body
    over the limit, and the server holds at most ``limit`` bytes of one request."""

    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._refuse(scope, receive, send)
            return
        body: collections.deque[dict[str, Any]] = collections.deque()
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away mid-body
                return
            size += len(message.get("body", b""))
            if size > self.limit:
                body.clear()
                await self._refuse(scope, receive, send)
                return
            body.append(message)
            if not message.get("more_body", False):
                break

        async def replay() -> dict[str, Any]:
            return body.popleft() if body else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: dict, receive: Any, send: Any) -> None:
        message = (f"the request body is over the limit of {self.limit} bytes ({self.limit / 2**20:g} MiB); "
                   "send fewer turns per request (synapse import sends batches: --batch)")
        await ErrorResponse(error_json("PayloadTooLarge", message, 413), status_code=413,
                           headers={"Connection": "close"})(scope, receive, send)


def _path_namespace(path: str) -> str | None:
    """The namespace a ``/v1/namespaces/{namespace}...`` path names (its raw segment,
    decoded), as the router will route it; None for other paths."""
    if not path.startswith(_PREFIX):
        return None
    segment = path[len(_PREFIX):].split("/", 1)[0]
    return unquote(segment, errors="replace") if segment else None


class AccessControl:
    """The API keys of a :class:`~.access.KeyRing`: every path but the open ones
    (``/health``, the docs) needs a known key (401 otherwise), and a path that names a
    namespace a key whose patterns allow it (403 naming the rule otherwise); both are
    decided on the headers, before the body is read. The request's key is left in the
    scope's state (:data:`~.access.STATE_KEY`) for the handlers and the MCP tools."""

    def __init__(self, app: Any, keys: KeyRing, open_paths: tuple[str, ...] = _OPEN_PATHS) -> None:
        self.app, self.keys, self.open_paths = app, keys, open_paths

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in self.open_paths:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
            key = self.keys.find(presented_key(headers))
            if key is None:
                await ErrorResponse(error_json("Unauthorized", "a valid API key is needed "
                                               f"({API_KEY_HEADER} header or Bearer token)", 401),
                                   status_code=401, headers={"WWW-Authenticate": "Bearer",
                                                             "Connection": "close"})(scope, receive, send)
                return
            namespace = _path_namespace(scope["path"])
            if namespace is not None and not key.allows(namespace):
                body = wire.error_to_wire(AccessDeniedError(f"{key.rule()} only, not {namespace[:200]!r}"))
                await ErrorResponse(body, status_code=403, headers={"Connection": "close"})(scope, receive, send)
                return
            scope.setdefault("state", {})[STATE_KEY] = key
        await self.app(scope, receive, send)


def key_of(request: Request) -> ApiKey | None:
    """The API key :class:`AccessControl` found for ``request`` (None on a keyless server)."""
    return (request.scope.get("state") or {}).get(STATE_KEY)


def key_matches(headers: Any, api_key: str) -> bool:
    """``X-API-Key: KEY`` or ``Authorization: Bearer KEY`` is ``api_key`` (compared in
    constant time)."""
    return KeyRing.single(api_key).find(presented_key(
        {k.lower(): v for k, v in headers.items()} if hasattr(headers, "items") else headers)) is not None


def error_json(kind: str, message: str, status: int, **extra: Any) -> dict[str, Any]:
    """The body of every error: ``{"error": {"type", "message", "status", ...}}``."""
    return {"error": {"type": kind, "message": message, "status": status, **extra}}

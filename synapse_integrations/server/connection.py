"""The HTTP half of :class:`~.client.RemoteMemory`: how a request reaches the server.

:class:`ServerConnection` is a mixin of ``RemoteMemory``: it sends one request (a
percent-encoded path, a strict JSON body), tries again a request that never left
(connection refused: 0.25 s apart, doubling), turns an unreachable or silent server into a
:class:`~synapse_integrations.errors.StorageError` and an error answer back into the
engine's own error (:func:`.wire.error_from_wire`; a refused key is
:class:`AuthenticationError`), creates a namespace the first call needs (``create=True``),
and keeps one ``httpx.AsyncClient`` per event loop for the async twins.
"""

from __future__ import annotations

import asyncio
import json as _json
import time
from typing import Any
from urllib.parse import quote

from .._adapter_utils import require
from ..errors import (
    InvalidInputError,
    StorageError,
    SynapseError,
    UnknownNamespaceError,
)
from . import wire

httpx = require("httpx", "server")

__all__ = ["AuthenticationError", "ServerConnection", "segment"]


class AuthenticationError(SynapseError, PermissionError):
    """The server wants an API key, and the one given (if any) is not it."""


_JSON = {"content-type": "application/json"}


def segment(value: str) -> str:
    """One percent-encoded path segment ('/' and dots too: '.' and '..' are not paths)."""
    return quote(value, safe="").replace(".", "%2E")


def _body(json_body: Any) -> bytes | None:
    """The request body as strict JSON (NaN, infinities and non-JSON values refused here,
    as the engine refuses them)."""
    if json_body is None:
        return None
    try:
        return _json.dumps(json_body, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"the request is not JSON-serialisable (metadata and filters "
                                f"must be plain JSON): {exc}") from None


class ServerConnection:
    """Sending requests to one namespace of a server (see the module docstring).

    ``RemoteMemory.__init__`` sets what this reads: ``base_url``, ``_prefix`` (the
    namespace's path), ``_client`` (an ``httpx.Client``), ``_headers``, ``_timeout``,
    ``_retries``, ``_transport``, ``_aclients`` and ``_alock`` (the async clients per loop),
    ``_closed`` and ``_create``.
    """

    def _url(self, op: str) -> str:
        return f"{self._prefix}/{op}" if op else self._prefix

    @staticmethod
    def _answer(response: Any) -> Any:
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if response.status_code == 401:
            raise AuthenticationError(f"the memory server refused the API key: "
                                      f"{wire.error_from_wire(body, 401)}")
        if response.status_code >= 400:
            raise wire.error_from_wire(body, response.status_code)
        return body

    def _fail(self, exc: Exception) -> StorageError:
        if isinstance(exc, httpx.TimeoutException):
            return StorageError(f"the memory server at {self.base_url} did not answer within "
                                f"{self._timeout:g} s ({type(exc).__name__})")
        return StorageError(f"cannot reach the memory server at {self.base_url}: {exc}")

    def _call(self, method: str, op: str, *, json: Any = None, params: Any = None, url: str | None = None) -> Any:
        try:
            return self._send(method, op, json=json, params=params, url=url)
        except UnknownNamespaceError:
            if not self._create or url is not None:
                raise
            self._send("PUT", "")  # the namespace is a memory from now on, as a local one would be
            return self._send(method, op, json=json, params=params, url=url)

    async def _acall(self, method: str, op: str, *, json: Any = None, params: Any = None) -> Any:
        try:
            return await self._asend(method, op, json=json, params=params)
        except UnknownNamespaceError:
            if not self._create:
                raise
            await self._asend("PUT", "")
            return await self._asend(method, op, json=json, params=params)

    def _send(self, method: str, op: str, *, json: Any = None, params: Any = None, url: str | None = None) -> Any:
        if self._closed:
            raise StorageError("this RemoteMemory is closed")
        content = _body(json)
        delay = 0.25
        for attempt in range(self._retries + 1):
            try:
                return self._answer(self._client.request(method, url or self._url(op), content=content,
                                                         params=params, headers=_JSON if content else None))
            except httpx.ConnectError as exc:  # never sent: safe to try again
                if attempt == self._retries:
                    raise self._fail(exc) from None
            except httpx.TransportError as exc:
                raise self._fail(exc) from None
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _aclient(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._alock:
            client = self._aclients.get(loop)
            if client is None:
                client = httpx.AsyncClient(base_url=self.base_url, headers=self._headers,
                                           timeout=self._timeout)
                self._aclients[loop] = client
            return client

    async def _asend(self, method: str, op: str, *, json: Any = None, params: Any = None) -> Any:
        if self._closed:
            raise StorageError("this RemoteMemory is closed")
        if self._transport is not None:  # a sync test transport: go through a thread
            return await asyncio.to_thread(self._send, method, op, json=json, params=params)
        content = _body(json)
        delay = 0.25
        for attempt in range(self._retries + 1):
            try:
                response = await self._aclient().request(method, self._url(op), content=content, params=params,
                                                         headers=_JSON if content else None)
                return self._answer(response)
            except httpx.ConnectError as exc:
                if attempt == self._retries:
                    raise self._fail(exc) from None
            except httpx.TransportError as exc:
                raise self._fail(exc) from None
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

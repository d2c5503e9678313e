"""The handle :meth:`EnginePool.get <synapse_integrations.pool.EnginePool.get>` returns:
:class:`PooledMemory`, one namespace's memory taken from its pool for each call."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from .core.engine import Synapse

__all__ = ["PooledMemory"]


class Pool(Protocol):
    """What a handle needs of its pool (:class:`~synapse_integrations.pool.EnginePool`)."""

    @property
    def path(self) -> Path: ...

    def lease(self, namespace: str) -> AbstractContextManager[Any]: ...

    def alease(self, namespace: str) -> AbstractAsyncContextManager[Any]: ...

    def close_namespace(self, namespace: str) -> None: ...

    def drop(self, namespace: str) -> None: ...


class PooledMemory:
    """What :meth:`EnginePool.get` returns: the memory of one namespace, taken from the
    pool for each call. Every method of :class:`~synapse_integrations.Synapse` works on it
    (async twins included: the engine is held until the coroutine is done); attributes
    (``config``, ``graph``, ...) are read from the open engine. An engine the pool closed
    between two calls is reopened by the next one, so a handle never goes stale; hold the
    engine itself across calls with :meth:`EnginePool.lease`.

    ``close()`` closes the namespace's engine in the pool (once no caller holds it; the
    next call reopens it) and ``drop()`` erases the namespace (:meth:`EnginePool.drop`).
    Subscriptions (``subscribe``) are the open engine's and end when the pool closes it.

    >>> mem = pool.get("u1")                                                # doctest: +SKIP
    >>> mem.add_turn("I moved to Lisbon.")                                  # doctest: +SKIP
    >>> mem.retrieve("Where do I live?").items[0].text                      # doctest: +SKIP
    'I moved to Lisbon.'
    """

    __slots__ = ("_pool", "_key", "namespace")

    def __init__(self, pool: Pool, key: str, namespace: str) -> None:
        self._pool = pool
        self._key = key  # what the caller named it (a NamespaceKey stays one)
        self.namespace = namespace  #: the engine namespace (resolved, see EnginePool.resolve)

    @property
    def path(self) -> Path:
        """The pool's folder (every engine of the pool lives under it)."""
        return self._pool.path

    @property
    def closed(self) -> bool:
        """Always False: a handle reopens its engine on its next call."""
        return False

    def close(self) -> None:
        """Close this namespace's engine in the pool (it reopens on the next call)."""
        self._pool.close_namespace(self._key)

    def drop(self) -> None:
        """Erase this namespace for good (see :meth:`EnginePool.drop`)."""
        self._pool.drop(self._key)

    @contextmanager
    def inspect_retrieval(self) -> Iterator[Any]:
        """:meth:`Synapse.inspect_retrieval` with the engine held for the whole block."""
        with self._pool.lease(self._key) as engine, engine.inspect_retrieval() as steps:
            yield steps

    def __enter__(self) -> PooledMemory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PooledMemory({self.namespace!r}, path={str(self._pool.path)!r})"

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        member = inspect.getattr_static(Synapse, attr, None)
        pool, key = self._pool, self._key
        if inspect.iscoroutinefunction(member):
            @functools.wraps(member)
            async def call_async(*args: Any, **kwargs: Any) -> Any:
                async with pool.alease(key) as engine:
                    return await getattr(engine, attr)(*args, **kwargs)
            return call_async
        if inspect.isfunction(member):
            @functools.wraps(member)
            def call(*args: Any, **kwargs: Any) -> Any:
                with pool.lease(key) as engine:
                    return getattr(engine, attr)(*args, **kwargs)
            return call
        with pool.lease(key) as engine:
            return getattr(engine, attr)

"""One memory per user, thread or session: :class:`EnginePool` (bounded, with leases).

Each namespace's engine opens on first use, and the least recently used one that no caller
holds closes when more than ``max_open`` are open; what closed engines left loaded in the
embedded Chroma is freed by restarting it (:mod:`.pool_slots`). The typed names the
adapters give their memories are built in :mod:`.namespace_keys`.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from .core.state.validation import namespace_dirname
from .errors import InvalidInputError, InvalidTypeError

# namespace_key and typed_key: public API here too (synapse_integrations.pool, docs/safety.md)
from .namespace_keys import NamespaceKey, legacy_name, namespace_key, typed_key
from .pool_slots import CLOSING, OPEN, EngineSlots, Slot
from .pooled import PooledMemory

__all__ = ["DEFAULT_MAX_OPEN", "EnginePool", "PooledMemory", "namespace_key", "typed_key"]

#: Engines an :class:`EnginePool` keeps open at most (least recently used closed first).
DEFAULT_MAX_OPEN = 64


class EnginePool(EngineSlots):
    """One :class:`~synapse_integrations.Synapse` per namespace, all under one ``path``.

    Adapters whose memory namespace is chosen per run (LangGraph nodes, the store, agent
    middleware, chat histories) take a pool; each namespace's engine is opened on first
    use. At most ``max_open`` engines stay open: opening one more closes (and saves) the
    least recently used *that no caller holds*, which reopens on its next use, so runs
    with ever new thread ids cannot pile up open engines and Chroma collections.

    Two ways to use an engine, both safe while other threads open and evict others:

    - ``with pool.lease(ns) as mem:`` holds the engine itself for the block: it is not
      closed while the block runs (eviction skips it; the pool may exceed ``max_open``
      for as long as callers hold more engines than that).
    - ``pool.get(ns)`` returns a :class:`PooledMemory`, a handle that leases the engine
      for each call (async twins included), so an engine evicted between two calls is
      reopened by the next one instead of answering "this Synapse memory is closed".

    A namespace whose engine is being closed is reopened only once that close is done
    (never a second live engine, never :class:`~synapse_integrations.errors.MemoryLockedError`
    from the pool's own eviction).

    What a closed engine held is freed: its graph and matrices with the engine, and its
    Chroma indexes (with their open files and memory) by restarting the folder's embedded
    Chroma: Chroma keeps every collection's index it loaded until the last client of the
    folder closes (see :func:`~synapse_integrations.storage.chroma.close_client`). Once
    ``recycle_after`` engines were closed, the pool waits for the callers in flight, closes
    the open engines and so lets Chroma stop; engines reopen on their next use. Loaded
    indexes, descriptors and memory are thus bounded by ``max_open + recycle_after``
    namespaces, not by the namespaces ever opened. The pool also keeps below the size of
    Chroma's own index cache (a fifth of ``ulimit -n``), whose evictions the pinned Chroma
    cannot load back: with a low limit ``max_open`` is lowered, with a warning. Engines on
    a Chroma client passed in (``client=``: a server's) are never restarted.

    >>> from synapse_integrations import EnginePool
    >>> from synapse_integrations.pool import namespace_key
    >>> pool = EnginePool("./memory")                                      # doctest: +SKIP
    >>> pool.get(namespace_key("agent", "user_id", 42)).add_turn("I like tea")  # doctest: +SKIP
    >>> with pool.lease("my-own-notes") as mem:                            # doctest: +SKIP
    ...     mem.add_turn("a namespace the application names")
    ...     mem.retrieve("notes")
    >>> pool.close()                                                       # doctest: +SKIP

    Args:
        path: folder of the embedded Chroma and the snapshots; ``None`` for a temporary one
            (removed by :meth:`close`).
        max_open: engines kept open at most (least recently used closed first).
        recycle_after: closed engines whose indexes may stay loaded before the embedded
            Chroma is restarted (default: ``max_open``).
        **engine_kwargs: passed to every ``Synapse(...)`` (``embedder``, ``config``,
            ``client``, ``extractor``, ...).
    """

    def __init__(self, path: str | Path | None = None, *, max_open: int = DEFAULT_MAX_OPEN,
                 recycle_after: int | None = None, **engine_kwargs: Any) -> None:
        for what, value in (("max_open", max_open), ("recycle_after", recycle_after)):
            if value is None and what == "recycle_after":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{what} must be an int >= 1, got {value!r}")
        self._owns_path = path is None
        self.path = Path(tempfile.mkdtemp(prefix="synapse-pool-")) if path is None else Path(path)
        self.max_open = max_open
        self.recycle_after = recycle_after
        self._kwargs = dict(engine_kwargs)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._slots: OrderedDict[str, Slot] = OrderedDict()  # least recently used first
        # the namespaces the current thread or task holds (a context variable: it follows
        # a call into asyncio.to_thread), so that a caller holding one never waits for a
        # restart that waits for it
        self._held: ContextVar[tuple[str, ...]] = ContextVar(f"synapse_pool_{id(self)}", default=())
        self._stale = 0  # engines closed since the embedded Chroma last started
        self._draining = False
        self._warned: set[str] = set()
        self.restarts = 0  #: times the pool restarted the embedded Chroma
        self._open_limit, self._stale_limit, self._resident_limit = self._compute_limits()

    # -- namespaces ----------------------------------------------------------------------
    def _exists(self, name: str) -> bool:
        return name in self._slots or (self.path / "namespaces" / namespace_dirname(name)).is_dir()

    def resolve(self, namespace: str) -> str:
        """The engine namespace ``namespace`` opens: a typed key (:func:`namespace_key`) as
        is, or its pre-typed-keys name when only that one holds a memory; a plain string
        as is (one starting with ``@``, the adapters' space, is refused)."""
        if isinstance(namespace, NamespaceKey):
            with self._lock:
                legacy = legacy_name(namespace)
                if legacy is not None and not self._exists(namespace) and self._exists(legacy):
                    return legacy
                return str(namespace)
        if not isinstance(namespace, str):
            raise InvalidTypeError(f"namespace must be a str, got {type(namespace).__name__}")
        if namespace.startswith("@"):
            raise InvalidInputError(
                f"namespaces starting with '@' are adapter keys: build them with "
                f"synapse_integrations.pool.namespace_key(adapter, kind, value), got {namespace!r}")
        return namespace

    # -- leases --------------------------------------------------------------------------
    def _serves_own(self) -> bool:
        """A subclass serving its own memories through :meth:`get` (``RemotePool``)
        leases them as ``get`` returns them."""
        return type(self).get is not EnginePool.get

    @contextmanager
    def lease(self, namespace: str) -> Iterator[Any]:
        """Hold the engine of ``namespace`` (opened, or created, if need be) for a block:
        no eviction closes it meanwhile.

        >>> with pool.lease("u1") as mem:                                  # doctest: +SKIP
        ...     mem.add_turn("I moved to Lisbon.")
        ...     mem.retrieve("Where do I live?")
        """
        if self._serves_own():
            yield self.get(namespace)
            return
        name = self.resolve(namespace)
        with self._leased(name) as engine:
            yield engine

    @contextmanager
    def _leased(self, name: str) -> Iterator[Any]:
        held = self._held.get()
        slot = self._acquire(name, nested=bool(held))
        self._held.set(held + (name,))
        try:
            yield slot.engine
        finally:
            self._held.set(held)
            self._release(slot, nested=bool(held))

    @asynccontextmanager
    async def alease(self, namespace: str) -> AsyncIterator[Any]:
        """Async twin of :meth:`lease`: opening and closing engines run on a worker thread;
        a cancelled wait still lets go of the engine it got.

        >>> async with pool.alease("u1") as mem:                           # doctest: +SKIP
        ...     await mem.aretrieve("Where do I live?")
        """
        if self._serves_own():
            yield self.get(namespace)
            return
        async with self._aleased(self.resolve(namespace)) as engine:
            yield engine

    @asynccontextmanager
    async def _aleased(self, name: str) -> AsyncIterator[Any]:
        held = self._held.get()
        loop = asyncio.get_running_loop()
        acquiring = loop.run_in_executor(None, functools.partial(self._acquire, name, nested=bool(held)))
        try:
            slot = await asyncio.shield(acquiring)
        except asyncio.CancelledError:
            def let_go(fut: asyncio.Future) -> None:
                if not fut.cancelled() and fut.exception() is None:
                    loop.run_in_executor(None, functools.partial(self._release, fut.result(),
                                                                 nested=bool(held)))
            acquiring.add_done_callback(let_go)
            raise
        self._held.set(held + (name,))
        try:
            yield slot.engine
        finally:
            self._held.set(held)
            await asyncio.shield(loop.run_in_executor(
                None, functools.partial(self._release, slot, nested=bool(held))))

    def get(self, namespace: str) -> PooledMemory:
        """A handle on the memory of ``namespace`` (opened, or created, now): a
        :class:`PooledMemory`, which takes the engine from the pool for each call. Hold
        the engine itself for several calls with :meth:`lease`."""
        name = self.resolve(namespace)
        with self._leased(name):
            pass
        return PooledMemory(self, namespace, name)

    def close_namespace(self, namespace: str) -> None:
        """Close (and save) the engine of ``namespace`` once no caller holds it; it
        reopens on its next use (:meth:`PooledMemory.close`)."""
        if self._serves_own():
            self.get(namespace).close()
            return
        name = self.resolve(namespace)
        if name in self._held.get():
            raise InvalidInputError(f"cannot close the memory {name!r} inside a lease of it")
        with self._cond:
            while True:
                slot = self._slots.get(name)
                if slot is None:
                    return
                if slot.state == OPEN and not slot.refs:
                    slot.state = CLOSING
                    break
                self._cond.wait()
        self._close_slots([slot])

    def drop(self, namespace: str) -> None:
        """Erase the memory of ``namespace`` for good (see :meth:`Synapse.drop`): its
        Chroma collections and their rows, its snapshots and folder. Others stay. Waits
        for the callers holding it."""
        if self._serves_own():  # a RemotePool: its memories, keyed by namespace
            engine = self.get(namespace)
            with self._lock:
                getattr(self, "_engines", {}).pop(getattr(engine, "namespace", namespace), None)
            engine.drop()
            return
        name = self.resolve(namespace)
        held = self._held.get()
        if name in held:
            raise InvalidInputError(f"cannot drop the memory {name!r} inside a lease of it")
        slot = self._acquire(name, nested=bool(held))
        with self._cond:
            while slot.refs > 1:
                self._cond.wait()
            slot.refs, slot.state = 0, CLOSING
        try:
            slot.engine.drop()
        finally:
            with self._cond:
                if self._slots.get(name) is slot:
                    del self._slots[name]
                self._stale += 1
                self._cond.notify_all()

    def opened(self) -> list[str]:
        """Namespaces whose engine is open in this pool."""
        with self._lock:
            return sorted(n for n, s in self._slots.items() if s.state == OPEN)

    def namespaces(self) -> list[str]:
        """Namespaces stored under ``path`` plus those opened in this process."""
        from .core.engine import Synapse

        with self._lock:
            opened = set(self._slots)
        client = self._kwargs.get("client")
        if client is not None:
            from .storage.chroma import list_namespaces

            stored = set(list_namespaces(client))
        else:
            stored = set(Synapse.namespaces(self.path)) if (self.path / "chroma").exists() else set()
        return sorted(opened | stored)

    def save(self) -> None:
        """Snapshot every open engine."""
        with self._cond:
            slots = [s for s in self._slots.values() if s.state == OPEN]
            for slot in slots:
                slot.refs += 1
        try:
            for slot in slots:
                if not slot.engine.closed:
                    slot.engine.save()
        finally:
            with self._cond:
                for slot in slots:
                    slot.refs -= 1
                self._cond.notify_all()

    def close(self, *, timeout: float = 60.0) -> None:
        """Close (and snapshot) every open engine, once the callers holding one let go
        (at most ``timeout`` seconds; then they are closed anyway); a temporary pool is
        deleted. The pool can be used again afterwards (engines reopen on use)."""
        held = self._held.get()
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._draining:  # a restart in flight finishes first
                self._cond.wait()
            self._draining = True
            victims = self._drain(lambda s: bool(s.refs and not held) or s.state != OPEN,
                                  deadline=deadline)
        try:
            self._close_slots(victims)
        finally:
            with self._cond:
                self._stale = 0
                self._draining = False
                self._cond.notify_all()
            if self._owns_path:
                shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> EnginePool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

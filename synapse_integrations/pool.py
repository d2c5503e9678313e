"""One memory per user, thread or session: :class:`EnginePool`, and the typed namespace
keys every adapter builds with :func:`namespace_key`.

Adapters name a memory from strings a client chooses (a LangGraph ``thread_id``, a chat
``session_id``, a store namespace). So that no such string can name another adapter's
memory, or another kind of key's, each adapter key is **typed**: the adapter, the key's
kind and the escaped value, ``"@<adapter>:<kind>:<value>"``. Whatever the value holds
(``:``, ``=``, ``@``, control characters), the adapter and kind in front are fixed by the
adapter, so ``@history:session:...`` can never be ``@agent:user_id:alice``. Plain strings
passed to :meth:`EnginePool.get` are the application's own names; they may not start
with ``@`` (that space is the adapters').

>>> namespace_key("agent", "user_id", "alice")
'@agent:user_id:alice'
>>> namespace_key("history", "session", "user_id=alice")
'@history:session:user_id=alice'
>>> namespace_key("agent", "user_id", 42) == namespace_key("agent", "user_id", "42")
True
>>> parse_namespace_key(namespace_key("store", "store", "memories.a\\nb"))
('store', 'store', 'memories.a\\nb')
>>> namespace_from_configurable({"thread_id": "t1", "user_id": "u7"}, ("user_id", "thread_id"))
'@agent:user_id:u7'
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from .core.state.validation import CONTROL_RE, namespace_dirname, utf8_ok, validate_namespace
from .errors import InvalidInputError, InvalidTypeError, NamespaceError
from .pooled import PooledMemory

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_OPEN", "EnginePool", "NamespaceKey", "PooledMemory", "escape_value",
           "namespace_from_configurable", "namespace_key", "parse_namespace_key", "typed_key",
           "unescape_value"]

#: Engines an :class:`EnginePool` keeps open at most (least recently used closed first).
DEFAULT_MAX_OPEN = 64

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_KEY_RE = re.compile(r"^@([A-Za-z_][A-Za-z0-9_.-]{0,63}):([A-Za-z_][A-Za-z0-9_.-]{0,63}):(.+)$", re.S)
_ESCAPE_RE = re.compile(r"%|" + CONTROL_RE.pattern[1:-1].join("[]") + r"|[\ud800-\udfff]")


class NamespaceKey(str):
    """An engine namespace built by :func:`namespace_key` (a ``str``): the only strings
    :meth:`EnginePool.get` accepts in the adapters' ``@`` space."""

    __slots__ = ()


def escape_value(value: str) -> str:
    """``value`` with ``%``, control characters and lone surrogates percent-encoded
    (printable, and reversible by :func:`unescape_value`)."""
    return _ESCAPE_RE.sub(lambda m: "".join(f"%{b:02X}" for b in
                                            m.group().encode("utf-8", "surrogatepass")), value)


def unescape_value(value: str) -> str:
    """The inverse of :func:`escape_value`."""
    return re.sub(r"(%[0-9A-F]{2})+", lambda m: bytes.fromhex(m.group().replace("%", ""))
                  .decode("utf-8", "surrogatepass"), value)


def namespace_key(adapter: str, kind: str, value: str | int | uuid.UUID) -> NamespaceKey:
    """The engine namespace of an adapter's key (see the module docstring).

    ``adapter`` and ``kind`` are names the adapter fixes (letters, digits, ``_.-``);
    ``value`` is what the client sent: a non-blank ``str``, an ``int`` (``42`` and
    ``"42"`` name the same memory: one user id, whichever way a client typed it) or a
    ``uuid.UUID`` (its canonical string). Anything else is refused rather than turned into
    a string that might alias another (``True``, ``1.0``, an object's repr)."""
    for what, name in (("adapter", adapter), ("kind", kind)):
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise InvalidInputError(f"namespace key {what} must be a name of letters, digits and "
                                    f"'_.-', got {name!r}")
    if isinstance(value, bool) or not isinstance(value, (str, int, uuid.UUID)):
        raise InvalidTypeError(f"a {kind} must be a str, an int or a UUID, got "
                               f"{type(value).__name__}")
    text = value if isinstance(value, str) else str(value)
    if not text.strip():
        raise InvalidInputError(f"a {kind} must not be empty or whitespace")
    key = f"@{adapter}:{kind}:{escape_value(text)}"
    try:
        return NamespaceKey(validate_namespace(key))
    except NamespaceError as exc:
        raise NamespaceError(f"the {kind} {text[:40]!r}... is too long for a memory name: "
                             f"{exc}") from None


def parse_namespace_key(namespace: str) -> tuple[str, str, str] | None:
    """``(adapter, kind, value)`` of a namespace built by :func:`namespace_key`, else None."""
    m = _KEY_RE.match(namespace)
    return None if m is None else (m.group(1), m.group(2), unescape_value(m.group(3)))


def typed_key(namespace: str) -> NamespaceKey:
    """A key :func:`namespace_key` built, received as plain text (a server's request), as a
    :class:`NamespaceKey` again; :class:`InvalidInputError` unless ``namespace_key`` builds
    exactly this string (so no text can name a key the adapters would not build).

    >>> typed_key("@agent:user_id:alice") == namespace_key("agent", "user_id", "alice")
    True
    """
    parsed = parse_namespace_key(namespace) if isinstance(namespace, str) else None
    key = None
    if parsed is not None:
        try:
            key = namespace_key(*parsed)
        except (InvalidInputError, InvalidTypeError):
            key = None
    if key is None or key != namespace:
        raise InvalidInputError(f"{str(namespace)[:80]!r} is not an adapter key "
                                f"'@<adapter>:<kind>:<value>' as namespace_key builds it")
    return key


def _legacy_name(key: str) -> str | None:
    """The name the same key had before typed keys (0.1.0): ``user_id=alice`` for the
    agent adapters, ``<prefix>:<labels>`` for the LangGraph store. Memories stored under
    it stay readable (:meth:`EnginePool.get` opens them when the typed one does not
    exist). Chat histories had the raw session id: they are not aliased, since that is
    the string that collided."""
    parsed = parse_namespace_key(key)
    if parsed is None:
        return None
    adapter, kind, value = parsed
    name = {"agent": f"{kind}={value}", "store": f"{kind}:{value}"}.get(adapter)
    if name is None or not utf8_ok(name) or CONTROL_RE.search(name) or len(name) > 256:
        return None
    return name


def namespace_from_configurable(configurable: Mapping[str, Any] | None,
                                keys: Sequence[str], *, default: str | None = None) -> str:
    """The memory namespace for a run: the typed key ``namespace_key("agent", key, value)``
    of the FIRST of ``keys`` present in ``configurable`` (so with ``("user_id",
    "thread_id")`` a user's memory is shared by all their threads, and a run without a
    user id gets a per-thread memory). The LangChain agent middleware and tools and the
    LangGraph nodes use it, so they share a user's memory.

    Raises :class:`InvalidInputError` when none is present and no ``default`` is given.
    """
    configurable = configurable or {}
    for key in keys:
        value = configurable.get(key)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return namespace_key("agent", key, value)
    if default is not None:
        return default
    raise InvalidInputError(
        f"no memory namespace: pass one of {list(keys)} in config['configurable'], e.g. "
        f"graph.invoke(..., config={{'configurable': {{'{keys[0] if keys else 'thread_id'}': '42'}}}})"
    )


_OPENING, _OPEN, _CLOSING = "opening", "open", "closing"

#: Namespaces kept out of the embedded Chroma's index cache as a margin (see
#: :meth:`EnginePool._compute_limits`).
_CACHE_MARGIN = 4


class _Slot:
    """One namespace's place in an :class:`EnginePool`: its engine, the callers holding it
    (``refs``) and whether it is being opened, is open, or is being closed."""

    __slots__ = ("name", "engine", "refs", "state")

    def __init__(self, name: str) -> None:
        self.name = name
        self.engine: Any = None
        self.refs = 0
        self.state = _OPENING


class EnginePool:
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
        self._slots: OrderedDict[str, _Slot] = OrderedDict()  # least recently used first
        # the namespaces the current thread or task holds (a context variable: it follows
        # a call into asyncio.to_thread), so that a caller holding one never waits for a
        # restart that waits for it
        self._held: ContextVar[tuple[str, ...]] = ContextVar(f"synapse_pool_{id(self)}", default=())
        self._stale = 0  # engines closed since the embedded Chroma last started
        self._draining = False
        self._warned: set[str] = set()
        self.restarts = 0  #: times the pool restarted the embedded Chroma
        self._open_limit, self._stale_limit, self._resident_limit = self._compute_limits()

    # -- limits --------------------------------------------------------------------------
    def _compute_limits(self) -> tuple[int, int | None, int | None]:
        """``(engines kept open, closed engines before a restart, namespaces loaded at
        most)``; the last two are None for engines on a client passed in (nothing of
        theirs is the pool's to restart) or where Chroma's cache size is unknown."""
        from .storage.residency import INDEXES_PER_NAMESPACE, embedded_index_capacity

        if self._kwargs.get("client") is not None:
            return self.max_open, None, None
        stale = self.recycle_after or self.max_open
        capacity = embedded_index_capacity()
        if capacity is None:
            return self.max_open, stale, None
        resident = max(2, capacity // INDEXES_PER_NAMESPACE - _CACHE_MARGIN)
        open_limit = min(self.max_open, max(1, resident // 2))
        if open_limit < self.max_open:
            self._warn_once("limit", "max_open=%d lowered to %d: Chroma keeps at most %d indexes "
                            "loaded under this process's descriptor limit (ulimit -n / 5), %d per "
                            "memory; raise `ulimit -n` to keep more open", self.max_open,
                            open_limit, capacity, INDEXES_PER_NAMESPACE)
        return open_limit, max(1, min(stale, resident - open_limit)), resident

    def _warn_once(self, key: str, msg: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(msg, *args)

    # -- namespaces ----------------------------------------------------------------------
    def _exists(self, name: str) -> bool:
        return name in self._slots or (self.path / "namespaces" / namespace_dirname(name)).is_dir()

    def resolve(self, namespace: str) -> str:
        """The engine namespace ``namespace`` opens: a typed key (:func:`namespace_key`) as
        is, or its pre-typed-keys name when only that one holds a memory; a plain string
        as is (one starting with ``@``, the adapters' space, is refused)."""
        if isinstance(namespace, NamespaceKey):
            with self._lock:
                legacy = _legacy_name(namespace)
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

    def _acquire(self, name: str, *, nested: bool) -> _Slot:
        """Hold the engine of the (resolved) namespace ``name``, opening it if need be:
        waits while it is being opened or closed, and while the pool restarts Chroma
        (unless the caller already holds an engine of this pool: ``nested``)."""
        from .core.engine import Synapse

        while True:
            with self._cond:
                slot = self._take(name, nested=nested)
            if slot is None:  # full of closed engines' indexes: free them, then try again
                self._restart_if(lambda: self._stale > 0)
                continue
            if slot.state == _OPEN:
                return slot
            break  # a new slot: this caller opens it
        try:
            engine = Synapse(self.path, namespace=name, **self._kwargs)
        except BaseException:
            with self._cond:
                del self._slots[name]
                self._stale += 1  # its client may have loaded indexes before it failed
                self._cond.notify_all()
            raise
        with self._cond:
            slot.engine, slot.state = engine, _OPEN
            self._slots.move_to_end(name)
            victims = self._victims()
            self._cond.notify_all()
        self._close_slots(victims)
        return slot

    def _take(self, name: str, *, nested: bool) -> _Slot | None:
        """(lock held) Wait until ``name`` can be held: its open slot (one more holder), a
        new slot for the caller to open, or None when the pool must restart Chroma first."""
        while True:
            slot = self._slots.get(name)
            blocked = self._draining and not nested
            if slot is not None and slot.state == _OPEN and slot.engine.closed and not slot.refs:
                del self._slots[name]  # closed by hand (Synapse.close): reopen it
                self._stale += 1
                continue
            if slot is not None and slot.state == _OPEN and not blocked:
                slot.refs += 1
                self._slots.move_to_end(name)
                return slot
            if slot is None and not blocked:
                if nested or self._room():
                    slot = self._slots[name] = _Slot(name)
                    slot.refs = 1
                    return slot
                if self._stale:
                    return None
            self._cond.wait()

    def _room(self) -> bool:
        """(lock held) Another namespace may be loaded without outgrowing Chroma's cache."""
        return self._resident_limit is None or len(self._slots) + self._stale < self._resident_limit

    def _release(self, slot: _Slot, *, nested: bool) -> None:
        with self._cond:
            slot.refs -= 1
            victims = self._victims()
            self._cond.notify_all()
        self._close_slots(victims)
        if not nested:
            self._restart_if(lambda: self._stale_limit is not None and self._stale >= self._stale_limit)

    def _victims(self) -> list[_Slot]:
        """(lock held) The least recently used open engines no caller holds, beyond the
        limit; marked closing."""
        over = sum(1 for s in self._slots.values() if s.state != _CLOSING) - self._open_limit
        out = []
        for slot in self._slots.values():
            if over <= 0:
                break
            if slot.state == _OPEN and not slot.refs:
                slot.state = _CLOSING
                out.append(slot)
                over -= 1
        return out

    def _close_slots(self, slots: Sequence[_Slot]) -> None:
        """Close (and save) the engines of ``slots`` (marked closing), then let the callers
        waiting for them reopen them. A failed close is logged: the engine has released
        its lock and client by then, and its turns are in Chroma already."""
        for slot in slots:
            logger.info("closing the memory %r (max_open=%d)", slot.name, self._open_limit)
            try:
                slot.engine.close()
            except Exception:
                logger.exception("closing the memory %r failed", slot.name)
            finally:
                with self._cond:
                    if self._slots.get(slot.name) is slot:
                        del self._slots[slot.name]
                    self._stale += 1
                    self._cond.notify_all()

    def _drain(self, busy: Callable[[_Slot], bool], *, deadline: float | None = None) -> list[_Slot]:
        """(condition held, ``_draining`` just set) Wait until no slot is ``busy`` (or until
        ``deadline``, with a warning), then mark the open slots closing and return them; on
        an error (an interrupt while waiting) the drain is called off."""
        try:
            while any(busy(s) for s in self._slots.values()):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    logger.warning("closing the pool's memories while callers still hold some")
                    break
                self._cond.wait(left)
            victims = [s for s in self._slots.values() if s.state == _OPEN]
            for slot in victims:
                slot.state = _CLOSING
            return victims
        except BaseException:
            self._draining = False
            self._cond.notify_all()
            raise

    def _restart_if(self, due: Callable[[], bool]) -> None:
        """Restart the embedded Chroma when ``due()`` (checked under the lock): wait for
        every caller to let go of its engine (new callers wait meanwhile), close every
        engine (Chroma stops with its last client, freeing every index it loaded), let the
        callers reopen what they need."""
        with self._cond:
            if self._draining or self._stale_limit is None or not due():
                return
            self._draining = True
            victims = self._drain(lambda s: bool(s.refs) or s.state != _OPEN)
        try:
            self._close_slots(victims)
        finally:
            from .storage.residency import release_heap

            # a closed engine is a web of cycles (its parts point back at it) that only the
            # cyclic collector frees, late when its graph and matrices are few objects for
            # much memory; collect them here, with Chroma's indexes, and give the heap back
            gc.collect()
            release_heap()
            with self._cond:
                self._stale = 0
                self._draining = False
                self.restarts += 1
                self._open_limit, self._stale_limit, self._resident_limit = self._compute_limits()
                self._cond.notify_all()
            logger.info("restarted the embedded Chroma of %s to free closed memories' indexes",
                        self.path)

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
                if slot.state == _OPEN and not slot.refs:
                    slot.state = _CLOSING
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
            slot.refs, slot.state = 0, _CLOSING
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
            return sorted(n for n, s in self._slots.items() if s.state == _OPEN)

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
            slots = [s for s in self._slots.values() if s.state == _OPEN]
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
            victims = self._drain(lambda s: bool(s.refs and not held) or s.state != _OPEN,
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

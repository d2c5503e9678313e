"""The slots of an :class:`~synapse_integrations.pool.EnginePool`: which engines are open,
who holds them, which close, and when the embedded Chroma restarts.

:class:`EngineSlots` is a mixin of ``EnginePool`` (whose public methods, the leases
included, are in :mod:`.pool`). Each namespace has a :class:`Slot`: opening, open or
closing, with the callers holding it (``refs``). Beyond the limit, the least recently used
open engines no caller holds are closed; once enough closed engines' indexes stay loaded,
the pool waits for its callers, closes every engine and so lets Chroma stop and free them
(:meth:`EngineSlots._restart_if`). The limits follow the size of Chroma's own index cache
(:mod:`.storage.residency`).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

# the pool's logger, as before the split into modules
logger = logging.getLogger(f"{__package__}.pool")

__all__ = ["CLOSING", "OPEN", "OPENING", "EngineSlots", "Slot"]

OPENING, OPEN, CLOSING = "opening", "open", "closing"

#: Namespaces kept out of the embedded Chroma's index cache as a margin (see
#: :meth:`EngineSlots._compute_limits`).
_CACHE_MARGIN = 4


class Slot:
    """One namespace's place in an :class:`~synapse_integrations.pool.EnginePool`: its
    engine, the callers holding it (``refs``) and whether it is being opened, is open, or
    is being closed."""

    __slots__ = ("name", "engine", "refs", "state")

    def __init__(self, name: str) -> None:
        self.name = name
        self.engine: Any = None
        self.refs = 0
        self.state = OPENING


class EngineSlots:
    """How an :class:`~synapse_integrations.pool.EnginePool` opens, holds, closes and
    restarts its engines (see the module docstring). ``EnginePool.__init__`` sets what
    this reads: ``path``, ``max_open``, ``recycle_after``, ``_kwargs`` (every engine's
    arguments), ``_cond`` (the condition on the pool's lock), ``_slots`` (least recently
    used first), ``_stale``, ``_draining``, ``_warned``, ``restarts`` and the three limits.
    """

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

    # -- slots ---------------------------------------------------------------------------
    def _acquire(self, name: str, *, nested: bool) -> Slot:
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
            if slot.state == OPEN:
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
            slot.engine, slot.state = engine, OPEN
            self._slots.move_to_end(name)
            victims = self._victims()
            self._cond.notify_all()
        self._close_slots(victims)
        return slot

    def _take(self, name: str, *, nested: bool) -> Slot | None:
        """(lock held) Wait until ``name`` can be held: its open slot (one more holder), a
        new slot for the caller to open, or None when the pool must restart Chroma first."""
        while True:
            slot = self._slots.get(name)
            blocked = self._draining and not nested
            if slot is not None and slot.state == OPEN and slot.engine.closed and not slot.refs:
                del self._slots[name]  # closed by hand (Synapse.close): reopen it
                self._stale += 1
                continue
            if slot is not None and slot.state == OPEN and not blocked:
                slot.refs += 1
                self._slots.move_to_end(name)
                return slot
            if slot is None and not blocked:
                if nested or self._room():
                    slot = self._slots[name] = Slot(name)
                    slot.refs = 1
                    return slot
                if self._stale:
                    return None
            self._cond.wait()

    def _room(self) -> bool:
        """(lock held) Another namespace may be loaded without outgrowing Chroma's cache."""
        return self._resident_limit is None or len(self._slots) + self._stale < self._resident_limit

    def _release(self, slot: Slot, *, nested: bool) -> None:
        with self._cond:
            slot.refs -= 1
            victims = self._victims()
            self._cond.notify_all()
        self._close_slots(victims)
        if not nested:
            self._restart_if(lambda: self._stale_limit is not None and self._stale >= self._stale_limit)

    def _victims(self) -> list[Slot]:
        """(lock held) The least recently used open engines no caller holds, beyond the
        limit; marked closing."""
        over = sum(1 for s in self._slots.values() if s.state != CLOSING) - self._open_limit
        out = []
        for slot in self._slots.values():
            if over <= 0:
                break
            if slot.state == OPEN and not slot.refs:
                slot.state = CLOSING
                out.append(slot)
                over -= 1
        return out

    def _close_slots(self, slots: Sequence[Slot]) -> None:
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

    def _drain(self, busy: Callable[[Slot], bool], *, deadline: float | None = None) -> list[Slot]:
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
            victims = [s for s in self._slots.values() if s.state == OPEN]
            for slot in victims:
                slot.state = CLOSING
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
            victims = self._drain(lambda s: bool(s.refs) or s.state != OPEN)
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

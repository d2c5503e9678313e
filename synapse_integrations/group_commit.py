"""Group commit: the writes to one namespace that arrive together are stored together.

A turn is durable once Chroma has committed it, and that commit (one SQLite transaction)
costs about as much for one turn as for a hundred. A server that stores each request's
turns on their own pays it once per request, and concurrent writers to one namespace wait
for each other's commits one by one. :class:`GroupCommit` queues the writes per key; the
first request to find its key idle becomes the *leader*: it takes every request queued
for the key (up to ``max_items`` items), commits them with one call, hands each request
its own slice of the result, and passes the lead to the oldest request that arrived
meanwhile. No request waits for a timer: at low load each write is committed alone as
soon as it arrives; under load the batches form while the previous commit runs.

Each request is still acknowledged only after the commit that holds it. A request that
the writer refuses as bad input does not fail the others: when the batch is refused with
an error of ``isolate``, each request of it is committed alone, so the bad one gets its
own error and the others are stored (a refused batch stores nothing, so nothing is
written twice). Any other error (a storage failure) is every request's error, as it
would be had each run alone: the client retries.

>>> calls = []
>>> def write(key, items):
...     calls.append(list(items))
...     return [f"{key}:{x}" for x in items]
>>> gc = GroupCommit(write)
>>> gc.submit("u1", ["a", "b"])
['u1:a', 'u1:b']
>>> calls
[['a', 'b']]
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["GroupCommit", "GroupCommitStats"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Request(Generic[T, R]):
    items: Sequence[T]
    wake: threading.Event = field(default_factory=threading.Event)
    done: bool = False
    result: list[R] | None = None
    error: BaseException | None = None


@dataclass
class GroupCommitStats:
    """Counts since start: ``requests`` submitted, ``commits`` made (a batch refused and
    retried request by request counts each retry), ``items`` written, ``isolated``
    batches retried request by request."""

    requests: int = 0
    commits: int = 0
    items: int = 0
    isolated: int = 0


def _refused_input(exc: BaseException) -> bool:
    return isinstance(exc, (ValueError, TypeError))


class GroupCommit(Generic[T, R]):
    """Per-key group commit over ``write(key, items) -> results`` (one result per item,
    in order).

    Args:
        write: stores a list of items under a key in one commit.
        max_items: the most items one commit takes from the queue (a single larger
            request is committed alone, whole).
        isolate: tells the errors that mean "this input is refused, nothing was
            stored" (default: ``ValueError`` and ``TypeError``): a batch refused with one
            is retried request by request.
    """

    def __init__(self, write: Callable[[Any, list[T]], list[R]], *, max_items: int = 256,
                 isolate: Callable[[BaseException], bool] = _refused_input) -> None:
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self._write = write
        self.max_items = max_items
        self.isolate = isolate
        self._lock = threading.Lock()
        self._queues: dict[Hashable, deque[_Request[T, R]]] = {}
        self.stats = GroupCommitStats()

    def queued(self) -> int:
        """Requests waiting or being committed, over all keys."""
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def submit(self, key: Hashable, items: Sequence[T]) -> list[R]:
        """Store ``items`` under ``key`` (with whatever else is queued for it); returns
        their results once committed, or raises the error that refused them."""
        req: _Request[T, R] = _Request(list(items))
        with self._lock:
            self.stats.requests += 1
            queue = self._queues.get(key)
            lead = queue is None
            if lead:
                queue = self._queues[key] = deque()
            queue.append(req)
        if not lead:
            req.wake.wait()  # done, or handed the lead
        if not req.done:
            self._lead(key)
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    def _lead(self, key: Hashable) -> None:
        with self._lock:
            queue = self._queues[key]
            batch, n = [], 0
            for r in queue:  # the oldest first; the leader is the oldest
                if batch and n + len(r.items) > self.max_items:
                    break
                batch.append(r)
                n += len(r.items)
        try:
            self._commit(key, batch)
        finally:
            with self._lock:
                for _ in batch:
                    queue.popleft()
                nxt = queue[0] if queue else None
                if nxt is None:
                    del self._queues[key]
            for r in batch:
                r.done = True
                r.wake.set()
            if nxt is not None:
                nxt.wake.set()  # not done: it leads the next commit

    def _commit(self, key: Hashable, batch: list[_Request[T, R]]) -> None:
        try:
            self._store(key, batch)
        except BaseException as exc:  # noqa: BLE001 - handed to the batch's requests
            if len(batch) == 1 or not self.isolate(exc):
                for r in batch:
                    r.error = exc
                return
            with self._lock:
                self.stats.isolated += 1
            for r in batch:
                try:
                    self._store(key, [r])
                except BaseException as one:  # noqa: BLE001 - handed to its request
                    r.error = one

    def _store(self, key: Hashable, batch: list[_Request[T, R]]) -> None:
        items = [x for r in batch for x in r.items]
        results = self._write(key, items)
        if len(results) != len(items):
            raise RuntimeError(f"group commit: the writer returned {len(results)} results "
                               f"for {len(items)} items")
        with self._lock:
            self.stats.commits += 1
            self.stats.items += len(items)
        at = 0
        for r in batch:
            r.result = list(results[at:at + len(r.items)])
            at += len(r.items)


"""A tiny synchronous event bus: the engine tells subscribers what it did
(:class:`~synapse_integrations.types.WindowReport` after each consolidation window,
:class:`~synapse_integrations.types.VectorWrite` after a batched vector write), so that
benchmarks, progress bars and tracing can observe it without patching it.

>>> bus = EventBus()
>>> seen = []
>>> stop = bus.subscribe(seen.append)
>>> bus.emit("hello"); stop(); bus.emit("ignored")
>>> seen
['hello']
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ...errors import InvalidTypeError

logger = logging.getLogger(__name__)

__all__ = ["EventBus"]


class EventBus:
    """Subscribers are called in order, on the emitting thread; an exception in one is
    logged and does not reach the engine."""

    def __init__(self) -> None:
        self._subscribers: list[Callable[[Any], None]] = []
        self._lock = threading.Lock()

    def subscribe(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event; returns a function that unsubscribes."""
        if not callable(callback):
            raise InvalidTypeError(f"subscribe() takes a callable, got {type(callback).__name__}")
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)
        return unsubscribe

    def emit(self, event: Any) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(event)
            except Exception:  # a subscriber's bug must not break a write
                logger.exception("event subscriber %r failed on %r", callback, event)

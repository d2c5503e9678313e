"""The async twins of the engine's methods: :class:`AsyncTwins`, a mixin of
:class:`~synapse_integrations.Synapse`.

Each runs the same code as its sync method in a worker thread (the engine's lock
serialises mutation), so an asyncio application never blocks its event loop on the
embedder, Chroma or the disk. ``aadd_turns`` is the one with more to it: a cancelled call
(``asyncio.wait_for`` timing out) stops before its next write, and a write already under
way is recognised when the caller retries it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from ..types import (
    ConsistencyReport,
    ConsolidationReport,
    FeedbackReport,
    RetrievalResult,
)

__all__ = ["AsyncTwins"]

T = TypeVar("T")


class AsyncTwins:
    """``a``-prefixed twins of the engine's methods (see the module docstring)."""

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))

    async def aadd_turn(self, text: str, *, speaker: str | None = None,
                        timestamp: datetime | float | str | None = None,
                        metadata: Mapping[str, Any] | None = None, id: str | None = None) -> str:
        """Async twin of :meth:`add_turn` (cancellation: see :meth:`aadd_turns`)."""
        return (await self.aadd_turns([{"text": text, "speaker": speaker, "timestamp": timestamp,
                                        "metadata": metadata, "id": id}]))[0]

    async def aadd_turns(self, turns: Iterable[str | Mapping[str, Any]]) -> list[str]:
        """Async twin of :meth:`add_turns`. Cancelling it (``asyncio.wait_for`` timing
        out) stops it before its next write; a write already under way lands, and a
        retry of the same turns then returns their ids instead of storing them twice."""
        cancel = threading.Event()
        try:
            ids = await asyncio.to_thread(self._add_turns, list(turns), cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise
        self._acknowledge(ids)
        return ids

    async def aupdate(self, node_id: str, text: str | None = None, **kwargs: Any) -> str:
        """Async twin of :meth:`update`."""
        return await self._run(self.update, node_id, text, **kwargs)

    async def asupersede(self, old_id: str, new_id: str) -> None:
        """Async twin of :meth:`supersede`."""
        await self._run(self.supersede, old_id, new_id)

    async def ahistory(self, node_id: str) -> list[dict[str, Any]]:
        """Async twin of :meth:`history`."""
        return await self._run(self.history, node_id)

    async def aconsolidate(self) -> ConsolidationReport:
        """Async twin of :meth:`consolidate`."""
        return await self._run(self.consolidate)

    async def aretrieve(self, query: str, k: int | None = None, **kwargs: Any) -> RetrievalResult:
        """Async twin of :meth:`retrieve` (same keyword arguments)."""
        return await self._run(self.retrieve, query, k, **kwargs)

    async def asleep(self) -> Any:
        """Async twin of :meth:`sleep`."""
        return await self._run(self.sleep)

    async def afeedback(self, query: str, used_ids: Sequence[str],
                        unused_ids: Sequence[str] = (), **kwargs: Any) -> FeedbackReport:
        """Async twin of :meth:`feedback`."""
        return await self._run(self.feedback, query, used_ids, unused_ids, **kwargs)

    async def aforget(self, ids: Sequence[str] | None = None, **kwargs: Any) -> list[str]:
        """Async twin of :meth:`forget`."""
        return await self._run(self.forget, ids, **kwargs)

    async def aarchive(self, ids: Sequence[str]) -> list[str]:
        """Async twin of :meth:`archive`."""
        return await self._run(self.archive, ids)

    async def arestore(self, ids: Sequence[str]) -> list[str]:
        """Async twin of :meth:`restore`."""
        return await self._run(self.restore, ids)

    async def aget(self, node_id: str, *, include_archived: bool = False) -> dict[str, Any]:
        """Async twin of :meth:`get`."""
        return await self._run(self.get, node_id, include_archived=include_archived)

    async def aepisodes(self, *, include_archived: bool = True) -> list[dict[str, Any]]:
        """Async twin of :meth:`episodes`."""
        return await self._run(self.episodes, include_archived=include_archived)

    async def averify(self) -> ConsistencyReport:
        """Async twin of :meth:`verify`."""
        return await self._run(self.verify)

    async def arepair(self) -> ConsistencyReport:
        """Async twin of :meth:`repair`."""
        return await self._run(self.repair)

    async def asave(self) -> int:
        """Async twin of :meth:`save`."""
        return await self._run(self.save)

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await self._run(self.close)

"""The facade's upkeep of a memory: archiving, forgetting and consistency, a mixin of
:class:`~synapse_integrations.Synapse` (each method validates, locks and delegates: to
:class:`~.state.state.MemoryState`, :mod:`.lifecycle.forgetting` and
:mod:`.lifecycle.consistency`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidTypeError, NodeNotFoundError
from ..types import ConsistencyReport, ForgetResult
from .lifecycle import consistency, forgetting

__all__ = ["Upkeep"]


class Upkeep:
    """Archive, forget, verify and repair (see the module docstring). The engine provides
    ``_working``, ``_open_state``, ``_read_state``, ``_after_windows`` and its stores."""

    _embedder: Any
    _eraser: Any
    _ingestor: Any
    _owns_client: bool
    _state: Any

    # ------------------------------------------------------------------------------------
    # archive
    # ------------------------------------------------------------------------------------
    def archive(self, ids: Sequence[str]) -> list[str]:
        """Move nodes out of the active graph by hand (restorable with :meth:`restore`)."""
        with self._working():
            state = self._open_state()
            missing = [i for i in ids if i not in state]
            if missing:
                raise NodeNotFoundError(f"not active memory id(s): {missing[:5]}")
            state.archive(list(ids))
            state.stale_pagerank = True
            self._after_windows()
            return list(ids)

    def archived(self) -> list[dict[str, Any]]:
        """The archived nodes: ``{"id", "kind", "text", ...}`` each."""
        with self._lock:
            return self._read_state().archived()

    def restore(self, ids: Sequence[str]) -> list[str]:
        """Bring archived nodes back into the active graph."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise InvalidTypeError("restore() takes a list of ids, not a single str")
        with self._working():
            restored = self._open_state().restore(list(ids), self._embedder)
            self._after_windows()
            return restored

    # ------------------------------------------------------------------------------------
    # forgetting
    # ------------------------------------------------------------------------------------
    def forget(
        self,
        ids: Sequence[str] | None = None,
        *,
        speaker: str | None = None,
        since: datetime | float | str | None = None,
        until: datetime | float | str | None = None,
        where: Mapping[str, Any] | None = None,
        everything: bool = False,
    ) -> ForgetResult:
        """Remove episodes for good: by ids, speaker, event-time range [since, until),
        a metadata filter in the language of :meth:`retrieve` (``where={}`` is refused), or
        ``everything=True``. Criteria combine with AND. Concepts go too when only
        forgotten turns justify their name (whatever the extractor called them; their
        attributes and relations likewise). The ids are recorded as forgotten for every
        engine and every later open, older snapshots are deleted and (embedded Chroma) the
        text is scrubbed from Chroma's files. Crash-safe: an interrupted forget is
        finished on the next open. Returns the removed ids: a :class:`ForgetResult`, whose
        ``.memories`` were asked for and ``.derived`` went with them (docs/safety.md)."""
        with self._working():
            state = self._open_state()
            self._sync()
            doomed = forgetting.select(state, ids, speaker=speaker, since=since, until=until,
                                       where=where, everything=everything)
            asked = forgetting.asked_for(state, doomed, ids)
            return ForgetResult(self._eraser.erase(doomed) if doomed else [], memories=asked)

    def _sync(self, *, best_effort: bool = False) -> None:
        """(lock held) Drop what another engine on the same Chroma forgot (only for a
        client this engine did not make: see :meth:`forgetting.Eraser.sync`)."""
        if not self._owns_client and self._state is not None:
            self._eraser.sync(best_effort=best_effort)

    def _acknowledge(self, ids: list[str]) -> None:
        self._ingestor.retries.acknowledge(ids)

    # ------------------------------------------------------------------------------------
    # consistency
    # ------------------------------------------------------------------------------------
    def verify(self) -> ConsistencyReport:
        """Check that the graph, both Chroma collections, the BM25 index and the in-memory
        vectors agree; changes nothing. ``report.ok`` is the verdict, ``report.problems``
        says what disagrees (see :meth:`repair`).

        >>> mem.verify().ok                                      # doctest: +SKIP
        True
        """
        with self._working():
            return consistency.verify(self._open_state())

    def repair(self) -> ConsistencyReport:
        """Bring the stores back into agreement, then verify: graph nodes whose vectors
        are missing are re-embedded, episodes found only in Chroma are re-attached, stray
        concept vectors are removed, misplaced archive vectors are moved, derived indexes
        are rebuilt. Everything done is logged and listed in ``report.actions``; the
        graph (the snapshot) is the record, Chroma's episodes are never dropped."""
        with self._working():
            state = self._open_state()
            self._sync()
            fixed, attached, dropped = consistency.repair(state, self._embedder)
            self._ingestor.retries.recovered.update(attached)
            if dropped:
                self._eraser.finish(dropped)
            return consistency.after_repair(state, fixed)

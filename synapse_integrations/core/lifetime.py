"""The facade's lifetime of an open memory: saving, closing, dropping, the lock and the
state guards; a mixin of :class:`~synapse_integrations.Synapse` (which opens the memory).
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ..errors import InvalidInputError
from ..storage.chroma import close_client
from .kernels import threads
from .state.state import MemoryState

__all__ = ["Lifetime"]

T = TypeVar("T")


class Lifetime:
    """Save, close, drop and the guards every method takes (see the module docstring)."""

    _claim: Any
    _client: Any
    _closed: bool
    _dirlock: Any
    _idle: threading.Condition
    _lock: Any
    _ns_dir: Any
    _owns_client: bool
    _owns_path: bool
    _snapshots: Any
    _state: MemoryState | None
    _writers: dict[int, int]
    config: Any
    namespace: str
    path: Any

    def save(self) -> int:
        """Write a snapshot of the graph (atomic). Returns its version number."""
        with self._lock:
            state = self._open_state()
            state.flush_concept_vectors()  # a snapshot never names an unwritten concept
            version = self._snapshots.save(
                state.snapshot_files(),
                meta={"namespace": self.namespace, "config": self.config.to_dict(),
                      "nodes": len(state.graph), "archived": len(state.graph.archive)})
            state.windows_since_snapshot = 0
            return version

    def close(self) -> None:
        """Save (for a persistent memory) and release the directory lock; a throwaway
        memory is deleted."""
        with self._lock:
            self._wait_for_writers()
            if self._closed:
                return
            try:
                if not self._owns_path:
                    self.save()
            finally:
                self._closed = True
                self._release()
                if self._owns_path:
                    shutil.rmtree(self.path, ignore_errors=True)

    def drop(self) -> None:
        """Erase this namespace for good: its Chroma collections with their rows and index
        folders (embedded Chroma: the database is vacuumed, so no deleted row stays in
        its free pages), every snapshot, the namespace's folder; then close. Other
        namespaces under the same path stay."""
        with self._lock:
            self._wait_for_writers()
            state = self._open_state()
            state.vectors.forgotten.count()  # look it up: another engine may have created it
            folders = state.vectors.segment_folders()
            state.vectors.drop()
            self._snapshots.delete_all()
            shutil.rmtree(self._ns_dir, ignore_errors=True)
            self._closed = True
            self._release()
            for folder in folders:  # in case closing the client wrote them back
                shutil.rmtree(folder, ignore_errors=True)
            if self._owns_path:
                shutil.rmtree(self.path, ignore_errors=True)

    def _release(self) -> None:
        # the embedded Chroma client first (its in-process cache would go stale once
        # another process writes the folder), then the directory lock
        try:
            if self._owns_client and self._client is not None:
                close_client(self._client)
                if self._state is not None:
                    self._state.vectors.clear_index_slack()  # at rest, no stale heap bytes on disk
        finally:
            self._claim.release()
            self._dirlock.release()

    @contextmanager
    def _working(self) -> Iterator[None]:
        """The lock, numpy's BLAS kept off the encoder's cores (:mod:`.threads`)."""
        with self._lock, threads.engine_blas():
            yield

    def _wait_for_writers(self) -> None:
        """(lock held) Let an ``add_turns`` of another thread finish its batch: it releases
        the lock between chunks, and a close in between would cut it."""
        me = threading.get_ident()
        while any(t != me for t in self._writers):
            self._idle.wait()

    @property
    def closed(self) -> bool:
        """The memory was closed (or dropped)."""
        return self._closed

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _open_state(self) -> MemoryState:
        if self._closed or self._state is None:
            raise InvalidInputError("this Synapse memory is closed")
        return self._state

    def _read_state(self) -> MemoryState:
        """The state for reads, which a closed memory still answers from what it held."""
        if self._state is None:
            raise InvalidInputError("this Synapse memory is closed")
        return self._state

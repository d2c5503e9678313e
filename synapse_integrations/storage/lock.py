"""One process at a time per memory directory.

The embedded Chroma files and the snapshots under a memory's ``path`` are single-writer:
two processes writing them would corrupt both silently. :class:`DirectoryLock` takes an
exclusive ``fcntl.flock`` on ``<path>/.synapse.lock``; a second *process* gets
:class:`~synapse_integrations.errors.MemoryLockedError` at open. Memories opened on the
same path inside one process share the lock (reference counted), since they share one
Chroma client too. The kernel releases a ``flock`` when its holder dies, so a crashed
process never leaves a stale lock behind (the file itself may stay; it holds only a pid).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..errors import MemoryLockedError, StorageError

LOCK_NAME = ".synapse.lock"

_REGISTRY_LOCK = threading.Lock()
_HELD: dict[str, list[int]] = {}  # resolved path -> [fd, refcount]


class DirectoryLock:
    """An exclusive inter-process lock on a memory directory (in-process: shared)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._key: str | None = None

    def acquire(self) -> DirectoryLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no protection, say so in docs
            return self
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create the memory folder {self.path}: {exc}") from exc
        key = str(self.path.resolve())
        with _REGISTRY_LOCK:
            held = _HELD.get(key)
            if held is not None:
                held[1] += 1
                self._key = key
                return self
            try:
                fd = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise StorageError(f"cannot create the lock file in {self.path}: {exc}") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                owner = ""
                try:
                    owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                except OSError:
                    pass
                os.close(fd)
                raise MemoryLockedError(
                    f"the memory at {self.path} is open in another process"
                    f"{f' (pid {owner})' if owner else ''}; close it there first, or give each "
                    f"process its own path (several processes can share a Chroma server)"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            _HELD[key] = [fd, 1]
            self._key = key
        return self

    def release(self) -> None:
        key, self._key = self._key, None
        if key is None:
            return
        with _REGISTRY_LOCK:
            held = _HELD.get(key)
            if held is None:
                return
            held[1] -= 1
            if held[1] <= 0:
                del _HELD[key]
                try:
                    import fcntl

                    fcntl.flock(held[0], fcntl.LOCK_UN)
                finally:
                    os.close(held[0])

    @property
    def held(self) -> bool:
        return self._key is not None

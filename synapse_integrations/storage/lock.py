"""One process at a time per memory directory, one live engine per namespace.

The embedded Chroma files and the snapshots under a memory's ``path`` are single-writer:
two processes writing them would corrupt both silently. :class:`DirectoryLock` takes an
exclusive ``fcntl.flock`` on ``<path>/.synapse.lock``; a second *process* gets
:class:`~synapse_integrations.errors.MemoryLockedError` at open. Memories opened on the
same path inside one process share the lock (reference counted), since they share one
Chroma client too. The kernel releases a ``flock`` when its holder dies, so a crashed
process never leaves a stale lock behind (the file itself may stay; it holds only a pid).
The lock file is opened without following symbolic links and must be a regular file: a
link planted in its place is refused, never truncated.

:class:`NamespaceClaim` keeps a second live engine off a namespace inside one process:
two engines on one (path, namespace) would each hold their own graph, and one would undo
the other's forget when it saves. The claim is released by ``close()``, or when the
engine holding it is garbage-collected.
"""

from __future__ import annotations

import os
import stat
import threading
import weakref
from pathlib import Path
from typing import Any

from ..errors import MemoryLockedError, StorageError

LOCK_NAME = ".synapse.lock"

_REGISTRY_LOCK = threading.RLock()  # re-entrant: a claim can be dropped by GC inside it
_HELD: dict[str, list[int]] = {}  # resolved path -> [fd, refcount]


def _open_lock_file(path: Path) -> int:
    """The lock file's descriptor: never through a symbolic link, never anything but a
    regular file (a planted link or device would otherwise be truncated or written)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise StorageError(f"the lock file {path} is a symbolic link; refusing to open it "
                               f"(remove it if you did not put it there)") from None
        raise StorageError(f"cannot create the lock file {path}: {exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StorageError(f"the lock file {path} is not a regular file; refusing to use it")
    return fd


_CLAIMS: dict[tuple[str, str], weakref.ref] = {}


class NamespaceClaim:
    """At most one live engine per (memory folder, namespace) in this process."""

    def __init__(self, path: str | Path, namespace: str) -> None:
        self.key = (str(Path(path).resolve()), namespace)
        self._held = False

    def acquire(self, owner: Any) -> NamespaceClaim:
        with _REGISTRY_LOCK:
            ref = _CLAIMS.get(self.key)
            holder = ref() if ref is not None else None
            if holder is not None and holder is not owner and not getattr(holder, "closed", False):
                raise MemoryLockedError(
                    f"the namespace {self.key[1]!r} under {self.key[0]} is already open in this "
                    f"process; use that engine (EnginePool shares one per namespace) or close "
                    f"it first: two live engines on one memory would undo each other's forget()")
            key = self.key
            _CLAIMS[key] = weakref.ref(owner, lambda r, key=key: _drop_claim(key, r))
            self._held = True
        return self

    def release(self) -> None:
        with _REGISTRY_LOCK:
            if self._held:
                _CLAIMS.pop(self.key, None)
                self._held = False


def _drop_claim(key: tuple[str, str], ref: weakref.ref) -> None:
    with _REGISTRY_LOCK:
        if _CLAIMS.get(key) is ref:
            del _CLAIMS[key]


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
            fd = _open_lock_file(self.path / LOCK_NAME)
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

"""Versioned, pickle-free graph snapshots.

A snapshot is a folder ``v000042/`` holding JSON files (NetworkX node-link data and engine
state) and a ``manifest.json`` with the schema version, the config, and a SHA-256 of every
file. A snapshot is written into a temporary folder, each file fsynced, then the folder is
renamed into place and the ``CURRENT`` pointer replaced atomically. Loading verifies the
checksums; a corrupt newest snapshot falls back to the previous good one with a warning.
The last ``keep`` versions are kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import SnapshotError

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_VERSION_RE = re.compile(r"^v(\d{6,})$")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file, fsync and rename."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class SnapshotStore:
    """The snapshot folder of one namespace."""

    def __init__(self, root: str | Path, *, keep: int = 3) -> None:
        self.root = Path(root)
        self.keep = max(1, keep)

    # -- listing ----------------------------------------------------------------------------
    def versions(self) -> list[int]:
        """Snapshot versions on disk, oldest first."""
        if not self.root.is_dir():
            return []
        out = []
        for child in self.root.iterdir():
            m = _VERSION_RE.match(child.name)
            if m and child.is_dir():
                out.append(int(m.group(1)))
        return sorted(out)

    def _dir(self, version: int) -> Path:
        return self.root / f"v{version:06d}"

    # -- writing ----------------------------------------------------------------------------
    def save(self, files: Mapping[str, Any], *, meta: Mapping[str, Any]) -> int:
        """Write a new version holding ``files`` (name -> JSON-serialisable object)."""
        self.root.mkdir(parents=True, exist_ok=True)
        version = (self.versions() or [0])[-1] + 1
        tmp = self.root / f".tmp-v{version:06d}-{os.getpid()}-{time.monotonic_ns()}"
        tmp.mkdir()
        try:
            digests = {}
            for name, obj in files.items():
                if "/" in name or name.startswith("."):
                    raise SnapshotError(f"bad snapshot file name {name!r}")
                data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
                with open(tmp / f"{name}.json", "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                digests[f"{name}.json"] = hashlib.sha256(data).hexdigest()
            manifest = {
                "schema_version": SCHEMA_VERSION,
                "version": version,
                "created": time.time(),
                "files": digests,
                **dict(meta),
            }
            with open(tmp / "manifest.json", "wb") as fh:
                fh.write(json.dumps(manifest, ensure_ascii=False, indent=1).encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
            _fsync_dir(tmp)
            os.replace(tmp, self._dir(version))
            _fsync_dir(self.root)
            write_atomic(self.root / "CURRENT", f"v{version:06d}\n".encode())
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._prune()
        return version

    def _prune(self) -> None:
        versions = self.versions()
        for v in versions[: max(0, len(versions) - self.keep)]:
            shutil.rmtree(self._dir(v), ignore_errors=True)
        self.clean_leftovers()

    def clean_leftovers(self) -> int:
        """Remove temporary files and folders of interrupted writes (call it only while
        holding the memory's lock: a live writer's temp folder would be removed too)."""
        if not self.root.is_dir():
            return 0
        n = 0
        for child in self.root.iterdir():
            if child.name.startswith(".tmp-") or (child.name.startswith(".") and ".tmp-" in child.name):
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
                n += 1
        return n

    def delete(self, version: int) -> None:
        """Remove one version (``OSError`` if it cannot be removed)."""
        shutil.rmtree(self._dir(version))

    def folder(self, version: int) -> Path:
        """The folder of one version."""
        return self._dir(version)

    def delete_all(self) -> None:
        """Remove every snapshot of this namespace."""
        shutil.rmtree(self.root, ignore_errors=True)

    # -- reading ----------------------------------------------------------------------------
    def read(self, version: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """(manifest, files) of one version; :class:`SnapshotError` if anything is off."""
        folder = self._dir(version)
        try:
            manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise SnapshotError(f"snapshot {folder} has no readable manifest: {exc}") from exc
        if not isinstance(manifest, dict) or manifest.get("schema_version") != SCHEMA_VERSION:
            raise SnapshotError(
                f"snapshot {folder} has schema version "
                f"{manifest.get('schema_version') if isinstance(manifest, dict) else '?'}, "
                f"this library reads version {SCHEMA_VERSION}"
            )
        if manifest.get("version") != version:
            raise SnapshotError(f"snapshot {folder}: manifest says version "
                                f"{manifest.get('version')!r}, folder says {version}")
        files: dict[str, Any] = {}
        digests = manifest.get("files")
        if not isinstance(digests, dict):
            raise SnapshotError(f"snapshot {folder}: manifest lists no files")
        for fname, digest in digests.items():
            if (not isinstance(fname, str) or "/" in fname or "\\" in fname
                    or fname.startswith(".") or not fname.endswith(".json")
                    or not isinstance(digest, str)):
                raise SnapshotError(f"snapshot {folder}: bad file name {fname!r} in manifest")
            try:
                data = (folder / fname).read_bytes()
            except OSError as exc:
                raise SnapshotError(f"snapshot {folder}: missing {fname}") from exc
            if hashlib.sha256(data).hexdigest() != digest:
                raise SnapshotError(f"snapshot {folder}: {fname} is corrupt (checksum mismatch)")
            try:
                files[fname.removesuffix(".json")] = json.loads(data.decode("utf-8"))
            except ValueError as exc:
                raise SnapshotError(f"snapshot {folder}: {fname} is not valid JSON") from exc
        return manifest, files

    def load_latest(
        self, validate: Callable[[dict[str, Any], dict[str, Any]], Any] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The newest readable snapshot, falling back to older ones; None if there is none.

        ``validate(manifest, files)`` may raise :class:`SnapshotError` to reject a version
        whose checksums match but whose content is unusable (it then falls back too).
        Snapshots are JSON only: nothing in them is ever executed.
        """
        versions = self.versions()
        errors = []
        for v in reversed(versions):
            try:
                manifest, files = self.read(v)
                if validate is not None:
                    validate(manifest, files)
            except SnapshotError as exc:
                logger.warning("skipping unreadable snapshot: %s", exc)
                errors.append(str(exc))
                continue
            except (Exception, RecursionError) as exc:  # noqa: B014 - whatever a crafted file does
                # (JSON nested past the recursion limit, values no check foresaw): an
                # unreadable version, never a failed open while an older one is good
                msg = f"snapshot {self._dir(v)} could not be read: {type(exc).__name__}: {exc}"
                logger.warning("skipping unreadable snapshot: %s", msg)
                errors.append(msg[:500])
                continue
            if errors:
                logger.warning("loaded older snapshot v%06d because newer ones were unreadable", v)
            return manifest, files
        if errors:
            raise SnapshotError(
                "no readable snapshot: " + "; ".join(errors) + f". The vectors and texts are "
                f"still in Chroma: move {self.root} aside and open the memory again to rebuild "
                f"its graph from them")
        return None

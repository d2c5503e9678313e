"""The forget journal: a write-ahead record of an erasure in progress.

Before :meth:`Synapse.forget` removes anything it writes the ids it will remove (ids only,
never text) to ``<namespace folder>/forget-journal.json``; it deletes the file once every
store and every older snapshot is clean. A crash in between leaves the journal, and the
next open finishes the erasure before anything else, so forgotten text cannot come back
from an older snapshot.

>>> import tempfile, pathlib
>>> j = ForgetJournal(pathlib.Path(tempfile.mkdtemp()) / "forget-journal.json")
>>> j.read() is None
True
>>> j.write(["ep-1"]); j.read()
['ep-1']
>>> j.clear(); j.read() is None
True
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import SnapshotError
from .snapshots import write_atomic

__all__ = ["ForgetJournal"]


class ForgetJournal:
    """One namespace's journal file (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, ids: list[str]) -> None:
        """Record the ids of a forget about to start (atomic, fsynced)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps({"ids": ids}, ensure_ascii=False).encode("utf-8"))

    def read(self) -> list[str] | None:
        """The ids of an interrupted forget, or None when there is none."""
        if not self.path.exists():
            return None
        try:
            ids = json.loads(self.path.read_text("utf-8"))["ids"]
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ValueError("ids must be a list of str")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SnapshotError(f"the forget journal {self.path} is unreadable ({exc}); it records "
                                f"an interrupted forget(): fix or remove it, then forget again") from None
        return ids

    def clear(self) -> None:
        """The forget is complete."""
        self.path.unlink(missing_ok=True)

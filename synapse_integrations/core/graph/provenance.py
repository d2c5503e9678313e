"""Provenance: which turns each piece of derived memory came from.

Consolidation derives concepts (their names and aliases, their attributes) and relation
edges from turns. Forgetting a turn must take with it everything that only that turn
justified, whatever the extractor called it ("SLE diagnosis" from "I was diagnosed with
systemic lupus erythematosus"), so each piece records its **sources**: an entry

``{"exact": [turn ids], "windows": [[turn ids], ...]}``

- ``exact``: turns known to say it (the extractor's ``source_ids``); any one of them that
  remains justifies the piece;
- ``windows``: consolidation windows it was extracted from when the extractor did not say
  which turn (an LLM naming a concept in its own words): any turn of the window may be
  the one that said it, so a window justifies the piece only while *none* of its turns
  has been forgotten.

A piece whose entry has nothing left that justifies it goes. Entries hold ids, never text.

>>> e = new_entry(exact=["t1"])
>>> add(e, exact=["t5"]); justified(e, gone={"t1"}), justified(e, gone={"t1", "t5"})
(True, False)
>>> w = new_entry(window=["t1", "t2", "t3"])
>>> justified(w, gone={"t2"})
False
>>> add(w, window=["t7", "t8"]); justified(w, gone={"t2"}), prune(w, {"t2"})
(True, {'exact': [], 'windows': [['t7', 't8']]})
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any

__all__ = ["add", "justified", "merge", "new_entry", "prune"]

Entry = dict[str, Any]


def new_entry(*, exact: Iterable[str] = (), window: Sequence[str] | None = None) -> Entry:
    """An entry with the given exact turns and/or one window."""
    e: Entry = {"exact": [], "windows": []}
    add(e, exact=exact, window=window)
    return e


def add(entry: Entry, *, exact: Iterable[str] = (), window: Sequence[str] | None = None) -> None:
    """Record more sources in ``entry`` (in place; repeated ids and windows are kept once)."""
    have = entry.setdefault("exact", [])
    seen = set(have)
    for i in exact:
        if i not in seen:
            have.append(i)
            seen.add(i)
    if window:
        windows = entry.setdefault("windows", [])
        w = list(window)
        if w not in windows:
            windows.append(w)


def merge(entry: Entry, other: Entry) -> Entry:
    """Add ``other``'s sources to ``entry`` (in place, and returned)."""
    add(entry, exact=other.get("exact", ()))
    for w in other.get("windows", ()):
        add(entry, window=w)
    return entry


def justified(entry: Entry | None, gone: Container[str] | Callable[[str], bool]) -> bool:
    """Does anything still justify the piece once the turns in ``gone`` are forgotten?
    ``gone`` is a set of ids or a predicate ``id -> bool``."""
    if not entry:
        return False
    dead = gone if callable(gone) else gone.__contains__
    if any(not dead(i) for i in entry.get("exact", ())):
        return True
    return any(w and not any(dead(i) for i in w) for w in entry.get("windows", ()))


def prune(entry: Entry, gone: Container[str]) -> Entry:
    """``entry`` without the forgotten turns (in place, and returned): they leave the
    exact list, and a window that held one no longer justifies anything."""
    entry["exact"] = [i for i in entry.get("exact", ()) if i not in gone]
    entry["windows"] = [w for w in entry.get("windows", ()) if not any(i in gone for i in w)]
    return entry

"""Validity: when each memory held, and the versions that replaced one another.

A memory holds over an interval ``[valid_from, valid_until)`` of *event time* (epoch
seconds; the time a turn was given with, or when it was stored):

- an episode holds from its event time (``ts``) until the event time of the version that
  replaced it (``superseded_at``); while nothing replaced it, the end is open (None);
- a fact that sleep consolidation drew from episodes holds from its earliest source's start
  until every source was replaced (the latest of their ends; open while one still holds):
  :func:`fact_intervals`;
- any other concept holds always (None, None).

Versions are linked both ways: the older episode has ``superseded_by`` (the newer one's
id) and ``superseded_at`` (when it stopped holding), the newer has ``supersedes``.
:func:`chain` walks the links, :func:`splice` keeps them whole when versions are
forgotten. A memory *existed* at ``T`` when it started at or before ``T``, and was
*replaced* at ``T`` when it stopped holding at or before ``T``: :func:`existed`,
:func:`replaced`, what ``retrieve(as_of=T)`` and ``current_only`` read.

>>> old = {"ts": 10.0, "superseded_by": "b", "superseded_at": 20.0}
>>> interval(old), replaced(old, 15.0), replaced(old, 20.0), existed(old, 5.0)
((10.0, 20.0), False, True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["LINKS", "chain", "existed", "fact_interval", "fact_intervals", "interval", "replaced",
           "splice"]

#: The node attributes that link versions (older -> newer, when, newer -> older).
LINKS = ("superseded_by", "superseded_at", "supersedes")

NodeOf = Callable[[str], "Mapping[str, Any] | None"]


def interval(node: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """An episode's ``(valid_from, valid_until)``: its event time and, once replaced, the
    event time of its replacement (None: open)."""
    end = node.get("superseded_at") if node.get("superseded_by") else None
    return node.get("ts"), end


def existed(node: Mapping[str, Any], t: float) -> bool:
    """The memory had started to hold at ``t`` (a memory without a start always had)."""
    start = node.get("ts")
    return start is None or start <= t


def replaced(node: Mapping[str, Any], t: float | None = None) -> bool:
    """The memory had been replaced by a newer version at ``t`` (``None``: by now)."""
    if not node.get("superseded_by"):
        return False
    end = node.get("superseded_at")
    return t is None or end is None or end <= t


def chain(node_of: NodeOf, node_id: str) -> list[str]:
    """The versions of ``node_id``, oldest first (``node_of(id)``: the node's attributes,
    or None for an id the memory no longer holds). A version is in its chain once, so a
    malformed loop of links ends.

    >>> nodes = {"a": {"superseded_by": "b"}, "b": {"supersedes": "a", "superseded_by": "c"},
    ...          "c": {"supersedes": "b"}}
    >>> chain(nodes.get, "b"), chain(nodes.get, "x")
    (['a', 'b', 'c'], ['x'])
    """
    first, seen = node_id, {node_id}
    while (prev := (node_of(first) or {}).get("supersedes")) and prev not in seen \
            and node_of(prev) is not None:
        first = prev
        seen.add(prev)
    out, seen = [first], {first}
    while (nxt := (node_of(out[-1]) or {}).get("superseded_by")) and nxt not in seen \
            and node_of(nxt) is not None:
        out.append(nxt)
        seen.add(nxt)
    return out


def splice(node_of: NodeOf, gone: Iterable[str]) -> dict[str, dict[str, Any]]:
    """What changes on the versions that stay when the versions ``gone`` are forgotten:
    ``{id: {attribute: value or None (remove it)}}``. A chain closes over the gap (a -> b
    -> c without b: a -> c, a ending when c started); the newest version gone, the one
    before it holds again.

    >>> nodes = {"a": {"ts": 1.0, "superseded_by": "b", "superseded_at": 2.0},
    ...          "b": {"ts": 2.0, "supersedes": "a", "superseded_by": "c", "superseded_at": 3.0},
    ...          "c": {"ts": 3.0, "supersedes": "b"}}
    >>> splice(nodes.get, {"b"})
    {'a': {'superseded_by': 'c', 'superseded_at': 3.0}, 'c': {'supersedes': 'a'}}
    >>> splice(nodes.get, {"c"})
    {'b': {'superseded_by': None, 'superseded_at': None}}
    """
    gone = set(gone)

    def alive(i: str | None) -> bool:
        return bool(i) and i not in gone and node_of(i) is not None

    def walk(i: str | None, link: str) -> str | None:  # the nearest version that stays
        seen: set[str] = set()
        while i and i not in seen and not alive(i):
            seen.add(i)
            i = (node_of(i) or {}).get(link) if i in gone else None
        return i if alive(i) else None

    out: dict[str, dict[str, Any]] = {}
    for g in gone:
        d = node_of(g)
        if d is None:
            continue
        older, newer = walk(d.get("supersedes"), "supersedes"), walk(d.get("superseded_by"),
                                                                     "superseded_by")
        if older is not None:
            after = (node_of(newer) or {}).get("ts") if newer is not None else None
            out.setdefault(older, {}).update(
                {"superseded_by": newer, "superseded_at": after} if newer is not None
                else {"superseded_by": None, "superseded_at": None})
        if newer is not None:
            out.setdefault(newer, {})["supersedes"] = older
    return out


def fact_interval(sources: Iterable[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """A fact's ``(valid_from, valid_until)`` from its source episodes: from the earliest
    start until the latest end (None: open while a source holds, or no source at all).

    >>> fact_interval([{"ts": 5.0}, {"ts": 2.0, "superseded_by": "x", "superseded_at": 4.0}])
    (2.0, None)
    """
    spans = [interval(d) for d in sources]
    starts = [s for s, _ in spans if s is not None]
    ends = [e for _, e in spans]
    return (min(starts) if starts else None,
            max(ends) if ends and None not in ends else None)  # type: ignore[type-var]


def fact_intervals(start: np.ndarray, end: np.ndarray, facts: np.ndarray,
                   sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every node's ``(start, end)`` (NaN: none, open) with each fact's taken from its
    sources: ``facts[i]`` was drawn from ``sources[i]`` (positions). A fact starts with its
    earliest source and ends when the last of them ends (open while one is open).

    >>> s, e = fact_intervals(np.array([1.0, 5.0, np.nan]), np.array([4.0, np.nan, np.nan]),
    ...                       np.array([2, 2]), np.array([0, 1]))
    >>> s.tolist()[2], bool(np.isnan(e[2]))
    (1.0, True)
    """
    start, end = start.astype(np.float64), end.astype(np.float64)
    if facts.size == 0:
        return start, end
    out_s, out_e = start.copy(), end.copy()
    uniq = np.unique(facts)
    out_s[uniq], out_e[uniq] = np.inf, -np.inf
    src_s, src_e = start[sources], end[sources]
    np.fmin.at(out_s, facts, np.where(np.isnan(src_s), np.inf, src_s))
    np.fmax.at(out_e, facts, np.where(np.isnan(src_e), np.inf, src_e))
    out_s[uniq] = np.where(np.isinf(out_s[uniq]), np.nan, out_s[uniq])
    out_e[uniq] = np.where(np.isinf(out_e[uniq]), np.nan, out_e[uniq])
    return out_s, out_e

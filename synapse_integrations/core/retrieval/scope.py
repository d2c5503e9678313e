"""What a query may use and return: node kinds, the filter (speakers, time, metadata) and
the moment it reads (``as_of``, ``current_only``: :mod:`..state.validity`), validated
once, resolved against the compiled graph."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InvalidInputError, InvalidTypeError, SynapseError
from ..graph.graph import Compiled
from ..state.filters import Filter
from ..state.validation import to_epoch
from ..state.validity import fact_intervals
from .triggers import fact_sources

__all__ = ["DEFAULT_KINDS", "KINDS", "Scope", "Timeline", "intervals", "scope_of", "timeline_of"]

#: What retrieve() returns by default: memories, not the concepts that found them.
DEFAULT_KINDS = ("episode",)
KINDS = ("episode", "concept")


@dataclass(frozen=True)
class Timeline:
    """The moment a query reads: the memory ``as_of`` a time (epoch seconds; None: now),
    whether replaced versions are hidden (``current_only``), and when the question is asked
    (``at``: its relative dates are read against it; None: now; it defaults to ``as_of``)."""

    as_of: float | None = None
    current_only: bool = False
    at: float | None = None


def _epoch(value: Any, name: str) -> float | None:
    try:
        return None if value is None else to_epoch(value)
    except SynapseError as exc:  # name the argument: "as_of: timestamp 'last month' is not ..."
        raise type(exc)(f"{name}: {exc}") from None


def timeline_of(as_of: Any, current_only: Any, at: Any = None) -> Timeline:
    """A validated :class:`Timeline` (errors name the bad argument)."""
    if not isinstance(current_only, bool):
        raise InvalidTypeError(f"current_only must be a bool, got {type(current_only).__name__}")
    when = _epoch(as_of, "as_of")
    asked = _epoch(at, "at")
    return Timeline(when, current_only, when if asked is None else asked)


@dataclass(frozen=True)
class Scope:
    """Which nodes a query may use: ``anchors`` may be picked by the triggers (None: all),
    ``returnable`` may be ranked and returned (None: all). A filter restricts both to the
    matching episodes (concepts still anchor and bridge); ``kinds`` restricts what is
    returned. ``as_of``: what had not started by then is neither (an anchor nor returned),
    and replacements made after it are undone (:mod:`..signals.versions`);
    ``current_only``: versions replaced by then are not returned."""

    anchors: np.ndarray | None = None
    returnable: np.ndarray | None = None
    as_of: float | None = None

    @classmethod
    def build(cls, view: Compiled, kinds: tuple[str, ...], flt: Filter | None,
              timeline: Timeline = Timeline()) -> Scope:
        is_ep = view.is_episode
        matching = is_ep if flt is None else _matching_episodes(view, flt)
        usable = ~is_ep  # concepts anchor and bridge
        as_of = timeline.as_of
        replaced = None
        if as_of is not None or timeline.current_only:
            start, end = intervals(view)
            with np.errstate(invalid="ignore"):
                if as_of is not None:
                    started = ~(start > as_of)  # no start: it always held
                    matching, usable = matching & started, usable & started
                if timeline.current_only:
                    replaced = ~np.isnan(end) & (end <= (np.inf if as_of is None else as_of))
        returnable = np.zeros(view.n, dtype=bool)
        if "episode" in kinds:
            returnable |= matching
        if "concept" in kinds:
            returnable |= usable
        if replaced is not None:
            returnable &= ~replaced
        limited = flt is not None or as_of is not None
        everything = not limited and replaced is None and set(kinds) >= set(KINDS)
        return cls(matching | usable if limited else None, None if everything else returnable,
                   as_of)


def intervals(view: Compiled) -> tuple[np.ndarray, np.ndarray]:
    """Every node's validity ``(start, end)`` in event time (:mod:`..state.validity`; NaN:
    none, open; -inf: replaced at an unknown time), a fact's from its sources."""
    end = view.per_node("valid-until", _ends)
    _, facts, sources = view.derived("facts", fact_sources)
    return fact_intervals(view.times(), end, facts, sources)


def _ends(view: Compiled, start: int) -> np.ndarray:
    newer = view.node_values("superseded_by")[start:]
    when = view.node_values("superseded_at")[start:]
    return np.array([np.nan if not n else (-np.inf if t is None else t)
                     for n, t in zip(newer, when)], dtype=np.float64)


def scope_of(kinds: Sequence[str], speakers: Any, since: Any, until: Any,
              where: Any) -> tuple[tuple[str, ...], Filter | None]:
    """Validated ``kinds`` and filter of a retrieval (errors name the bad argument)."""
    if isinstance(kinds, str) or not isinstance(kinds, Iterable):
        raise InvalidTypeError(f"kinds must be a list of node kinds, got {kinds!r}")
    kinds = tuple(dict.fromkeys(kinds))
    if not kinds or not set(kinds) <= set(KINDS):
        raise InvalidInputError(f"kinds must be a non-empty subset of {list(KINDS)}, got {list(kinds)}")
    return kinds, Filter.build(speakers=speakers, since=since, until=until, where=where)


def _matching_episodes(view: Compiled, flt: Filter) -> np.ndarray:
    """Episodes of the view that match ``flt`` (vectorised for speakers and time)."""
    ok = view.is_episode.copy()
    if flt.speakers is not None:
        speakers = view.node_values("speaker")
        ok &= np.fromiter((sp in flt.speakers for sp in speakers), dtype=bool, count=view.n)
    if flt.since is not None or flt.until is not None:
        ts = view.times()
        with np.errstate(invalid="ignore"):
            if flt.since is not None:
                ok &= ts >= flt.since
            if flt.until is not None:
                ok &= ts < flt.until
    if flt.where is not None:
        metadata = view.node_values("metadata")
        for i in np.flatnonzero(ok):
            ok[i] = flt.where(metadata[i] or {})
    return ok

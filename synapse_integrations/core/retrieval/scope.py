"""What a query may use and return: node kinds and the filter (speakers, time, metadata),
validated once, resolved against the compiled graph."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InvalidInputError, InvalidTypeError
from ..graph.graph import Compiled
from ..state.filters import Filter

__all__ = ["DEFAULT_KINDS", "KINDS", "Scope", "scope_of"]

#: What retrieve() returns by default: memories, not the concepts that found them.
DEFAULT_KINDS = ("episode",)
KINDS = ("episode", "concept")


@dataclass(frozen=True)
class Scope:
    """Which nodes a query may use: ``anchors`` may be picked by the triggers (None: all),
    ``returnable`` may be ranked and returned (None: all). A filter restricts both to the
    matching episodes (concepts still anchor and bridge); ``kinds`` restricts what is
    returned."""

    anchors: np.ndarray | None = None
    returnable: np.ndarray | None = None

    @classmethod
    def build(cls, view: Compiled, kinds: tuple[str, ...], flt: Filter | None) -> Scope:
        is_ep = view.is_episode
        matching = is_ep if flt is None else _matching_episodes(view, flt)
        returnable = np.zeros(view.n, dtype=bool)
        if "episode" in kinds:
            returnable |= matching
        if "concept" in kinds:
            returnable |= ~is_ep
        everything = flt is None and set(kinds) >= set(KINDS)
        return cls(None if flt is None else matching | ~is_ep,
                   None if everything else returnable)


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

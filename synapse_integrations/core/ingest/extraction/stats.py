"""Measuring an extractor on windows: :func:`window_stats`."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ....types import Turn
from .protocol import Extractor

__all__ = ["window_stats"]


def window_stats(extractor: Extractor, windows: Iterable[Sequence[Turn]]) -> dict[str, Any]:
    """Run ``extractor`` on each window and summarise what it produced.

    An *entity* here is a concept not typed ``"Topic"`` whose name is not one of the
    window's speakers. Timings are wall-clock per :meth:`~Extractor.extract` call.

    Returns a JSON-ready dict: ``windows``, ``concepts_mean``, ``concepts_median``,
    ``concepts_max``, ``relations_mean``, ``entity_window_share`` (windows with at least
    one entity), ``distinct_concepts`` (distinct lowercased names over all windows),
    ``recurring_concept_share`` (share of those names produced by two windows or more),
    ``types`` (concept count per type), ``ms_mean``, ``ms_median``, ``ms_p95``.

    >>> from synapse_integrations.core.ingest.extraction import OfflineExtractor
    >>> from synapse_integrations.types import Turn
    >>> w = [
    ...     [Turn("a", "I play chess with Mark.", speaker="Ann")],
    ...     [Turn("b", "Is Mark good at chess?")],
    ... ]
    >>> s = window_stats(OfflineExtractor(), w)
    >>> s["windows"], s["concepts_mean"], s["entity_window_share"], s["recurring_concept_share"]
    (2, 2.5, 1.0, 0.6667)
    """
    per_window: list[int] = []
    n_relations: list[int] = []
    with_entity = 0
    timings: list[float] = []
    seen_in: dict[str, int] = {}
    types: dict[str, int] = {}
    for window in windows:
        turns = tuple(window)
        speakers = {t.speaker.strip().lower() for t in turns if t.speaker}
        start = time.perf_counter()
        result = extractor.extract(turns)
        timings.append((time.perf_counter() - start) * 1000.0)
        per_window.append(len(result.concepts))
        n_relations.append(len(result.relations))
        if any(c.type != "Topic" and c.name.lower() not in speakers for c in result.concepts):
            with_entity += 1
        for name in {c.name.lower() for c in result.concepts}:
            seen_in[name] = seen_in.get(name, 0) + 1
        for c in result.concepts:
            types[c.type] = types.get(c.type, 0) + 1
    n = len(per_window)
    if n == 0:
        return {"windows": 0}
    ordered = sorted(timings)
    return {
        "windows": n,
        "concepts_mean": round(statistics.fmean(per_window), 3),
        "concepts_median": statistics.median(per_window),
        "concepts_max": max(per_window),
        "relations_mean": round(statistics.fmean(n_relations), 3),
        "entity_window_share": round(with_entity / n, 4),
        "distinct_concepts": len(seen_in),
        "recurring_concept_share": round(
            sum(1 for c in seen_in.values() if c >= 2) / len(seen_in), 4
        )
        if seen_in
        else 0.0,
        "types": dict(sorted(types.items())),
        "ms_mean": round(statistics.fmean(timings), 4),
        "ms_median": round(statistics.median(timings), 4),
        "ms_p95": round(ordered[min(n - 1, math.ceil(0.95 * n) - 1)], 4),
    }

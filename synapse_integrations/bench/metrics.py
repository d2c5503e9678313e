"""Benchmark metrics: recall@k, per-category aggregation, latency percentiles, gate rates.

Pure functions over plain Python values; nothing here knows about the engine. Categories
are LoCoMo's own numbers (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial), and ``"1-4"`` pools the questions of categories 1 to 4.

>>> recall_at_k(["D1:1", "D1:2", "D1:3"], ["D1:2", "D2:5"], k=2)
0.5
>>> aggregate_recall([(1, 1.0), (1, 0.0), (4, 1.0)])
{'1': 0.5, '4': 1.0, '1-4': 0.6666666666666666}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import InvalidInputError

__all__ = [
    "DEFAULT_GATE_TAUS",
    "aggregate_recall",
    "gate_rates",
    "gate_sweep",
    "percentiles",
    "recall_at_k",
]

#: Gate thresholds swept by the benchmark (the paper's default is 0.12).
DEFAULT_GATE_TAUS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.12, 0.15, 0.2, 0.3)

_CATEGORIES = (1, 2, 3, 4, 5)
_ANSWERABLE = frozenset({1, 2, 3, 4})
_ADVERSARIAL = 5


def recall_at_k(ranked_episode_ids: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of the (deduplicated) ``evidence`` ids found among the first ``k`` ranked ids.

    ``ranked_episode_ids`` should hold episodic items only (concept nodes do not count
    toward ``k``). Raises :class:`ValueError` when ``evidence`` is empty or ``k < 1``.

    >>> recall_at_k(["a", "b", "c"], ["c", "z"], k=3)
    0.5
    """
    if isinstance(evidence, str) or isinstance(ranked_episode_ids, str):
        raise InvalidInputError("pass sequences of ids, not a single string")
    wanted = set(evidence)
    if not wanted:
        raise InvalidInputError("recall is undefined without evidence: skip the question")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}")
    found = wanted.intersection(ranked_episode_ids[:k])
    return len(found) / len(wanted)


def _check_category(category: object) -> int:
    if isinstance(category, bool) or category not in _CATEGORIES:
        raise InvalidInputError(f"category must be one of 1-5, got {category!r}")
    return int(category)  # type: ignore[call-overload]


def aggregate_recall(records: Iterable[tuple[int, float]]) -> dict[str, float]:
    """Mean recall per category and pooled over categories 1-4.

    ``records`` are ``(category, recall)`` pairs, one per question. Keys ``"1"`` ... ``"5"``
    appear only for categories present; ``"1-4"`` is the mean over every question of
    categories 1-4 (weighted by count, not a mean of the per-category means) and is
    absent when there is none.
    """
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for category, value in records:
        category = _check_category(category)
        value = float(value)
        if not 0.0 <= value <= 1.0:  # also rejects NaN
            raise InvalidInputError(f"recall must lie in [0, 1], got {value!r}")
        sums[category] = sums.get(category, 0.0) + value
        counts[category] = counts.get(category, 0) + 1
    out = {str(c): sums[c] / counts[c] for c in _CATEGORIES if c in counts}
    pooled_n = sum(counts.get(c, 0) for c in _ANSWERABLE)
    if pooled_n:
        out["1-4"] = sum(sums.get(c, 0.0) for c in _ANSWERABLE) / pooled_n
    return out


def percentiles(
    values_ms: Iterable[float], ps: Sequence[float] = (50, 95)
) -> dict[str, float]:
    """Percentiles (numpy's linear interpolation) keyed ``"p50"``, ``"p95"``, ...

    >>> percentiles([10, 20, 30, 40, 50])
    {'p50': 30.0, 'p95': 48.0}
    """
    values = np.asarray(list(values_ms), dtype=float)
    if values.size == 0:
        raise InvalidInputError("no values to take percentiles of")
    if not np.all(np.isfinite(values)):
        raise InvalidInputError("values must be finite numbers")
    out: dict[str, float] = {}
    for p in ps:
        if not 0 <= p <= 100:
            raise InvalidInputError(f"percentile must lie in [0, 100], got {p!r}")
        out[f"p{p:g}"] = float(np.percentile(values, p, method="linear"))
    return out


def gate_rates(records: Iterable[tuple[int, bool]]) -> dict[str, float]:
    """Share of category-5 questions rejected and of category 1-4 questions rejected.

    ``records`` are ``(category, rejected)`` pairs. ``"adversarial_rejection"`` is the
    first share (higher is better), ``"false_refusal"`` the second (lower is better);
    each is 0.0 when there is no question of that kind.
    """
    adversarial = adversarial_rejected = answerable = answerable_rejected = 0
    for category, rejected in records:
        category = _check_category(category)
        if category == _ADVERSARIAL:
            adversarial += 1
            adversarial_rejected += bool(rejected)
        else:
            answerable += 1
            answerable_rejected += bool(rejected)
    return {
        "adversarial_rejection": adversarial_rejected / adversarial if adversarial else 0.0,
        "false_refusal": answerable_rejected / answerable if answerable else 0.0,
    }


def gate_sweep(
    records: Iterable[tuple[int, float]], taus: Sequence[float] = DEFAULT_GATE_TAUS
) -> list[dict[str, float]]:
    """:func:`gate_rates` for each threshold: a question is rejected iff confidence < tau.

    ``records`` are ``(category, confidence)`` pairs. Returns one
    ``{"tau", "adversarial_rejection", "false_refusal"}`` dict per tau, in the given order.
    """
    pairs = [(_check_category(c), float(conf)) for c, conf in records]
    if any(math.isnan(conf) for _, conf in pairs):
        raise InvalidInputError("confidence must not be NaN")
    return [
        {"tau": float(tau), **gate_rates((c, conf < tau) for c, conf in pairs)}
        for tau in taus
    ]

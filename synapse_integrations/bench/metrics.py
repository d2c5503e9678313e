"""Benchmark metrics: recall@k, per-category aggregation, latency percentiles, gate rates.

Pure functions over plain Python values; nothing here knows about the engine. LoCoMo's
categories are its own numbers (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial), and ``"1-4"`` pools the questions of categories 1 to 4;
:func:`mean_by_key` and :func:`refusal_rates` are the same aggregations for any keys
(LongMemEval's question types).

>>> recall_at_k(["D1:1", "D1:2", "D1:3"], ["D1:2", "D2:5"], k=2)
0.5
>>> aggregate_recall([(1, 1.0), (1, 0.0), (4, 1.0)])
{'1': 0.5, '4': 1.0, '1-4': 0.6666666666666666}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..errors import InvalidInputError

__all__ = [
    "DEFAULT_GATE_TAUS",
    "aggregate_recall",
    "gate_rates",
    "gate_sweep",
    "head_to_head",
    "latency_summary",
    "loses",
    "mean_by_group",
    "mean_by_key",
    "newest_above_older",
    "percentiles",
    "recall_at_k",
    "refusal_rates",
    "refusal_sweep",
    "session_recall_at_k",
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


def newest_above_older(ranked_episode_ids: Sequence[str], evidence: Sequence[str],
                       newest: str) -> bool:
    """Whether ``newest`` (the newest evidence turn) ranks above every other evidence turn;
    an unranked turn counts as below every ranked one, so an unranked ``newest`` is never
    above.

    >>> newest_above_older(["b", "x", "a"], ["a", "b"], "b"), newest_above_older(["a"], ["a", "b"], "b")
    (True, False)
    """
    if isinstance(evidence, str) or isinstance(ranked_episode_ids, str):
        raise InvalidInputError("pass sequences of ids, not a single string")
    if newest not in evidence:
        raise InvalidInputError(f"newest {newest!r} is not an evidence turn")
    ranked = list(ranked_episode_ids)
    if newest not in ranked:
        return False
    at = ranked.index(newest)
    return all(e == newest or e not in ranked or ranked.index(e) > at for e in set(evidence))


def session_recall_at_k(ranked_episode_ids: Sequence[str], session_of: Mapping[str, str],
                        sessions: Sequence[str], k: int) -> float:
    """Share of the (deduplicated) ``sessions`` that have a turn among the first ``k``
    ranked ids; ``session_of`` maps a turn id to its session id (ids it does not know
    belong to no session).

    >>> session_recall_at_k(["s1:0", "s3:2", "s2:1"], {"s1:0": "s1", "s2:1": "s2",
    ...                     "s3:2": "s3"}, ["s2", "s9"], k=3)
    0.5
    """
    if isinstance(sessions, str) or isinstance(ranked_episode_ids, str):
        raise InvalidInputError("pass sequences of ids, not a single string")
    wanted = set(sessions)
    if not wanted:
        raise InvalidInputError("session recall is undefined without answer sessions")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}")
    hit = {session_of.get(i) for i in ranked_episode_ids[:k]}
    return len(wanted & hit) / len(wanted)


def mean_by_key(records: Iterable[tuple[str, float]],
                pools: Mapping[str, Iterable[str]] | None = None) -> dict[str, float]:
    """Mean value per key, plus one pooled mean per entry of ``pools`` (name -> the keys
    it pools; weighted by question count, absent when none of its keys occurred).

    >>> mean_by_key([("a", 1.0), ("a", 0.0), ("b", 1.0)], {"a+b": ["a", "b"]})
    {'a': 0.5, 'b': 1.0, 'a+b': 0.6666666666666666}
    """
    def checked(key: str, value: float) -> tuple[str, float]:
        value = float(value)
        if not 0.0 <= value <= 1.0:  # also rejects NaN
            raise InvalidInputError(f"values must lie in [0, 1], got {value!r}")
        return key, value

    return mean_by_group((checked(k, v) for k, v in records), pools)


def mean_by_group(records: Iterable[tuple[str, float]],
                  pools: Mapping[str, Iterable[str]] | None = None) -> dict[str, float]:
    """Mean value per key, plus one mean per pool (name -> the keys it pools, weighted by
    count; absent when none of its keys occurred); any values (counts too).

    >>> mean_by_group([("a", 2.0), ("a", 0.0), ("b", 4.0)], {"all": ["a", "b"]})
    {'a': 1.0, 'b': 4.0, 'all': 2.0}
    """
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for key, value in records:
        sums[key] = sums.get(key, 0.0) + float(value)
        counts[key] = counts.get(key, 0) + 1
    out = {key: sums[key] / counts[key] for key in sums}
    for name, keys in (pools or {}).items():
        keys = list(dict.fromkeys(keys))  # in the order given: a set's order varies by process
        n = sum(counts.get(key, 0) for key in keys)
        if n:
            out[name] = sum(sums.get(key, 0.0) for key in keys) / n
    return out


def loses(mine: float, theirs: float) -> bool:
    """True when a recall of ``mine`` is below ``theirs`` (the same value reached by a
    different float sum is a tie).

    >>> loses(0.5, 1.0), loses(0.1 + 0.2, 0.3), loses(1.0, 0.5)
    (True, False, False)
    """
    return mine < theirs - 1e-12


def head_to_head(pairs: Iterable[tuple[float, float]]) -> dict[str, int]:
    """One method against another, question by question: ``pairs`` holds each question's
    ``(recall of the method, recall of the other)``. ``lost`` counts the questions where
    the method found less evidence than the other, ``won`` more, ``tied`` as much;
    ``missed`` the lost ones where the method found no evidence at all (the user gets
    nothing relevant where the other would have given something).

    An average hides these: a method can be ahead by ten points and still lose a
    question a keyword search answers.

    >>> head_to_head([(0.5, 1.0), (1.0, 0.0), (0.0, 0.5), (1.0, 1.0)])
    {'n': 4, 'lost': 2, 'won': 1, 'tied': 1, 'missed': 1}
    """
    n = lost = won = missed = 0
    for mine, theirs in pairs:
        mine, theirs = float(mine), float(theirs)
        if not (0.0 <= mine <= 1.0 and 0.0 <= theirs <= 1.0):  # also rejects NaN
            raise InvalidInputError(f"recall values must lie in [0, 1], got {(mine, theirs)!r}")
        n += 1
        if loses(mine, theirs):
            lost += 1
            missed += mine == 0.0
        elif loses(theirs, mine):
            won += 1
    return {"n": n, "lost": lost, "won": won, "tied": n - lost - won, "missed": missed}


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


def latency_summary(values_ms: Sequence[float]) -> dict[str, float] | None:
    """:func:`percentiles` and how many values (``"n"``); ``None`` for no value.

    >>> latency_summary([10, 20, 30, 40, 50])
    {'p50': 30.0, 'p95': 48.0, 'n': 5}
    >>> latency_summary([]) is None
    True
    """
    return {**percentiles(values_ms), "n": len(values_ms)} if len(values_ms) else None


def refusal_rates(records: Iterable[tuple[bool, bool]]) -> dict[str, float]:
    """Share of should-refuse questions rejected and of the others rejected.

    ``records`` are ``(should_refuse, rejected)`` pairs. ``"adversarial_rejection"`` is
    the first share (higher is better; LoCoMo's category 5, LongMemEval's abstention
    questions), ``"false_refusal"`` the second (lower is better); each is 0.0 when there
    is no question of that kind.

    >>> refusal_rates([(True, True), (True, False), (False, False)])
    {'adversarial_rejection': 0.5, 'false_refusal': 0.0}
    """
    refuse = refuse_rejected = answerable = answerable_rejected = 0
    for should_refuse, rejected in records:
        if should_refuse:
            refuse += 1
            refuse_rejected += bool(rejected)
        else:
            answerable += 1
            answerable_rejected += bool(rejected)
    return {
        "adversarial_rejection": refuse_rejected / refuse if refuse else 0.0,
        "false_refusal": answerable_rejected / answerable if answerable else 0.0,
    }


def refusal_sweep(
    records: Iterable[tuple[bool, float]], taus: Sequence[float] = DEFAULT_GATE_TAUS
) -> list[dict[str, float]]:
    """:func:`refusal_rates` for each threshold: rejected iff confidence < tau.

    ``records`` are ``(should_refuse, confidence)`` pairs; one ``{"tau",
    "adversarial_rejection", "false_refusal"}`` dict per tau, in the given order.
    """
    pairs = [(bool(r), float(conf)) for r, conf in records]
    if any(math.isnan(conf) for _, conf in pairs):
        raise InvalidInputError("confidence must not be NaN")
    return [{"tau": float(tau), **refusal_rates((r, conf < tau) for r, conf in pairs)}
            for tau in taus]


def gate_rates(records: Iterable[tuple[int, bool]]) -> dict[str, float]:
    """Share of category-5 questions rejected and of category 1-4 questions rejected.

    ``records`` are ``(category, rejected)`` pairs. ``"adversarial_rejection"`` is the
    first share (higher is better), ``"false_refusal"`` the second (lower is better);
    each is 0.0 when there is no question of that kind.
    """
    return refusal_rates((_check_category(c) == _ADVERSARIAL, rejected)
                         for c, rejected in records)


def gate_sweep(
    records: Iterable[tuple[int, float]], taus: Sequence[float] = DEFAULT_GATE_TAUS
) -> list[dict[str, float]]:
    """:func:`gate_rates` for each threshold: a question is rejected iff confidence < tau.

    ``records`` are ``(category, confidence)`` pairs. Returns one
    ``{"tau", "adversarial_rejection", "false_refusal"}`` dict per tau, in the given order.
    """
    return refusal_sweep(((_check_category(c) == _ADVERSARIAL, conf) for c, conf in records),
                         taus)

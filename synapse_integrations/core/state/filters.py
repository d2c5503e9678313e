"""Filters on stored turns: which episodes a retrieval may return (or a forget removes).

:class:`Filter` combines three criteria with AND: ``speakers`` (any of), an event-time
range ``[since, until)``, and ``where``, a condition on the turn's metadata in Chroma's
``where`` language:

- ``{"key": value}``: equality;
- ``{"key": {"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte": value}}``;
- ``{"key": {"$in" | "$nin": [values]}}``;
- ``{"$and": [cond, ...]}``, ``{"$or": [cond, ...]}``;
- several keys in one mapping combine with AND.

A key may be dotted (``"order.status"``) to reach into nested metadata. A comparison with
a missing key is false (``$ne`` and ``$nin``: true). Order comparisons need numbers or
strings of the same kind. A malformed filter raises :class:`InvalidInputError` naming the
problem, before anything is read.

>>> f = Filter.build(where={"topic": {"$in": ["ski", "snow"]}, "year": {"$gte": 2024}})
>>> f.matches({"speaker": "Sam", "ts": 0.0, "metadata": {"topic": "ski", "year": 2024}})
True
>>> f.matches({"speaker": "Sam", "ts": 0.0, "metadata": {"topic": "tax", "year": 2024}})
False
>>> Filter.build(where={"year": {"$gt": "soon"}, "x": {"$regex": "a"}})
Traceback (most recent call last):
...
synapse_integrations.errors.InvalidInputError: where: unknown operator '$regex' for key 'x'; use one of $eq, $gt, $gte, $in, $lt, $lte, $ne, $nin
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...errors import InvalidInputError, InvalidTypeError
from .validation import to_epoch

__all__ = ["Filter", "compile_where"]

_COMPARE = {"$gt", "$gte", "$lt", "$lte"}
_OPERATORS = {"$eq", "$ne", "$in", "$nin"} | _COMPARE
_MAX_DEPTH = 32

Predicate = Callable[[Mapping[str, Any]], bool]
_MISSING = object()


def _lookup(metadata: Mapping[str, Any], key: str) -> Any:
    value: Any = metadata
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _scalar(value: Any, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"where: {where} must be finite, got {value!r}")
    if not isinstance(value, (str, int, float, bool)) and value is not None:
        raise InvalidInputError(f"where: {where} must be a str, number, bool or None, "
                                f"got {type(value).__name__}")


def _ordered(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return (isinstance(a, (int, float)) and isinstance(b, (int, float))) or \
        (isinstance(a, str) and isinstance(b, str))


def _field(key: str, spec: Any) -> Predicate:
    if not isinstance(spec, Mapping):
        _scalar(spec, f"the value of {key!r}")
        return lambda md: _lookup(md, key) == spec
    if not spec:
        raise InvalidInputError(f"where: the condition on {key!r} is empty")
    tests: list[Predicate] = []
    for op, operand in spec.items():
        if op not in _OPERATORS:
            raise InvalidInputError(f"where: unknown operator {op!r} for key {key!r}; use one of "
                                    f"{', '.join(sorted(_OPERATORS))}")
        if op in ("$in", "$nin"):
            if isinstance(operand, (str, bytes)) or not isinstance(operand, Iterable):
                raise InvalidInputError(f"where: {op} on {key!r} needs a list of values")
            values = list(operand)
            for v in values:
                _scalar(v, f"a value of {op} on {key!r}")
            tests.append((lambda vs: lambda md: _lookup(md, key) in vs)(values) if op == "$in"
                         else (lambda vs: lambda md: _lookup(md, key) not in vs)(values))
            continue
        _scalar(operand, f"the operand of {op} on {key!r}")
        if op == "$eq":
            tests.append(lambda md, v=operand: _lookup(md, key) == v)
        elif op == "$ne":
            tests.append(lambda md, v=operand: _lookup(md, key) != v)
        else:
            if operand is None or isinstance(operand, bool):
                raise InvalidInputError(f"where: {op} on {key!r} needs a number or a string, "
                                        f"got {operand!r}")
            cmp = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b,
                   "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}[op]
            tests.append(lambda md, v=operand, c=cmp: (
                (x := _lookup(md, key)) is not _MISSING and _ordered(x, v) and c(x, v)))
    return lambda md: all(t(md) for t in tests)


def compile_where(where: Mapping[str, Any], depth: int = 0) -> Predicate:
    """A predicate over a metadata dict for a Chroma-style ``where`` (see the module)."""
    if depth > _MAX_DEPTH:
        raise InvalidInputError(f"where: nested more than {_MAX_DEPTH} levels deep")
    if not isinstance(where, Mapping):
        raise InvalidTypeError(f"where must be a mapping, got {type(where).__name__}")
    if not where:
        raise InvalidInputError("where is empty: it would match everything; pass None for no "
                                "metadata filter")
    parts: list[Predicate] = []
    for key, spec in where.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"where: keys must be non-empty strings, got {key!r}")
        if key in ("$and", "$or"):
            if isinstance(spec, (str, bytes, Mapping)) or not isinstance(spec, Iterable):
                raise InvalidInputError(f"where: {key} needs a list of conditions")
            subs = [compile_where(c, depth + 1) for c in spec]
            if not subs:
                raise InvalidInputError(f"where: {key} needs at least one condition")
            parts.append((lambda ss: lambda md: all(s(md) for s in ss))(subs) if key == "$and"
                         else (lambda ss: lambda md: any(s(md) for s in ss))(subs))
        elif key.startswith("$"):
            raise InvalidInputError(f"where: unknown operator {key!r} at the top level; use "
                                    f"$and, $or or a metadata key")
        else:
            parts.append(_field(key, spec))
    return lambda md: all(p(md) for p in parts)


@dataclass(frozen=True)
class Filter:
    """Which turns match: ``speakers`` (any of), event time in ``[since, until)``, and a
    metadata condition (see the module docstring). Build it with :meth:`build`."""

    speakers: frozenset[str] | None = None
    since: float | None = None
    until: float | None = None
    where: Predicate | None = None

    @classmethod
    def build(cls, *, speakers: Iterable[str] | str | None = None,
              since: datetime | float | str | None = None,
              until: datetime | float | str | None = None,
              where: Mapping[str, Any] | None = None) -> Filter | None:
        """A validated filter, or None when no criterion is given."""
        if speakers is not None:
            if isinstance(speakers, str):
                speakers = [speakers]
            if not isinstance(speakers, Iterable):
                raise InvalidTypeError(f"speakers must be a str or a list of str, got "
                                       f"{type(speakers).__name__}")
            speakers = list(speakers)
            if not speakers or not all(isinstance(s, str) for s in speakers):
                raise InvalidInputError("speakers must be a non-empty list of str")
        lo = None if since is None else to_epoch(since)
        hi = None if until is None else to_epoch(until)
        if lo is not None and hi is not None and lo >= hi:
            raise InvalidInputError(f"since ({since!r}) must be before until ({until!r})")
        predicate = None if where is None else compile_where(where)
        if speakers is None and lo is None and hi is None and predicate is None:
            return None
        return cls(None if speakers is None else frozenset(speakers), lo, hi, predicate)

    def matches(self, node: Mapping[str, Any]) -> bool:
        """Does an episode (its attributes: ``speaker``, ``ts``, ``metadata``) match?"""
        if self.speakers is not None and node.get("speaker") not in self.speakers:
            return False
        if self.since is not None or self.until is not None:
            ts = node.get("ts")
            if ts is None or (self.since is not None and ts < self.since) or \
                    (self.until is not None and ts >= self.until):
                return False
        return self.where is None or self.where(node.get("metadata") or {})

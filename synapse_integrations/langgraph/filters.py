"""The ``filter`` of :meth:`~.store.SynapseStore.search`: conditions on the item's value
with the operators LangGraph documents (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
``$lte``), and two reserved keys that read the store in time (:data:`AS_OF`,
:data:`CURRENT_ONLY`).

>>> matches({"kind": "pref", "n": 3}, {"kind": "pref", "n": {"$gte": 2}})
True
>>> time_of({"kind": "pref", AS_OF: "2024-02-15", CURRENT_ONLY: True})
({'kind': 'pref'}, 1707955200.0, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.state import validity
from ..core.state.validation import to_epoch
from ..errors import InvalidTypeError

__all__ = ["AS_OF", "CURRENT_ONLY", "compare", "held", "matches", "time_of", "with_time"]

#: Reserved ``filter`` key of :meth:`SynapseStore.search`: read the store as it stood at
#: this time (a datetime, epoch seconds or an ISO 8601 string): items written later are
#: left out. ``$``-prefixed, like LangGraph's operators, so no value field is shadowed.
AS_OF = "$as_of"
#: Reserved ``filter`` key of :meth:`SynapseStore.search`: ``True`` leaves out versions
#: known to be replaced (``Synapse.supersede`` / ``update`` on the namespace's memory).
CURRENT_ONLY = "$current_only"
_OPS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}


def compare(actual: Any, expected: Any) -> bool:
    """One filter condition, with the operators LangGraph documents ($eq, $ne, $gt, ...)."""
    if isinstance(expected, Mapping) and expected and all(str(k).startswith("$") for k in expected):
        for op, operand in expected.items():
            if op not in _OPS:
                raise ValueError(f"unsupported filter operator {op!r}; use one of {sorted(_OPS)}")
            if op == "$eq" and actual != operand or op == "$ne" and actual == operand:
                return False
            if op in ("$gt", "$gte", "$lt", "$lte"):
                try:
                    a, b = float(actual), float(operand)
                except (TypeError, ValueError):
                    return False
                if not {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]:
                    return False
        return True
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(compare(actual.get(k), v) for k, v in expected.items())
    return actual == expected


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return not filter or all(compare(value.get(k), v) for k, v in filter.items())


def time_of(filter: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, float | None, bool]:
    """``filter`` without the reserved time keys, and what they say: ``(value filter,
    as_of in epoch seconds or None, current_only)``; a bad value raises naming the key."""
    if not filter or (AS_OF not in filter and CURRENT_ONLY not in filter):
        return (dict(filter) if filter else None), None, False
    rest = {k: v for k, v in filter.items() if k not in (AS_OF, CURRENT_ONLY)}
    current_only = filter.get(CURRENT_ONLY, False)
    if not isinstance(current_only, bool):
        raise InvalidTypeError(f"filter[{CURRENT_ONLY!r}] must be a bool, got "
                               f"{type(current_only).__name__}")
    as_of = filter.get(AS_OF)
    try:
        epoch = None if as_of is None else to_epoch(as_of)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"filter[{AS_OF!r}]: {exc}") from None
    return rest or None, epoch, current_only


def with_time(filter: dict[str, Any] | None, as_of: Any, current_only: Any
               ) -> dict[str, Any] | None:
    """``filter`` with the keywords ``as_of`` / ``current_only`` as its reserved keys."""
    if as_of is None and current_only is False:
        return filter
    return {**(filter or {}), **({AS_OF: as_of} if as_of is not None else {}),
            **({CURRENT_ONLY: current_only} if current_only is not False else {})}


def held(node: Mapping[str, Any], as_of: float | None, current_only: bool) -> bool:
    """A stored version is part of a read as of ``as_of`` (it had started) and, with
    ``current_only``, still held then (:mod:`~synapse_integrations.core.state.validity`)."""
    if as_of is not None and not validity.existed(node, as_of):
        return False
    return not (current_only and validity.replaced(node, as_of))

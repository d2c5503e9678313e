"""Structures derived from a compiled view (core/graph/graph.py: ``Compiled``), cached with it.

A retrieval reads many structures computed from the view: a model's k-NN graph, which
turn answers which question, whose role each turn is. Each is built once per view by
``build(view)`` and dropped with the view when the graph changes. A write that only
appends to the graph *extends* the view instead of rebuilding it (issue 10: a fast first
query after writes), and a structure that says how it grows is taken over by the new
view: ``grow(value, view, m)`` returns it for ``view`` from ``value``, the one built for
its first ``m`` nodes, computing for the new nodes alone. That is only for structures
that read node attributes and ``is_episode``, which an extension leaves as they were for
the old nodes (its edges and vectors may change); ``grow`` reads the view it is given,
never one it closes over. A structure taken over is grown when it is next asked for, so a
view that is extended again before that passes it on as it is.

A write that takes nodes out (the lifecycle's archive, forgetting) *shrinks* the view: the
nodes left keep their order and move up. A structure that says how it shrinks is taken
over by that view too: ``shrink(value, keep, remap)`` returns it for the nodes ``keep``
marks (a bool per old node), ``remap`` giving each old node's new position (-1 for a node
gone). That is for values that belong to one node each, or name nodes by position (which
``remap`` moves); a structure that reads a node's neighbours in some order (which turn
answers which question) is built again instead, as is one taken over and not grown yet.

>>> cache = Derived()
>>> cache.get(["a"], "copy", list, grow=lambda old, view, m: old + view[m:])
['a']
>>> later = Derived()
>>> later.carry(cache.growing(1))
>>> later.get(["a", "b"], "copy", list)
['a', 'b']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Derived", "Grow", "Shrink"]

#: ``grow(value, view, m)``: the structure for ``view`` from the one for its first ``m`` nodes.
Grow = Callable[[Any, Any, int], Any]
#: ``shrink(value, keep, remap)``: the structure for the nodes ``keep`` marks (module docstring).
Shrink = Callable[[Any, Any, Any], Any]


class Derived:
    """The derived structures of one view, and those taken over from the view it extends
    (not grown yet)."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._growers: dict[str, Grow] = {}
        self._shrinkers: dict[str, Shrink] = {}
        self._carried: dict[str, tuple[Any, Grow, int]] = {}

    def get(self, view: Any, key: str, build: Callable[[Any], Any],
            grow: Grow | None = None, shrink: Shrink | None = None) -> Any:
        """The structure ``key`` of ``view``: built by ``build(view)``, or grown from the one
        taken over (module docstring), once; ``grow`` and ``shrink`` are how it grows and
        shrinks in turn."""
        if key not in self._values:
            carried = self._carried.pop(key, None)
            self._values[key] = build(view) if carried is None \
                else carried[1](carried[0], view, carried[2])
            if grow is not None:
                self._growers[key] = grow
            if shrink is not None:
                self._shrinkers[key] = shrink
        return self._values[key]

    def set(self, key: str, value: Any) -> Any:
        """Replace the structure ``key`` (one cached for another input: it keeps its grow)."""
        self._values[key] = value
        return value

    def growing(self, n: int) -> list[tuple[str, Any, Grow, int]]:
        """What a view that extends this one (of ``n`` nodes) takes over, as ``(key,
        value, grow, nodes the value covers)``."""
        return [(key, *entry) for key, entry in self._carried.items()] + [
            (key, value, self._growers[key], n)
            for key, value in self._values.items() if key in self._growers]

    def shrinking(self, keep: Any, remap: Any) -> list[tuple[str, Any, Grow | None, Shrink]]:
        """What a view of this one's nodes that ``keep`` marks takes over: each structure
        built here that says how it shrinks, shrunk, as ``(key, value, grow, shrink)``.

        >>> cache = Derived()
        >>> cache.get("abc", "upper", str.upper, shrink=lambda v, keep, remap: "".join(
        ...     c for c, k in zip(v, keep) if k))
        'ABC'
        >>> cache.get("abc", "length", len)  # says nothing of shrinking: built again
        3
        >>> later = Derived()
        >>> later.adopt(cache.shrinking([True, False, True], [0, -1, 1]))
        >>> later.get("ac", "upper", str.upper), later.get("ac", "length", len)
        ('AC', 2)
        """
        return [(key, self._shrinkers[key](value, keep, remap), self._growers.get(key),
                 self._shrinkers[key])
                for key, value in self._values.items() if key in self._shrinkers]

    def adopt(self, shrunk: Iterable[tuple[str, Any, Grow | None, Shrink]]) -> None:
        """Take over the :meth:`shrinking` structures of the view this one shrinks."""
        for key, value, grow, shrink in shrunk:
            self._values[key] = value
            self._shrinkers[key] = shrink
            if grow is not None:
                self._growers[key] = grow

    def carry(self, growing: Iterable[tuple[str, Any, Grow, int]]) -> None:
        """Take over the :meth:`growing` structures of the view this one extends."""
        self._carried.update((key, (value, grow, m)) for key, value, grow, m in growing)

    def drop(self, prefix: str = "", *, keep: tuple[str, ...] = ()) -> None:
        """Forget the structures whose key starts with ``prefix`` (all by default), but
        those in ``keep``; they are built again when next asked."""
        for table in (self._values, self._carried):
            for key in [k for k in table if k.startswith(prefix) and k not in keep]:
                del table[key]

"""Structures derived from a compiled view (core/graph.py: ``Compiled``), cached with it.

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

__all__ = ["Derived", "Grow"]

#: ``grow(value, view, m)``: the structure for ``view`` from the one for its first ``m`` nodes.
Grow = Callable[[Any, Any, int], Any]


class Derived:
    """The derived structures of one view, and those taken over from the view it extends
    (not grown yet)."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._growers: dict[str, Grow] = {}
        self._carried: dict[str, tuple[Any, Grow, int]] = {}

    def get(self, view: Any, key: str, build: Callable[[Any], Any],
            grow: Grow | None = None) -> Any:
        """The structure ``key`` of ``view``: built by ``build(view)``, or grown from the one
        taken over (module docstring), once; ``grow`` is how it grows in turn."""
        if key not in self._values:
            carried = self._carried.pop(key, None)
            self._values[key] = build(view) if carried is None \
                else carried[1](carried[0], view, carried[2])
            if grow is not None:
                self._growers[key] = grow
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

    def carry(self, growing: Iterable[tuple[str, Any, Grow, int]]) -> None:
        """Take over the :meth:`growing` structures of the view this one extends."""
        self._carried.update((key, (value, grow, m)) for key, value, grow, m in growing)

    def drop(self, prefix: str = "", *, keep: tuple[str, ...] = ()) -> None:
        """Forget the structures whose key starts with ``prefix`` (all by default), but
        those in ``keep``; they are built again when next asked."""
        for table in (self._values, self._carried):
            for key in [k for k in table if k.startswith(prefix) and k not in keep]:
                del table[key]

"""Forgetting: which nodes an erasure removes.

:func:`select` turns the criteria of :meth:`Synapse.forget` (ids, speaker, event-time
range, metadata equality, everything) into the list of node ids to remove. Criteria
combine with AND. Besides the matching episodes it names the concepts that must go with
them: a concept whose every supporting episode goes, and a concept whose name, an alias or
a string attribute occurs in forgotten text but in none of the episodes it keeps (a
concept must not keep a forgotten word alive). Archived nodes count like active ones.

The erasure itself (journal, stores, snapshots, Chroma's files) is run by the engine:
see :meth:`synapse_integrations.Synapse.forget` and docs/safety.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError, InvalidTypeError
from .state import MemoryState
from .validation import to_epoch

__all__ = ["select"]


def select(
    state: MemoryState,
    ids: Sequence[str] | None = None,
    *,
    speaker: str | None = None,
    since: datetime | float | str | None = None,
    until: datetime | float | str | None = None,
    where: Mapping[str, Any] | None = None,
    everything: bool = False,
) -> list[str]:
    """The node ids a forget with these criteria removes (see the module docstring).
    Raises on criteria that are missing or malformed; changes nothing."""
    if not everything and ids is None and speaker is None and since is None \
            and until is None and where is None:
        raise InvalidInputError("forget() needs ids, a filter, or everything=True")
    if ids is not None and (isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable)):
        raise InvalidTypeError("forget(ids=...) takes a list of ids, not a single str")
    ids = list(ids) if ids is not None else None
    if ids is not None and not all(isinstance(i, str) for i in ids):
        raise InvalidTypeError("forget(ids=...): every id must be a str")
    if speaker is not None and not isinstance(speaker, str):
        raise InvalidTypeError(f"speaker must be a str, got {type(speaker).__name__}")
    if where is not None and not isinstance(where, Mapping):
        raise InvalidTypeError(f"where must be a mapping, got {type(where).__name__}")
    if not isinstance(everything, bool):
        raise InvalidTypeError("everything must be a bool")
    lo = to_epoch(since) if since is not None else -math.inf
    hi = to_epoch(until) if until is not None else math.inf
    idset = set(ids) if ids is not None else None
    g = state.graph
    candidates = [(n, d) for n, d in g.g.nodes(data=True)]
    candidates += [(n, rec["node"]) for n, rec in g.archive.items()]
    doomed = []
    for n, d in candidates:
        if idset is not None and n not in idset:
            continue
        if everything or idset is not None and d["kind"] == "concept":
            doomed.append(n)
            continue
        if d["kind"] != "episode":
            continue
        if speaker is not None and d.get("speaker") != speaker:
            continue
        ts = d.get("ts")
        if (since is not None or until is not None) and (ts is None or not lo <= ts < hi):
            continue
        if where is not None and any((d.get("metadata") or {}).get(key) != v
                                     for key, v in where.items()):
            continue
        doomed.append(n)
    if idset is not None:  # ids known only to Chroma (written before a crash) go too
        doomed += [i for i in idset if i not in g.g and i not in g.archive]
    if everything:  # also vectors that no node names (left by a crash)
        doomed += state.vectors.active.get()[0] + state.vectors.archive.get()[0]
    doomed += _orphaned_concepts(state, set(doomed))
    return list(dict.fromkeys(doomed))


def _orphaned_concepts(state: MemoryState, doomed: set[str]) -> list[str]:
    """Concepts (active or archived) that would outlive the text they came from."""
    g = state.graph

    def kind_of(n: str) -> str | None:
        if n in g.g:
            return g.g.nodes[n].get("kind")
        rec = g.archive.get(n)
        return rec["node"].get("kind") if rec else None

    def text_of(n: str) -> str:
        d = g.g.nodes[n] if n in g.g else g.archive[n]["node"]
        return str(d.get("text", "")).casefold()

    def orphaned(node: Mapping[str, Any], nbrs: set[str]) -> bool:
        # a concept goes when every supporting episode goes, or when its name or an alias
        # occurs in forgotten text but in none of the episodes it keeps
        support = [e for e in nbrs if kind_of(e) == "episode"]
        gone = [e for e in support if e in doomed]
        if not gone:
            return False
        kept = [text_of(e) for e in support if e not in doomed]
        if not kept:
            return True
        said = [text_of(e) for e in gone]
        attrs = node.get("attributes") or {}
        terms = {str(t).casefold() for t in [node.get("text", ""), *node.get("aliases", []),
                                             *(v for v in attrs.values() if isinstance(v, str))]}
        return any(t and any(t in x for x in said) and not any(t in x for x in kept)
                   for t in terms)

    # an archived node keeps its edges in its archive record
    archived_links: dict[str, set[str]] = {}
    for n, rec in g.archive.items():
        for u, v, _ in rec["edges"]:
            archived_links.setdefault(v if u == n else u, set()).add(n)
    out = []
    for n, d in list(g.g.nodes(data=True)):
        if d["kind"] == "concept" and n not in doomed and \
                orphaned(d, set(g.g.predecessors(n)) | set(g.g.successors(n))
                         | archived_links.get(n, set())):
            out.append(n)
    for n, rec in list(g.archive.items()):
        if rec["node"].get("kind") == "concept" and n not in doomed and \
                orphaned(rec["node"], {u if v == n else v for u, v, _ in rec["edges"]}):
            out.append(n)
    return out

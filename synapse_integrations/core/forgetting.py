"""Forgetting: which nodes an erasure removes.

:func:`select` turns the criteria of :meth:`Synapse.forget` (ids, speaker, event-time
range, a metadata filter, everything) into the list of node ids to remove. Criteria
combine with AND; the filter language is the one retrieval uses
(:mod:`synapse_integrations.core.filters`: ``$eq``, ``$in``, ``$gte``, ``$or``...), and an
empty filter is refused (it would match everything; ``everything=True`` says that).

Besides the matching episodes it names the concepts that must go with them: a concept
goes when its name or an alias is justified only by forgotten turns, according to the
turns each was extracted from (:mod:`synapse_integrations.core.provenance`), whatever
the extractor called it (its attributes and relations said only by forgotten turns are
removed from a concept that stays).
Concepts written before provenance was recorded fall back to the older rule: every
linked episode goes, or a name, alias or string attribute occurs in forgotten text but
in none of the episodes it keeps. Archived nodes count like active ones.

The erasure itself (journal, tombstones, stores, snapshots, Chroma's files) is run by the
engine: see :meth:`synapse_integrations.Synapse.forget` and docs/safety.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError, InvalidTypeError
from . import provenance
from .filters import Filter
from .state import MemoryState

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
    if not isinstance(everything, bool):
        raise InvalidTypeError("everything must be a bool")
    # the filter retrieval uses: where={} is refused, operators work the same way
    flt = Filter.build(speakers=speaker, since=since, until=until, where=where)
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
        if flt is not None and not flt.matches(d):
            continue
        doomed.append(n)
    if idset is not None:  # ids known only to Chroma (written before a crash) go too
        doomed += [i for i in idset if i not in g.g and i not in g.archive]
    if everything:  # also vectors that no node names (left by a crash)
        doomed += state.vectors.active.get()[0] + state.vectors.archive.get()[0]
    doomed += _orphaned_concepts(state, set(doomed))
    return list(dict.fromkeys(doomed))


def _unjustified(node: Mapping[str, Any], dead: Any) -> bool:
    """A concept with provenance goes when one of its names (its name, an alias: the
    vector is made from them) would be justified by no remaining turn. Attributes only
    forgotten turns said are stripped by the removal itself (:meth:`MemoryState.remove`)."""
    return any(not provenance.justified(e, dead) for e in (node.get("sources") or {}).values())


def _orphaned_concepts(state: MemoryState, doomed: set[str]) -> list[str]:
    """Concepts (active or archived) that would outlive the turns they came from."""
    g = state.graph

    def dead(i: str) -> bool:
        return i in doomed or not state.knows(i)

    def kind_of(n: str) -> str | None:
        if n in g.g:
            return g.g.nodes[n].get("kind")
        rec = g.archive.get(n)
        return rec["node"].get("kind") if rec else None

    def text_of(n: str) -> str:
        d = g.g.nodes[n] if n in g.g else g.archive[n]["node"]
        return str(d.get("text", "")).casefold()

    def legacy_orphaned(node: Mapping[str, Any], nbrs: set[str]) -> bool:
        # written before provenance: every linked episode goes, or a name, alias or string
        # attribute occurs in forgotten text but in none of the episodes it keeps
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

    def orphaned(node: Mapping[str, Any], nbrs: Any) -> bool:
        if "sources" in node:
            return _unjustified(node, dead)
        return legacy_orphaned(node, nbrs())

    # an archived node keeps its edges in its archive record
    archived_links: dict[str, set[str]] = {}
    for n, rec in g.archive.items():
        for u, v, _ in rec["edges"]:
            archived_links.setdefault(v if u == n else u, set()).add(n)
    out = []
    for n, d in list(g.g.nodes(data=True)):
        if d["kind"] == "concept" and n not in doomed and orphaned(
                d, lambda n=n: set(g.g.predecessors(n)) | set(g.g.successors(n))
                | archived_links.get(n, set())):
            out.append(n)
    for n, rec in list(g.archive.items()):
        if rec["node"].get("kind") == "concept" and n not in doomed and orphaned(
                rec["node"], lambda rec=rec, n=n: {u if v == n else v for u, v, _ in rec["edges"]}):
            out.append(n)
    return out

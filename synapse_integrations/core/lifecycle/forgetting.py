"""Forgetting: which nodes an erasure removes.

:func:`select` turns the criteria of :meth:`Synapse.forget` (ids, speaker, event-time
range, a metadata filter, everything) into the list of node ids to remove. Criteria
combine with AND; the filter language is the one retrieval uses
(:mod:`synapse_integrations.core.state.filters`: ``$eq``, ``$in``, ``$gte``, ``$or``...), and an
empty filter is refused (it would match everything; ``everything=True`` says that).

Besides the matching episodes it names the concepts that must go with them: a concept
goes when its name or an alias is justified only by forgotten turns, according to the
turns each was extracted from (:mod:`synapse_integrations.core.graph.provenance`), whatever
the extractor called it (its attributes and relations said only by forgotten turns are
removed from a concept that stays).
Concepts written before provenance was recorded fall back to the older rule: every
linked episode goes, or a name, alias or string attribute occurs in forgotten text but
in none of the episodes it keeps. Archived nodes count like active ones.

:class:`Eraser` runs the erasure itself, in this order: the ids go to the forget journal
(a crash is finished on the next open), then to the record of forgotten ids
(tombstones, in Chroma: every engine and every later open honours them), then out of
every store and cache, then a fresh snapshot replaces every older one and Chroma's files
are scrubbed, then the journal is cleared. See docs/safety.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from ...errors import InvalidInputError, InvalidTypeError, StorageError
from ...storage.journal import ForgetJournal
from ...storage.snapshots import SnapshotStore
from ..graph import provenance
from ..state.filters import Filter
from ..state.state import MemoryState

logger = logging.getLogger(__name__)

__all__ = ["READ_SYNC_BACKOFF", "READ_SYNC_SECONDS", "Eraser", "asked_for", "select"]

#: How often a read of an engine on a shared client checks for other engines' forgets.
READ_SYNC_SECONDS = 2.0
#: How long reads skip that check after it failed (a server down or hung).
READ_SYNC_BACKOFF = 30.0


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



def asked_for(state: MemoryState, doomed: list[str], ids: Sequence[str] | None) -> list[str]:
    """Which of the ``doomed`` nodes a forget was asked for: the episodes that matched and
    any node named by id; the rest (concepts only they supported) are derived."""
    named = set(ids or ())
    return [n for n in doomed if n in named or state.any_node(n).get("kind") == "episode"]

class Ledger(Protocol):
    """A record kept by node id beside the stores (the dormancy ledger, the retry ledger)."""

    def discard(self, ids: Iterable[str]) -> None: ...


class NameCache(Protocol):
    """The concept-name cache: names, and the texts that mention them."""

    def discard(self, names: Iterable[str]) -> None: ...

    def discard_mentioned(self, texts: Iterable[str]) -> int: ...


class Eraser:
    """Runs erasures on one memory (see the module docstring); the engine holds its lock.
    ``ledgers`` and ``names``: what the write path keeps by id and by name beside the
    stores, which an erased node leaves too."""

    def __init__(self, state: MemoryState, snapshots: SnapshotStore, journal: ForgetJournal,
                 ledgers: Sequence[Ledger], names: NameCache, *,
                 save: Callable[[], int]) -> None:
        self.state = state
        self.snapshots = snapshots
        self.journal = journal
        self.ledgers = tuple(ledgers)
        self.names = names
        self.save = save
        self._next_read_sync = 0.0

    def erase(self, doomed: list[str]) -> list[str]:
        """Forget ``doomed`` for good; returns the ids that existed."""
        self.journal.write(doomed)  # write-ahead: a crash is finished on the next open
        self.state.record_tombstones(doomed)  # every engine and every open will know
        removed = self.remove(doomed)
        self.state.refresh_pagerank()
        self.finish(doomed)
        return removed

    def remove(self, ids: list[str]) -> list[str]:
        """``ids`` out of every store and every ledger, their texts and concept names out
        of the concept-name cache."""
        state = self.state
        known = [state.any_node(i) for i in ids if state.knows(i)]
        texts = [d.get("text", "") for d in known]
        names = [a for d in known for a in d.get("aliases", ())]
        removed = state.remove(ids)
        for ledger in self.ledgers:
            ledger.discard(ids)
        self.names.discard(names)
        self.names.discard_mentioned(texts)
        return removed

    def finish(self, ids: list[str]) -> None:
        """A fresh snapshot, every older version and temp folder deleted, deleted text
        scrubbed from Chroma's files, then the journal removed."""
        version = self.save()
        for v in self.snapshots.versions():
            if v != version:
                try:
                    self.snapshots.delete(v)
                except OSError as exc:
                    raise StorageError(f"could not delete old snapshot v{v:06d} holding forgotten "
                                       f"text: {exc}") from exc
        self.snapshots.clean_leftovers()
        self.state.vectors.scrub(ids)
        self.journal.clear()

    def sync(self, *, best_effort: bool = False) -> None:
        """Another engine on the same Chroma (another process on a server) may have
        forgotten something this one still holds: drop it here too, and from this
        engine's snapshots. Reads pass ``best_effort``: they check at most every
        :data:`READ_SYNC_SECONDS`, not for :data:`READ_SYNC_BACKOFF` seconds after a check
        failed, and never fail for it (a hung server must not hold up reads served from
        memory)."""
        state = self.state
        now = time.monotonic()
        if best_effort and now < self._next_read_sync:
            return  # reads check at most every READ_SYNC_SECONDS, and not while the server fails
        try:
            changed = state.read_tombstones(if_changed=True)
        except StorageError:
            self._next_read_sync = now + READ_SYNC_BACKOFF
            if best_effort:
                return
            raise
        self._next_read_sync = now + READ_SYNC_SECONDS
        if not changed:
            return
        dead = state.dead_nodes()
        if dead:
            logger.warning("dropping %d node(s) forgotten by another engine", len(dead))
            self.journal.write(dead)
            self.remove(dead)
            state.refresh_pagerank()
            self.finish(dead)

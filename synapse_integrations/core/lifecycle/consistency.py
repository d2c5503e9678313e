"""Do the stores agree? :func:`verify` checks; :func:`repair` fixes.

A memory is four copies of one truth: the graph (the record, saved in snapshots), the two
Chroma collections (active and archive: vectors, texts, metadata), the BM25 index and the
in-memory vectors. A crash between two writes, a storage error or a damaged file can leave
them out of step. Each check below finds one kind of disagreement, says it in words, and
knows how to fix it; :func:`verify` runs the finders only, :func:`repair` runs each finder
then its fix, in order (a fix can change what the next finder sees: an episode found only
in Chroma is re-attached to the graph before the archive is checked).

What repair never does: drop an episode that Chroma holds (it re-attaches it), keep a
concept vector no node names (concepts are re-extracted from their turns), or bring back
anything forgotten: the record of forgotten ids (``state.tombstones``, kept in Chroma) is
checked first, and a node or Chroma row it names is removed, never re-embedded or
re-attached, whichever engine or open finds it.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...config import SynapseConfig
from ...storage.vectors import ChromaVectors
from ...types import ConsistencyReport
from ..graph.graph import EDGE_KINDS
from ..state.state import MemoryState
from ..state.validation import check_depth, epoch_ok
from ..text.documents import row_document

logger = logging.getLogger(__name__)

__all__ = ["after_repair", "repair", "verify"]


def open_vectors(client: Any, namespace: str, sqlite: Path | None,
                 embed: Callable[[Sequence[str]], Any], config: SynapseConfig) -> ChromaVectors:
    """The namespace's Chroma collections. A corrupt HNSW index must never reach Chroma's
    native code (it can crash the process): it is set aside first, and its collection is
    rebuilt from the rows Chroma's database still holds, embedded again from what the
    embedder reads for them (:mod:`.documents`). ``sqlite``: the database file of a
    persistent client (None: nothing to check)."""
    broken = ChromaVectors.set_aside_broken_indexes(sqlite, namespace) if sqlite else {}
    vectors = ChromaVectors(client, namespace, sqlite_path=sqlite)
    if broken:
        vectors.rebuild(list(broken), embed, row_document(config.speaker_in_document))
        for folder in broken.values():
            shutil.rmtree(folder, ignore_errors=True)
    return vectors


@dataclass
class _Stores:
    """One read of both Chroma collections (updated by the fixes as they write)."""

    state: MemoryState
    embedder: Any = None
    ids: list[str] = field(default_factory=list)
    vec: dict[str, np.ndarray] = field(default_factory=dict)
    a_ids: list[str] = field(default_factory=list)
    avec: dict[str, np.ndarray] = field(default_factory=dict)
    attached: list[str] = field(default_factory=list)  # episodes re-attached by repair
    forgotten: list[str] = field(default_factory=list)  # forgotten nodes dropped by repair

    @classmethod
    def read(cls, state: MemoryState, embedder: Any = None) -> _Stores:
        ids, matrix, _ = state.vectors.active.get()
        a_ids, a_matrix, _ = state.vectors.archive.get()
        return cls(state, embedder, ids, dict(zip(ids, matrix)), a_ids, dict(zip(a_ids, a_matrix)))

    def good(self, v: Any) -> bool:
        dim = self.state.config.embedding_dim
        return v is not None and np.shape(v) == (dim,) and bool(np.all(np.isfinite(v)))


@dataclass(frozen=True)
class _Check:
    find: Callable[[_Stores], list[Any]]
    problem: Callable[[list[Any]], str]
    fix: Callable[[_Stores, list[Any]], list[str]] | None = None


# -- the stores -----------------------------------------------------------------------------
def _find_forgotten(s: _Stores) -> list[str]:
    return s.state.dead_nodes()


def _fix_forgotten(s: _Stores, dead: list[str]) -> list[str]:
    # out of the graph only: a Chroma row of the same id is judged by its own generation
    # (deleted below when forgotten, re-attached when written again after the forget)
    s.state.remove(dead, chroma=False)
    s.forgotten += dead
    return [f"dropped {len(dead)} forgotten node(s) still held in the graph"]


def _find_both(s: _Stores) -> list[str]:
    g = s.state.graph
    return [n for n in g.archive if n in g.g]


def _fix_both(s: _Stores, both: list[str]) -> list[str]:
    for n in both:
        s.state.graph.archive.pop(n, None)
    return [f"dropped the stale archive record of {len(both)} active node(s)"]


def _find_bad_edges(s: _Stores) -> list[tuple[str, str]]:
    return [(u, v) for u, v, d in s.state.graph.g.edges(data=True)
            if d.get("kind") not in EDGE_KINDS or not isinstance(d.get("weight"), (int, float))
            or not math.isfinite(d.get("weight"))]


def _fix_bad_edges(s: _Stores, bad: list[tuple[str, str]]) -> list[str]:
    s.state.graph.g.remove_edges_from(bad)
    return [f"removed {len(bad)} bad edge(s)"]


def _find_bad_nodes(s: _Stores) -> list[str]:
    return [n for n, d in s.state.graph.g.nodes(data=True)
            if d.get("kind") not in ("episode", "concept") or not isinstance(d.get("text"), str)]


def _find_missing(s: _Stores) -> list[str]:
    return [n for n in s.state.graph.g.nodes if n not in s.vec]


def _fix_missing(s: _Stores, missing: list[str]) -> list[str]:
    g = s.state.graph
    embs, reembed = [], []
    for n in missing:
        h = g.vectors.get(n)
        h = h if s.good(h) else s.avec.get(n)
        if not s.good(h):
            reembed.append(n)
        embs.append(h)
    if reembed:
        new = dict(zip(reembed, s.embedder.embed_documents([s.state.document(g.node(n))
                                                            for n in reembed])))
        embs = [new.get(n, h) for n, h in zip(missing, embs)]
    s.state.upsert_vectors(missing, np.stack(embs))
    s.vec.update(zip(missing, embs))
    return [f"wrote {len(missing)} missing vector(s) to Chroma ({len(reembed)} re-embedded "
            f"from their text)"]


def _find_orphans(s: _Stores) -> list[str]:
    return [i for i in s.ids if i not in s.state.graph.g]


def _fix_orphans(s: _Stores, orphans: list[str]) -> list[str]:
    state, g = s.state, s.state.graph
    actions = []
    misplaced = [i for i in orphans if i in g.archive]
    if misplaced:
        lost = [i for i in misplaced if i not in s.avec]
        if lost:
            state.upsert_archived(lost, np.stack([s.vec[i] for i in lost]))
            s.avec.update((i, s.vec[i]) for i in lost)
        state.vectors.active.delete(misplaced)
        actions.append(f"moved {len(misplaced)} archived node vector(s) out of the active collection")
    rest = [i for i in orphans if i not in g.archive]
    if rest:
        attached, dropped = _reattach(s, rest)
        s.attached += attached
        if attached:
            actions.append(f"re-attached {len(attached)} episode(s) found only in Chroma")
        if dropped:
            actions.append(f"removed {len(dropped)} stray concept vector(s) "
                           f"(re-extracted at the next consolidation)")
    return actions


def _reattach(s: _Stores, orphans: list[str]) -> tuple[list[str], list[str]]:
    """Vectors written to Chroma after the last snapshot: episodes come back into the
    graph (and into the pending window), in their original order; concepts are dropped
    (re-extracted later). Returns (re-attached episode ids, removed ids)."""
    state = s.state
    rows = sorted(state.vectors.active.rows(orphans), key=lambda r: _int((r[2] or {}).get("seq")))
    stale: list[str] = []
    attached: list[str] = []
    for node_id, text, meta in rows:
        fields = _episode_fields(state, text, meta)
        if fields is None or state.dead(node_id, fields["gen"]):
            stale.append(node_id)  # a concept (re-extracted later), or forgotten: never back
            continue
        state.link_episode(node_id, s.vec[node_id], **fields)
        attached.append(node_id)
    if stale:
        state.vectors.active.delete(stale)
    if attached:
        logger.info("re-attached %d episode(s) written after the last snapshot", len(attached))
    return attached, stale


def _episode_fields(state: MemoryState, text: Any, meta: Any) -> dict[str, Any] | None:
    """The turn a Chroma row holds (:meth:`MemoryState.link_episode`'s keywords), each value
    held to what the API accepts; None when the row is no episode, or a forgotten one."""
    meta = meta if isinstance(meta, dict) else {}
    gen = _int(meta.get("gen"))
    if meta.get("kind") != "episode" or not isinstance(text, str):
        return None
    try:
        metadata = json.loads(meta.get("metadata_json", "{}"))
        check_depth(metadata, what="metadata")
    except (ValueError, TypeError, RecursionError):
        metadata = {}
    speaker = meta.get("speaker")
    return {"text": text, "speaker": speaker if isinstance(speaker, str) else None,
            "ts": _epoch(meta.get("ts")), "ingest_ts": _epoch(meta.get("ingest_ts")),
            "metadata": metadata if isinstance(metadata, dict) else {},
            "seq": _int(meta.get("seq")) or None, "gen": gen}


def _int(v: Any) -> int:
    """A non-negative int read from a Chroma row (anything else: 0)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2 ** 53 else 0


def _epoch(v: Any) -> float | None:
    """A timestamp read from a Chroma row, if it is one the API would accept."""
    return float(v) if epoch_ok(v) else None


def _find_archive_missing(s: _Stores) -> list[str]:
    return [n for n in s.state.graph.archive if n not in s.avec]


def _fix_archive_missing(s: _Stores, missing: list[str]) -> list[str]:
    g = s.state.graph
    reembed = [n for n in missing if not s.good(s.vec.get(n))]
    new = dict(zip(reembed, s.embedder.embed_documents(
        [s.state.document(g.archive[n]["node"]) for n in reembed]))) if reembed else {}
    s.state.upsert_archived(missing, np.stack([new[n] if n in new else s.vec[n] for n in missing]))
    return [f"wrote {len(missing)} missing archived vector(s) ({len(reembed)} re-embedded)"]


def _find_archive_orphans(s: _Stores) -> list[str]:
    return [i for i in s.a_ids if i not in s.state.graph.archive]


def _fix_archive_orphans(s: _Stores, orphans: list[str]) -> list[str]:
    """Turns archived after the last snapshot are known again, still archived (their row
    holds the whole turn, :func:`~.state.archived_metadata`); concepts, forgotten turns and
    rows of active nodes go. A turn archived by an older version, whose row has no ``seq``, comes back with the
    text and speaker its row holds."""
    state = s.state
    adopted, stale = [], []
    for node_id, text, meta in state.vectors.archive.rows(orphans):
        fields = _episode_fields(state, text, meta)
        if node_id in state.graph.g or fields is None or state.dead(node_id, fields["gen"]):
            stale.append(node_id)  # active (killed while archiving it), a concept, forgotten
            continue
        state.adopt_archived(node_id, **fields)
        adopted.append(node_id)
    actions = []
    if adopted:
        actions.append(f"re-attached {len(adopted)} archived episode(s) found only in Chroma")
    if stale:
        state.vectors.archive.delete(stale)
        actions.append(f"removed {len(stale)} stray archived vector(s)")
    return actions


#: The store checks, in the order repair runs them.
_STORE_CHECKS: tuple[_Check, ...] = (
    _Check(_find_forgotten, lambda x: f"{len(x)} forgotten node(s) are still held", _fix_forgotten),
    _Check(_find_both, lambda x: f"{len(x)} node(s) both active and archived", _fix_both),
    _Check(_find_bad_edges, lambda x: f"{len(x)} edge(s) with a bad kind or weight", _fix_bad_edges),
    _Check(_find_bad_nodes, lambda x: f"{len(x)} node(s) without a valid kind/text: {x[:5]}"),
    _Check(_find_missing, lambda x: f"{len(x)} graph node(s) have no vector in Chroma", _fix_missing),
    _Check(_find_orphans, lambda x: f"{len(x)} Chroma vector(s) have no graph node", _fix_orphans),
    _Check(_find_archive_missing, lambda x: f"{len(x)} archived node(s) have no archived vector",
           _fix_archive_missing),
    _Check(_find_archive_orphans, lambda x: f"{len(x)} archived vector(s) have no archived node",
           _fix_archive_orphans),
)


# -- derived, in-memory state ---------------------------------------------------------------
def _derived_problems(s: _Stores, *, loading: bool) -> tuple[list[str], list[str], dict[str, str]]:
    """Problems of the in-memory state (the in-memory vectors, BM25, the pending turns, the
    last-episode pointer), the bad pending ids, and the texts BM25 should index. A freshly
    loaded snapshot has no in-memory vectors or BM25 yet: those are not problems then."""
    state, g = s.state, s.state.graph
    problems = []
    bad_mem = [n for n in g.g.nodes if not s.good(g.vectors.get(n))]
    if bad_mem and not loading:
        problems.append(f"{len(bad_mem)} node(s) without a usable in-memory vector")
    # what BM25 should index: each node's document (its text, a turn's with its speaker)
    texts = {n: state.document(d) if isinstance(d.get("text"), str) else d.get("text")
             for n, d in g.g.nodes(data=True)}
    if not loading and not state.bm25.indexes(texts):
        problems.append("the BM25 index does not match the graph")
    bad_pending = [p for p in state.pending if p not in g.g or g.g.nodes[p].get("kind") != "episode"]
    if bad_pending:
        problems.append(f"{len(bad_pending)} pending id(s) are not episodes of the graph")
    if state.last_episode is not None and state.last_episode not in g.g and not loading:
        problems.append("the last-episode pointer names a missing node")
    return problems, bad_pending, texts


def _fill_vectors(s: _Stores) -> None:
    """The in-memory vectors from Chroma's where the graph's are missing or unusable."""
    g = s.state.graph
    for n in g.g.nodes:
        if not s.good(g.vectors.get(n)) and n in s.vec:
            g.set_vector(n, s.vec[n])
    for n in [n for n in g.vectors if n not in g.g]:
        del g.vectors[n]


def _rebuild_derived(state: MemoryState, bad_pending: list[str], texts: dict[str, str]) -> None:
    state.bm25.set(texts)
    state.pending = [p for p in state.pending if p not in bad_pending]
    if state.last_episode not in state.graph.g:
        state.last_episode = state.newest_episode()
    state.graph.invalidate()


def _report(s: _Stores, found: dict[str, list[Any]], problems: list[str], actions: list[str],
            *, ok: bool, repaired: bool, t0: float) -> ConsistencyReport:
    counts = {"episode": 0, "concept": 0}
    for _, d in s.state.graph.g.nodes(data=True):
        counts[d.get("kind", "episode")] = counts.get(d.get("kind", "episode"), 0) + 1
    return ConsistencyReport(
        ok=ok, episodes=counts["episode"], concepts=counts["concept"],
        archived=len(s.state.graph.archive), vectors=len(s.ids),
        missing_vectors=tuple(found.get("missing", ())),
        orphan_vectors=tuple(found.get("orphans", ())),
        archive_missing=tuple(found.get("archive_missing", ())),
        archive_orphans=tuple(found.get("archive_orphans", ())),
        problems=tuple(problems), actions=tuple(actions), repaired=repaired,
        seconds=time.perf_counter() - t0)


_NAMES = {_find_forgotten: "forgotten", _find_missing: "missing", _find_orphans: "orphans",
          _find_archive_missing: "archive_missing", _find_archive_orphans: "archive_orphans",
          _find_bad_nodes: "bad_nodes"}


def verify(state: MemoryState) -> ConsistencyReport:
    """Check that the graph, both Chroma collections, the BM25 index and the in-memory
    vectors agree; changes nothing. ``report.ok`` is the verdict."""
    t0 = time.perf_counter()
    s = _Stores.read(state)
    problems: list[str] = []
    found: dict[str, list[Any]] = {}
    for check in _STORE_CHECKS:
        hits = check.find(s)
        found[_NAMES.get(check.find, check.find.__name__)] = hits
        if hits:
            problems.append(check.problem(hits))
    problems += _derived_problems(s, loading=False)[0]
    report = _report(s, found, problems, [], ok=not problems, repaired=False, t0=t0)
    if problems:
        logger.warning("verify of namespace %r: %s", state.vectors.namespace, "; ".join(problems))
    return report


def repair(state: MemoryState, embedder: Any, *, loading: bool = False
           ) -> tuple[ConsistencyReport, list[str], list[str]]:
    """Bring the stores back into agreement: each check's problem is fixed as it is found
    (see the module docstring); derived state (in-memory vectors, BM25, pending turns, the
    last-episode pointer) is rebuilt. Returns the report (``ok`` is False only when graph
    nodes are unusable, which repair cannot fix), the episodes re-attached from Chroma,
    and the forgotten nodes it dropped (the caller erases them from older snapshots). ``loading``: called on a snapshot just read, whose in-memory state is not
    built yet."""
    t0 = time.perf_counter()
    s = _Stores.read(state, embedder)
    problems: list[str] = []
    actions: list[str] = []
    found: dict[str, list[Any]] = {}
    for check in _STORE_CHECKS:
        hits = check.find(s)
        found[_NAMES.get(check.find, check.find.__name__)] = hits
        if hits:
            problems.append(check.problem(hits))
            if check.fix is not None:
                actions += check.fix(s, hits)
    _fill_vectors(s)
    derived, bad_pending, texts = _derived_problems(s, loading=loading)
    problems += derived
    _rebuild_derived(state, bad_pending, texts)
    report = _report(s, found, problems, actions, ok=not found["bad_nodes"], repaired=True, t0=t0)
    for a in actions:
        logger.warning("repair of namespace %r: %s", state.vectors.namespace, a)
    return report, s.attached, s.forgotten


def after_repair(state: MemoryState, fixed: ConsistencyReport) -> ConsistencyReport:
    """What :meth:`Synapse.repair` reports: what repair found and did (``fixed``), judged
    by a verify run now (the verdict, the counts, any problem left); a memory that still
    disagrees is marked for repair before its next write."""
    after = verify(state)
    state.needs_repair = not after.ok
    return ConsistencyReport(
        ok=after.ok, episodes=after.episodes, concepts=after.concepts,
        archived=after.archived, vectors=after.vectors,
        missing_vectors=fixed.missing_vectors, orphan_vectors=fixed.orphan_vectors,
        archive_missing=fixed.archive_missing, archive_orphans=fixed.archive_orphans,
        problems=fixed.problems + tuple(f"after repair: {p}" for p in after.problems),
        actions=fixed.actions, repaired=True, seconds=fixed.seconds + after.seconds)

"""Consolidation (SYNAPSE Algorithm 1, lines 9-28): a window of turns becomes concepts and
edges, and nodes that stay dormant are archived.

:class:`Consolidator` runs one window at a time through the memory's write path
(:class:`~synapse_integrations.core.state.state.MemoryState`): the extractor proposes concepts
and relations, each concept is merged into a close existing one (cosine above
``dedup_threshold``, vector moved by EMA) or created, abstraction edges link it to the
turns that mention it (or the whole window), relation and association edges follow, and
incoming edges are pruned to the strongest ``prune_top_k``.

:class:`DormancyLedger` is the garbage collector's memory: which nodes were active while
the memory was queried during the current window. Retrieval reports what it activated;
the engine passes that to :meth:`DormancyLedger.observe`; each window ends with
:meth:`DormancyLedger.step`, which counts the dormant windows and names the nodes to
archive: dormant (activation below epsilon for ``dormancy_windows`` windows) while the
active graph holds more than ``dormancy_capacity`` nodes, the longest dormant first, as
many as it holds over the bound (the paper's garbage collection keeps the graph at most
10,000 nodes; it does not ask to forget a smaller one).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ...errors import ExtractionError
from ...types import Concept, Extractor, Turn, WindowReport
from ..graph import provenance
from ..graph.graph import NOT_ENTITY_TYPES
from ..kernels.scoring import top_k
from ..state.state import MemoryState
from ..state.validation import from_epoch
from .extraction.protocol import takes_names

logger = logging.getLogger(__name__)

__all__ = ["NAME_CACHE_SIZE", "Consolidator", "DormancyLedger", "NameVectors"]

#: Concept-name embeddings kept per memory.
NAME_CACHE_SIZE = 4096


class NameVectors:
    """Embeddings of concept names, each embedded once per memory (bounded LRU): speakers
    and recurring names come back in many windows."""

    def __init__(self, embedder: Any, *, size: int | None = None) -> None:
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._cache)

    def names(self) -> list[str]:
        """The cached names, least recently used first."""
        return list(self._cache)

    def embed(self, names: Sequence[str]) -> np.ndarray:
        """The embeddings of ``names`` (one row each), from the cache where possible."""
        cache = self._cache
        missing = list(dict.fromkeys(n for n in names if n not in cache))
        if missing:
            for n, h in zip(missing, self.embedder.embed_documents(missing)):
                cache[n] = h
        out = []
        for n in names:
            cache.move_to_end(n)
            out.append(cache[n])
        size = NAME_CACHE_SIZE if self.size is None else self.size
        while len(cache) > size:
            cache.popitem(last=False)
        return np.stack(out)

    def discard(self, names: Iterable[str]) -> None:
        """Forget cached embeddings of ``names``."""
        for n in names:
            self._cache.pop(n, None)

    def discard_mentioned(self, texts: Iterable[str]) -> int:
        """Forget cached names that occur in ``texts`` (forgotten turns: a name extracted
        from them must not outlive them, even in this cache). Returns how many went."""
        folded = [t.casefold() for t in texts if t]
        doomed = [n for n in self._cache if n.strip() and any(n.casefold() in t for t in folded)]
        self.discard(doomed)
        return len(doomed)


class DormancyLedger:
    """Which nodes were active while the memory was queried in the current window."""

    def __init__(self) -> None:
        self.queries = 0
        self.active: set[str] = set()

    def observe(self, active_ids: Iterable[str]) -> None:
        """One retrieval pass activated ``active_ids`` (activation >= epsilon)."""
        self.queries += 1
        self.active.update(active_ids)

    def discard(self, ids: Iterable[str]) -> None:
        """Nodes that no longer exist."""
        self.active.difference_update(ids)

    def step(self, state: MemoryState, *, windows: int, capacity: int = 0) -> list[str]:
        """End of a window: count a dormant window for every node not active in it (only
        when the memory was queried); return the nodes to archive: those dormant for
        ``windows`` windows, or with a ``capacity`` (> 0) only while the graph holds more
        nodes than that, the longest dormant first (the oldest among equals), as many
        as it holds over it."""
        if self.queries == 0 or windows == 0:
            return []
        g = state.graph.g
        dormant: list[tuple[int, int, str]] = []
        for age, (n, d) in enumerate(g.nodes(data=True)):
            if n in self.active:
                d["dormant"] = 0
            else:
                d["dormant"] = d.get("dormant", 0) + 1
                if d["dormant"] >= windows:
                    dormant.append((-d["dormant"], age, n))
        self.queries = 0
        self.active = set()
        if capacity > 0:
            dormant.sort()
            dormant = dormant[:max(g.number_of_nodes() - capacity, 0)]
        return [n for *_, n in dormant]


class Consolidator:
    """Runs consolidation windows on one memory (see the module docstring)."""

    def __init__(self, state: MemoryState, extractor: Extractor, names: NameVectors) -> None:
        self.state = state
        self.extractor = extractor
        self.names = names
        self.dormancy = DormancyLedger()
        self._known: set[str] = set()
        self._known_from: tuple[list[str], int] = ([], 0)  # the concept list read, how far

    def known_names(self) -> set[str]:
        """The names of the memory's named concepts (people and entities: any type but
        topics and facts), lower case. Kept in step with the concept list: a window reads
        only the concepts added since the last one, and the whole list after a removal."""
        g = self.state.graph
        ids, _ = g.concept_matrix()
        seen_list, seen = self._known_from
        if ids is not seen_list or seen > len(ids):  # rebuilt (a removal): read it all
            self._known, seen = set(), 0
        for cid in ids[seen:]:
            d = g.node(cid)
            if d.get("ctype") not in NOT_ENTITY_TYPES and d.get("name"):
                self._known.add(str(d["name"]).lower())
        self._known_from = (ids, len(ids))
        return self._known

    def window(self, window: list[str]) -> WindowReport:
        """Consolidate the pending turns ``window`` (the oldest pending ones): extraction,
        concepts, edges, pruning, dormancy. On an extraction failure the window is put
        back in front of the pending turns and :class:`ExtractionError` raised."""
        start = time.perf_counter()
        state = self.state
        cfg = state.config
        g = state.graph
        state.pending = state.pending[len(window):]
        turns = [Turn(i, g.node(i)["text"], g.node(i)["speaker"], from_epoch(g.node(i)["ts"]))
                 for i in window if i in g]
        try:
            # an extractor whose extract() takes ``names`` is told the names the memory
            # holds (the offline one: a name said only at the start of a sentence is still
            # a name); asked each window, since the extractor may be replaced
            extraction = (self.extractor.extract(turns, names=self.known_names())  # type: ignore
                          if takes_names(self.extractor) else self.extractor.extract(turns))
        except Exception as exc:
            state.pending = list(window) + state.pending  # not lost: retried later
            raise ExtractionError(f"concept extraction failed: {exc}") from exc
        concepts = _distinct(extraction.concepts)[: cfg.max_concepts_per_window]
        created = merged = 0
        touched: dict[str, np.ndarray] = {}
        if concepts:
            created, merged, touched = self._link_concepts(concepts, [t.id for t in turns],
                                                           extraction.relations)
            state.write_concept_vectors(list(touched))
        pruned = state.prune_incoming(list(touched) + window, cfg.prune_top_k)
        dormant = self.dormancy.step(state, windows=cfg.dormancy_windows,
                                     capacity=cfg.dormancy_capacity)
        if dormant:
            state.archive(dormant)
        state.windows += 1
        state.windows_since_snapshot += 1
        state.stale_pagerank = True
        report = WindowReport(len(turns), created, merged, pruned, len(dormant),
                              time.perf_counter() - start)
        state.events.emit(report)
        return report

    def add_semantic(self, concepts: Sequence[Concept], turn_ids: list[str]) -> tuple[int, int]:
        """Add semantic nodes drawn from ``turn_ids`` (sleep's facts), each linked to its
        ``source_ids`` only, through the same de-duplication as extracted concepts.
        Returns (created, merged)."""
        concepts = _distinct(concepts)
        if not concepts:
            return 0, 0
        created, merged, touched = self._link_concepts(concepts, turn_ids, (), scope="mentions")
        self.state.write_concept_vectors(list(touched))
        # the sources gain an edge from each fact: they keep the strongest prune_top_k too
        self.state.prune_incoming(list(touched) + list(turn_ids), self.state.config.prune_top_k)
        self.state.stale_pagerank = True
        return created, merged

    def _link_concepts(self, concepts: list[Concept], turn_ids: list[str],
                       relations: Sequence[Any], scope: str | None = None
                       ) -> tuple[int, int, dict[str, np.ndarray]]:
        state = self.state
        cfg = state.config
        g = state.graph
        created = merged = 0
        touched: dict[str, np.ndarray] = {}
        by_name: dict[str, str] = {}
        embs = np.asarray(self.names.embed([c.name.strip() for c in concepts]), dtype=np.float32)
        window_set = set(turn_ids)
        # the names' cosines with every concept as it stood, in one product; the rows a
        # merge below moves, and the concepts created meanwhile, are compared afresh
        ids0, mat0 = g.concept_matrix()
        n0 = len(ids0)
        before = mat0 @ embs.T
        moved: set[int] = set()
        for n, (c, h) in enumerate(zip(concepts, embs)):
            name = c.name.strip()
            # which turns it came from: those the extractor names, else (it did not say)
            # the whole window, any turn of which may have said it
            exact = [i for i in c.source_ids if i in window_set]
            source = provenance.new_entry(exact=exact, window=None if exact else turn_ids)
            best = -1
            cids, mat = g.concept_matrix()  # kept in step by merges and additions
            if cids is not ids0:  # rebuilt (not by this loop's merges and additions)
                sims = mat @ h
            else:
                sims = np.concatenate((before[:, n], mat[n0:] @ h))
                if moved:
                    rows = np.fromiter(moved, dtype=np.int64)
                    sims[rows] = mat[rows] @ h
            if len(cids):
                best = int(np.argmax(sims))
            if best >= 0 and sims[best] > cfg.dedup_threshold:
                cid = cids[best]
                m = cfg.ema_momentum
                new = m * g.vectors[cid] + (1.0 - m) * h
                new = (new / np.linalg.norm(new)).astype(np.float32)
                state.merge_concept(cid, new, name, source)
                moved.add(best)
                merged += 1
            else:
                cid = f"c-{uuid.uuid4().hex}"
                state.add_concept(cid, h, name=name, ctype=c.type, confidence=c.confidence,
                                  attributes=c.attributes, source=source)
                created += 1
            touched[cid] = g.vectors[cid]
            by_name[name.lower()] = cid
            targets = turn_ids
            if (scope or cfg.abstraction_scope) == "mentions" and c.source_ids:
                targets = [i for i in c.source_ids if i in window_set] or turn_ids
            for e in targets:
                state.add_edge(e, cid, kind="abstraction", weight=cfg.abstraction_weight)
                state.add_edge(cid, e, kind="abstraction", weight=cfg.abstraction_weight)
        for r in relations:
            s, t = by_name.get(r.src.strip().lower()), by_name.get(r.tgt.strip().lower())
            if s and t:
                state.add_edge(s, t, kind="relation", weight=float(min(max(r.weight, 0.0), 1.0)),
                               rel=r.rel)
                state.note_relation(s, t, turn_ids)
        # association edges between concepts (lines 23-28), top-k per node
        cids, mat = g.concept_matrix()
        touched_sims = mat @ np.stack(list(touched.values())).T if touched \
            else np.zeros((mat.shape[0], 0))
        for col, cid in enumerate(touched):
            sims = touched_sims[:, col]
            order = top_k(sims, cfg.association_top_k + 1)  # itself may be among them
            picked = 0
            for j in order:
                if picked >= cfg.association_top_k or sims[j] <= cfg.association_threshold:
                    break
                if cids[j] == cid:
                    continue
                state.add_edge(cid, cids[j], kind="association", weight=float(sims[j]))
                state.add_edge(cids[j], cid, kind="association", weight=float(sims[j]))
                picked += 1
        return created, merged, touched


def _distinct(concepts: Sequence[Concept]) -> list[Concept]:
    """The concepts with a non-empty name, first of each (case-insensitive) name."""
    out: list[Concept] = []
    seen: set[str] = set()
    for c in concepts:
        key = c.name.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(c)
    return out

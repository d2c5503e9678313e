"""Ingestion: turns become durable episodes, then consolidation windows run.

The path of a turn (:meth:`Ingestor.prepare` without the engine lock, then
:meth:`Ingestor.write` under it):

1. validation and the write firewall (:func:`~synapse_integrations.core.state.validation.validate_turns`:
   control characters in the text normalised, a refused turn named);
2. the embedding, done by the engine before it takes the lock;
3. a retry of a write whose reply was lost is recognised and answered with the stored id;
   the ranking signals' write hooks annotate the new turns
   (:meth:`~synapse_integrations.core.signals.Signal.write`: an echo's ``echo_of``...);
4. one upsert into Chroma makes the turns durable (the acknowledgement point);
5. each turn joins the graph (with its ``affect`` tags, mnemos' cognitive state, when the
   engine has a tagger) and the BM25 index, and every ``consolidation_interval``
   pending turns a window is consolidated. A failure from here on is reported, not
   raised as a failed write: the turns are stored, and a retry would duplicate them.

Retries: a write that failed with :class:`StorageError` may still have reached Chroma,
and an async write whose caller was cancelled (a timeout) may land after the caller gave
up; :class:`RetryLedger` remembers such turns (by content) and the ids a repair
re-attached, so the caller's retry of the same turn returns the stored id instead of
storing it again.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import ExtractionError, InvalidInputError, InvalidTypeError, StorageError
from ...firewall import Firewall
from ...types import WindowReport
from ..lifecycle import sleep
from ..lifecycle.detectors import Lifecycle
from ..lifecycle.reconsolidation import reconsolidate
from ..lifecycle.surprisal import score_rows
from ..models.affect import AffectTagger, affect_tag
from ..signals import WriteContext, signals
from ..state.state import MemoryState
from ..state.validation import MAX_BATCH_TURNS, validate_turns
from .consolidation import Consolidator

logger = logging.getLogger(__name__)

__all__ = ["Ingestor", "RetryLedger"]

_MAX_UNCONFIRMED = 10_000


class RetryLedger:
    """Turns whose write may have landed unacknowledged (the write failed, or its async
    caller was cancelled), and ids a repair re-attached. Thread-safe: an async caller
    acknowledges from the event loop's thread."""

    def __init__(self) -> None:
        self.recovered: set[str] = set()  # ids re-attached by a repair, or landed unacknowledged
        self.unconfirmed: dict[str, tuple[Any, ...]] = {}  # id -> content of such a write
        self._lock = threading.Lock()

    @staticmethod
    def signature(r: Mapping[str, Any]) -> tuple[Any, ...]:
        """What identifies a retried turn that had no explicit id (a defaulted timestamp
        differs between attempts, so it is left out)."""
        return (r["text"], r["speaker"], json.dumps(r["metadata"], sort_keys=True),
                None if r["auto_ts"] else r["ts"])

    def failed(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """A write of ``rows`` raised :class:`StorageError` (it may have landed anyway)."""
        with self._lock:
            for r in rows:
                self.unconfirmed[r["id"]] = self.signature(r)
            while len(self.unconfirmed) > _MAX_UNCONFIRMED:
                del self.unconfirmed[next(iter(self.unconfirmed))]

    def landed(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """``rows`` are stored but their caller may not learn it (cancelled, or a later
        chunk of its batch failed): a retry of the same turns returns these ids."""
        rows = list(rows)
        self.failed(rows)
        with self._lock:
            self.recovered.update(r["id"] for r in rows)

    def acknowledge(self, ids: Iterable[str]) -> None:
        """The caller received ``ids``: a later identical turn is a new turn."""
        with self._lock:
            for i in ids:
                self.unconfirmed.pop(i, None)
                self.recovered.discard(i)

    def stored_as(self, r: Mapping[str, Any], state: MemoryState) -> str | None:
        """The id under which this turn is already stored if it repeats a write that
        failed but reached Chroma anyway (re-attached by repair) or landed after its
        caller gave up: by its explicit id, or, without one, by identical content."""
        with self._lock:
            node = state.graph.g.nodes.get(r["id"]) if r["id"] in self.recovered else None
            if node is not None and node.get("text") == r["text"]:
                self.unconfirmed.pop(r["id"], None)
                return r["id"]
            if r["auto_id"] and self.unconfirmed:
                sig = self.signature(r)
                for uid, s in self.unconfirmed.items():
                    if s == sig and uid in self.recovered and uid in state.graph:
                        del self.unconfirmed[uid]
                        return uid
        return None

    def discard(self, ids: Iterable[str]) -> None:
        """Nodes that no longer exist (forgotten)."""
        with self._lock:
            self.recovered.difference_update(ids)


class Ingestor:
    """Writes turns into one memory (see the module docstring)."""

    def __init__(self, state: MemoryState, consolidator: Consolidator, firewall: Firewall,
                 lifecycle: Lifecycle | None = None,
                 tagger: AffectTagger | None = None) -> None:
        self.state = state
        self.tagger = tagger
        self.consolidator = consolidator
        self.firewall = firewall
        self.lifecycle = lifecycle or Lifecycle()
        self.retries = RetryLedger()

    def prepare(self, turns: Iterable[str | Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Validated, firewalled rows for ``turns``, each tagged with its ``affect`` when a
        tagger is set (pure: no store is touched)."""
        if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Iterable):
            raise InvalidTypeError("add_turns() takes a list of turns (use add_turn for one)")
        turns = list(itertools.islice(turns, MAX_BATCH_TURNS + 1))
        if len(turns) > MAX_BATCH_TURNS:
            raise InvalidInputError(f"add_turns() takes at most {MAX_BATCH_TURNS} turns per call; "
                                    f"split larger imports into several calls")
        rows = validate_turns(turns, self.firewall)  # all or none; an error names the turn
        if self.tagger is not None:
            for r in rows:
                r["affect"] = affect_tag(self.tagger, r["text"])
        return rows

    def documents(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        """What the embedder reads for prepared rows: each text with its speaker's name
        (:mod:`.documents`)."""
        return [self.state.document({**r, "kind": "episode"}) for r in rows]

    def embed(self, rows: Sequence[Mapping[str, Any]], embedder: Any, *, batch: int = 1024) -> np.ndarray:
        """The embeddings of prepared rows (their :meth:`documents`), ``batch`` at a time.
        Pure: the caller runs it outside the engine's lock (the lock guards the stores)."""
        docs = self.documents(rows)
        return np.concatenate([embedder.embed_documents(docs[k:k + batch])
                               for k in range(0, len(docs), batch)])

    def write(self, rows: list[dict[str, Any]], embs: np.ndarray
              ) -> tuple[list[str], Exception | None]:
        """Store prepared rows with their embeddings; consolidate full windows.

        Returns the ids (in the order of ``rows``) and the error that stopped
        consolidation after the turns were stored, if any (the caller logs it; the turns
        are durable). Raises only when nothing was stored.
        """
        state = self.state
        result = [self.retries.stored_as(r, state) for r in rows]
        fresh_rows = [k for k, hit in enumerate(result) if hit is None]
        rows = [rows[k] for k in fresh_rows]
        if not rows:
            return [h for h in result if h is not None], None
        ids = [r["id"] for r in rows]
        taken = [i for i in ids if state.knows(i)]
        if taken or len(set(ids)) != len(ids):
            raise InvalidInputError(f"memory id(s) already used: {sorted(set(taken) or ids)[:5]}")
        embs = embs[fresh_rows]
        # the ranking signals' write hooks: an assistant turn restating a user turn marked
        # echo_of, a new speaker's name embedded once (not by the first question naming them)
        hooks = WriteContext(state, self.consolidator.names.embed)
        for signal in signals():
            signal.write(rows, embs, hooks)
        cfg = state.config
        salience = score_rows(rows, embs, state, self.lifecycle.predictor, cfg.surprisal_window,
                              lambda t: self.consolidator.names.embed([t])[0]) \
            if cfg.surprisal_gate else [None] * len(rows)
        now = time.time()
        for r in rows:
            r["ingest_ts"] = now
            r["seq"] = state.graph.next_seq()
            # an id forgotten before is written as a newer generation of it (see tombstones)
            r["gen"] = 0 if r["auto_id"] else state.tombstones.get(r["id"], 0)
        try:
            state.write_episodes(rows, embs)
        except StorageError:
            state.needs_repair = True  # the server may have applied it before failing
            self.retries.failed(rows)  # remembered so that a retry does not store them twice
            raise
        # the turns are durable now; a storage failure while consolidating must not look
        # like a failed write (the caller would retry and duplicate them)
        failed: StorageError | ExtractionError | None = None
        n = state.config.consolidation_interval
        try:
            with state.batched_concept_writes():
                for k, (r, h) in enumerate(zip(rows, embs)):
                    state.link_episode(r["id"], h, text=r["text"], speaker=r["speaker"],
                                       ts=r["ts"], ingest_ts=now, metadata=r["metadata"],
                                       seq=r["seq"], gen=r.get("gen", 0),
                                       affect=r.get("affect"))
                    if salience[k] is not None:
                        state.set_salience(r["id"], salience[k], low=salience[k] < cfg.surprisal_tau)
                    if cfg.reconsolidation:
                        reconsolidate(state, self.lifecycle.reconsolidator, r["id"])
                    if failed is None and n and len(state.pending) >= n:
                        pending = list(state.pending)
                        try:
                            self.consolidator.window(state.pending[:n])
                        except (StorageError, ExtractionError) as exc:
                            state.pending = pending  # retried at the next write
                            failed = exc
                if failed is None and sleep.due(state, cfg):
                    self.sleep()
        except StorageError as exc:  # the batched concept write
            failed = failed or exc
        fresh = iter(ids)
        return [h if h is not None else next(fresh) for h in result], failed

    def sleep(self) -> sleep.SleepReport:
        """Consolidate the episodes stored since the last sleep into facts (:mod:`.sleep`)."""
        state = self.state
        with state.batched_concept_writes():
            return sleep.run_sleep(state, self.consolidator, self.lifecycle.sleeper,
                                   archive=state.config.sleep_archive_sources)

    def consolidate_pending(self) -> list[WindowReport]:
        """Consolidate every pending turn now, in windows of ``consolidation_interval``."""
        state = self.state
        n = state.config.consolidation_interval or max(1, len(state.pending))
        done = []
        with state.batched_concept_writes():
            while state.pending:
                done.append(self.consolidator.window(state.pending[:n]))
        return done

"""How ``synapse bench perf`` times a memory (the benchmark and its runner: :mod:`.perf`).

:func:`build_memory` writes synthetic turns through the engine's normal write path into a
throwaway in-memory Chroma (:class:`WindowTimes` collects the consolidation windows' times
from its events); :func:`time_queries` times, interleaved query by query after a short
warm-up, the full retrieval, the dense-only query and the activation step alone, each
query prepared outside the timed region (:class:`Probe`); :func:`time_with_encoder` adds
the real encoder before each question, :func:`time_named` asks questions naming a speaker
twice, :func:`time_models` compares retrieval models on one memory, and
:func:`measure_real_model` times the real model's ingest and query embedding.
"""

from __future__ import annotations

import gc
import resource
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..config import SynapseConfig
from ..types import VectorWrite, WindowReport
from .metrics import percentiles
from .synthetic import synthetic_queries, synthetic_turns

__all__ = ["SLICE_TURNS", "WARMUP", "Probe", "WindowTimes", "build_memory", "dispose",
           "ingest_slices", "make_probes",
           "measure_real_model", "peak_rss_mb", "summary", "time_activation", "time_dense",
           "time_models", "time_named", "time_queries", "time_retrieve", "time_with_encoder"]

# --------------------------------------------------------------------------------------------
# measurement helpers
# --------------------------------------------------------------------------------------------
def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (``getrusage``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


class WindowTimes:
    """Collects consolidation-window times from a memory's events (``Synapse.subscribe``):
    each window's own time, plus its share of the batched concept write that follows
    the windows of an ``add_turns`` call."""

    def __init__(self) -> None:
        self.record = False
        self.windows_ms: list[float] = []
        self._open: list[float] = []  # windows since the last batched write

    def __call__(self, event: object) -> None:
        if isinstance(event, WindowReport):
            self._open.append(event.seconds * 1000.0)
        elif isinstance(event, VectorWrite) and event.kind == "concept" and self._open:
            share = event.seconds * 1000.0 / len(self._open)
            self._open = [w + share for w in self._open]

    def end_call(self) -> None:
        """An ``add_turns`` call returned: its windows are complete."""
        if self.record:
            self.windows_ms += self._open
        self._open = []


#: Turns per slice of a build whose ingest throughput is reported (``ingest_slices``).
SLICE_TURNS = 10_000


def ingest_slices(marks: Sequence[tuple[int, float]], size: int = SLICE_TURNS
                  ) -> list[dict[str, float]]:
    """Turns/s per slice of about ``size`` turns, from the ``(turns written so far, seconds
    so far)`` marks of a build (one per ``add_turns`` call): a slice ends at the first mark
    that reaches the next multiple of ``size`` (or at the last mark).

    >>> ingest_slices([(5, 1.0), (10, 3.0), (15, 4.0)], size=10)
    [{'to': 10, 'turns': 10, 'seconds': 3.0, 'turns_per_s': 3.333}, {'to': 15, 'turns': 5, 'seconds': 1.0, 'turns_per_s': 5.0}]
    """
    out: list[dict[str, float]] = []
    start_n, start_t = 0, 0.0
    for k, (n, t) in enumerate(marks):
        if n >= start_n - start_n % size + size or (k == len(marks) - 1 and n > start_n):
            dt = t - start_t
            out.append({"to": n, "turns": n - start_n, "seconds": round(dt, 4),
                        "turns_per_s": round((n - start_n) / dt, 3) if dt > 0 else 0.0})
            start_n, start_t = n, t
    return out


def build_memory(n: int, *, seed: int, embedder: Any, config: SynapseConfig,
           progress: Callable[..., Any] | None, desc: str,
           turns: list[dict[str, Any]] | None = None,
           marks: list[tuple[int, float]] | None = None) -> tuple[Any, list[float]]:
    """A fresh throwaway memory holding ``n`` synthetic turns (consolidated); returns it and
    the consolidation times (ms) of the windows in the last tenth of the build. ``marks``,
    when given, receives ``(turns written, seconds since the first write)`` after each
    ``add_turns`` call (:func:`ingest_slices` reads them)."""
    from ..core.engine import Synapse
    from ..storage.chroma import ephemeral_client

    turns = synthetic_turns(n, seed=seed) if turns is None else turns
    mem = Synapse(None, namespace=desc, config=config, embedder=embedder,
                  client=ephemeral_client(), snapshot_every=10**9)
    times = WindowTimes()
    unsubscribe = mem.subscribe(times)
    interval = max(1, config.consolidation_interval or 5)
    chunk = max(interval, min(5000, len(turns)) // interval * interval)
    bar = progress(total=len(turns), desc=desc) if progress else None
    try:
        last_tenth = len(turns) - max(len(turns) // 10, interval)
        t0 = time.perf_counter()
        for s in range(0, len(turns), chunk):
            part = turns[s:s + chunk]
            times.record = s + len(part) > last_tenth
            mem.add_turns(part)  # episodes in one write, concepts in one write at the end
            if marks is not None:
                marks.append((s + len(part), time.perf_counter() - t0))
            times.end_call()
            if bar is not None:
                bar.update(len(part))
        times.record = False
        mem.consolidate()
    finally:
        unsubscribe()
        if bar is not None:
            bar.close()
    return mem, times.windows_ms


class Probe:
    """Per-query inputs prepared outside the timed region: the query as the engine's
    triggers see it (its cosines and its anchors)."""

    def __init__(self, mem: Any, text: str, q: np.ndarray) -> None:
        self.text = text
        self.q = q
        with mem.inspect_retrieval() as steps:
            self.query = steps.query(text, q, mem.config)


def dispose(mem: Any) -> None:
    """Erase a throwaway memory (its in-memory collections too: frees their RAM)."""
    mem.drop()
    gc.collect()


def time_activation(mem: Any, probe: Probe) -> float:
    """The model's stage alone (SYNAPSE: Eqs. 1-4 on the cached propagation matrix,
    parents tracked), seeded with the probe's real anchors, exactly as retrieval runs it."""
    cfg = mem.config
    with mem.inspect_retrieval() as steps:
        t0 = time.perf_counter()
        steps.activate(probe.query, cfg)
        return (time.perf_counter() - t0) * 1000.0


def time_retrieve(mem: Any, probe: Probe, k: int) -> float:
    t0 = time.perf_counter()
    mem.retrieve_by_vector(probe.text, probe.q, k=k)
    return (time.perf_counter() - t0) * 1000.0


def time_dense(mem: Any, probe: Probe, k: int) -> float:
    t0 = time.perf_counter()
    mem.search_vectors(probe.q, k)
    return (time.perf_counter() - t0) * 1000.0


def make_probes(mem: Any, texts: Sequence[str], vectors: np.ndarray) -> list[Probe]:
    return [Probe(mem, t, v) for t, v in zip(texts, vectors)]


WARMUP = 5


def time_queries(mem: Any, probes: list[Probe], k: int) -> dict[str, list[float]]:
    """Interleaved timings (retrieve, dense-only, activation) over every probe, after a
    short warm-up (the first query builds the BM25 index, the compiled arrays and what
    they derive: timed alone as ``"first"``, the rest untimed)."""
    out: dict[str, list[float]] = {"first": [], "retrieve": [], "dense": [], "activation": []}
    for p in probes[:WARMUP]:
        t = time_retrieve(mem, p, k)
        if not out["first"]:
            out["first"].append(t)
        time_dense(mem, p, k)
        time_activation(mem, p)
    for p in probes:
        out["retrieve"].append(time_retrieve(mem, p, k))
        out["dense"].append(time_dense(mem, p, k))
        out["activation"].append(time_activation(mem, p))
    return out


def time_with_encoder(mem: Any, texts: Sequence[str], vectors: np.ndarray, k: int,
                       encoder: Any) -> tuple[list[float], list[float]]:
    """What a caller of ``retrieve(text)`` and of a dense ``similarity_search(text)`` waits
    for, one question after another: the real encoder embeds the question, then the
    memory answers it (with the question's synthetic vector, as the memory's own vectors
    are synthetic). The encoder's threads and numpy's take turns here
    (``core/threads.py``), which timing each part alone does not show."""
    retrieve, dense = [], []
    for text, q in zip(texts, vectors):
        t0 = time.perf_counter()
        encoder.embed_query(text)
        mem.retrieve_by_vector(text, q, k=k)
        t1 = time.perf_counter()
        encoder.embed_query(text)
        mem.search_vectors(q, k)
        t2 = time.perf_counter()
        retrieve.append((t1 - t0) * 1000.0)
        dense.append((t2 - t1) * 1000.0)
    return retrieve, dense


def time_named(mem: Any, texts: Sequence[str], vectors: np.ndarray, k: int
                ) -> tuple[list[float], list[float]]:
    """Each question naming a speaker asked once (the first ask works out whom the turns
    it reads are about), then again (what a conversation's memory pays per question)."""
    first = [time_retrieve(mem, _Asked(t, v), k) for t, v in zip(texts, vectors)]
    again = [time_retrieve(mem, _Asked(t, v), k) for t, v in zip(texts, vectors)]
    return first, again


class _Asked:
    """A question and its vector, as :func:`time_retrieve` reads them."""

    def __init__(self, text: str, q: np.ndarray) -> None:
        self.text, self.q = text, q


def summary(values: list[float]) -> dict[str, float]:
    return {key: round(v, 4) for key, v in percentiles(values).items()}


def time_models(mem: Any, probes: list[Probe], k: int, models: Sequence[str], *,
                writes: int = 20, seed: int = 0) -> dict[str, Any]:
    """Each retrieval model on the same memory (``config.replace(model=...)``):

    * ``first_query_ms``: its first retrieval, which builds its derived structures (a
      k-NN table, spike trains, tags);
    * ``retrieve_ms``: warm retrievals, interleaved query by query with the dense-only
      query (``dense_only_ms``) and the other models;
    * ``ingest_ms`` / ``retrieve_after_write_ms``: ``writes`` rounds of one new turn
      (``add_turns``, consolidation every ``consolidation_interval`` turns; the same write
      path for every model) followed by one retrieval per model: what a model pays to
      bring its derived structures up to date after a write.
    """
    models = list(models)
    cfgs = {m: mem.config.replace(model=m) for m in models}

    def ret(p: Probe, m: str) -> float:
        t0 = time.perf_counter()
        mem.retrieve_by_vector(p.text, p.q, k=k, config=cfgs[m])
        return (time.perf_counter() - t0) * 1000.0

    first = {m: ret(probes[0], m) for m in models}
    for p in probes[:WARMUP]:
        for m in models:
            ret(p, m)
    warm: dict[str, list[float]] = {m: [] for m in models}
    dense: list[float] = []
    for p in probes:
        dense.append(time_dense(mem, p, k))
        for m in models:
            warm[m].append(ret(p, m))
    ingest: list[float] = []
    after: dict[str, list[float]] = {m: [] for m in models}
    for j, turn in enumerate(synthetic_turns(writes, seed=seed + 1)):
        turn = {**turn, "id": f"perf-write-{j}"}
        t0 = time.perf_counter()
        mem.add_turns([turn])
        ingest.append((time.perf_counter() - t0) * 1000.0)
        for m in [*models[j % len(models):], *models[:j % len(models)]]:  # rotated: the
            after[m].append(ret(probes[j % len(probes)], m))  # first one pays the recompile
    d50 = percentiles(dense)["p50"]
    return {"dense_only_ms": summary(dense), "ingest_ms": summary(ingest), "writes": writes,
            "models": {m: {"first_query_ms": round(first[m], 3), "retrieve_ms": summary(warm[m]),
                           "ratio_to_dense_p50": round(percentiles(warm[m])["p50"] / d50, 3)
                           if d50 else None,
                           "retrieve_after_write_ms": summary(after[m])} for m in models}}


# --------------------------------------------------------------------------------------------
# real-model measurements
# --------------------------------------------------------------------------------------------
def measure_real_model(embedder: Any | None = None, *, sample: int = 512, batch: int = 64,
                       queries: int = 50, seed: int = 99,
                       config: SynapseConfig | None = None) -> dict[str, float]:
    """Ingest throughput and query-embedding latency with the real model (default MiniLM).

    ``ingest_turns_per_s``: ``sample`` synthetic turns written with ``add_turns`` in
    batches of ``batch`` into a fresh memory (embedding, Chroma, graph and consolidation
    with the offline extractor, concept names embedded by the model too).
    ``embed_query_ms``: median time to embed one question text, the questions back to back.
    """
    from ..core.engine import Synapse
    from ..embeddings import as_embedder

    emb = as_embedder(embedder)
    emb.embed_query("warm up the model")
    turns = synthetic_turns(sample, seed=seed)
    mem = Synapse(None, namespace="perf-ingest", config=config or SynapseConfig(), embedder=emb,
                  snapshot_every=10**9)
    try:
        t0 = time.perf_counter()
        for s in range(0, len(turns), batch):
            mem.add_turns(turns[s:s + batch])
        mem.consolidate()
        ingest_s = time.perf_counter() - t0
    finally:
        mem.close()
    times = []
    for text in synthetic_queries(queries, seed=seed):
        t0 = time.perf_counter()
        emb.embed_query(text)
        times.append((time.perf_counter() - t0) * 1000.0)
    return {"ingest_turns_per_s": round(len(turns) / ingest_s, 2) if turns else 0.0,
            "embed_query_ms": round(float(np.median(times)), 4)}

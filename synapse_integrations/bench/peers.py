"""``synapse bench peers``: this engine beside the memory layers users would pick instead.

The same turns and questions as ``bench locomo`` / ``bench longmemeval`` (one loader for both
formats, :func:`~.agent.load_agent_data`), the same metrics (recall@k per category and
pooled, :mod:`.context_cost`'s recall within a token budget), over ``synapse``, ``ppr``
(our strongest baseline) and the peers of :mod:`.peer_systems` (``mem0``,
``langgraph_store``, ``llamaindex_memory``), each through its own public API.

The loop, per memory: every system ingests the memory's turns (timed: ingest turns/s; the
growth of the process's resident memory across that ingest: ``rss_mb``), in the order
asked (``ppr`` walks ``synapse``'s memory when both run, so its ingest is free); each
system answers one untimed warm-up question; then question by question every system ranks
it, in an order that rotates by one system per question (interleaved rounds on the same
machine, so that a slow spell of the machine falls on every system alike). A query's time is
the embedding of the question with the real model plus the system's search: the turns'
vectors come from one shared cache, so that every system ranks the same vectors.

With ``scale_turns=N`` the turns of the file's memories (all of them, whatever ``limit``),
concatenated in order (ids prefixed by their memory), form one memory of the first ``N``
turns, and the first ``scale_queries`` questions of those memories are timed against it the
same way (``at_scale``): query latency and ingest as memory grows, nothing scored.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from .agent import load_agent_data
from .context_cost import TokenCounter, context_section
from .metrics import latency_summary, mean_by_key, recall_at_k
from .peer_systems import (
    ENGINE_SYSTEMS,
    PEERS,
    SharedVectors,
    make_system,
    new_workdir,
    prepare,
    system_version,
)
from .records import QuestionRecord
from .retrieval import BenchMemory, BenchQuestion, CachingEmbedder, check_ks

__all__ = ["DEFAULT_PEER_KS", "PEER_METHODS", "format_peers_table", "run_peers"]

logger = logging.getLogger(__name__)

PEER_METHODS: tuple[str, ...] = (*ENGINE_SYSTEMS, *PEERS)
DEFAULT_PEER_KS: tuple[int, ...] = (5, 10)
#: every system ranks this deep (enough turns for the token budgets)
DEPTH = 100


def _rss_mb() -> float:
    """The process's resident memory now, in MiB (``/proc/self/statm``; Linux)."""
    import os

    with open("/proc/self/statm", encoding="ascii") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024.0 * 1024.0)


def check_peer_methods(methods: Sequence[str]) -> list[str]:
    """The methods in a valid order (``synapse`` before ``ppr``), or a clear error."""
    methods = list(dict.fromkeys(methods))
    if not methods:
        raise InvalidInputError("no method to run")
    unknown = [m for m in methods if m not in PEER_METHODS]
    if unknown:
        raise InvalidInputError(f"unknown method(s) {unknown} for bench peers; choose from "
                                f"{', '.join(PEER_METHODS)}")
    if "ppr" in methods and "synapse" in methods:
        methods.remove("ppr")
        methods.insert(methods.index("synapse") + 1, "ppr")
    return methods


class _Run:
    """What the loop collects per system."""

    def __init__(self, methods: Sequence[str]) -> None:
        self.records: dict[str, list[QuestionRecord]] = {m: [] for m in methods}
        self.ingest_s = dict.fromkeys(methods, 0.0)
        self.turns = dict.fromkeys(methods, 0)
        self.rss: dict[str, list[float]] = {m: [] for m in methods}


def _run_memory(memory: BenchMemory, methods: Sequence[str], shared: SharedVectors,
                workdir: str, run: _Run, offset: int, score: bool = True,
                freeze_gc: bool = True) -> int:
    """One memory through every system (module docstring); returns the next rotation."""
    shared.remember([t["text"] for t in memory.turns])
    built: dict[str, Any] = {}
    try:
        for m in methods:
            system = make_system(m, shared, workdir, memory.name, built)
            built[m] = system
            gc.collect()
            before = _rss_mb()
            t0 = time.perf_counter()
            system.ingest(memory)
            if m != "ppr" or "synapse" not in built:
                run.ingest_s[m] += time.perf_counter() - t0
                run.turns[m] += len(memory.turns)
                run.rss[m].append(_rss_mb() - before)
        if memory.questions:
            q0 = memory.questions[0].text
            for m in methods:  # derived state, the model's first call: untimed
                built[m].rank(q0, DEPTH)
        if freeze_gc:  # what the systems hold is not garbage: no query scans the others' heaps
            gc.collect()
            gc.freeze()
        for q in memory.questions:
            order = [methods[(offset + i) % len(methods)] for i in range(len(methods))]
            offset += 1
            for m in order:
                t0 = time.perf_counter()
                ranked = built[m].rank(q.text, DEPTH)
                ms = (time.perf_counter() - t0) * 1000.0
                run.records[m].append(QuestionRecord(
                    memory.name, q.text, q.category, q.evidence, list(ranked) if score else [],
                    ms, None, {}, None, q.qid))
    finally:
        if freeze_gc:
            gc.unfreeze()
        for system in reversed(list(built.values())):
            system.close()
        shared.forget()
        shared.embedder.flush()
    return offset


def _ingest_entry(run: _Run, m: str) -> dict[str, Any]:
    s, n = run.ingest_s[m], run.turns[m]
    rss = run.rss[m]
    return {"turns": n, "seconds": s, "turns_per_s": n / s if s > 0 else None,
            "rss_delta_mb": {"max": max(rss) if rss else None,
                             "mean": sum(rss) / len(rss) if rss else None}}


def _latency(run: _Run, m: str) -> dict[str, float] | None:
    return latency_summary([r.latency_ms for r in run.records[m]])


def _scored(run: _Run, m: str, ks: Sequence[int], keys: Sequence[str], pools: Any,
            lengths: dict[str, dict[str, int]]) -> dict[str, Any]:
    recs = run.records[m]
    entry: dict[str, Any] = {}
    names = [*keys, *pools]
    for k in ks:
        per = mean_by_key(((str(r.category), recall_at_k(r.ranked, r.evidence, k))
                           for r in recs if r.evidence), pools)
        entry[f"recall@{k}"] = {key: per.get(key) for key in names}
    entry.update(context_section(recs, lambda r: lengths[r.conversation], keys, pools, ks))
    return entry


def _scale_memory(memories: Sequence[BenchMemory], turns: int, queries: int) -> BenchMemory:
    """One memory of the first ``turns`` turns of ``memories`` concatenated (ids prefixed by
    their memory), asked the first ``queries`` questions of those memories."""
    rows: list[dict[str, Any]] = []
    asked: list[BenchQuestion] = []
    for mem in memories:
        rows += [{**t, "id": f"{mem.name}/{t['id']}"} for t in mem.turns]
        asked += list(mem.questions)
        if len(rows) >= turns:
            break
    if len(rows) < turns:
        raise InvalidInputError(f"scale_turns={turns}: the file holds only {len(rows)} turns")
    return BenchMemory(f"scale-{turns}", tuple(rows[:turns]), tuple(asked[:queries]))


def run_peers(
    data: str | Path,
    *,
    methods: Sequence[str] = PEER_METHODS,
    ks: Sequence[int] = DEFAULT_PEER_KS,
    embedder: Any | None = None,
    data_format: str = "auto",
    limit: int | None = None,
    scale_turns: int | None = None,
    scale_queries: int = 50,
    freeze_gc: bool = True,
    progress: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """Run ``bench peers`` on a LoCoMo or LongMemEval file; returns the results JSON.

    ``data_format``: ``"auto"`` (detected), ``"locomo"`` or ``"longmemeval"`` (checked
    against the file). ``limit``: the first ``limit`` conversations or questions.
    ``embedder``: the real model by default (``None``), optionally a ``CachingEmbedder``
    backed by an ``--embed-cache``. ``progress`` (called like ``tqdm(total=..., desc=...)``)
    shows one bar over the memories. ``freeze_gc``: once every system of a memory is built,
    ``gc.freeze()`` what they hold, so that a query's garbage collections do not scan the
    other systems' objects (they all live in one process only to be timed side by side).
    """
    t_start = time.perf_counter()
    if data_format not in ("auto", "locomo", "longmemeval"):
        raise InvalidInputError(f"data_format must be 'auto', 'locomo' or 'longmemeval', got "
                                f"{data_format!r}")
    ks = check_ks(ks)
    methods = check_peer_methods(methods)
    if scale_turns is not None and (isinstance(scale_turns, bool) or scale_turns < 1):
        raise InvalidInputError(f"scale_turns must be a positive integer, got {scale_turns!r}")
    ds = load_agent_data(data, limit=limit)
    if data_format != "auto" and ds.format != data_format:
        raise InvalidInputError(f"{data}: is {ds.format}, not {data_format}")
    emb = embedder if isinstance(embedder, CachingEmbedder) else CachingEmbedder(embedder)
    shared = SharedVectors(emb)
    model_load_s = emb.warm()
    import_rss: dict[str, float] = {}
    for m in methods:  # the frameworks' imports, before anything is timed
        before = _rss_mb()
        prepare(m)
        import_rss[m] = _rss_mb() - before
    run = _Run(methods)
    rss_start = _rss_mb()
    offset = 0
    bar = progress(total=len(ds.memories), desc="memories", unit="memory") if progress else None
    with new_workdir() as workdir:
        try:
            for memory in ds.memories:
                offset = _run_memory(memory, methods, shared, workdir, run, offset,
                                     freeze_gc=freeze_gc)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        scale = None
        if scale_turns:
            source = ds if limit is None else load_agent_data(data)  # --limit: scoring only
            big = _scale_memory(source.memories, scale_turns, scale_queries)
            srun = _Run(methods)
            _run_memory(big, methods, shared, workdir, srun, 0, score=False,
                        freeze_gc=freeze_gc)
            scale = {"turns": scale_turns, "source": f"the first {scale_turns} turns of "
                     f"{Path(data).name}'s memories concatenated", "questions": len(big.questions),
                     "methods": {m: {"ingest": _ingest_entry(srun, m),
                                     "latency_ms": _latency(srun, m)} for m in methods}}

    counter = TokenCounter()
    lengths = {mem.name: counter.lengths({t["id"]: t["text"] for t in mem.turns})
               for mem in ds.memories}
    out: dict[str, Any] = {
        "dataset": str(data),
        "format": ds.format,
        "memories": len(ds.memories),
        "questions": {key: sum(1 for mem in ds.memories for q in mem.questions
                               if str(q.category) == key) for key in ds.keys},
        "depth": DEPTH,
        "gc_frozen": bool(freeze_gc),
        "methods": {},
    }
    for m in methods:
        entry = {"version": system_version(m),
                 **_scored(run, m, ks, ds.keys, ds.pools, lengths),
                 "latency_ms": _latency(run, m), "ingest": _ingest_entry(run, m),
                 "import_rss_mb": import_rss[m]}
        if m == "ppr" and "synapse" in methods:
            entry["ingest"]["shares"] = "synapse"
        out["methods"][m] = entry
    if scale is not None:
        out["at_scale"] = scale
    out["rss_mb"] = {"start": rss_start, "end": _rss_mb(), "what": (
        "methods.*.ingest.rss_delta_mb: growth of this process's resident memory "
        "(/proc/self/statm) across one system's ingest of one memory, max and mean over "
        "memories; methods.*.import_rss_mb: its growth across importing the system's "
        "framework, before the first memory, in the order of the methods (a package an "
        "earlier system imported is not counted again); start, end: the process's RSS "
        "before the first memory and at the end")}
    out["timing_s"] = {"total": time.perf_counter() - t_start, "model_load": model_load_s,
                       "embedded_texts": emb.embedded, "embedding_model_s": emb.embed_s}
    return out


def format_peers_table(results: dict[str, Any]) -> str:
    """Per system: version, recall@k pooled and per category, recall within 1,000 tokens,
    ingest turns/s, query p50/p95, RSS growth while ingesting."""
    methods = results["methods"]
    first = next(iter(methods.values()))
    ks = sorted(int(key.split("@")[1]) for key in first if key.startswith("recall@"))
    cats = list(first[f"recall@{ks[0]}"])
    width = max([len(m) for m in methods] + [12])
    pct = (lambda v: f"{'-':>8}" if v is None else f"{100 * v:>8.1f}")
    lines = [f"{results['format']}: {results['memories']} memories, questions "
             + ", ".join(f"{c}={n}" for c, n in results["questions"].items())]
    for k in ks:
        lines.append(f"recall@{k} (%)")
        lines.append(f"{'system':<{width}} " + " ".join(f"{c[:8]:>8}" for c in cats))
        for name, m in methods.items():
            lines.append(f"{name:<{width}} " + " ".join(pct(m[f'recall@{k}'].get(c))
                                                         for c in cats))
    pooled = cats[-1]
    lines.append("")
    lines.append(f"{'system':<{width}} {'version':>10} " + " ".join(
        f"{'r@' + str(k):>7}" for k in ks) + f" {'r@1000t':>8} {'ingest/s':>9} "
        f"{'p50 ms':>8} {'p95 ms':>8} {'rss+ MB':>8}   ({pooled})")
    for name, m in methods.items():
        ing, lat = m["ingest"], m["latency_ms"] or {"p50": 0.0, "p95": 0.0}
        rate = ing["turns_per_s"]
        rss = ing["rss_delta_mb"]["max"]
        lines.append(f"{name:<{width}} {m['version'][:10]:>10} " + " ".join(
            f"{100 * (m[f'recall@{k}'].get(pooled) or 0):>7.1f}" for k in ks)
            + f" {100 * (m['tokens_recall@1000'].get(pooled) or 0):>8.1f}"
            + (f" {rate:>9.0f}" if rate else f" {'-':>9}")
            + f" {lat['p50']:>8.1f} {lat['p95']:>8.1f}"
            + (f" {rss:>8.1f}" if rss is not None else f" {'-':>8}")
            + ("  (ingest: synapse's memory)" if ing.get("shares") else ""))
    sc = results.get("at_scale")
    if sc:
        lines.append("")
        lines.append(f"at {sc['turns']} turns ({sc['source']}; {sc['questions']} questions):")
        for name, m in sc["methods"].items():
            lat, ing = m["latency_ms"] or {"p50": 0.0, "p95": 0.0}, m["ingest"]
            rate = ing["turns_per_s"]
            lines.append(f"  {name:<{width}} query p50 {lat['p50']:.1f} ms, p95 "
                         f"{lat['p95']:.1f} ms; ingest "
                         + (f"{rate:.0f} turns/s" if rate else "synapse's memory"))
    t = results["timing_s"]
    lines.append(f"time: {t['total']:.0f} s ({t['embedded_texts']} texts embedded by the model, "
                 f"{t['embedding_model_s']:.0f} s)")
    return "\n".join(lines)

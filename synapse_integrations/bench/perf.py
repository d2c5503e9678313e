"""The performance benchmark behind ``synapse bench perf``.

For each memory size ``N`` it builds, through the engine's normal write path
(``add_turns`` in batches, automatic consolidation every 5 turns with the offline
extractor), a memory of ``N`` episodic nodes plus the concepts consolidation makes, then
times, for the same query vectors, interleaved query by query:

* ``retrieve_ms``: the full SYNAPSE retrieval, ``Synapse.retrieve_by_vector`` (dense and
  BM25 anchors, spreading activation, hybrid score, gate, top-k items);
* ``dense_only_ms``: the plain Chroma cosine query on the same collection
  (``Synapse.search_vectors``, the same ``k``);
* ``activation_ms``: the activation step alone (Eqs. 2-4 on the cached propagation
  matrix, parents tracked, as the engine runs it), seeded with each query's real anchor set
  (union of its dense and BM25 top ``anchor_top_k``).

What is synthetic, and why. Embedding 100,000 texts with the real model would take 10+
minutes on 2 cores, so the memories are built from generated conversation-like turns
(:func:`synthetic_turns`: recurring speakers, people, places and topics, so the offline
extractor makes and reuses concepts) embedded by :class:`HashingEmbedder`, a deterministic
bag-of-words embedder (a fixed random unit vector per word, summed, plus per-text noise,
normalised). Cosine structure is realistic enough for the indexes and the graph, and
every run says ``"synthetic": true``. The real all-MiniLM-L6-v2 model is measured
separately, once per invocation, and the same numbers are reported in every run:
``ingest_turns_per_s`` (a fixed sample of synthetic turns, batched ``add_turns`` into a
fresh memory, consolidation included) and ``embed_query_ms`` (one query text at a time,
median). ``retrieve_text_ms`` and ``dense_text_ms`` (p50/p95 at each size) time what a
caller waits for: the real model embeds each question, then the memory answers it.
``consolidate_ms_per_window`` is timed on the size-``N`` memory itself: the mean of the
consolidation windows during the last tenth of its build. ``cold_start``: fresh processes,
each timed from its start to its first answer (:mod:`.cold_start`).

The archive check (``archive_at``): a memory of ``N`` turns is built, its oldest 90% of
episodes (and the concepts they alone support) are archived, and its retrieval is timed,
interleaved on the same queries, against an identical build whose archive is then dropped
(the same active nodes, nothing archived; forget also drops the few relation
edges only the archived turns said) and against a fresh memory holding only the newest
10% of turns. Equal latencies mean retrieval cost does not grow with archived nodes.

>>> emb = HashingEmbedder(dim=8)
>>> v = emb.embed_query("Dana went skiing")
>>> round(float((v * v).sum()), 6), v.shape
(1.0, (8,))
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..config import SynapseConfig
from ..embeddings import HashingEmbedder
from ..errors import InvalidInputError
from .cold_start import format_cold_start, measure_cold_start
from .perf_timing import (
    WARMUP,
    build_memory,
    dispose,
    ingest_slices,
    make_probes,
    measure_real_model,
    peak_rss_mb,
    summary,
    time_dense,
    time_models,  # documented here (docs/models.md): re-exported
    time_named,
    time_queries,
    time_retrieve,
    time_with_encoder,
)
from .synthetic import speaker_queries, synthetic_queries, synthetic_turns

__all__ = [
    "HashingEmbedder",
    "format_perf_table",
    "run_perf",
    "speaker_queries",
    "synthetic_queries",
    "synthetic_turns",
    "time_models",
]

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# the runner
# --------------------------------------------------------------------------------------------
def run_perf(
    nodes: Sequence[int] = (1000, 10000, 100000),
    *,
    queries: int = 200,
    progress: Callable[..., Any] | None = None,
    ingest_sample: int = 512,
    archive_at: int | None = 10000,
    archive_share: float = 0.9,
    real_embedder: Any | None = None,
    config: SynapseConfig | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    models: Sequence[str] = (),
    cold_start_rounds: int = 3,
) -> dict[str, Any]:
    """Run the performance benchmark; returns the perf.json object.

    ``{"runs": [...]}`` has one entry per size (keys fixed by the benchmark issue), and,
    when ``archive_at`` is one of ``nodes`` (or below the largest), ``"archive_check"``:
    the retrieval latency of a memory with ``archive_share`` of its episodes archived
    against a fresh memory of the same active turns. ``progress`` is called like
    ``tqdm(total=..., desc=...)``. ``log`` receives one line per finished stage.
    ``real_embedder`` (default: the packaged MiniLM) is used only for
    ``ingest_turns_per_s``, ``embed_query_ms`` and to embed each question before it is
    asked in ``retrieve_text_ms`` / ``dense_text_ms`` (:func:`.perf_timing.time_with_encoder`).
    ``models``: retrieval models also timed on each memory (:func:`time_models`; each run
    then has a ``"models"`` entry).
    ``cold_start_rounds``: fresh processes timed from their start to their first answer
    with the packaged model (:func:`.cold_start.measure_cold_start`; ``"cold_start"``);
    0 skips it.
    """
    sizes = [int(n) for n in nodes]
    if not sizes or any(isinstance(n, bool) or n < 1 for n in sizes):
        raise InvalidInputError(f"node counts must be positive integers, got {list(nodes)!r}")
    if isinstance(queries, bool) or not isinstance(queries, int) or queries < 1:
        raise InvalidInputError(f"queries must be a positive int, got {queries!r}")
    if not 0.0 < archive_share < 1.0:
        raise InvalidInputError(f"archive_share must lie in (0, 1), got {archive_share!r}")
    if isinstance(cold_start_rounds, bool) or not isinstance(cold_start_rounds, int) \
            or cold_start_rounds < 0:
        raise InvalidInputError(f"cold_start_rounds must be an int >= 0, got {cold_start_rounds!r}")
    say = log or (lambda line: logger.info("%s", line))
    cfg = config or SynapseConfig()
    k = cfg.top_k
    cold = None
    if cold_start_rounds:
        say(f"cold start: {cold_start_rounds} fresh processes, each to its first answer")
        cold = measure_cold_start(cold_start_rounds)
        say(format_cold_start(cold))

    say(f"real model: ingesting {ingest_sample} turns (batches of 64), timing query embeddings")
    from ..embeddings import as_embedder

    encoder = as_embedder(real_embedder)
    real = measure_real_model(encoder, sample=ingest_sample, config=cfg)
    say(f"real model: {real['ingest_turns_per_s']:.1f} turns/s ingest, "
        f"{real['embed_query_ms']:.2f} ms per query embedding")

    embedder = HashingEmbedder(cfg.embedding_dim)
    texts = synthetic_queries(queries, seed=seed)
    qvecs = embedder.embed_documents(texts)
    named = speaker_queries(min(queries, 100), seed=seed)
    nvecs = embedder.embed_documents(named)
    runs = []
    for n in sizes:
        t0 = time.perf_counter()
        marks: list[tuple[int, float]] = []
        mem, windows = build_memory(n, seed=seed, embedder=embedder, config=cfg, progress=progress,
                              desc=f"perf-build-{n}", marks=marks)
        try:
            build_s = time.perf_counter() - t0
            st = mem.stats()
            t = time_queries(mem, make_probes(mem, texts, qvecs), k)
            first_named, named_again = time_named(mem, named, nvecs, k)
            with_text, dense_text = time_with_encoder(mem, texts, qvecs, k, encoder)
            run = {
                "nodes": n,
                "edges": int(st["edges"]),
                "synthetic": True,
                "first_retrieve_ms": round(t["first"][0], 4),
                "retrieve_ms": summary(t["retrieve"]),
                "dense_only_ms": summary(t["dense"]),
                "activation_ms": summary(t["activation"]),
                "retrieve_named_ms": summary(named_again),
                "retrieve_named_first_ms": {**summary(first_named), "max": round(max(first_named), 4)},
                "ingest_turns_per_s": real["ingest_turns_per_s"],
                "consolidate_ms_per_window": round(float(np.mean(windows)), 4) if windows else 0.0,
                "ingest_slices": ingest_slices(marks),
                "embed_query_ms": real["embed_query_ms"],
                "retrieve_text_ms": summary(with_text),
                "dense_text_ms": summary(dense_text),
                "peak_rss_mb": round(peak_rss_mb(), 1),
            }
            run["ratio_with_query_embedding_p50"] = with_embedding(run)
            if models:
                run["models"] = time_models(mem, make_probes(mem, texts, qvecs), k, models,
                                            seed=seed)
                for m, e in run["models"]["models"].items():
                    say(f"  {m}: retrieve p50/p95 {e['retrieve_ms']['p50']:.2f}/"
                        f"{e['retrieve_ms']['p95']:.2f} ms ({e['ratio_to_dense_p50']}x dense), "
                        f"first {e['first_query_ms']:.0f} ms, after a write p50 "
                        f"{e['retrieve_after_write_ms']['p50']:.2f} ms")
            runs.append(run)
            say(f"{n} episodes, {st['concepts']} concepts, {st['edges']} edges: built in "
                f"{build_s:.1f}s ({n / build_s:.0f} turns/s, synthetic vectors); retrieve p50 "
                f"{run['retrieve_ms']['p50']:.2f} ms, dense-only {run['dense_only_ms']['p50']:.2f} "
                f"ms, activation {run['activation_ms']['p50']:.2f} ms; first query "
                f"{run['first_retrieve_ms']:.0f} ms; naming a speaker p50 "
                f"{run['retrieve_named_ms']['p50']:.2f} ms (first ask max "
                f"{run['retrieve_named_first_ms']['max']:.0f} ms)")
            say(f"{n} episodes, ingest turns/s per slice (synthetic vectors): "
                + ", ".join(f"{s['to']}: {s['turns_per_s']:.0f}" for s in run["ingest_slices"]))
        finally:
            dispose(mem)
            del mem

    out: dict[str, Any] = {"runs": runs}
    if cold is not None:
        out["cold_start"] = cold
    if archive_at:
        out["archive_check"] = archive_check(
            archive_at, share=archive_share, texts=texts, qvecs=qvecs, embedder=embedder,
            config=cfg, progress=progress, seed=seed)
        a = out["archive_check"]
        say(f"archive check: {a['archived_nodes']} archived + {a['active_nodes']} active nodes: "
            f"retrieve p50 {a['with_archive_ms']['p50']:.2f} ms vs "
            f"{a['archive_dropped_ms']['p50']:.2f} ms for the same memory with its archive "
            f"dropped (ratio {a['ratio_p50']:.2f}), {a['fresh_ms']['p50']:.2f} ms for a fresh "
            f"memory of the newest turns (ratio {a['ratio_fresh_p50']:.2f})")
    return out


def archive_check(n: int, *, share: float, texts: Sequence[str], qvecs: np.ndarray,
                  embedder: Any, config: SynapseConfig,
                  progress: Callable[..., Any] | None = None, seed: int = 0) -> dict[str, Any]:
    """Retrieval latency with many archived nodes vs. without any.

    Builds ``n`` turns and archives the oldest ``share`` of the episodes plus the concepts
    no remaining episode links to. Two controls are timed against it, interleaved query by
    query: the same build with its archive then dropped for good (the same active nodes,
    nothing archived; forget also drops the relation edges only archived turns said:
    ``ratio_p50``), and a fresh memory built from the newest turns only
    (``ratio_fresh_p50``; its active graph is a little smaller, since concepts first seen in
    old turns are not there).
    """
    turns = synthetic_turns(n, seed=seed)
    keep_from = int(round(n * share))
    old = {t["id"] for t in turns[:keep_from]}
    mems: list[Any] = []
    try:
        for desc in (f"perf-archive-{n}", f"perf-dropped-{n}"):
            mem, _ = build_memory(n, seed=seed, embedder=embedder, config=config, progress=progress,
                            desc=desc, turns=turns)
            mems.append(mem)
            mem.archive(_old_and_their_concepts(mem.graph, turns[:keep_from], old))
        big, twin = mems
        # the twin erases its archive for good and keeps its active graph
        twin.forget(ids=[a["id"] for a in twin.archived()])
        small, _ = build_memory(n - keep_from, seed=seed, embedder=embedder, config=config,
                          progress=progress, desc=f"perf-fresh-{n - keep_from}",
                          turns=turns[keep_from:])
        mems.append(small)
        k = config.top_k
        probes = [make_probes(m, texts, qvecs) for m in mems]
        for i in range(WARMUP):
            for m, pr in zip(mems, probes):
                time_retrieve(m, pr[i], k)
        times: list[list[float]] = [[], [], []]
        dense: dict[int, list[float]] = {0: [], 2: []}  # the Chroma query, archive vs fresh
        for i in range(len(probes[0])):
            for j, (m, pr) in enumerate(zip(mems, probes)):
                times[j].append(time_retrieve(m, pr[i], k))
                if j in dense:
                    dense[j].append(time_dense(m, pr[i], k))
        with_archive, same, fresh = (summary(t) for t in times)
        return {
            "nodes": n,
            "archived_nodes": len(big.archived()),
            "active_nodes": len(big.graph),
            "active_edges": big.graph.number_of_edges(),
            "dropped_active_nodes": len(twin.graph),
            "dropped_active_edges": twin.graph.number_of_edges(),
            "dropped_archived_nodes": len(twin.archived()),
            "fresh_active_nodes": len(small.graph),
            "with_archive_ms": with_archive,
            "archive_dropped_ms": same,
            "fresh_ms": fresh,
            "dense_with_archive_ms": summary(dense[0]),
            "dense_fresh_ms": summary(dense[2]),
            "ratio_p50": round(with_archive["p50"] / same["p50"], 4),
            "ratio_fresh_p50": round(with_archive["p50"] / fresh["p50"], 4),
        }
    finally:
        for m in mems:
            dispose(m)


def _old_and_their_concepts(g: Any, old_turns: Sequence[dict[str, Any]], old: set[str]) -> list[str]:
    """The old turns still active, plus the concepts that no newer episode links to."""
    doomed = [t["id"] for t in old_turns if t["id"] in g]
    for node, d in g.nodes(data=True):
        if d["kind"] == "concept":
            nbrs = set(g.predecessors(node)) | set(g.successors(node))
            if not any(g.nodes[m]["kind"] == "episode" and m not in old for m in nbrs):
                doomed.append(node)
    return doomed


def with_embedding(run: dict[str, Any]) -> float | None:
    """Retrieve over dense-only at p50 as a caller of ``retrieve(text)`` and of a vector
    store's ``similarity_search(text)`` waits: each with one query embedding by the real
    model added (None when the real model was not timed). The vector-only ratio
    (``retrieve_ms`` over ``dense_only_ms``) stays the headline figure.

    >>> with_embedding({"retrieve_ms": {"p50": 4.0}, "dense_only_ms": {"p50": 1.0},
    ...                 "embed_query_ms": 8.0})
    1.333
    """
    embed = float(run.get("embed_query_ms") or 0.0)
    if embed <= 0:
        return None
    return round((embed + run["retrieve_ms"]["p50"]) / (embed + run["dense_only_ms"]["p50"]), 3)


def format_perf_table(results: dict[str, Any]) -> str:
    """A readable table of a perf.json object (latencies in ms, p50/p95)."""
    lines = []
    runs = results["runs"]
    synthetic = any(r["synthetic"] for r in runs)
    lines.append(f"{'nodes':>8} {'edges':>8} {'retrieve p50/p95':>17} {'dense p50/p95':>15} "
                 f"{'activ. p50/p95':>15} {'ret/dense':>9} {'consol ms/win':>13} {'RSS MB':>8}")
    for r in runs:
        def pair(key: str) -> str:
            return f"{r[key]['p50']:.2f}/{r[key]['p95']:.2f}"
        ratio = r["retrieve_ms"]["p50"] / r["dense_only_ms"]["p50"] if r["dense_only_ms"]["p50"] else 0
        lines.append(f"{r['nodes']:>8} {r['edges']:>8} {pair('retrieve_ms'):>17} "
                     f"{pair('dense_only_ms'):>15} {pair('activation_ms'):>15} {ratio:>9.2f} "
                     f"{r['consolidate_ms_per_window']:>13.2f} {r['peak_rss_mb']:>8.0f}")
    for r in runs:
        if r.get("ingest_slices"):  # perf.json files before issue 52 lack them
            lines.append(f"{r['nodes']:>8} ingest turns/s per slice (synthetic vectors): "
                         + ", ".join(f"{s['to']}: {s['turns_per_s']:.0f}"
                                     for s in r["ingest_slices"]))
        if "first_retrieve_ms" in r:  # older perf.json files lack it
            lines.append(f"{r['nodes']:>8} first query after the build: "
                         f"{r['first_retrieve_ms']:.1f} ms")
        if "retrieve_named_ms" in r:  # perf.json files before 2026-11-27 lack them
            nf = r["retrieve_named_first_ms"]
            lines.append(f"{r['nodes']:>8} questions naming a speaker: retrieve "
                         f"{r['retrieve_named_ms']['p50']:.2f}/{r['retrieve_named_ms']['p95']:.2f}"
                         f" ms; first ask {nf['p50']:.2f}/{nf['p95']:.2f} ms, max {nf['max']:.0f}")
    if runs:
        lines.append(f"real model (all-MiniLM-L6-v2): ingest {runs[0]['ingest_turns_per_s']:.1f} "
                     f"turns/s (batched, fixed sample), query embedding "
                     f"{runs[0]['embed_query_ms']:.2f} ms")
        for r in runs:
            if "retrieve_text_ms" in r:  # perf.json files before 2026-11-29 lack them
                rt, dt = r["retrieve_text_ms"], r["dense_text_ms"]
                lines.append(f"{r['nodes']:>8} with the encoder before each query: retrieve "
                             f"{rt['p50']:.2f}/{rt['p95']:.2f} ms, dense-only {dt['p50']:.2f}/"
                             f"{dt['p95']:.2f} ms, ratio {rt['p50'] / dt['p50']:.2f}")
        ratios = [(r["nodes"], with_embedding(r)) for r in runs]
        both = [f"{n}: {x}x" for n, x in ratios if x]
        if both:
            lines.append("ret/dense p50 with the query's embedding on both sides: " + ", ".join(both))
    if synthetic:
        lines.append("synthetic: memories built from generated turns with hashed unit vectors "
                     "(not the real model); see docs/benchmarks.md")
    for r in runs:
        tm = r.get("models")
        if not tm:
            continue
        lines.append(f"models at {r['nodes']} nodes (dense-only {tm['dense_only_ms']['p50']:.2f}/"
                     f"{tm['dense_only_ms']['p95']:.2f} ms; one-turn ingest "
                     f"{tm['ingest_ms']['p50']:.1f}/{tm['ingest_ms']['p95']:.1f} ms):")
        for m, e in tm["models"].items():
            lines.append(f"  {m:10s} retrieve {e['retrieve_ms']['p50']:.2f}/{e['retrieve_ms']['p95']:.2f}"
                         f" ms ({e['ratio_to_dense_p50']}x dense p50), after a write "
                         f"{e['retrieve_after_write_ms']['p50']:.2f}/"
                         f"{e['retrieve_after_write_ms']['p95']:.2f} ms, first query "
                         f"{e['first_query_ms']:.0f} ms")
    if results.get("cold_start"):  # perf.json files before issue 47's cold start lack it
        lines.append(format_cold_start(results["cold_start"]))
    a = results.get("archive_check")
    if a:
        lines.append(f"archive check at {a['nodes']} turns: {a['archived_nodes']} archived + "
                     f"{a['active_nodes']} active nodes -> retrieve p50 "
                     f"{a['with_archive_ms']['p50']:.2f} ms; same memory, archive dropped -> "
                     f"{a['archive_dropped_ms']['p50']:.2f} ms (ratio {a['ratio_p50']:.2f}); "
                     f"fresh memory of {a['fresh_active_nodes']} active nodes -> "
                     f"{a['fresh_ms']['p50']:.2f} ms (ratio {a['ratio_fresh_p50']:.2f}); dense-only "
                     f"{a['dense_with_archive_ms']['p50']:.2f} vs {a['dense_fresh_ms']['p50']:.2f} ms")
    return "\n".join(lines)

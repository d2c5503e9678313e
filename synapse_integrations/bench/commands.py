"""The ``synapse bench ...`` commands of the console script: each runs a benchmark of
this package, prints its tables and writes its JSON (docs/benchmarks.md). The heavy
imports happen inside each command, so ``synapse --help`` stays fast."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["cmd_bench_agent", "cmd_bench_locomo", "cmd_bench_longmemeval", "cmd_bench_peers",
           "cmd_bench_perf", "cmd_bench_serve",
           "cmd_bench_probes", "cmd_bench_small", "format_first_query", "format_gate",
           "format_head_to_head", "format_locomo_table", "format_longmemeval_table",
           "format_probes_table", "format_recall_table"]


def _tqdm_factory(enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None

    def make(total: int, desc: str, unit: str = "turn") -> Any:
        return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False)

    return make


def _pct(value: Any, width: int = 10) -> str:
    return f"{'-':>{width}}" if value is None else f"{100 * value:>{width}.1f}"


def format_recall_table(results: dict[str, Any], cats: Sequence[str], names: dict[str, str],
                        metric: str = "recall", header: str = "") -> list[str]:
    """A methods x categories table of ``<metric>@k`` (percent) for every k, plus latency
    and, per k, the best baseline and the reference method's margin over it."""
    lines: list[str] = []
    methods = results["methods"]
    ks = sorted({int(key.split("@")[1]) for m in methods.values() for key in m
                 if key.startswith(f"{metric}@")})
    width = max([len(m) for m in methods] + [12])
    bb = results.get("best_baseline") or {}
    for k in ks:
        key = f"{metric}@{k}"
        lines.append(f"{key} (%)  {header}".rstrip())
        lines.append(f"{'method':<{width}} " + " ".join(f"{names[c]:>10}" for c in cats)
                     + f" {'p50 ms':>8} {'p95 ms':>8}")
        for name, m in methods.items():
            r = m[key]
            lines.append(f"{name:<{width}} " + " ".join(_pct(r.get(c)) for c in cats)
                         + f" {m['latency_ms']['p50']:>8.1f} {m['latency_ms']['p95']:>8.1f}")
        if key in bb:
            per = bb[key]
            lines.append(f"{'best baseline':<{width}} " + " ".join(
                f"{per[c]['baseline'][:10]:>10}" if c in per else f"{'-':>10}" for c in cats))
            lines.append(f"{bb['method'] + ' margin':<{width}} " + " ".join(
                f"{100 * per[c]['margin']:>+10.1f}" if c in per else f"{'-':>10}"
                for c in cats))
        lines.append("")
    return lines


def format_head_to_head(h2h: dict[str, Any] | None, which: str) -> list[str]:
    """The reference method against each baseline, question by question, at each k."""
    if not h2h:
        return []
    m = h2h["method"]
    keys = [key for key in h2h if key.startswith("recall@")]
    lines = [f"{m} against each baseline, question by question ({h2h['questions']} {which}): "
             f"lost = the baseline found more evidence, won = less; missed = {m} found none "
             f"where the baseline found some",
             f"  {'baseline':<14}" + "".join(f"{key + ' lost/won/tied/missed':>32}"
                                             for key in keys)]
    for name in [*h2h[keys[0]]["baselines"], "best of each"]:
        cells = []
        for key in keys:
            row = h2h[key]["best"] if name == "best of each" else h2h[key]["baselines"][name]
            cells.append(f"{row['lost']}/{row['won']}/{row['tied']}/{row['missed']}")
        lines.append(f"  {name:<14}" + "".join(f"{c:>32}" for c in cells))
    lines.append("")
    return lines


def format_gate(gate: dict[str, Any] | None, refuse: str, answer: str) -> list[str]:
    if not gate:
        return []
    lines = [f"gate ({gate['method']}, {gate.get('signal', '')} tau {gate['tau']:g}): {refuse} "
             f"rejected {100 * gate['adversarial_rejection']:.1f}%, false refusals "
             f"({answer}) {100 * gate['false_refusal']:.1f}%",
             f"  tau    {refuse + ' rejected':>20}  false refusal"]
    for row in gate["sweep"]:
        lines.append(f"  {row['tau']:<6g} {100 * row['adversarial_rejection']:>20.1f} "
                     f"{100 * row['false_refusal']:>14.1f}")
    if "decision" in gate:
        d = gate["decision"]
        lines.append(f"whole gate as decided (topic + evidence checks): {refuse} rejected "
                     f"{100 * d['adversarial_rejection']:.1f}%, false refusals "
                     f"{100 * d['false_refusal']:.1f}%; rejections by check {gate['checks']}")
        for name, key in (("attribution_sweep", "margin"), ("presence_sweep", "presence_min")):
            lines.append(f"  {key:<13}{refuse + ' rejected':>20}  false refusal   ({name})")
            for row in gate[name]:
                lines.append(f"  {row[key]:<13g}{100 * row['adversarial_rejection']:>20.1f} "
                             f"{100 * row['false_refusal']:>14.1f}")
    return lines


def format_context(results: dict[str, Any], cats: Sequence[str], names: dict[str, str],
                   pooled: str) -> list[str]:
    """Tokens of memory text per query at each k, and recall within each token budget
    per category (:mod:`.context_cost`; MiniLM tokens)."""
    methods = results["methods"]
    first = next(iter(methods.values()), {})
    ks = sorted(int(key.split("@")[1]) for key in first if key.startswith("context_tokens@"))
    if not ks:
        return []
    width = max([len(m) for m in methods] + [12])
    lines = [f"context handed to a model ({names.get(pooled, pooled)}): mean MiniLM tokens "
             "of the top k memories' text"]
    lines.append(f"{'method':<{width}} " + " ".join(f"{'k=' + str(k):>8}" for k in ks))
    for name, m in methods.items():
        lines.append(f"{name:<{width}} " + " ".join(
            f"{m[f'context_tokens@{k}'].get(pooled) or 0:>8.0f}" for k in ks))
    return lines + format_recall_table(results, cats, names, "tokens_recall",
                                       "recall within that many tokens of context")


def format_first_query(results: dict[str, Any]) -> list[str]:
    lines = []
    for method, fq in (results.get("first_query_ms") or {}).items():
        warm = results["methods"].get(method, {}).get("latency_ms")
        lines.append(f"first query after ingestion ({method}, {fq['n']} memories): p50 "
                     f"{fq['p50']:.1f} ms, p95 {fq['p95']:.1f} ms"
                     + (f"; warm p50 {warm['p50']:.1f} ms, p95 {warm['p95']:.1f} ms"
                        if warm else ""))
    return lines


def format_locomo_table(results: dict[str, Any]) -> str:
    """A methods x categories table of recall@k (percent) for every k, plus latency."""
    cats = ["1", "2", "3", "4", "5", "1-4"]
    names = {"1": "multi-hop", "2": "temporal", "3": "open-dom", "4": "single-hop",
             "5": "advers.", "1-4": "pooled 1-4"}
    q = results["questions"]
    lines = format_recall_table(results, cats, names, header="questions: " + ", ".join(
        f"{c}={q[c]}" for c in cats[:5]))
    lines += format_head_to_head(results.get("head_to_head"), "questions of categories 1-4")
    lines += format_context(results, cats, names, "1-4")
    lines += format_gate(results.get("gate"), "adversarial", "categories 1-4")
    lines += format_first_query(results)
    lines.append(f"skipped malformed evidence ids: {results['skipped_evidence']}")
    return "\n".join(lines)


LME_NAMES = {"single-session-user": "ss-user", "single-session-assistant": "ss-asst",
             "single-session-preference": "ss-pref", "multi-session": "multi-sess",
             "temporal-reasoning": "temporal", "knowledge-update": "know-upd",
             "abstention": "abstention", "pooled": "pooled"}


def format_longmemeval_table(results: dict[str, Any]) -> str:
    """Turn- and session-level recall@k per question type, gate, first-query latency."""
    q = results["questions"]
    first = next(iter(results["methods"].values()))
    cats = list(next(v for key, v in first.items() if key.startswith("recall@")))
    names = {c: LME_NAMES.get(c, c[:10]) for c in cats}
    header = "questions: " + ", ".join(f"{names[c]}={n}" for c, n in q.items() if c in names)
    lines = format_recall_table(results, cats, names, "recall", "turn level; " + header)
    lines += format_recall_table(results, cats, names, "session_recall", "session level")
    above = {m: e["newest_above_older"] for m, e in results["methods"].items()
             if (e.get("newest_above_older") or {}).get("rate") is not None}
    if above:  # knowledge-update questions with two or more evidence turns
        lines.append("newest evidence turn above the older ones (knowledge-update): " + ", ".join(
            f"{m} {100 * a['rate']:.1f}% of {a['n']}" for m, a in above.items()))
    lines += format_head_to_head(results.get("head_to_head"), "questions, abstention aside")
    lines += format_context(results, cats, names, "pooled")
    lines += format_gate(results.get("gate"), "abstention", "other questions")
    lines += format_first_query(results)
    t = results.get("timing_s") or {}
    if t:
        lines.append(f"time: {t['total']:.0f} s in all (embedding and cache reads "
                     f"{t['embed']:.0f} s, {t['embedded_texts']} texts embedded; ingestion "
                     f"{t['ingest']:.0f} s; retrieval {t['retrieve']:.0f} s; loading the "
                     f"model {t.get('model_load', 0.0):.1f} s, before any query was timed)")
    lines.append(f"skipped: {results['skipped']}")
    return "\n".join(lines)


def _embedder(args: argparse.Namespace) -> Any:
    """The benchmark's embedder: the packaged model, through the disk cache if asked."""
    from .retrieval import CachingEmbedder

    store = None
    if getattr(args, "embed_cache", None):
        from .vector_cache import VectorCache

        store = VectorCache(args.embed_cache, embedder="all-MiniLM-L6-v2", dim=384)
    return CachingEmbedder(None, store=store)


def cmd_bench_locomo(args: argparse.Namespace) -> int:
    from .retrieval import DEFAULT_KS, DEFAULT_METHODS
    from .runners import run_locomo

    t0 = time.perf_counter()
    results = run_locomo(
        args.data, conversations=args.conversations, methods=args.methods or DEFAULT_METHODS,
        ks=args.k or DEFAULT_KS, progress=_tqdm_factory(not args.no_progress),
        embedder=_embedder(args), turn_text=args.turn_text,
    )
    _write_json(args.out, results)
    print(format_locomo_table(results))
    print(f"wrote {args.out} ({time.perf_counter() - t0:.0f}s)")
    if args.plot:
        from .plots import plot_locomo

        for path in plot_locomo(results, args.plot):
            print(f"wrote {path}")
    return 0


def cmd_bench_longmemeval(args: argparse.Namespace) -> int:
    from .retrieval import DEFAULT_KS, DEFAULT_METHODS
    from .runners import run_longmemeval

    t0 = time.perf_counter()
    results = run_longmemeval(
        args.data, methods=args.methods or DEFAULT_METHODS, ks=args.k or DEFAULT_KS,
        types=args.types, limit=args.limit, progress=_tqdm_factory(not args.no_progress),
        embedder=_embedder(args),
    )
    _write_json(args.out, results)
    print(format_longmemeval_table(results))
    print(f"wrote {args.out} ({time.perf_counter() - t0:.0f}s)")
    if args.plot:
        from .plots import plot_longmemeval

        for path in plot_longmemeval(results, args.plot):
            print(f"wrote {path}")
    return 0


def cmd_bench_agent(args: argparse.Namespace) -> int:
    from .agent import AGENT_METHODS, DEFAULT_KS, run_agent
    from .agent_report import format_agent_table, plot_agent

    t0 = time.perf_counter()
    results = run_agent(args.data, methods=args.methods or AGENT_METHODS, ks=args.k or DEFAULT_KS,
                        limit=args.limit, embedder=_embedder(args), turn_text=args.turn_text,
                        progress=_tqdm_factory(not args.no_progress),
                        transcript=not args.no_transcript)
    _write_json(args.out, results)
    print(format_agent_table(results))
    print(f"wrote {args.out} ({time.perf_counter() - t0:.0f}s)")
    for path in plot_agent(results, args.plot) if args.plot else ():
        print(f"wrote {path}")
    return 0


def cmd_bench_peers(args: argparse.Namespace) -> int:
    from .peers import DEFAULT_PEER_KS, PEER_METHODS, format_peers_table, run_peers

    t0 = time.perf_counter()
    results = run_peers(args.data, methods=args.methods or PEER_METHODS,
                        ks=args.k or DEFAULT_PEER_KS, embedder=_embedder(args),
                        data_format=args.format, limit=args.limit,
                        scale_turns=args.scale_turns or None, scale_queries=args.scale_queries,
                        freeze_gc=not args.no_gc_freeze,
                        progress=_tqdm_factory(not args.no_progress))
    _write_json(args.out, results)
    print(format_peers_table(results))
    print(f"wrote {args.out} ({time.perf_counter() - t0:.0f}s)")
    return 0


def format_probes_table(results: dict[str, Any]) -> str:
    """Methods x probe kinds: identifier rank-1 and MRR, bridge hit@10, update order,
    never-said rejection (engine methods only)."""
    c = results["counts"]
    methods = results["methods"]
    width = max([len(m) for m in methods] + [12])
    cols = [("identifier", "rank1", "ident r@1"), ("identifier", "mrr", "ident MRR"),
            ("bridge", "hit@10", "bridge@10"), ("update", "newer_above_older", "upd newer>"),
            ("update", "newer_top5", "upd top5"), ("never_said", "rejected", "never rej"),
            ("never_said", "false_refusal", "false ref")]
    lines = [f"probes (%): identifier {c['identifier']}, bridge {c['bridge']}, update "
             f"{c['update']}, never said {c['never_said']}; false ref = answerable probes "
             f"refused by the same gate",
             f"{'method':<{width}} " + " ".join(f"{h:>10}" for _, _, h in cols)
             + f" {'p50 ms':>8}"]
    for name, m in methods.items():
        cells = [_pct((m.get(kind) or {}).get(key)) for kind, key, _ in cols]
        lines.append(f"{name:<{width}} " + " ".join(cells) + f" {m['latency_ms']['p50']:>8.1f}")
    lines.append("")
    for name, m in methods.items():
        ident = m.get("identifier", {}).get("groups", {})
        parts = [f"{g} {v['rank1'] * v['n']:.0f}/{v['n']} at rank 1" for g, v in ident.items()]
        if "bridge" in m:
            parts.append("bridge types hit@10: " + ", ".join(
                f"{t} {100 * v:.0f}" for t, v in m["bridge"]["types"].items()))
        lines.append(f"{name}: " + "; ".join(parts))
    return "\n".join(lines)


def cmd_bench_probes(args: argparse.Namespace) -> int:
    from ..errors import InvalidInputError
    from .as_of import format_as_of, longmemeval_updates, run_as_of
    from .baselines import is_baseline
    from .haystack_never_said import (
        HAYSTACK_METHODS,
        format_haystack_table,
        run_haystack_never_said,
    )
    from .probes import PROBE_METHODS, run_probes

    if not args.locomo and not args.longmemeval:
        raise InvalidInputError("bench probes needs --locomo FILE, --longmemeval FILE or both")
    t0 = time.perf_counter()
    embedder = _embedder(args)
    results: dict[str, Any] = {}
    if args.locomo:
        results = run_probes(args.locomo, probes=args.probes,
                             methods=args.methods or PROBE_METHODS, kinds=args.kinds,
                             embedder=embedder, progress=_tqdm_factory(not args.no_progress))
    if args.longmemeval:
        # the gate's probe set: engine methods only (the baselines have no gate)
        engine = [m for m in args.methods or () if not is_baseline(m)] or HAYSTACK_METHODS
        results["haystack_never_said"] = run_haystack_never_said(
            args.longmemeval, data=args.haystack_probes, methods=engine, embedder=embedder,
            progress=_tqdm_factory(not args.no_progress))
        updates = longmemeval_updates(args.longmemeval)  # changed facts, asked before and after
        if updates and "synapse" in (args.methods or PROBE_METHODS):
            results["as_of_longmemeval"] = run_as_of(updates, embedder,
                                                     progress=_tqdm_factory(not args.no_progress))
    from .supersession import PAIRS_FILE, format_supersession, run_supersession

    if PAIRS_FILE.exists():  # the labelled supersession set (a source checkout), on dev data
        sup = run_supersession(locomo=args.locomo, longmemeval=args.longmemeval)
        if sup["measured"]:
            results["supersession"] = sup
    _write_json(args.out, results)
    if args.locomo:
        print(format_probes_table(results))
        if "as_of" in results:
            print(format_as_of(results["as_of"]))
    if args.longmemeval:
        print(format_haystack_table(results["haystack_never_said"]))
        if "as_of_longmemeval" in results:
            print(format_as_of(results["as_of_longmemeval"], "LongMemEval knowledge updates"))
    if "supersession" in results:
        print(format_supersession(results["supersession"]))
    print(f"wrote {args.out} ({time.perf_counter() - t0:.0f}s)")
    return 0


def cmd_bench_small(args: argparse.Namespace) -> int:
    from .small import SMALL_METHODS, format_small_table, run_small

    t0 = time.perf_counter()
    results = run_small(data=args.data, methods=args.methods or SMALL_METHODS,
                        embedder=_embedder(args), progress=_tqdm_factory(not args.no_progress))
    _write_json(args.out, results)
    print(format_small_table(results))
    print(f"wrote {args.out} ({time.perf_counter() - t0:.0f}s)")
    return 0


def cmd_bench_perf(args: argparse.Namespace) -> int:
    from .perf import format_perf_table, run_perf

    results = run_perf(args.nodes, queries=args.queries, progress=_tqdm_factory(not args.no_progress),
                       ingest_sample=args.ingest_sample, archive_at=args.archive_at or None,
                       log=lambda line: print(line, flush=True), models=args.models or (),
                       cold_start_rounds=args.cold_start_rounds)
    _write_json(args.out, results)
    print(format_perf_table(results))
    print(f"wrote {args.out}")
    if args.plot:
        from .plots import plot_perf

        for path in plot_perf(results, args.plot):
            print(f"wrote {path}")
    return 0


def cmd_bench_serve(args: argparse.Namespace) -> int:
    import tempfile

    from .serve import format_serve_table, run_serve

    with tempfile.TemporaryDirectory(prefix="synapse-bench-serve-") as tmp:
        results = run_serve(tmp, clients=args.clients, ops=args.ops, namespaces=args.namespaces,
                            write_share=args.write_share, embedder=args.embedder,
                            rounds=args.rounds, log=lambda line: print(line, flush=True))
    _write_json(args.out, results)
    print(format_serve_table(results))
    print(f"wrote {args.out}")
    return 0 if not results["errors"] and not any(results["stored"].values()) else 1


def _write_json(path: str, data: dict[str, Any]) -> None:
    from pathlib import Path

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(target)

"""The ``synapse-memory`` console script (also installed as ``synapse``, a name
``synapseclient`` uses too; ``python -m synapse_integrations.cli`` always works).

``synapse demo [--path DIR] [--k 5]`` ingests the shipped multi-session conversation into
embedded Chroma and shows, for a few questions, what memory returns and why.

``synapse bench locomo --data FILE --out results.json`` measures retrieval quality on LoCoMo
(baselines, SYNAPSE, ablations, gate); ``synapse bench longmemeval --data FILE --out ...`` the
same on LongMemEval (one memory per question); ``synapse bench probes --locomo FILE --out ...``
runs our own probe sets (exact identifiers, two-hop bridges, never-said questions, knowledge
updates) inside real LoCoMo conversations; ``synapse bench small --out ...`` asks questions of
hand-written memories of a few turns (day one); ``synapse bench perf --out perf.json`` measures
latency and throughput against memory size. See docs/benchmarks.md.

``synapse serve http|mcp --path DIR`` serves a memory folder (REST API, MCP server);
``synapse add|query|inspect|verify|repair|forget|export|import`` operate on a folder or a
server (:mod:`synapse_integrations.server.commands`; docs/deployment.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from .bench.commands import (
    cmd_bench_agent,
    cmd_bench_locomo,
    cmd_bench_longmemeval,
    cmd_bench_peers,
    cmd_bench_perf,
    cmd_bench_serve,
    cmd_bench_probes,
    cmd_bench_small,
)
from .core.text.documents import speaker_prefix


def _load_demo() -> dict[str, Any]:
    text = resources.files("synapse_integrations").joinpath("data/demo_conversation.json").read_text("utf-8")
    return json.loads(text)


def _progress(iterable: Any, *, total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc=desc, unit="turn", file=sys.stderr)


def _no_model_bars() -> None:
    """``--no-progress`` hides the model's loading bar as well: Hugging Face's libraries read
    ``HF_HUB_DISABLE_PROGRESS_BARS`` when first imported, and transformers, once imported,
    takes the switch directly."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def cmd_demo(args: argparse.Namespace) -> int:
    from . import Synapse
    from .embeddings import MiniLMEmbedder

    demo = _load_demo()
    out = sys.stdout
    print(f"SYNAPSE demo: {demo['title']}", file=out)
    print("loading the all-MiniLM-L6-v2 model (offline) ...", file=out)
    embedder = MiniLMEmbedder()
    t0 = time.perf_counter()
    embedder.model  # loaded here, so that the ingestion's progress and time are its own
    print(f"model loaded in {time.perf_counter() - t0:.1f}s", file=out)
    mem = Synapse(args.path, namespace=args.namespace, embedder=embedder)
    try:
        if mem.stats()["episodes"]:
            print(f"memory at {args.path} already holds {mem.stats()['episodes']} turns; "
                  f"use an empty --path or another --namespace", file=out)
            return 2
        # stored as the adapters store turns: the text, and the speaker as a field (the
        # engine reads the two together: core/text/documents.py)
        turns = [
            {"text": t["text"], "speaker": t["speaker"], "timestamp": s["datetime"], "id": f"s{si}t{ti}"}
            for si, s in enumerate(demo["sessions"]) for ti, t in enumerate(s["turns"])
        ]
        t0 = time.perf_counter()
        for chunk_start in _progress(range(0, len(turns), 10), total=(len(turns) + 9) // 10,
                                     desc="ingesting (x10 turns)", enabled=not args.no_progress):
            mem.add_turns(turns[chunk_start:chunk_start + 10])
        mem.consolidate()
        st = mem.stats()
        print(f"ingested {len(turns)} turns from {len(demo['sessions'])} sessions in "
              f"{time.perf_counter() - t0:.1f}s: {st['episodes']} episodes, {st['concepts']} concepts, "
              f"{st['edges']} edges", file=out)
        right = found = answerable = 0
        for q in demo["questions"]:
            res = mem.retrieve(q["question"], k=args.k)
            print("\n" + "=" * 78, file=out)
            print(f"Q: {q['question']}   [{q['kind']}; expected: {q['expect']}]", file=out)
            verdict = ("REJECTED: nothing relevant in memory" if res.rejected else "accepted")
            print(f"gate: {verdict} ({res.reason})", file=out)
            _print_items(mem, out, res.items)
            should_reject = q["kind"] == "never"
            gate_ok = res.rejected == should_reject
            right += gate_ok
            line = (f"gate {'right' if gate_ok else 'WRONG'}: "
                    f"{'rejected' if res.rejected else 'accepted'}, should be "
                    f"{'rejected (never said)' if should_reject else 'accepted'}")
            wanted = {f"s{a}t{b}" for a, b in q["answer_turns"]}
            if wanted:
                answerable += 1
                hit = next((r for r, it in enumerate(res.items, 1) if it.id in wanted), None)
                found += hit is not None
                line += (f"; answer turn found at rank {hit}" if hit else
                         f"; answer turn NOT in the top {args.k}")
            print(line, file=out)
            if q["kind"] == "bridge" and wanted:
                # what the entity-feedback pass adds: the paper's single pass rarely reaches
                # a fact two hops away
                deep = list(mem.retrieve(q["question"], k=4 * args.k).episodes())
                single = list(mem.retrieve(q["question"], k=4 * args.k,
                                           config=mem.config.replace(entity_feedback=0)).episodes())

                def rank(items: list[Any]) -> str:
                    r = next((r for r, it in enumerate(items, 1) if it.id in wanted), None)
                    return f"at rank {r}" if r else f"not in the first {len(items)}"

                print(f"the answer turn, {4 * args.k} turns deep: {rank(deep)} with entity "
                      f"feedback (default: a second pass with the named entities of the best "
                      f"matches), {rank(single)} as a single pass (entity_feedback=0)", file=out)
                hits = [(r, it) for r, it in enumerate(deep, 1) if it.id in wanted]
                _print_items(mem, out, [it for _, it in hits], [r for r, _ in hits])
        print("\n" + "=" * 78, file=out)
        print(f"summary: answer turn found for {found} of {answerable} answerable questions "
              f"(top {args.k}); gate right on {right} of {len(demo['questions'])} questions",
              file=out)
    finally:
        mem.close()
    return 0


_SHORT = {"similarity": "cos", "activation": "act", "pagerank": "pr", "lexical": "lex",
          "distinct": "only"}


def _score_line(c: Any, score: float) -> str:
    """``score 0.612 = 0.5 x cos 0.80 + ...``: every term of the score, with its weight."""
    if c.weights is None:
        return f"score {score:.3f} (the model's own score)"
    parts = [f"{w:g} x {_SHORT.get(name, name)} {getattr(c, name):.2f}" for name, w in c.weights.items() if w]
    parts += [f"{name} {value:+.2f}" for name, value in c.adjustments.items() if value]
    return f"score {score:.3f} = " + " + ".join(parts)


def _said(node: dict[str, Any]) -> str:
    """A memory as a line: a turn with its speaker's name (once), a concept's name."""
    if node.get("kind") != "episode":
        return node["text"]
    return speaker_prefix(node.get("speaker"), node["text"]) + node["text"]


def _print_items(mem: Any, out: Any, items: Any, ranks: Any = None) -> None:
    for rank, it in zip(ranks or range(1, len(items) + 1), items):
        c = it.components
        when = it.timestamp.date().isoformat() if it.timestamp else "concept"
        via = ""
        if len(it.path) > 1:
            names = [_said(mem.get(p))[:24] for p in it.path[:-1]]
            via = "  via " + " -> ".join(repr(n) for n in names)
        line = _said({"text": it.text, "speaker": it.speaker, "kind": it.kind})
        print(f" {rank:>2}. [{when}] {_score_line(c, it.score)} (bm25 #{c.bm25_rank or '-'}, dense "
              f"#{c.dense_rank or '-'}) {line[:90]}{via}", file=out)


def _csv(kind: type) -> Any:
    def parse(value: str) -> list[Any]:
        try:
            items = [kind(v.strip()) for v in value.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {value!r}") from None
        if not items:
            raise argparse.ArgumentTypeError("the list is empty")
        return items
    return parse


def _retrieval_args(p: argparse.ArgumentParser) -> None:
    from .bench.retrieval import method_names

    p.add_argument("--methods", type=_csv(str), default=None,
                   help="comma-separated methods (default: every default one): "
                        + ", ".join(method_names()))
    p.add_argument("--k", type=_csv(int), default=None, help="comma-separated k (default 5,10,30)")
    p.add_argument("--plot", default=None, metavar="DIR", help="save PNG plots in DIR")
    _output_args(p)


def _output_args(p: argparse.ArgumentParser) -> None:
    """What every benchmark over dev data takes: its results file, the embedding cache and
    the progress bar's switch."""
    p.add_argument("--out", required=True, help="results JSON")
    p.add_argument("--embed-cache", default=None, metavar="DIR",
                   help="keep turn embeddings in DIR between runs (created if missing)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    parser = argparse.ArgumentParser(
        prog=prog if prog in ("synapse", "synapse-memory") else "synapse-memory",
        description="SYNAPSE long-term memory tools")
    parser.add_argument("--version", action="version",
                        version=f"synapse-integrations {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine does")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="ingest a shipped conversation and show retrieval")
    demo.add_argument("--path", default=None,
                      help="memory folder (default: a temporary folder, deleted afterwards)")
    demo.add_argument("--namespace", default="demo")
    demo.add_argument("--k", type=int, default=5, help="memories shown per question")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")
    demo.set_defaults(func=cmd_demo)

    bench = sub.add_parser("bench", help="benchmarks: LoCoMo retrieval quality, performance")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    loc = bsub.add_parser("locomo", help="recall@k per LoCoMo category: baselines, SYNAPSE, "
                                         "ablations, gate sweep")
    loc.add_argument("--data", required=True, help="LoCoMo JSON (locomo10.json or a subset)")
    loc.add_argument("--conversations", type=_csv(str), default=None,
                     help="comma-separated sample ids (default: all)")
    loc.add_argument("--turn-text", choices=("prefixed", "bare"), default="prefixed",
                     help="store turns as '<speaker>: <text>' (the paper's protocol, default) "
                          "or the bare text with the speaker as a field (the adapters' way)")
    _retrieval_args(loc)
    loc.set_defaults(func=cmd_bench_locomo)

    lme = bsub.add_parser("longmemeval", help="recall@k per LongMemEval question type (one "
                                              "memory per question): baselines, SYNAPSE, "
                                              "ablations, gate sweep")
    lme.add_argument("--data", required=True,
                     help="LongMemEval JSON, plain or gzip (e.g. longmemeval_s_dev.json.gz)")
    lme.add_argument("--types", type=_csv(str), default=None,
                     help="comma-separated question types (default: all; 'abstention' "
                          "selects the _abs questions)")
    lme.add_argument("--limit", type=int, default=None, metavar="N",
                     help="only the first N questions (after --types)")
    _retrieval_args(lme)
    lme.set_defaults(func=cmd_bench_longmemeval)

    agt = bsub.add_parser("agent", help="memory in an agent's loop: each question asked as soon as "
                                        "its evidence is in, then stored with a reply, as the "
                                        "middleware records a chat; asked again at the end",
                          description="Methods by default: synapse and ppr (the strongest "
                                      "baseline); any method of bench locomo is accepted.")
    agt.add_argument("--data", required=True, help="LoCoMo or LongMemEval JSON (plain or gzip)")
    agt.add_argument("--limit", type=int, default=None, metavar="N",
                     help="only the first N conversations (LoCoMo) or questions (LongMemEval)")
    agt.add_argument("--turn-text", choices=("prefixed", "bare"), default="prefixed",
                     help="LoCoMo turns as '<speaker>: <text>' (default) or the bare text")
    agt.add_argument("--no-transcript", action="store_true",
                     help="do not also ask the questions of the whole transcript alone")
    _retrieval_args(agt)
    agt.set_defaults(func=cmd_bench_agent)

    prs = bsub.add_parser("peers", help="side by side with other memory layers (mem0, LangGraph's "
                                        "store, LlamaIndex's VectorMemoryBlock) on LoCoMo or "
                                        "LongMemEval; needs the [peers] extra")
    prs.add_argument("--data", required=True, help="LoCoMo or LongMemEval JSON (plain or gzip)")
    prs.add_argument("--format", choices=("auto", "locomo", "longmemeval"), default="auto",
                     help="the file's format (default: detected)")
    prs.add_argument("--methods", type=_csv(str), default=None,
                     help="comma-separated systems (default: all): synapse, ppr, mem0, "
                          "langgraph_store, llamaindex_memory")
    prs.add_argument("--k", type=_csv(int), default=None, help="comma-separated k (default 5,10)")
    prs.add_argument("--limit", type=int, default=None, metavar="N",
                     help="only the first N conversations (LoCoMo) or questions (LongMemEval)")
    prs.add_argument("--scale-turns", type=int, default=0, metavar="N",
                     help="also time queries on one memory of the file's first N turns, "
                          "concatenated (0: not run)")
    prs.add_argument("--scale-queries", type=int, default=50, metavar="Q",
                     help="questions timed at --scale-turns (default 50)")
    prs.add_argument("--no-gc-freeze", action="store_true",
                     help="do not gc.freeze() the built systems before the timed queries")
    _output_args(prs)
    prs.set_defaults(func=cmd_bench_peers)

    prb = bsub.add_parser("probes", help="our probe sets inside real LoCoMo conversations: exact "
                                         "identifiers, two-hop bridges, never-said questions, "
                                         "knowledge updates; and never-said questions in "
                                         "LongMemEval haystacks")
    prb.add_argument("--locomo", default=None,
                     help="LoCoMo JSON holding the dev conversations (the LoCoMo probe sets)")
    prb.add_argument("--longmemeval", default=None,
                     help="LongMemEval JSON, plain or gzip: never-said questions asked of its "
                          "haystacks (the gate's probe set; engine methods only)")
    prb.add_argument("--haystack-probes", default=None,
                     help="never-said questions JSON for --longmemeval (default: the packaged "
                          "data/haystack_never_said_v1.json)")
    prb.add_argument("--probes", default=None,
                     help="probe JSON (default: the packaged data/probes_v1.json)")
    prb.add_argument("--kinds", type=_csv(str), default=None,
                     help="comma-separated kinds: identifier, bridge, never_said, update")
    prb.add_argument("--methods", type=_csv(str), default=None,
                     help="comma-separated methods (default: bm25, dense, hybrid_rrf, fusion, "
                          "ppr, synapse, synapse-paper)")
    _output_args(prb)
    prb.set_defaults(func=cmd_bench_probes)

    sml = bsub.add_parser("small", help="memories of a few turns (day one): answer ranked "
                                        "first, answerable refused, never-said rejected")
    sml.add_argument("--data", default=None,
                     help="small-memories JSON (default: the packaged data/small_memories_v1.json)")
    sml.add_argument("--methods", type=_csv(str), default=None,
                     help="comma-separated methods (default: dense, bm25, fusion, ppr, synapse)")
    _output_args(sml)
    sml.set_defaults(func=cmd_bench_small)

    perf = bsub.add_parser("perf", help="latency and throughput against memory size")
    perf.add_argument("--nodes", type=_csv(int), default=[1000, 10000, 100000],
                      help="comma-separated episode counts (default 1000,10000,100000)")
    perf.add_argument("--queries", type=int, default=200, help="timed queries per size")
    perf.add_argument("--ingest-sample", type=int, default=512,
                      help="turns ingested with the real model to measure turns/s (default 512)")
    perf.add_argument("--archive-at", type=int, default=10000, metavar="N",
                      help="archive check: build N turns, archive 90%%, compare retrieval with "
                           "a fresh memory of the rest (default 10000; 0 skips it)")
    perf.add_argument("--models", type=_csv(str), default=None,
                      help="retrieval models also timed on each memory (e.g. "
                           "synapse,evermind,synaptic,mnemos,ppr)")
    perf.add_argument("--cold-start-rounds", type=int, default=3, metavar="N",
                      help="cold start: time N fresh processes from their start to their first "
                           "answer with the packaged model (about 10 s each; default 3; 0 "
                           "skips it)")
    perf.add_argument("--plot", default=None, metavar="DIR", help="save PNG plots in DIR")
    perf.add_argument("--out", required=True, help="perf JSON")
    perf.add_argument("--no-progress", action="store_true", help="no progress bar")
    perf.set_defaults(func=cmd_bench_perf)

    srv = bsub.add_parser("serve", help="a real `synapse serve http` process on 127.0.0.1 under "
                                        "concurrent clients: operations/s and p50/p95/p99 per "
                                        "operation, then every acknowledged turn checked")
    srv.add_argument("--clients", type=int, default=8, help="client threads (default 8)")
    srv.add_argument("--ops", type=int, default=60, help="operations per client (default 60)")
    srv.add_argument("--namespaces", type=int, default=4,
                     help="namespaces the clients share (default 4)")
    srv.add_argument("--write-share", type=float, default=0.5,
                     help="share of operations that write one turn; the others retrieve(k=10) "
                          "(default 0.5)")
    srv.add_argument("--embedder", choices=("hashing", "minilm"), default="hashing",
                     help="the server's embedder (default hashing: the server's own cost)")
    srv.add_argument("--rounds", type=int, default=3, help="load rounds on one server (default 3)")
    srv.add_argument("--out", required=True, help="results JSON")
    srv.set_defaults(func=cmd_bench_serve)

    ui = bsub.add_parser("ui", help="the web explorer (serve http --ui) in headless Chromium: "
                                    "page load and query round trip on a large memory")
    from .bench.ui import add_ui_args, cmd_bench_ui

    add_ui_args(ui)
    ui.set_defaults(func=cmd_bench_ui)

    from .server.commands import add_commands  # serve, and the operator commands

    add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "no_progress", False):
        _no_model_bars()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

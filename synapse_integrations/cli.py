"""The ``synapse`` console script.

``synapse demo [--path DIR] [--k 5]`` ingests the shipped multi-session conversation into
embedded Chroma and shows, for a few questions, what memory returns and why.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from importlib import resources
from typing import Any


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


def cmd_demo(args: argparse.Namespace) -> int:
    from . import Synapse

    demo = _load_demo()
    out = sys.stdout
    print(f"SYNAPSE demo: {demo['title']}", file=out)
    print("loading the all-MiniLM-L6-v2 model (offline) ...", file=out)
    mem = Synapse(args.path, namespace=args.namespace)
    try:
        if mem.stats()["episodes"]:
            print(f"memory at {args.path} already holds {mem.stats()['episodes']} turns; "
                  f"use an empty --path or another --namespace", file=out)
            return 2
        turns = [
            {"text": f"{t['speaker']}: {t['text']}", "speaker": t["speaker"], "timestamp": s["datetime"]}
            for s in demo["sessions"] for t in s["turns"]
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
        for q in demo["questions"]:
            res = mem.retrieve(q["question"], k=args.k)
            print("\n" + "=" * 78, file=out)
            print(f"Q: {q['question']}   [{q['kind']}; expected: {q['expect']}]", file=out)
            verdict = ("REJECTED: nothing relevant in memory" if res.rejected else "accepted")
            print(f"gate: confidence {res.confidence:.3f} vs tau {res.gate_tau:.2f} -> {verdict}", file=out)
            for rank, it in enumerate(res.items, 1):
                c = it.components
                when = it.timestamp.date().isoformat() if it.timestamp else "concept"
                via = ""
                if len(it.path) > 1:
                    names = [mem.get(p)["text"][:24] for p in it.path[:-1]]
                    via = "  via " + " -> ".join(repr(n) for n in names)
                print(f" {rank:>2}. [{when}] score {it.score:.3f} (cos {c.similarity:.2f}, act "
                      f"{c.activation:.2f}, pr {c.pagerank:.2f}, bm25 #{c.bm25_rank or '-'}, dense "
                      f"#{c.dense_rank or '-'}) {it.text[:90]}{via}", file=out)
    finally:
        mem.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="synapse", description="SYNAPSE long-term memory tools")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine does")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="ingest a shipped conversation and show retrieval")
    demo.add_argument("--path", default=None,
                      help="memory folder (default: a temporary folder, deleted afterwards)")
    demo.add_argument("--namespace", default="demo")
    demo.add_argument("--k", type=int, default=5, help="memories shown per question")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    # bm25s sets its own logger to DEBUG at import; keep it quiet unless asked
    logging.getLogger("bm25s").setLevel(logging.INFO if args.verbose else logging.WARNING)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

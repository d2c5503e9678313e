"""Does usage feedback help later questions? (Evermind's H3, seed paper 003, 4.4-4.5.)

Protocol, per LoCoMo conversation: ingest it once per method (a method is a model
configuration; each learns on a memory of its own), then ask its questions (categories
1-4, with evidence) one after the other, in a fixed shuffled order (``seed``; the file
groups questions by category, which would confound position with category). After each
question the answer "uses" the evidence turns found among the first ``feedback_k``
episodes and not the others: ``Synapse.feedback(question, used_ids=retrieved & evidence,
unused_ids=retrieved - evidence)`` (``used="retrieved"``, what an answer could have used);
with ``used="evidence"`` every evidence turn counts as used, found or not (an oracle that
knows where the answer was). The control asks the same stream on the same memory
*before* any feedback. Reported: recall@k per position bucket of the stream, with
feedback and without, and the *replay*: the earlier questions asked again after the
stream (what feedback memorised, as against what carried over to new questions).

Run::

    python -m synapse_integrations.bench.feedback_stream \\
        --data ../shared/data/locomo/locomo_dev.json --embed-cache DIR --out fb.json
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import SynapseConfig
from .locomo import load_locomo
from .metrics import recall_at_k
from .retrieval import CachingEmbedder

__all__ = ["METHODS", "run_feedback_stream"]

#: Method name -> (model, model_params): the models that learn, and Evermind's link option.
METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "evermind": ("evermind", {}),
    "evermind-links": ("evermind", {"evermind": {"learn_links": True}}),
    "synapse": ("synapse", {}),
}


def _ranked(mem: Any, text: str, v: np.ndarray, cfg: SynapseConfig, depth: int) -> list[str]:
    res = mem.retrieve_by_vector(text, v, k=4 * depth, config=cfg)
    return [it.id for it in res.items if it.kind == "episode"]


def run_feedback_stream(data: str, *, methods: Sequence[str] = tuple(METHODS),
                        conversations: Sequence[str] | None = None, ks: Sequence[int] = (5, 10),
                        feedback_k: int = 10, alpha: float = 0.1, buckets: int = 4,
                        seed: int = 0, used: str = "retrieved",
                        embedder: Any | None = None) -> dict[str, Any]:
    """The protocol of the module docstring; JSON-ready results."""
    if used not in ("retrieved", "evidence"):
        raise ValueError(f"used must be 'retrieved' or 'evidence', got {used!r}")
    from ..core.engine import Synapse

    ds = load_locomo(data, conversations=conversations)
    emb = embedder if isinstance(embedder, CachingEmbedder) else CachingEmbedder(embedder)
    depth = max(max(ks), feedback_k)
    # rows[method][phase] = list of (position share, {k: recall})
    rows: dict[str, dict[str, list[tuple[float, dict[int, float]]]]] = {
        m: {"static": [], "feedback": [], "replay": []} for m in methods}
    reports: dict[str, dict[str, int]] = {m: {"strengthened": 0, "weakened": 0, "created": 0}
                                          for m in methods}
    t0 = time.perf_counter()
    for conv in ds.conversations:
        qs = [q for q in conv.questions if q.category in (1, 2, 3, 4) and q.evidence]
        random.Random(f"{seed}/{conv.sample_id}").shuffle(qs)
        turns = [{"text": t.text, "speaker": t.speaker, "timestamp": t.timestamp,
                  "id": t.dia_id} for t in conv.turns]
        emb.prefetch(t["text"] for t in turns)
        vecs = {q.question: emb.embed_query(q.question) for q in qs}
        for m in methods:
            model, params = METHODS[m]
            cfg = SynapseConfig(model=model, model_params=params)
            mem = Synapse(None, namespace=f"fb-{conv.sample_id}", config=cfg, embedder=emb,
                          snapshot_every=10**9)
            try:
                for s in range(0, len(turns), 100):
                    mem.add_turns(turns[s:s + 100])
                mem.consolidate()
                for i, q in enumerate(qs):
                    r = _ranked(mem, q.question, vecs[q.question], cfg, depth)
                    rows[m]["static"].append((i / len(qs), {k: recall_at_k(r, q.evidence, k)
                                                            for k in ks}))
                for i, q in enumerate(qs):
                    r = _ranked(mem, q.question, vecs[q.question], cfg, depth)
                    rows[m]["feedback"].append((i / len(qs), {k: recall_at_k(r, q.evidence, k)
                                                              for k in ks}))
                    shown = r[:feedback_k]
                    good = ([x for x in shown if x in q.evidence] if used == "retrieved"
                            else list(q.evidence))
                    unused = [x for x in shown if x not in q.evidence]
                    rep = mem.feedback(q.question, good, unused, alpha=alpha)
                    for key in reports[m]:
                        reports[m][key] += getattr(rep, key)
                for i, q in enumerate(qs):
                    r = _ranked(mem, q.question, vecs[q.question], cfg, depth)
                    rows[m]["replay"].append((i / len(qs), {k: recall_at_k(r, q.evidence, k)
                                                            for k in ks}))
            finally:
                mem.close()
        emb.flush()
    out: dict[str, Any] = {"dataset": str(data), "conversations": list(ds.sample_ids),
                           "feedback_k": feedback_k, "alpha": alpha, "seed": seed,
                           "used": used,
                           "buckets": buckets, "methods": {}}
    for m in methods:
        entry: dict[str, Any] = {"edges": reports[m]}
        for phase, recs in rows[m].items():
            for k in ks:
                per = [[] for _ in range(buckets)]
                for pos, rec in recs:
                    per[min(int(pos * buckets), buckets - 1)].append(rec[k])
                entry.setdefault(phase, {})[f"recall@{k}"] = {
                    "buckets": [float(np.mean(b)) if b else None for b in per],
                    "all": float(np.mean([rec[k] for _, rec in recs])) if recs else None,
                    "n": [len(b) for b in per]}
        out["methods"][m] = entry
    out["seconds"] = time.perf_counter() - t0
    return out


def format_table(results: dict[str, Any]) -> str:
    """Per method and k: recall per bucket of the stream, static / with feedback / delta,
    and the replay of the whole stream."""
    lines = []
    b = results["buckets"]
    head = " ".join(f"{f'Q{i + 1}/{b}':>20s}" for i in range(b))
    lines.append(f"{'method':16s} {'k':>3s} {head} {'all':>20s} {'replay':>8s}")
    for m, e in results["methods"].items():
        for key in e["static"]:
            st, fb, rp = e["static"][key], e["feedback"][key], e["replay"][key]
            cells = [f"{100 * s:5.1f} {100 * f:5.1f} {100 * (f - s):+5.1f}"
                     for s, f in zip(st["buckets"], fb["buckets"])]
            lines.append(f"{m:16s} {key.split('@')[1]:>3s} " + " ".join(f"{c:>20s}" for c in cells)
                         + f" {100 * st['all']:5.1f} {100 * fb['all']:5.1f} "
                           f"{100 * (fb['all'] - st['all']):+5.1f}"
                         + f" {100 * rp['all']:7.1f}")
        lines.append(f"{'':16s} edges: {e['edges']}")
    lines.append("cells: static  with-feedback  delta (recall %, per quarter of the stream)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="LoCoMo JSON")
    p.add_argument("--conversations", default=None, help="comma-separated sample ids")
    p.add_argument("--methods", default=",".join(METHODS), help=f"of {', '.join(METHODS)}")
    p.add_argument("--feedback-k", type=int, default=10)
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--used", choices=("retrieved", "evidence"), default="retrieved",
                   help="what counts as used: evidence among the retrieved, or all evidence")
    p.add_argument("--embed-cache", default=None, metavar="DIR")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    store = None
    if args.embed_cache:
        from .vector_cache import VectorCache

        store = VectorCache(args.embed_cache, embedder="all-MiniLM-L6-v2", dim=384)
    res = run_feedback_stream(args.data, methods=args.methods.split(","),
                              conversations=args.conversations.split(",")
                              if args.conversations else None,
                              feedback_k=args.feedback_k, alpha=args.alpha, seed=args.seed,
                              used=args.used,
                              embedder=CachingEmbedder(None, store=store))
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=1)
    print(format_table(res))
    print(f"wrote {args.out} ({res['seconds']:.0f}s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

"""Timing of the retrieval models on a synthetic view (the numbers in docs/models.md).

``python -m synapse_integrations.core.models._perf --nodes 10000 --queries 200`` prints
JSON: the dense-only cost (a ``n x 384`` float32 mat-vec plus the top 20), each model's
``activate`` p50/p90 (derived structures already built), and each derived structure's
build time (cold, and an update after one more turn).

The view: ``n`` unit vectors drawn around ``n / 50`` topic centres (cosine about 0.6
within a topic, so the k-NN and cosine graphs have structure), 85% episodes with event
times in sessions of 20 turns a day apart, 15% concepts, and a random sparse graph with
the shape of ours (each episode linked to the next in time and to two concepts, both
ways).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from ...config import SynapseConfig
from ..graph.graph import Compiled
from . import get_model
from ._neighbors import NeighborIndex
from .base import Query

MODELS = ("synapse", "evermind", "synaptic", "mnemos", "ppr")


def synthetic_view(n: int, *, dim: int = 384, seed: int = 0) -> Compiled:
    rng = np.random.default_rng(seed)
    topics = max(1, n // 50)
    centres = rng.standard_normal((topics, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    topic = rng.integers(0, topics, n)
    emb = centres[topic] + 0.045 * rng.standard_normal((n, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    n_ep = int(n * 0.85)
    is_ep = np.zeros(n, dtype=bool)
    is_ep[:n_ep] = True
    ts: list[Any] = [1.7e9 + (k // 20) * 86400.0 + (k % 20) * 60.0 for k in range(n_ep)]
    ts += [None] * (n - n_ep)
    src, dst = [], []
    for k in range(n_ep - 1):  # temporal edges
        src.append(k)
        dst.append(k + 1)
    if n > n_ep:
        for k in range(n_ep):  # abstraction edges, both ways
            for c in rng.integers(n_ep, n, 2):
                src += [k, int(c)]
                dst += [int(c), k]
    pairs = sorted(set(zip(src, dst)))
    s = np.array([a for a, _ in pairs], dtype=np.int64)
    d = np.array([b for _, b in pairs], dtype=np.int64)
    w = rng.uniform(0.3, 1.0, s.size)
    texts = [f"turn {k}: we talked about topic {topic[k]} and it was great!" for k in range(n)]
    return Compiled.from_arrays([f"n{k}" for k in range(n)], emb, src=s, dst=d, weight=w,
                                is_episode=is_ep, attrs={"ts": ts, "text": texts})


def _query(view: Compiled, rng: np.random.Generator) -> Query:
    q = view.embeddings[rng.integers(view.n)] + 0.03 * rng.standard_normal(
        view.embeddings.shape[1]).astype(np.float32)
    q /= np.linalg.norm(q)
    sim = np.clip(view.embeddings @ q, -1.0, 1.0)
    anchors = np.sort(np.argpartition(-sim, 20)[:20])
    return Query("what did we say about that topic?", q, sim, anchors)


def _p(xs: list[float], q: float) -> float:
    return round(float(np.percentile(xs, q)) * 1e3, 3)


def run(n: int, queries: int, models: tuple[str, ...] = MODELS) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    view = synthetic_view(n)
    qs = [_query(view, rng) for _ in range(queries)]
    cfg = SynapseConfig()
    built = {name: get_model(name) for name in models}
    cold = {}
    for name, model in built.items():
        t = time.perf_counter()
        model.activate(view, qs[0], cfg)  # builds the derived structures
        cold[name] = time.perf_counter() - t
    # interleaved, so that the noise of shared cores falls on every column alike
    dense: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in built}
    for q in qs:
        t = time.perf_counter()
        s = np.clip(view.embeddings @ q.vector, -1.0, 1.0)
        np.argpartition(-s, 20)[:20]
        dense.append(time.perf_counter() - t)
        for name, model in built.items():
            t = time.perf_counter()
            model.activate(view, q, cfg)
            times[name].append(time.perf_counter() - t)
    out: dict[str, Any] = {"nodes": n, "queries": queries,
                           "dense_only_ms": {"p50": _p(dense, 50), "p90": _p(dense, 90)}}
    for name in built:
        out[name] = {"first_query_s": round(cold[name], 3), "p50_ms": _p(times[name], 50),
                     "p90_ms": _p(times[name], 90),
                     "x_dense_p50": round(float(np.median(times[name]) / np.median(dense)), 2)}
    return out


def build_times(n: int) -> dict[str, Any]:
    """Cold build of each neighbour table (episodes: k=3 for Evermind, 32 for mnemos; all
    nodes: 10 for SynapticRAG) and its update after one more episode."""
    view = synthetic_view(n + 1)
    ids = view.ids[:n]
    small = Compiled.from_arrays(ids, view.embeddings[:n], src=[], dst=[], weight=[],
                                 is_episode=view.is_episode[:n])
    out: dict[str, Any] = {"nodes": n}
    for subset, k in (("episodes", 3), ("episodes", 32), ("all", 10)):
        index = NeighborIndex()
        index.table(small, subset=subset, k=k)  # type: ignore[arg-type]
        cold = index.last_build["seconds"]
        grown = Compiled.from_arrays(view.ids, view.embeddings, src=[], dst=[], weight=[],
                                     is_episode=np.r_[view.is_episode[:n], True])
        index.table(grown, subset=subset, k=k)  # type: ignore[arg-type]
        update = float(index.last_build["seconds"])  # type: ignore[arg-type]
        out[f"{subset}:k={k}"] = {"cold_s": round(float(cold), 2),  # type: ignore[arg-type]
                                  "update_s": round(update, 4),
                                  "update_how": index.last_build["how"]}
    return out


def main() -> None:  # pragma: no cover - a script
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--build-only", action="store_true",
                    help="only time the neighbour tables (cold and one update)")
    args = ap.parse_args()
    if args.build_only:
        print(json.dumps(build_times(args.nodes), indent=2))
    else:
        print(json.dumps(run(args.nodes, args.queries, tuple(args.models.split(","))), indent=2))


if __name__ == "__main__":  # pragma: no cover
    main()

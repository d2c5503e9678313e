"""The LoCoMo retrieval benchmark behind ``synapse bench locomo``.

Protocol (``../shared/DESIGN.md``, "LoCoMo retrieval protocol"): every turn of a
conversation is ingested in order as one episodic node (id = its ``dia_id``), consolidated
as configured; each question with evidence is retrieved, and recall@k is the share of its
evidence among the first ``k`` *episodic* items of the ranking (concepts do not count).

Fairness rules, so that the methods differ only in how they rank:

* one embedding per text per run (:class:`CachingEmbedder`): turns are embedded once in a
  batch and every method sees the same vectors;
* the baselines (``dense``, ``bm25``, ``hybrid_rrf``) rank the same episodes the engine
  holds: ``dense`` is Chroma's cosine top-k restricted to episodes, ``bm25`` is the
  engine's tokenizer and BM25 (bm25s) over the episode texts, ``hybrid_rrf`` their
  reciprocal-rank fusion with constant 60;
* each distinct graph configuration is ingested once per conversation; methods that
  change only retrieval settings share it through
  ``Synapse.retrieve_by_vector(..., config=...)``;
* latency is the retrieval call plus the query's embedding, measured once per question with
  the real model (one text, not a batch) and added to every method's time for it.

The runner is a plain function returning JSON-ready data; the CLI adds the table, the
progress bar and the plot.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import SynapseConfig
from ..errors import InvalidInputError
from .locomo import LocomoConversation, load_locomo
from .metrics import DEFAULT_GATE_TAUS, aggregate_recall, gate_rates, gate_sweep, percentiles, \
    recall_at_k

__all__ = [
    "BASELINES",
    "CachingEmbedder",
    "DEFAULT_KS",
    "DEFAULT_METHODS",
    "method_config",
    "rrf_fuse",
    "run_locomo",
]

logger = logging.getLogger(__name__)

#: Ranked lists fused by ``hybrid_rrf`` are this deep (at least the largest k).
RRF_DEPTH = 100
RRF_CONSTANT = 60
DEFAULT_KS: tuple[int, ...] = (5, 10, 30)
BASELINES = ("dense", "bm25", "hybrid_rrf")
_ABLATIONS = ("no-gate", "no-inhibition", "no-fan", "no-decay", "no-pagerank",
              "no-activation", "no-graph")
#: Options of the engine that are off by default, measured as methods of their own.
OPTIONS: dict[str, dict[str, Any]] = {"synapse-entity-feedback": {"entity_feedback": 1}}
DEFAULT_METHODS: tuple[str, ...] = (
    *BASELINES, "synapse-paper", "synapse", *OPTIONS, *(f"synapse-{a}" for a in _ABLATIONS))


def method_config(name: str, base: SynapseConfig | None = None) -> SynapseConfig:
    """The engine configuration of a ``synapse*`` method name.

    ``synapse`` is ``base`` (default: ``SynapseConfig()``), ``synapse-paper`` the paper's
    exact defaults, ``synapse-entity-feedback`` ``base`` with ``entity_feedback=1`` (a
    second pass through named entities), ``synapse-<ablation>`` a row of the paper's
    Table 3 applied to ``base``.
    """
    base = base or SynapseConfig()
    if name == "synapse":
        return base
    if name == "synapse-paper":
        return SynapseConfig.paper()
    if name in OPTIONS:
        return base.replace(**OPTIONS[name])
    if name.startswith("synapse-"):
        return SynapseConfig.ablation(name[len("synapse-"):], base=base)
    raise InvalidInputError(
        f"unknown method {name!r}; choose from {', '.join(DEFAULT_METHODS)}")


def rrf_fuse(rankings: Sequence[Sequence[str]], *, constant: int = RRF_CONSTANT) -> list[str]:
    """Reciprocal-rank fusion: ``score(d) = sum over lists of 1 / (constant + rank)``, rank
    from 1; ties keep the order of first appearance.

    >>> rrf_fuse([["a", "b", "c"], ["c", "a"]], constant=60)
    ['a', 'c', 'b']
    """
    score: dict[str, float] = {}
    for ranking in rankings:
        for r, doc in enumerate(ranking, 1):
            score[doc] = score.get(doc, 0.0) + 1.0 / (constant + r)
    order = {d: i for i, d in enumerate(score)}
    return sorted(score, key=lambda d: (-score[d], order[d]))


class CachingEmbedder:
    """Wraps an embedder; each distinct text is embedded once per run.

    ``prefetch`` embeds many texts in one batch; :meth:`timed_query` embeds a query alone
    (as a user's query would be) and returns how long that took, in milliseconds.
    """

    def __init__(self, inner: Any) -> None:
        from ..embeddings import as_embedder

        self.inner = as_embedder(inner)
        self.dim = self.inner.dim
        self._cache: dict[str, np.ndarray] = {}

    def prefetch(self, texts: Iterable[str]) -> None:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for t, v in zip(missing, self.inner.embed_documents(missing)):
                self._cache[t] = v

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        self.prefetch(texts)
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        v = self._cache.get(text)
        if v is None:
            v = self._cache[text] = self.inner.embed_query(text)
        return v

    def timed_query(self, text: str) -> tuple[np.ndarray, float]:
        t0 = time.perf_counter()
        v = self.inner.embed_query(text)
        ms = (time.perf_counter() - t0) * 1000.0
        self._cache.setdefault(text, v)
        return v, ms


@dataclass
class QuestionRecord:
    """What one method returned for one question (kept for analysis and plots)."""

    conversation: str
    question: str
    category: int
    evidence: tuple[str, ...]
    ranked: list[str]
    latency_ms: float
    confidence: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _ingest(conv: LocomoConversation, cfg: SynapseConfig, embedder: CachingEmbedder,
            progress: Callable[..., Any] | None) -> Any:
    from ..core.engine import Synapse

    mem = Synapse(None, namespace=f"bench-{conv.sample_id}", config=cfg, embedder=embedder,
                  snapshot_every=10**9)
    turns = [{"text": t.text, "speaker": t.speaker, "timestamp": t.timestamp, "id": t.dia_id}
             for t in conv.turns]
    step = max(1, cfg.consolidation_interval or 5)
    chunks = range(0, len(turns), step)
    bar = progress(total=len(turns), desc=f"ingest {conv.sample_id}") if progress else None
    for s in chunks:
        mem.add_turns(turns[s:s + step])
        if bar is not None:
            bar.update(len(turns[s:s + step]))
    mem.consolidate()
    if bar is not None:
        bar.close()
    return mem


def run_locomo(
    data: str | Path,
    *,
    conversations: Sequence[str] | None = None,
    methods: Sequence[str] = DEFAULT_METHODS,
    ks: Sequence[int] = DEFAULT_KS,
    embedder: Any | None = None,
    base_config: SynapseConfig | None = None,
    progress: Callable[..., Any] | None = None,
    taus: Sequence[float] = DEFAULT_GATE_TAUS,
    keep_records: bool = False,
) -> dict[str, Any]:
    """Run the benchmark; returns the results.json object (see the issue's contract).

    ``progress``, when given, is called like ``tqdm(total=..., desc=...)`` and must return
    an object with ``update(n)`` and ``close()``. With ``keep_records=True`` the result
    also holds ``"records"``: ``{method: [QuestionRecord, ...]}`` (not JSON; the CLI
    removes it before writing).
    """
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise InvalidInputError(f"k values must be positive integers, got {ks!r}")
    methods = list(dict.fromkeys(methods))
    for m in methods:
        if m not in BASELINES:
            method_config(m, base_config)  # validates the name
    ds = load_locomo(data, conversations=conversations)
    emb = embedder if isinstance(embedder, CachingEmbedder) else CachingEmbedder(embedder)
    depth = max(RRF_DEPTH, ks[-1])
    records: dict[str, list[QuestionRecord]] = {m: [] for m in methods}

    syn_methods = [m for m in methods if m not in BASELINES]
    configs = {m: method_config(m, base_config) for m in syn_methods}
    need_baseline = any(m in BASELINES for m in methods)
    base_sig = (base_config or SynapseConfig()).graph_signature()

    for conv in ds.conversations:
        emb.prefetch(t.text for t in conv.turns)
        qvec: dict[str, tuple[np.ndarray, float]] = {}
        for q in conv.questions:
            if q.question not in qvec:
                qvec[q.question] = emb.timed_query(q.question)

        # group methods by the graph they need; baselines ride on the default graph
        groups: dict[tuple[Any, ...], list[str]] = {}
        for m in syn_methods:
            groups.setdefault(configs[m].graph_signature(), []).append(m)
        if need_baseline and base_sig not in groups:
            groups[base_sig] = []
        for sig, group in groups.items():
            cfg = configs[group[0]] if group else (base_config or SynapseConfig())
            mem = _ingest(conv, cfg, emb, progress)
            try:
                if sig == base_sig and need_baseline:
                    _run_baselines(conv, mem, qvec, [m for m in methods if m in BASELINES],
                                   depth, records)
                for m in group:
                    mcfg = configs[m]
                    for q in conv.questions:
                        v, embed_ms = qvec[q.question]
                        t0 = time.perf_counter()
                        res = mem.retrieve_by_vector(q.question, v, k=_request_k(ks[-1]),
                                                     config=mcfg)
                        ms = (time.perf_counter() - t0) * 1000.0 + embed_ms
                        ranked = [it.id for it in res.items if it.kind == "episode"]
                        records[m].append(QuestionRecord(
                            conv.sample_id, q.question, q.category, q.evidence, ranked, ms,
                            float(res.confidence)))
            finally:
                mem.close()

    out: dict[str, Any] = {
        "dataset": str(data),
        "conversations": list(ds.sample_ids),
        "questions": {str(c): sum(1 for q in ds.questions if q.category == c)
                      for c in range(1, 6)},
        "skipped_evidence": int(ds.skipped_evidence),
        "methods": {},
    }
    for m in methods:
        recs = records[m]
        entry: dict[str, Any] = {}
        for k in ks:
            per = aggregate_recall((r.category, recall_at_k(r.ranked, r.evidence, k))
                                   for r in recs if r.evidence)
            entry[f"recall@{k}"] = {key: float(per.get(key, 0.0))
                                    for key in ("1", "2", "3", "4", "5", "1-4")}
        entry["latency_ms"] = percentiles([r.latency_ms for r in recs]) if recs else \
            {"p50": 0.0, "p95": 0.0}
        out["methods"][m] = entry
    gate_method = "synapse" if "synapse" in records else next(iter(syn_methods), None)
    if gate_method is not None:
        gcfg = configs[gate_method]
        conf = [(r.category, r.confidence) for r in records[gate_method]]
        rates = gate_rates((c, x < gcfg.gate_tau) for c, x in conf)
        out["gate"] = {"method": gate_method, "tau": float(gcfg.gate_tau), **rates,
                       "sweep": gate_sweep(conf, taus)}
    if keep_records:
        out["records"] = records
    return out


def _request_k(k_max: int) -> int:
    # concepts share the ranking with episodes: ask for enough items that k_max episodes
    # survive the filter whenever the engine has that many candidates
    return 4 * k_max


def _run_baselines(conv: LocomoConversation, mem: Any, qvec: dict[str, tuple[np.ndarray, float]],
                   methods: list[str], depth: int, records: dict[str, list[QuestionRecord]]) -> None:
    from ..core.triggers import BM25Index

    bm25 = BM25Index()
    bm25.set({t.dia_id: t.text for t in conv.turns})
    depth = min(depth, len(conv.turns))
    for q in conv.questions:
        v, embed_ms = qvec[q.question]
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        dense, _ = mem.search_vectors(v, depth, kind="episode")
        timings["dense"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        lexical, _ = bm25.query(q.question, depth)
        timings["bm25"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        fused = rrf_fuse([dense, lexical])
        timings["hybrid_rrf"] = timings["dense"] + timings["bm25"] + time.perf_counter() - t0
        ranked = {"dense": dense, "bm25": lexical, "hybrid_rrf": fused}
        for m in methods:
            # BM25 alone never embeds the query; the other two need the embedding
            ms = timings[m] * 1000.0 + (0.0 if m == "bm25" else embed_ms)
            records[m].append(QuestionRecord(conv.sample_id, q.question, q.category, q.evidence,
                                             list(ranked[m]), ms))

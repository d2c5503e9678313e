"""The retrieval benchmarks behind ``synapse bench locomo`` and ``synapse bench longmemeval``.

Both follow one loop (:func:`run_memories`): a benchmark is a list of memories, each a
list of turns plus the questions asked of it (a LoCoMo conversation and its questions;
one LongMemEval question and its own haystack). For each memory, every method ranks
every question; recall@k is the share of a question's evidence among the first ``k``
*episodic* items of the ranking (concepts do not count).

Protocols: ``../shared/DESIGN.md``, "LoCoMo retrieval protocol" and "LongMemEval retrieval
protocol". Fairness rules, so that the methods differ only in how they rank:

* one embedding per text per run (:class:`CachingEmbedder`, optionally backed by an
  on-disk :class:`~synapse_integrations.bench.vector_cache.VectorCache`): a memory's turns
  are embedded once in a batch and every method sees the same vectors;
* the baselines (:mod:`~synapse_integrations.bench.baselines`: ``dense``, ``bm25``,
  ``hybrid_rrf``, ``fusion``, ``ppr``) rank the same episodes the engine holds (``ppr``
  walks the graph the base configuration built, from the base's anchors);
* each distinct graph configuration is ingested once per memory; methods that change
  only retrieval settings share it through ``Synapse.retrieve_by_vector(..., config=...)``;
* latency is the retrieval call plus the query's embedding, measured once per question
  with the real model (one text, not a batch) and added to every method's time for it
  (``bm25`` excepted: it never embeds the query). It is *warm* latency: the first
  retrieval on a freshly ingested memory pays for building derived state (the compiled
  graph, PageRank, the BM25 index), so it is timed apart, as ``first_query_ms`` (keyed by
  the method that paid it, one per ingested graph), and then asked again; the baselines'
  indexes are built by one untimed query.

The runners of the two datasets, and the results JSON they assemble, are in
:mod:`.runners`: plain functions returning JSON-ready data; the CLI adds the table, the
progress bar and the plot.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ..config import SynapseConfig
from ..errors import ConfigError, InvalidInputError
from ..presets import BENCH_OPTIONS, LIFECYCLE_OPTIONS
from .baselines import (
    BASELINES,
    FUSION_WEIGHT,
    BaselineRanker,
    is_baseline,
    needs_memory,
    rrf_fuse,
)
from .records import QuestionRecord

__all__ = [
    "BASELINES",
    "BenchMemory",
    "BenchQuestion",
    "CachingEmbedder",
    "DEFAULT_KS",
    "DEFAULT_METHODS",
    "FUSION_WEIGHT",
    "MODEL_PREFIX",
    "QuestionRecord",
    "check_ks",
    "check_methods",
    "ingest_memory",
    "method_config",
    "method_names",
    "rrf_fuse",
    "run_memories",
]

logger = logging.getLogger(__name__)

#: Ranked lists of the baselines are this deep (at least the largest k).
RRF_DEPTH = 100
DEFAULT_KS: tuple[int, ...] = (5, 10, 30)
_ABLATIONS = ("no-gate", "no-inhibition", "no-fan", "no-decay", "no-pagerank",
              "no-activation", "no-graph", "no-feedback", "no-context")
#: Options of the engine that are off by default, measured as methods of their own
#: (``presets.BENCH_OPTIONS``); the lifecycle options run only when named.
OPTIONS: dict[str, dict[str, Any]] = {**BENCH_OPTIONS, **LIFECYCLE_OPTIONS}
DEFAULT_METHODS: tuple[str, ...] = (
    *BASELINES, "synapse-paper", "synapse", *BENCH_OPTIONS, *(f"synapse-{a}" for a in _ABLATIONS))
#: ``model:<name>`` runs the base configuration with ``SynapseConfig(model=<name>)``.
MODEL_PREFIX = "model:"
#: ``evermind-g<x>`` runs ``model:evermind`` with Evermind's ``gamma = x`` (the paper's
#: sweep: 0.70 to 1.0; 1.0: no spreading, only the seeds are scored).
_EVERMIND_G = re.compile(r"^evermind-g(\d+(?:\.\d+)?)$")
#: Turns per ``add_turns`` call while ingesting (a multiple of the consolidation interval,
#: so the consolidation windows are the same as turn by turn).
INGEST_CHUNK = 100


def method_names() -> list[str]:
    """Every method name the benchmarks accept today: the defaults, ``fusion-w<x>``
    (any x in [0, 1]), ``ppr-d<x>`` (x in [0, 0.99]) and one ``model:<name>`` per
    registered retrieval model."""
    from ..core.models import model_names

    return [*DEFAULT_METHODS, *LIFECYCLE_OPTIONS, "fusion-w<x>", "ppr-d<x>",
            *(MODEL_PREFIX + m for m in model_names()), "evermind-g<x>"]


def _evermind_gamma(name: str, base: SynapseConfig) -> SynapseConfig | None:
    """``base`` with ``model="evermind"`` and ``gamma`` from an ``evermind-g<x>`` name
    (``None`` for any other name); the other Evermind parameters of ``base`` are kept.

    >>> cfg = _evermind_gamma("evermind-g0.7", SynapseConfig())
    >>> cfg.model, cfg.model_params["evermind"]
    ('evermind', {'gamma': 0.7})
    >>> _evermind_gamma("evermind", SynapseConfig()) is None
    True
    """
    m = _EVERMIND_G.match(name)
    if m is None:
        return None
    from ..core.models import evermind
    from ..core.models._params import read_params

    cfg = base.with_model("evermind", gamma=float(m[1]))
    try:
        read_params(cfg, evermind.PARAMS)
    except ConfigError as exc:
        raise InvalidInputError(f"{name}: {exc}") from exc
    return cfg


def method_config(name: str, base: SynapseConfig | None = None) -> SynapseConfig:
    """The engine configuration of an engine method name.

    ``synapse`` is ``base`` (default: ``SynapseConfig()``), ``synapse-paper`` the paper's
    exact defaults, ``synapse-reconsolidation`` /
    ``synapse-surprisal`` / ``synapse-sleep`` ``base`` with one lifecycle mechanism on, ``synapse-<ablation>`` a row of the paper's
    Table 3 (or one of ours, such as ``no-feedback``: the single pass) applied to
    ``base``, ``model:<name>`` ``base`` with ``model=<name>`` for
    any model registered in :mod:`synapse_integrations.core.models` (looked up when
    called, so models registered later are accepted), and ``evermind-g<x>``
    ``model:evermind`` with ``gamma = x`` (Evermind's sweep; x in (0, 1]).
    """
    base = base or SynapseConfig()
    if name == "synapse":
        return base
    if name == "synapse-paper":
        return SynapseConfig.paper()
    if name in OPTIONS:
        return base.replace(**OPTIONS[name])
    swept = _evermind_gamma(name, base)
    if swept is not None:
        return swept
    if name.startswith(MODEL_PREFIX):
        from ..core.models import model_names

        model = name[len(MODEL_PREFIX):]
        if model not in model_names():
            raise InvalidInputError(
                f"unknown method {name!r}: no retrieval model {model!r} is registered; "
                f"registered: {', '.join(model_names())}")
        return base.replace(model=model)
    if name.startswith("synapse-") and name[len("synapse-"):] in _ABLATIONS:
        return SynapseConfig.ablation(name[len("synapse-"):], base=base)
    raise InvalidInputError(
        f"unknown method {name!r}; choose from {', '.join(method_names())}")


def check_methods(methods: Sequence[str], base: SynapseConfig | None) -> list[str]:
    methods = list(dict.fromkeys(methods))
    if not methods:
        raise InvalidInputError("no method to run")
    for m in methods:
        if not is_baseline(m):
            method_config(m, base)  # validates the name
    return methods


def check_ks(ks: Sequence[int]) -> list[int]:
    out = sorted({int(k) for k in ks})
    if not out or out[0] < 1:
        raise InvalidInputError(f"k values must be positive integers, got {ks!r}")
    return out


class CachingEmbedder:
    """Wraps an embedder; each distinct text is embedded once per run.

    ``prefetch`` embeds many texts in one batch; :meth:`timed_query` embeds a query alone
    (as a user's query would be) and returns how long that took, in milliseconds. With a
    :class:`~synapse_integrations.bench.vector_cache.VectorCache` (``store``), vectors
    are also read from and written to disk, so that a re-run embeds nothing it has seen.
    ``embedded`` counts the texts this object embedded itself (not found in any cache),
    ``embed_s`` the seconds that took.
    """

    def __init__(self, inner: Any, store: Any | None = None) -> None:
        from ..embeddings import as_embedder

        self.inner = as_embedder(inner)
        self.dim = self.inner.dim
        self.store = store
        self.embedded = 0
        self.embed_s = 0.0
        self._cache: dict[str, np.ndarray] = {}

    def prefetch(self, texts: Iterable[str]) -> None:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing and self.store is not None:
            found = self.store.get(missing)
            for t, v in zip(missing, found):
                if v is not None:
                    self._cache[t] = v
            missing = [t for t, v in zip(missing, found) if v is None]
        if missing:
            t0 = time.perf_counter()
            vectors = self.inner.embed_documents(missing)
            self.embed_s += time.perf_counter() - t0
            self.embedded += len(missing)
            for t, v in zip(missing, vectors):
                self._cache[t] = v
            if self.store is not None:
                self.store.put(missing, vectors)

    def flush(self) -> None:
        """Write what the disk cache holds in memory (no-op without one)."""
        if self.store is not None:
            self.store.flush()

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

    def warm(self) -> float:
        """Load the model (embed one throwaway query); returns the seconds it took. Run
        before any query is timed, so that the first question of a run is not charged
        with the model's one-time load (2-3 s for MiniLM on 2 cores)."""
        t0 = time.perf_counter()
        self.inner.embed_query("warm-up")
        return time.perf_counter() - t0

    def timed_query(self, text: str) -> tuple[np.ndarray, float]:
        t0 = time.perf_counter()
        v = self.inner.embed_query(text)
        ms = (time.perf_counter() - t0) * 1000.0
        self._cache.setdefault(text, v)
        return v, ms


# --------------------------------------------------------------------------------------------
# the shared loop
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchQuestion:
    """One question asked of a memory: ``category`` is the key results are reported
    under; ``evidence`` the turn ids recall is measured against (may be empty for a
    should-refuse question); ``extra`` whatever the benchmark needs to score it;
    ``asked_at`` when it is asked (the retrieval's ``at``: relative dates and dates without
    a year are read against it; None: now)."""

    qid: str
    text: str
    category: Any
    evidence: tuple[str, ...]
    should_refuse: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    asked_at: datetime | None = None


@dataclass(frozen=True)
class BenchMemory:
    """One memory: its turns (``add_turns`` rows with ``text``, ``speaker``,
    ``timestamp``, ``id``), in ingestion order, and the questions asked of it."""

    name: str
    turns: tuple[Mapping[str, Any], ...]
    questions: tuple[BenchQuestion, ...]


@dataclass
class RunState:
    """What :func:`run_memories` collected: per-method records, the first-query times
    (per method that paid them) and where the time went."""

    records: dict[str, list[QuestionRecord]]
    first_query_ms: dict[str, list[float]]
    seconds: dict[str, float]


def ingest_memory(memory: BenchMemory, cfg: SynapseConfig, embedder: CachingEmbedder,
                  progress: Callable[..., Any] | None = None, *, lifecycle: Any = None) -> Any:
    """A fresh in-memory engine holding ``memory``'s turns, written as the benchmarks write
    them (chunks of :data:`INGEST_CHUNK` turns, then ``consolidate()``); the caller closes it.
    ``lifecycle``: the engine's (``Synapse(lifecycle=...)``; default the offline rules)."""
    from ..core.engine import Synapse

    mem = Synapse(None, namespace=f"bench-{memory.name}"[:200], config=cfg, embedder=embedder,
                  snapshot_every=10**9, lifecycle=lifecycle)
    try:
        step = max(1, cfg.consolidation_interval or 5)
        step *= max(1, INGEST_CHUNK // step)
        turns = [dict(t) for t in memory.turns]
        bar = progress(total=len(turns), desc=f"ingest {memory.name}") if progress else None
        for s in range(0, len(turns), step):
            mem.add_turns(turns[s:s + step])
            if bar is not None:
                bar.update(len(turns[s:s + step]))
        mem.consolidate()
        if bar is not None:
            bar.close()
    except BaseException:
        mem.close()
        raise
    return mem


def _request_k(k_max: int) -> int:
    # concepts share the ranking with episodes: ask for enough items that k_max episodes
    # survive the filter whenever the engine has that many candidates
    return 4 * k_max


def run_memories(
    memories: Iterable[BenchMemory],
    *,
    methods: Sequence[str],
    ks: Sequence[int],
    embedder: CachingEmbedder,
    base_config: SynapseConfig | None = None,
    progress: Callable[..., Any] | None = None,
    on_memory: Callable[[BenchMemory], None] | None = None,
) -> RunState:
    """Every method on every question of every memory (the loop both benchmarks share).

    ``progress`` makes one bar per ingestion (see :func:`run_locomo`); ``on_memory`` is
    called after each memory is done (the LongMemEval runner's per-question bar).
    """
    ks = check_ks(ks)
    methods = check_methods(methods, base_config)
    depth = max(RRF_DEPTH, ks[-1])
    base = base_config or SynapseConfig()
    engine = [m for m in methods if not is_baseline(m)]
    baselines = [m for m in methods if is_baseline(m)]
    configs = {m: method_config(m, base_config) for m in engine}
    base_sig = base.graph_signature()
    state = RunState({m: [] for m in methods}, {}, {"embed": 0.0, "ingest": 0.0,
                                                    "retrieve": 0.0, "model_load": 0.0})

    warmed = False
    for memory in memories:
        if memory.questions and not warmed:
            # the model's one-time load, kept out of every timed query
            state.seconds["model_load"], warmed = embedder.warm(), True
        t0 = time.perf_counter()
        embedder.prefetch(t["text"] for t in memory.turns)
        qvec: dict[str, tuple[np.ndarray, float]] = {}
        for q in memory.questions:
            if q.text not in qvec:
                qvec[q.text] = embedder.timed_query(q.text)
        state.seconds["embed"] += time.perf_counter() - t0

        groups: dict[tuple[Any, ...], list[str]] = {}
        for m in engine:
            groups.setdefault(configs[m].graph_signature(), []).append(m)
        memory_baselines = [m for m in baselines if needs_memory(m)]
        if memory_baselines and base_sig not in groups:
            groups[base_sig] = []
        free = [m for m in baselines if not needs_memory(m)]
        if free and not memory_baselines:  # BM25 and fusion need no ingested memory
            _run_baselines(memory, None, qvec, free, depth, embedder, state, base)
            free = []
        for sig, group in groups.items():
            cfg = configs[group[0]] if group else base
            t0 = time.perf_counter()
            mem = ingest_memory(memory, cfg, embedder, progress)
            state.seconds["ingest"] += time.perf_counter() - t0
            try:
                t0 = time.perf_counter()
                if sig == base_sig and (memory_baselines or free):
                    _run_baselines(memory, mem, qvec, [*memory_baselines, *free], depth,
                                   embedder, state, base)
                    free = []
                if group and memory.questions:
                    # the first retrieval after ingestion pays for derived state: timed
                    # apart, then asked again with everything else
                    q0 = memory.questions[0]
                    v, embed_ms = qvec[q0.text]
                    t1 = time.perf_counter()
                    mem.retrieve_by_vector(q0.text, v, k=_request_k(ks[-1]),
                                           config=configs[group[0]], at=q0.asked_at)
                    ms = (time.perf_counter() - t1) * 1000.0 + embed_ms
                    state.first_query_ms.setdefault(group[0], []).append(ms)
                for m in group:
                    mcfg = configs[m]
                    for q in memory.questions:
                        v, embed_ms = qvec[q.text]
                        t1 = time.perf_counter()
                        res = mem.retrieve_by_vector(q.text, v, k=_request_k(ks[-1]),
                                                     config=mcfg, at=q.asked_at)
                        ms = (time.perf_counter() - t1) * 1000.0 + embed_ms
                        ranked = [it.id for it in res.items if it.kind == "episode"]
                        state.records[m].append(QuestionRecord(
                            memory.name, q.text, q.category, q.evidence, ranked, ms,
                            float(res.confidence), dict(q.extra), bool(res.rejected), q.qid,
                            res.verdict.to_dict() if res.verdict is not None else None))
                state.seconds["retrieve"] += time.perf_counter() - t0
            finally:
                mem.close()
        embedder.flush()  # the disk cache, once per memory
        if on_memory is not None:
            on_memory(memory)
    return state


def _run_baselines(memory: BenchMemory, mem: Any, qvec: dict[str, tuple[np.ndarray, float]],
                   methods: list[str], depth: int, embedder: CachingEmbedder,
                   state: RunState, base: SynapseConfig) -> None:
    ids = [t["id"] for t in memory.turns]
    texts = [t["text"] for t in memory.turns]
    ranker = BaselineRanker(ids, texts, embedder.embed_documents(texts), mem, base)
    if memory.questions:
        q0 = memory.questions[0]
        ranker.warm(q0.text, qvec[q0.text][0], methods)
    for q in memory.questions:
        v, embed_ms = qvec[q.text]
        for m, (ranked, seconds) in ranker.rank(methods, q.text, v, depth).items():
            # BM25 alone never embeds the query; the others need the embedding
            ms = seconds * 1000.0 + (0.0 if m == "bm25" else embed_ms)
            state.records[m].append(QuestionRecord(
                memory.name, q.text, q.category, q.evidence, ranked, ms, None, dict(q.extra),
                None, q.qid))

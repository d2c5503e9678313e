"""The runs of ``synapse bench locomo`` and ``synapse bench longmemeval``:
:func:`run_locomo` and :func:`run_longmemeval`.

Each reads its dataset into memories and questions, runs the shared loop on them
(:func:`.retrieval.run_memories`: every method on every question) and assembles the
results JSON: recall@k per category (LongMemEval: per question type, turn and session
level, and how often the newest of a knowledge update ranks above the older evidence),
warm latency, the gate's figures (:func:`gate_section`), the best baseline, the head to
head, the first query's cost and where the time went. Plain functions returning
JSON-ready data; the CLI adds the table, the progress bar and the plot.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import SynapseConfig
from ..errors import InvalidInputError
from .baselines import is_baseline
from .compare import best_baseline_section, head_to_head_section
from .context_cost import BUDGETS, TokenCounter, context_section
from .locomo import load_locomo
from .longmemeval import ABSTENTION, QUESTION_TYPES, load_longmemeval
from .metrics import (
    DEFAULT_GATE_TAUS,
    aggregate_recall,
    mean_by_key,
    newest_above_older,
    percentiles,
    recall_at_k,
    refusal_rates,
    refusal_sweep,
    session_recall_at_k,
)
from .records import QuestionRecord
from .retrieval import (
    DEFAULT_KS,
    DEFAULT_METHODS,
    BenchMemory,
    BenchQuestion,
    CachingEmbedder,
    RunState,
    check_ks,
    check_methods,
    method_config,
    run_memories,
)

__all__ = ["GATE_MARGINS", "GATE_PRESENCE", "LME_KEYS", "gate_section", "run_locomo",
           "run_longmemeval"]


# --------------------------------------------------------------------------------------------
# JSON assembly (shared)
# --------------------------------------------------------------------------------------------
def _latency(values: Sequence[float]) -> dict[str, float]:
    return percentiles(values) if values else {"p50": 0.0, "p95": 0.0}


def _gate_method(methods: Sequence[str]) -> str | None:
    engine = [m for m in methods if not is_baseline(m)]
    return "synapse" if "synapse" in engine else next(iter(engine), None)


#: attribution margins and presence minimums the gate section sweeps
GATE_MARGINS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
GATE_PRESENCE = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4)


def gate_section(records: Sequence[QuestionRecord], cfg: SynapseConfig, method: str,
                 should_refuse: Callable[[QuestionRecord], bool], describe: str,
                 taus: Sequence[float]) -> dict[str, Any]:
    """The gate's figures for one method: rates at its own tau, and the sweep."""
    conf = [(should_refuse(r), float(r.confidence)) for r in records
            if r.confidence is not None]
    rates = refusal_rates((s, c < cfg.gate_tau) for s, c in conf)
    out = {"method": method, "tau": float(cfg.gate_tau), "signal": cfg.gate_signal,
           "should_refuse": describe, **rates, "sweep": refusal_sweep(conf, taus)}
    judged = [r for r in records if r.gate is not None]
    if judged:
        # the whole gate as the engine decided (topic + evidence checks), which check
        # rejected, and each evidence check's curve on top of the topic check
        out["decision"] = refusal_rates((should_refuse(r), bool(r.rejected)) for r in judged)
        out["checks"] = dict(Counter(r.gate["check"] for r in judged if r.gate["rejected"]))
        sig = [(should_refuse(r), r.gate["check"] == "topic", r.gate["signals"]) for r in judged]
        out["attribution_sweep"] = [
            {"margin": m, **refusal_rates((s, topic or g.get("attribution_gap", -1.0) > m)
                                          for s, topic, g in sig)}
            for m in GATE_MARGINS]
        margin = cfg.gate_attribution_margin
        out["presence_sweep"] = [
            {"presence_min": p, **refusal_rates(
                (s, topic or g.get("attribution_gap", -1.0) > margin or g.get("presence", 1.0) < p)
                for s, topic, g in sig)}
            for p in GATE_PRESENCE]
    return out


def _first_query(state: RunState) -> dict[str, dict[str, float]]:
    return {m: {**percentiles(v), "n": len(v)} for m, v in state.first_query_ms.items() if v}


# --------------------------------------------------------------------------------------------
# LoCoMo
# --------------------------------------------------------------------------------------------
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
    turn_text: str = "prefixed",
) -> dict[str, Any]:
    """Run the LoCoMo benchmark; returns the results.json object (see the issue's contract).

    ``turn_text``: ``"prefixed"`` stores each turn as ``"<speaker>: <text>"`` (the paper's
    protocol); ``"bare"`` stores the text alone with the speaker as a field, as the
    framework adapters do (:attr:`~.locomo.LocomoTurn.bare_text`).

    ``progress``, when given, is called like ``tqdm(total=..., desc=...)`` and must return
    an object with ``update(n)`` and ``close()``. With ``keep_records=True`` the result
    also holds ``"records"``: ``{method: [QuestionRecord, ...]}`` (not JSON; the CLI
    removes it before writing).
    """
    t_start = time.perf_counter()
    ks = check_ks(ks)
    methods = check_methods(methods, base_config)
    if turn_text not in ("prefixed", "bare"):
        raise InvalidInputError(f"turn_text must be 'prefixed' or 'bare', got {turn_text!r}")
    ds = load_locomo(data, conversations=conversations)
    emb = embedder if isinstance(embedder, CachingEmbedder) else CachingEmbedder(embedder)
    memories = [
        BenchMemory(conv.sample_id,
                    tuple({"text": t.text if turn_text == "prefixed" else t.bare_text,
                           "speaker": t.speaker, "timestamp": t.timestamp,
                           "id": t.dia_id} for t in conv.turns),
                    tuple(BenchQuestion(f"{conv.sample_id}/{i}", q.question, q.category,
                                        q.evidence, q.category == 5)
                          for i, q in enumerate(conv.questions)))
        for conv in ds.conversations]
    state = run_memories(memories, methods=methods, ks=ks, embedder=emb,
                         base_config=base_config, progress=progress)

    out: dict[str, Any] = {
        "dataset": str(data),
        "conversations": list(ds.sample_ids),
        "questions": {str(c): sum(1 for q in ds.questions if q.category == c)
                      for c in range(1, 6)},
        "skipped_evidence": int(ds.skipped_evidence),
        "turn_text": turn_text,
        "methods": {},
    }
    lengths = _token_lengths(memories)
    for m in methods:
        recs = state.records[m]
        entry: dict[str, Any] = {}
        for k in ks:
            per = aggregate_recall((r.category, recall_at_k(r.ranked, r.evidence, k))
                                   for r in recs if r.evidence)
            entry[f"recall@{k}"] = {key: float(per.get(key, 0.0))
                                    for key in ("1", "2", "3", "4", "5", "1-4")}
        entry.update(context_section(recs, lambda r: lengths[r.conversation],
                                     ("1", "2", "3", "4", "5"), {"1-4": ("1", "2", "3", "4")},
                                     ks))
        entry["latency_ms"] = _latency([r.latency_ms for r in recs])
        out["methods"][m] = entry
    gm = _gate_method(methods)
    if gm is not None:
        out["gate"] = gate_section(state.records[gm], method_config(gm, base_config), gm,
                                   lambda r: r.category == 5, "category 5 (adversarial)",
                                   taus)
    bb = best_baseline_section(out["methods"], [*(f"recall@{k}" for k in ks),
                                                *(f"tokens_recall@{b}" for b in BUDGETS)], gm)
    if bb is not None:
        out["best_baseline"] = bb
    h2h = head_to_head_section(state.records, gm, ks, lambda r: r.category != 5)
    if h2h is not None:
        out["head_to_head"] = h2h
    out["first_query_ms"] = _first_query(state)
    out["timing_s"] = _timing(state, emb, t_start)
    if keep_records:
        out["records"] = state.records
    return out


def _token_lengths(memories: Sequence[BenchMemory]) -> dict[str, dict[str, int]]:
    """Each memory's turns' token counts (:mod:`.context_cost`), by memory name and turn id."""
    counter = TokenCounter()
    return {mem.name: counter.lengths({t["id"]: t["text"] for t in mem.turns})
            for mem in memories}


def _timing(state: RunState, emb: CachingEmbedder, t_start: float) -> dict[str, Any]:
    return {"total": time.perf_counter() - t_start, **state.seconds,
            "embedded_texts": emb.embedded, "embedding_model_s": emb.embed_s}


# --------------------------------------------------------------------------------------------
# LongMemEval
# --------------------------------------------------------------------------------------------
#: Keys of LongMemEval's per-type results: the six types, abstention, pooled.
LME_KEYS: tuple[str, ...] = (*QUESTION_TYPES, ABSTENTION, "pooled")


def _newest(q: Any) -> str | None:
    """The newest of a question's evidence turns (timestamp, then haystack order), when it
    has two or more."""
    if len(set(q.evidence)) < 2:
        return None
    when = {t.id: (t.timestamp, k) for k, t in enumerate(q.turns)}
    return max((e for e in set(q.evidence) if e in when), key=when.__getitem__, default=None)


def run_longmemeval(
    data: str | Path,
    *,
    methods: Sequence[str] = DEFAULT_METHODS,
    ks: Sequence[int] = DEFAULT_KS,
    types: Sequence[str] | None = None,
    limit: int | None = None,
    embedder: Any | None = None,
    base_config: SynapseConfig | None = None,
    progress: Callable[..., Any] | None = None,
    taus: Sequence[float] = DEFAULT_GATE_TAUS,
    keep_records: bool = False,
) -> dict[str, Any]:
    """Run the LongMemEval benchmark: one fresh memory per question (its own haystack).

    Per method: ``"recall@k"`` (turn level: the share of the evidence turns among the
    first ``k`` episodes) and ``"session_recall@k"`` (the share of answer sessions with a
    turn among the first ``k``), each per question type, for ``"abstention"`` and
    ``"pooled"`` over every non-abstention question (``None`` for a key with no question);
    ``newest_above_older`` (``n``, ``rate``: over the knowledge-update questions with two
    or more evidence turns, the share whose newest evidence turn ranks above the others);
    ``latency_ms`` (warm). Top level: ``gate`` (abstention questions are the should-refuse
    set), ``best_baseline``, ``first_query_ms``, ``timing_s``. ``progress`` (called like
    ``tqdm(total=..., desc=...)``) shows one bar over the questions.
    """
    t_start = time.perf_counter()
    ks = check_ks(ks)
    methods = check_methods(methods, base_config)
    ds = load_longmemeval(data, types=types, limit=limit)
    emb = embedder if isinstance(embedder, CachingEmbedder) else CachingEmbedder(embedder)
    memories = [
        BenchMemory(q.question_id, q.rows,
                    (BenchQuestion(q.question_id, q.question, q.category, q.evidence,
                                   q.abstention,
                                   {"sessions": q.answer_session_ids,
                                    "session_of": q.session_of, "newest": _newest(q)},
                                   q.question_date),))
        for q in ds.questions]
    bar = progress(total=len(memories), desc="questions", unit="question") if progress else None
    try:
        state = run_memories(memories, methods=methods, ks=ks, embedder=emb,
                             base_config=base_config,
                             on_memory=(lambda _m: bar.update(1)) if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()

    counts = ds.types
    out: dict[str, Any] = {
        "dataset": str(data),
        "questions": {key: counts.get(key, 0) for key in (*QUESTION_TYPES, ABSTENTION)},
        "skipped": dict(ds.skipped),
        "evidence_from_sessions": sum(1 for q in ds.questions
                                      if q.evidence_source == "answer_sessions"),
        "methods": {},
    }
    # types outside LongMemEval's six (a variant file) are reported too, never dropped
    keys = [*QUESTION_TYPES, *sorted(set(counts) - set(QUESTION_TYPES) - {ABSTENTION}),
            ABSTENTION, "pooled"]
    pools = {"pooled": [k for k in keys if k not in (ABSTENTION, "pooled")]}
    lengths = _token_lengths(memories)
    for m in methods:
        recs = state.records[m]
        entry: dict[str, Any] = {}
        for k in ks:
            turn = mean_by_key(((r.category, recall_at_k(r.ranked, r.evidence, k))
                                for r in recs if r.evidence), pools)
            sess = mean_by_key(((r.category, session_recall_at_k(
                r.ranked, r.extra["session_of"], r.extra["sessions"], k))
                for r in recs if r.extra["sessions"]), pools)
            entry[f"recall@{k}"] = {key: turn.get(key) for key in keys}
            entry[f"session_recall@{k}"] = {key: sess.get(key) for key in keys}
        above = [newest_above_older(r.ranked, r.evidence, r.extra["newest"]) for r in recs
                 if r.category == "knowledge-update" and r.extra.get("newest")]
        entry["newest_above_older"] = {"n": len(above),
                                       "rate": sum(above) / len(above) if above else None}
        entry.update(context_section(recs, lambda r: lengths[r.conversation],
                                     [k for k in keys if k != "pooled"], pools, ks))
        entry["latency_ms"] = _latency([r.latency_ms for r in recs])
        out["methods"][m] = entry
    gm = _gate_method(methods)
    if gm is not None:
        out["gate"] = gate_section(state.records[gm], method_config(gm, base_config), gm,
                                   lambda r: r.category == ABSTENTION,
                                   "abstention (question_id ends in _abs)", taus)
    metrics = [*(f"{p}@{k}" for p in ("recall", "session_recall") for k in ks),
               *(f"tokens_recall@{b}" for b in BUDGETS)]
    bb = best_baseline_section(out["methods"], metrics, gm)
    if bb is not None:
        out["best_baseline"] = bb
    h2h = head_to_head_section(state.records, gm, ks, lambda r: r.category != ABSTENTION)
    if h2h is not None:
        out["head_to_head"] = h2h
    out["first_query_ms"] = _first_query(state)
    out["timing_s"] = _timing(state, emb, t_start)
    if keep_records:
        out["records"] = state.records
    return out

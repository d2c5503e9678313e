"""``synapse bench agent``: memory in the loop an agent runs (issue 47).

Every other benchmark ingests a whole transcript and then asks. An agent writes and reads
turn by turn, and its user's own questions are recorded as memories. This one replays each
memory of a LoCoMo or LongMemEval file (:func:`load_agent_data`; the format is told from
the file) as an agent lives it:

* the transcript's turns arrive in order (``Synapse.add_turns``, no extra consolidation:
  what the middleware calls);
* each question is asked as soon as its last evidence turn is in memory (:func:`ask_points`;
  a question without evidence after the last turn), later turns still to come; then it is
  recorded as the middleware records a finished chat turn
  (:func:`~synapse_integrations._adapter_utils.finished_turn`, the path of
  ``SynapseMemoryMiddleware``): the question as a ``user`` turn and the acknowledgement
  :data:`ACK` as an ``assistant`` turn, each with ``metadata["role"]``. They are stamped
  on the replay's clock (a millisecond after the turn before them), not the wall clock,
  so that the transcript's later turns stay later;
* after the last turn every question is asked again (``end``).

Per method and category (:func:`run_agent`): recall@k at ask time and at the end (the
evidence ids are the other benches'; stored turns are never evidence, but they take
places in the ranking), ``question_above_evidence@k``, ``stored_per_k@k`` and
``hub_share`` (:mod:`.agent_metrics`), and by default ``transcript`` recall@k: the same
questions asked of the whole transcript alone (``bench locomo``/``bench longmemeval``'s
loop, :func:`~.retrieval.run_memories`). Latency: every ask follows a write, so the first
query of each ask pays whatever derived state the write invalidated; it is timed apart
(``first_after_write``, under the method that ran first on that memory: the first engine
method, else the first baseline) and the query is then asked again (``warm``) by every
method. The query's embedding is timed once per question and added to every method's
time (``bm25`` excepted), as the other benches do. Ingest: turns written per second
(turn vectors come from the run's cache, ``timing_s.embed``; the concepts that
consolidation extracts are embedded while writing, as in the batch benches).

The hub share is the largest within one memory for LoCoMo (a conversation's questions;
``D1:3`` names a turn of each conversation), and over every question for LongMemEval, by
turn id (one memory per question, but the haystacks share sessions, so a turn can be a
hub across questions). The printed table and the plots: :mod:`.agent_report`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from .._adapter_utils import finished_turn
from ..config import SynapseConfig
from ..errors import InvalidInputError
from .agent_metrics import (
    HUB_DEPTH,
    hub_share,
    mean_by_group,
    question_above_evidence,
    stored_in_top,
)
from .baselines import BaselineRanker, is_baseline
from .context_cost import TokenCounter, context_section
from .locomo import load_locomo
from .longmemeval import ABSTENTION, QUESTION_TYPES, load_longmemeval, read_json
from .metrics import latency_summary, mean_by_key, recall_at_k
from .retrieval import (
    DEFAULT_KS,
    INGEST_CHUNK,
    RRF_DEPTH,
    BenchMemory,
    BenchQuestion,
    CachingEmbedder,
    method_config,
    run_memories,
)

__all__ = ["ACK", "AGENT_METHODS", "DEFAULT_KS", "AgentDataset", "AgentRecord", "ask_points",
           "load_agent_data", "run_agent"]

logger = logging.getLogger(__name__)

#: What the assistant answers to every question it is asked: one short line, as a model
#: would say before it looks something up.
ACK = "Let me check my notes."
#: The middleware's default speakers.
USER_SPEAKER, AI_SPEAKER = "user", "assistant"
#: Default methods: the engine and the strongest baseline.
AGENT_METHODS: tuple[str, ...] = ("synapse", "ppr")
PHASES = ("ask", "end")


@dataclass(frozen=True)
class AgentDataset:
    """The memories to replay. ``keys``: the categories results are reported under, in
    order; ``pools``: pooled keys (name -> keys); ``shared_ids``: turn ids name the same
    turn across memories (LongMemEval's shared sessions), so hubs are counted by id."""

    format: str
    memories: tuple[BenchMemory, ...]
    keys: tuple[str, ...]
    pools: Mapping[str, tuple[str, ...]]
    shared_ids: bool
    info: Mapping[str, Any] = field(default_factory=dict)


def _format_of(path: Path) -> str:
    data = read_json(path)
    first = data[0] if isinstance(data, list) and data else None
    if isinstance(first, dict) and "sample_id" in first and "conversation" in first:
        return "locomo"
    if isinstance(first, dict) and "question_id" in first and "haystack_sessions" in first:
        return "longmemeval"
    raise InvalidInputError(
        f"{path}: neither LoCoMo (a list of objects with 'sample_id' and 'conversation') nor "
        "LongMemEval (a list of objects with 'question_id' and 'haystack_sessions')")


def load_agent_data(path: str | Path, *, limit: int | None = None,
                    turn_text: str = "prefixed") -> AgentDataset:
    """Read a LoCoMo or LongMemEval file with the benches' loaders. ``limit``: the first
    ``limit`` conversations (LoCoMo) or questions (LongMemEval). ``turn_text`` as in
    ``bench locomo`` (LoCoMo only): ``"prefixed"`` ``"<speaker>: <text>"``, ``"bare"``
    the text alone, the speaker as a field."""
    path = Path(path)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInputError(f"limit must be a positive integer, got {limit!r}")
    if turn_text not in ("prefixed", "bare"):
        raise InvalidInputError(f"turn_text must be 'prefixed' or 'bare', got {turn_text!r}")
    fmt = _format_of(path)
    if fmt == "locomo":
        ds = load_locomo(path)
        convs = ds.conversations[:limit] if limit else ds.conversations
        memories = tuple(
            BenchMemory(c.sample_id,
                        tuple({"text": t.text if turn_text == "prefixed" else t.bare_text,
                               "speaker": t.speaker, "timestamp": t.timestamp,
                               "id": t.dia_id} for t in c.turns),
                        tuple(BenchQuestion(f"{c.sample_id}/{i}", q.question, str(q.category),
                                            q.evidence, q.category == 5)
                              for i, q in enumerate(c.questions)))
            for c in convs)
        return AgentDataset("locomo", memories, ("1", "2", "3", "4", "5"),
                            {"1-4": ("1", "2", "3", "4")}, False,
                            {"skipped_evidence": ds.skipped_evidence, "turn_text": turn_text})
    lme = load_longmemeval(path, limit=limit)
    memories = tuple(
        BenchMemory(q.question_id, q.rows,
                    (BenchQuestion(q.question_id, q.question, q.category, q.evidence,
                                   q.abstention),))
        for q in lme.questions)
    present = {q.category for q in lme.questions}
    keys = (*QUESTION_TYPES, *sorted(present - set(QUESTION_TYPES) - {ABSTENTION}), ABSTENTION)
    return AgentDataset("longmemeval", memories, keys,
                        {"pooled": tuple(k for k in keys if k != ABSTENTION)}, True,
                        {"skipped": dict(lme.skipped)})


def ask_points(memory: BenchMemory) -> list[int]:
    """For each question, how many of the transcript's turns are in memory when it is asked:
    one past its last evidence turn (in the order turns arrive); all of them for a question
    without evidence.

    >>> m = BenchMemory("m", ({"id": "a"}, {"id": "b"}, {"id": "c"}),
    ...                 (BenchQuestion("q1", "?", "1", ("b", "a")), BenchQuestion("q2", "?", "5", ())))
    >>> ask_points(m)
    [2, 3]
    """
    where = {t["id"]: i for i, t in enumerate(memory.turns)}
    return [max((where[e] + 1 for e in q.evidence if e in where), default=len(memory.turns))
            for q in memory.questions]


@dataclass(frozen=True)
class _Message:
    """The fields of a LangChain message that ``finished_turn`` reads."""

    type: str
    text: str
    id: str
    tool_calls: tuple[Any, ...] = ()


def _exchange(mem: Any, q: BenchQuestion, when: Any) -> list[dict[str, Any]]:
    """The turns the middleware records once the agent has answered ``q``: the question and
    :data:`ACK`, stamped a millisecond apart after ``when`` (the newest time in memory)."""
    turns = finished_turn([_Message("human", q.text, f"ask-{q.qid}"),
                           _Message("ai", ACK, f"ack-{q.qid}")], mem,
                          user_speaker=USER_SPEAKER, ai_speaker=AI_SPEAKER)
    for j, t in enumerate(turns, 1):
        t["timestamp"] = when + timedelta(milliseconds=j) if when is not None else None
    return turns


@dataclass
class AgentRecord:
    """One method's ranking for one question at one phase (``"ask"`` or ``"end"``);
    ``first_ms``: the first query after a write, when this method paid it."""

    memory: str
    qid: str
    category: str
    evidence: tuple[str, ...]
    phase: str
    ranked: list[str]
    latency_ms: float
    first_ms: float | None
    turns_in_memory: int


@dataclass
class _Run:
    records: dict[str, list[AgentRecord]]
    stored: dict[str, set[str]]
    texts: dict[str, dict[str, str]]
    seconds: dict[str, float]
    written: dict[str, int]


class _Ranker:
    """Every method's ranking of one memory now (the baselines' index rebuilt per ask)."""

    def __init__(self, mem: Any, methods: Sequence[str], configs: Mapping[str, SynapseConfig],
                 base: SynapseConfig, embedder: CachingEmbedder, ks: Sequence[int]) -> None:
        self.mem, self.methods, self.configs = mem, list(methods), configs
        self.base, self.embedder = base, embedder
        self.k_engine = 4 * ks[-1]  # concepts share the engine's ranking (as in retrieval.py)
        self.depth = max(RRF_DEPTH, ks[-1])
        self._baselines: BaselineRanker | None = None

    def written(self) -> None:
        self._baselines = None

    def rank(self, m: str, q: BenchQuestion, v: np.ndarray) -> tuple[list[str], float]:
        if not is_baseline(m):
            t0 = time.perf_counter()
            res = self.mem.retrieve_by_vector(q.text, v, k=self.k_engine, config=self.configs[m])
            s = time.perf_counter() - t0
            return [it.id for it in res.items if it.kind == "episode"], s
        if self._baselines is None:  # bench scaffolding, untimed: BM25 over today's episodes
            eps = self.mem.episodes(include_archived=False)
            texts = [e["text"] for e in eps]
            self._baselines = BaselineRanker([e["id"] for e in eps], texts,
                                             self.embedder.embed_documents(texts),
                                             self.mem, self.base)
        ranked, s = self._baselines.rank([m], q.text, v, self.depth)[m]
        return ranked, s


def _replay(memory: BenchMemory, cfg: SynapseConfig, methods: Sequence[str], ranker_args: dict,
            qvec: Mapping[str, tuple[np.ndarray, float]], run: _Run,
            progress: Callable[..., Any] | None) -> None:
    """One memory, one graph configuration: write, ask, record, as :mod:`.agent` says."""
    from ..core.engine import Synapse

    points = ask_points(memory)
    order = sorted(range(len(points)), key=lambda i: (points[i], i))
    turns = [dict(t) for t in memory.turns]
    stored = run.stored.setdefault(memory.name, set())
    texts = run.texts.setdefault(memory.name, {t["id"]: t["text"] for t in turns})
    bar = progress(total=len(turns), desc=f"replay {memory.name}") if progress else None
    mem = Synapse(None, namespace=f"agent-{memory.name}"[:200], config=cfg,
                  embedder=ranker_args["embedder"], snapshot_every=10**9)
    try:
        ranker = _Ranker(mem, methods, **ranker_args)
        pos = 0
        clock: list[Any] = [None, -1]  # the newest stored turn's time, and at which ``pos``

        def write(rows: list[dict[str, Any]]) -> None:
            t0 = time.perf_counter()
            for s in range(0, len(rows), INGEST_CHUNK):
                mem.add_turns(rows[s:s + INGEST_CHUNK])
            run.seconds["ingest"] += time.perf_counter() - t0
            ranker.written()

        def ask(q: BenchQuestion, phase: str, after_write: bool) -> None:
            v, embed_ms = qvec[q.text]
            first = None
            t0 = time.perf_counter()
            if after_write:
                first = methods[0], ranker.rank(methods[0], q, v)[1] * 1000.0
            for m in methods:
                ranked, s = ranker.rank(m, q, v)
                extra = 0.0 if m == "bm25" else embed_ms
                run.records[m].append(AgentRecord(
                    memory.name, q.qid, str(q.category), q.evidence, phase, ranked,
                    s * 1000.0 + extra,
                    first[1] + extra if first is not None and first[0] == m else None, pos))
            run.seconds["retrieve"] += time.perf_counter() - t0

        for i in order:
            if points[i] > pos:
                write(turns[pos:points[i]])
                if bar is not None:
                    bar.update(points[i] - pos)
                pos = points[i]
            q = memory.questions[i]
            ask(q, "ask", True)
            rows = _exchange(mem, q, clock[0] if pos == clock[1] else turns[pos - 1]["timestamp"])
            write(rows)
            if rows:
                clock[:] = [rows[-1]["timestamp"], pos]
            run.written["stored"] += len(rows)
            stored.update(r["id"] for r in rows)
            texts.update((r["id"], r["text"]) for r in rows)
        if pos < len(turns):
            write(turns[pos:])
            if bar is not None:
                bar.update(len(turns) - pos)
            pos = len(turns)
        run.written["transcript"] += len(turns)
        for j, q in enumerate(memory.questions):
            ask(q, "end", j == 0)
    finally:
        mem.close()
        if bar is not None:
            bar.close()


def run_agent(
    data: str | Path,
    *,
    methods: Sequence[str] = AGENT_METHODS,
    ks: Sequence[int] = DEFAULT_KS,
    limit: int | None = None,
    embedder: Any | None = None,
    base_config: SynapseConfig | None = None,
    progress: Callable[..., Any] | None = None,
    turn_text: str = "prefixed",
    transcript: bool = True,
    keep_records: bool = False,
) -> dict[str, Any]:
    """Replay every memory of ``data`` as an agent lives it (see the module docstring) and
    return the results JSON object. ``transcript``: also ask the same questions of each
    whole transcript alone (the batch benches' loop). ``progress`` is called like
    ``tqdm(total=..., desc=...)``. ``keep_records=True`` adds ``"records"``
    (``{method: [AgentRecord, ...]}``, not JSON) and ``"stored"`` (memory -> stored ids).
    """
    t_start = time.perf_counter()
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise InvalidInputError(f"k values must be positive integers, got {ks!r}")
    methods = list(dict.fromkeys(methods))
    if not methods:
        raise InvalidInputError("no method to run")
    configs = {m: method_config(m, base_config) for m in methods if not is_baseline(m)}
    base = base_config or SynapseConfig()
    ds = load_agent_data(data, limit=limit, turn_text=turn_text)
    emb = embedder if isinstance(embedder, CachingEmbedder) else CachingEmbedder(embedder)
    run = _Run({m: [] for m in methods}, {}, {}, {"embed": 0.0, "ingest": 0.0, "retrieve": 0.0,
                                                 "model_load": 0.0},
               {"transcript": 0, "stored": 0})
    # one memory per graph configuration, as the batch loop does; the baselines read the base's
    groups: dict[Any, list[str]] = {}
    for m, cfg in configs.items():
        groups.setdefault(cfg.graph_signature(), []).append(m)
    baselines = [m for m in methods if is_baseline(m)]
    base_sig = base.graph_signature()
    if baselines:
        groups.setdefault(base_sig, [])
    if any(m.questions for m in ds.memories):
        run.seconds["model_load"] = emb.warm()
    ranker_args = {"configs": configs, "base": base, "embedder": emb, "ks": ks}
    for memory in ds.memories:
        t0 = time.perf_counter()
        emb.prefetch([*(t["text"] for t in memory.turns), ACK])
        qvec = {q.text: emb.timed_query(q.text) for q in memory.questions}
        run.seconds["embed"] += time.perf_counter() - t0
        for sig, group in groups.items():
            cfg = configs[group[0]] if group else base
            ms = [*group, *(baselines if sig == base_sig else [])]
            _replay(memory, cfg, ms, ranker_args, qvec, run, progress)
        emb.flush()

    out: dict[str, Any] = {
        "dataset": str(data),
        "format": ds.format,
        "memories": [m.name for m in ds.memories],
        "questions": {key: sum(1 for m in ds.memories for q in m.questions
                               if str(q.category) == key) for key in ds.keys},
        "stored_per_question": [USER_SPEAKER + ": <the question>", f"{AI_SPEAKER}: {ACK}"],
        **ds.info,
        "methods": {},
    }
    transcript_recs = None
    if transcript:
        t0 = time.perf_counter()
        state = run_memories(ds.memories, methods=methods, ks=ks, embedder=emb,
                             base_config=base_config, progress=progress)
        transcript_recs = state.records
        run.seconds["transcript"] = time.perf_counter() - t0
    counter = TokenCounter()  # the memory text an agent is handed (.context_cost)
    lengths = {name: counter.lengths(texts) for name, texts in run.texts.items()}
    for m in methods:
        out["methods"][m] = _method_entry(run, m, ds, ks, transcript_recs, lengths)
    # every replay's writes (one replay per memory and graph configuration)
    n_turns = run.written["transcript"] + run.written["stored"]
    seconds = run.seconds["ingest"]
    out["ingest"] = {"replays": len(groups) * len(ds.memories), "turns": n_turns,
                     "stored_turns": run.written["stored"], "seconds": seconds,
                     "turns_per_s": n_turns / seconds if seconds else None}
    out["timing_s"] = {"total": time.perf_counter() - t_start, **run.seconds,
                       "embedded_texts": emb.embedded, "embedding_model_s": emb.embed_s}
    if keep_records:
        out["records"] = run.records
        out["stored"] = run.stored
    return out


def _keyed(values: dict[str, float], ds: AgentDataset) -> dict[str, float | None]:
    return {key: values.get(key) for key in (*ds.keys, *ds.pools)}


def _phase_entry(recs: list[AgentRecord], run: _Run, ds: AgentDataset, ks: Sequence[int],
                 lengths: Mapping[str, Mapping[str, int]]
                 ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    pools = {k: list(v) for k, v in ds.pools.items()}
    entry: dict[str, Any] = context_section(recs, lambda r: lengths[r.memory], ds.keys,
                                            ds.pools, ks)
    with_ev = [r for r in recs if r.evidence]
    for k in ks:
        entry[f"recall@{k}"] = _keyed(mean_by_key(
            ((r.category, recall_at_k(r.ranked, r.evidence, k)) for r in with_ev), pools), ds)
        above = [(r.category, question_above_evidence(r.ranked, r.evidence,
                                                      run.stored[r.memory], k)) for r in with_ev]
        entry[f"question_above_evidence@{k}"] = _keyed(mean_by_key(
            ((c, float(a)) for c, a in above if a is not None), pools), ds)
        entry[f"stored_per_k@{k}"] = _keyed(mean_by_group(
            ((r.category, stored_in_top(r.ranked, run.stored[r.memory], k)) for r in recs),
            pools), ds)

    def hub_id(r: AgentRecord, turn: str) -> str:
        return turn if ds.shared_ids else f"{r.memory}/{turn}"

    shares: dict[str, float] = {}
    top: dict[str, Any] | None = None
    for key in (*ds.keys, *ds.pools):
        members = set(ds.pools.get(key, (key,)))
        sel = [r for r in recs if r.category in members]
        if not sel:
            continue
        # within one memory (a LoCoMo conversation): a hub is a turn many of *its* questions
        # meet; pooled over conversations the share could not pass 1 / conversations
        groups = [sel] if ds.shared_ids else [[r for r in sel if r.memory == m]
                                              for m in dict.fromkeys(r.memory for r in sel)]
        share, turn = max((hub_share([[hub_id(r, d) for d in r.ranked[:HUB_DEPTH]] for r in g])
                           for g in groups), key=lambda st: st[0])
        shares[key] = share
        if key in ds.pools and top is None and turn is not None:
            owner = next(r for r in sel if turn in {hub_id(r, d) for d in r.ranked[:HUB_DEPTH]})
            tid = turn if ds.shared_ids else turn[len(owner.memory) + 1:]
            top = {"turn": turn, "text": run.texts[owner.memory].get(tid), "share": share,
                   "stored": tid in run.stored[owner.memory]}
    entry[f"hub_share@{HUB_DEPTH}"] = _keyed(shares, ds)
    return entry, top


def _method_entry(run: _Run, m: str, ds: AgentDataset, ks: Sequence[int],
                  transcript: Mapping[str, list[Any]] | None,
                  lengths: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    recs = run.records[m]
    entry: dict[str, Any] = {}
    hubs: dict[str, Any] = {}
    for phase in PHASES:
        entry[phase], hubs[phase] = _phase_entry([r for r in recs if r.phase == phase], run,
                                                 ds, ks, lengths)
    if transcript is not None:
        pools = {k: list(v) for k, v in ds.pools.items()}
        entry["transcript"] = {f"recall@{k}": _keyed(mean_by_key(
            ((str(r.category), recall_at_k(r.ranked, r.evidence, k))
             for r in transcript[m] if r.evidence), pools), ds) for k in ks}
        entry["transcript"].update(context_section(
            transcript[m], lambda r: lengths[r.conversation], ds.keys, ds.pools, ks))
    entry["hub_turn"] = hubs
    entry["latency_ms"] = {"first_after_write": latency_summary([r.first_ms for r in recs
                                                          if r.first_ms is not None]),
                           "warm": latency_summary([r.latency_ms for r in recs])}
    return entry

"""``synapse bench longmemeval``: the loader, the recall metrics, the JSON contract, the CLI."""

from __future__ import annotations

import gzip
import json
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from synapse_integrations.bench.baselines import BASELINES, FUSION_WEIGHT, PPR_DAMPING, \
    fuse_scores, fusion_weight, is_baseline, needs_memory, ppr_damping, ppr_rank
from synapse_integrations.bench.longmemeval import load_longmemeval, parse_lme_date
from synapse_integrations.bench.metrics import mean_by_key, recall_at_k, session_recall_at_k
from synapse_integrations.bench.perf import HashingEmbedder
from synapse_integrations.bench.retrieval import DEFAULT_METHODS, CachingEmbedder, \
    method_config, method_names
from synapse_integrations.bench.runners import run_longmemeval
from synapse_integrations.bench.vector_cache import VectorCache
from synapse_integrations.config import SynapseConfig

FIXTURE = Path(__file__).parents[1] / "fixtures" / "longmemeval_tiny.json"
TYPES = ["single-session-user", "single-session-assistant", "single-session-preference",
         "multi-session", "temporal-reasoning", "knowledge-update"]
KEYS = {*TYPES, "abstention", "pooled"}
FAST = ["dense", "bm25", "hybrid_rrf", "fusion", "ppr", "synapse-paper", "synapse", "model:synapse"]


def _records() -> list[dict]:
    return json.loads(FIXTURE.read_text())


def _write(tmp_path: Path, records, name: str = "lme.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(records))
    return path


# ------------------------------------------------------------------------------ loader
def test_loader_reads_the_fixture_and_counts_what_it_skipped() -> None:
    ds = load_longmemeval(FIXTURE)
    by_id = {q.question_id: q for q in ds.questions}
    assert list(by_id) == ["q_user", "q_multi", "q_update", "q_temporal_abs", "q_messy"]
    assert ds.skipped == {"turns": 2, "answer_session_ids": 1, "questions_without_evidence": 0,
                          "repeated_sessions": 1}
    q = by_id["q_user"]
    assert [t.id for t in q.turns[:3]] == ["s_cook:0", "s_cook:1", "ans_user:0"]
    t = q.turns[2]
    assert t.text == "user: I just brought home a corgi puppy named Biscuit!"
    assert t.role == "user" and t.has_answer and t.session_id == "ans_user"
    # session date plus one second per turn index
    assert q.turns[3].timestamp == datetime(2023, 5, 21, 9, 0, 1, tzinfo=timezone.utc)
    assert q.evidence == ("ans_user:0",) and q.evidence_source == "has_answer"
    # no has_answer marks: every turn of the answer sessions is evidence
    u = by_id["q_update"]
    assert u.evidence == ("ans_u1:0", "ans_u1:1", "ans_u2:0", "ans_u2:1")
    assert u.evidence_source == "answer_sessions"
    a = by_id["q_temporal_abs"]
    assert a.abstention and a.category == "abstention" and a.question_type == "temporal-reasoning"
    # the repeated session gets distinct ids; bad turns and the unknown answer session are gone
    m = by_id["q_messy"]
    assert [t.id for t in m.turns] == ["s_cook:0", "s_cook:1", "s_trip:0", "s_trip:1",
                                       "s_cook~2:0", "s_cook~2:1"]
    assert {t.session_id for t in m.turns} == {"s_cook", "s_trip"}
    assert m.answer_session_ids == ("s_cook",)
    assert ds.types == {"single-session-user": 1, "multi-session": 1, "knowledge-update": 1,
                        "abstention": 1, "single-session-assistant": 1}


def test_loader_reads_gzip_and_plain_alike(tmp_path) -> None:
    gz = tmp_path / "lme.json.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write(FIXTURE.read_text())
    plain = load_longmemeval(FIXTURE)
    packed = load_longmemeval(gz)
    assert packed.questions == plain.questions and packed.skipped == plain.skipped


def test_loader_filters_by_type_and_limit() -> None:
    ds = load_longmemeval(FIXTURE, types=["multi-session", "abstention"])
    assert [q.question_id for q in ds.questions] == ["q_multi", "q_temporal_abs"]
    assert [q.question_id for q in load_longmemeval(FIXTURE, limit=2).questions] == \
        ["q_user", "q_multi"]
    with pytest.raises(ValueError, match="unknown question type.*'nope'"):
        load_longmemeval(FIXTURE, types=["nope"])
    with pytest.raises(ValueError, match="limit"):
        load_longmemeval(FIXTURE, limit=0)


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.__setitem__(0, "text"), "JSON list of LongMemEval question objects"),
    (lambda r: r[1].pop("question_id"), "record #1 has no 'question_id'"),
    (lambda r: r[1].__setitem__("question_id", "q_user"), "'q_user' appears twice"),
    (lambda r: r[0].pop("question"), "question 'q_user' has no usable 'question'"),
    (lambda r: r[2].pop("haystack_sessions"), "'q_update': 'haystack_sessions' is missing"),
    (lambda r: r[2]["haystack_dates"].pop(), r"'q_update': .*differ in length"),
    (lambda r: r[0]["haystack_dates"].__setitem__(1, "yesterday"),
     r"'q_user': haystack_dates\[1\] \('ans_user'\): unrecognised date 'yesterday'"),
    (lambda r: r[0]["haystack_sessions"].__setitem__(0, {"role": "user"}),
     r"haystack_sessions\[0\] \('s_cook'\) is not a list"),
    (lambda r: r[0].__setitem__("question_date", "2023-13-45"), "'q_user': question_date"),
])
def test_loader_names_what_is_malformed(tmp_path, mutate, message) -> None:
    records = _records()
    mutate(records)
    with pytest.raises(ValueError, match=message):
        load_longmemeval(_write(tmp_path, records))


def test_loader_skips_unanswerable_questions_but_keeps_abstention(tmp_path) -> None:
    records = _records()
    for r in records:
        if r["question_id"] in ("q_user", "q_temporal_abs"):
            r["answer_session_ids"] = ["gone"]
            for s in r["haystack_sessions"]:
                for t in s:
                    if isinstance(t, dict):
                        t.pop("has_answer", None)
    ds = load_longmemeval(_write(tmp_path, records))
    ids = [q.question_id for q in ds.questions]
    assert "q_user" not in ids and "q_temporal_abs" in ids
    assert ds.skipped["questions_without_evidence"] == 1
    assert ds.skipped["answer_session_ids"] == 3
    abs_q = ds.questions[ids.index("q_temporal_abs")]
    assert abs_q.evidence == () and abs_q.evidence_source == "none"


def test_not_json_is_a_clear_error(tmp_path) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b"{not json"))
    with pytest.raises(ValueError, match="not a readable JSON file"):
        load_longmemeval(bad)


def test_parse_lme_date() -> None:
    assert parse_lme_date("2023/05/20 (Sat) 07:47") == datetime(2023, 5, 20, 7, 47,
                                                                tzinfo=timezone.utc)
    assert parse_lme_date("2023/5/2 7:05") == datetime(2023, 5, 2, 7, 5, tzinfo=timezone.utc)
    assert parse_lme_date("2023-05-20T07:47:00") == datetime(2023, 5, 20, 7, 47,
                                                             tzinfo=timezone.utc)
    for bad in ("2023/02/30 (Thu) 10:00", "", None, "May 20"):
        with pytest.raises(ValueError):
            parse_lme_date(bad)


# ------------------------------------------------------------------------------ metrics
def test_turn_and_session_recall_hand_computed() -> None:
    q = {x.question_id: x for x in load_longmemeval(FIXTURE).questions}["q_update"]
    ranked = ["ans_u2:0", "s_cook:0", "s_cook:1", "ans_u1:1", "ans_u2:1", "ans_u1:0"]
    # evidence: the 4 turns of the two answer sessions (no has_answer marks)
    assert recall_at_k(ranked, q.evidence, 1) == 0.25
    assert recall_at_k(ranked, q.evidence, 4) == 0.5
    assert recall_at_k(ranked, q.evidence, 6) == 1.0
    # sessions: ans_u2 at rank 1, ans_u1 at rank 4
    assert session_recall_at_k(ranked, q.session_of, q.answer_session_ids, 3) == 0.5
    assert session_recall_at_k(ranked, q.session_of, q.answer_session_ids, 4) == 1.0
    # a repeated session's copies count for the original session id
    m = {x.question_id: x for x in load_longmemeval(FIXTURE).questions}["q_messy"]
    assert session_recall_at_k(["s_trip:0", "s_cook~2:1"], m.session_of, ["s_cook"], 2) == 1.0
    with pytest.raises(ValueError):
        session_recall_at_k(ranked, q.session_of, [], 3)


def test_mean_by_key_pools_by_question_count() -> None:
    out = mean_by_key([("multi-session", 1.0), ("multi-session", 0.0), ("temporal", 1.0),
                       ("abstention", 0.0)], {"pooled": ["multi-session", "temporal"]})
    assert out == {"multi-session": 0.5, "temporal": 1.0, "abstention": 0.0,
                   "pooled": pytest.approx(2 / 3)}


def test_fusion_kernel_hand_computed() -> None:
    lex = np.array([0.0, 3.0, 6.0, 0.0])
    cos = np.array([0.8, 0.2, 0.4, 0.6])
    # minmax: lex [0, .5, 1, 0]; cos [1, 0, 1/3, 2/3]
    np.testing.assert_allclose(fuse_scores(lex, cos, weight=0.5), [0.5, 0.25, 2 / 3, 1 / 3])
    np.testing.assert_allclose(fuse_scores(lex, cos, weight=1.0), [0.0, 0.5, 1.0, 0.0])
    # a constant signal contributes nothing (no BM25 hit at all)
    np.testing.assert_allclose(fuse_scores(np.zeros(4), cos, weight=0.5), 0.5 * np.array(
        [1, 0, 1 / 3, 2 / 3]))
    with pytest.raises(ValueError):
        fuse_scores(lex, cos[:3], weight=0.5)
    with pytest.raises(ValueError):
        fuse_scores(lex, cos, weight=1.5)


def test_method_names() -> None:
    assert BASELINES == ("dense", "bm25", "hybrid_rrf", "fusion", "ppr")
    assert set(BASELINES) <= set(DEFAULT_METHODS)
    assert fusion_weight("fusion") == FUSION_WEIGHT and fusion_weight("fusion-w0.25") == 0.25
    assert is_baseline("fusion-w1") and not is_baseline("synapse")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fusion_weight("fusion-w2")
    assert ppr_damping("ppr") == PPR_DAMPING and ppr_damping("ppr-d0.85") == 0.85
    assert is_baseline("ppr-d0.3") and not is_baseline("model:ppr")  # the engine's model
    assert needs_memory("ppr-d0.3") and needs_memory("dense") and not needs_memory("fusion")
    with pytest.raises(ValueError, match=r"ppr-d1: the damping must lie in \[0, 0.99\]"):
        ppr_damping("ppr-d1")
    assert {"fusion-w<x>", "ppr-d<x>"} <= set(method_names())
    assert method_config("model:synapse") == SynapseConfig(model="synapse")
    assert method_config("model:synapse", SynapseConfig(top_k=7)).top_k == 7
    with pytest.raises(ValueError, match="no retrieval model 'nope'"):
        method_config("model:nope")


def test_evermind_gamma_methods() -> None:
    swept = method_config("evermind-g0.7")
    assert swept == SynapseConfig(model="evermind", model_params={"evermind": {"gamma": 0.7}})
    assert method_config("evermind-g1").model_params == {"evermind": {"gamma": 1.0}}
    # the base's other Evermind parameters (and other models' parameters) are kept
    base = SynapseConfig(top_k=7, model_params={"evermind": {"gamma": 0.5, "mutual": False},
                                                "ppr": {"damping": 0.85}})
    cfg = method_config("evermind-g0.9", base)
    assert cfg.top_k == 7 and cfg.model == "evermind"
    assert cfg.model_params == {"evermind": {"gamma": 0.9, "mutual": False}, "ppr": {"damping": 0.85}}
    assert cfg.graph_signature() == base.graph_signature()  # one ingested memory for the sweep
    assert base.model_params["evermind"]["gamma"] == 0.5  # the base is not changed
    for bad in ("evermind-g1.5", "evermind-g0"):
        with pytest.raises(ValueError, match=rf"{bad}: .*gamma.*\(0, 1\]"):
            method_config(bad)
    with pytest.raises(ValueError, match="unknown method 'evermind-gx'"):
        method_config("evermind-gx")
    assert "evermind-g<x>" in method_names()


def test_model_methods_come_from_the_registry(monkeypatch) -> None:
    from synapse_integrations.core import models
    from synapse_integrations.core.models.synapse import SynapseModel

    monkeypatch.setitem(models._REGISTRY, "toy-model", SynapseModel)  # a model added later
    assert method_config("model:toy-model").model == "toy-model"
    from synapse_integrations.bench.retrieval import method_names

    assert "model:toy-model" in method_names()


def test_ppr_baseline_is_pagerank_from_the_engine_anchors() -> None:
    """``ppr`` ranks the episodes by networkx's personalised PageRank over the memory's
    graph, teleporting to the engine's anchors in proportion to their cosines."""
    import networkx as nx

    from synapse_integrations import Synapse
    from synapse_integrations.core.models.ppr import teleport_distribution

    emb = HashingEmbedder(dim=384)
    cfg = SynapseConfig(anchor_top_k=2)
    turns = ["My brother Omar adopted a tabby called Pickle.", "Pickle swallowed a hair tie.",
             "We went hiking near Lake Tahoe.", "The vet said Pickle will be fine.",
             "I bought new hiking boots for Tahoe.", "Omar loves his tabby."]
    with Synapse(None, namespace="ppr-baseline", config=cfg, embedder=emb) as mem:
        mem.add_turns([{"text": t, "speaker": "Ann"} for t in turns])
        mem.consolidate()
        query = "Why did Omar's cat go to the vet?"
        q = emb.embed_query(query)
        # the memory's own configuration by default; another one's triggers when given
        for damping, triggers in ((0.5, None), (0.85, None), (0.5, cfg.replace(anchor_top_k=1))):
            ranked = ppr_rank(mem, query, q, 10, damping=damping, config=triggers)
            with mem.inspect_retrieval() as steps:
                anchors = steps.query(query, q, triggers or cfg)
                view = steps.view
            G = nx.DiGraph()
            G.add_nodes_from(range(view.n))
            G.add_weighted_edges_from(zip(view.src.tolist(), view.dst.tolist(),
                                          view.weight.tolist()))
            p = teleport_distribution(view.n, anchors.anchors, anchors.sim)
            pr = nx.pagerank(G, alpha=damping, personalization=dict(enumerate(p)), tol=1e-12,
                             max_iter=10_000)
            eps = sorted((i for i in range(view.n) if view.is_episode[i] and pr[i] > 1e-12),
                         key=lambda i: (-pr[i], i))
            assert ranked == [view.ids[i] for i in eps]
            assert len(ranked) > len(anchors.anchors)  # the walk reaches beyond the anchors


# ------------------------------------------------------------------------------ the run
@pytest.fixture(scope="module")
def fast_results() -> dict:
    return run_longmemeval(FIXTURE, methods=FAST, ks=(1, 5), embedder=HashingEmbedder(dim=384))


def test_json_contract(fast_results) -> None:
    res = fast_results
    json.dumps(res)  # JSON-ready
    assert set(res) == {"dataset", "questions", "skipped", "evidence_from_sessions", "methods",
                        "gate", "best_baseline", "head_to_head", "first_query_ms", "timing_s"}
    assert res["questions"] == {"single-session-user": 1, "single-session-assistant": 1,
                                "single-session-preference": 0, "multi-session": 1,
                                "temporal-reasoning": 0, "knowledge-update": 1, "abstention": 1}
    assert res["evidence_from_sessions"] == 2
    assert list(res["methods"]) == FAST
    for name, m in res["methods"].items():
        assert set(m) == {"recall@1", "recall@5", "session_recall@1", "session_recall@5",
                          "newest_above_older", "context_tokens@1", "context_tokens@5",
                          "tokens_recall@1000", "tokens_recall@2000", "latency_ms"}, name
        # q_update: four evidence turns, the newest "ans_u2:1"
        assert m["newest_above_older"]["n"] == 1 and m["newest_above_older"]["rate"] in (0.0, 1.0)
        for key in ("recall@1", "recall@5", "session_recall@1", "session_recall@5"):
            assert set(m[key]) == KEYS
            assert m[key]["single-session-preference"] is None  # no such question here
            assert all(0.0 <= v <= 1.0 for v in m[key].values() if v is not None)
        assert m["recall@1"]["pooled"] <= m["recall@5"]["pooled"] + 1e-12
        assert 0.0 <= m["latency_ms"]["p50"] <= m["latency_ms"]["p95"]
    # memories of 4-7 turns: at k = 5 every answer session is found by dense retrieval
    assert res["methods"]["dense"]["session_recall@5"]["pooled"] == 1.0
    # model:synapse is SynapseConfig(model="synapse"): the default engine
    assert res["methods"]["model:synapse"]["recall@5"] == res["methods"]["synapse"]["recall@5"]
    gate = res["gate"]
    assert gate["method"] == "synapse" and gate["should_refuse"].startswith("abstention")
    assert {row["tau"] for row in gate["sweep"]} >= {0.0, 0.12, 0.3}
    assert gate["sweep"][0]["false_refusal"] == 0.0
    bb = res["best_baseline"]
    assert bb["method"] == "synapse"
    assert set(bb) == {"method", "recall@1", "recall@5", "session_recall@1", "session_recall@5",
                       "tokens_recall@1000", "tokens_recall@2000"}
    row = bb["recall@5"]["pooled"]
    best = max(res["methods"][b]["recall@5"]["pooled"] for b in BASELINES)
    assert row["baseline_value"] == best and row["baseline"] in BASELINES
    assert row["margin"] == pytest.approx(res["methods"]["synapse"]["recall@5"]["pooled"] - best)
    # question by question at the largest k, abstention aside (4 questions with evidence)
    h2h = res["head_to_head"]
    assert set(h2h) == {"method", "questions", "recall@1", "recall@5"}
    assert (h2h["method"], h2h["questions"]) == ("synapse", 4)
    for key in ("recall@1", "recall@5"):
        assert set(h2h[key]["baselines"]) == set(BASELINES) & set(FAST)
        for row in (*h2h[key]["baselines"].values(), h2h[key]["best"]):
            assert row["n"] == 4 and row["lost"] + row["won"] + row["tied"] == 4
            assert row["missed"] <= row["lost"] == len(row["lost_ids"])
        best = h2h[key]["best"]
        assert best["won"] <= min(r["won"] for r in h2h[key]["baselines"].values())
        assert best["lost"] >= max(r["lost"] for r in h2h[key]["baselines"].values())
        assert "abstention" not in best["categories"]
    # one first query per ingested graph, on each of the 5 memories, apart from warm latency
    assert set(res["first_query_ms"]) == {"synapse-paper", "synapse"}
    assert all(fq["n"] == 5 for fq in res["first_query_ms"].values())
    assert res["timing_s"]["embedded_texts"] > 0


class _SlowToLoad(HashingEmbedder):
    """A model whose first call pays a one-time load, like MiniLM's: long enough that a
    first query charged with it stands out from any slow spell of a busy machine (a
    first query took 0.5 s under load in CI)."""

    LOAD_S = 2.0

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.loaded = False

    def embed_query(self, text: str) -> np.ndarray:
        if not self.loaded:
            time.sleep(self.LOAD_S)
            self.loaded = True
        return super().embed_query(text)


def test_the_models_load_is_not_charged_to_the_first_query() -> None:
    res = run_longmemeval(FIXTURE, methods=["dense", "synapse"], ks=(5,),
                          embedder=_SlowToLoad(dim=384))
    assert res["timing_s"]["model_load"] >= _SlowToLoad.LOAD_S
    slowest = 1000.0 * _SlowToLoad.LOAD_S
    assert res["first_query_ms"]["synapse"]["p95"] < slowest
    assert all(m["latency_ms"]["p95"] < slowest for m in res["methods"].values())


def test_bm25_and_fusion_alone_need_no_ingestion() -> None:
    res = run_longmemeval(FIXTURE, methods=["bm25", "fusion-w0.0", "fusion-w1.0"], ks=(3,),
                          embedder=HashingEmbedder(dim=384), keep_records=True)
    assert res["timing_s"]["ingest"] == 0.0 and res["first_query_ms"] == {}
    assert "gate" not in res and "best_baseline" not in res and "head_to_head" not in res
    # w = 1 ranks by BM25 alone: BM25's hits first, in BM25's order, then the rest
    for lex, fused in zip(res["records"]["bm25"], res["records"]["fusion-w1.0"]):
        assert lex.ranked and fused.ranked[:len(lex.ranked)] == lex.ranked
        assert len(fused.ranked) == len(fused.extra["session_of"])  # every episode


def test_the_progress_bar_counts_questions() -> None:
    bars = []

    class Bar:
        def __init__(self, **kw):
            self.kw, self.n, self.closed = kw, 0, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    res = run_longmemeval(FIXTURE, methods=["bm25"], ks=(3,), embedder=HashingEmbedder(dim=384),
                          progress=Bar)
    asked = sum(res["questions"].values())
    assert [(b.kw, b.n, b.closed) for b in bars] == [
        ({"total": asked, "desc": "questions", "unit": "question"}, asked, True)]


def test_vector_cache_round_trip(tmp_path) -> None:
    store = VectorCache(tmp_path / "c", embedder="hashing", dim=384)
    emb = CachingEmbedder(HashingEmbedder(dim=384), store=store)
    emb.prefetch(["a b", "c d", "a b"])
    assert emb.embedded == 2 and len(store) == 2
    emb.flush()
    assert len(list((tmp_path / "c").glob("vectors-*.npz"))) == 1
    again = CachingEmbedder(HashingEmbedder(dim=384),
                            store=VectorCache(tmp_path / "c", embedder="hashing", dim=384))
    np.testing.assert_array_equal(again.embed_documents(["c d"]), emb.embed_documents(["c d"]))
    assert again.embedded == 0
    with pytest.raises(ValueError, match="never mixed"):
        VectorCache(tmp_path / "c", embedder="other", dim=384)


def test_cli_end_to_end_with_a_fake_embedder(tmp_path, capsys, monkeypatch) -> None:
    from synapse_integrations import cli
    from synapse_integrations.bench import commands as bench_commands

    monkeypatch.setattr(bench_commands, "_embedder", lambda args: CachingEmbedder(HashingEmbedder(dim=384)))
    out = tmp_path / "lme.json"
    gz = tmp_path / "tiny.json.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write(FIXTURE.read_text())
    rc = cli.main(["bench", "longmemeval", "--data", str(gz), "--out", str(out), "--k", "5,10",
                   "--methods", "bm25,fusion,synapse", "--types",
                   "multi-session,knowledge-update,abstention", "--limit", "3",
                   "--no-progress", "--plot", str(tmp_path / "plots")])
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["questions"]["multi-session"] == 1 and res["questions"]["abstention"] == 1
    assert list(res["methods"]) == ["bm25", "fusion", "synapse"]
    printed = capsys.readouterr().out
    for text in ("recall@10", "session_recall@5", "best baseline", "synapse margin",
                 "first query after ingestion", "abstention rejected", "multi-sess"):
        assert text in printed, text
    assert (tmp_path / "plots" / "longmemeval_recall.png").stat().st_size > 0
    assert (tmp_path / "plots" / "longmemeval_gate.png").stat().st_size > 0


def test_cli_rejects_unknown_methods(tmp_path, capsys) -> None:
    from synapse_integrations.cli import main

    with pytest.raises(ValueError, match="unknown method 'cosine'"):
        main(["bench", "longmemeval", "--data", str(FIXTURE), "--out", str(tmp_path / "x.json"),
              "--methods", "cosine", "--no-progress"])


@pytest.mark.model
def test_cli_with_the_real_model(tmp_path, capsys) -> None:
    from synapse_integrations.cli import main

    out = tmp_path / "lme.json"
    rc = main(["bench", "longmemeval", "--data", str(FIXTURE), "--out", str(out), "--k", "1,5",
               "--methods", "dense,bm25,hybrid_rrf,fusion,synapse", "--no-progress",
               "--embed-cache", str(tmp_path / "cache")])
    assert rc == 0
    res = json.loads(out.read_text())
    # one evidence turn, asked about directly: the real model puts it first
    assert res["methods"]["dense"]["recall@1"]["single-session-user"] == 1.0
    assert res["methods"]["synapse"]["recall@5"]["single-session-user"] == 1.0
    assert res["timing_s"]["embedded_texts"] > 0
    # a second run reads every turn from the cache
    rc = main(["bench", "longmemeval", "--data", str(FIXTURE), "--out", str(out), "--k", "1",
               "--methods", "bm25", "--no-progress", "--embed-cache", str(tmp_path / "cache")])
    assert json.loads(out.read_text())["timing_s"]["embedded_texts"] == 0

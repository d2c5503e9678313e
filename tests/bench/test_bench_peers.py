"""``synapse bench peers`` on a hand-written conversation: each peer ingests and ranks through
its own API, the evidence comes first, the JSON holds its keys and versions, bad input is a
clear error. The peers are optional (the ``[peers]`` extra): a test needing one is skipped
only when its package is not installed."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

from synapse_integrations.bench.peer_systems import (
    SharedVectors,
    make_system,
    new_workdir,
    prepare,
    system_version,
)
from synapse_integrations.bench.peers import check_peer_methods, run_peers
from synapse_integrations.bench.retrieval import (
    BenchMemory,
    BenchQuestion,
    CachingEmbedder,
    run_memories,
)
from synapse_integrations.cli import main
from synapse_integrations.embeddings import HashingEmbedder

TURNS = [
    ("Mara", "I adopted a grey kitten and named her Biscuit"),
    ("Theo", "My sister works at the aquarium in Lisbon"),
    ("Mara", "Pottery class starts on Saturday morning"),
    ("Theo", "I ran five kilometres along the river today"),
    ("Mara", "Biscuit sleeps on the warm laptop all afternoon"),
    ("Theo", "We booked train tickets to Porto for June"),
]
QUESTIONS = [  # (question, category, evidence)
    ("Where does Theo's sister work, at which aquarium?", 4, ["D1:2"]),
    ("When does the pottery class start?", 2, ["D1:3"]),
    ("Which train tickets did Theo book for June?", 1, ["D1:6"]),
]
PEER_MODULES = {"mem0": "mem0", "langgraph_store": "langgraph.store.memory",
                "llamaindex_memory": "llama_index.vector_stores.chroma"}


def _locomo_file(tmp_path):
    session = [{"speaker": s, "dia_id": f"D1:{i}", "text": t} for i, (s, t) in
               enumerate(TURNS, 1)]
    data = [{"sample_id": "hand-1",
             "conversation": {"speaker_a": "Mara", "speaker_b": "Theo",
                              "session_1_date_time": "1:56 pm on 8 May, 2023",
                              "session_1": session},
             "qa": [{"question": q, "answer": "x", "evidence": ev, "category": c}
                    for q, c, ev in QUESTIONS]}]
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(data))
    return path


def _memory() -> BenchMemory:
    t0 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    turns = tuple({"text": f"{s}: {t}", "speaker": s, "timestamp": t0 + timedelta(seconds=i),
                   "id": f"D1:{i + 1}"} for i, (s, t) in enumerate(TURNS))
    return BenchMemory("hand-1", turns, tuple(
        BenchQuestion(f"hand-1/{i}", q, str(c), tuple(ev)) for i, (q, c, ev) in
        enumerate(QUESTIONS)))


def _installed(name: str) -> None:
    if name == "mem0":  # read once, when mem0 is imported: off before importorskip imports it
        os.environ["MEM0_TELEMETRY"] = "False"
    if name in PEER_MODULES:
        pytest.importorskip(PEER_MODULES[name])
    if name == "llamaindex_memory":
        pytest.importorskip("llama_index.core.memory")


@pytest.mark.parametrize("name", ["synapse", "ppr", "mem0", "langgraph_store",
                                  "llamaindex_memory"])
def test_each_system_ingests_and_ranks_the_evidence_first(name) -> None:
    _installed(name)
    prepare(name)
    memory = _memory()
    shared = SharedVectors(CachingEmbedder(HashingEmbedder()))
    shared.remember([t["text"] for t in memory.turns])
    built: dict = {}
    with new_workdir() as workdir:
        try:
            if name == "ppr":
                built["synapse"] = make_system("synapse", shared, workdir, memory.name, built)
                built["synapse"].ingest(memory)
            system = make_system(name, shared, workdir, memory.name, built)
            built[name] = system
            system.ingest(memory)
            ids = {t["id"] for t in memory.turns}
            for q in memory.questions:
                ranked = system.rank(q.text, 10)
                assert ranked and set(ranked) <= ids and len(set(ranked)) == len(ranked)
                assert ranked[0] == q.evidence[0], (name, q.text, ranked)
        finally:
            for s in reversed(list(built.values())):
                s.close()
    assert system_version(name) not in ("", "not installed")


def test_questions_are_embedded_live_and_turns_from_the_cache() -> None:
    class Counting(HashingEmbedder):
        calls = 0

        def embed_query(self, text):
            Counting.calls += 1
            return super().embed_query(text)

    shared = SharedVectors(CachingEmbedder(Counting()))
    shared.remember(["a stored turn"])
    before = Counting.calls
    shared.document("a stored turn")
    assert Counting.calls == before  # a stored turn: the cache
    shared.query("a question")
    shared.query("a question")
    assert Counting.calls == before + 2  # a question: the model, every time


def test_synapse_ranks_as_the_locomo_runner_does() -> None:
    memory = _memory()
    emb = CachingEmbedder(HashingEmbedder())
    state = run_memories([memory], methods=["synapse", "ppr"], ks=[5, 10], embedder=emb)
    shared = SharedVectors(emb)
    shared.remember([t["text"] for t in memory.turns])
    built: dict = {}
    with new_workdir() as workdir:
        try:
            for m in ("synapse", "ppr"):
                built[m] = make_system(m, shared, workdir, memory.name, built)
                built[m].ingest(memory)
            for m in ("synapse", "ppr"):
                for q, rec in zip(memory.questions, state.records[m]):
                    assert built[m].rank(q.text, 100)[:10] == rec.ranked[:10], m
        finally:
            for s in reversed(list(built.values())):
                s.close()


def test_run_peers_json(tmp_path) -> None:
    methods = ["synapse", "ppr", *(m for m in PEER_MODULES if _available(m))]
    res = run_peers(_locomo_file(tmp_path), methods=methods, embedder=HashingEmbedder(),
                    scale_turns=5, scale_queries=2)
    assert res["format"] == "locomo" and res["memories"] == 1
    assert res["questions"] == {"1": 1, "2": 1, "3": 0, "4": 1, "5": 0}
    assert list(res["methods"]) == methods
    for name, m in res["methods"].items():
        assert set(m) == {"version", "recall@5", "recall@10", "context_tokens@5",
                          "context_tokens@10", "tokens_recall@1000", "tokens_recall@2000",
                          "latency_ms", "ingest", "import_rss_mb"}, name
        assert m["version"] not in ("", "not installed")
        assert m["recall@5"]["1-4"] == 1.0 and m["tokens_recall@1000"]["1-4"] == 1.0, name
        assert m["latency_ms"]["n"] == 3 and 0 < m["latency_ms"]["p50"] <= m["latency_ms"]["p95"]
        assert m["ingest"]["turns"] == (0 if name == "ppr" else len(TURNS))
    assert res["methods"]["ppr"]["ingest"]["shares"] == "synapse"
    assert res["at_scale"]["turns"] == 5 and set(res["at_scale"]["methods"]) == set(methods)
    assert set(res) == {"dataset", "format", "memories", "questions", "depth", "gc_frozen",
                        "methods", "at_scale", "rss_mb", "timing_s"}


def _available(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(PEER_MODULES[name]) is not None
    except ImportError:
        return False


def test_bad_input_is_a_clear_error(tmp_path, capsys) -> None:
    with pytest.raises(ValueError, match="unknown method.*'zep'.*choose from synapse, ppr"):
        check_peer_methods(["synapse", "zep"])
    with pytest.raises(ValueError, match="is locomo, not longmemeval"):
        run_peers(_locomo_file(tmp_path), methods=["synapse"], embedder=HashingEmbedder(),
                  data_format="longmemeval")
    with pytest.raises(ValueError, match="unknown method"):
        main(["bench", "peers", "--data", str(_locomo_file(tmp_path)), "--methods", "zep",
              "--out", str(tmp_path / "x.json"), "--no-progress"])
    assert check_peer_methods(["ppr", "mem0", "synapse"]) == ["mem0", "synapse", "ppr"]


@pytest.mark.model
def test_cli_end_to_end_with_the_real_model(tmp_path, capsys) -> None:
    pytest.importorskip("langgraph.store.memory")
    out = tmp_path / "peers.json"
    rc = main(["bench", "peers", "--data", str(_locomo_file(tmp_path)), "--methods",
               "synapse,langgraph_store", "--embed-cache", str(tmp_path / "cache"),
               "--out", str(out), "--no-progress"])
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["methods"]["langgraph_store"]["recall@10"]["1-4"] == 1.0
    assert "langgraph_store" in capsys.readouterr().out

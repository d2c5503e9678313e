"""``synapse bench perf``: the perf.json contract on a tiny run, and its helpers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from synapse_integrations.bench.perf import (
    HashingEmbedder,
    format_perf_table,
    run_perf,
    speaker_queries,
    synthetic_queries,
    synthetic_turns,
)
from synapse_integrations.bench.perf_timing import WindowTimes as _WindowTimes
from synapse_integrations.bench.perf_timing import ingest_slices, peak_rss_mb
from synapse_integrations.cli import main
from synapse_integrations.core.ingest.extraction import OfflineExtractor
from synapse_integrations.types import Turn, VectorWrite, WindowReport

RUN_KEYS = {"nodes", "edges", "synthetic", "retrieve_ms", "dense_only_ms", "activation_ms",
            "retrieve_named_ms", "retrieve_named_first_ms", "first_retrieve_ms",
            "ingest_turns_per_s", "consolidate_ms_per_window", "embed_query_ms", "peak_rss_mb",
            "ratio_with_query_embedding_p50", "retrieve_text_ms", "dense_text_ms",
            "ingest_slices"}
LATENCIES = ("retrieve_ms", "dense_only_ms", "activation_ms", "retrieve_named_ms")


def check_perf_json(res: dict, sizes: list[int]) -> None:
    assert [r["nodes"] for r in res["runs"]] == sizes
    for r in res["runs"]:
        assert set(r) == RUN_KEYS
        assert type(r["nodes"]) is int and type(r["edges"]) is int and r["edges"] > r["nodes"]
        assert r["synthetic"] is True
        for key in LATENCIES:
            assert set(r[key]) == {"p50", "p95"}
            assert all(isinstance(v, float) for v in r[key].values())
            assert 0.0 < r[key]["p50"] <= r[key]["p95"]
        # the activation step is part of the full retrieval
        assert r["activation_ms"]["p50"] < r["retrieve_ms"]["p50"]
        assert isinstance(r["first_retrieve_ms"], float) and r["first_retrieve_ms"] > 0.0
        first = r["retrieve_named_first_ms"]
        assert set(first) == {"p50", "p95", "max"} and 0.0 < first["p50"] <= first["p95"] <= first["max"]
        for key in ("ingest_turns_per_s", "consolidate_ms_per_window", "embed_query_ms",
                    "peak_rss_mb"):
            assert isinstance(r[key], float) and r[key] > 0.0, key
        # the real encoder before each question: both sides include its time (what is
        # timed: test_each_question_is_embedded_right_before_it_is_asked)
        for key in ("retrieve_text_ms", "dense_text_ms"):
            assert set(r[key]) == {"p50", "p95"} and 0.0 < r[key]["p50"] <= r[key]["p95"]
        # the ratio a caller of retrieve(text) against similarity_search(text) sees
        e = r["embed_query_ms"]
        assert r["ratio_with_query_embedding_p50"] == pytest.approx(
            (e + r["retrieve_ms"]["p50"]) / (e + r["dense_only_ms"]["p50"]), abs=1e-3)
        # the build's ingest throughput per slice: the slices cover the build, in order
        slices = r["ingest_slices"]
        assert [s["to"] for s in slices] == sorted(s["to"] for s in slices)
        assert slices[-1]["to"] == r["nodes"] and sum(s["turns"] for s in slices) == r["nodes"]
        assert all(s["turns_per_s"] > 0.0 for s in slices)
    # measured once per invocation (documented): the same in every run
    assert len({r["ingest_turns_per_s"] for r in res["runs"]}) == 1
    assert res["runs"][-1]["peak_rss_mb"] >= res["runs"][0]["peak_rss_mb"]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def test_synthetic_turns_are_deterministic_sessions() -> None:
    turns = synthetic_turns(45, seed=3)
    assert turns == synthetic_turns(45, seed=3)
    assert turns != synthetic_turns(45, seed=4)
    assert [t["id"] for t in turns[:3]] == ["syn-0", "syn-1", "syn-2"]
    # sessions of 20 turns, 2 minutes apart, one day between sessions
    assert turns[1]["timestamp"] - turns[0]["timestamp"] == 120.0
    assert turns[20]["timestamp"] - turns[0]["timestamp"] == 86_400.0
    assert turns[41]["timestamp"] - turns[40]["timestamp"] == 120.0
    # two alternating speakers per session, and the text starts with the speaker
    assert turns[0]["speaker"] == turns[2]["speaker"] != turns[1]["speaker"]
    assert all(t["text"].startswith(t["speaker"] + ": ") for t in turns)
    assert synthetic_turns(0) == []
    with pytest.raises(ValueError):
        synthetic_turns(-1)


def test_synthetic_turns_give_the_offline_extractor_recurring_concepts() -> None:
    turns = synthetic_turns(200, seed=0)
    ex = OfflineExtractor()
    names: dict[str, int] = {}
    for s in range(0, 200, 5):
        window = [Turn(t["id"], t["text"], t["speaker"]) for t in turns[s:s + 5]]
        for c in ex.extract(window).concepts:
            names[c.name] = names.get(c.name, 0) + 1
    recurring = [n for n, count in names.items() if count >= 3]
    assert len(recurring) >= 10  # speakers, people and topics come back across windows


def test_synthetic_queries() -> None:
    qs = synthetic_queries(7, seed=1)
    assert len(qs) == 7 and all(q.endswith("?") for q in qs)
    assert qs == synthetic_queries(7, seed=1)


def test_speaker_queries_name_the_conversations_speakers() -> None:
    speakers = {t["speaker"] for t in synthetic_turns(4000, seed=2)}
    qs = speaker_queries(80, seed=2)
    named = [next((s for s in speakers if f"{s} " in q or f"{s}'s" in q), None) for q in qs]
    assert None not in named and len(set(named)) == 40  # every recurring speaker, in turn
    assert sum(q.startswith("What is the name of ") for q in qs) == 20


def test_hashing_embedder_unit_rows_and_word_overlap() -> None:
    emb = HashingEmbedder(dim=64, noise=0.5)
    m = emb.embed_documents(["Dana went skiing in Whistler", "Dana went skiing in Whistler",
                             "Dana loves skiing", "a quiet evening at home"])
    assert m.dtype == np.float32 and m.shape == (4, 64)
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(m[0], m[1])  # deterministic
    assert m[0] @ m[2] > m[0] @ m[3] + 0.2  # shared words make texts close
    # a name embeds the same every time (concept dedup works on synthetic memories)
    np.testing.assert_array_equal(emb.embed_query("Dana"), HashingEmbedder(dim=64).embed_query("Dana"))


def test_window_times_charge_each_window_its_share_of_the_batched_concept_write() -> None:
    times = _WindowTimes()
    times.record = True
    for seconds in (0.001, 0.003):
        times(WindowReport(5, 1, 0, 0, 0, seconds))
    times(VectorWrite("concept", 7, 0.002))  # one write for both windows: 1 ms each
    times(VectorWrite("episode", 10, 1.0))  # not a consolidation cost
    times.end_call()
    assert times.windows_ms == pytest.approx([2.0, 4.0])
    times.record = False  # windows outside the recorded part of the build are dropped
    times(WindowReport(5, 0, 0, 0, 0, 0.5))
    times.end_call()
    assert times.windows_ms == pytest.approx([2.0, 4.0])


def _run(nodes: int, p50s: tuple[float, float, float]) -> dict:
    r, d, a = p50s
    return {"nodes": nodes, "edges": 10 * nodes, "synthetic": True,
            "retrieve_ms": {"p50": r, "p95": 2 * r}, "dense_only_ms": {"p50": d, "p95": 2 * d},
            "activation_ms": {"p50": a, "p95": 2 * a}, "ingest_turns_per_s": 120.0,
            "consolidate_ms_per_window": 3.5, "embed_query_ms": 8.25, "peak_rss_mb": 700.0}


def test_format_perf_table() -> None:
    res = {"runs": [_run(1000, (6.0, 3.0, 1.0)), _run(10000, (9.0, 6.0, 2.0))],
           "archive_check": {"nodes": 1000, "archived_nodes": 950, "active_nodes": 150,
                             "fresh_active_nodes": 148, "with_archive_ms": {"p50": 5.0, "p95": 6.0},
                             "fresh_ms": {"p50": 4.0, "p95": 5.0},
                             "archive_dropped_ms": {"p50": 5.0, "p95": 6.0},
                             "dense_with_archive_ms": {"p50": 2.0, "p95": 3.0},
                             "dense_fresh_ms": {"p50": 1.0, "p95": 2.0}, "ratio_p50": 1.0,
                             "ratio_fresh_p50": 1.25}}
    table = format_perf_table(res)
    lines = table.splitlines()
    assert "1000" in lines[1] and "6.00/12.00" in lines[1] and "2.00" in lines[1]  # 6 / 3
    assert "1.50" in lines[2]  # 9 / 6
    assert "120.0 turns/s" in table and "8.25 ms" in table
    assert "synthetic" in table and "ratio 1.25" in table and "ratio 1.00" in table
    # (8.25 + 6) / (8.25 + 3) and (8.25 + 9) / (8.25 + 6)
    assert "with the query's embedding on both sides: 1000: 1.267x, 10000: 1.211x" in table
    assert "naming a speaker" not in table  # a perf.json from before those keys
    named = {**_run(1000, (6.0, 3.0, 1.0)), "retrieve_named_ms": {"p50": 7.0, "p95": 9.5},
             "retrieve_named_first_ms": {"p50": 8.0, "p95": 20.0, "max": 31.0}}
    assert ("1000 questions naming a speaker: retrieve 7.00/9.50 ms; first ask 8.00/20.00 ms, "
            "max 31") in format_perf_table({"runs": [named]})
    assert "first query after the build" not in table  # nor this key
    assert "1000 first query after the build: 42.5 ms" in format_perf_table(
        {"runs": [{**named, "first_retrieve_ms": 42.5}]})
    assert "with the encoder" not in table  # a perf.json from before 2026-11-29
    assert ("1000 with the encoder before each query: retrieve 15.70/21.00 ms, dense-only "
            "10.00/12.00 ms, ratio 1.57") in format_perf_table(
        {"runs": [{**named, "retrieve_text_ms": {"p50": 15.7, "p95": 21.0},
                   "dense_text_ms": {"p50": 10.0, "p95": 12.0}}]})


def test_peak_rss_is_positive() -> None:
    assert peak_rss_mb() > 10.0


@pytest.mark.parametrize("kwargs", [{"nodes": []}, {"nodes": [0]}, {"queries": 0},
                                    {"archive_share": 1.0}])
def test_run_perf_rejects_bad_arguments(kwargs) -> None:
    args = {"nodes": [10], **kwargs}
    with pytest.raises(ValueError):
        run_perf(args.pop("nodes"), real_embedder=HashingEmbedder(), **args)


# --------------------------------------------------------------------------------------------
# end to end
# --------------------------------------------------------------------------------------------
def test_each_question_is_embedded_right_before_it_is_asked() -> None:
    from synapse_integrations.bench.perf_timing import (
        time_with_encoder as _time_with_encoder,
    )

    calls: list[tuple[str, str]] = []

    class Encoder:
        def embed_query(self, text: str) -> None:
            calls.append(("embed", text))

    class Memory:
        def retrieve_by_vector(self, text: str, q: np.ndarray, k: int) -> None:
            calls.append(("retrieve", text))

        def search_vectors(self, q: np.ndarray, k: int) -> None:
            calls.append(("dense", str(int(q[0]))))

    texts = ["first?", "second?"]
    retrieve, dense = _time_with_encoder(Memory(), texts, np.array([[0.0], [1.0]]), 5,
                                         Encoder())
    assert calls == [("embed", "first?"), ("retrieve", "first?"), ("embed", "first?"),
                     ("dense", "0"), ("embed", "second?"), ("retrieve", "second?"),
                     ("embed", "second?"), ("dense", "1")]
    assert len(retrieve) == len(dense) == 2 and all(t >= 0.0 for t in retrieve + dense)


def test_run_perf_tiny_without_the_model() -> None:
    # the hashed embedder stands in for the real model: the whole pipeline in seconds
    lines: list[str] = []
    res = run_perf([60, 150], queries=8, ingest_sample=20, archive_at=100,
                   real_embedder=HashingEmbedder(), log=lines.append, cold_start_rounds=0)
    check_perf_json(res, [60, 150])
    a = res["archive_check"]
    assert a["archived_nodes"] >= 90 and a["active_nodes"] < 60
    assert a["fresh_active_nodes"] > 0 and a["ratio_p50"] > 0 and a["ratio_fresh_p50"] > 0
    # the control has the same active nodes and no archive left; forget takes with the
    # archived turns the relation edges only they said (archiving keeps them)
    assert a["dropped_active_nodes"] == a["active_nodes"]
    assert 0 <= a["active_edges"] - a["dropped_active_edges"] <= 3
    assert a["dropped_archived_nodes"] == 0
    assert any("archive check" in line for line in lines)
    json.dumps(res)  # JSON-ready


@pytest.mark.model
def test_bench_perf_cli_end_to_end(tmp_path, capsys) -> None:
    out = tmp_path / "perf.json"
    rc = main(["bench", "perf", "--nodes", "200", "--queries", "10", "--ingest-sample", "32",
               "--archive-at", "0", "--cold-start-rounds", "1", "--no-progress",
               "--out", str(out), "--plot", str(tmp_path / "plots")])
    assert rc == 0
    res = json.loads(out.read_text())
    assert set(res) == {"runs", "cold_start"} and res["cold_start"]["rounds"] == 1
    check_perf_json(res, [200])
    printed = capsys.readouterr().out
    assert "synthetic" in printed and "turns/s" in printed
    assert (tmp_path / "plots" / "perf_latency.png").stat().st_size > 1000


def test_ingest_slices_cut_the_build_at_each_multiple_of_the_slice():
    # marks after each add_turns call: (turns so far, seconds so far)
    marks = [(4, 1.0), (8, 2.0), (12, 5.0), (16, 6.0), (18, 8.0)]
    got = ingest_slices(marks, size=10)
    # 0..12 in 5 s (the first mark at or past 10), 12..18 in 3 s (the last mark)
    assert got == [{"to": 12, "turns": 12, "seconds": 5.0, "turns_per_s": 2.4},
                   {"to": 18, "turns": 6, "seconds": 3.0, "turns_per_s": 2.0}]
    assert ingest_slices([], size=10) == []
    assert ingest_slices([(10, 2.0), (20, 6.0)], size=10) == [
        {"to": 10, "turns": 10, "seconds": 2.0, "turns_per_s": 5.0},
        {"to": 20, "turns": 10, "seconds": 4.0, "turns_per_s": 2.5}]

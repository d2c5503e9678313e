"""Probe sets: the packaged file's validity, the bridge property, the metrics, the runner."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from synapse_integrations.bench.perf import HashingEmbedder
from synapse_integrations.bench.probes import KINDS, load_probes, run_probes, score_records, \
    shares_word, validate_probes
from synapse_integrations.bench.retrieval import QuestionRecord

FIXTURES = Path(__file__).parents[1] / "fixtures"
TINY_LOCOMO = FIXTURES / "locomo_tiny.json"
TINY_PROBES = FIXTURES / "probes_tiny.json"
DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo_dev.json"


@pytest.fixture(scope="module")
def packaged() -> dict:
    return load_probes()


def _probes(data: dict, kind: str) -> list[dict]:
    return [p for g in data["groups"] if g["kind"] == kind for p in g["probes"]]


def test_packaged_probe_file_is_valid_and_large_enough(packaged) -> None:
    assert packaged["format"] == "synapse-probes" and packaged["version"] == 1
    counts = {k: len(_probes(packaged, k)) for k in KINDS}
    assert counts["identifier"] >= 40 and counts["bridge"] >= 30
    assert counts["never_said"] >= 20 and counts["update"] >= 20
    records = [g for g in packaged["groups"] if g["id"] == "identifier-records"][0]
    assert len(records["inserts"]) >= 200  # a few hundred near-identical turns
    assert {p["bridge_type"] for p in _probes(packaged, "bridge")} == {
        "person", "pet", "project", "object", "place", "topic"}
    # every probe's conversation is one of LoCoMo's dev conversations
    assert {g["conversation"] for g in packaged["groups"]} <= {
        "conv-26", "conv-30", "conv-41", "conv-42", "conv-43"}


def test_every_bridge_answer_shares_no_content_word_with_its_question(packaged) -> None:
    """The property the bridge probes exist for: no lexical way from question to answer
    (the speaker's name, which the answer turn starts with, included), while the question
    does meet the subject or bridge turn, and the bridge turn names the answer's subject."""
    for g in packaged["groups"]:
        if g["kind"] != "bridge":
            continue
        text = {t["id"]: f"{t['speaker']}: {t['text']}" for t in g["inserts"]}
        for p in g["probes"]:
            subject, bridge, answer = (text[i] for i in p["chain"])
            assert p["targets"] == [p["chain"][2]]
            assert not shares_word(p["question"], answer), (p["id"], p["question"], answer)
            assert shares_word(p["question"], subject) | shares_word(p["question"], bridge), p["id"]
            assert shares_word(answer.split(":", 1)[1], bridge.split(":", 1)[1]), p["id"]
            # three points of the conversation, in order
            points = [next(t["after"] for t in g["inserts"] if t["id"] == i) for i in p["chain"]]
            assert len(set(points)) == 3, p["id"]


def test_shares_word_is_eager() -> None:
    assert shares_word("Why did Omar's cat go to the vet?", "we rushed to the vet") == {"vet"}
    assert shares_word("What sport does she play?", "she plays hockey") == {"play"}
    assert not shares_word("What happened to Omar's cat?", "Pickle swallowed a hair tie")


@pytest.mark.skipif(not DEV.exists(), reason="LoCoMo dev data not beside the repository")
def test_generator_reproduces_the_packaged_file(packaged) -> None:
    from synapse_integrations.bench.locomo import load_locomo
    from synapse_integrations.bench.probe_gen import generate

    validate_probes(packaged, load_locomo(DEV))
    assert generate(DEV) == packaged


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.__setitem__("format", "x"), "format 'synapse-probes'"),
    (lambda d: d["groups"][0].__setitem__("kind", "trivia"), "kind must be one of"),
    (lambda d: d["groups"][0]["inserts"][1].__setitem__("id", "P:rec:1"), "used twice"),
    (lambda d: d["groups"][0]["probes"][0].__setitem__("targets", ["nope"]), "targets must"),
    (lambda d: d["groups"][1]["probes"][0].__setitem__("question", "Why did Pickle swallow it?"),
     "share"),
    (lambda d: d["groups"][2]["probes"][0].__setitem__("targets", ["P:rec:1"]), "targets must"),
    (lambda d: d["groups"][3]["probes"][0].pop("older"), "older/newer"),
])
def test_validation_names_the_problem(mutate, message) -> None:
    data = json.loads(TINY_PROBES.read_text())
    mutate(data)
    with pytest.raises(ValueError, match=message):
        validate_probes(data)


def test_validation_against_the_conversation() -> None:
    from synapse_integrations.bench.locomo import load_locomo

    ds = load_locomo(TINY_LOCOMO)
    data = json.loads(TINY_PROBES.read_text())
    validate_probes(data, ds)
    bad = copy.deepcopy(data)
    bad["groups"][0]["inserts"][0]["after"] = "D9:9"
    with pytest.raises(ValueError, match="no turn 'D9:9' in tiny-a"):
        validate_probes(bad, ds)
    bad = copy.deepcopy(data)
    bad["groups"][2]["probes"][0]["absent_terms"] = ["soup"]  # Kofi mentions lentil soup
    with pytest.raises(ValueError, match="'soup' does occur in tiny-b"):
        validate_probes(bad, ds)


def _rec(kind: str, ranked: list[str], target: tuple[str, ...], rejected=None, **extra):
    return QuestionRecord("c", "q", kind, target, ranked, 1.0, None, {"group": "g", **extra},
                          rejected, f"{kind}-{len(ranked)}-{target}")


def test_score_records_hand_computed() -> None:
    recs = [
        _rec("identifier", ["a", "b"], ("a",)),               # rank 1
        _rec("identifier", ["x", "y", "b"], ("b",)),          # rank 3
        _rec("identifier", ["x"], ("z",)),                    # not ranked
        _rec("bridge", [str(i) for i in range(12)], ("9",), bridge_type="pet"),   # rank 10
        _rec("bridge", [str(i) for i in range(12)], ("10",), bridge_type="pet"),  # rank 11
        _rec("update", ["new", "old"], ("new",), older="old", newer="new"),
        _rec("update", ["o1", "o2", "o3", "old", "x", "new"], ("new",), older="old",
             newer="new"),
        _rec("update", ["a", "b", "c", "d", "new"], ("new",), older="gone", newer="new"),
        _rec("never_said", ["a"], (), rejected=True),
        _rec("never_said", ["a"], (), rejected=False),
    ]
    recs[0].rejected = True  # one of the 8 answerable probes refused
    out = score_records(recs, engine=True)
    assert out["identifier"]["rank1"] == pytest.approx(1 / 3)
    assert out["identifier"]["mrr"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert out["bridge"]["hit@10"] == 0.5 and out["bridge"]["median_rank_found"] == 11
    assert out["bridge"]["types"] == {"pet": 0.5}
    assert out["update"]["newer_above_older"] == pytest.approx(2 / 3)
    assert out["update"]["newer_top5"] == pytest.approx(2 / 3)
    assert out["never_said"] == {"n": 2, "rejected": 0.5, "false_refusal": 1 / 8}
    # a baseline has no gate
    assert score_records(recs, engine=False)["never_said"]["rejected"] is None


def test_run_probes_on_the_tiny_fixture(tmp_path, capsys, monkeypatch) -> None:
    from synapse_integrations import cli
    from synapse_integrations.bench import commands as bench_commands
    from synapse_integrations.bench.retrieval import CachingEmbedder

    monkeypatch.setattr(bench_commands, "_embedder", lambda args: CachingEmbedder(HashingEmbedder(dim=384)))
    out = tmp_path / "probes.json"
    rc = cli.main(["bench", "probes", "--locomo", str(TINY_LOCOMO), "--probes", str(TINY_PROBES),
                   "--out", str(out), "--no-progress", "--methods",
                   "bm25,dense,hybrid_rrf,fusion,synapse,synapse-paper"])
    assert rc == 0
    res = json.loads(out.read_text())
    assert set(res) == {"probes", "version", "dataset", "counts", "methods", "as_of", "timing_s"}
    assert res["counts"] == {"identifier": 2, "bridge": 1, "never_said": 1, "update": 1}
    assert set(res["as_of"]) == {"plain", "linked", "reconsolidation"}
    assert res["as_of"]["linked"]["n"] == 1 and res["as_of"]["linked"]["current_only"]["wrong_absent"] == 1.0
    for name, m in res["methods"].items():
        assert set(m) == {"identifier", "bridge", "update", "never_said", "ranks",
                          "latency_ms"}, name
        assert set(m["ranks"]) == {"ident-2", "ident-3", "bridge-1", "never-1", "update-1"}
    # BM25 matches the identifier token exactly: rank 1 for both
    assert res["methods"]["bm25"]["identifier"]["rank1"] == 1.0
    assert res["methods"]["bm25"]["never_said"]["rejected"] is None
    assert res["methods"]["synapse"]["never_said"]["rejected"] in (0.0, 1.0)
    printed = capsys.readouterr().out
    assert "ident r@1" in printed and "bridge@10" in printed and "never rej" in printed
    assert "as_of probes" in printed


def test_run_probes_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="unknown probe kind"):
        run_probes(TINY_LOCOMO, probes=TINY_PROBES, kinds=["trivia"],
                   embedder=HashingEmbedder(dim=384))

"""End-to-end run of ``synapse bench locomo`` on the tiny fixture: the JSON contract and ranges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synapse_integrations.bench.retrieval import DEFAULT_METHODS, method_config, rrf_fuse
from synapse_integrations.cli import main
from synapse_integrations.config import SynapseConfig

FIXTURE = Path(__file__).parents[1] / "fixtures" / "locomo_tiny.json"
CATS = {"1", "2", "3", "4", "5", "1-4"}


def test_rrf_fuse_hand_computed() -> None:
    # a: 1/61 + 1/62 = 0.03252; c: 1/63 + 1/61 = 0.03227; b: 1/62 = 0.01613; d: 1/63
    assert rrf_fuse([["a", "b", "c"], ["a", "c"]]) == ["a", "c", "b"]
    assert rrf_fuse([["x"], ["y"]]) == ["x", "y"]  # tie: first appearance wins
    assert rrf_fuse([]) == []


def test_method_configs() -> None:
    assert method_config("synapse") == SynapseConfig()
    assert method_config("synapse-paper") == SynapseConfig.paper()
    assert method_config("synapse-no-fan").use_fan_effect is False
    single = method_config("synapse-no-feedback")  # the paper's single pass
    assert single == SynapseConfig(entity_feedback=0) and SynapseConfig.paper().entity_feedback == 0
    assert single.graph_signature() == SynapseConfig().graph_signature()  # same memory
    # retrieval-only ablations share the ingested graph of the default
    for m in DEFAULT_METHODS:
        if m.startswith("synapse-no-"):
            assert method_config(m).graph_signature() == SynapseConfig().graph_signature()
    with pytest.raises(ValueError, match="unknown method"):
        method_config("cosine")


@pytest.mark.model
def test_bench_locomo_end_to_end(tmp_path, capsys) -> None:
    out = tmp_path / "results.json"
    rc = main(["bench", "locomo", "--data", str(FIXTURE), "--k", "5,10",
               "--out", str(out), "--no-progress", "--plot", str(tmp_path / "plots")])
    assert rc == 0
    res = json.loads(out.read_text())
    assert set(res) == {"dataset", "conversations", "questions", "skipped_evidence", "turn_text",
                        "methods", "gate", "best_baseline", "head_to_head", "first_query_ms",
                        "timing_s"}
    assert res["turn_text"] == "prefixed"
    assert res["conversations"] == ["tiny-a", "tiny-b"]
    assert set(res["questions"]) == {"1", "2", "3", "4", "5"}
    assert sum(res["questions"].values()) == 12
    assert res["skipped_evidence"] == 2
    assert list(res["methods"]) == list(DEFAULT_METHODS)
    for name, m in res["methods"].items():
        assert set(m) == {"recall@5", "recall@10", "context_tokens@5", "context_tokens@10",
                          "tokens_recall@1000", "tokens_recall@2000", "latency_ms"}, name
        for k in ("recall@5", "recall@10"):
            assert set(m[k]) == CATS
            assert all(0.0 <= v <= 1.0 for v in m[k].values())
        assert m["recall@5"]["1-4"] <= m["recall@10"]["1-4"] + 1e-12
        assert 0.0 <= m["latency_ms"]["p50"] <= m["latency_ms"]["p95"]
    # a memory of 17-18 turns: every method finds something
    assert res["methods"]["dense"]["recall@10"]["1-4"] > 0.3
    gate = res["gate"]
    assert gate["method"] == "synapse"
    assert set(gate) == {"method", "tau", "signal", "should_refuse", "adversarial_rejection",
                         "false_refusal", "sweep", "decision", "checks", "attribution_sweep",
                         "presence_sweep"}
    # issue 11: the whole gate as decided, and each evidence check's curve over the topic check
    assert sum(gate["checks"].values()) >= 0 and set(gate["checks"]) <= {"topic", "attribution",
                                                                          "presence"}
    margins = {row["margin"]: row for row in gate["attribution_sweep"]}
    assert margins[1.0]["adversarial_rejection"] <= margins[0.0]["adversarial_rejection"]
    assert margins[1.0]["false_refusal"] <= margins[0.0]["false_refusal"]
    taus = [row["tau"] for row in gate["sweep"]]
    assert {0.0, 0.05, 0.1, 0.12, 0.15, 0.2, 0.3} <= set(taus)
    for row in gate["sweep"]:
        assert set(row) == {"tau", "adversarial_rejection", "false_refusal"}
        assert 0.0 <= row["adversarial_rejection"] <= 1.0 and 0.0 <= row["false_refusal"] <= 1.0
    assert gate["sweep"][0]["false_refusal"] == 0.0  # tau 0 rejects nothing
    printed = capsys.readouterr().out
    assert "recall@10" in printed and "hybrid_rrf" in printed and "pooled 1-4" in printed
    assert (tmp_path / "plots" / "locomo_recall.png").stat().st_size > 0
    bb = res["best_baseline"]
    assert bb["method"] == "synapse" and set(bb) == {"method", "recall@5", "recall@10",
                                                     "tokens_recall@1000", "tokens_recall@2000"}
    for cat, row in bb["recall@10"].items():
        best = max(res["methods"][b]["recall@10"][cat] for b in ("dense", "bm25", "hybrid_rrf", "fusion"))
        assert row["baseline_value"] == best
        assert row["margin"] == pytest.approx(res["methods"]["synapse"]["recall@10"][cat] - best)
    h2h = res["head_to_head"]  # question by question at each k, category 5 aside
    assert set(h2h) == {"method", "questions", "recall@5", "recall@10"}
    assert h2h["method"] == "synapse"
    from synapse_integrations.bench.locomo import load_locomo
    counted = [q for q in load_locomo(FIXTURE).questions if q.evidence and q.category != 5]
    assert h2h["questions"] == len(counted) > 0
    assert set(h2h["recall@10"]["best"]["categories"]) <= {"1", "2", "3", "4"}
    for name, row in h2h["recall@10"]["baselines"].items():
        assert row["lost"] + row["won"] + row["tied"] == h2h["questions"], name
        # a loss is a question where the baseline's recall@10 is higher than synapse's
        assert row["lost"] == len(row["lost_ids"])
    assert "question by question" in printed and "best of each" in printed
    assert set(res["first_query_ms"]) == {"synapse-paper", "synapse"}  # one per ingested graph
    assert "best baseline" in printed and "first query after ingestion" in printed


def test_bare_turn_text_makes_the_same_engine_memory_as_prefixed() -> None:
    """``--turn-text bare`` stores the turns the adapters' way (the text, the speaker as a
    field); the engine reads the speaker's name with the text (core/documents.py), so its
    rankings are the prefixed ones. Without that reading they are not (the control)."""
    from synapse_integrations import HashingEmbedder, SynapseConfig
    from synapse_integrations.bench.runners import run_locomo
    from synapse_integrations.errors import InvalidInputError

    def ranks(turn_text, base=None):
        res = run_locomo(FIXTURE, methods=["synapse"], ks=(5,), embedder=HashingEmbedder(),
                         keep_records=True, turn_text=turn_text, base_config=base)
        assert res["turn_text"] == turn_text
        return [(r.question, r.ranked[:10]) for r in res["records"]["synapse"]]

    prefixed = ranks("prefixed")
    assert ranks("bare") == prefixed
    assert ranks("bare", SynapseConfig(speaker_in_document=False)) != prefixed
    with pytest.raises(InvalidInputError, match="turn_text"):
        run_locomo(FIXTURE, methods=["synapse"], turn_text="plain")

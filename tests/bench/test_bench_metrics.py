"""Benchmark metrics against values computed by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import pytest

from synapse_integrations.bench.metrics import (
    DEFAULT_GATE_TAUS,
    aggregate_recall,
    gate_rates,
    gate_sweep,
    percentiles,
    recall_at_k,
)
from synapse_integrations.errors import SynapseError

RANKED = ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"]


# --------------------------------------------------------------------------- recall@k


@pytest.mark.parametrize(
    ("evidence", "k", "expected"),
    [
        (["D1:2", "D1:5", "D9:9"], 1, 0 / 3),  # first 1 = {D1:1}: no hit
        (["D1:2", "D1:5", "D9:9"], 2, 1 / 3),  # first 2 = {D1:1, D1:2}: D1:2 -> 1/3
        (["D1:2", "D1:5", "D9:9"], 5, 2 / 3),  # all 5: D1:2, D1:5 -> 2/3 (D9:9 never ranked)
        (["D1:2", "D1:5", "D9:9"], 50, 2 / 3),  # k beyond the ranking changes nothing
        (["D1:1"], 1, 1.0),  # 1/1
        (["D1:2", "D1:2", "D1:4"], 2, 1 / 2),  # evidence deduplicated: {D1:2, D1:4}, 1 hit -> 1/2
    ],
)
def test_recall_at_k_hand_cases(evidence: list[str], k: int, expected: float) -> None:
    assert recall_at_k(RANKED, evidence, k) == pytest.approx(expected)


def test_recall_at_k_counts_a_repeated_ranked_id_once() -> None:
    # first 3 = D1:2, D1:2, D1:3; evidence {D1:2, D1:4} -> 1 hit of 2
    assert recall_at_k(["D1:2", "D1:2", "D1:3"], ["D1:2", "D1:4"], 3) == 0.5


def test_recall_at_k_empty_ranking_is_zero() -> None:
    assert recall_at_k([], ["D1:1"], 10) == 0.0


@pytest.mark.parametrize(
    ("evidence", "k"),
    [([], 10), (["D1:1"], 0), (["D1:1"], -1), (["D1:1"], 2.5), ("D1:1", 3)],
)
def test_recall_at_k_rejects_bad_input(evidence: object, k: object) -> None:
    with pytest.raises(ValueError) as info:
        recall_at_k(RANKED, evidence, k)  # type: ignore[arg-type]
    assert isinstance(info.value, SynapseError)


# --------------------------------------------------------------------------- aggregation


def test_aggregate_recall_per_category_and_pooled() -> None:
    records = [(1, 1.0), (1, 0.5), (2, 0.0), (4, 1.0), (5, 0.25)]
    out = aggregate_recall(records)
    assert set(out) == {"1", "2", "4", "5", "1-4"}  # 3 absent -> omitted
    assert out["1"] == pytest.approx(0.75)  # (1.0 + 0.5) / 2
    assert out["2"] == pytest.approx(0.0)
    assert out["4"] == pytest.approx(1.0)
    assert out["5"] == pytest.approx(0.25)
    # pooled over the 4 questions of 1-4: (1.0 + 0.5 + 0.0 + 1.0) / 4 = 0.625,
    # not the mean of the category means (0.75 + 0.0 + 1.0) / 3 = 0.5833...
    assert out["1-4"] == pytest.approx(0.625)


def test_aggregate_recall_weighted_by_count() -> None:
    # 3 questions of category 4 at 1.0 and 1 of category 1 at 0.0:
    # pooled (3 * 1.0 + 0.0) / 4 = 0.75; a mean of means would give 0.5
    out = aggregate_recall([(4, 1.0), (4, 1.0), (4, 1.0), (1, 0.0)])
    assert out == pytest.approx({"1": 0.0, "4": 1.0, "1-4": 0.75})


def test_aggregate_recall_adversarial_only_has_no_pooled_key() -> None:
    assert aggregate_recall([(5, 0.5), (5, 1.0)]) == {"5": 0.75}  # (0.5 + 1.0) / 2


def test_aggregate_recall_empty_and_generator_input() -> None:
    assert aggregate_recall([]) == {}
    out = aggregate_recall((c, r) for c, r in [(3, 0.2), (3, 0.4)])
    assert out == pytest.approx({"3": 0.3, "1-4": 0.3})  # (0.2 + 0.4) / 2


@pytest.mark.parametrize("record", [(0, 1.0), (6, 0.5), (True, 0.5), (1, 1.5), (1, float("nan"))])
def test_aggregate_recall_rejects_bad_records(record: tuple[object, float]) -> None:
    with pytest.raises(ValueError):
        aggregate_recall([record])  # type: ignore[list-item]


# --------------------------------------------------------------------------- percentiles


def test_percentiles_linear_hand_case() -> None:
    # sorted 10, 20, 30, 40, 50; position = p/100 * (n - 1)
    # p50: 0.50 * 4 = 2.0 -> 30; p95: 0.95 * 4 = 3.8 -> 40 + 0.8 * (50 - 40) = 48
    out = percentiles([50.0, 10.0, 40.0, 20.0, 30.0])
    assert list(out) == ["p50", "p95"]
    assert out == pytest.approx({"p50": 30.0, "p95": 48.0})
    assert all(type(v) is float for v in out.values())


def test_percentiles_custom_ps() -> None:
    # [0, 100]: p0 = 0, p100 = 100, p99.9 = 0.999 * 100 = 99.9, p25 = 25
    out = percentiles([0.0, 100.0], ps=(0, 25, 99.9, 100))
    assert out == pytest.approx({"p0": 0.0, "p25": 25.0, "p99.9": 99.9, "p100": 100.0})


def test_percentiles_even_count_and_single_value() -> None:
    # 1, 2, 3, 4: p50 at 0.5 * 3 = 1.5 -> 2 + 0.5 * (3 - 2) = 2.5; p95 at 2.85 -> 3.85
    assert percentiles([1, 2, 3, 4]) == pytest.approx({"p50": 2.5, "p95": 3.85})
    assert percentiles([7.0]) == {"p50": 7.0, "p95": 7.0}


@pytest.mark.parametrize(
    ("values", "ps"), [([], (50,)), ([1.0, float("nan")], (50,)), ([1.0], (101,))]
)
def test_percentiles_rejects_bad_input(values: list[float], ps: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        percentiles(values, ps)


# --------------------------------------------------------------------------- gate


def test_gate_rates_hand_case() -> None:
    records = [
        (5, True), (5, True), (5, False),  # 2 of 3 adversarial rejected -> 0.666...
        (1, True), (2, False), (3, False), (4, False),  # 1 of 4 answerable rejected -> 0.25
    ]  # fmt: skip
    out = gate_rates(records)
    assert set(out) == {"adversarial_rejection", "false_refusal"}
    assert out["adversarial_rejection"] == pytest.approx(2 / 3)
    assert out["false_refusal"] == pytest.approx(0.25)


def test_gate_rates_missing_kinds_are_zero() -> None:
    assert gate_rates([]) == {"adversarial_rejection": 0.0, "false_refusal": 0.0}
    # only answerable questions: 2 of 2 rejected -> 1.0; no category 5 -> 0.0
    assert gate_rates([(1, True), (4, True)]) == {
        "adversarial_rejection": 0.0,
        "false_refusal": 1.0,
    }
    # only adversarial: 1 of 2 rejected -> 0.5
    assert gate_rates([(5, True), (5, False)]) == {
        "adversarial_rejection": 0.5,
        "false_refusal": 0.0,
    }


def test_gate_rates_rejects_unknown_category() -> None:
    with pytest.raises(ValueError):
        gate_rates([(7, True)])


def test_gate_sweep_hand_case() -> None:
    # rejected iff confidence < tau (strict)
    records = [(5, 0.05), (5, 0.2), (1, 0.1), (4, 0.5)]
    out = gate_sweep(iter(records), taus=(0.0, 0.1, 0.12, 0.3, 1.0))
    assert [row["tau"] for row in out] == [0.0, 0.1, 0.12, 0.3, 1.0]
    expected = [
        (0.0, 0.0),  # tau 0: nothing below 0
        (0.5, 0.0),  # tau 0.1: 0.05 rejected (1/2 adversarial); 0.1 is not < 0.1
        (0.5, 0.5),  # tau 0.12: 0.05 (1/2 adversarial) and 0.1 (1/2 answerable)
        (1.0, 0.5),  # tau 0.3: 0.05, 0.2 (2/2) and 0.1 (1/2); 0.5 kept
        (1.0, 1.0),  # tau 1.0: everything rejected
    ]
    for row, (adv, fr) in zip(out, expected, strict=True):
        assert set(row) == {"tau", "adversarial_rejection", "false_refusal"}
        assert row["adversarial_rejection"] == pytest.approx(adv)
        assert row["false_refusal"] == pytest.approx(fr)


def test_gate_sweep_matches_gate_rates() -> None:
    records = [(5, 0.11), (5, 0.13), (2, 0.02), (3, 0.5), (4, 0.12)]
    for row in gate_sweep(records, DEFAULT_GATE_TAUS):
        tau = row["tau"]
        assert row == {"tau": tau, **gate_rates((c, conf < tau) for c, conf in records)}


def test_default_gate_taus() -> None:
    assert DEFAULT_GATE_TAUS == (0.0, 0.05, 0.1, 0.12, 0.15, 0.2, 0.3)
    assert 0.12 in DEFAULT_GATE_TAUS  # the paper's tau_gate
    assert len(gate_sweep([(5, 0.0)], DEFAULT_GATE_TAUS)) == len(DEFAULT_GATE_TAUS)


def test_gate_sweep_rejects_nan_confidence() -> None:
    with pytest.raises(ValueError):
        gate_sweep([(5, float("nan"))], (0.1,))


def test_newest_above_older_by_hand() -> None:
    from synapse_integrations.bench.metrics import newest_above_older

    assert newest_above_older(["n", "x", "o1", "o2"], ["o1", "o2", "n"], "n")
    assert not newest_above_older(["o1", "n", "o2"], ["o1", "o2", "n"], "n")
    assert newest_above_older(["n"], ["o1", "n"], "n")  # an unranked older turn is below
    assert not newest_above_older(["o1"], ["o1", "n"], "n")  # an unranked newest never is
    with pytest.raises(SynapseError, match="not an evidence turn"):
        newest_above_older(["n"], ["o1"], "n")


# --------------------------------------------------------------------------- head to head


def test_head_to_head_by_hand() -> None:
    from synapse_integrations.bench.metrics import head_to_head

    pairs = [(0.5, 1.0),   # less evidence than the other: lost, but something found
             (0.0, 1 / 3),  # nothing where the other found a third: lost and missed
             (0.0, 0.0),   # both nothing: tied, not missed
             (1.0, 0.5),   # won
             (2 / 3, 2 / 3)]  # tied
    assert head_to_head(pairs) == {"n": 5, "lost": 2, "won": 1, "tied": 2, "missed": 1}
    assert head_to_head([]) == {"n": 0, "lost": 0, "won": 0, "tied": 0, "missed": 0}
    # the same recall reached by different float sums is a tie, not a loss
    assert head_to_head([(0.1 + 0.2, 0.3)])["tied"] == 1


@pytest.mark.parametrize("pair", [(1.5, 0.0), (0.0, -0.1), (float("nan"), 0.5)])
def test_head_to_head_rejects_values_outside_0_1(pair: tuple[float, float]) -> None:
    from synapse_integrations.bench.metrics import head_to_head

    with pytest.raises(SynapseError, match=r"\[0, 1\]"):
        head_to_head([pair])


def test_head_to_head_section_counts_each_baseline_and_the_best_of_each_question() -> None:
    from synapse_integrations.bench.compare import head_to_head_section
    from synapse_integrations.bench.retrieval import QuestionRecord

    def rec(qid: str, cat: int, evidence: tuple[str, ...], ranked: list[str]) -> QuestionRecord:
        return QuestionRecord("c", qid, cat, evidence, ranked, 1.0, qid=qid)

    ev = {"q1": ("a",), "q2": ("b", "c"), "q3": ("d",), "q5": ("e",)}
    ranked = {  # k = 2
        "synapse": {"q1": ["a", "x"], "q2": ["b", "x"], "q3": ["x", "y"], "q5": ["x", "y"]},
        "bm25": {"q1": ["x", "y"], "q2": ["b", "c"], "q3": ["x", "y"], "q5": ["e", "x"]},
        "dense": {"q1": ["a", "x"], "q2": ["x", "y"], "q3": ["y", "d"], "q5": ["x", "y"]},
    }
    cats = {"q1": 4, "q2": 1, "q3": 4, "q5": 5}
    records = {m: [rec(q, cats[q], ev[q], r[q]) for q in ev] for m, r in ranked.items()}
    out = head_to_head_section(records, "synapse", (1, 2), lambda r: r.category != 5)
    assert out is not None and out["method"] == "synapse"
    assert set(out) == {"method", "questions", "recall@1", "recall@2"}
    assert out["questions"] == 3  # q5 (category 5) is not counted
    # k = 1: q1 1 vs 0 won, q2 1/2 vs 1/2 tied, q3 0 vs 0 tied
    at1 = out["recall@1"]["baselines"]["bm25"]
    assert (at1["lost"], at1["won"], at1["tied"], at1["missed"]) == (0, 1, 2, 0)
    out = out["recall@2"]
    bm25 = out["baselines"]["bm25"]
    # q1: 1 vs 0 won; q2: 1/2 vs 1 lost (something found); q3: 0 vs 0 tied
    assert {k: bm25[k] for k in ("n", "lost", "won", "tied", "missed")} == \
        {"n": 3, "lost": 1, "won": 1, "tied": 1, "missed": 0}
    assert bm25["lost_ids"] == ["q2"]
    dense = out["baselines"]["dense"]
    # q1: 1 vs 1 tied; q2: 1/2 vs 0 won; q3: 0 vs 1 lost and missed
    assert (dense["lost"], dense["won"], dense["tied"], dense["missed"]) == (1, 1, 1, 1)
    assert dense["lost_ids"] == ["q3"]
    assert dense["categories"]["4"] == {"n": 2, "lost": 1, "won": 0, "tied": 1, "missed": 1}
    # the best baseline of each question: q1 max(0, 1) = 1 tied, q2 max(1, 0) = 1 lost,
    # q3 max(0, 1) = 1 lost and missed
    best = out["best"]
    assert (best["lost"], best["won"], best["tied"], best["missed"]) == (2, 0, 1, 1)
    assert best["lost_ids"] == ["q2", "q3"]
    assert head_to_head_section({"synapse": records["synapse"]}, "synapse", (2,),
                                lambda r: True) is None  # no baseline ran
    assert head_to_head_section(records, None, (2,), lambda r: True) is None


def test_a_pooled_mean_sums_its_keys_in_the_order_given() -> None:
    # float addition is not associative: summed in a set's order (which varies from one
    # process to the next with string hashing) a pooled figure changed in its last digit
    from synapse_integrations.bench.metrics import mean_by_group

    records = [("a", 0.1), ("b", 0.2), ("c", 0.3)]
    assert mean_by_group(records, {"p": ["a", "b", "c"]})["p"] == (0.1 + 0.2 + 0.3) / 3
    assert mean_by_group(records, {"p": ["c", "b", "a"]})["p"] == (0.3 + 0.2 + 0.1) / 3
    assert (0.1 + 0.2 + 0.3) != (0.3 + 0.2 + 0.1)

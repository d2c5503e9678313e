"""Cold start (issue 47): fresh processes timed from their start to their first answer;
the child's output parsed and summarized; wired into ``synapse bench perf``. No timed
assertions here: the speed figures live in the benchmark."""

from __future__ import annotations

import json
import subprocess

import pytest

from synapse_integrations.bench import cold_start
from synapse_integrations.bench.cold_start import (
    PHASES,
    format_cold_start,
    measure_cold_start,
    parse_child_output,
    summarize_rounds,
)
from synapse_integrations.bench.perf import format_perf_table, run_perf
from synapse_integrations.cli import build_parser
from synapse_integrations.errors import InvalidInputError

CHILD_LINE = {"import_s": 0.8, "open_s": 0.25, "first_add_s": 5.0, "first_retrieve_s": 0.5,
              "t_answer": 1007.0, "items": 1}


def test_the_childs_last_json_line_is_parsed_and_the_interpreter_is_what_is_left() -> None:
    stdout = "Loading weights: 100%\n{\"noise\": 1}\n" + json.dumps(CHILD_LINE) + "\n"
    r = parse_child_output(stdout, started=1000.0)
    assert r["first_answer_s"] == 7.0
    assert r["interpreter_s"] == pytest.approx(0.45)
    assert r["import_s"] == 0.8 and r["first_add_s"] == 5.0 and r["items"] == 1
    assert set(PHASES) <= set(r)


def test_an_answer_is_never_reported_before_its_own_phases() -> None:
    # a clock that does not compare across processes must not give a negative remainder
    r = parse_child_output(json.dumps({**CHILD_LINE, "t_answer": 3.0}), started=1000.0)
    assert r["first_answer_s"] == pytest.approx(6.55) and r["interpreter_s"] == 0.0


def test_a_child_without_a_result_line_is_an_error() -> None:
    with pytest.raises(ValueError, match="no JSON line"):
        parse_child_output("Traceback ...\n", started=0.0)


def test_the_summary_is_the_median_of_each_phase_with_every_round() -> None:
    rounds = [parse_child_output(json.dumps({**CHILD_LINE, "first_add_s": a}), started=1000.0)
              for a in (5.0, 3.0, 4.0)]
    s = summarize_rounds(rounds)
    assert s["rounds"] == 3 and len(s["each"]) == 3
    assert s["p50"]["first_add_s"] == 4.0 and list(s["p50"]) == list(PHASES)
    with pytest.raises(InvalidInputError):
        summarize_rounds([])


def test_the_table_shows_each_phases_p50() -> None:
    s = summarize_rounds([parse_child_output(json.dumps(CHILD_LINE), started=1000.0)])
    text = format_cold_start(s)
    assert text.count("\n") == 1
    assert "first answer 7.00 s" in text and "first add_turn 5.00 s" in text
    assert "import 0.80 s" in text and "open 0.25 s" in text
    table = format_perf_table({"runs": [], "cold_start": s})
    assert text in table


def test_a_failing_child_names_its_stderr(monkeypatch) -> None:
    def failing(*args, **kwargs):
        return subprocess.CompletedProcess(args[0], 1, stdout="", stderr="ImportError: no torch")

    monkeypatch.setattr(cold_start.subprocess, "run", failing)
    with pytest.raises(RuntimeError, match="(?s)exit 1.*ImportError: no torch"):
        measure_cold_start(1)


def test_a_hanging_child_is_stopped(monkeypatch) -> None:
    def hanging(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"], stderr=b"Loading weights")

    monkeypatch.setattr(cold_start.subprocess, "run", hanging)
    with pytest.raises(RuntimeError, match="(?s)ran over 120 s.*Loading weights"):
        measure_cold_start(1)


@pytest.mark.parametrize("kwargs", [{"rounds": 0}, {"rounds": True}, {"preload": "yes"}])
def test_bad_arguments_are_refused(kwargs) -> None:
    with pytest.raises(InvalidInputError):
        measure_cold_start(**kwargs)


def test_run_perf_refuses_negative_rounds_and_the_cli_takes_the_option() -> None:
    with pytest.raises(InvalidInputError, match="cold_start_rounds"):
        run_perf([10], cold_start_rounds=-1)
    args = build_parser().parse_args(["bench", "perf", "--out", "x.json",
                                      "--cold-start-rounds", "2"])
    assert args.cold_start_rounds == 2
    assert build_parser().parse_args(["bench", "perf", "--out", "x.json"]).cold_start_rounds == 3


@pytest.mark.model
def test_a_fresh_process_reports_every_phase_in_order() -> None:
    cs = measure_cold_start(1)
    assert cs["rounds"] == 1 and cs["preload"] == "default" and len(cs["each"]) == 1
    r = cs["each"][0]
    assert r["items"] >= 1  # the first retrieve found the turn just added
    assert list(cs["p50"]) == list(PHASES)
    for phase in PHASES:
        assert r[phase] >= 0.0
        assert r["first_answer_s"] >= r[phase]
    for phase in ("import_s", "open_s", "first_add_s", "first_retrieve_s"):
        assert r[phase] > 0.0
    assert r["first_answer_s"] >= sum(r[p] for p in PHASES if p != "first_answer_s") - 1e-3
    json.dumps(cs)  # JSON-ready

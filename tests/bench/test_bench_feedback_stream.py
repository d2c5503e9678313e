"""The feedback-stream evaluation (bench/feedback_stream.py) on the tiny LoCoMo fixture:
its shape, the control equals a fresh memory, and feedback really changes weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from synapse_integrations import HashingEmbedder
from synapse_integrations.bench.feedback_stream import format_table, main, run_feedback_stream

FIXTURE = Path(__file__).parents[1] / "fixtures" / "locomo_tiny.json"


def test_feedback_stream_runs_and_reports_the_curve():
    res = run_feedback_stream(FIXTURE, methods=["evermind", "synapse"], buckets=2,
                              used="evidence", embedder=HashingEmbedder())
    assert set(res["methods"]) == {"evermind", "synapse"}
    for entry in res["methods"].values():
        for phase in ("static", "feedback", "replay"):
            curve = entry[phase]["recall@10"]
            assert len(curve["buckets"]) == 2 and sum(curve["n"]) > 0
            assert all(b is None or 0.0 <= b <= 1.0 for b in curve["buckets"])
    assert sum(res["methods"]["synapse"]["edges"].values()) > 0  # feedback changed weights
    assert "static  with-feedback  delta" in format_table(res)


def test_feedback_stream_rejects_a_bad_setting():
    with pytest.raises(ValueError, match="used must be"):
        run_feedback_stream(FIXTURE, methods=["evermind"], used="everything",
                            embedder=HashingEmbedder())


def test_feedback_stream_cli_writes_json(tmp_path, capsys):
    import json

    out = tmp_path / "fb.json"
    assert main(["--data", str(FIXTURE), "--methods", "evermind", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["methods"]["evermind"]["static"]["recall@5"]["n"]
    assert "evermind" in capsys.readouterr().out

"""`synapse demo` end to end (the README's first command), with the real model."""

from __future__ import annotations

import re

import pytest

from synapse_integrations.cli import _load_demo, main

pytestmark = pytest.mark.model


def test_demo_prints_every_question_and_finds_the_bridge_with_entity_feedback(tmp_path, capsys):
    assert main(["demo", "--path", str(tmp_path / "mem"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    demo = _load_demo()
    assert f"ingested {sum(len(s['turns']) for s in demo['sessions'])} turns" in out
    blocks = out.split("=" * 78)[1:]
    assert len(blocks) == len(demo["questions"])
    for block, q in zip(blocks, demo["questions"]):
        assert f"Q: {q['question']}" in block
        assert re.search(r"gate: confidence \d\.\d{3} vs tau 0\.25 -> (accepted|REJECTED)", block)
    bridge = blocks[[q["kind"] for q in demo["questions"]].index("bridge")]
    single, _, feedback = bridge.partition("same question with entity_feedback=1")
    assert feedback, "the bridge question is asked a second time with entity feedback"
    # the single pass misses the answer; the second pass finds it through the Dana concept
    items = [x for x in single.splitlines() if re.match(r"\s+\d+\. \[", x)]
    assert len(items) == 5 and not any("architecture program" in x for x in items)
    line = next(x for x in feedback.splitlines()
                if re.match(r"\s+\d+\. \[", x) and "architecture program" in x)
    assert "via 'Sam: Ha, goggle tan. I w' -> 'Dana'" in line


def test_demo_refuses_a_memory_that_already_holds_turns(tmp_path, capsys):
    path = str(tmp_path / "mem")
    assert main(["demo", "--path", path, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["demo", "--path", path, "--no-progress"]) == 2
    assert "already holds" in capsys.readouterr().out

"""``synapse bench small``: the packaged small memories, the file contract, the CLI."""

from __future__ import annotations

import json

import pytest

from synapse_integrations.bench.small import load_small, run_small, score_small
from synapse_integrations.bench.retrieval import QuestionRecord
from synapse_integrations.cli import main
from synapse_integrations.errors import InvalidInputError


def test_the_packaged_file_holds_both_splits_and_never_said_questions():
    data = load_small()
    splits = {m["split"] for m in data["memories"]}
    assert splits == {"tuned", "held-out"}
    qs = [q for m in data["memories"] for q in m["questions"]]
    assert sum(q["answer_turn"] is None for q in qs) == 21 and len(qs) == 67
    assert all(6 <= len(m["turns"]) <= 8 for m in data["memories"])


def test_scores_count_first_top3_refused_and_rejected_per_split():
    def rec(split, ranked, evidence, rejected):
        return QuestionRecord("m", "q", "x", evidence, ranked, 1.0, extra={"split": split},
                              rejected=rejected)
    recs = [rec("tuned", ["a", "b"], ("a",), False), rec("tuned", ["b", "c", "a"], ("a",), True),
            rec("held-out", ["c"], ("a",), False), rec("held-out", ["c"], (), True),
            rec("tuned", [], (), False)]
    out = score_small(recs, engine=True)
    assert out["tuned"] == {"answerable": 2, "never_said": 1, "top1": 1, "top3": 2,
                            "refused": 1, "rejected": 0}
    assert out["held-out"] == {"answerable": 1, "never_said": 1, "top1": 0, "top3": 0,
                               "refused": 0, "rejected": 1}
    assert out["all"]["answerable"] == 3 and out["all"]["rejected"] == 1
    assert "refused" not in score_small(recs, engine=False)["all"]


@pytest.mark.parametrize("bad, what", [
    ({"format": "other"}, "format"),
    ({"format": "synapse-small-memories", "version": 1, "memories": []}, "non-empty"),
    ({"format": "synapse-small-memories", "version": 1, "memories": [
        {"id": "m", "split": "tuned", "turns": [{"speaker": "u", "text": "hi"}],
         "questions": [{"question": "q?", "answer_turn": 3}]}]}, "answer_turn"),
    ({"format": "synapse-small-memories", "version": 1, "memories": [
        {"id": "m", "split": "dev", "turns": [{"speaker": "u", "text": "hi"}],
         "questions": [{"question": "q?", "answer_turn": 0}]}]}, "split"),
])
def test_a_malformed_file_is_refused_naming_the_problem(tmp_path, bad, what):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(InvalidInputError, match=what):
        load_small(path)


def test_run_small_and_the_cli(tmp_path, embedder, capsys):
    data = {"format": "synapse-small-memories", "version": 1, "memories": [
        {"id": "pets", "split": "tuned", "turns": [
            {"speaker": "user", "text": "We adopted a beagle puppy called Biscuit."},
            {"speaker": "user", "text": "I started a new job at Acme as a nurse."},
            {"speaker": "assistant", "text": "Congratulations on the new job!"}],
         "questions": [{"question": "What is my dog's name?", "answer_turn": 0},
                       {"question": "What is my cat's name?", "answer_turn": None}]},
        {"id": "trip", "split": "held-out", "turns": [
            {"speaker": "Ana", "text": "I'm saving up for a trip to Iceland."},
            {"speaker": "Ben", "text": "I sprained my ankle playing tennis."}],
         "questions": [{"question": "Where does Ana want to travel?", "answer_turn": 0}]}]}
    path = tmp_path / "small.json"
    path.write_text(json.dumps(data))
    res = run_small(data=path, methods=["dense", "synapse"], embedder=embedder)
    assert set(res["methods"]) == {"dense", "synapse"}
    assert res["methods"]["synapse"]["all"]["answerable"] == 2
    assert res["methods"]["synapse"]["tuned"]["never_said"] == 1
    assert res["methods"]["dense"]["tuned"]["top1"] == 1  # the beagle turn, by its vector
    out = tmp_path / "out.json"
    assert main(["bench", "small", "--data", str(path), "--methods", "dense,synapse",
                 "--out", str(out), "--no-progress"]) == 0
    assert json.loads(out.read_text())["methods"]["synapse"]["all"]["answerable"] == 2
    assert "held-out" in capsys.readouterr().out


def test_turns_are_a_chat_apart_so_an_answer_is_a_reply(tmp_path, embedder, monkeypatch):
    """The bench stores turns a minute apart, as the adapters stamp them when they arrive:
    the user's "Scandinavian, lots of light wood." then replies to the assistant's question
    (core/conversation.py) and ranks above it. An hour apart, it was no reply."""
    from synapse_integrations.bench import small
    from synapse_integrations.core.signals.replies import REPLY_WINDOW

    assert small.TURN_GAP_S < REPLY_WINDOW
    data = {"format": "synapse-small-memories", "version": 1, "memories": [
        {"id": "kitchen", "split": "held-out", "turns": [
            {"speaker": "user", "text": "We're renovating the kitchen; the contractor starts Monday."},
            {"speaker": "assistant", "text": "Exciting! What style are you going for?"},
            {"speaker": "user", "text": "Scandinavian, lots of light wood."},
            {"speaker": "user", "text": "My husband Leo works night shifts at the airport."}],
         "questions": [{"question": "What design style did I choose?", "answer_turn": 2}]}]}
    path = tmp_path / "small.json"
    path.write_text(json.dumps(data))

    def first():
        res = run_small(data=path, methods=["synapse"], embedder=embedder, keep_records=True)
        return res["records"]["synapse"][0].ranked[0]

    assert first() == "kitchen:2"
    monkeypatch.setattr(small, "TURN_GAP_S", 3600)
    assert first() == "kitchen:1"

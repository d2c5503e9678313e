"""The as_of probe set's scoring (bench/as_of.py) on a memory built by hand."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from synapse_integrations import HashingEmbedder
from synapse_integrations.bench.as_of import _score, format_as_of, longmemeval_updates, run_as_of
from synapse_integrations.bench.retrieval import BenchMemory, BenchQuestion

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _memory() -> BenchMemory:
    turns = [{"text": "Caroline: My internet provider is Comlink, it is slow.", "speaker": "Caroline",
              "timestamp": T0, "id": "old"}]
    turns += [{"text": f"Melanie: filler number {i} about painting", "speaker": "Melanie",
               "timestamp": T0 + timedelta(days=i + 1), "id": f"f{i}"} for i in range(8)]
    turns += [{"text": "Caroline: I switched internet providers to FiberNest.", "speaker": "Caroline",
               "timestamp": T0 + timedelta(days=30), "id": "new"}]
    q = BenchQuestion("u1", "Which internet provider does Caroline have now?", "update", ("new",),
                      extra={"older": "old", "newer": "new"})
    return BenchMemory("m", tuple(turns), (q,))


def test_score_reads_ranks_of_the_right_and_the_wrong_version():
    assert _score(["a", "right", "wrong"], "right", "wrong") == \
        {"right_first": True, "right_top1": False, "wrong_absent": False}
    assert _score(["right"], "right", "wrong") == \
        {"right_first": True, "right_top1": True, "wrong_absent": True}
    assert _score(["wrong", "right"], "right", "wrong")["right_first"] is False
    assert _score(["x"], "right", "wrong")["right_first"] is False


def test_before_and_after_the_change_and_linking_hides_the_old_version():
    res = run_as_of([_memory()], HashingEmbedder(), variants=("plain", "linked"))
    plain, linked = res["plain"], res["linked"]
    q = plain["questions"][0]
    assert q["before"] == {"right_first": True, "right_top1": True, "wrong_absent": True}
    assert q["after"]["right_first"] is True
    assert q["current_only"]["wrong_absent"] is False  # nothing linked them: nothing hidden
    assert linked["current_only"]["wrong_absent"] == 1.0
    assert plain["pooled_right_first"] == 1.0
    assert "linked" in format_as_of(res)


def test_longmemeval_updates_pair_the_earliest_and_latest_evidence_said_on_different_days(tmp_path):
    """From LongMemEval's own format: the question whose marked evidence turns were said on
    different days becomes an update question; one about the earlier value, one whose
    evidence was said on one day, and one without marked turns are left out."""
    fixture = Path(__file__).parents[1] / "fixtures" / "longmemeval_tiny.json"
    update = next(r for r in json.loads(fixture.read_text()) if r["question_id"] == "q_update")
    update["haystack_sessions"][0][0]["has_answer"] = True   # "I live in Boston ..."
    update["haystack_sessions"][2][0]["has_answer"] = True   # "I moved to Denver ..."
    past = copy.deepcopy(update) | {"question_id": "q_past", "question": "Which city did I live in before?"}
    same_day = copy.deepcopy(update) | {"question_id": "q_day"}
    same_day["haystack_dates"] = ["2023/03/01 (Wed) 08:00"] * 3
    unmarked = json.loads(fixture.read_text())[2] | {"question_id": "q_unmarked"}
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([update, past, same_day, unmarked]))
    memories = longmemeval_updates(path)
    assert [m.name for m in memories] == ["q_update"]
    (q,) = memories[0].questions
    turns = {t["id"]: t["text"] for t in memories[0].turns}
    assert turns[q.extra["older"]].endswith("I live in Boston and love the harbor walks.")
    assert turns[q.extra["newer"]].endswith("I moved to Denver last month for a new job.")
    res = run_as_of(memories, HashingEmbedder(), variants=("linked",))
    assert res["linked"]["n"] == 1 and res["linked"]["current_only"]["wrong_absent"] == 1.0

"""The as_of probe set's scoring (bench/as_of.py) on a memory built by hand."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from synapse_integrations import HashingEmbedder
from synapse_integrations.bench.as_of import _score, format_as_of, run_as_of
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

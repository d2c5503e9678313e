"""``synapse bench agent`` (issue 47): a conversation replayed as an agent lives it.

The hand-computed checks use a toy retrieval model that ranks episodes newest first (and
a configuration that leaves it alone: no similarity, lexical, PageRank, feedback or reply
terms, speaker, role and date weights neutral), so every ranking is the memory's turns in reverse order of arrival and each
figure can be worked out on paper from the order the replay writes in.
"""

from __future__ import annotations

import gzip
import json

import pytest
from _toy_models import Recency

from synapse_integrations import HashingEmbedder, SynapseConfig
from synapse_integrations.bench.agent import ACK, ask_points, load_agent_data, run_agent
from synapse_integrations.bench.agent_metrics import hub_share, mean_by_group, \
    question_above_evidence, stored_in_top
from synapse_integrations.bench.retrieval import BenchMemory, BenchQuestion
from synapse_integrations.cli import main
from synapse_integrations.core import models
from synapse_integrations.errors import InvalidInputError


NEWEST = SynapseConfig().replace(
    model="newest", weight_similarity=0.0, weight_lexical=0.0, weight_pagerank=0.0,
    weight_activation=1.0, weight_distinct=0.0, entity_feedback=0, reply_weight=0.0,
    follow_up_weight=0.0, first_person_weight=1.0, named_speaker_weight=1.0, date_weight=1.0,
    question_weight=1.0, score_all_nodes=True)


@pytest.fixture
def newest():
    models.register("newest", Recency)
    yield NEWEST
    models.unregister("newest")


def _turn(dia_id: str, speaker: str, text: str) -> dict:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


TINY = [{"sample_id": "tiny", "conversation": {
    "speaker_a": "Ana", "speaker_b": "Ben",
    "session_1_date_time": "1:00 pm on 1 May, 2023",
    "session_1": [_turn("D1:1", "Ana", "My sister Lena moved to Lisbon last year."),
                  _turn("D1:2", "Ben", "Lisbon is lovely, the trams are great."),
                  _turn("D1:3", "Ana", "She loves the old town.")],
    "session_2_date_time": "1:00 pm on 8 May, 2023",
    "session_2": [_turn("D2:1", "Ben", "I adopted a beagle puppy named Biscuit."),
                  _turn("D2:2", "Ana", "Biscuit is a cute name.")],
    "session_3_date_time": "1:00 pm on 15 May, 2023",
    "session_3": [_turn("D3:1", "Ana", "I started a pottery class on Tuesdays."),
                  _turn("D3:2", "Ben", "Pottery sounds relaxing.")]},
    "qa": [{"question": "Where does the sister live now?", "answer": "Lisbon",
            "evidence": ["D1:1"], "category": 4},
           {"question": "What is the puppy called?", "answer": "Biscuit",
            "evidence": ["D2:1"], "category": 4},
           {"question": "What breed is the puppy?", "answer": "beagle",
            "evidence": ["D2:1"], "category": 4},
           {"question": "Which class started and which city did the sister move to?",
            "answer": "pottery; Lisbon", "evidence": ["D3:1", "D1:1"], "category": 1}]}]


def ask(i: int) -> str:
    return f"msg-ask-tiny/{i}"


def ack(i: int) -> str:
    return f"msg-ack-tiny/{i}"


# what the replay writes, in order: D1:1 | q0 | D1:2 D1:3 D2:1 | q1 | q2 | D2:2 D3:1 | q3 | D3:2
ASKED = {  # newest first: the memory at each question's ask time
    0: ["D1:1"],
    1: ["D2:1", "D1:3", "D1:2", ack(0), ask(0), "D1:1"],
    2: [ack(1), ask(1), "D2:1", "D1:3", "D1:2", ack(0), ask(0), "D1:1"],
    3: ["D3:1", "D2:2", ack(2), ask(2), ack(1), ask(1), "D2:1", "D1:3", "D1:2", ack(0),
        ask(0), "D1:1"],
}
END = ["D3:2", ack(3), ask(3), "D3:1", "D2:2", ack(2), ask(2), ack(1), ask(1), "D2:1", "D1:3",
       "D1:2", ack(0), ask(0), "D1:1"]


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny_locomo.json"
    path.write_text(json.dumps(TINY))
    return path


# ------------------------------------------------------------------------------ kernels
def test_the_kernels_by_hand() -> None:
    stored = {"q", "a"}
    ranked = ["x", "q", "e1", "a", "e2"]
    assert stored_in_top(ranked, stored, 1) == 0
    assert stored_in_top(ranked, stored, 4) == 2
    assert stored_in_top(ranked, stored, 100) == 2
    assert question_above_evidence(ranked, ["e1", "e2"], stored, 3) is True
    assert question_above_evidence(ranked, ["e1"], stored, 2) is None  # e1 is rank 3
    assert question_above_evidence(["e1", "q"], ["e1"], stored, 2) is False
    assert question_above_evidence(["q", "x"], ["e1"], stored, 2) is None
    assert question_above_evidence([], ["e1"], stored, 5) is None
    # the same turn in 2 of 3 top-2 lists; a turn repeated within one list counts once
    assert hub_share([["t", "u"], ["u", "t"], ["v", "v"]], n=2) == (2 / 3, "t")
    assert hub_share([["v", "v"], ["w"]], n=5) == (0.5, "v")
    assert mean_by_group([("1", 3), ("1", 1), ("4", 2)], {"1-4": ["1", "4"]}) == \
        {"1": 2.0, "4": 2.0, "1-4": 2.0}
    with pytest.raises(InvalidInputError, match="k must be a positive integer"):
        stored_in_top(ranked, stored, 0)


def test_ask_points_follow_the_last_evidence_turn() -> None:
    turns = tuple({"id": i} for i in ("a", "b", "c", "d"))
    memory = BenchMemory("m", turns, (
        BenchQuestion("1", "?", "4", ("c", "a")),   # last evidence c: 3 turns in memory
        BenchQuestion("2", "?", "4", ("a",)),
        BenchQuestion("3", "?", "5", ()),           # no evidence: after the last turn
        BenchQuestion("4", "?", "4", ("zz", "b")),  # an unknown id does not count
    ))
    assert ask_points(memory) == [3, 1, 4, 2]


def test_the_format_is_told_from_the_file(tmp_path, tiny) -> None:
    ds = load_agent_data(tiny)
    assert ds.format == "locomo" and [m.name for m in ds.memories] == ["tiny"]
    assert ds.memories[0].questions[3].evidence == ("D3:1", "D1:1")
    assert ask_points(ds.memories[0]) == [1, 4, 4, 6]
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"id": 1}]))
    with pytest.raises(InvalidInputError, match="neither LoCoMo"):
        load_agent_data(other)
    with pytest.raises(InvalidInputError, match="limit"):
        load_agent_data(tiny, limit=0)


# ------------------------------------------------------------------------------ the replay
def test_questions_are_asked_as_their_evidence_arrives_and_stored(tiny, newest) -> None:
    res = run_agent(tiny, methods=["synapse"], ks=(3, 5, 30), embedder=HashingEmbedder(),
                    base_config=newest, keep_records=True)
    recs = res["records"]["synapse"]
    at_ask = {r.qid: r for r in recs if r.phase == "ask"}
    at_end = {r.qid: r for r in recs if r.phase == "end"}
    # asked right after the last evidence turn: 1, 4, 4 and 6 transcript turns in memory
    assert {q: r.turns_in_memory for q, r in at_ask.items()} == \
        {"tiny/0": 1, "tiny/1": 4, "tiny/2": 4, "tiny/3": 6}
    assert all(r.turns_in_memory == 7 for r in at_end.values())
    for i, ranked in ASKED.items():
        assert at_ask[f"tiny/{i}"].ranked == ranked, i
    for r in at_end.values():
        assert r.ranked == END
    # every question and its acknowledgement is in memory, as the middleware records them
    assert res["stored"]["tiny"] == {ask(i) for i in range(4)} | {ack(i) for i in range(4)}
    assert res["stored_per_question"] == ["user: <the question>", f"assistant: {ACK}"]
    assert res["ingest"]["turns"] == 15 and res["ingest"]["stored_turns"] == 8

    ask_, end = res["methods"]["synapse"]["ask"], res["methods"]["synapse"]["end"]
    # recall: q3's D1:1 is last at ask time; at the end 8 stored turns push evidence down
    assert ask_["recall@3"] == {"1": 0.5, "2": None, "3": None, "4": 1.0, "5": None,
                                "1-4": 0.875}
    assert ask_["recall@30"]["1-4"] == 1.0
    assert end["recall@3"]["1-4"] == 0.0
    assert end["recall@5"] == {"1": 0.5, "2": None, "3": None, "4": 0.0, "5": None,
                               "1-4": 0.125}
    # question above evidence: q2 (ack1 at 1, D2:1 at 3); at the end, q3 alone reaches its
    # evidence in the top 5 (D3:1 at 4, ack3 at 2)
    assert ask_["question_above_evidence@3"] == {"1": 0.0, "2": None, "3": None,
                                                 "4": 1 / 3, "5": None, "1-4": 0.25}
    assert end["question_above_evidence@5"] == {"1": 1.0, "2": None, "3": None, "4": None,
                                                "5": None, "1-4": 1.0}
    assert end["question_above_evidence@3"]["1-4"] is None  # no evidence in any top 3
    # stored turns per top k: top 3 at ask 0, 0, 2, 1; top 5 0, 2, 2, 3; the end 2 and 8
    assert ask_["stored_per_k@3"]["4"] == pytest.approx(2 / 3)
    assert ask_["stored_per_k@3"]["1-4"] == 0.75
    assert ask_["stored_per_k@5"] == {"1": 3.0, "2": None, "3": None, "4": pytest.approx(4 / 3),
                                      "5": None, "1-4": 1.75}
    assert end["stored_per_k@5"]["1-4"] == 2.0 and end["stored_per_k@30"]["1-4"] == 8.0
    # hub share: at ask D2:1 (q1, q2) is the first of four turns in 2 of 4 top-5 lists;
    # at the end every question has the same top 5
    assert ask_["hub_share@5"] == {"1": 1.0, "2": None, "3": None, "4": pytest.approx(2 / 3),
                                   "5": None, "1-4": 0.5}
    assert end["hub_share@5"]["1-4"] == 1.0
    hub = res["methods"]["synapse"]["hub_turn"]
    assert hub["ask"] == {"turn": "tiny/D2:1", "text": "Ben: I adopted a beagle puppy named "
                          "Biscuit.", "share": 0.5, "stored": False}
    assert hub["end"]["turn"] == "tiny/D3:2" and hub["end"]["share"] == 1.0
    # the same questions of the transcript alone (7 turns, newest first): q1, q2 find D2:1
    # at rank 4; q0's D1:1 is rank 7
    tr = res["methods"]["synapse"]["transcript"]
    assert tr["recall@3"]["1-4"] == 0.125 and tr["recall@5"]["1-4"] == 0.625
    # latency: each ask follows a write, and so does the first question of the end pass
    lat = res["methods"]["synapse"]["latency_ms"]
    assert lat["first_after_write"]["n"] == 5 and lat["warm"]["n"] == 8


def test_locomo_hubs_are_counted_within_each_conversation(tmp_path, newest) -> None:
    """Two copies of the tiny conversation: a hub is a turn many questions of one
    conversation meet, so each copy's share is the single conversation's (pooled over both
    conversations it would be halved, 0.25 and 0.5)."""
    twice = [TINY[0], {**TINY[0], "sample_id": "copy"}]
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(twice))
    res = run_agent(path, methods=["synapse"], ks=(5,), embedder=HashingEmbedder(),
                    base_config=newest, transcript=False)
    m = res["methods"]["synapse"]
    assert m["ask"]["hub_share@5"]["1-4"] == 0.5
    assert m["end"]["hub_share@5"]["1-4"] == 1.0
    assert m["hub_turn"]["ask"]["turn"] == "tiny/D2:1"


def test_the_json_keys(tiny, newest) -> None:
    res = run_agent(tiny, methods=["synapse", "dense", "bm25", "ppr"], ks=(5, 10),
                    embedder=HashingEmbedder(), base_config=newest)
    assert set(res) == {"dataset", "format", "memories", "questions", "stored_per_question",
                        "skipped_evidence", "turn_text", "methods", "ingest", "timing_s"}
    assert res["questions"] == {"1": 1, "2": 0, "3": 0, "4": 3, "5": 0}
    assert set(res["ingest"]) == {"replays", "turns", "stored_turns", "seconds", "turns_per_s"}
    assert res["ingest"]["replays"] == 1  # the baselines read the engine's memory
    for name, m in res["methods"].items():
        assert set(m) == {"ask", "end", "transcript", "hub_turn", "latency_ms"}, name
        for phase in ("ask", "end"):
            assert set(m[phase]) == {f"{metric}@{k}" for k in (5, 10) for metric in (
                "recall", "question_above_evidence", "stored_per_k", "context_tokens")} \
                | {"hub_share@5", "tokens_recall@1000", "tokens_recall@2000"}
            for values in m[phase].values():
                assert set(values) == {"1", "2", "3", "4", "5", "1-4"}
        assert set(m["latency_ms"]) == {"first_after_write", "warm"}
    # the engine ran first after every write, so it paid the rebuilds
    assert res["methods"]["synapse"]["latency_ms"]["first_after_write"]["n"] == 5
    assert res["methods"]["ppr"]["latency_ms"]["first_after_write"] is None
    # the baselines rank the same memory, stored turns included
    assert res["methods"]["dense"]["end"]["stored_per_k@10"]["1-4"] > 0
    json.dumps(res)  # JSON-ready


def test_longmemeval_hubs_are_counted_across_haystacks(tmp_path, newest) -> None:
    """Each LongMemEval question is its own memory, but the haystacks share sessions: a turn
    is a hub by its id."""
    def session(*texts, answer=None):
        return [{"role": "user" if i % 2 == 0 else "assistant", "content": t,
                 **({"has_answer": True} if i == answer else {})} for i, t in enumerate(texts)]

    tea = session("I like green tea.", "Tea is good.")
    records = [
        {"question_id": "q1", "question_type": "single-session-user", "answer": "red",
         "question": "What colour is my bike?", "question_date": "2023/05/09 (Tue) 10:00",
         "haystack_session_ids": ["s1", "s2"],
         "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 10:00"],
         "haystack_sessions": [session("I bought a red bike.", "Nice!", answer=0), tea],
         "answer_session_ids": ["s1"]},
        {"question_id": "q2", "question_type": "multi-session", "answer": "Tom",
         "question": "What is my cat called?", "question_date": "2023/05/09 (Tue) 10:00",
         "haystack_session_ids": ["s2", "s3"],
         "haystack_dates": ["2023/05/02 (Tue) 10:00", "2023/05/03 (Wed) 10:00"],
         "haystack_sessions": [tea, session("My cat is Tom.", "Cute.", answer=0)],
         "answer_session_ids": ["s3"]}]
    path = tmp_path / "lme.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(records, fh)
    res = run_agent(path, methods=["synapse"], ks=(5,), embedder=HashingEmbedder(),
                    base_config=newest, keep_records=True, transcript=False)
    assert res["format"] == "longmemeval" and res["memories"] == ["q1", "q2"]
    ranked = {(r.qid, r.phase): r.ranked for r in res["records"]["synapse"]}
    assert ranked["q1", "ask"] == ["s1:0"] and ranked["q2", "ask"] == ["s3:0", "s2:1", "s2:0"]
    assert ranked["q1", "end"] == ["s2:1", "s2:0", "s1:1", "msg-ack-q1", "msg-ask-q1", "s1:0"]
    assert ranked["q2", "end"] == ["s3:1", "msg-ack-q2", "msg-ask-q2", "s3:0", "s2:1", "s2:0"]
    m = res["methods"]["synapse"]
    # s2:1, a turn of the shared session, is in both top-5 lists at the end
    assert m["end"]["hub_share@5"]["pooled"] == 1.0
    assert m["hub_turn"]["end"]["turn"] == "s2:1"
    assert m["ask"]["hub_share@5"]["pooled"] == 0.5
    assert m["end"]["stored_per_k@5"]["pooled"] == 2.0
    assert m["end"]["question_above_evidence@5"]["multi-session"] == 1.0
    assert "transcript" not in m


@pytest.mark.model
def test_the_cli_end_to_end(tiny, tmp_path, capsys) -> None:
    out = tmp_path / "agent.json"
    assert main(["bench", "agent", "--data", str(tiny), "--methods", "synapse,ppr", "--k", "5,10",
                 "--out", str(out), "--no-progress", "--plot", str(tmp_path / "plots")]) == 0
    res = json.loads(out.read_text())
    assert list(res["methods"]) == ["synapse", "ppr"]
    assert res["ingest"]["stored_turns"] == 8
    assert 0.0 <= res["methods"]["synapse"]["ask"]["recall@10"]["1-4"] <= 1.0
    printed = capsys.readouterr().out
    assert "bench agent (locomo)" in printed and "first-after-write" in printed
    assert (tmp_path / "plots" / "agent_recall.png").stat().st_size > 0
    assert (tmp_path / "plots" / "agent_stored.png").stat().st_size > 0

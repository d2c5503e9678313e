"""The LoCoMo loader (tiny fixture, edge cases, the real dev split) and the demo conversation."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

import synapse_integrations.bench.locomo as locomo_module
from synapse_integrations.bench.locomo import (
    LocomoDataset,
    load_locomo,
    parse_session_datetime,
)
from synapse_integrations.errors import SynapseError

TINY = Path(__file__).parents[1] / "fixtures" / "locomo_tiny.json"
DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo_dev.json"
UTC = timezone.utc


@pytest.fixture(scope="module")
def tiny() -> LocomoDataset:
    return load_locomo(TINY)


# --------------------------------------------------------------------------- tiny fixture


def test_tiny_counts(tiny: LocomoDataset) -> None:
    assert tiny.path == TINY
    assert tiny.sample_ids == ("tiny-a", "tiny-b")
    a, b = tiny.conversations
    assert a.speakers == ("Mara", "Theo") and b.speakers == ("Ines", "Kofi")
    assert (len(a.turns), len(b.turns)) == (18, 17)  # 7+6+5 and 6+7+4
    # tiny-a: 8 questions, 1 with empty evidence skipped;
    # tiny-b: 7 questions, one with category 6 and one whose only id (D7:1) does not exist
    assert (len(a.questions), len(b.questions)) == (7, 5)
    assert tiny.skipped_questions == 3
    assert tiny.skipped_evidence == 2  # D9:9 in tiny-a, D7:1 in tiny-b
    assert Counter(q.category for q in tiny.questions) == {1: 2, 2: 2, 3: 2, 4: 3, 5: 3}
    assert all(q.conversation_id == c.sample_id for c in tiny.conversations for q in c.questions)


def test_tiny_turn_text_and_caption(tiny: LocomoDataset) -> None:
    a, b = tiny.conversations
    first = a.turns[0]
    assert (first.dia_id, first.speaker, first.session) == ("D1:1", "Theo", 1)
    assert first.text == "Theo: Hey Mara! It's been ages. What have you been up to?"
    photo = b.turns[2]
    assert photo.dia_id == "D1:3"
    assert photo.text == (
        "Ines: A soft sage green. Here's how it turned out. "
        "[shares a photo: a photo of a kitchen with green walls and wooden shelves]"
    )
    assert sum("[shares a photo:" in t.text for c in tiny.conversations for t in c.turns) == 1
    assert [t.session for t in b.turns] == [1] * 6 + [2] * 7 + [3] * 4


def test_tiny_timestamps(tiny: LocomoDataset) -> None:
    for conv in tiny.conversations:
        stamps = [t.timestamp for t in conv.turns]
        assert all(s.tzinfo is not None for s in stamps)
        assert all(x < y for x, y in zip(stamps, stamps[1:]))  # strictly increasing
    a, b = tiny.conversations
    session_2 = datetime(2023, 3, 19, 10, 2, tzinfo=UTC)  # "10:02 am on 19 March, 2023"
    assert [t.timestamp for t in a.turns if t.session == 2] == [
        session_2 + timedelta(seconds=i) for i in range(6)
    ]
    # "15 July, 2023": no time of day -> midnight
    assert b.turns[13].timestamp == datetime(2023, 7, 15, tzinfo=UTC)


def test_tiny_evidence_repairs(tiny: LocomoDataset) -> None:
    a, b = tiny.conversations
    by_question = {q.question: q for q in tiny.questions}
    assert a.questions[0].evidence == ("D1:2", "D2:1")  # "D1:2; D2:1" split
    assert by_question["Where does Theo's sister work, and in which city?"].evidence == (
        "D1:6",
        "D1:7",
        "D3:3",
    )  # D9:9 dropped
    assert a.questions[3].evidence == ("D2:5",)  # "d2:5 " normalised
    assert b.questions[1].evidence == ("D2:1",)  # "D:2:1"
    assert b.questions[2].evidence == ("D1:6", "D2:5")  # "D2:05"
    ids = {t.dia_id for c in tiny.conversations for t in c.turns if c.sample_id == "tiny-b"}
    assert all(e in ids for q in b.questions for e in q.evidence)


def test_tiny_answers_and_adversarial(tiny: LocomoDataset) -> None:
    a, _ = tiny.conversations
    adversarial = [q for q in a.questions if q.category == 5]
    assert [q.evidence for q in adversarial] == [("D2:4",), ()]  # kept without evidence too
    assert all(q.answer is None for q in adversarial)
    assert a.questions[-1].answer == "2"  # an integer answer in the JSON becomes text
    assert a.questions[1].answer == "Biscuit"
    assert all(q.evidence for q in tiny.questions if q.category != 5)


def test_select_conversations(tiny: LocomoDataset) -> None:
    only_b = load_locomo(TINY, conversations=["tiny-b"])
    assert only_b.sample_ids == ("tiny-b",)
    assert only_b.conversations[0] == tiny.conversations[1]
    assert (only_b.skipped_evidence, only_b.skipped_questions) == (1, 2)
    # file order is kept whatever the order asked for
    assert load_locomo(TINY, conversations=["tiny-b", "tiny-a"]).sample_ids == ("tiny-a", "tiny-b")


def test_unknown_conversation_lists_available() -> None:
    with pytest.raises(ValueError, match=r"conv-99.*available.*tiny-a.*tiny-b") as info:
        load_locomo(TINY, conversations=["tiny-a", "conv-99"])
    assert isinstance(info.value, SynapseError)


def test_dataclasses_are_frozen(tiny: LocomoDataset) -> None:
    with pytest.raises(AttributeError):
        tiny.conversations[0].turns[0].text = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        tiny.skipped_evidence = 0  # type: ignore[misc]


# --------------------------------------------------------------------------- edge cases


def _write(tmp_path: Path, conversation: dict[str, Any], qa: list[dict[str, Any]]) -> Path:
    path = tmp_path / "locomo.json"
    sample = {"sample_id": "s1", "conversation": conversation, "qa": qa}
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def _turn(session: int, i: int, speaker: str = "A") -> dict[str, str]:
    return {"speaker": speaker, "dia_id": f"D{session}:{i}", "text": f"turn {session}.{i}"}


def test_sessions_sort_numerically(tmp_path: Path) -> None:
    conversation: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B"}
    # keys written out of order, session_10 before session_2 as a string sort would put it
    for n in (10, 2, 1, 9):
        conversation[f"session_{n}"] = [_turn(n, 1), _turn(n, 2, "B")]
        conversation[f"session_{n}_date_time"] = f"9:00 am on {n} May, 2023"
    conversation["session_11_date_time"] = "9:00 am on 11 May, 2023"  # a date without turns
    path = _write(tmp_path, conversation, [])
    turns = load_locomo(path).conversations[0].turns
    assert [t.dia_id for t in turns] == [
        "D1:1", "D1:2", "D2:1", "D2:2", "D9:1", "D9:2", "D10:1", "D10:2"
    ]  # fmt: skip
    assert turns[-1].timestamp == datetime(2023, 5, 10, 9, 0, 1, tzinfo=UTC)


def test_unparseable_date_names_sample_and_key(tmp_path: Path) -> None:
    conversation = {
        "speaker_a": "A",
        "speaker_b": "B",
        "session_1": [_turn(1, 1)],
        "session_1_date_time": "sometime in spring",
    }
    with pytest.raises(ValueError, match=r"'s1'.*'session_1_date_time'.*sometime in spring"):
        load_locomo(_write(tmp_path, conversation, []))


def test_missing_date_names_key(tmp_path: Path) -> None:
    conversation = {"speaker_a": "A", "speaker_b": "B", "session_1": [_turn(1, 1)]}
    with pytest.raises(ValueError, match=r"'s1'.*'session_1_date_time'"):
        load_locomo(_write(tmp_path, conversation, []))


def test_evidence_pieces_and_categories(tmp_path: Path) -> None:
    conversation = {
        "speaker_a": "A",
        "speaker_b": "B",
        "session_1": [_turn(1, i) for i in range(1, 4)],
        "session_1_date_time": "8 May 2023",
    }
    qa = [
        # "D1:1,D1:2" split on the comma; "D1:1" again merged, not counted; "D" and
        # "D1:99" dropped (2)
        {"question": "q1", "answer": "x", "evidence": ["D1:1,D1:2", "D1:1", "D", "D1:99"],
         "category": 1},
        {"question": "q2", "answer": "x", "evidence": ["d1:3  D1:02"], "category": 2},
        {"question": "q3", "answer": "x", "evidence": ["D1:1"], "category": "4"},  # skipped
        {"question": "q4", "answer": "x", "evidence": ["D1:1"], "category": 0},  # skipped
        {"question": "q5", "answer": "x", "evidence": ["D2:1"], "category": 3},  # 1 + skipped
        {"question": "q6", "adversarial_answer": "y", "evidence": ["D3:3"], "category": 5},
    ]  # fmt: skip
    ds = load_locomo(_write(tmp_path, conversation, qa))
    questions = ds.conversations[0].questions
    assert [q.question for q in questions] == ["q1", "q2", "q6"]
    assert questions[0].evidence == ("D1:1", "D1:2")
    assert questions[1].evidence == ("D1:3", "D1:2")  # order of appearance kept
    assert questions[2].evidence == ()  # category 5 kept without valid evidence
    assert ds.skipped_evidence == 2 + 1 + 1  # q1: D, D1:99; q5: D2:1; q6: D3:3
    assert ds.skipped_questions == 3  # q3, q4, q5


def test_not_locomo_raises(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"sample_id": "s1"}', encoding="utf-8")
    with pytest.raises(ValueError, match="list of LoCoMo samples"):
        load_locomo(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("12:06 am on 11 November, 2022", datetime(2022, 11, 11, 0, 6)),
        ("12:30 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 30)),
        ("10:02 AM on 19 March, 2023", datetime(2023, 3, 19, 10, 2)),
        ("8 May 2023", datetime(2023, 5, 8)),
        ("15 July, 2023", datetime(2023, 7, 15)),
        ("May 8, 2023", datetime(2023, 5, 8)),
        ("9 am on 3 Sept 2023", datetime(2023, 9, 3, 9)),
        ("13:05 on 3 March 2023", datetime(2023, 3, 3, 13, 5)),
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 13, 56)),
        ("2023-05-08T15:56:00+02:00", datetime(2023, 5, 8, 13, 56)),
    ],
)
def test_parse_session_datetime(text: str, expected: datetime) -> None:
    assert parse_session_datetime(text) == expected.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    "text", ["", "yesterday", "1:56 pm on 31 February, 2023", "13:56 pm on 8 May, 2023",
             "8 Mayo 2023", "12 15 July 2023"]
)  # fmt: skip
def test_parse_session_datetime_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_session_datetime(text)


def test_loader_imports_only_stdlib_and_errors() -> None:
    tree = ast.parse(Path(locomo_module.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    allowed = {"__future__", "json", "logging", "re", "collections.abc", "dataclasses",
               "datetime", "pathlib", "typing", "..errors"}  # fmt: skip
    assert imported <= allowed


# --------------------------------------------------------------------------- dev split

needs_dev = pytest.mark.skipif(not DEV.exists(), reason=f"{DEV} not present")


@needs_dev
def test_dev_split(capsys: pytest.CaptureFixture[str]) -> None:
    ds = load_locomo(DEV)
    assert ds.sample_ids == ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
    for conv in ds.conversations:
        ids = {t.dia_id for t in conv.turns}
        assert len(ids) == len(conv.turns)
        assert all(e in ids for q in conv.questions for e in q.evidence)
        stamps = [t.timestamp for t in conv.turns]
        assert all(x < y for x, y in zip(stamps, stamps[1:]))
    # 999 questions in the file: conv-26 has two category-3 questions with empty evidence.
    # Dropped evidence: "D10:19" (conv-42; session 10 has 16 turns) and "D" (conv-42).
    # Repaired: "D8:6; D9:17" (conv-26) and "D:11:26" (conv-43).
    assert (ds.skipped_evidence, ds.skipped_questions) == (2, 2)
    assert Counter(q.category for q in ds.questions) == {1: 142, 2: 156, 3: 44, 4: 418, 5: 237}
    assert sum(len(c.turns) for c in ds.conversations) == 2760
    assert capsys.readouterr() == ("", "")


@needs_dev
def test_dev_split_photo_turns_and_selection() -> None:
    ds = load_locomo(DEV, conversations=["conv-26"])
    turn = next(t for t in ds.conversations[0].turns if t.dia_id == "D1:5")
    assert turn.text.startswith("Caroline: ")
    assert turn.text.endswith("[shares a photo: a photo of a dog walking past a wall with a "
                              "painting of a woman]")  # fmt: skip
    assert turn.timestamp == datetime(2023, 5, 8, 13, 56, 4, tzinfo=UTC)
    melanie = next(q for q in ds.questions if q.question == "What did Melanie paint recently?")
    assert melanie.evidence == ("D8:6", "D9:17")


# --------------------------------------------------------------------------- demo data

STOPWORDS = set(
    """a an the is are was were be been being am do does did doing have has had of to in on
    at by for from with about into over after before and or but not no so if then than that
    this these those it its it's i me my we our you your he him his she her they them their
    what which who whom whose when where why how s t just also very can will would should
    could there here up out""".split()
)


def _demo() -> dict[str, Any]:
    text = files("synapse_integrations").joinpath("data/demo_conversation.json").read_text(
        encoding="utf-8"
    )
    return json.loads(text)


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOPWORDS}


def _stem(word: str) -> str:
    for suffix in ("ying", "ing", "ies", "ied", "ed", "es", "s", "y"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _all_turns(demo: dict[str, Any]) -> list[str]:
    return [t["text"] for s in demo["sessions"] for t in s["turns"]]


def test_demo_schema() -> None:
    demo = _demo()
    assert set(demo) == {"title", "speakers", "sessions", "questions"}
    assert isinstance(demo["title"], str) and demo["title"]
    assert demo["speakers"] == ["Sam", "Riley"]
    assert 4 <= len(demo["sessions"]) <= 6
    times = []
    for session in demo["sessions"]:
        assert set(session) == {"datetime", "turns"}
        moment = datetime.fromisoformat(session["datetime"])
        assert moment.tzinfo is not None
        times.append(moment)
        for turn in session["turns"]:
            assert set(turn) == {"speaker", "text"}
            assert turn["speaker"] in demo["speakers"]
            assert turn["text"].strip() == turn["text"] and turn["text"]
    assert times == sorted(times) and len(set(d.date() for d in times)) == len(times)
    assert 50 <= len(_all_turns(demo)) <= 70
    assert 5 <= len(demo["questions"]) <= 6
    kinds = Counter(q["kind"] for q in demo["questions"])
    assert set(kinds) == {"bridge", "changed", "direct", "never"}
    assert 1 <= kinds["never"] <= 2
    for q in demo["questions"]:
        assert set(q) == {"question", "expect", "kind", "answer_turns"}
        assert q["question"].endswith("?") and q["expect"]
        # the turns that answer it (session, turn); none for a never-said question
        assert (q["kind"] == "never") == (not q["answer_turns"])
        for s, t in q["answer_turns"]:
            assert demo["sessions"][s]["turns"][t]["text"]


def test_demo_bridge_answer_shares_no_word_with_question() -> None:
    demo = _demo()
    question = next(q["question"] for q in demo["questions"] if q["kind"] == "bridge")
    turns = _all_turns(demo)
    answer = [t for t in turns if "architecture" in t.lower()]
    bridge = [t for t in turns if re.search(r"\bski\b", t.lower())]
    assert len(answer) == 1 and len(bridge) == 1
    assert "Dana" in answer[0] and "Dana" in bridge[0]  # the concept that bridges them
    q_words, a_words = _content_words(question), _content_words(answer[0])
    assert q_words and not q_words & a_words
    assert not {_stem(w) for w in q_words} & {_stem(w) for w in a_words}
    # the bridge turn, not the answer, is what the question's words point at
    assert q_words & _content_words(bridge[0])
    # the bridge appears in no other turn, so the path is the concept, not a third turn
    assert sum("Dana" in t for t in turns) == 3  # ski trip, black runs, the news
    assert demo["sessions"].index(
        next(s for s in demo["sessions"] if answer[0] in [t["text"] for t in s["turns"]])
    ) >= 3


def test_demo_changed_fact_order() -> None:
    demo = _demo()
    sessions = [" ".join(t["text"] for t in s["turns"]) for s in demo["sessions"]]
    assert "Portland" in sessions[0] and "Denver" not in sessions[0]
    first_in_denver = next(i for i, s in enumerate(sessions) if "Greetings from Denver" in s)
    assert first_in_denver >= 3


NEVER_NOUNS = {
    "What is the name of Sam's dog?": ["dog", "dogs", "puppy", "pet", "pets", "cat", "cats",
                                       "kitten", "veterinary", "vet"],
    "When is Sam's wedding?": ["wedding", "weddings", "married", "marry", "engaged", "fiance",
                               "fiancé", "fiancée", "bride", "groom"],
}


def test_demo_never_questions_are_never_mentioned() -> None:
    demo = _demo()
    never = [q["question"] for q in demo["questions"] if q["kind"] == "never"]
    assert set(never) == set(NEVER_NOUNS)
    text = " ".join(_all_turns(demo)).lower()
    for question in never:
        for noun in NEVER_NOUNS[question]:
            assert not re.search(rf"\b{re.escape(noun)}\b", text), (question, noun)

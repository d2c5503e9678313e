"""Never-said questions over LongMemEval haystacks: the packaged file, placement, the
metrics, the CLI (``synapse bench probes --longmemeval``), and the real model's gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synapse_integrations.bench.haystack_never_said import SPLITS, load_haystack_probes, \
    mentions, place, run_haystack_never_said, score_haystack, validate_haystack_probes
from synapse_integrations.bench.longmemeval import load_longmemeval
from synapse_integrations.bench.perf import HashingEmbedder
from synapse_integrations.bench.retrieval import CachingEmbedder, QuestionRecord

FIXTURE = Path(__file__).parents[1] / "fixtures" / "longmemeval_tiny.json"


def _file(*questions: tuple[str, str, list[str]], split: str = "dev") -> dict:
    return {"format": "synapse-haystack-never-said", "version": 1,
            "questions": [{"id": i, "split": split, "question": q, "absent_terms": t}
                          for i, q, t in questions]}


def test_packaged_file_is_valid_and_large_enough() -> None:
    data = load_haystack_probes()
    qs = data["questions"]
    assert len(qs) >= 40 and {q["split"] for q in qs} == set(SPLITS)
    assert sum(q["split"] == "held-out" for q in qs) >= 15
    # first person: the user of an assistant's chat history
    assert all(" my " in f" {q['question']} " or " I " in f" {q['question']} " for q in qs)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.__setitem__("format", "x"), "format 'synapse-haystack-never-said'"),
    (lambda d: d.__setitem__("questions", []), "non-empty list"),
    (lambda d: d["questions"][0].__setitem__("split", "train"), "split must be one of"),
    (lambda d: d["questions"][0].__setitem__("absent_terms", []), "absent_terms"),
    (lambda d: d["questions"][0].__setitem__("absent_terms", ["ok", " "]), "absent_terms"),
    (lambda d: d["questions"][0].__setitem__("question", ""), "no question text"),
    (lambda d: d["questions"].append(dict(d["questions"][0])), "repeated one"),
])
def test_validation_names_the_problem(mutate, message) -> None:
    data = _file(("parrot", "What is my parrot called?", ["parrot"]))
    mutate(data)
    with pytest.raises(ValueError, match=message):
        validate_haystack_probes(data)


def test_not_json_is_a_clear_error(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        load_haystack_probes(bad)


def test_mentions_whole_words_with_plurals() -> None:
    assert mentions("I got two Tattoos", ["tattoo"]) == ["tattoo"]
    assert mentions("my mortgages and boxes", ["mortgage", "box"]) == ["mortgage", "box"]
    assert mentions("the operation", ["opera"]) == []
    assert mentions("a blood\ntype test", ["blood type"]) == ["blood type"]
    assert mentions("bloodtype", ["blood type"]) == []


def test_placement_takes_the_first_free_haystack_without_the_words() -> None:
    hs = load_longmemeval(FIXTURE).questions
    ids = [h.question_id for h in hs]
    assert ids[:2] == ["q_user", "q_multi"]
    placed = place([{"id": "puppy", "absent_terms": ["puppy"]},     # q_user has a puppy
                    {"id": "blood", "absent_terms": ["blood type"]},
                    {"id": "spaghetti", "absent_terms": ["spaghetti", "novel"]},
                    {"id": "everywhere", "absent_terms": ["you", "the", "a", "i"]}], hs)
    assert placed["puppy"].question_id == "q_multi"
    assert placed["blood"].question_id == "q_user"       # the first one still free
    # q_user and q_multi are taken, q_update has spaghetti: the next free one without both
    assert placed["spaghetti"].question_id not in ("q_user", "q_multi", "q_update")
    assert not mentions(" ".join(t.text for t in placed["spaghetti"].turns),
                        ["spaghetti", "novel"])
    assert placed["everywhere"] is None
    # file order decides: the same questions in the same order give the same haystacks
    again = place([{"id": "puppy", "absent_terms": ["puppy"]},
                   {"id": "blood", "absent_terms": ["blood type"]}], hs)
    assert {k: v.question_id for k, v in again.items()} == {"puppy": "q_multi",
                                                            "blood": "q_user"}


def _rec(category: str, rejected: bool, check: str, split: str = "dev",
         qid: str = "q") -> QuestionRecord:
    extra = {"haystack": "h1"} | ({"split": split} if category == "never_said" else {})
    return QuestionRecord("m", "question?", category, (), ["t1", "t2"], 3.0, 0.2, extra,
                          rejected, qid, {"rejected": rejected, "check": check, "reason": "",
                                          "evidence_id": None, "signals": {}})


def test_score_haystack_hand_computed() -> None:
    recs = [_rec("never_said", True, "topic", "dev", "a"),
            _rec("never_said", False, "accepted", "dev", "b"),
            _rec("never_said", True, "presence", "held-out", "c"),
            _rec("haystack-answerable", True, "topic"),
            _rec("haystack-answerable", False, "accepted"),
            _rec("haystack-answerable", False, "accepted"),
            _rec("haystack-abstention", True, "topic")]
    out = score_haystack(recs, engine=True)
    assert out["dev"] == {"n": 2, "rejected": 1}
    assert out["held-out"] == {"n": 1, "rejected": 1}
    assert out["all"] == {"n": 3, "rejected": 2}
    assert out["checks"] == {"topic": 1, "presence": 1}
    assert out["haystack_questions"] == {"answerable": 3, "refused": 1, "abstention": 1,
                                         "rejected": 1}
    assert [q["id"] for q in out["questions"]] == ["a", "b", "c"]
    assert out["questions"][1] == {"id": "b", "split": "dev", "haystack": "h1",
                                   "rejected": False, "check": "accepted", "confidence": 0.2,
                                   "first": "t1"}
    assert score_haystack(recs, engine=False) == {}


def test_baselines_alone_are_refused() -> None:
    with pytest.raises(ValueError, match="only engine methods"):
        run_haystack_never_said(FIXTURE, methods=["bm25", "dense"])


def test_cli_needs_a_dataset(tmp_path) -> None:
    from synapse_integrations.cli import main

    with pytest.raises(ValueError, match="--locomo FILE, --longmemeval FILE or both"):
        main(["bench", "probes", "--out", str(tmp_path / "x.json"), "--no-progress"])


def test_cli_end_to_end_with_a_fake_embedder(tmp_path, capsys, monkeypatch) -> None:
    from synapse_integrations import cli
    from synapse_integrations.bench import commands as bench_commands

    monkeypatch.setattr(bench_commands, "_embedder", lambda args: CachingEmbedder(HashingEmbedder(dim=384)))
    probes = tmp_path / "never.json"
    probes.write_text(json.dumps(_file(("blood", "What is my blood type?", ["blood type"]),
                                       ("puppy", "What is my puppy's name?", ["puppy"]),
                                       ("nowhere", "What is it in?", ["in"]))))
    out = tmp_path / "res.json"
    # a baseline among the methods is left out of this probe set (no gate)
    rc = cli.main(["bench", "probes", "--longmemeval", str(FIXTURE), "--haystack-probes",
                   str(probes), "--methods", "bm25,synapse", "--out", str(out), "--no-progress"])
    assert rc == 0
    res = json.loads(out.read_text())
    assert set(res) == {"haystack_never_said"}
    h = res["haystack_never_said"]
    assert set(h) == {"data", "version", "dataset", "counts", "placed", "unplaced", "methods",
                      "timing_s"}
    assert h["placed"] == {"blood": "q_user", "puppy": "q_multi", "nowhere": None}
    assert h["unplaced"] == ["nowhere"] and h["counts"] == {"dev": 3, "held-out": 0}
    assert set(h["methods"]) == {"synapse"}
    m = h["methods"]["synapse"]
    assert m["all"]["n"] == 2 and m["haystack_questions"]["answerable"] == 2
    assert {q["id"] for q in m["questions"]} == {"blood", "puppy"}
    printed = capsys.readouterr().out
    assert "never said in long histories" in printed and "unplaced ['nowhere']" in printed


@pytest.mark.model
def test_the_real_gate_rejects_a_never_said_question_and_answers_the_haystacks_own(
        tmp_path) -> None:
    """With the real model: in a haystack of pasta, a corgi puppy and Python, the user's
    blood type was never said (rejected), while the haystack's own question, the puppy's
    breed, is answered (not refused)."""
    probes = tmp_path / "never.json"
    probes.write_text(json.dumps(_file(("blood", "What is my blood type?", ["blood type"]))))
    res = run_haystack_never_said(FIXTURE, data=probes)
    m = res["methods"]["synapse"]
    assert res["placed"] == {"blood": "q_user"}
    assert m["all"] == {"n": 1, "rejected": 1}
    assert m["haystack_questions"] == {"answerable": 1, "refused": 0, "abstention": 0,
                                       "rejected": 0}

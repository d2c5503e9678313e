"""The supersession set (tests/data/supersession_pairs.jsonl) and its measurement
(bench/supersession.py): the set's shape, its ids in the dev data, and precision/recall
on a conversation written by hand."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from synapse_integrations.bench.retrieval import BenchMemory
from synapse_integrations.bench.supersession import (
    PAIRS_FILE,
    format_supersession,
    load_pairs,
    measure,
    score,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
LOCOMO = DATA / "locomo" / "locomo_dev.json"
LME = DATA / "longmemeval" / "longmemeval_s_dev.json.gz"
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def test_the_set_has_both_labels_both_sources_and_two_balanced_splits():
    pairs = load_pairs()
    labels = Counter(p["label"] for p in pairs)
    # the dev data holds few real supersessions: 47 (the issue asks for 60), 81 hard negatives
    assert labels[True] >= 45 and labels[False] >= 60
    assert {p["source"] for p in pairs} == {"locomo", "longmemeval"}
    assert {(p["source"], p["label"]) for p in pairs} == {
        (s, lab) for s in ("locomo", "longmemeval") for lab in (True, False)}
    for lab in (True, False):
        split = Counter(p["split"] for p in pairs if p["label"] is lab)
        assert min(split.values()) >= 0.4 * sum(split.values())
    keys = [(p["conversation"], p["old_id"], p["new_id"]) for p in pairs]
    assert len(keys) == len(set(keys))
    assert all(p["old_id"] != p["new_id"] and p["why"].strip() for p in pairs)


@pytest.mark.skipif(not (LOCOMO.exists() and LME.exists()), reason="dev data not present")
def test_every_pair_names_real_turns_with_their_texts():
    from synapse_integrations.bench.locomo import load_locomo
    from synapse_integrations.bench.longmemeval import load_longmemeval

    pairs = load_pairs()
    texts = {(c.sample_id, t.dia_id): t.text for c in load_locomo(LOCOMO).conversations
             for t in c.turns}
    probes = json.loads((PAIRS_FILE.parents[2] / "synapse_integrations" / "data"
                         / "probes_v1.json").read_text("utf-8"))
    for g in probes["groups"]:
        for i in g["inserts"]:
            texts[(g["conversation"], i["id"])] = f"{i['speaker']}: {i['text']}"
    wanted = {p["conversation"] for p in pairs if p["source"] == "longmemeval"}
    with gzip.open(LME, "rt") as fh:
        assert {r["question_id"] for r in json.load(fh)} >= wanted
    for q in load_longmemeval(LME).questions:
        if q.question_id in wanted:
            texts.update({(q.question_id, t.id): t.text for t in q.turns})
    for p in pairs:
        assert texts[(p["conversation"], p["old_id"])] == p["old_text"], p
        assert texts[(p["conversation"], p["new_id"])] == p["new_text"], p


def _pair(old: str, new: str, label: bool, split: str) -> dict:
    return {"source": "locomo", "conversation": "m", "old_id": old, "new_id": new,
            "speaker": "Caroline", "old_text": "", "new_text": "", "label": label,
            "why": "hand-written", "split": split}


def test_measure_on_a_hand_written_conversation():
    said = [("a", 0, "I've spent 5-6 hours on my abstract ocean sculpture."),
            ("c", 1, "My internet provider is Comlink, it is slow."),
            ("e", 2, "I have 2 road bikes."),
            ("g", 3, "I practise the violin 3 hours a week with my sister."),
            ("b", 4, "I've put in 10-12 hours on my abstract ocean sculpture so far."),
            ("d", 5, "These days FiberNest brings the internet to my flat."),
            ("f", 6, "I want to buy 3 road bikes."),
            ("h", 7, "I practise the violin 5 hours a week with my sister."),
            ("b2", 9, "I've put in 20 hours on my abstract ocean sculpture now.")]
    turns = tuple({"text": f"Caroline: {text}", "speaker": "Caroline",
                   "timestamp": T0 + timedelta(days=day), "id": tid} for tid, day, text in said)
    pairs = [_pair("a", "b", True, "tune"),     # a new value: found
             _pair("a", "b2", True, "tune"),    # found through b (a -> b -> b2)
             _pair("c", "d", True, "tune"),     # a new provider said without a change verb: missed
             _pair("e", "f", False, "held_out"),  # a plan: rightly left alone
             _pair("g", "h", False, "held_out")]  # labelled no here, and the rule fires
    got = measure({"m": BenchMemory("m", turns, ())}, pairs)
    assert ("m", "a", "b") in got["fired"] and ("m", "b", "b2") in got["fired"]
    assert got["predicted"] == {("m", "a", "b"): True, ("m", "a", "b2"): True,
                                ("m", "c", "d"): False, ("m", "e", "f"): False,
                                ("m", "g", "h"): True}
    tune = score([p for p in pairs if p["split"] == "tune"], got["predicted"])
    held = score([p for p in pairs if p["split"] == "held_out"], got["predicted"])
    both = score(pairs, got["predicted"])
    assert (tune["precision"], tune["recall"], tune["fn"]) == (1.0, 2 / 3, 1)
    assert tune["false_negatives"][0]["old_id"] == "c"
    assert (held["precision"], held["recall"], held["fp"]) == (0.0, None, 1)
    assert (both["tp"], both["fp"], both["fn"], both["precision"], both["recall"]) == \
        (2, 1, 1, 2 / 3, 2 / 3)
    text = format_supersession({"sources": ["locomo"], "measured": 5, "fired": 3,
                                "unlabelled_fired": [], "all": both,
                                "splits": {"tune": tune, "held_out": held}})
    assert "tune      precision 100.0% (2 of 2), recall 66.7% (2 of 3)" in text
    assert "false positive m g -> h" in text

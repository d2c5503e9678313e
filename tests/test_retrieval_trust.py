"""Per-question trust: a turn singled out by a rare token ranks first among its near-duplicates."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

from synapse_integrations import Synapse
from synapse_integrations.core.scoring import singled_out
from synapse_integrations.core.triggers import BM25Index

BIRDS = ["heron", "finch", "wren", "crane", "robin", "egret", "swift", "lark", "kite", "gull"]


DEMO = json.loads(resources.files("synapse_integrations")
                  .joinpath("data/demo_conversation.json").read_text("utf-8"))
PICKS = [3, 17, 42, 77, 101, 118, 133, 149, 165, 187, 240, 299]


@pytest.fixture(scope="module")
def records(embedder):
    """The shipped demo conversation, then 300 near-identical records a minute apart that
    differ only in their access code (the real model embeds "egret165" and "egret55"
    alike, so the records are near-duplicates)."""
    chat = [{"text": f"{t['speaker']}: {t['text']}", "speaker": t["speaker"],
             "timestamp": s["datetime"]} for s in DEMO["sessions"] for t in s["turns"]]
    recs = [{"text": f"Sam: Test record {i}: the access code is {BIRDS[i % 10]}{i}.",
             "speaker": "Sam", "id": f"rec{i}", "timestamp": 2e9 + 60 * i} for i in range(300)]
    with Synapse(embedder=embedder) as mem:
        mem.add_turns(chat)
        mem.add_turns(recs)
        mem.consolidate()
        yield mem


def _rank(mem, i: int, **cfg) -> int:
    res = mem.retrieve(f"Which record has access code {BIRDS[i % 10]}{i}?", k=30,
                       config=mem.config.replace(**cfg) if cfg else None)
    ids = [it.id for it in res.items]
    return ids.index(f"rec{i}") + 1 if f"rec{i}" in ids else 99


@pytest.mark.model
def test_an_identifier_only_one_turn_holds_ranks_it_first(records) -> None:
    assert [_rank(records, i) for i in PICKS] == [1] * len(PICKS)
    # without the distinctive-evidence term, and activation weighed as in the paper (0.3),
    # the near-duplicates, which reinforce each other through their shared concepts and
    # temporal edges, bury most of them (the turn holding the code ends with activation 0:
    # lateral inhibition erased it)
    without = [_rank(records, i, weight_distinct=0.0, weight_activation=0.3) for i in PICKS]
    assert sum(r > 1 for r in without) >= len(PICKS) // 3


def test_rare_words_held_by_different_turns_single_out_none() -> None:
    idx = BM25Index()
    idx.set({"a": "My sister Ana moved to Lisbon", "b": "Lisbon is a lovely city to live in",
             "c": "I adopted a beagle"})
    share = idx.exclusive_share("Where does my sister live?", {"a": 0, "b": 1, "c": 2}, 3,
                                np.ones(3, dtype=bool))
    assert share[0] == pytest.approx(share[1]) and share[0] > 0
    assert not singled_out(share).any()


def test_exclusive_share_counts_only_eligible_documents() -> None:
    idx = BM25Index()
    idx.set({"turn": "order QM5521 arrived", "concept": "QM5521"})
    index = {"turn": 0, "concept": 1}
    both = idx.exclusive_share("QM5521", index, 2, np.array([True, True]))
    turns = idx.exclusive_share("QM5521", index, 2, np.array([True, False]))
    assert both[0] == 0.0  # two documents hold the code: not exclusive
    assert turns[0] == pytest.approx(1.0) and turns[1] == 0.0

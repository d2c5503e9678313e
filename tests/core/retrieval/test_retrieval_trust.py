"""Per-question trust: a turn singled out by a rare token ranks first among its near-duplicates."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_integrations import Synapse
from synapse_integrations.core.graph.graph import Compiled
from synapse_integrations.core.retrieval.items import led_by
from synapse_integrations.core.kernels.scoring import singled_out
from synapse_integrations.core.index.bm25 import BM25Index

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


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 12), st.data())
def test_the_concepts_that_led_to_each_item_are_read_per_item_as_defined(n, data) -> None:
    """``led_by`` reads every item's out-edges at once; per item it must equal the plain
    definition: the item's out-neighbours that are concepts with activation > 0, strongest
    first, ties by position, at most 5 (none for a concept)."""
    is_ep = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                               max_size=4 * n))
    act = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.1, 0.5, 0.9]), min_size=n,
                                      max_size=n)))
    names = [f"c{i}" for i in range(n)]
    view = Compiled.from_arrays(names, np.eye(n, dtype=np.float32),
                                src=[a for a, _ in pairs], dst=[b for _, b in pairs],
                                weight=[1.0] * len(pairs), is_episode=is_ep,
                                attrs={"name": names})
    rows = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=n)), dtype=np.int64)

    def plain(i: int) -> tuple[str, ...]:
        if not is_ep[i]:
            return ()
        heads = sorted(b for a, b in pairs if a == i and not is_ep[b] and act[b] > 0)
        return tuple(names[b] for b in sorted(heads, key=lambda b: -act[b])[:5])

    assert led_by(view, rows, act) == [plain(int(i)) for i in rows]
    assert led_by(view, rows, None) == [()] * len(rows)


def test_at_most_five_concepts_led_to_an_item() -> None:
    # episode 0 links to concepts 1..7; 3 is not active; 2, 4 and 6 tie (ties by position)
    names = [f"c{i}" for i in range(8)]
    act = np.array([1.0, 0.2, 0.5, 0.0, 0.5, 0.9, 0.5, 0.1])
    view = Compiled.from_arrays(names, np.eye(8, dtype=np.float32), src=[0] * 7,
                                dst=[7, 6, 5, 4, 3, 2, 1], weight=[1.0] * 7,
                                is_episode=[True] + [False] * 7, attrs={"name": names})
    assert led_by(view, np.array([0, 0]), act) == [("c5", "c2", "c4", "c6", "c1")] * 2

"""Filters on retrieve(): speakers, an event-time range and Chroma-style ``where`` on the turn
metadata, applied before ranking; results are memories (episodes) unless concepts are asked."""

from __future__ import annotations

import pytest

from synapse_integrations import HashingEmbedder, Synapse
from synapse_integrations.core.state.filters import Filter, compile_where
from synapse_integrations.errors import InvalidInputError, InvalidTypeError

DAY = 86_400.0


@pytest.fixture()
def mem():
    with Synapse(embedder=HashingEmbedder()) as m:
        rows = []
        for i in range(30):
            who = ("user", "assistant")[i % 2]
            rows.append({"text": f"{who}: day {i} we talked about the garden and tomatoes",
                         "speaker": who, "timestamp": 1_700_000_000 + i * DAY, "id": f"t{i}",
                         "metadata": {"day": i, "channel": ("mobile", "web")[i % 3 == 0],
                                      "order": {"status": "open" if i < 10 else "closed"}}})
        m.add_turns(rows)
        m.consolidate()
        yield m


@pytest.mark.parametrize("where, expected", [
    ({"day": 3}, {3}),
    ({"day": {"$gte": 27}}, {27, 28, 29}),
    ({"day": {"$lt": 2}}, {0, 1}),
    ({"day": {"$in": [4, 8, 99]}}, {4, 8}),
    ({"day": {"$nin": list(range(1, 30))}}, {0}),
    ({"day": {"$ne": 0}, "order.status": "open"}, set(range(1, 10))),
    ({"$or": [{"day": 5}, {"day": {"$gt": 28}}]}, {5, 29}),
    ({"$and": [{"channel": "web"}, {"day": {"$lte": 6}}]}, {0, 3, 6}),
    ({"missing": {"$ne": 1}}, set(range(30))),  # a missing key is != anything
    ({"missing": {"$gt": 1}}, set()),           # and not ordered
])
def test_where_semantics(where, expected) -> None:
    pred = compile_where(where)
    got = {i for i in range(30) if pred({"day": i, "channel": ("mobile", "web")[i % 3 == 0],
                                         "order": {"status": "open" if i < 10 else "closed"}})}
    assert got == expected


@pytest.mark.parametrize("where, message", [
    ({}, "where is empty"),
    ({"day": {"$regex": "x"}}, "unknown operator '\\$regex'"),
    ({"$not": {"day": 1}}, "unknown operator '\\$not' at the top level"),
    ({"day": {"$in": 3}}, "needs a list"),
    ({"day": {"$gt": None}}, "needs a number or a string"),
    ({"day": {"$eq": float("nan")}}, "must be finite"),
    ({"day": {}}, "is empty"),
    ({"$or": []}, "at least one condition"),
    ({"day": [1, 2]}, "must be a str, number, bool or None"),
    ({"": 1}, "non-empty strings"),
])
def test_malformed_where_names_the_problem(where, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        compile_where(where)


def test_filter_arguments_are_checked() -> None:
    assert Filter.build() is None
    with pytest.raises(InvalidInputError, match="before until"):
        Filter.build(since="2024-02-01", until="2024-01-01")
    with pytest.raises(InvalidInputError, match="speakers"):
        Filter.build(speakers=[])
    with pytest.raises(InvalidTypeError):
        Filter.build(where=["day"])  # type: ignore[arg-type]


def test_results_are_episodes_unless_concepts_are_asked(mem) -> None:
    res = mem.retrieve("tomatoes in the garden", k=10)
    assert res.items and all(it.kind == "episode" for it in res.items)
    both = mem.retrieve("tomatoes in the garden", k=40, kinds=("episode", "concept"))
    assert {it.kind for it in both.items} == {"episode", "concept"}
    only = mem.retrieve("tomatoes in the garden", k=5, kinds=["concept"])
    assert only.items and all(it.kind == "concept" for it in only.items)
    # the ranking of episodes is the same whether concepts are returned or not
    assert [it.id for it in res.items] == [it.id for it in both.items if it.kind == "episode"][:10]
    # each memory names the active concepts that led to it
    assert any(it.concepts for it in res.items)
    assert all(set(it.concepts) <= {c.text for c in both.items if c.kind == "concept"} | {
        d["name"] for _, d in mem.graph.nodes(data=True) if d["kind"] == "concept"}
        for it in res.items)
    with pytest.raises(InvalidInputError, match="kinds"):
        mem.retrieve("garden", kinds=("fact",))


def test_filters_apply_before_ranking(mem) -> None:
    by_speaker = mem.retrieve("tomatoes", k=30, speakers="assistant")
    assert len(by_speaker.items) == 15 and {it.speaker for it in by_speaker.items} == {"assistant"}
    since, until = 1_700_000_000 + 10 * DAY, 1_700_000_000 + 13 * DAY
    window = mem.retrieve("tomatoes", k=30, since=since, until=until)
    assert sorted(it.id for it in window.items) == ["t10", "t11", "t12"]
    meta = mem.retrieve("tomatoes", k=30, where={"order.status": "open", "day": {"$gte": 7}})
    assert sorted(it.id for it in meta.items) == ["t7", "t8", "t9"]
    combined = mem.retrieve("tomatoes", k=30, speakers=["user"], where={"channel": "web"})
    assert {it.id for it in combined.items} == {f"t{i}" for i in range(0, 30, 6)}
    # a turn that matches is found even when far from the top of the unfiltered ranking
    assert mem.retrieve("tomatoes", k=1, where={"day": 29}).items[0].id == "t29"


def test_a_filter_that_matches_nothing_says_nothing_in_memory(mem) -> None:
    res = mem.retrieve("tomatoes", where={"day": 999})
    assert res.items == () and res.rejected


async def test_filters_work_through_the_async_twin(mem) -> None:
    res = await mem.aretrieve("tomatoes", k=3, speakers="user")
    assert {it.speaker for it in res.items} == {"user"}

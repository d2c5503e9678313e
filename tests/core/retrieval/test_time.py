"""Time and versions through the engine: ``retrieve(as_of=..., current_only=...)``,
``history()``, ``supersede()``, and version links kept through reopening and forget."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from synapse_integrations import HashingEmbedder, Synapse
from synapse_integrations.errors import InvalidInputError, InvalidTypeError, NodeNotFoundError

JAN, FEB, MAR, APR = (datetime(2024, m, d, tzinfo=timezone.utc).timestamp()
                      for m, d in ((1, 10), (2, 15), (3, 1), (4, 20)))
QUESTION = "Where does Sam live?"


@pytest.fixture()
def moved(tmp_path):
    """Sam lived in Porto (January), moved to Lisbon (March), with other turns around."""
    with Synapse(tmp_path / "m", embedder=HashingEmbedder()) as mem:
        porto = mem.add_turn("Sam lives in Porto, near the river.", speaker="Sam", timestamp=JAN)
        mem.add_turns([{"text": f"filler turn {i} about the weather", "speaker": "Sam",
                        "timestamp": JAN + 86400 * (i + 1)} for i in range(6)])
        lisbon = mem.update(porto, "Sam lives in Lisbon now, near the sea.", timestamp=MAR)
        mem.add_turn("Sam lives next to a bakery these days.", speaker="Sam", timestamp=APR)
        yield mem, porto, lisbon


def _ids(mem, **kw):
    return [it.id for it in mem.retrieve(QUESTION, k=10, **kw).items]


def test_update_ends_the_old_version_when_the_new_one_starts(moved):
    mem, porto, lisbon = moved
    assert mem.get(porto)["superseded_at"] == MAR  # the new version's event time
    item = next(it for it in mem.retrieve(QUESTION, k=10).items if it.id == porto)
    assert item.valid_from.timestamp() == JAN and item.valid_until.timestamp() == MAR
    new = next(it for it in mem.retrieve(QUESTION, k=10).items if it.id == lisbon)
    assert new.valid_from.timestamp() == MAR and new.valid_until is None
    assert item.to_dict()["valid_until"].startswith("2024-03-01")


def test_by_default_both_versions_come_back_the_newest_first(moved):
    mem, porto, lisbon = moved
    ids = _ids(mem)
    assert ids.index(lisbon) < ids.index(porto)


def test_as_of_reads_the_memory_as_it_stood_then(moved):
    mem, porto, lisbon = moved
    before = _ids(mem, as_of=FEB)
    assert porto in before and lisbon not in before  # the move had not happened
    assert before[0] == porto
    assert all(mem.get(i)["ts"] <= FEB for i in before)  # nothing that started later
    assert _ids(mem, as_of="2023-12-31") == []  # nothing had been said yet
    after = _ids(mem, as_of=MAR + 1)
    assert after.index(lisbon) < after.index(porto)
    assert mem.get(porto)["superseded_by"] == lisbon  # a read changes nothing


def test_current_only_hides_what_was_replaced_by_then(moved):
    mem, porto, lisbon = moved
    now = _ids(mem, current_only=True)
    assert lisbon in now and porto not in now
    then = _ids(mem, as_of=FEB, current_only=True)  # not replaced yet in February
    assert then[0] == porto


def test_current_only_hides_only_versions_known_to_be_replaced(tmp_path):
    """No write linked them: the ranking places the newer above the older for this
    question (version_recency), but a guess made at question time hides nothing."""
    with Synapse(tmp_path / "m", embedder=HashingEmbedder()) as mem:
        old = mem.add_turn("I earned $350 at the farmers market", speaker="user", timestamp=JAN)
        mem.add_turns([{"text": f"filler turn {i} about the weather", "speaker": "user",
                        "timestamp": JAN + 86400 * (i + 1)} for i in range(6)])
        new = mem.add_turn("I earned $420 at the farmers market on my latest visit",
                           speaker="user", timestamp=MAR)
        q = "How much did I earn at the farmers market?"
        ids = [it.id for it in mem.retrieve(q, k=10).items]
        assert ids.index(new) < ids.index(old)
        assert old in [it.id for it in mem.retrieve(q, k=10, current_only=True).items]
        mem.supersede(old, new)
        assert old not in [it.id for it in mem.retrieve(q, k=10, current_only=True).items]


def test_history_lists_the_versions_oldest_first_from_any_of_them(moved):
    mem, porto, lisbon = moved
    for node in (porto, lisbon):
        h = mem.history(node)
        assert [v["id"] for v in h] == [porto, lisbon]
        assert [(v["valid_from"], v["valid_until"]) for v in h] == [(JAN, MAR), (MAR, None)]
    alone = mem.add_turn("a turn never updated", timestamp=APR)
    assert [v["id"] for v in mem.history(alone)] == [alone]
    with pytest.raises(NodeNotFoundError):
        mem.history("ep-nope")


def test_links_survive_reopening(moved, tmp_path):
    mem, porto, lisbon = moved
    mem.close()
    with Synapse.load(tmp_path / "m", embedder=HashingEmbedder()) as again:
        assert [v["id"] for v in again.history(lisbon)] == [porto, lisbon]
        assert porto not in [it.id for it in again.retrieve(QUESTION, k=10, current_only=True).items]


def test_forgetting_the_newest_version_makes_the_one_before_it_current(moved):
    mem, porto, lisbon = moved
    mem.forget(ids=[lisbon])
    h = mem.history(porto)
    assert [v["id"] for v in h] == [porto] and h[0]["valid_until"] is None
    assert "superseded_by" not in mem.get(porto)
    assert porto in _ids(mem, current_only=True)


def test_forgetting_a_middle_version_closes_the_chain(moved):
    mem, porto, lisbon = moved
    third = mem.update(lisbon, "Sam lives in Madrid now.", timestamp=APR + 86400)
    mem.forget(ids=[lisbon])
    assert [v["id"] for v in mem.history(third)] == [porto, third]
    assert mem.get(porto)["superseded_at"] == APR + 86400


def test_supersede_links_two_stored_turns(tmp_path):
    with Synapse(tmp_path / "m", embedder=HashingEmbedder()) as mem:
        a = mem.add_turn("my gym is IronWorks", timestamp=JAN)
        b = mem.add_turn("I joined Pulse Fitness", timestamp=MAR)
        mem.supersede(a, b)
        assert [v["id"] for v in mem.history(a)] == [a, b]
        assert mem.get(a)["superseded_at"] == MAR
        with pytest.raises(InvalidInputError, match="already linked"):
            mem.supersede(a, mem.add_turn("another gym", timestamp=APR))
        with pytest.raises(InvalidInputError, match="two different episodes"):
            mem.supersede(b, b)
        with pytest.raises(NodeNotFoundError):
            mem.supersede(a, "ep-nope")


def test_updating_a_replaced_version_is_refused_before_anything_is_written(moved):
    mem, porto, lisbon = moved
    n = len(mem.episodes())
    with pytest.raises(InvalidInputError, match="already replaced"):
        mem.update(porto, "Sam lives in Faro.")
    assert len(mem.episodes()) == n


def test_bad_time_arguments_are_named(moved):
    mem, _, _ = moved
    with pytest.raises(InvalidTypeError, match="current_only"):
        mem.retrieve(QUESTION, current_only="yes")
    with pytest.raises(InvalidInputError):
        mem.retrieve(QUESTION, as_of="not a date")


async def test_async_twins(moved):
    mem, porto, lisbon = moved
    assert [v["id"] for v in await mem.ahistory(lisbon)] == [porto, lisbon]
    c = await mem.aadd_turn("Sam lives in Braga.", timestamp=APR + 10)
    d = await mem.aadd_turn("Sam lives in Evora.", timestamp=APR + 20)
    await mem.asupersede(c, d)
    assert mem.get(c)["superseded_by"] == d

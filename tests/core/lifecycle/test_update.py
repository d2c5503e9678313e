"""Synapse.update(): a new version first, then the old one superseded (kept, ranked below) or
forgotten; a refused update changes nothing."""

from __future__ import annotations

import pytest

from synapse_integrations import FirewallBlockedError, FirewallConfig, HashingEmbedder, Synapse
from synapse_integrations.errors import InvalidInputError, NodeNotFoundError

from _safety_helpers import HashEmbedder


@pytest.fixture()
def mem(tmp_path):
    with Synapse(tmp_path / "m", embedder=HashingEmbedder(),
                 firewall=FirewallConfig(pii="block")) as m:
        yield m


def test_update_keeps_the_old_version_below_the_new(mem, tmp_path) -> None:
    old = mem.add_turn("Ana lives in Boston near the harbour", speaker="Ana",
                       timestamp="2024-01-01T00:00:00Z", metadata={"topic": "home"})
    mem.add_turns([f"filler turn {i} about the weather" for i in range(6)])
    new = mem.update(old, "Ana lives in Denver near the harbour")
    assert new != old
    assert mem.get(old)["superseded_by"] == new and mem.get(new)["supersedes"] == old
    assert mem.get(new)["speaker"] == "Ana" and mem.get(new)["metadata"] == {"topic": "home"}
    # the old text matches the query better, yet the new version ranks first
    res = mem.retrieve("Ana lives in Boston near the harbour", k=5)
    ids = [it.id for it in res.items]
    assert ids.index(new) < ids.index(old)
    item = next(it for it in res.items if it.id == old)
    assert item.superseded_by == new and item.superseded_at is not None
    assert next(it for it in res.items if it.id == new).supersedes == old
    mem.close()
    with Synapse.load(tmp_path / "m", embedder=HashingEmbedder()) as again:  # durable
        assert again.get(old)["superseded_by"] == new


def test_update_without_history_forgets_the_old(mem) -> None:
    old = mem.add_turn("my locker code is 4471", speaker="user")
    new = mem.update(old, "my locker code is 9902", keep_history=False)
    assert not mem.contains(old) and mem.contains(new)
    assert all("4471" not in ep["text"] for ep in mem.episodes())


def test_a_refused_update_changes_nothing(mem) -> None:
    old = mem.add_turn("write to me at the office", speaker="user")
    before = mem.episodes()
    with pytest.raises(FirewallBlockedError):
        mem.update(old, "write to me at ana@example.org")
    with pytest.raises(InvalidInputError):
        mem.update(old, "x" * 100_001)
    with pytest.raises(InvalidInputError):
        mem.update(old, "bad \ud800 surrogate")
    assert mem.episodes() == before and "superseded_by" not in mem.get(old)


def test_update_errors_name_the_problem(mem) -> None:
    with pytest.raises(NodeNotFoundError):
        mem.update("ep-nope", "x")
    ep = mem.add_turns(["a", "b", "c", "d", "Dana skis in Whistler"])[0]
    concept = next(n for n, d in mem.graph.nodes(data=True) if d["kind"] == "concept")
    with pytest.raises(InvalidInputError, match="only episodes"):
        mem.update(concept, "x")
    mem.archive([ep])
    with pytest.raises(NodeNotFoundError):
        mem.update(ep, "x")


async def test_aupdate(tmp_path) -> None:
    with Synapse(tmp_path / "a", embedder=HashEmbedder()) as m:
        old = await m.aadd_turn("the meeting is on Monday")
        new = await m.aupdate(old, "the meeting is on Tuesday")
        assert (await m.aget(old))["superseded_by"] == new


def test_restore_of_nothing_or_of_unknown_ids(mem) -> None:
    ep = mem.add_turn("a turn to archive")
    assert mem.restore([]) == []
    with pytest.raises(NodeNotFoundError):
        mem.restore([ep])  # active, not archived
    with pytest.raises(TypeError):
        mem.restore(ep)

"""Issue 46: a ranking signal is one class and one registration line. The toy signal of
tests/_toy_signals.py, registered here and nowhere else, writes at ingestion, adjusts the
ranking, and shows as a score component in the item, the CLI, the adapters' metadata and
the REST reply, with no other edit."""

from __future__ import annotations

import io

import httpx
import pytest
from _toy_signals import BONUS, Exclaimed

from synapse_integrations import HashingEmbedder, Synapse, SynapseConfig
from synapse_integrations._adapter_utils import item_metadata, score_terms
from synapse_integrations.cli import _print_items
from synapse_integrations.core import signals
from synapse_integrations.errors import ConfigError

TURNS = ["The garden needs water on Mondays.", "I planted tomatoes in the garden!",
         "The garden shed is blue.", "We talked about the garden fence."]


@pytest.fixture
def toy():
    signals.register(Exclaimed())  # the one registration line
    try:
        yield
    finally:
        signals.unregister("exclaimed")


def test_a_ranking_signal_is_one_class_and_one_registration_line(toy) -> None:
    assert signals.signal_names()[-1] == "exclaimed"
    with Synapse(embedder=HashingEmbedder(), config=SynapseConfig(consolidation_interval=0)) as mem:
        ids = mem.add_turns(TURNS)
        assert mem.get(ids[1])["metadata"] == {"exclaimed": True}  # its write hook ran
        res = mem.retrieve("the garden", k=4)
        got = {it.id: it.components for it in res.items}
        assert set(got) == set(ids)
        assert got[ids[1]].exclaimed == BONUS
        assert all(got[i].exclaimed == 0.0 for i in ids if i != ids[1])
        for it in res.items:  # the shown terms still add up to the score
            assert sum(it.components.terms().values()) == pytest.approx(it.score)
            assert list(it.components.adjustments)[-2:] == ["exclaimed", "hop"]
        # the adapters' metadata and the CLI show it
        top = next(it for it in res.items if it.id == ids[1])
        meta = item_metadata(top)["components"]
        assert meta["exclaimed"] == BONUS
        assert sum(score_terms(meta).values()) == pytest.approx(top.score)
        out = io.StringIO()
        _print_items(mem, out, [top])
        assert f"exclaimed +{BONUS:.2f}" in out.getvalue()


def test_without_the_signal_the_ranking_and_components_are_the_default_ones() -> None:
    with Synapse(embedder=HashingEmbedder(), config=SynapseConfig(consolidation_interval=0)) as mem:
        ids = mem.add_turns(TURNS)
        assert mem.get(ids[1])["metadata"] == {}
        res = mem.retrieve("the garden", k=4)
        assert all("exclaimed" not in it.components.adjustments for it in res.items)
        assert list(res.items[0].components.adjustments) == [*signals.signal_names(), "hop"]


def test_a_signal_name_must_not_shadow_a_component() -> None:
    class Bad(Exclaimed):
        name = "similarity"

    with pytest.raises(ConfigError, match="similarity"):
        signals.register(Bad())
    with pytest.raises(ConfigError, match="Signal"):
        signals.register(object())


@pytest.mark.server
def test_the_rest_reply_carries_the_signal(toy, tmp_path) -> None:
    pytest.importorskip("fastapi")
    from _server_helpers import rest_server

    with rest_server(tmp_path / "mem", embedder=HashingEmbedder()) as srv, \
            httpx.Client(base_url=f"{srv.url}/v1", timeout=30) as http:
        added = http.post("/namespaces/toy/turns", json={"turns": [{"text": t} for t in TURNS]})
        assert added.status_code == 200, added.text
        ids = added.json()["ids"]
        reply = http.post("/namespaces/toy/retrieve", json={"query": "the garden", "k": 4})
        assert reply.status_code == 200, reply.text
        comps = {it["id"]: it["components"] for it in reply.json()["items"]}
        assert comps[ids[1]]["exclaimed"] == BONUS
        assert all(comps[i]["exclaimed"] == 0.0 for i in ids if i != ids[1])


def test_each_signal_names_a_config_section_that_holds_its_settings() -> None:
    sections = SynapseConfig.sections()
    for signal in signals.signals():
        if signal.section:
            assert signal.section in sections, f"{signal!r}: no config section {signal.section!r}"
            assert sections[signal.section], f"{signal!r}: section {signal.section!r} is empty"
            assert not SynapseConfig.is_graph_time(signal.section), f"{signal!r} reads graph-time settings"
    # the five with settings: each of its settings changes the ranking at query time only
    assert {s.name: s.section for s in signals.signals() if s.section} == {
        "salience": "signals.salience", "superseded": "signals.versions",
        "reply": "signals.replies", "asked": "signals.asks", "focus": "signals.focus"}

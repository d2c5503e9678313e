"""SynapseConfig in sections: every field in one section, graph-time decided by section
(GRAPH_FIELDS derived from the table), and a per-call config that changes a graph-time
field refused, locally and over REST."""

from __future__ import annotations

import dataclasses
import pickle

import httpx
import pytest

from synapse_integrations import HashingEmbedder, Synapse, SynapseConfig
from synapse_integrations.config.sections import SECTIONS, setting
from synapse_integrations.errors import ConfigError, InvalidInputError, InvalidTypeError

#: GRAPH_FIELDS as it was hand-kept before the sections: the reference, order included.
GRAPH_FIELDS_BEFORE = (
    "embedding_dim", "lexical_stemming", "speaker_in_document", "consolidation_interval",
    "dedup_threshold", "ema_momentum",
    "abstraction_weight", "abstraction_scope", "association_threshold", "association_top_k",
    "temporal_rho", "temporal_unit", "temporal_bidirectional", "prune_top_k", "dormancy_epsilon",
    "dormancy_windows", "dormancy_capacity", "max_concepts_per_window", "concepts_per_turn", "pagerank_damping",
    "reconsolidation", "surprisal_gate", "surprisal_tau", "surprisal_window", "sleep_auto",
    "sleep_episodes", "sleep_seconds", "sleep_archive_sources",
)

#: The ranking signals' sections (core/signals/*.py declare them): names and members fixed.
SIGNAL_SECTIONS = {
    "signals.salience": ("low_salience_weight",),
    "signals.versions": ("superseded_weight", "version_recency"),
    "signals.replies": ("reply_weight", "follow_up_weight"),
    "signals.asks": ("question_weight",),
    "signals.focus": ("speaker_free_cosine", "named_speaker_weight", "first_person_weight",
                      "date_weight"),
}

FIELDS = [f.name for f in dataclasses.fields(SynapseConfig)]


def test_every_field_is_in_exactly_one_section() -> None:
    sections = SynapseConfig.sections()
    assert list(sections) == list(SECTIONS)  # every section of the table, in its order
    placed = [name for names in sections.values() for name in names]
    assert sorted(placed) == sorted(FIELDS) and len(placed) == len(set(placed)) == 80
    for f in dataclasses.fields(SynapseConfig):
        assert f.metadata["section"] in SECTIONS, f.name
        assert SynapseConfig.section_of(f.name) == f.metadata["section"]
        assert f.name in sections[SynapseConfig.section_of(f.name)]
    assert all(sections.values()), "a section without fields"


def test_graph_fields_are_the_graph_time_sections_and_what_they_were() -> None:
    union = tuple(name for section, names in SynapseConfig.sections().items()
                  if SynapseConfig.is_graph_time(section) for name in names)
    assert SynapseConfig.GRAPH_FIELDS == union == GRAPH_FIELDS_BEFORE
    graph_time = {s for s in SECTIONS if SynapseConfig.is_graph_time(s)}
    assert graph_time == {"embeddings", "index", "graph", "lifecycle"}
    assert {s for s, (when, _) in SECTIONS.items() if when == "graph"} == graph_time
    assert set(SynapseConfig().query_time()) == set(FIELDS) - set(GRAPH_FIELDS_BEFORE)


def test_the_signal_sections_keep_their_names_and_fields() -> None:
    for section, names in SIGNAL_SECTIONS.items():
        assert SynapseConfig.sections()[section] == names
        assert not SynapseConfig.is_graph_time(section)
    from synapse_integrations.core.signals import signals

    declared = {s.section for s in signals() if s.section}
    assert declared <= set(SECTIONS), declared


def test_section_values() -> None:
    cfg = SynapseConfig(reply_weight=0.5, dedup_threshold=0.8, model_params={"ppr": {"tol": 1e-4}})
    assert cfg.section("signals.replies") == {"reply_weight": 0.5, "follow_up_weight": 0.64}
    assert cfg.section("embeddings") == {"embedding_dim": 384}
    assert cfg.section("graph")["dedup_threshold"] == 0.8
    assert cfg.section("models") == {"model": "synapse", "model_params": {"ppr": {"tol": 1e-4}}}
    assert cfg.section("extra") == {"extra": {}}
    merged = {}
    for section in SynapseConfig.sections():
        merged.update(cfg.section(section))
    assert merged == {name: getattr(cfg, name) for name in FIELDS}
    with pytest.raises(ConfigError, match="unknown config section 'signals'"):
        cfg.section("signals")
    with pytest.raises(ConfigError, match="unknown SynapseConfig field 'reply_wieght'"):
        SynapseConfig.section_of("reply_wieght")
    with pytest.raises(ConfigError, match="unknown config section"):
        SynapseConfig.is_graph_time("nope")
    with pytest.raises(ConfigError, match="unknown config section 'nope'"):
        setting("nope", 1)


def test_the_flat_api_is_unchanged() -> None:
    cfg = SynapseConfig(reply_weight=0.5)
    assert cfg.reply_weight == 0.5 and cfg.replace(top_k=3).top_k == 3
    assert SynapseConfig.from_dict(cfg.to_dict()) == cfg
    assert list(cfg.to_dict()) == FIELDS
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert SynapseConfig.ablation("no-fan").graph_signature() == SynapseConfig().graph_signature()
    with pytest.raises(ConfigError, match="invalid SynapseConfig: reply_weight must be in"):
        SynapseConfig(reply_weight=2.0)
    with pytest.raises(ConfigError, match="unknown SynapseConfig field"):
        SynapseConfig.from_dict({"nope": 1})


def test_the_ablations_but_no_sleep_share_one_memory() -> None:
    from synapse_integrations.presets import ABLATIONS

    base = SynapseConfig()
    graph_time = {name for name in ABLATIONS
                  if any(SynapseConfig.is_graph_time(SynapseConfig.section_of(f))
                         for f in ABLATIONS[name])}
    assert graph_time == {"no-sleep"}  # sleep_auto runs on the write path
    for name in set(ABLATIONS) - graph_time:
        assert base.query_override(SynapseConfig.ablation(name)) == SynapseConfig.ablation(name)


TURNS = [
    {"text": "Sam went skiing in Whistler with Dana.", "speaker": "Sam", "id": "t1"},
    {"text": "Dana studies architecture in Lisbon.", "speaker": "Dana", "id": "t2"},
    {"text": "I adopted a beagle called Biscuit.", "speaker": "Sam", "id": "t3"},
]


def test_query_override_names_the_graph_time_fields_it_changes() -> None:
    mine = SynapseConfig()
    assert mine.query_override(None) is mine
    other = mine.replace(gate_tau=0.3, reply_weight=0.0, model="ppr")
    assert mine.query_override(other) is other
    with pytest.raises(ConfigError) as err:
        mine.query_override(SynapseConfig.paper())  # abstraction_scope and sleep_auto differ
    message = str(err.value)
    assert "abstraction_scope (graph) 'mentions' -> 'window'" in message
    assert "sleep_auto (lifecycle) True -> False" in message
    assert "set when the memory is opened" in message and "query_time()" in message
    assert "weight_activation" not in message  # query-time changes are not named
    # the paper's query-time settings on this config pass
    taken = mine.query_override(mine.replace(**SynapseConfig.paper().query_time()))
    assert taken.gate_signal == "activation" and taken.abstraction_scope == "mentions"
    with pytest.raises(InvalidTypeError, match="config must be a SynapseConfig"):
        mine.query_override({"gate_tau": 0.3})


def test_a_per_call_config_may_not_change_a_graph_time_field() -> None:
    with Synapse(embedder=HashingEmbedder(), config=SynapseConfig(consolidation_interval=0)) as mem:
        mem.add_turns(TURNS)
        asked = mem.retrieve("Where did Sam go skiing?", k=3)
        # query-time changes apply to this call only
        same = mem.retrieve("Where did Sam go skiing?", k=3, config=mem.config.replace(gate_tau=0.0))
        assert [it.id for it in same.items] == [it.id for it in asked.items]
        assert same.gate_tau == 0.0 and mem.config.gate_tau == 0.25
        for change in ({"dedup_threshold": 0.5}, {"lexical_stemming": False},
                       {"embedding_dim": 8}, {"sleep_auto": False}, {"pagerank_damping": 0.5}):
            (name, value), = change.items()
            section = SynapseConfig.section_of(name)
            with pytest.raises(ConfigError, match=rf"{name} \({section}\) .* -> {value!r}.*"
                                                  "set when the memory is opened"):
                mem.retrieve("Where did Sam go skiing?", config=mem.config.replace(**change))
        # a fresh config differs from this memory's (consolidation_interval=0) in a graph field
        with pytest.raises(ConfigError, match=r"consolidation_interval \(graph\) 0 -> 5"):
            mem.retrieve("Where did Sam go skiing?", config=SynapseConfig(gate_tau=0.1))
        q = mem._embedder.embed_query("Where did Sam go skiing?")
        with pytest.raises(ConfigError, match="dedup_threshold"):
            mem.retrieve_by_vector("Where did Sam go skiing?", q,
                                   config=mem.config.replace(dedup_threshold=0.5))
        with pytest.raises(ConfigError, match="dedup_threshold"):
            mem.feedback("Where did Sam go skiing?", ["t1"],
                         config=mem.config.replace(dedup_threshold=0.5))
        assert mem.retrieve("Where did Sam go skiing?", k=3).items == asked.items  # nothing changed


def test_rest_refuses_a_graph_time_field_per_call(tmp_path) -> None:
    from _server_helpers import rest_server

    from synapse_integrations.server.client import RemoteMemory

    with rest_server(tmp_path / "mem", embedder=HashingEmbedder()) as srv:
        remote = RemoteMemory(srv.url, "sections")
        try:
            remote.add_turns(TURNS)
            ok = remote.retrieve("Where did Sam go skiing?", k=3,
                                 config=remote.config.replace(gate_tau=0.0))
            assert ok.gate_tau == 0.0
            # the client refuses before sending, as a local memory does
            with pytest.raises(ConfigError, match=r"dedup_threshold \(graph\) 0.92 -> 0.5"):
                remote.retrieve("Where did Sam go skiing?",
                                config=remote.config.replace(dedup_threshold=0.5))
            # the raw API: a 400 naming the field and when it is set
            r = httpx.post(f"{srv.url}/v1/namespaces/sections/retrieve",
                           json={"query": "x", "config": {"dedup_threshold": 0.5}})
            assert r.status_code == 400
            error = r.json()["error"]
            assert error["type"] == InvalidInputError.__name__
            assert "'dedup_threshold' is set when the memory is opened" in error["message"]
            assert "section 'graph' is graph-time" in error["message"]
        finally:
            remote.close()

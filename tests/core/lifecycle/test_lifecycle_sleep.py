"""Sleep consolidation (issue 15): facts linked to their source episodes, on demand and
automatically, archiving by policy, persistence, the LLM variant with a fake chat model."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from synapse_integrations import HashingEmbedder, Synapse, SynapseConfig
from synapse_integrations.core.lifecycle.detectors import Lifecycle
from synapse_integrations.core.lifecycle.sleep import LLMSleeper, OfflineSleeper
from synapse_integrations.errors import ConfigError, InvalidTypeError

TURNS = [
    {"text": "I moved to Denver in May for the new nursing job.", "speaker": "Sam", "id": "e1",
     "timestamp": "2024-05-01T08:00:00Z"},
    {"text": "ok thanks! How is the weather there?", "speaker": "Sam", "id": "e2",
     "timestamp": "2024-05-01T08:30:00Z"},
    {"text": "My sister Dana adopted a beagle named Biscuit last week.", "speaker": "Sam",
     "id": "e3", "timestamp": "2024-05-01T10:00:00Z"},
]


def _facts(mem):
    return {n: d for n, d in mem.graph.nodes(data=True) if d.get("ctype") == "Fact"}


def test_sleep_turns_statements_into_facts_linked_to_their_sources(tmp_path) -> None:
    with Synapse(tmp_path / "s", embedder=HashingEmbedder(),
                 config=SynapseConfig(consolidation_interval=0)) as mem:
        mem.add_turns(TURNS)
        report = mem.sleep()
        assert (report.episodes, report.facts_created, report.archived) == (3, 2, 0)
        assert report.compression == 1.5
        facts = _facts(mem)
        by_name = {d["name"]: n for n, d in facts.items()}
        assert set(by_name) == {"Sam: I moved to Denver in May for the new nursing job.",
                                "Sam: My sister Dana adopted a beagle named Biscuit last week."}
        fid = by_name["Sam: I moved to Denver in May for the new nursing job."]
        assert mem.graph.has_edge(fid, "e1") and mem.graph.has_edge("e1", fid)
        assert not mem.graph.has_edge(fid, "e3")  # only its own source
        assert mem.sleep().episodes == 0  # nothing new since
        found = mem.retrieve("Where did Sam move?", k=10, kinds=("episode", "concept"))
        assert fid in {it.id for it in found.items}
    with Synapse.load(tmp_path / "s", embedder=HashingEmbedder()) as again:  # snapshot reload
        assert set(_facts(again)) == set(facts)
        assert again.sleep().episodes == 0  # the last sleep's mark survived


def test_forgetting_the_source_removes_its_fact(tmp_path) -> None:
    with Synapse(embedder=HashingEmbedder(), config=SynapseConfig(consolidation_interval=0)) as mem:
        mem.add_turns(TURNS)
        mem.sleep()
        mem.forget(ids=["e1"])
        assert all("Denver" not in d["name"] for d in _facts(mem).values())


def test_automatic_sleep_after_n_episodes_and_t_event_time(tmp_path) -> None:
    cfg = SynapseConfig(consolidation_interval=0, sleep_auto=True, sleep_episodes=3,
                        sleep_seconds=3600)
    with Synapse(embedder=HashingEmbedder(), config=cfg) as mem:
        mem.add_turns(TURNS[:2])
        assert not _facts(mem)  # 2 episodes: not yet
        mem.add_turns(TURNS[2:])
        assert len(_facts(mem)) == 2  # 3 episodes over 2 hours
    short = [dict(t, timestamp=f"2024-05-01T08:0{i}:00Z") for i, t in enumerate(TURNS)]
    with Synapse(embedder=HashingEmbedder(), config=cfg) as mem:
        mem.add_turns(short)
        assert not _facts(mem)  # 3 episodes within 2 minutes: not an hour yet


def test_archiving_policy_moves_the_sources_out_restorably(tmp_path) -> None:
    cfg = SynapseConfig(consolidation_interval=0, sleep_archive_sources=True)
    with Synapse(embedder=HashingEmbedder(), config=cfg) as mem:
        mem.add_turns(TURNS)
        report = mem.sleep()
        assert report.archived == 2
        assert {a["id"] for a in mem.archived()} == {"e1", "e3"}  # e2 yielded no fact: kept
        assert mem.restore(["e1"]) == ["e1"]


async def test_the_llm_sleeper_with_a_fake_chat_model_and_the_async_twin(tmp_path) -> None:
    reply = ('{"facts": [{"fact": "Sam lives in Denver.", "sources": ["e1", "nope"]}, '
             '{"fact": "Made up.", "sources": ["nope"]}, {"fact": "", "sources": ["e3"]}]}')
    model = FakeListChatModel(responses=[reply])
    with Synapse(embedder=HashingEmbedder(), config=SynapseConfig(consolidation_interval=0),
                 lifecycle=Lifecycle(sleeper=LLMSleeper(model))) as mem:
        await mem.aadd_turns(TURNS)
        report = await mem.asleep()
        assert report.facts_created == 1
        (fid, d), = _facts(mem).items()
        assert d["name"] == "Sam lives in Denver." and mem.graph.has_edge(fid, "e1")


def test_an_unusable_llm_reply_yields_no_fact() -> None:
    sleeper = LLMSleeper(FakeListChatModel(responses=["no json here"]))
    assert sleeper.facts([{"id": "e1", "text": "I moved.", "speaker": "Sam"}]) == []
    assert OfflineSleeper().facts([]) == []


def test_offline_facts_read_every_line_of_a_turn() -> None:
    # a line that ends without a full stop is a sentence too (a list's items): the sentence
    # rule once lost every such line but the last
    turn = {"id": "e1", "speaker": "Sam",
            "text": "Sam: Two things\nI rented a flat near the harbour\nmy sister lives two streets away"}
    assert [c.name for c in OfflineSleeper().facts([turn])] == [
        "Sam: I rented a flat near the harbour", "Sam: my sister lives two streets away"]


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(InvalidTypeError, match="chat model"):
        LLMSleeper(42)
    with pytest.raises(InvalidTypeError, match="sleeper"):
        Lifecycle(sleeper="offline")
    with pytest.raises(ConfigError, match="sleep_seconds"):
        SynapseConfig(sleep_seconds=-1)
    with pytest.raises(ConfigError, match="sleep_episodes"):
        SynapseConfig(sleep_episodes=0)


LONG_TURNS = [
    {"text": "We walked around the harbour market all morning, argued about lunch, bought "
             "bread and cheese, and watched the ferries come in. I adopted a grey cat named "
             "Pepper.", "speaker": "Sam", "id": "long", "timestamp": "2024-05-01T08:00:00Z"},
    {"text": "The ferries were late again because of the wind.", "speaker": "Ana",
     "id": "ferry", "timestamp": "2024-05-01T09:00:00Z"},
]


def _pepper(mem) -> str:
    return next(n for n, d in _facts(mem).items() if "Pepper" in d["name"])


def cosines_lent(mem, question: str) -> float:
    """The long turn's plain cosine as its fact lends it (the fact's own)."""
    view = mem._state.compiled()
    q = mem._embedder.embed_query(question)
    return float(view.embeddings[view.index[_pepper(mem)]] @ q)


def test_a_fact_is_its_sources_evidence_not_an_anchor() -> None:
    """fact_role="evidence" (default): the long turn is as close to the question as its
    one matching sentence (the fact drawn from it), and the fact does not anchor;
    "anchor" lets the fact anchor and leaves the turn at its own cosine."""
    cfg = SynapseConfig(consolidation_interval=0, sleep_auto=False)
    assert cfg.fact_role == "evidence"
    question = "Sam adopted a grey cat named Pepper"
    kinds = ("episode", "concept")
    with Synapse(embedder=HashingEmbedder(), config=cfg) as mem:
        mem.add_turns(LONG_TURNS)
        mem.sleep()
        fid = _pepper(mem)
        anchor = {it.id: it for it in mem.retrieve(question, k=10, kinds=kinds,
                                                   config=cfg.replace(fact_role="anchor")).items}
        evidence = {it.id: it for it in mem.retrieve(question, k=10, kinds=kinds).items}
        own, fact = anchor["long"].components.similarity, anchor[fid].components.similarity
        assert fact > own + 0.1  # the sentence matches far better than the whole turn
        assert anchor[fid].components.dense_rank is not None
        assert evidence["long"].components.similarity == pytest.approx(fact, abs=1e-6)
        assert fid not in evidence or (evidence[fid].components.dense_rank is None
                                       and evidence[fid].components.bm25_rank is None)
        # the gate's topic check judges the top turn's own cosine (its threshold is one
        # on whole turns), not the one its fact lends it
        res = mem.retrieve(question, k=10)
        assert res.items[0].id == "long"
        # (its plain cosine: the ranking's cosines leave the name "Sam" out, speaker_free_cosine)
        view = mem._state.compiled()
        plain = float(view.embeddings[view.index["long"]] @ mem._embedder.embed_query(question))
        assert res.confidence == pytest.approx(plain, abs=1e-6)
        assert plain < cosines_lent(mem, question) - 0.1
        # the ferry turn has no fact: its cosine is its own either way
        assert evidence["ferry"].components.similarity == pytest.approx(
            anchor["ferry"].components.similarity, abs=1e-6)


def test_fact_role_is_validated() -> None:
    with pytest.raises(ConfigError, match="fact_role"):
        SynapseConfig(fact_role="rival")

"""Issue 11: the evidence gate (attribution, presence), its reasons in results and
adapters, and the optional LLM judge (fake chat models)."""

from __future__ import annotations

import asyncio
import re
import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from synapse_integrations import Synapse, SynapseConfig
from synapse_integrations.core.retrieval import gate as G
from synapse_integrations.core.text import subjects as S
from synapse_integrations.core.index.bm25 import BM25Index
from synapse_integrations.errors import ConfigError, InvalidInputError

TURNS = [
    {"text": "Melanie: I ran a charity race last Sunday for mental health.", "speaker": "Melanie"},
    {"text": "Caroline: That charity race sounds great, Mel!", "speaker": "Caroline"},
    {"text": "Melanie: After the race I realized self-care really matters.", "speaker": "Melanie"},
    {"text": "Caroline: I have been researching adoption agencies this week.", "speaker": "Caroline"},
    {"text": "Melanie: How is the adoption research going?", "speaker": "Melanie"},
    {"text": "Caroline: Slowly, but the agency in Portland looks promising.", "speaker": "Caroline"},
]


@pytest.fixture(scope="module")
def mem(embedder):
    with Synapse(None, namespace="gate", embedder=embedder) as m:
        m.add_turns(TURNS)
        yield m


def test_kernels_against_hand_computed_values():
    idx = BM25Index()
    idx.set({"a": "Mel ran a charity race", "b": "the race was fun", "c": "hello"})
    cov, used, mass = idx.coverage(["charity", "race"], {"a": 0, "b": 1, "c": 2}, 3, np.ones(3, dtype=bool))
    # idf = ln(1 + (N - df + .5) / (df + .5)) over the 3 eligible documents
    idf_c, idf_r = np.log(1 + 2.5 / 1.5), np.log(1 + 1.5 / 2.5)
    assert cov == pytest.approx([1.0, idf_r / (idf_c + idf_r), 0.0])
    assert mass == pytest.approx(idf_c + idf_r) and used == ["charity", "race"]
    gap, other, subject = G.attribution_gap(np.array([0.3, 0.8, 0.5, 0.1]),
                                            np.array([True, False, True, False]),
                                            np.array([False, True, False, True]))
    assert (gap, other, subject) == (pytest.approx(0.3), 1, 2)
    assert G.presence(np.array([0.4, 0.8]), np.array([True, False]), 0.5) == (pytest.approx(0.2), 0)
    assert S.attribute_terms("What kind of dog does Sam have now?", ["Sam"]) == ["dog"]
    assert G.resolve_terms(["camped", "dogs", "goldfish"], {"camping", "dog"}.__contains__) == [
        "camping", "dog", "goldfish"]
    assert S.named_subjects("What did Caroline say about Melanie's race?", ["Caroline", "Melanie"]) == \
        ["Caroline", "Melanie"]
    assert G.turn_about("Melanie: How is the adoption research going?", "Melanie",
                        ["Caroline", "Melanie"]) == {"Caroline"}
    assert G.turn_about("Melanie: I ran a race.", "Melanie", ["Caroline", "Melanie"]) == {"Melanie"}


_NAME = st.text("abcdeMNOPxyz", min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(names=st.lists(_NAME, min_size=1, max_size=5, unique=True),
       words=st.lists(st.text("abcdeMNOxyz?! ", max_size=9), max_size=8),
       speaker_at=st.integers(0, 5))
def test_whom_a_turn_addresses_is_any_name_a_word_of_it_starts(names, words, speaker_at):
    # the rule in plain words: a name is addressed when a word of 3+ letters of the turn
    # is the start of it (case aside); turn_about reads it from a table of prefixes
    speaker = names[speaker_at] if speaker_at < len(names) else None
    body = " ".join(words)
    text = f"{speaker}: {body}" if speaker else body
    said = {w for w in re.findall(r"[a-z]{3,}", body.lower())}
    addressed = [n for n in names if n != speaker and any(n.lower().startswith(w) for w in said)]
    about = G.turn_about(text, speaker, names)
    if addressed:
        assert about - {speaker} == set(addressed)
    else:
        assert not (about - {speaker}) or about - {speaker} == set(names) - {speaker}


def test_attribution_rejects_a_question_about_the_wrong_person(mem):
    wrong = mem.retrieve("What did Caroline realize after her charity race?", k=3)
    assert wrong.rejected and wrong.verdict.check == "attribution"
    assert "Caroline" in wrong.reason and "Melanie" in wrong.reason
    assert mem.get(wrong.verdict.evidence_id)["speaker"] == "Melanie"
    assert wrong.items  # still there for inspection
    right = mem.retrieve("What did Melanie realize after the charity race?", k=3)
    assert not right.rejected and right.verdict.check == "accepted"
    # a question to the subject is about the subject: Melanie asking about adoption
    # research does not make it Melanie's
    asked = mem.retrieve("What is Caroline researching?", k=3)
    assert not asked.rejected, asked.reason
    # switched off: only the topic check
    off = mem.retrieve("What did Caroline realize after her charity race?", k=3,
                       config=mem.config.replace(use_evidence_gate=False))
    assert not off.rejected and "attribution_gap" not in off.verdict.signals


def test_presence_check_rejects_details_never_said(mem):
    cfg = mem.config
    assert cfg.gate_presence_min == 0.01  # on by default
    dog = mem.retrieve("What is Melanie's dog called?", k=3, config=cfg)  # no dog anywhere
    assert dog.rejected and dog.verdict.check == "presence" and "'dog'" in dog.reason
    assert dog.verdict.signals["presence"] == 0.0
    # an inflection of a word memory holds counts as held ("agencies" for "agency")
    assert not mem.retrieve("Which agency does Caroline like?", k=3, config=cfg).rejected
    assert not mem.retrieve("What are Caroline's adoption agencies?", k=3, config=cfg).rejected
    # switched off (minimum 0): measured, not deciding
    off = mem.retrieve("What is Melanie's dog called?", k=3, config=cfg.replace(gate_presence_min=0.0))
    assert not off.rejected and off.verdict.signals["presence"] == 0.0


def test_the_checks_read_the_turns_they_need_not_every_turn(monkeypatch):
    """Whom a turn is about is worked out for the turns a check reads (those holding the
    question's words, the evidence found, the first turn about the person), not for every
    turn of the memory: a never-said question naming a person in a memory of 1,200 turns
    reads a few hundred at most, and its verdict is the one every turn would give."""
    from synapse_integrations import HashingEmbedder
    from synapse_integrations.storage.chroma import ephemeral_client

    hobbies = ["hiking", "baking", "chess", "painting", "cycling", "gardening"]
    turns = [{"text": f"{who}: I enjoyed {hobbies[k % 6]} on day {k}.", "speaker": who,
              "timestamp": 1_700_000_000 + 60 * k}
             for k, who in enumerate(["Bo", "Ann"] * 600)]
    calls = []
    about = G.turn_about
    monkeypatch.setattr(G, "turn_about", lambda *a: calls.append(a[0]) or about(*a))
    with Synapse(None, namespace="gate-reads", embedder=HashingEmbedder(),
                 client=ephemeral_client(), snapshot_every=10**9) as m:
        m.add_turns(turns)
        cfg = m.config.replace(gate_tau=0.0)  # hashed vectors: the topic check would decide
        never = m.retrieve("What is the name of Ann's goldfish?", config=cfg)
        assert never.rejected and never.verdict.check == "presence"
        assert never.verdict.evidence_id == m.episodes()[1]["id"]  # Ann's first turn
        assert 0 < len(calls) <= 300
        calls.clear()
        said = m.retrieve("When was Ann baking?", config=cfg)  # Ann's turns: 1 in 6 bake
        assert not said.rejected and said.verdict.check == "accepted"
        assert len(calls) <= 200 + 5  # the turns holding "baking", and the evidence found
        calls.clear()
        m.retrieve("What is the name of Ann's goldfish?", config=cfg)
        m.retrieve("When was Ann baking?", config=cfg)
        assert len(calls) <= 5  # read once per turn, then kept (the evidence may differ)


def test_presence_by_meaning_kernels_against_hand_computed_values():
    # turn 0 links concepts 0 and 1, turn 1 concept 2, turn 2 none
    links = sp.csr_array(np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]]))
    concepts = np.array([[0.6, 0.8], [0.0, 1.0], [1.0, 0.0]])
    terms = np.array([[1.0, 0.0], [0.0, 1.0]])
    # cosines term x concept: [[0.6, 0, 1], [0.8, 1, 0]]
    got = G.semantic_cover(terms, concepts, links, 0.7)
    assert got.tolist() == [[False, True], [True, False], [False, False]]
    assert G.semantic_cover(terms, concepts, links, 0.5).tolist() == [[True, True], [True, False],
                                                                       [False, False]]
    covered = np.array([[True, False], [True, True], [False, False]])
    assert G.term_presence(covered, np.array([2.0, 6.0]), np.array([True, False, True])) == (0.25, 0)
    assert G.term_presence(covered, np.array([2.0, 6.0]), np.array([False, True, False])) == (1.0, 1)
    assert G.term_presence(covered, np.array([2.0, 6.0]), np.zeros(3, dtype=bool)) == (0.0, -1)


def test_presence_matches_paraphrases_by_meaning(embedder):
    """"dog" is held by a memory of a beagle puppy, not by one of hiking and painting."""
    cfg = SynapseConfig()  # presence on by default
    with Synapse(None, namespace="pup", embedder=embedder, config=cfg) as m:
        m.add_turns([{"text": "I adopted a beagle puppy last week.", "speaker": "user"},
                     {"text": "Congratulations! What did you name him?", "speaker": "assistant"}])
        for q in ("Do I have a dog?", "What is my dog called?"):
            r = m.retrieve(q, k=3)
            assert not r.rejected, r.reason
            assert r.verdict.signals["presence"] == 1.0
        # words only (similarity 1): the paraphrase is refused
        words = m.retrieve("Do I have a dog?", k=3, config=cfg.replace(gate_presence_similarity=1.0))
        assert words.rejected and words.verdict.check == "presence"
    with Synapse(None, namespace="hike", embedder=embedder, config=cfg) as m:
        m.add_turns([{"text": "Sam: I went hiking in the mountains on Sunday.", "speaker": "Sam"},
                     {"text": "Dana: I love painting landscapes.", "speaker": "Dana"},
                     {"text": "Sam: Painting sounds fun, Dana.", "speaker": "Sam"}])
        r = m.retrieve("What is Sam's dog called?", k=3)
        assert r.rejected and r.verdict.check == "presence" and "'dog'" in r.reason


JOANNA = [("Joanna", "My favourite type of movie is a slow thriller."),
          ("Nate", "Nice, I like that type too."),
          ("Joanna", "What type of screenplay should I write next?"),
          ("Nate", "Maybe a comedy type of story."),
          ("Joanna", "I think the drama type suits me best."),
          ("Nate", "That type of script sells well."),
          ("Joanna", "I squeezed a jug of fresh orange juice this morning."),
          ("Nate", "Fresh juice, nice start to the day!"),
          ("Joanna", "Any type of feedback on my draft helps."),
          ("Joanna", "My cousin prefers a different type of film."),
          ("Joanna", "This type of weather makes me want to write."),
          ("Joanna", "I need a new type of notebook for ideas."),
          ("Joanna", "Nate, which type of ending do you like?")]


def test_presence_by_meaning_reads_only_the_evidence_found(embedder, monkeypatch):
    """"blood" is 0.55 from "juice" in MiniLM: a chance neighbour. Read through the
    concepts of every turn about Joanna, the orange-juice turn would hold the never-said
    "blood type"; presence by meaning reads only the first ``EVIDENCE_TURNS`` memories the
    retrieval placed (here the turns sharing "type"), so the question is refused."""
    with Synapse(None, namespace="blood", embedder=embedder) as m:
        ids = m.add_turns([{"text": f"{s}: {t}", "speaker": s} for s, t in JOANNA])
        m.consolidate()
        q = "What is Joanna's blood type?"
        r = m.retrieve(q, k=10)
        assert ids[6] not in [it.id for it in r.items[:G.EVIDENCE_TURNS]]
        assert r.rejected and r.verdict.check == "presence" and "'blood'" in r.reason, r.reason
        monkeypatch.setattr(G, "EVIDENCE_TURNS", len(JOANNA))  # every turn read by meaning
        assert not m.retrieve(q, k=10).rejected


def test_a_date_in_the_question_is_no_word_presence_looks_for(embedder):
    """"on 25 May, 2022" is when, matched against the turns' times (core/focus.py): its
    words are no attribute terms, so a question that asks only what happened that day is
    not refused because no turn writes the date out."""
    assert S.attribute_terms("What did Nate do for Joanna on 25 May, 2022?", ["Joanna", "Nate"]) == []
    assert S.attribute_terms("What did Nate bake in May 2022?", ["Nate"]) == ["bake"]
    may25 = 1653480000  # 2022-05-25 12:00 UTC
    with Synapse(None, namespace="dated", embedder=embedder) as m:
        m.add_turns([{"text": "Nate: I baked a chocolate cake for your birthday, Joanna!",
                      "speaker": "Nate", "timestamp": may25},
                     {"text": "Joanna: Thank you, it was delicious!", "speaker": "Joanna",
                      "timestamp": may25 + 60},
                     {"text": "Nate: My turtles are sleeping all day.", "speaker": "Nate",
                      "timestamp": may25 + 86400 * 40}])
        r = m.retrieve("What did Nate do for Joanna on 25 May, 2022?", k=3)
        assert not r.rejected, r.reason
        assert "presence" not in r.verdict.signals


def test_first_person_questions_can_name_the_user(embedder):
    """gate_first_person: "my"/"I" questions are about that speaker (off by default)."""
    with Synapse(None, namespace="fp", embedder=embedder) as m:
        m.add_turns([{"text": "I ran a charity race last Sunday.", "speaker": "user"},
                     {"text": "Charity races raise a lot for mental health research.",
                      "speaker": "assistant"},
                     {"text": "My sister Ana lives in Lisbon.", "speaker": "user"}])
        q = "What did I realize after my charity race?"
        assert "attribution_gap" not in m.retrieve(q, k=3).verdict.signals
        on = m.retrieve(q, k=3, config=m.config.replace(gate_first_person="user"))
        assert "attribution_gap" in on.verdict.signals
        # a speaker the memory does not have changes nothing
        other = m.retrieve(q, k=3, config=m.config.replace(gate_first_person="Human"))
        assert "attribution_gap" not in other.verdict.signals


def test_config_bounds_and_paper_preset():
    with pytest.raises(ConfigError, match="gate_attribution_margin"):
        SynapseConfig(gate_attribution_margin=1.5)
    with pytest.raises(ConfigError, match="gate_presence_min"):
        SynapseConfig(gate_presence_min=-0.1)
    with pytest.raises(ConfigError, match="gate_presence_similarity"):
        SynapseConfig(gate_presence_similarity=1.2)
    with pytest.raises(ConfigError, match="gate_first_person"):
        SynapseConfig(gate_first_person=None)
    assert SynapseConfig.paper().use_evidence_gate is False


def test_reasons_reach_the_adapters(mem):
    from langchain_core.callbacks import BaseCallbackHandler

    from synapse_integrations._adapter_utils import format_memories
    from synapse_integrations.langchain import SynapseRetriever

    result = mem.retrieve("What did Caroline realize after her charity race?", k=3)
    text = format_memories(result)
    assert text.startswith("Nothing relevant in memory.") and "not about Caroline" in text

    class Catch(BaseCallbackHandler):
        def __init__(self):
            self.events = []

        def on_custom_event(self, name, data, **kw):
            self.events.append((name, data))

    catch = Catch()
    docs = SynapseRetriever(engine=mem, k=3).invoke(result.query, config={"callbacks": [catch]})
    assert docs == []
    gate = dict(catch.events)["synapse_gate"]
    assert gate["check"] == "attribution" and gate["evidence_id"] == result.verdict.evidence_id


class _Slow:
    """A chat model that never answers in time."""

    def invoke(self, prompt):
        time.sleep(2)
        return "{}"

    async def ainvoke(self, prompt):
        await asyncio.sleep(2)
        return "{}"


def test_llm_judge_decides_caches_and_falls_back(mem):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from synapse_integrations.gate_judge import LLMGateJudge

    accepted = mem.retrieve("What did Melanie realize after the charity race?", k=3)
    assert not accepted.rejected
    no = LLMGateJudge(FakeListChatModel(responses=['{"supported": false, "quote": ""}']))
    judged = no.review(accepted)
    assert judged.rejected and judged.verdict.check == "judge" and judged.items == accepted.items
    # cached per question and evidence: the fake model's single reply is not asked again
    assert no.review(accepted).verdict == judged.verdict
    yes = LLMGateJudge(FakeListChatModel(responses=[
        'Here: {"supported": true, "quote": "self-care really matters"}']))
    assert not asyncio.run(yes.areview(accepted)).rejected
    garbled = LLMGateJudge(FakeListChatModel(responses=["I think so"])).review(accepted)
    assert not garbled.rejected and "not the JSON" in garbled.reason
    slow = LLMGateJudge(_Slow(), timeout_s=0.2)
    assert "longer than 0.2s" in slow.review(accepted).reason
    assert "longer than 0.2s" in asyncio.run(slow.areview(accepted)).reason
    # offline rejections stand without asking the model
    wrong = mem.retrieve("What did Caroline realize after her charity race?", k=3)
    assert no.review(wrong) is wrong
    with pytest.raises(InvalidInputError, match="timeout_s"):
        LLMGateJudge(FakeListChatModel(responses=["x"]), timeout_s=0)
    with pytest.raises(InvalidInputError, match="chat model"):
        LLMGateJudge("gpt")

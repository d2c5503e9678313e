"""Tests of the concept extractors (offline and LLM) and of ``window_stats``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import pytest

from synapse_integrations.core.ingest.extraction import (
    BaseExtractor, ExtractionSchema, Extractor, ExtractorStats, LLMExtractor, OfflineExtractor,
    window_stats,
)
from synapse_integrations.errors import (
    ConfigError,
    ExtractionError,
    InvalidTypeError,
    MissingDependencyError,
)
from synapse_integrations.types import Concept, Extraction, Relation, Turn


def names(extraction: Extraction) -> list[str]:
    return [c.name for c in extraction.concepts]


def by_name(extraction: Extraction) -> dict[str, Concept]:
    return {c.name: c for c in extraction.concepts}


WINDOW = (
    Turn("t1", "Yesterday I met Dr. Seuss's biggest fan in New York.", speaker="Caroline"),
    Turn("t2", "The fan club sounds fun! Did Caroline take photos?", speaker="Melanie"),
    Turn("t3", "Melanie, you'd love New York. The museums there are great.", speaker="Caroline"),
    Turn("t4", "I would! My kids adore museums and painting.", speaker="Melanie"),
    Turn("t5", "Then we should plan a trip in May 2024, maybe 3 days.", speaker="Caroline"),
)


# --------------------------------------------------------------------------------------
# Offline extractor
# --------------------------------------------------------------------------------------


class TestOfflineExtractor:
    def test_speakers_and_named_entities(self):
        result = OfflineExtractor().extract(WINDOW)
        concepts = by_name(result)
        assert concepts["Caroline"].type == "Person"
        assert concepts["Melanie"].type == "Person"
        assert concepts["Dr. Seuss"].type == "Entity"
        assert concepts["New York"].type == "Entity"
        # speakers first, then named entities (more mentions first), then key phrases
        assert names(result)[:4] == ["Caroline", "Melanie", "New York", "Dr. Seuss"]

    def test_sentence_initial_common_words_are_not_entities(self):
        found = names(OfflineExtractor(max_concepts=50).extract(WINDOW))
        lowered = {n.lower() for n in found}
        assert not lowered & {"yesterday", "the", "then", "i", "my", "did", "may"}
        assert not any("'" in n or "," in n for n in found)  # possessives, punctuation stripped

    def test_source_ids(self):
        concepts = by_name(OfflineExtractor(max_concepts=50).extract(WINDOW))
        assert concepts["New York"].source_ids == ("t1", "t3")
        assert concepts["Dr. Seuss"].source_ids == ("t1",)
        # a speaker's turns are the ones they spoke or that name them
        assert concepts["Caroline"].source_ids == ("t1", "t3", "t5", "t2")
        assert concepts["Melanie"].source_ids == ("t2", "t4", "t3")
        assert concepts["museum"].source_ids == ("t3", "t4")
        assert concepts["museum"].type == "Topic"
        assert concepts["museum"].attributes == {"kind": "phrase", "mentions": 2}

    def test_key_phrases_are_normalised(self):
        concepts = by_name(OfflineExtractor(max_concepts=50).extract(WINDOW))
        assert "museum" in concepts and "museums" not in concepts  # plural stripped
        assert "kid" in concepts and "painting" in concepts and "fan" in concepts
        for c in concepts.values():
            if c.type == "Topic":
                assert c.name == c.name.lower()
        # chat words, common verbs and adjectives are not topics
        for word in ("great", "love", "adore", "biggest", "sound", "fun", "plan"):
            assert word not in concepts

    def test_two_word_phrases_need_two_mentions(self):
        window = [
            Turn("a", "The ski trip was great, we booked two ski trips!", speaker="Ann"),
            Turn("b", "My kids adore skiing.", speaker="Bo"),
        ]
        concepts = by_name(OfflineExtractor(max_concepts=50).extract(window))
        assert concepts["ski trip"].attributes["mentions"] == 2
        assert "ski" in concepts and "trip" in concepts  # the words stay concepts
        assert "kid adore" not in concepts  # said once: not a phrase

    def test_numbers_and_dates_are_not_concepts(self):
        window = [
            Turn("a", "In 2023 we ran 5 km on 12/05/2023 at 3pm, my 2nd race in May.", "Ann"),
            Turn("b", "On Friday I turned 30! The 90s were great, 100%.", speaker="Bo"),
        ]
        result = OfflineExtractor(max_concepts=50).extract(window)
        for concept in result.concepts:
            assert not any(ch.isdigit() for ch in concept.name), concept
        lowered = {n.lower() for n in names(result)}
        assert not lowered & {"may", "friday", "90s", "2nd"}
        assert "race" in lowered

    def test_bridge_concept_across_sessions(self):
        session_1 = [
            Turn("D1:1", "I went skiing with Mark last weekend.", speaker="Caroline"),
            Turn("D1:2", "Fun! Was it cold?", speaker="Melanie"),
        ]
        session_7 = [
            Turn("D7:3", "Do you still talk to Mark from the ski trip?", speaker="Melanie"),
            Turn("D7:4", "Yes, we are planning another trip.", speaker="Caroline"),
        ]
        ex = OfflineExtractor()
        first, second = by_name(ex.extract(session_1)), by_name(ex.extract(session_7))
        assert first["Mark"].type == second["Mark"].type == "Entity"
        assert first["Mark"].source_ids == ("D1:1",)
        assert second["Mark"].source_ids == ("D7:3",)

    def test_sentence_initial_name_needs_evidence(self):
        ex = OfflineExtractor(max_concepts=50)
        # alone at the start of a sentence, a capitalised word may be a common word
        alone = by_name(ex.extract([Turn("a", "Pottery is my new hobby.")]))
        assert "Pottery" not in alone and "pottery" in alone
        # written capitalised mid-sentence elsewhere in the window, it is a name
        window = [Turn("a", "Mark called."), Turn("b", "What did Mark say?")]
        assert by_name(ex.extract(window))["Mark"].source_ids == ("a", "b")
        # acronyms count without evidence
        assert "LGBTQ" in by_name(ex.extract([Turn("a", "LGBTQ rights matter.")]))

    def test_names_the_memory_holds_count_at_the_start_of_a_sentence(self):
        ex = OfflineExtractor(max_concepts=50)
        window = [Turn("a", "Agnes baked a lemon drizzle cake.", speaker="Nate")]
        # alone, "Agnes" could be a common word: a topic, its plural "s" stripped
        alone = by_name(ex.extract(window))
        assert "Agnes" not in alone and alone["agne"].type == "Topic"
        # told the memory's names (any case), it is the entity those turns name
        told = by_name(ex.extract(window, names=["agnes", "Old Betsy"]))
        assert told["Agnes"].type == "Entity" and told["Agnes"].source_ids == ("a",)
        assert "agne" not in told
        # a name it is told does not make a common word mid-sentence a name
        assert "Lemon" not in by_name(ex.extract(window, names=["lemon"]))
        assert asyncio.run(ex.aextract(window, names=["Agnes"])).concepts == \
            ex.extract(window, names=["Agnes"]).concepts

    def test_multiword_names(self):
        text = (
            "We watched Lord of the Rings and Harry Potter at Universal Studios, "
            "then read George R. R. Martin."
        )
        found = names(OfflineExtractor(max_concepts=50).extract([Turn("a", text)]))
        expected = ("Lord of the Rings", "Harry Potter", "Universal Studios", "George R. R. Martin")
        assert set(expected) <= set(found)

    def test_possessive_and_punctuation_stripped(self):
        found = names(OfflineExtractor().extract([Turn("a", "I love Emma's garden (in Seattle)!")]))
        assert "Emma" in found and "Seattle" in found

    def test_speaker_prefix_and_short_forms(self):
        window = [
            Turn("a", "Caroline: The parade was great, Mel!", speaker="Caroline"),
            Turn("b", "Melanie: Glad you had fun.", speaker="Melanie"),
        ]
        result = OfflineExtractor().extract(window)
        concepts = by_name(result)
        assert "The" not in concepts and "Mel" not in concepts
        assert concepts["Melanie"].source_ids == ("b", "a")
        assert concepts["Melanie"].attributes["aliases"] == ["Mel"]
        assert "parade" in concepts

    def test_case_insensitive_dedup(self):
        window = [Turn("a", "We visited Paris in spring."), Turn("b", "Did you like paris? PARIS!")]
        found = [n.lower() for n in names(OfflineExtractor(max_concepts=50).extract(window))]
        assert found.count("paris") == 1
        assert len(found) == len(set(found))

    def test_cap_keeps_speakers_and_entities_first(self):
        text = " ".join(
            f"{w} with Alice and Bob in Chicago." for w in ("Cooking", "Gardening", "Skating")
        ) + " The pottery, violin, chess, hiking, surfing, baking, knitting and camping."
        ex = OfflineExtractor(max_concepts=4)
        result = ex.extract([Turn("a", text, speaker="Zoe")])
        assert names(result) == ["Zoe", "Alice", "Bob", "Chicago"]
        assert len(OfflineExtractor(max_concepts=7).extract([Turn("a", text)]).concepts) == 7

    def test_confidence_in_unit_interval_and_ranked(self):
        result = OfflineExtractor(max_concepts=50).extract(WINDOW)
        for c in result.concepts:
            assert 0.0 <= c.confidence <= 1.0
        topics = [c for c in result.concepts if c.type == "Topic"]
        assert topics == sorted(topics, key=lambda c: -c.confidence)

    def test_co_mentioned_relations(self):
        result = OfflineExtractor().extract(WINDOW)
        assert Relation("Dr. Seuss", "co_mentioned", "New York", weight=0.5) in result.relations
        assert Relation("Melanie", "co_mentioned", "New York", weight=0.5) in result.relations
        text = "Ann, Bob, Cid, Dee, Eve and Fay met Gus."
        many = OfflineExtractor(max_relations=3).extract([Turn("a", text)])
        assert len(many.relations) == 3
        assert all(r.rel == "co_mentioned" and r.weight == 0.5 for r in many.relations)

    def test_deterministic(self):
        first = OfflineExtractor().extract(WINDOW)
        assert OfflineExtractor().extract(WINDOW) == first
        assert OfflineExtractor().extract(list(WINDOW)) == first

    def test_empty_window(self):
        assert OfflineExtractor().extract([]) == Extraction()
        assert OfflineExtractor().extract([Turn("a", "")]) == Extraction()
        assert OfflineExtractor().extract([Turn("a", "", speaker="Ann")]).concepts[0].name == "Ann"

    def test_bad_input(self):
        with pytest.raises(InvalidTypeError, match="Turn"):
            OfflineExtractor().extract(["just a string"])  # type: ignore[list-item]
        with pytest.raises(InvalidTypeError):
            OfflineExtractor().extract("text")  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            OfflineExtractor(max_concepts=0)
        with pytest.raises(ConfigError):
            OfflineExtractor(max_relations=-1)

    def test_fast(self):
        ex = OfflineExtractor()
        ex.extract(WINDOW)
        start = time.perf_counter()
        for _ in range(200):
            ex.extract(WINDOW)
        assert (time.perf_counter() - start) / 200 < 0.005

    async def test_aextract(self):
        assert await OfflineExtractor().aextract(WINDOW) == OfflineExtractor().extract(WINDOW)

    def test_protocol(self):
        assert isinstance(OfflineExtractor(), Extractor)
        assert isinstance(OfflineExtractor(), BaseExtractor)


class _Upper(BaseExtractor):
    def extract(self, turns):
        return Extraction(concepts=tuple(Concept(t.text.upper()) for t in turns))


async def test_base_extractor_default_aextract_runs_extract():
    result = await _Upper().aextract([Turn("a", "hi")])
    assert names(result) == ["HI"]


def test_window_stats():
    windows = [
        [Turn("a", "I play chess with Mark.", speaker="Ann")],
        [Turn("b", "Is Mark good at chess?", speaker="Bo")],
        [Turn("c", "Hello there.", speaker="Bo")],
    ]
    stats = window_stats(OfflineExtractor(), windows)
    assert stats["windows"] == 3
    assert stats["concepts_mean"] == pytest.approx((3 + 3 + 1) / 3, abs=1e-3)
    assert stats["entity_window_share"] == pytest.approx(2 / 3, abs=1e-3)
    assert stats["distinct_concepts"] == 4  # ann, bo, mark, chess
    assert stats["recurring_concept_share"] == 0.75  # bo, mark, chess
    assert stats["types"] == {"Entity": 2, "Person": 3, "Topic": 2}
    assert stats["ms_mean"] >= 0 and stats["ms_p95"] >= stats["ms_median"] - 1e-9
    json.dumps(stats)
    assert window_stats(OfflineExtractor(), []) == {"windows": 0}


# --------------------------------------------------------------------------------------
# LLM extractor (langchain-core's fake chat models; no network)
# --------------------------------------------------------------------------------------

lc_messages = pytest.importorskip("langchain_core.messages")
fake_models = pytest.importorskip("langchain_core.language_models.fake_chat_models")
AIMessage = lc_messages.AIMessage
FakeListChatModel = fake_models.FakeListChatModel
GenericFakeChatModel = fake_models.GenericFakeChatModel

LLM_WINDOW = (
    Turn("t1", "John bought a green jacket for camping.", speaker="John"),
    Turn("t2", "Nice! Are you taking it on the airport trip?", speaker="Maria"),
    Turn("t3", "Yes, the Airport Trip is on Friday.", speaker="John"),
)

VALID = {
    "nodes": [
        {"name": "John", "type": "Person", "confidence": 0.9,
         "attributes": {"owns": "green jacket"}},
        {"name": "Camping", "type": "Preference", "confidence": 0.95},
        {"name": "Airport Trip", "type": "Event", "time": "Friday"},
    ],
    "edges": [
        {"src": "John", "rel": "HAS_INTEREST", "tgt": "Camping", "w": 1.0},
        {"src": "Airport Trip", "rel": "INVOLVES", "tgt": "John", "weight": 0.8},
    ],
}


def fake(*replies: str | AIMessage) -> GenericFakeChatModel:
    messages = [r if isinstance(r, AIMessage) else AIMessage(content=r) for r in replies]
    return GenericFakeChatModel(messages=iter(messages))


def recording(seen: list[list]) -> type[FakeListChatModel]:
    """A fake chat model class that appends the messages of every call to ``seen``."""

    class Recorder(FakeListChatModel):
        def invoke(self, messages, *args, **kwargs):  # type: ignore[override]
            seen.append(list(messages))
            return super().invoke(messages, *args, **kwargs)

    return Recorder


class TestLLMExtractor:
    def test_valid_json(self):
        ex = LLMExtractor(fake(json.dumps(VALID)))
        result = ex.extract(LLM_WINDOW)
        assert names(result) == ["John", "Camping", "Airport Trip"]
        concepts = by_name(result)
        assert concepts["John"].type == "Person"
        assert concepts["John"].attributes == {"owns": "green jacket"}
        assert concepts["Airport Trip"].attributes == {"time": "Friday"}  # loose keys kept
        assert concepts["Airport Trip"].confidence == 1.0  # default
        # source ids: case-insensitive whole-word mentions (and the speaker's own turns)
        assert concepts["John"].source_ids == ("t1", "t3")
        assert concepts["Camping"].source_ids == ("t1",)
        assert concepts["Airport Trip"].source_ids == ("t2", "t3")
        assert result.relations == (
            Relation("John", "HAS_INTEREST", "Camping", 1.0),
            Relation("Airport Trip", "INVOLVES", "John", 0.8),
        )
        assert ex.stats == ExtractorStats(calls=1)

    def test_fenced_json_with_prose(self):
        reply = "Sure! Here is the graph:\n```json\n" + json.dumps(VALID, indent=2) + "\n```\nDone."
        result = LLMExtractor(FakeListChatModel(responses=[reply])).extract(LLM_WINDOW)
        assert names(result) == ["John", "Camping", "Airport Trip"]
        bare = "The nodes are " + json.dumps(VALID) + " as requested."
        assert LLMExtractor(FakeListChatModel(responses=[bare])).extract(LLM_WINDOW) == result

    def test_bare_list_of_nodes(self):
        reply = json.dumps([{"name": "Camping", "type": "Preference"}])
        assert names(LLMExtractor(fake(reply)).extract(LLM_WINDOW)) == ["Camping"]

    def test_malformed_then_valid_retries_once(self):
        model = fake("I think John likes camping.", json.dumps(VALID))
        ex = LLMExtractor(model)
        result = ex.extract(LLM_WINDOW)
        assert names(result) == ["John", "Camping", "Airport Trip"]
        assert ex.stats == ExtractorStats(calls=2, retries=1, fallbacks=0)

    def test_retry_message_says_what_was_wrong(self):
        seen: list[list] = []
        Recorder = recording(seen)
        ex = LLMExtractor(Recorder(responses=['{"nodes": [{"type": "Event"}]}', json.dumps(VALID)]))
        ex.extract(LLM_WINDOW)
        assert len(seen) == 2 and len(seen[1]) == len(seen[0]) + 2
        retry = seen[1][-1].content
        assert "could not be used" in retry and "name" in retry
        assert "[t1] John: John bought a green jacket" in seen[0][1].content

    def test_malformed_twice_falls_back_to_offline(self):
        ex = LLMExtractor(fake("no json here", "{not json either"))
        result = ex.extract(LLM_WINDOW)
        assert result == OfflineExtractor().extract(LLM_WINDOW)
        assert ex.stats == ExtractorStats(calls=2, retries=1, fallbacks=1)

    def test_known_names_shown_to_the_model_and_given_to_the_fallback(self):
        seen: list[list] = []
        Recorder = recording(seen)
        window = [Turn("a", "Agnes baked a lemon drizzle cake in new york.", speaker="Nate")]
        known = ["agnes", "New York", "nate", "Old Betsy"]
        LLMExtractor(Recorder(responses=[json.dumps(VALID)])).extract(window, names=known)
        # the names the window says, as it spells them; not the speaker, not the absent one
        assert seen[0][1].content.endswith(
            "Names this memory already holds (reuse them as written): Agnes, new york")
        # no known name in the window: no such line
        LLMExtractor(Recorder(responses=[json.dumps(VALID)])).extract(window, names=["bob"])
        assert "already holds" not in seen[1][1].content
        # a failed model hands the names to the offline fallback: "Agnes" stays a name
        offline = OfflineExtractor()
        failed = LLMExtractor(fake("x", "y"), fallback=offline)
        assert failed.extract(window, names=known) == offline.extract(window, names=known)
        assert "Agnes" in names(failed.extract(window, names=known))
        assert "Agnes" not in names(failed.extract(window))
        assert asyncio.run(failed.aextract(window, names=known)) == \
            offline.extract(window, names=known)

    def test_custom_fallback_and_strict(self):
        sentinel = Extraction(concepts=(Concept("fallback"),))

        class Fixed(BaseExtractor):
            def extract(self, turns):
                return sentinel

        assert LLMExtractor(fake("x", "y"), fallback=Fixed()).extract(LLM_WINDOW) is sentinel
        with pytest.raises(ExtractionError, match="malformed"):
            LLMExtractor(fake("x", "y"), strict=True).extract(LLM_WINDOW)

    def test_model_error_falls_back(self):
        class Broken(FakeListChatModel):
            def invoke(self, *args, **kwargs):  # type: ignore[override]
                raise ConnectionError("network down")

        ex = LLMExtractor(Broken(responses=["unused"]))
        assert ex.extract(LLM_WINDOW) == OfflineExtractor().extract(LLM_WINDOW)
        assert ex.stats == ExtractorStats(calls=1, retries=0, fallbacks=1)
        with pytest.raises(ExtractionError, match="network down") as info:
            LLMExtractor(Broken(responses=["unused"]), strict=True).extract(LLM_WINDOW)
        assert isinstance(info.value.__cause__, ConnectionError)

    def test_invalid_edges_dropped_and_values_clamped(self):
        reply = {
            "nodes": [
                {"name": "  John  ", "type": "Person", "confidence": 1.7},
                {"name": "camping", "type": "Preference", "confidence": -0.2},
                {"name": "   ", "type": "Event"},  # empty after strip: dropped
                {"name": "JOHN", "type": "Person"},  # duplicate: merged
            ],
            "edges": [
                {"src": "john", "rel": "LIKES", "tgt": "Camping", "weight": 3},
                {"src": "John", "rel": "KNOWS", "tgt": "Nobody", "weight": 0.5},  # unknown tgt
                {"src": "John", "rel": "  ", "tgt": "camping"},  # empty rel
                {"src": "John", "rel": "SELF", "tgt": "John"},  # self loop
            ],
        }
        result = LLMExtractor(fake(json.dumps(reply))).extract(LLM_WINDOW)
        concepts = by_name(result)
        assert list(concepts) == ["John", "camping"]
        assert concepts["John"].confidence == 1.0
        assert concepts["camping"].confidence == 0.0
        assert result.relations == (Relation("John", "LIKES", "camping", 1.0),)

    def test_max_concepts(self):
        nodes = [{"name": f"Thing {chr(65 + i)}"} for i in range(8)]
        ex = LLMExtractor(fake(json.dumps({"nodes": nodes})), max_concepts=3)
        result = ex.extract(LLM_WINDOW)
        assert names(result) == ["Thing A", "Thing B", "Thing C"]

    def test_no_mention_gives_empty_source_ids(self):
        reply = json.dumps({"nodes": [{"name": "Outdoor Gear", "type": "Object"}]})
        assert LLMExtractor(fake(reply)).extract(LLM_WINDOW).concepts[0].source_ids == ()

    def test_usage_metadata_counted(self):
        usage = {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
        model = fake(
            AIMessage(content="oops", usage_metadata=usage),
            AIMessage(content=json.dumps(VALID), usage_metadata=usage),
        )
        ex = LLMExtractor(model)
        ex.extract(LLM_WINDOW)
        stats = ex.stats
        assert (stats.input_tokens, stats.output_tokens) == (240, 60)
        # without usage metadata nothing is counted
        plain = LLMExtractor(fake(json.dumps(VALID)))
        plain.extract(LLM_WINDOW)
        assert (plain.stats.input_tokens, plain.stats.output_tokens) == (0, 0)
        ex.reset_stats()
        assert ex.stats == ExtractorStats()

    def test_stats_is_a_snapshot(self):
        ex = LLMExtractor(FakeListChatModel(responses=[json.dumps(VALID)]))
        before = ex.stats
        ex.extract(LLM_WINDOW)
        assert before.calls == 0 and ex.stats.calls == 1

    def test_empty_window_makes_no_call(self):
        ex = LLMExtractor(fake(json.dumps(VALID)))
        assert ex.extract([]) == Extraction()
        assert ex.stats.calls == 0

    async def test_aextract_uses_ainvoke(self):
        calls: list[str] = []

        class AsyncOnly:
            """A duck-typed chat model that records which face was used."""

            def invoke(self, messages):
                calls.append("invoke")
                raise AssertionError("aextract must not call invoke")

            async def ainvoke(self, messages):
                calls.append("ainvoke")
                await asyncio.sleep(0)
                return AIMessage(content=json.dumps(VALID))

        ex = LLMExtractor(AsyncOnly())  # type: ignore[arg-type]
        result = await ex.aextract(LLM_WINDOW)
        assert names(result) == ["John", "Camping", "Airport Trip"]
        assert calls == ["ainvoke"]

    async def test_aextract_retry_and_fallback(self):
        ex = LLMExtractor(fake("bad", json.dumps(VALID)))
        assert names(await ex.aextract(LLM_WINDOW)) == ["John", "Camping", "Airport Trip"]
        assert ex.stats.retries == 1
        ex = LLMExtractor(fake("bad", "worse"))
        assert await ex.aextract(LLM_WINDOW) == OfflineExtractor().extract(LLM_WINDOW)
        assert ex.stats.fallbacks == 1

    def test_structured_output_path(self):
        from langchain_core.runnables import RunnableLambda

        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        answers = iter(
            [
                {"raw": AIMessage(content="", usage_metadata=usage), "parsed": None,
                 "parsing_error": ValueError("nodes: field required")},
                {"raw": AIMessage(content="", usage_metadata=usage),
                 "parsed": ExtractionSchema.model_validate(VALID), "parsing_error": None},
            ]
        )
        requested = []

        class Structured(FakeListChatModel):
            def with_structured_output(self, schema, **kwargs):  # type: ignore[override]
                requested.append((schema, kwargs))
                return RunnableLambda(lambda messages: next(answers))

        ex = LLMExtractor(Structured(responses=["unused"]))
        result = ex.extract(LLM_WINDOW)
        assert requested == [(ExtractionSchema, {"include_raw": True})]
        assert names(result) == ["John", "Camping", "Airport Trip"]
        assert ex.stats == ExtractorStats(calls=2, retries=1, input_tokens=20, output_tokens=10)

    def test_structured_output_can_be_turned_off(self):
        class Structured(FakeListChatModel):
            def with_structured_output(self, schema, **kwargs):  # type: ignore[override]
                raise AssertionError("not asked for")

        ex = LLMExtractor(Structured(responses=[json.dumps(VALID)]), structured_output=False)
        assert names(ex.extract(LLM_WINDOW)) == ["John", "Camping", "Airport Trip"]

    def test_thread_safe_counters(self):
        ex = LLMExtractor(FakeListChatModel(responses=[json.dumps(VALID)]))
        threads = [threading.Thread(target=lambda: [ex.extract(LLM_WINDOW) for _ in range(10)])
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert ex.stats.calls == 80 and ex.stats.fallbacks == 0

    def test_rejects_non_models(self):
        with pytest.raises(InvalidTypeError, match="chat model"):
            LLMExtractor(object())  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            LLMExtractor(fake("{}"), max_concepts=0)
        with pytest.raises(InvalidTypeError, match="fallback"):
            LLMExtractor(fake("{}"), fallback=object())  # type: ignore[arg-type]


def test_missing_langchain_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    with pytest.raises(MissingDependencyError, match=r"pip install synapse-integrations\[llm\]"):
        LLMExtractor(object())  # type: ignore[arg-type]


def test_import_does_not_load_langchain():
    code = (
        "import sys, synapse_integrations.core.ingest.extraction as m; "
        "m.OfflineExtractor().extract([]); "
        "print(sorted(k for k in sys.modules if k.startswith('langchain')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_per_turn_share_keeps_a_concept_for_every_turn_and_caps_long_turns():
    from synapse_integrations.types import Turn

    window = [Turn("a", "The garden needs water. The garden hose leaks, the garden shed too, "
                        "garden garden. Bikes are nice.", speaker="assistant"),
              Turn("b", "I own three bikes now, nice bikes.", speaker="user")]
    # by rank alone the long turn's words fill the budget and link to the long turn
    plain = OfflineExtractor(max_concepts=5).extract(window).concepts
    assert [(c.name, c.source_ids) for c in plain] == [
        ("assistant", ("a",)), ("user", ("b",)), ("garden", ("a",)), ("bike", ("a", "b")),
        ("water", ("a",))]
    # one concept per turn: each turn's best, in turn order; "a" no longer links to "bike"
    one = OfflineExtractor(max_concepts=5, per_turn=1).extract(window).concepts
    assert [(c.name, c.source_ids) for c in one] == [
        ("assistant", ("a",)), ("user", ("b",)), ("garden", ("a",)), ("bike", ("b",))]
    # two per turn: "bike" is the second best of "a" and the best of "b"
    two = OfflineExtractor(max_concepts=5, per_turn=2).extract(window).concepts
    assert [(c.name, c.source_ids) for c in two] == [
        ("assistant", ("a",)), ("user", ("b",)), ("garden", ("a",)), ("bike", ("a", "b"))]
    # the window's budget still bounds the total: speakers first, then round-robin
    tight = OfflineExtractor(max_concepts=3, per_turn=2).extract(window).concepts
    assert [c.name for c in tight] == ["assistant", "user", "garden"]
    with pytest.raises(Exception, match="per_turn"):
        OfflineExtractor(per_turn=-1)


def test_the_memory_tells_the_extractor_its_names(tmp_path):
    """A name an earlier window wrote mid-sentence is a name at the start of a sentence in
    a later window (the consolidator passes the memory's names to the offline extractor);
    once forgotten, it is not."""
    from _safety_helpers import HashEmbedder

    from synapse_integrations import Synapse

    filler = [{"text": f"We walked along the river, day {i}.", "speaker": "Sam"} for i in range(4)]
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())
    try:
        first = mem.add_turns([{"text": "A teacher named Agnes joined our club.", "speaker": "Nate"},
                               *filler])
        second = mem.add_turns([{"text": "Agnes baked a lemon drizzle cake.", "speaker": "Nate"},
                                *filler])
        g = mem.graph

        def linked(turn: str) -> dict[str, str]:
            return {g.nodes[n]["name"]: n for n in g.successors(turn)
                    if g.nodes[n]["kind"] == "concept"}

        assert linked(second[0])["Agnes"] == linked(first[0])["Agnes"]  # one concept
        assert "agne" not in linked(second[0])
        # forgotten, the name no longer shapes what later turns are read as
        mem.forget([first[0], second[0]])
        assert not [n for n, d in g.nodes(data=True) if d.get("name") == "Agnes"]
        third = mem.add_turns([{"text": "Agnes sang at the concert.", "speaker": "Nate"}, *filler])
        assert "Agnes" not in linked(third[0]) and "agne" in linked(third[0])
    finally:
        mem.close()

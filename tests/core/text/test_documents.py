"""A turn's speaker is read with its text (core/documents.py): one memory, whether the
caller wrote "Sam: ..." into the text (LoCoMo's protocol, the demo) or passed
``speaker="Sam"`` with the bare text (the framework adapters)."""

from __future__ import annotations

import dataclasses

import pytest

from synapse_integrations import HashingEmbedder, Synapse, SynapseConfig
from synapse_integrations.core.state.snapshot_checks import stored_config
from synapse_integrations.core.text.documents import (
    document,
    node_document,
    row_document,
)

TURNS = [
    ("Riley", "Was it hard coming back to the Portland rain?"),
    ("Sam", "Very. I've lived in Portland for six years and the January drizzle still gets to me."),
    ("Riley", "How's work going? Still crunching numbers?"),
    ("Sam", "Yep, still a data analyst at the solar company."),
    ("Riley", "I planted tomatoes and basil on my balcony."),
    ("Sam", "Greetings from Denver! The movers dropped off the last boxes yesterday."),
    ("Riley", "How's the new apartment?"),
    ("Sam", "It's a second-floor place near Washington Park with a view of the foothills."),
]


def _memory(path, embedder, *, prefixed: bool, **config) -> Synapse:
    mem = Synapse(path, embedder=embedder, config=SynapseConfig(**config))
    mem.add_turns([{"text": f"{who}: {text}" if prefixed else text, "speaker": who,
                    "timestamp": 1_700_000_000 + 60 * i, "id": f"t{i}"}
                   for i, (who, text) in enumerate(TURNS)])
    return mem


def test_documents_read_a_named_speaker_once_and_role_words_not_at_all():
    assert document("I moved.", "Sam") == "Sam: I moved."
    assert document("sam: I moved.", "Sam") == "sam: I moved."  # already there
    assert document("I moved.", " Sam ") == "Sam: I moved."
    for role in ("user", "Assistant", "HUMAN", "ai", "system", "tool", "function", "chatbot"):
        assert document("I moved.", role) == "I moved."
    assert document("I moved.", "") == document("I moved.", None) == "I moved."
    assert document("I moved.", "Sam", enabled=False) == "I moved."
    assert document("I moved.", "x" * 65) == "I moved."  # a label, not a name
    assert document("I moved.", "x" * 64) == "x" * 64 + ": I moved."
    assert node_document({"kind": "concept", "text": "Denver", "speaker": "Sam"}) == "Denver"
    assert node_document({"kind": "episode", "text": "Hi", "speaker": "Sam"}) == "Sam: Hi"
    assert row_document(False)("Hi", {"kind": "episode", "speaker": "Sam"}) == "Hi"


def test_bare_text_with_a_speaker_is_the_same_memory_as_prefixed_text(tmp_path, embedder):
    bare = _memory(tmp_path / "bare", embedder, prefixed=False)
    prefixed = _memory(tmp_path / "prefixed", embedder, prefixed=True)
    try:
        for q in ("Where does Sam live now?", "What does Sam do for work?",
                  "What did Riley plant?"):
            a, b = bare.retrieve(q, k=5), prefixed.retrieve(q, k=5)
            assert [it.id for it in a.items] == [it.id for it in b.items], q
            assert a.confidence == pytest.approx(b.confidence, abs=1e-5), q
            assert a.rejected == b.rejected, q
        # the caller's text is what is kept and returned; the vector holds the name
        assert bare.get("t3")["text"] == TURNS[3][1]
        ids, cos = bare.search_vectors(embedder.embed_documents([f"Sam: {TURNS[3][1]}"])[0], 1)
        assert ids == ["t3"] and cos[0] == pytest.approx(1.0, abs=1e-5)
        # the lexical trigger matches the name in Sam's turns (one pass: the entity
        # feedback pass would add the names it finds to the query)
        one_pass = dataclasses.replace(bare.config, entity_feedback=0)
        top = bare.retrieve("Sam", k=8, config=one_pass)
        named = {it.id for it in top.items if it.components.bm25_rank is not None}
        assert named == {f"t{i}" for i, (who, _) in enumerate(TURNS) if who == "Sam"}
    finally:
        bare.close()
        prefixed.close()


def test_the_name_lifts_the_gate_similarity_of_questions_about_a_person(tmp_path, embedder):
    on = _memory(tmp_path / "on", embedder, prefixed=False)
    off = _memory(tmp_path / "off", embedder, prefixed=False, speaker_in_document=False)
    try:
        q = "Where does Sam live now?"
        with_name, without = on.retrieve(q, k=5), off.retrieve(q, k=5)
        assert not with_name.rejected
        assert with_name.confidence > without.confidence + 0.05
        # without the option the bare text is embedded
        ids, cos = off.search_vectors(embedder.embed_documents([TURNS[3][1]])[0], 1)
        assert ids == ["t3"] and cos[0] == pytest.approx(1.0, abs=1e-5)
    finally:
        on.close()
        off.close()


def test_role_speakers_are_read_as_they_are(tmp_path):
    emb = HashingEmbedder()
    mem = Synapse(tmp_path / "m", embedder=emb)
    try:
        mem.add_turns([{"text": "I live in Lisbon now.", "speaker": "user", "id": "u"},
                       {"text": "Lisbon is lovely in spring.", "speaker": "assistant", "id": "a"}])
        for node_id, text in (("u", "I live in Lisbon now."), ("a", "Lisbon is lovely in spring.")):
            ids, cos = mem.search_vectors(emb.embed_documents([text])[0], 1)
            assert ids == [node_id] and cos[0] == pytest.approx(1.0, abs=1e-5)
    finally:
        mem.close()


def test_reopen_archive_restore_and_repair_read_the_same_documents(tmp_path):
    emb = HashingEmbedder()
    mem = _memory(tmp_path / "m", emb, prefixed=False)
    before = [it.id for it in mem.retrieve("What does Sam do for work?", k=5).items]
    mem.close()
    mem = Synapse(tmp_path / "m", embedder=emb)  # the BM25 index is rebuilt from the graph
    try:
        assert mem.config.speaker_in_document
        assert mem.verify().ok
        assert [it.id for it in mem.retrieve("What does Sam do for work?", k=5).items] == before
        mem.archive(["t3"])
        assert mem.restore(["t3"]) == ["t3"]
        assert mem.verify().ok  # restored into BM25 with its speaker's name
        ids, cos = mem.search_vectors(emb.embed_documents([f"Sam: {TURNS[3][1]}"])[0], 1)
        assert ids == ["t3"] and cos[0] == pytest.approx(1.0, abs=1e-5)
    finally:
        mem.close()


def test_a_memory_saved_before_the_option_keeps_reading_bare_text():
    old = SynapseConfig().to_dict()
    del old["speaker_in_document"]
    assert stored_config(old).speaker_in_document is False
    assert stored_config(SynapseConfig().to_dict()).speaker_in_document is True
    assert "speaker_in_document" in SynapseConfig.GRAPH_FIELDS


def test_a_non_bool_option_is_refused():
    from synapse_integrations.errors import ConfigError

    with pytest.raises(ConfigError, match="speaker_in_document must be a bool"):
        SynapseConfig(speaker_in_document="yes")


def test_a_rebuilt_collection_re_embeds_what_the_engine_reads(tmp_path):
    """A collection whose HNSW index was set aside is rebuilt from Chroma's rows
    (``ChromaVectors.rebuild``, called by ``consistency.open_vectors`` with
    ``row_document``): active and archived turns get the vector of their document (the
    speaker's name included), as at ingestion. The archive's rows carry the speaker for it."""
    emb = HashingEmbedder()
    mem = _memory(tmp_path / "m", emb, prefixed=False)
    try:
        mem.archive(["t1"])
        vectors = mem._state.vectors
        assert vectors.rebuild(["active", "archive"], emb.embed_documents, row_document()) > 0
        for node_id, coll in (("t3", vectors.active), ("t1", vectors.archive)):
            got, vecs = coll.get([node_id])[:2]
            want = emb.embed_documents([f"Sam: {TURNS[int(node_id[1:])][1]}"])[0]
            assert got == [node_id] and float(vecs[0] @ want) == pytest.approx(1.0, abs=1e-5)
    finally:
        mem.close()

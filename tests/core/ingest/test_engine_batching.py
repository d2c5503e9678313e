"""Concept writes batched per add_turns()/consolidate() call, and the concept-name cache."""

from __future__ import annotations

import numpy as np

from synapse_integrations import Synapse
from synapse_integrations.errors import StorageError

from _safety_helpers import HashEmbedder


class CountingEmbedder(HashEmbedder):
    """HashEmbedder that records every text it embeds."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed_documents(self, texts):
        self.seen.extend(texts)
        return super().embed_documents(texts)


class CountingUpserts:
    """Wraps the active collection and counts upserts of concept rows."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.concept_calls = 0

    def upsert(self, ids, embs, docs, metas):
        if any(m.get("kind") == "concept" for m in metas):
            self.concept_calls += 1
        return self.inner.upsert(ids, embs, docs, metas)

    def __getattr__(self, name):
        return getattr(self.inner, name)


TURNS = [f"{who}: turn {i} about Dana and the Whistler trip, topic{i % 4}"
         for i, who in zip(range(40), ["Sam", "Riley"] * 20)]


def _stored_concepts(mem: Synapse) -> dict[str, np.ndarray]:
    ids = [n for n, d in mem.graph.nodes(data=True) if d["kind"] == "concept"]
    got, vectors, _ = mem._state.vectors.active.get(ids)
    return dict(zip(got, vectors))


def test_one_concept_write_per_add_turns_call_with_the_latest_vectors(tmp_path):
    with Synapse(tmp_path / "m", embedder=HashEmbedder()) as mem:
        counter = CountingUpserts(mem._state.vectors.active)
        mem._state.vectors.active = counter
        mem.add_turns([{"text": t, "speaker": t.split(":")[0]} for t in TURNS])  # 8 windows
        assert mem.stats()["windows"] == 8
        assert counter.concept_calls == 1
        mem._state.vectors.active = counter.inner
        stored = _stored_concepts(mem)
        concepts = [n for n, d in mem.graph.nodes(data=True) if d["kind"] == "concept"]
        assert sorted(stored) == sorted(concepts)
        # merged concepts moved by EMA in later windows: Chroma holds the final vector
        for cid in concepts:
            np.testing.assert_allclose(stored[cid], mem._state.graph.vectors[cid], atol=1e-6)
        assert mem.verify().ok


def test_consolidate_writes_its_concepts_once(tmp_path):
    with Synapse(tmp_path / "m", embedder=HashEmbedder()) as mem:
        counter = CountingUpserts(mem._state.vectors.active)
        mem._state.vectors.active = counter
        for t in TURNS[:4]:
            mem.add_turn(t, speaker=t.split(":")[0])  # below one window: nothing written
        assert counter.concept_calls == 0
        mem.consolidate()
        assert counter.concept_calls == 1
        mem._state.vectors.active = counter.inner
        assert mem.verify().ok


def test_a_failed_batched_write_keeps_the_turns_and_repair_restores_the_concepts(tmp_path):
    with Synapse(tmp_path / "m", embedder=HashEmbedder()) as mem:
        inner = mem._state.vectors.active

        class FailConcepts(CountingUpserts):
            def upsert(self, ids, embs, docs, metas):
                if any(m.get("kind") == "concept" for m in metas):
                    raise StorageError("simulated outage during the concept write")
                return self.inner.upsert(ids, embs, docs, metas)

        mem._state.vectors.active = FailConcepts(inner)
        ids = mem.add_turns([{"text": t, "speaker": t.split(":")[0]} for t in TURNS[:10]])
        assert len(ids) == 10  # the turns are stored; the failure is logged, not raised
        mem._state.vectors.active = inner
        assert not mem.verify().ok  # concepts without vectors in Chroma
        mem.repair()
        assert mem.verify().ok
        assert len(_stored_concepts(mem)) == mem.stats()["concepts"]


def test_concept_names_are_embedded_once(tmp_path):
    emb = CountingEmbedder()
    with Synapse(tmp_path / "m", embedder=emb) as mem:
        mem.add_turns([{"text": t, "speaker": t.split(":")[0]} for t in TURNS])
        names = [t for t in emb.seen if t not in TURNS]
        assert names.count("Sam") == 1 and names.count("Dana") == 1
        assert len(names) == len(set(names))
        assert mem.stats()["windows"] == 8


def test_name_cache_is_bounded(tmp_path, monkeypatch):
    import synapse_integrations.core.ingest.consolidation as consolidation

    monkeypatch.setattr(consolidation, "NAME_CACHE_SIZE", 3)
    with Synapse(tmp_path / "m", embedder=HashEmbedder()) as mem:
        out = mem._consolidator.names.embed(["a", "b", "c", "d", "a"])
        assert out.shape == (5, 384)
        np.testing.assert_allclose(out[0], out[4])
        assert len(mem._consolidator.names) == 3 and mem._consolidator.names.names() == ["c", "d", "a"]


def test_nested_batches_write_once_at_the_outer_exit(tmp_path):
    with Synapse(tmp_path / "m", embedder=HashEmbedder()) as mem:
        counter = CountingUpserts(mem._state.vectors.active)
        mem._state.vectors.active = counter
        with mem._state.batched_concept_writes():
            mem.add_turns([{"text": t, "speaker": t.split(":")[0]} for t in TURNS[:10]])
            mem.consolidate()
            assert counter.concept_calls == 0
            mem.add_turn(TURNS[10], speaker="Sam")
            mem.save()  # a snapshot inside the batch writes what it names first
            assert counter.concept_calls == 1
        assert counter.concept_calls == 1  # nothing new since the save
        mem._state.vectors.active = counter.inner
        assert mem.verify().ok

"""Regression tests for the red-team pass of issue 12 (engine level): each test failed on
the code before the fix. Items: a forget undone by another engine or a stale snapshot
(1), forget's filter (4), concepts outliving the turns they came from (5), crafted
snapshot values (6), input that poisons a memory (7), cancellation and the lock file (9).
Pool, namespaces, store and Chroma files are in test_safety_redteam_adapters.py and
test_safety_chroma_files.py."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from synapse_integrations import Synapse, SynapseConfig
from synapse_integrations.errors import (
    InvalidInputError,
    MemoryLockedError,
    NamespaceError,
    StorageError,
)
from synapse_integrations.firewall import FirewallConfig
from synapse_integrations.storage.chroma import close_client, persistent_client
from synapse_integrations.types import Concept, Extraction

from _crash_worker import turn_text
from _safety_helpers import HashEmbedder

SECRET = "Ana was diagnosed with systemic lupus erythematosus last week, keep it quiet."


def scan(root: Path, needles: tuple[str, ...]) -> list[tuple[str, str]]:
    hits = []
    for folder, _, files in os.walk(root):
        for name in files:
            data = Path(folder, name).read_bytes()
            hits += [(str(Path(folder, name).relative_to(root)), n) for n in needles
                     if n.encode() in data or n.casefold().encode() in data]
    return hits


# -- 1. a forget is authoritative for every engine and every open ---------------------------
def test_a_second_live_engine_on_one_namespace_is_refused(tmp_path):
    a = Synapse(tmp_path / "m", embedder=HashEmbedder())
    with pytest.raises(MemoryLockedError, match="already open in this process"):
        Synapse(tmp_path / "m", embedder=HashEmbedder())
    other = Synapse(tmp_path / "m", namespace="other", embedder=HashEmbedder())  # fine
    other.close()
    a.close()
    Synapse(tmp_path / "m", embedder=HashEmbedder()).close()  # free again once closed


def test_a_forget_by_one_engine_holds_for_another_on_the_same_chroma(tmp_path):
    """Two engines on one Chroma (as two workers on a Chroma server, each with its own
    snapshot folder): what A forgets, B stops returning and never writes back."""
    client = persistent_client(tmp_path / "chroma")
    try:
        a = Synapse(tmp_path / "a", client=client, embedder=HashEmbedder())
        ids = a.add_turns([turn_text(n) for n in range(6)] + [SECRET])
        b = Synapse(tmp_path / "b", client=client, embedder=HashEmbedder())
        assert ids[-1] in b.graph  # B sees A's turns
        a.forget([ids[-1]])
        assert not any("lupus" in it.text for it in b.retrieve(SECRET, k=10).items)
        b.add_turn("B carries on")
        b.save()
        b.close()
        a.close()
        again = Synapse(tmp_path / "b", client=client, embedder=HashEmbedder())
        assert ids[-1] not in again.graph and again.verify().ok
        assert again._state.vectors.active.get([ids[-1]])[0] == []
        again.close()
        assert scan(tmp_path / "b", ("lupus",)) == []
    finally:
        close_client(client)


def test_a_stale_snapshot_never_brings_a_forgotten_turn_back(tmp_path):
    """A snapshot written before the forget (a second engine's save, a restored backup)
    names the forgotten turn: the next open drops it instead of re-embedding its text."""
    path = tmp_path / "m"
    mem = Synapse(path, embedder=HashEmbedder())
    ids = mem.add_turns([turn_text(n) for n in range(6)] + [SECRET])
    version = mem.save()
    stale = tmp_path / "stale"
    shutil.copytree(mem._snapshots.folder(version), stale)
    mem.forget([ids[-1]])
    mem.close()
    snaps = path / "namespaces" / mem._ns_dir.name / "snapshots"
    newest = max(int(p.name[1:]) for p in snaps.iterdir() if p.name.startswith("v"))
    manifest = json.loads((stale / "manifest.json").read_text())
    manifest["version"] = newest + 1
    (stale / "manifest.json").write_text(json.dumps(manifest))
    shutil.copytree(stale, snaps / f"v{newest + 1:06d}")
    again = Synapse(path, embedder=HashEmbedder())
    assert ids[-1] not in again.graph
    assert again._state.vectors.active.get([ids[-1]])[0] == []
    assert again.verify().ok
    again.close()
    assert scan(path, ("lupus",)) == []


def test_an_id_forgotten_and_written_again_is_kept(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())
    mem.add_turn("the first version of my note", id="note")
    mem.forget(["note"])
    mem.add_turn("the second version of my note", id="note")
    mem.close()
    again = Synapse(tmp_path / "m", embedder=HashEmbedder())
    assert again.get("note")["text"] == "the second version of my note"
    assert again.verify().ok
    again.close()


# -- 4. forget's filter ---------------------------------------------------------------------
def test_forget_with_an_empty_where_is_refused_and_where_has_operators(tmp_path):
    with Synapse(tmp_path / "m", embedder=HashEmbedder()) as mem:
        ids = mem.add_turns([{"text": turn_text(n), "metadata": {"n": n}} for n in range(8)])
        with pytest.raises(InvalidInputError, match="empty"):
            mem.forget(where={})
        assert all(i in mem.graph for i in ids)
        removed = mem.forget(where={"n": {"$gte": 6}})
        assert set(ids[6:]) <= set(removed) and all(i in mem.graph for i in ids[:6])
        mem.forget(where={"$or": [{"n": 0}, {"n": {"$in": [1, 2]}}]})
        assert [i for i in ids if i in mem.graph] == ids[3:6]


# -- 5. concepts go with the turns they came from -------------------------------------------
class _WordsOfItsOwn:
    """An LLM-like extractor: names the concept in its own words, says no source turn."""

    def extract(self, turns):
        if any("lupus" in t.text for t in turns):
            return Extraction(concepts=(Concept(
                "SLE diagnosis", "Condition", 0.9,
                {"condition": "systemic lupus erythematosus"}),))
        return Extraction(concepts=(Concept("weekend plans", "Topic", 0.8),))


def _concept_texts(mem: Synapse) -> str:
    nodes = [d for _, d in mem.graph.nodes(data=True)] + mem.archived()
    return json.dumps([d for d in nodes if d.get("kind") == "concept"]).casefold()


def test_a_concept_named_in_other_words_goes_with_its_turn(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder(), extractor=_WordsOfItsOwn(),
                  config=SynapseConfig(consolidation_interval=5))
    ids = mem.add_turns([turn_text(0), turn_text(1), SECRET, turn_text(3), turn_text(4)])
    assert "sle diagnosis" in _concept_texts(mem)
    mem.forget([ids[2]])
    assert "sle" not in _concept_texts(mem) and "lupus" not in _concept_texts(mem)
    assert not any("SLE" in it.text for it in mem.retrieve("SLE diagnosis", k=20,
                                                            kinds=("episode", "concept")).items)
    assert not any("sle" in n.casefold() for n in mem._consolidator.names.names())
    mem.close()
    assert scan(tmp_path / "m", ("SLE diagnosis", "lupus")) == []


def test_paper_preset_window_concepts_go_with_their_turn(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder(),
                  config=SynapseConfig.paper().replace(consolidation_interval=5))
    ids = mem.add_turns([{"text": "My cat left fluffies all over the sofa.", "speaker": "Ana"}]
                        + [{"text": t, "speaker": "Sam"} for t in
                           ("Nice.", "We went to the market.", "It rained.", "Anyway, lunch?")])
    assert "fluffy" in _concept_texts(mem)
    mem.forget([ids[0]])
    assert "fluffy" not in _concept_texts(mem) and "fluffies" not in _concept_texts(mem)
    assert "fluffy" not in mem._consolidator.names.names()
    mem.close()
    assert scan(tmp_path / "m", ("fluffy", "fluffies")) == []


def test_attributes_said_only_by_a_forgotten_turn_leave_a_concept_that_stays(tmp_path):
    class Ext:
        def extract(self, turns):
            out = []
            for t in turns:
                attrs = {"status": "zanzibarquokka"} if "quokka" in t.text else {}
                out.append(Concept("Ana", "Person", 0.9, attrs, source_ids=(t.id,)))
            return Extraction(concepts=tuple(out[:1]))

    mem = Synapse(tmp_path / "m", embedder=HashEmbedder(), extractor=Ext(),
                  config=SynapseConfig(consolidation_interval=1))
    first = mem.add_turn("Ana has zanzibarquokka fever.")
    mem.add_turn("Ana went skiing.")
    mem.forget([first])
    assert "zanzibarquokka" not in _concept_texts(mem)
    assert "ana" in _concept_texts(mem)  # still said by a turn that stays
    mem.close()


# -- 6. crafted snapshot values ---------------------------------------------------------------
def _two_versions(path: Path) -> tuple[Synapse, Path]:
    mem = Synapse(path, embedder=HashEmbedder())
    mem.add_turns([turn_text(n) for n in range(6)])
    mem.save()
    mem.add_turns([turn_text(n) for n in range(6, 10)])
    mem.close()  # the newest version
    return mem, mem._snapshots.folder(mem._snapshots.versions()[-1])


def _rewrite(folder: Path, change) -> None:
    graph = json.loads((folder / "graph.json").read_text())
    manifest = json.loads((folder / "manifest.json").read_text())
    graph, manifest, raw = change(graph, manifest)
    data = raw if raw is not None else json.dumps(graph).encode()
    (folder / "graph.json").write_bytes(data)
    manifest["files"]["graph.json"] = hashlib.sha256(data).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _deep(graph, manifest):
    return graph, manifest, b'{"graph": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def _ts(graph, manifest):
    next(n for n in graph["graph"]["nodes"] if n["kind"] == "episode")["ts"] = 1e300
    return graph, manifest, None


def _iterations(graph, manifest):
    manifest["config"]["iterations"] = 10 ** 9
    return graph, manifest, None


def _tau(graph, manifest):
    manifest["config"]["gate_tau"] = 1e9
    return graph, manifest, None


def _pagerank(graph, manifest):
    graph["pagerank"] = {k: float("nan") for k in graph["pagerank"]} or {"x": float("nan")}
    return graph, manifest, None


@pytest.mark.parametrize("change", [_deep, _ts, _iterations, _tau, _pagerank],
                         ids=["deep_json", "ts_1e300", "iterations_1e9", "gate_tau_1e9", "nan_pagerank"])
def test_a_crafted_newest_snapshot_falls_back_to_the_older_good_one(tmp_path, change):
    mem, folder = _two_versions(tmp_path / "m")
    _rewrite(folder, change)
    again = Synapse(tmp_path / "m", embedder=HashEmbedder())
    assert again.config.iterations <= 100 and again.config.gate_tau <= 1
    assert len(again.episodes()) == 10  # the newer turns re-attached from Chroma
    res = again.retrieve(turn_text(7), k=50)  # every memory, the tampered one included
    assert not res.rejected and res.items[0].text == turn_text(7) and len(res.items) >= 10
    assert all(it.score == it.score for it in res.items)  # no NaN
    again.close()


def test_config_bounds_refuse_values_that_hang_or_refuse_everything():
    for bad in ({"iterations": 10 ** 9}, {"anchor_top_k": 10 ** 8}, {"top_k": 10 ** 9},
                {"gate_tau": 1e9}, {"alpha": 1e300}, {"inhibition_top_m": 10 ** 9}):
        with pytest.raises(ValueError):
            SynapseConfig(**bad)


# -- 7. input that poisons the memory ---------------------------------------------------------
def test_deeply_nested_metadata_is_refused_even_with_the_firewall_off(tmp_path):
    deep: dict = {}
    cur = deep
    for _ in range(990):
        cur["k"] = {}
        cur = cur["k"]
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder(), firewall=FirewallConfig.off())
    with pytest.raises(InvalidInputError, match="nested"):
        mem.add_turn("hello", metadata=deep)
    mem.add_turn("hello", metadata={"a": {"b": [1, {"c": 2}]}})
    mem.close()
    Synapse(tmp_path / "m", embedder=HashEmbedder()).close()  # still opens


def test_control_characters_are_refused_where_docs_say_so(tmp_path):
    """In names (speakers, namespaces) control characters are refused; in a turn's text
    they are normalised and stored (docs/safety.md, "Input")."""
    with Synapse(tmp_path / "m", embedder=HashEmbedder()) as mem:
        for raw, stored in (("nul\x00byte", "nul\ufffdbyte"), ("bell\x07", "bell\ufffd"),
                            ("escape\x1b[31m", "escape\ufffd[31m"), ("c1\x9b", "c1\u203a")):
            assert mem.get(mem.add_turn(raw))["text"] == stored
        mem.add_turn("tabs\tand\nnewlines\r\n are fine")
        with pytest.raises(InvalidInputError):
            mem.add_turn("fine", speaker="Sam\nAdmin")
    for ns in ("a\x85b", "a\u2028b", "a\u202eb"):
        with pytest.raises(NamespaceError, match="control"):
            Synapse(tmp_path / "n", namespace=ns, embedder=HashEmbedder())


def test_query_and_batch_sizes_are_bounded(tmp_path):
    from synapse_integrations.core.state.validation import MAX_BATCH_TURNS, MAX_QUERY_CHARS

    with Synapse(tmp_path / "m", embedder=HashEmbedder()) as mem:
        mem.add_turn("something to find")
        t0 = time.perf_counter()
        with pytest.raises(InvalidInputError, match="at most"):
            mem.retrieve("x" * (MAX_QUERY_CHARS + 1))
        assert time.perf_counter() - t0 < 1.0
        mem.retrieve("find " * (MAX_QUERY_CHARS // 5))  # at the limit: answered
        with pytest.raises(InvalidInputError, match="at most"):
            mem.add_turns("x" for _ in range(MAX_BATCH_TURNS + 1))
        assert mem.stats()["episodes"] == 1


def test_a_large_batch_does_not_hold_the_lock_for_its_whole_write(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder(),
                  config=SynapseConfig(consolidation_interval=5))
    waits: list[float] = []
    done = threading.Event()
    started = threading.Event()

    def read() -> None:
        started.wait()
        while not done.is_set():
            t0 = time.perf_counter()
            mem.stats()
            waits.append(time.perf_counter() - t0)
            time.sleep(0.005)

    reader = threading.Thread(target=read)
    reader.start()
    t0 = time.perf_counter()
    started.set()
    mem.add_turns([f"turn {n} about topic {n % 37} and item {n % 11}" for n in range(3000)])
    total = time.perf_counter() - t0
    done.set()
    reader.join()
    print(f"\n[lock] add_turns of 3000 turns: {total:.2f} s; longest reader wait "
          f"{max(waits):.2f} s over {len(waits)} reads")
    assert mem.stats()["episodes"] == 3000
    assert max(waits) < total / 3
    mem.close()


# -- 9. cancellation, the lock file ---------------------------------------------------------
class _SlowEmbedder(HashEmbedder):
    def embed_documents(self, texts):
        time.sleep(0.4)
        return super().embed_documents(texts)


def test_a_cancelled_aadd_turn_is_not_stored_and_a_retry_stores_it_once(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=_SlowEmbedder())

    async def main() -> str:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(mem.aadd_turn("call the plumber on Monday"), 0.1)
        await asyncio.sleep(0.8)  # the worker thread has finished by now
        assert mem.stats()["episodes"] == 0
        return await mem.aadd_turn("call the plumber on Monday")

    asyncio.run(main())
    assert mem.stats()["episodes"] == 1
    mem.close()


def test_a_write_that_lands_after_its_caller_gave_up_is_not_stored_twice(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())
    upsert = mem._state.vectors.active.upsert

    def slow_upsert(*args, **kwargs):
        time.sleep(0.5)
        return upsert(*args, **kwargs)

    mem._state.vectors.active.upsert = slow_upsert

    async def main() -> str:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(mem.aadd_turn("water the plants"), 0.2)
        await asyncio.sleep(0.8)
        return await mem.aadd_turn("water the plants")

    node_id = asyncio.run(main())
    assert [e["id"] for e in mem.episodes()] == [node_id]
    mem.close()


def test_a_planted_lock_symlink_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("do not truncate me")
    (tmp_path / "m").mkdir()
    os.symlink(target, tmp_path / "m" / ".synapse.lock")
    with pytest.raises(StorageError, match="symbolic link"):
        Synapse(tmp_path / "m", embedder=HashEmbedder())
    assert target.read_text() == "do not truncate me"

"""The operator commands (add, query, inspect, verify, repair, forget, export, import) on a
folder and on a server, the export/import round trip, and `synapse serve` safety."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from _server_helpers import ServerProcess, env, synapse_cmd

from synapse_integrations import HashingEmbedder, InvalidInputError, Synapse
from synapse_integrations.cli import main
from synapse_integrations.server.client import RemoteMemory
from synapse_integrations.server.service import MemoryService

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning")]

H = ["--embedder", "hashing"]
TOPICS = ["skiing in Whistler", "architecture school in Lisbon", "a beagle called Biscuit",
          "cello lessons", "the marathon in Porto", "a trip to Kyoto"]
QUERIES = ["Where did they go skiing?", "Who studies architecture?", "What is the dog called?",
           "Which instrument?", "zzz unrelated words"]


def build_memory(path, namespace="default") -> list[str]:
    """A memory with speakers, metadata, explicit and automatic times, an archived episode
    and a consolidated graph."""
    with Synapse(path, namespace=namespace, embedder=HashingEmbedder()) as mem:
        ids = mem.add_turns([{"text": f"Turn {i}: Sam talks about {TOPICS[i % 6]} with Dana.",
                              "speaker": ["Sam", "Dana"][i % 2], "metadata": {"n": i, "topic": TOPICS[i % 6]},
                              **({"timestamp": 1_700_000_000 + 86_400 * i} if i % 3 else {})}
                             for i in range(23)])
        mem.consolidate()
        mem.archive([ids[4]])
        return ids


def turns_of(mem) -> list[tuple]:
    archived = {a["id"] for a in mem.archived()}
    return [(e["id"], e["text"], e["speaker"], e["ts"], e["metadata"], e["id"] in archived)
            for e in mem.episodes()]


def ranking(mem, query):
    res = mem.retrieve(query, k=10)
    return [it.id for it in res.items], [it.score for it in res.items], res.rejected


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_operator_commands_on_a_folder(tmp_path, capsys):
    path = str(tmp_path / "mem")
    code, out, _ = run(capsys, "add", "Sam went skiing in Whistler with Dana.", "Dana studies in Lisbon.",
                       "--speaker", "Sam", "--metadata", '{"channel": "cli"}', "--path", path, *H)
    assert code == 0 and len(out.split()) == 2 and out.startswith("ep-")
    first, second = out.split()
    code, out, _ = run(capsys, "add", "A note with my own id.", "--id", "note-1", "--path", path, *H)
    assert out.strip() == "note-1"
    code, out, _ = run(capsys, "query", "Where did Sam go skiing?", "--k", "2", "--path", path, *H)
    assert code == 0 and out.startswith("gate: accepted") and "Whistler" in out.splitlines()[1]
    code, out, _ = run(capsys, "query", "skiing", "--json", "--where", '{"channel": "cli"}', "--speaker", "Sam",
                       "--path", path, *H)
    data = json.loads(out)
    assert {it["id"] for it in data["items"]} == {first, second}  # not note-1: no channel
    assert data["gate"]["decision"] in ("accepted", "rejected")
    code, out, _ = run(capsys, "inspect", "--path", path, *H)
    assert json.loads(out)["stats"]["episodes"] == 3
    code, out, _ = run(capsys, "inspect", first, "--query", "skiing", "--path", path, *H)
    assert code == 0 and "Whistler" in out and "rank 1" in out
    code, out, _ = run(capsys, "verify", "--path", path, *H)
    assert code == 0 and out.startswith("ok: 3 episodes")
    code, out, _ = run(capsys, "repair", "--json", "--path", path, *H)
    assert code == 0 and json.loads(out)["ok"]
    code, out, _ = run(capsys, "forget", "note-1", "--path", path, *H)
    assert code == 0 and "note-1" in out
    code, out, err = run(capsys, "forget", "--path", path, *H)
    assert code == 2 and "forget() needs ids" in err
    code, out, err = run(capsys, "query", "x", "--path", path, "--namespace", "nobody", *H)
    assert code == 2 and "UnknownNamespaceError" in err
    code, out, err = run(capsys, "query", "x", *H)
    assert code == 2 and "--path DIR" in err
    code, out, _ = run(capsys, "forget", "--everything", "--json", "--path", path, *H)
    assert code == 0 and len(json.loads(out)["removed"]) >= 2


@pytest.mark.parametrize("with_vectors", [True, False])
def test_export_import_round_trip_on_folders(tmp_path, capsys, with_vectors):
    build_memory(tmp_path / "a", namespace="user_id=7")
    dump = tmp_path / "a.jsonl"
    flags = ["--with-vectors"] if with_vectors else []
    code, _, err = run(capsys, "export", "--path", str(tmp_path / "a"), "--namespace", "user_id=7",
                       "--out", str(dump), *flags, *H)
    assert code == 0 and "exported 23 turns" in err and "exporting" in err  # the progress bar
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    assert len(lines) == 23 and sum(bool(x.get("archived")) for x in lines) == 1
    assert all(("vector" in x) == (with_vectors and not x.get("archived")) for x in lines)
    code, _, err = run(capsys, "import", str(dump), "--path", str(tmp_path / "b"), "--no-progress", *H)
    assert code == 0 and "imported 23 turns" in err and "importing" not in err
    code, _, err = run(capsys, "import", str(dump), "--path", str(tmp_path / "b"), "--no-progress", *H)
    assert "imported 0 turns (23 already there" in err  # idempotent
    with Synapse(tmp_path / "a", namespace="user_id=7", embedder=HashingEmbedder()) as a, \
            Synapse(tmp_path / "b", embedder=HashingEmbedder()) as b:
        assert turns_of(a) == turns_of(b)  # the same episodes: ids, texts, speakers, times, metadata
        b.consolidate()
        for query in QUERIES:
            ids_a, scores_a, rej_a = ranking(a, query)
            ids_b, scores_b, rej_b = ranking(b, query)
            assert (ids_a, rej_a) == (ids_b, rej_b), query
            assert np.allclose(scores_a, scores_b, atol=1e-5)
        assert b.verify().ok


def test_an_import_with_vectors_stores_them_instead_of_embedding(tmp_path):
    class Counting(HashingEmbedder):
        texts: list[str] = []

        def embed_documents(self, texts):
            Counting.texts += list(texts)
            return super().embed_documents(texts)

    other = HashingEmbedder(noise=2.0)  # a different model: its vectors are not the counting one's
    # some by a named speaker: the engine reads their text with the name (core/documents.py),
    # and the vector given still stands in for it
    # and some with a control character, stored normalised: the vector still stands in
    turns = [{"text": f"vector turn {i} about {TOPICS[i % 6]}" + ("\x93" if i % 3 == 0 else ""),
              "id": f"v{i}",
              "vector": other.embed_documents([f"vector turn {i} about {TOPICS[i % 6]}"])[0].tolist(),
              **({"speaker": "Sam"} if i % 2 else {})}
             for i in range(7)]
    svc = MemoryService(tmp_path / "m", embedder=Counting())
    try:
        svc.add_turns("ns", turns)
        assert not any("vector turn" in t for t in Counting.texts)  # none embedded again
        engine = svc.engine("ns")
        for t in turns:
            ids, cos = engine.search_vectors(np.asarray(t["vector"], np.float32), 1)
            assert ids == [t["id"]] and cos[0] == pytest.approx(1.0, abs=1e-5)
    finally:
        svc.close()


@pytest.mark.server
def test_operator_commands_on_a_server_and_a_server_to_server_copy(tmp_path, capsys, monkeypatch):
    build_memory(tmp_path / "a", namespace="team/a")
    monkeypatch.setenv("SYNAPSE_API_KEY", "k")
    with ServerProcess("http", tmp_path / "a", *H) as one, ServerProcess("http", tmp_path / "b", *H) as two:
        url = ["--url", one.url, "--namespace", "team/a"]
        scratch = ["--url", one.url, "--namespace", "scratch"]
        code, out, _ = run(capsys, "add", "Late turn about Kyoto temples.", "--speaker", "Sam", *scratch)
        assert code == 0 and out.startswith("ep-")
        code, out, _ = run(capsys, "query", "Kyoto temples", "--k", "3", *scratch)
        assert "Kyoto temples" in out.splitlines()[1]
        code, out, _ = run(capsys, "verify", *url)
        assert code == 0 and out.startswith("ok: 22 episodes") and "1 archived" in out
        code, out, _ = run(capsys, "inspect", *url)
        assert json.loads(out)["namespace"] == "team/a"
        dump = tmp_path / "a.jsonl"
        code, _, err = run(capsys, "export", "--with-vectors", "--out", str(dump), *url)
        assert code == 0 and "exported 23 turns" in err
        code, _, err = run(capsys, "import", str(dump), "--url", two.url, "--namespace", "copy", "--batch", "5")
        assert code == 0 and "imported 23 turns" in err and "1 archived" in err
        a, b = RemoteMemory(one.url, "team/a", api_key="k"), RemoteMemory(two.url, "copy", api_key="k")
        assert turns_of(a) == turns_of(b)
        b.consolidate()  # the source was consolidated to its last turn too
        for query in QUERIES:
            ids_a, scores_a, rej_a = ranking(a, query)
            ids_b, scores_b, rej_b = ranking(b, query)
            assert (ids_a, rej_a) == (ids_b, rej_b) and np.allclose(scores_a, scores_b, atol=1e-5)
        code, _, err = run(capsys, "query", "x", "--url", one.url, "--api-key", "wrong")
        assert code == 2 and "AuthenticationError" in err
        # the server owns its folder: a direct open is refused with the holder named
        code, _, err = run(capsys, "query", "x", "--path", str(tmp_path / "a"), *H)
        assert code == 2 and "MemoryLockedError" in err and "another process" in err


def test_serve_refuses_a_public_address_without_a_key(tmp_path):
    out = subprocess.run(synapse_cmd("serve", "http", "--path", str(tmp_path), "--host", "0.0.0.0", *H),
                         env={**env(), "SYNAPSE_API_KEY": ""}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "refusing to serve on 0.0.0.0 without an API key" in out.stderr


@pytest.mark.server
def test_serve_with_the_vectors_in_a_chroma_server(tmp_path, chroma_server):
    chroma = f"{chroma_server['host']}:{chroma_server['port']}"
    ns = f"chroma-backed-{tmp_path.name}"
    with ServerProcess("http", tmp_path / "mem", "--chroma", chroma, *H) as srv:
        with RemoteMemory(srv.url, ns) as mem:
            mem.add_turns([{"text": f"fact {i} about {TOPICS[i % 6]}", "id": f"f{i}"} for i in range(7)])
    assert not (tmp_path / "mem" / "chroma").exists()  # only the snapshots are local
    with ServerProcess("http", tmp_path / "mem", "--chroma", chroma, *H) as srv:
        with RemoteMemory(srv.url, ns, create=False) as mem:  # known after a restart
            assert [e["id"] for e in mem.episodes()] == [f"f{i}" for i in range(7)]
            assert mem.retrieve("cello lessons", k=1).items[0].id == "f3"
            assert mem.verify().ok


@pytest.mark.model
@pytest.mark.server
def test_serve_with_the_packaged_model(tmp_path):
    """The default server: the packaged all-MiniLM-L6-v2, loaded before /health answers."""
    with ServerProcess("http", tmp_path / "mem") as srv, RemoteMemory(srv.url, "u") as mem:
        mem.add_turns(["I adopted a beagle puppy last spring.", "My sister moved to Lisbon.",
                       "I am learning to play the cello.", "Work at the hospital was exhausting."])
        result = mem.retrieve("Do I have a dog?", k=2)
        assert result.items[0].text == "I adopted a beagle puppy last spring." and not result.rejected
        assert mem.inspect()["embedder"] == "MiniLMEmbedder"


def test_serve_takes_the_pool_size_from_its_flags(tmp_path):
    """``--max-open`` and ``--recycle-after`` reach the server's pool; a bad value is a
    clear error naming the flag's parameter."""
    from synapse_integrations.cli import build_parser
    from synapse_integrations.server.commands import _service

    args = build_parser().parse_args(["serve", "http", "--path", str(tmp_path / "m"), "--embedder",
                                      "hashing", "--max-open", "3", "--recycle-after", "5"])
    svc = _service(args)
    try:
        assert (svc.pool.max_open, svc.pool.recycle_after) == (3, 5)
    finally:
        svc.close()
    bad = build_parser().parse_args(["serve", "http", "--path", str(tmp_path / "n"), "--embedder",
                                     "hashing", "--max-open", "0"])
    with pytest.raises(InvalidInputError, match="max_open"):
        _service(bad)

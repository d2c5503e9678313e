"""The REST API on 127.0.0.1 and its Python client, RemoteMemory: the same operations,
results and errors as a local engine, scoped to namespaces; API key; paging; limits."""

from __future__ import annotations

import asyncio
import itertools
import math

import httpx
import pytest
from _server_helpers import rest_server

from synapse_integrations import HashingEmbedder, MemoryEngine, Synapse
from synapse_integrations.errors import (
    FirewallBlockedError,
    InvalidInputError,
    InvalidTypeError,
    NamespaceError,
    NodeNotFoundError,
    SynapseError,
    UnknownNamespaceError,
)
from synapse_integrations.firewall import FirewallConfig
from synapse_integrations.server.client import AuthenticationError, RemoteMemory, RemotePool
from synapse_integrations.types import ConsolidationReport, RetrievalResult

TURNS = [
    {"text": "Sam went skiing in Whistler with Dana.", "speaker": "Sam",
     "timestamp": "2024-01-05T10:00:00Z", "metadata": {"topic": "ski", "n": 1}, "id": "t1"},
    {"text": "Dana studies architecture in Lisbon.", "speaker": "Dana",
     "timestamp": "2024-02-01T09:00:00Z", "metadata": {"topic": "study", "n": 2}, "id": "t2"},
    {"text": "I adopted a beagle called Biscuit.", "speaker": "Sam",
     "timestamp": "2024-03-03T18:30:00Z", "metadata": {"topic": "pets", "n": 3}, "id": "t3"},
    {"text": "Biscuit chewed my ski boots.", "speaker": "Sam",
     "timestamp": "2024-03-09T08:00:00Z", "metadata": {"topic": "pets", "n": 4}, "id": "t4"},
    {"text": "Dana's exam in Lisbon went well.", "speaker": "Dana",
     "timestamp": "2024-04-20T12:00:00Z", "metadata": {"topic": "study", "n": 5}, "id": "t5"},
    {"text": "We plan to ski in Zermatt next winter.", "speaker": "Sam",
     "timestamp": "2024-05-01T12:00:00Z", "metadata": {"topic": "ski", "n": 6}, "id": "t6"},
]
QUERIES = ["Where did Sam go skiing?", "What does Dana study?", "dog name", "quantum chromodynamics"]

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
_ns = (f"ns-{i}" for i in itertools.count())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with rest_server(tmp_path_factory.mktemp("rest") / "mem", embedder=HashingEmbedder()) as srv:
        yield srv


@pytest.fixture
def remote(server):
    mem = RemoteMemory(server.url, next(_ns))
    yield mem
    mem.close()


def _same_items(a: RetrievalResult, b: RetrievalResult, mem_a, mem_b) -> None:
    """Equal results; concept ids are random per memory, so concepts compare by name."""
    def key(mem, node_id):
        return node_id if not node_id.startswith("c-") else ("concept", mem.get(node_id)["text"])

    assert (a.query, a.rejected, a.gate_tau) == (b.query, b.rejected, b.gate_tau)
    assert a.confidence == pytest.approx(b.confidence, abs=1e-6)
    assert [key(mem_a, it.id) for it in a.items] == [key(mem_b, it.id) for it in b.items]
    for x, y in zip(a.items, b.items):
        assert (x.text, x.kind, x.speaker, x.timestamp, x.metadata, x.concepts) == \
            (y.text, y.kind, y.speaker, y.timestamp, y.metadata, y.concepts)
        assert [key(mem_a, p) for p in x.path] == [key(mem_b, p) for p in y.path]
        assert x.score == pytest.approx(y.score, abs=1e-6)
        assert x.components.similarity == pytest.approx(y.components.similarity, abs=1e-6)
        assert (x.components.bm25_rank, x.components.dense_rank) == \
            (y.components.bm25_rank, y.components.dense_rank)


def test_a_remote_memory_answers_as_the_local_engine_does(remote, tmp_path):
    assert isinstance(remote, MemoryEngine)
    with Synapse(tmp_path, embedder=HashingEmbedder()) as local:
        assert remote.add_turns(TURNS) == local.add_turns(TURNS) == [t["id"] for t in TURNS]
        assert remote.add_turn("A late note about Lisbon.", speaker="Sam", id="t7",
                               timestamp="2024-06-01T00:00:00Z") == "t7"
        local.add_turn("A late note about Lisbon.", speaker="Sam", id="t7", timestamp="2024-06-01T00:00:00Z")
        drop = {"ingest_ts"}
        assert [{k: v for k, v in e.items() if k not in drop} for e in remote.episodes()] == \
            [{k: v for k, v in e.items() if k not in drop} for e in local.episodes()]
        for query in QUERIES:
            _same_items(remote.retrieve(query, k=5), local.retrieve(query, k=5), remote, local)
            _same_items(remote.retrieve(query, k=8, kinds=("episode", "concept")),
                        local.retrieve(query, k=8, kinds=("episode", "concept")), remote, local)
        result = remote.retrieve(QUERIES[0], k=3)
        assert isinstance(result, RetrievalResult) and result.items[0].timestamp.tzinfo is not None
        cfg = remote.config.replace(entity_feedback=1)
        _same_items(remote.retrieve(QUERIES[0], k=5, config=cfg), local.retrieve(QUERIES[0], k=5, config=cfg),
                    remote, local)
        assert remote.stats() == local.stats()
        assert remote.contains("t1") and not remote.contains("nope")
        assert remote.get("t2") == {**local.get("t2"), "ingest_ts": remote.get("t2")["ingest_ts"]}
        there, here = remote.consolidate(), local.consolidate()
        assert isinstance(there, ConsolidationReport)
        assert there.__dict__ | {"seconds": 0} == here.__dict__ | {"seconds": 0}
        assert remote.verify().ok and remote.repair().ok
        assert remote.save() >= 1
        def episodes_of(removed):  # concept ids are random per memory
            return [i for i in removed if not i.startswith("c-")], len(removed)

        assert episodes_of(remote.forget(["t3"])) == episodes_of(local.forget(["t3"]))
        assert episodes_of(remote.forget(speaker="Dana", since="2024-04-01")) == \
            episodes_of(local.forget(speaker="Dana", since="2024-04-01"))
        assert [e["id"] for e in remote.episodes()] == [e["id"] for e in local.episodes()]


async def test_async_twins(remote):
    assert await remote.aadd_turns(TURNS[:3]) == ["t1", "t2", "t3"]
    assert await remote.aadd_turn("Biscuit is a beagle.", speaker="Sam") == remote.episodes()[-1]["id"]
    results = await asyncio.gather(*(remote.aretrieve(q, k=3) for q in QUERIES))
    assert [r.query for r in results] == QUERIES and all(isinstance(r, RetrievalResult) for r in results)
    assert len(await remote.aepisodes()) == 4
    assert (await remote.aget("t1"))["text"] == TURNS[0]["text"]
    assert await remote.acontains("t2")
    assert (await remote.aconsolidate()).episodes >= 0
    assert (await remote.averify()).ok
    assert (await remote.aforget(["t1"]))[0] == "t1"  # and the concepts that went with it
    assert await remote.astats() == remote.stats()
    with pytest.raises(NodeNotFoundError):
        await remote.aget("t1")


def test_filters_and_the_gate_decision(server, remote):
    remote.add_turns(TURNS)
    raw = httpx.post(f"{server.url}/v1/namespaces/{remote.namespace}/retrieve",
                     json={"query": "skiing", "k": 10, "speakers": "Sam", "since": "2024-03-01",
                           "where": {"topic": {"$in": ["ski", "pets"]}}}).json()
    assert {it["id"] for it in raw["items"]} <= {"t3", "t4", "t6"} and raw["items"]
    assert raw["gate"]["decision"] in ("accepted", "rejected") and "gate_tau" in raw["gate"]["reason"]
    comps = raw["items"][0]["components"]  # every term of the score, and the weights that add it up
    assert set(comps) == {"similarity", "activation", "pagerank", "bm25_rank", "dense_rank", "lexical",
                          "distinct", "echo", "superseded", "salience", "hop", "reply", "asked",
                          "focus", "weights"}
    total = sum(w * comps[name] for name, w in comps["weights"].items()) + comps["echo"] \
        + comps["superseded"] + comps["salience"] + comps["hop"] + comps["reply"] + comps["asked"] \
        + comps["focus"]
    assert total == pytest.approx(raw["items"][0]["score"], abs=1e-9)
    nothing = remote.retrieve_explained("zzz qqq xxx", k=3)
    assert nothing["rejected"] and nothing["gate"]["decision"] == "rejected"
    assert "below gate_tau" in nothing["gate"]["reason"] or "no candidate" in nothing["gate"]["reason"]
    early = {it.id for it in remote.retrieve("Lisbon", k=10, until="2024-03-01").items}
    assert early and early <= {"t1", "t2"}


def test_episodes_are_paged(server, remote):
    remote.add_turns([{"text": f"note number {i}", "id": f"n{i}"} for i in range(25)])
    url = f"{server.url}/v1/namespaces/{remote.namespace}/episodes"
    seen, offset = [], 0
    while offset is not None:
        page = httpx.get(url, params={"offset": offset, "limit": 10}).json()
        assert page["total"] == 25 and len(page["episodes"]) <= 10
        seen += [e["id"] for e in page["episodes"]]
        offset = page["next_offset"]
    assert seen == [f"n{i}" for i in range(25)]
    remote.archive(["n0"])
    rows = httpx.get(url, params={"limit": 1000}).json()["episodes"]
    assert [r["id"] for r in rows if r["archived"]] == ["n0"]
    assert len(remote.episodes(include_archived=False)) == 24 and "archived" not in remote.episodes()[0]
    assert remote.restore(["n0"]) == ["n0"]


@pytest.mark.parametrize("namespace", ["a/b", "../../etc", "x?y#z&k=v", "ünïcødé 名前", "%41%2F", ".", "..",
                                       "user_id=42", "  padded  ", "a" * 250])
def test_any_namespace_the_engine_accepts_is_one_memory(server, namespace):
    with RemoteMemory(server.url, namespace) as mem, RemoteMemory(server.url, namespace + "-other") as other:
        mem.add_turn("the secret word is pumpkin", id="p")
        other.add_turn("the secret word is walnut", id="w")
        assert [it.id for it in mem.retrieve("secret word", k=5).items] == ["p"]
        assert [it.id for it in other.retrieve("secret word", k=5).items] == ["w"]
        assert namespace in RemotePool(server.url).namespaces()
        mem.forget(everything=True)
        assert other.contains("w") and not mem.contains("p")


def test_ids_with_slashes_and_unicode_are_one_path_segment(remote):
    ids = ["a/b", "msg-ü/..", "%2F", "?q=1#x", " sp ace ", ".", ".."]
    remote.add_turns([{"text": f"memory {i}", "id": i} for i in ids])
    for node_id in ids:
        assert remote.contains(node_id) and remote.get(node_id)["id"] == node_id
        assert remote.inspect(node_id)["memory"]["id"] == node_id
    assert {i for i in remote.forget(ids) if not i.startswith("c-")} == set(ids)


def test_reads_of_an_unknown_namespace_are_404_and_create_nothing(server):
    before = RemotePool(server.url).namespaces()
    for method, op, body in [("GET", "stats", None), ("GET", "episodes", None),
                             ("POST", "retrieve", {"query": "x"}), ("POST", "forget", {"everything": True}),
                             ("GET", "memories/x", None), ("POST", "verify", None), ("GET", "", None),
                             ("POST", "update", {"id": "x", "text": "y"}), ("GET", "export", None)]:
        r = httpx.request(method, f"{server.url}/v1/namespaces/never-stored/{op}".rstrip("/"), json=body)
        assert r.status_code == 404, (op, r.text)
        assert r.json()["error"]["type"] == "UnknownNamespaceError"
    assert RemotePool(server.url).namespaces() == before
    strict = RemoteMemory(server.url, "never-stored", create=False)  # like Synapse.load
    for call in (strict.episodes, strict.stats, lambda: strict.retrieve("anything")):
        with pytest.raises(UnknownNamespaceError):
            call()
    assert RemotePool(server.url).namespaces() == before
    # like Synapse(path, namespace), a RemoteMemory is a memory from its first use: empty
    mem = RemoteMemory(server.url, "never-stored")
    assert mem.retrieve("anything").rejected and mem.retrieve("anything").items == ()
    assert mem.episodes() == [] and mem.stats()["episodes"] == 0 and not mem.contains("x")
    assert "never-stored" in RemotePool(server.url).namespaces()


BAD_CALLS = [
    ("empty text", lambda m: m.add_turn("   ")),
    ("text not a str", lambda m: m.add_turns([{"text": 5}])),
    ("unknown turn field", lambda m: m.add_turns([{"text": "x", "colour": "red"}])),
    ("bad timestamp", lambda m: m.add_turn("x", timestamp="yesterday-ish")),
    ("timestamp out of range", lambda m: m.add_turn("x", timestamp=1e300)),
    ("NaN in metadata", lambda m: m.add_turn("x", metadata={"v": math.nan})),
    ("reused id", lambda m: m.add_turns([{"text": "x", "id": "t1"}])),
    ("k = 0", lambda m: m.retrieve("x", k=0)),
    ("empty query", lambda m: m.retrieve("  ")),
    ("query not a str", lambda m: m.retrieve(5)),
    ("unknown kind", lambda m: m.retrieve("x", kinds=("fact",))),
    ("malformed where", lambda m: m.retrieve("x", where={"n": {"$near": 3}})),
    ("bad since", lambda m: m.retrieve("x", since="not a date")),
    ("forget with no criteria", lambda m: m.forget()),
    ("forget a str", lambda m: m.forget("t1")),
    ("unknown id", lambda m: m.get("no-such-id")),
    ("archive unknown id", lambda m: m.archive(["no-such-id"])),
]


@pytest.mark.parametrize("name,call", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_input_fails_remotely_as_it_fails_locally(server, tmp_path, name, call):
    """Never a 500 for user error: each bad call is a 4xx whose error the client raises as
    the engine's own class, with the engine's message."""
    with Synapse(tmp_path, embedder=HashingEmbedder()) as local, \
            RemoteMemory(server.url, next(_ns)) as remote:
        local.add_turns(TURNS)
        remote.add_turns(TURNS)
        with pytest.raises(SynapseError) as here:
            call(local)
        with pytest.raises(SynapseError) as there:
            call(remote)
        assert isinstance(there.value, (type(here.value), InvalidInputError, InvalidTypeError)), \
            (name, here.value, there.value)
        assert isinstance(there.value, ValueError) == isinstance(here.value, ValueError) or \
            isinstance(there.value, TypeError) == isinstance(here.value, TypeError)


def test_error_statuses_and_bodies(server, remote):
    remote.add_turns(TURNS)
    base = f"{server.url}/v1/namespaces"
    cases = [
        ("POST", f"{base}/{remote.namespace}/turns", {"turns": [{"text": ""}]}, 400, "InvalidInputError"),
        ("POST", f"{base}/{remote.namespace}/turns", {"turns": [{"text": "x", "id": "t1"}]}, 409, "InvalidInputError"),
        ("POST", f"{base}/{remote.namespace}/turns", {"turns": "x"}, 422, "RequestValidationError"),
        ("POST", f"{base}/{remote.namespace}/turns", {"turns": [{"text": "x", "vector": [1.0, 2.0]}]}, 400,
         "InvalidInputError"),
        ("POST", f"{base}/{remote.namespace}/retrieve", {"query": "x", "where": {"$bad": 1}}, 400,
         "InvalidInputError"),
        ("POST", f"{base}/{remote.namespace}/retrieve", {"query": "x", "config": {"top_k": "many"}}, 422,
         "InvalidTypeError"),
        ("POST", f"{base}/{remote.namespace}/retrieve", {"query": "x", "config": {"embedding_dim": 3}}, 400,
         "InvalidInputError"),
        ("POST", f"{base}/{remote.namespace}/retrieve", {"query": "x", "config": {"gate_tau": -1.0}}, 400,
         "ConfigError"),
        ("POST", f"{base}/{remote.namespace}/retrieve", {"query": "x", "config": {"model": "nope"}}, 400,
         "ConfigError"),
        ("POST", f"{base}/{remote.namespace}/retrieve",
         {"query": "x", "config": {"model": "evermind", "model_params": {"evermind": {"nope": 1}}}}, 400,
         "ConfigError"),
        ("GET", f"{base}/{remote.namespace}/memories/nope", None, 404, "NodeNotFoundError"),
        ("GET", f"{base}/{remote.namespace}/episodes?limit=0", None, 422, "RequestValidationError"),
        ("POST", f"{base}/%00bad/turns", {"turns": [{"text": "x"}]}, 400, "NamespaceError"),
        ("POST", f"{base}/%20%20/turns", {"turns": [{"text": "x"}]}, 400, "NamespaceError"),
        ("POST", f"{base}/{'a' * 300}/turns", {"turns": [{"text": "x"}]}, 400, "NamespaceError"),
        ("POST", f"{base}/%ED%A0%80/turns", {"turns": [{"text": "x"}]}, 400, "NamespaceError"),
        ("GET", f"{server.url}/v1/nothing-here", None, 404, "HTTPError"),
    ]
    for method, url, body, status, kind in cases:
        r = httpx.request(method, url, json=body)
        assert (r.status_code, r.json()["error"]["type"]) == (status, kind), (url, body, r.text)
        assert r.json()["error"]["message"]
    r = httpx.post(f"{base}/{remote.namespace}/turns", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("POST", f"/v1/namespaces/{remote.namespace}/turns")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(64 * 1024 * 1024))  # refused before it is sent
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413 and b"PayloadTooLarge" in response.read()
    conn.close()


def test_the_firewall_blocks_with_422_and_names_the_category(tmp_path):
    firewall = FirewallConfig(overrides={"private_key": "block"})
    with rest_server(tmp_path / "mem", embedder=HashingEmbedder(), firewall=firewall) as srv, \
            RemoteMemory(srv.url, "fw") as mem:
        key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
        r = httpx.post(f"{srv.url}/v1/namespaces/fw/turns", json={"turns": [{"text": f"my key {key}"}]})
        assert r.status_code == 422 and r.json()["error"]["type"] == "FirewallBlockedError"
        assert r.json()["error"]["categories"] == ["private_key"] and "MIIE" not in r.text
        with pytest.raises(FirewallBlockedError) as exc:
            mem.add_turn(f"my key {key}")
        assert exc.value.categories == ("private_key",)


def test_api_key(tmp_path, monkeypatch):
    with rest_server(tmp_path / "mem", embedder=HashingEmbedder(), api_key="s3cret") as srv:
        assert httpx.get(f"{srv.url}/health").status_code == 200  # liveness needs no key
        assert httpx.get(f"{srv.url}/openapi.json").json()["components"]["securitySchemes"]
        for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer wrong"}):
            r = httpx.get(f"{srv.url}/v1/namespaces", headers=headers)
            assert r.status_code == 401 and r.json()["error"]["status"] == 401
        assert httpx.get(f"{srv.url}/v1/namespaces", headers={"X-API-Key": "s3cret"}).status_code == 200
        assert httpx.get(f"{srv.url}/v1/namespaces", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        with pytest.raises(AuthenticationError):
            RemoteMemory(srv.url, "k").add_turn("hello")
        with RemoteMemory(srv.url, "k", api_key="s3cret") as mem:
            assert mem.add_turn("hello", id="h") == "h"


def test_inspect_a_namespace_and_a_memory(server, remote):
    remote.add_turns(TURNS)
    remote.consolidate()
    info = remote.inspect()
    assert info["namespace"] == remote.namespace and info["stats"]["episodes"] == 6
    assert info["config"]["embedding_dim"] == 384 and info["embedder"] == "HashingEmbedder"
    one = remote.inspect("t1", query="Where did Sam go skiing?")
    assert one["memory"]["text"] == TURNS[0]["text"] and one["links"]
    assert one["query"]["rank"] >= 1 and one["query"]["item"]["id"] == "t1"
    assert set(one["query"]["item"]["components"]) >= {"similarity", "activation", "pagerank"}


def test_health_and_openapi(server):
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "ok" and health["version"]
    spec = httpx.get(f"{server.url}/openapi.json").json()
    paths = set(spec["paths"])
    for op in ("turns", "retrieve", "forget", "update", "episodes", "stats", "consolidate", "verify",
               "repair", "export"):
        assert f"/v1/namespaces/{{namespace}}/{op}" in paths
    assert httpx.get(f"{server.url}/docs").status_code == 200


def test_the_server_owns_its_folder(tmp_path):
    import subprocess
    import sys

    from _server_helpers import env

    with rest_server(tmp_path / "mem", embedder=HashingEmbedder()) as srv:
        RemoteMemory(srv.url, "a").add_turn("hello")
        code = ("import sys; from synapse_integrations import Synapse, HashingEmbedder\n"
                "from synapse_integrations.errors import MemoryLockedError\n"
                f"try: Synapse({str(tmp_path / 'mem')!r}, embedder=HashingEmbedder())\n"
                "except MemoryLockedError as e: print('locked', e); sys.exit(0)\nsys.exit(1)")
        out = subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "locked" in out.stdout, out.stderr
    with pytest.raises(NamespaceError):
        RemoteMemory("http://127.0.0.1:9", "\x00")


def test_update_keeps_history_as_the_engine_does(remote, tmp_path):
    with Synapse(tmp_path, embedder=HashingEmbedder()) as local:
        for mem in (remote, local):
            mem.add_turns(TURNS)
        new_remote = remote.update("t1", "Sam went skiing in Zermatt with Dana.", metadata={"topic": "ski"})
        new_local = local.update("t1", "Sam went skiing in Zermatt with Dana.", metadata={"topic": "ski"})
        assert remote.get("t1")["superseded_by"] == new_remote and local.get("t1")["superseded_by"] == new_local
        there, here = remote.retrieve("skiing with Dana", k=3), local.retrieve("skiing with Dana", k=3)
        assert [(it.text, it.superseded_by is not None, it.supersedes) for it in there.items] == \
            [(it.text, it.superseded_by is not None, it.supersedes) for it in here.items]
        old = next(it for it in there.items if it.id == "t1")
        assert old.superseded_by == new_remote and old.superseded_at is not None
        assert (await_free := remote.update(new_remote, "Zermatt, not Whistler.", keep_history=False))
        assert not remote.contains(new_remote) and remote.contains(await_free)
        with pytest.raises(NodeNotFoundError):
            remote.update("nope", "x")
        with pytest.raises(InvalidInputError):
            remote.update("t2", "   ")
        assert remote.get("t2")["text"] == TURNS[1]["text"]  # a refused update changes nothing


async def test_aupdate(remote):
    remote.add_turns(TURNS[:2])
    new = await remote.aupdate("t2", "Dana studies law in Lisbon.")
    assert (await remote.aget("t2"))["superseded_by"] == new

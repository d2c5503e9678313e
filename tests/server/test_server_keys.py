"""Tenant-scoped access: API keys bound to namespace patterns (a key file, or the same JSON
in SYNAPSE_API_KEYS), enforced on every REST route that names a namespace, on the
namespace list and on MCP connections, with real servers on 127.0.0.1 (uvicorn, httpx,
the MCP SDK's client); the single --api-key mode beside them."""

from __future__ import annotations

import json
import subprocess
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from _server_helpers import ServerProcess, env, rest_server, synapse_cmd

from synapse_integrations import HashingEmbedder
from synapse_integrations.errors import InvalidInputError, NamespaceError
from synapse_integrations.server.access import AccessDeniedError, ApiKey, KeyRing, bind_namespace
from synapse_integrations.server.client import AuthenticationError, RemoteMemory

pytest.importorskip("mcp")
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamablehttp_client  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning")]

ALICE, BOB, TEAM, OPS, ADMIN = "key-of-alice", "key-of-bob-0", "key-of-the-team", "key-of-ops-00", "admin-key"
KEYS = {"keys": [
    {"name": "alice-app", "key": ALICE, "namespaces": ["alice"]},
    {"name": "bob-app", "key": BOB, "namespaces": ["bob"]},
    {"name": "team-bot", "key": TEAM, "namespaces": ["team-*"]},
    {"name": "ops", "key": OPS, "namespaces": ["alice", "bob"]},
]}
ROUTES = [("GET", ""), ("PUT", ""), ("POST", "/turns"), ("POST", "/retrieve"), ("POST", "/forget"),
          ("POST", "/update"), ("POST", "/feedback"), ("GET", "/episodes"), ("GET", "/memories/a"),
          ("GET", "/memories/a/exists"), ("GET", "/memories/a/inspect"), ("GET", "/stats"),
          ("POST", "/consolidate"), ("POST", "/verify"), ("POST", "/repair"), ("POST", "/save"),
          ("POST", "/archive"), ("GET", "/archived"), ("POST", "/restore"), ("GET", "/export")]


def h(key: str) -> dict[str, str]:
    return {"X-API-Key": key}


# ---------------------------------------------------------------------------------------
# the key ring
# ---------------------------------------------------------------------------------------
def test_patterns_and_the_namespace_a_key_binds():
    ring = KeyRing.parse(json.dumps(KEYS))
    alice, team, ops = ring.find(ALICE), ring.find(TEAM), ring.find(OPS)
    assert (alice.name, team.name, ops.name) == ("alice-app", "team-bot", "ops")
    assert ring.find("nope") is None and ring.find("") is None and ring.find(None) is None
    assert alice.allows("alice") and not alice.allows("alice2") and not alice.allows("Alice")
    assert team.allows("team-red") and not team.allows("team") and not team.allows("bob")
    assert alice.only == "alice" and team.only is None and ops.only is None
    assert bind_namespace(alice, None) == "alice" and bind_namespace(alice, "alice") == "alice"
    with pytest.raises(AccessDeniedError, match="'alice-app' may use the namespaces matching 'alice' only, not 'bob'"):
        bind_namespace(alice, "bob")
    with pytest.raises(NamespaceError, match="namespace is required .*'team-\\*', more than one"):
        bind_namespace(team, None)
    with pytest.raises(NamespaceError, match="required"):
        bind_namespace(None, None)
    assert bind_namespace(None, "anything") == "anything"
    assert ring.scoped and not KeyRing.single("s3cret").scoped
    assert ALICE not in repr(ring) and ALICE not in repr(alice)  # a digest, never the key


@pytest.mark.parametrize(("text", "problem"), [
    ("not json", "is not JSON"),
    ('{"keys": []}', "at least one key"),
    ('[{"name": "a", "key": "12345678", "namespaces": ["a"]}]', '"keys"'),
    ('{"keys": [{"name": "a", "key": "short", "namespaces": ["a"]}]}', "key 0 ('a'): key must be at least 8"),
    ('{"keys": [{"name": "a", "key": "has a space", "namespaces": ["a"]}]}', "no spaces"),
    ('{"keys": [{"name": "a", "key": "12345678", "namespaces": []}]}', "namespaces must be a non-empty list"),
    ('{"keys": [{"name": "a", "key": "12345678", "namespaces": "a"}]}', "namespaces must be a non-empty list"),
    ('{"keys": [{"name": "", "key": "12345678", "namespaces": ["a"]}]}', "name must be"),
    ('{"keys": [{"name": "a", "key": "12345678", "namespaces": ["a"], "admin": true}]}', "name, key and namespaces only"),
    ('{"keys": [{"name": "a", "key": "12345678", "namespaces": ["a"]}, '
     '{"name": "a", "key": "87654321", "namespaces": ["b"]}]}', "same name"),
    ('{"keys": [{"name": "a", "key": "12345678", "namespaces": ["a"]}, '
     '{"name": "b", "key": "12345678", "namespaces": ["b"]}]}', "same secret"),
])
def test_a_bad_key_file_is_refused_naming_the_problem(text, problem):
    with pytest.raises(InvalidInputError, match=None) as exc:
        KeyRing.parse(text, source="keys.json")
    assert problem in str(exc.value) and "keys.json" in str(exc.value)
    assert "12345678" not in str(exc.value) and "87654321" not in str(exc.value)


def test_a_key_is_found_among_all_keys_by_its_digest():
    keys = [ApiKey.of(f"k{i}", f"secret-{i:04d}", [f"ns{i}"]) for i in range(50)]
    ring = KeyRing(keys)
    assert [ring.find(f"secret-{i:04d}").name for i in (0, 25, 49)] == ["k0", "k25", "k49"]
    assert ring.find("secret-0050") is None and ring.find("secret-004") is None


# ---------------------------------------------------------------------------------------
# REST
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    ring = KeyRing.parse(json.dumps(KEYS))
    with rest_server(tmp_path_factory.mktemp("keys") / "mem", embedder=HashingEmbedder(), keys=ring,
                     api_key=ADMIN, mcp=True) as srv:
        for ns, key in (("alice", ALICE), ("bob", BOB), ("team-red", TEAM), ("team-blue", TEAM)):
            r = httpx.post(f"{srv.url}/v1/namespaces/{ns}/turns", headers=h(key),
                           json={"turns": [{"text": f"{ns} lives in Lisbon.", "id": "a"}]})
            assert r.status_code == 200, r.text
        yield srv


def test_a_scoped_key_is_refused_on_every_route_of_another_tenants_namespace(keyed):
    base = f"{keyed.url}/v1/namespaces"
    for method, route in ROUTES:
        r = httpx.request(method, f"{base}/bob{route}", headers=h(ALICE), json={})
        assert r.status_code == 403, (method, route, r.text)
        err = r.json()["error"]
        assert err == {"type": "AccessDeniedError", "status": 403,
                       "message": "key 'alice-app' may use the namespaces matching 'alice' only, not 'bob'"}
        assert ALICE not in r.text
    # the same routes on its own namespace are not refused for the key
    for method, route in ROUTES:
        r = httpx.request(method, f"{base}/alice{route}", headers=h(ALICE), json={})
        assert r.status_code not in (401, 403), (method, route, r.text)
    # patterns, and the namespace as the router reads it (percent-encoded, slashes)
    assert httpx.get(f"{base}/team-red/stats", headers=h(TEAM)).json()["episodes"] == 1
    r = httpx.get(f"{base}/alice/stats", headers=h(TEAM))
    assert r.status_code == 403 and "'team-*'" in r.json()["error"]["message"]
    for sneaky in ("alice%2F..%2Fbob", "bob%00", "alice/../bob", "%62ob", "alice%2Fbob"):
        r = httpx.get(f"{base}/{sneaky}/stats", headers=h(ALICE))
        assert r.status_code in (403, 404), (sneaky, r.text)
        assert r.status_code == 403 or "bob" not in r.text
    assert httpx.get(f"{base}/%61lice/stats", headers=h(ALICE)).status_code == 200  # 'alice', encoded


def test_the_namespace_list_shows_a_key_its_own(keyed):
    def listed(key: str) -> list[str]:
        r = httpx.get(f"{keyed.url}/v1/namespaces", headers=h(key))
        assert r.status_code == 200
        return r.json()["namespaces"]

    assert listed(ALICE) == ["alice"]
    assert listed(TEAM) == ["team-blue", "team-red"]
    assert listed(OPS) == ["alice", "bob"]
    assert listed(ADMIN) == ["alice", "bob", "team-blue", "team-red"]  # --api-key: every namespace
    assert httpx.get(f"{keyed.url}/v1/namespaces").status_code == 401
    assert httpx.get(f"{keyed.url}/v1/namespaces", headers=h("key-of-nobody")).status_code == 401
    assert httpx.get(f"{keyed.url}/health").status_code == 200


def test_remote_memory_with_a_scoped_key(keyed):
    with RemoteMemory(keyed.url, "alice", api_key=ALICE) as mine:
        assert mine.add_turn("Alice adopted a cat.", id="cat") == "cat"
        assert mine.retrieve("cat", k=1).items[0].id == "cat"
    with RemoteMemory(keyed.url, "bob", api_key=ALICE) as theirs, \
            pytest.raises(AccessDeniedError, match="'alice-app' may use"):
        theirs.episodes()
    with RemoteMemory(keyed.url, "bob", api_key="key-of-nobody") as nobody, \
            pytest.raises(AuthenticationError):
        nobody.episodes()
    with RemoteMemory(keyed.url, "bob", api_key=BOB) as bob:  # untouched
        assert [e["id"] for e in bob.episodes()] == ["a"]


# ---------------------------------------------------------------------------------------
# MCP: a connection bound to its key's namespace
# ---------------------------------------------------------------------------------------
@asynccontextmanager
async def mcp_session(url: str, key: str):
    async with streamablehttp_client(f"{url}/mcp", headers=h(key)) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def tool(session: ClientSession, name: str, **args: Any) -> tuple[bool, Any]:
    result = await session.call_tool(name, args)
    return result.isError, (result.content[0].text if result.isError else result.structuredContent)


async def test_an_mcp_connection_is_bound_to_its_keys_namespace(keyed):
    async with mcp_session(keyed.url, ALICE) as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert all("namespace" not in t.inputSchema.get("required", []) for t in listed.values())
        assert "namespace" in listed["retrieve"].inputSchema["properties"]
        failed, out = await tool(session, "store_turns", turns=[{"text": "Alice plays the cello.", "id": "cello"}])
        assert not failed, out
        failed, out = await tool(session, "retrieve", query="cello", k=1)
        assert not failed and out["items"][0]["id"] == "cello"
        failed, out = await tool(session, "stats", namespace="alice")
        assert not failed and out["episodes"] >= 2
        for name, args in (("retrieve", {"query": "Lisbon"}), ("store_turns", {"turns": [{"text": "x"}]}),
                           ("forget", {"everything": True}), ("stats", {}), ("health", {})):
            failed, out = await tool(session, name, namespace="bob", **args)
            assert failed and "AccessDeniedError (403): key 'alice-app' may use the namespaces matching " \
                              "'alice' only, not 'bob'" in out, (name, out)
        names = json.loads((await session.read_resource("synapse://namespaces")).contents[0].text)
        assert names == {"namespaces": ["alice"]}
        with pytest.raises(Exception, match="AccessDeniedError|403|not 'bob'"):
            await session.read_resource("synapse://namespaces/bob/stats")
    async with mcp_session(keyed.url, TEAM) as session:  # a pattern: the namespace must be named
        failed, out = await tool(session, "stats")
        assert failed and "NamespaceError (400): namespace is required" in out and "team-*" in out
        failed, out = await tool(session, "stats", namespace="team-blue")
        assert not failed and out["episodes"] == 1
        failed, out = await tool(session, "stats", namespace="alice")
        assert failed and "AccessDeniedError (403)" in out
    async with mcp_session(keyed.url, ADMIN) as session:  # the single key: every namespace
        failed, out = await tool(session, "stats", namespace="bob")
        assert not failed and out["episodes"] == 1
    with RemoteMemory(keyed.url, "bob", api_key=BOB) as bob:  # nothing of Alice's reached Bob
        assert [e["id"] for e in bob.episodes()] == ["a"]
    assert httpx.post(f"{keyed.url}/mcp", json={}).status_code == 401


# ---------------------------------------------------------------------------------------
# the command line: --key-file, SYNAPSE_API_KEYS
# ---------------------------------------------------------------------------------------
@pytest.mark.server
def test_serve_http_with_a_key_file_and_with_the_environment(tmp_path):
    key_file = tmp_path / "keys.json"
    key_file.write_text(json.dumps(KEYS))
    with ServerProcess("http", tmp_path / "mem", "--embedder", "hashing", "--key-file", str(key_file),
                       "--mcp") as srv:
        ok = httpx.post(f"{srv.url}/v1/namespaces/alice/turns", headers=h(ALICE), json={"turns": [{"text": "hi"}]})
        assert ok.status_code == 200
        assert httpx.post(f"{srv.url}/v1/namespaces/bob/turns", headers=h(ALICE),
                          json={"turns": [{"text": "hi"}]}).status_code == 403
        assert httpx.get(f"{srv.url}/v1/namespaces", headers=h(BOB)).json() == {"namespaces": []}
    inline = {**env(), "SYNAPSE_API_KEYS": json.dumps(KEYS), "SYNAPSE_API_KEY": ""}
    srv = ServerProcess("mcp", tmp_path / "mem", "--embedder", "hashing", "--transport", "http")
    srv.proc = subprocess.Popen(srv.args, env=inline, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from _server_helpers import wait_healthy

        wait_healthy(srv.url, proc=srv.proc)
        assert httpx.post(f"{srv.url}/mcp", json={}, headers=h("key-of-nobody")).status_code == 401
        assert httpx.post(f"{srv.url}/mcp", json={}).status_code == 401
    finally:
        srv.stop()
    bad = tmp_path / "bad.json"
    bad.write_text('{"keys": [{"name": "a", "key": "short", "namespaces": ["a"]}]}')
    out = subprocess.run(synapse_cmd("serve", "http", "--path", str(tmp_path / "m2"), "--embedder", "hashing",
                                     "--key-file", str(bad)), env=env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "key must be at least 8" in out.stderr and str(bad) in out.stderr

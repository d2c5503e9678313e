"""A real `synapse serve http` under hostile HTTP, on 127.0.0.1: bodies over the size limit
in every transfer encoding (chunked included) refused as the bytes arrive, with the
server's memory measured; no body read before the key is checked; non-finite numbers
and malformed bodies answered with a 4xx on a connection that stays usable; a busy
memory answered as retryable; SIGTERM ends the server with its final snapshot and exit 0;
MCP sessions that end normally log no error."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _server_helpers import ServerProcess, rest_server

from synapse_integrations import HashingEmbedder, Synapse
from synapse_integrations.server.rest import MAX_BODY_BYTES

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning")]

KEY = "k3y-for-the-size-tests"
H = ("--embedder", "hashing")
MiB = 1024 * 1024


# ---------------------------------------------------------------------------------------
# measuring the server's memory
# ---------------------------------------------------------------------------------------
def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)


def rss_growth_mib(pid: int, work: Callable[[], Any]) -> tuple[float, float, Any]:
    """Run ``work`` and return (RSS before in MiB, the peak growth during it in MiB, its
    result). The peak is the kernel's high-water mark, reset first (``clear_refs`` 5),
    and a sampler thread's maximum as a cross-check; the larger is reported."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status_kib(pid, "VmRSS")
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _status_kib(pid, "VmRSS"))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = work()
    finally:
        done.set()
        sampler.join(timeout=5)
    high = max(peak[0], _status_kib(pid, "VmHWM"))
    return before / 1024, (high - before) / 1024, result


def chunks(total: int, size: int = MiB) -> Iterator[bytes]:
    """``total`` bytes in ``size`` chunks: httpx sends a generator with chunked transfer
    encoding (no Content-Length)."""
    block = b" " * size
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        yield block if n == size else block[:n]
        sent += n


@pytest.fixture(scope="module")
def keyed(tmp_path_factory) -> Iterator[ServerProcess]:
    """`synapse serve http --api-key` as a subprocess (its own RSS, measured here)."""
    path = tmp_path_factory.mktemp("http") / "mem"
    with ServerProcess("http", path, *H, "--api-key", KEY) as srv:
        yield srv


def _post_chunked(url: str, total: int, headers: dict[str, str]) -> httpx.Response:
    with httpx.Client(timeout=120) as client:
        return client.post(url, content=chunks(total),
                           headers={"content-type": "application/json", **headers})


@pytest.mark.server
def test_a_chunked_body_over_the_limit_is_refused_as_it_arrives(keyed):
    url = f"{keyed.url}/v1/namespaces/big/turns"
    httpx.post(url, json={"turns": [{"text": "warm up"}]}, headers={"X-API-Key": KEY}).raise_for_status()
    before, growth, r = rss_growth_mib(keyed.proc.pid,
                                       lambda: _post_chunked(url, 200 * MiB, {"X-API-Key": KEY}))
    print(f"\n200 MiB chunked body with the key: RSS {before:.0f} MiB, peak growth {growth:.1f} MiB, "
          f"answer {r.status_code}")
    assert r.status_code == 413, r.text
    err = r.json()["error"]
    assert err["type"] == "PayloadTooLarge" and err["status"] == 413
    assert str(MAX_BODY_BYTES) in err["message"] and "batch" in err["message"]
    assert growth < 64, f"the server grew by {growth:.0f} MiB reading a body it refuses"
    # and the server still serves: nothing of the body was stored
    ok = httpx.get(f"{keyed.url}/v1/namespaces/big/stats", headers={"X-API-Key": KEY})
    assert ok.status_code == 200 and ok.json()["episodes"] == 1


@pytest.mark.server
def test_without_a_valid_key_the_body_is_not_read(keyed):
    url = f"{keyed.url}/v1/namespaces/big/turns"
    for headers in ({}, {"X-API-Key": "wrong"}):
        before, growth, r = rss_growth_mib(keyed.proc.pid, lambda: _post_chunked(url, 200 * MiB, headers))
        print(f"\n200 MiB chunked body, key {headers or 'none'}: RSS {before:.0f} MiB, "
              f"peak growth {growth:.1f} MiB, answer {r.status_code}")
        assert r.status_code == 401 and r.json()["error"]["status"] == 401
        assert growth < 16, f"the server grew by {growth:.0f} MiB reading the body of a request it refuses"


@pytest.mark.server
def test_a_body_just_under_the_limit_is_read_and_one_over_it_is_not(keyed):
    """The limit counts the bytes of the body, whatever the encoding: a valid body padded
    to just under it is parsed (a 422 for its unknown field, not a 413); one byte more is
    a 413, chunked or with a Content-Length."""
    url = f"{keyed.url}/v1/namespaces/edge/retrieve"
    head = b'{"query": "x", "pad": "'
    tail = b'"}'

    def body(size: int) -> bytes:
        return head + b"p" * (size - len(head) - len(tail)) + tail

    headers = {"X-API-Key": KEY, "content-type": "application/json"}
    with httpx.Client(timeout=120) as client:
        at = client.post(url, content=iter([body(MAX_BODY_BYTES)]), headers=headers)
        assert at.status_code == 422 and "pad" in at.json()["error"]["message"], at.text[:300]
        over = body(MAX_BODY_BYTES + 1)
        chunked = client.post(url, content=(over[i:i + MiB] for i in range(0, len(over), MiB)), headers=headers)
        assert chunked.status_code == 413, chunked.text[:300]
    with httpx.Client(timeout=120) as client:
        sized = client.post(url, content=over, headers=headers)
        assert sized.status_code == 413 and sized.json()["error"]["type"] == "PayloadTooLarge"


# ---------------------------------------------------------------------------------------
# non-finite numbers: a 4xx, and the same keep-alive connection serves the next request
# ---------------------------------------------------------------------------------------
NON_FINITE = [
    ("retrieve", '{"query": "x", "k": NaN}', "k"),
    ("retrieve", '{"query": "x", "k": Infinity}', "k"),
    ("turns", '{"turns": [{"text": 1e999}]}', "turns.0.text"),
    ("turns", '{"turns": [{"text": -Infinity}]}', "turns.0.text"),
    ("forget", '{"ids": [NaN]}', "ids.0"),
    ("archive", '{"ids": [NaN, 1e999]}', "ids.0"),
    ("feedback", '{"query": "x", "used_ids": ["a"], "alpha": NaN}', "alpha"),
    ("retrieve", '{"query": "x", "since": NaN}', "finite"),
    ("retrieve", '{"query": "x", "config": {"gate_tau": NaN}}', "gate_tau"),
    ("turns", '{"turns": [{"text": "x", "timestamp": Infinity}]}', "finite"),
    ("turns", '{"turns": [{"text": "x", "metadata": {"n": NaN}}]}', "metadata"),
    ("turns", '{"turns": [{"text": "x", "vector": [NaN]}]}', "vector"),
]


def test_non_finite_numbers_are_a_4xx_and_the_connection_stays_usable(tmp_path):
    with rest_server(tmp_path / "mem", embedder=HashingEmbedder()) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        client.post("/v1/namespaces/u/turns", json={"turns": [{"text": "Dana lives in Lisbon.", "id": "a"}]})
        for route, body, field in NON_FINITE:
            r = client.post(f"/v1/namespaces/u/{route}", content=body,
                            headers={"content-type": "application/json"})
            assert 400 <= r.status_code < 500, (body, r.status_code, r.text)
            err = r.json()["error"]
            assert err["status"] == r.status_code and (field or "") in err["message"], (body, err)
            # the next request rides the same keep-alive connection and is answered
            follow = client.get("/v1/namespaces/u/stats")
            assert follow.status_code == 200 and follow.json()["episodes"] == 1, body
        echoed = client.post("/v1/namespaces/u/retrieve", content='{"query": "x", "k": NaN}',
                             headers={"content-type": "application/json"}).json()["error"]
        assert echoed["details"][0]["input"] == "NaN"  # echoed as text, as JSON can carry it


@pytest.mark.server
def test_a_request_to_another_tenants_namespace_is_refused_before_its_body_is_read(tmp_path):
    key_file = tmp_path / "keys.json"
    key_file.write_text(json.dumps({"keys": [{"name": "alice-app", "key": "key-of-alice", "namespaces": ["alice"]},
                                             {"name": "bob-app", "key": "key-of-bob-0", "namespaces": ["bob"]}]}))
    with ServerProcess("http", tmp_path / "mem", *H, "--key-file", str(key_file)) as srv:
        url = f"{srv.url}/v1/namespaces/bob/turns"
        before, growth, r = rss_growth_mib(srv.proc.pid,
                                           lambda: _post_chunked(url, 200 * MiB, {"X-API-Key": "key-of-alice"}))
        print(f"\n200 MiB chunked body, Alice's key on Bob's namespace: RSS {before:.0f} MiB, "
              f"peak growth {growth:.1f} MiB, answer {r.status_code}")
        assert r.status_code == 403 and "'alice-app'" in r.json()["error"]["message"]
        assert growth < 16


# ---------------------------------------------------------------------------------------
# a busy memory: retryable (503, Retry-After), never the 409 that means "already stored"
# ---------------------------------------------------------------------------------------
def test_a_busy_memory_is_a_503_with_retry_after_and_a_reused_id_stays_409(tmp_path):
    from synapse_integrations.errors import InvalidInputError, MemoryLockedError
    from synapse_integrations.server.client import RemoteMemory

    path = tmp_path / "mem"
    with rest_server(path, embedder=HashingEmbedder()) as srv:
        url = f"{srv.url}/v1/namespaces/held/turns"
        turn = {"turns": [{"text": "Dana moved to Lisbon.", "id": "t1"}]}
        held = Synapse(path, namespace="held", embedder=HashingEmbedder())  # another holder of the memory
        try:
            r = httpx.post(url, json=turn)
            assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
            err = r.json()["error"]
            assert err["type"] == "MemoryLockedError" and err["message"].startswith("the memory is busy")
            with RemoteMemory(srv.url, "held") as mem, pytest.raises(MemoryLockedError, match="busy"):
                mem.add_turns(turn["turns"])
        finally:
            held.close()
        # retried once the memory is free: stored; sent again: 409, "already stored"
        assert httpx.post(url, json=turn).json() == {"ids": ["t1"]}
        again = httpx.post(url, json=turn)
        assert again.status_code == 409 and "already used" in again.json()["error"]["message"]
        with RemoteMemory(srv.url, "held") as mem, pytest.raises(InvalidInputError, match="already used"):
            mem.add_turns(turn["turns"])
    from synapse_integrations.server import wire

    assert [status for cls, status in wire.ERRORS if cls is MemoryLockedError] == [503]
    assert 409 not in {status for _, status in wire.ERRORS}  # 409 is only a reused id


# ---------------------------------------------------------------------------------------
# the end of a server and of MCP sessions
# ---------------------------------------------------------------------------------------
@pytest.mark.server
@pytest.mark.parametrize("kind", ["http", "mcp"])
def test_sigterm_exits_0_after_the_final_snapshot(tmp_path, kind):
    from synapse_integrations.server.client import RemoteMemory

    path = tmp_path / "mem"
    extra = ("--transport", "http") if kind == "mcp" else ()
    srv = ServerProcess("http" if kind == "http" else "mcp", path, *H, *extra).start()
    try:
        if kind == "http":
            with RemoteMemory(srv.url, "u1") as mem:  # fewer turns than snapshot_every: no snapshot yet
                ids = mem.add_turns([{"text": f"turn {i} about Lisbon", "id": f"t{i}"} for i in range(7)])
        else:
            ids = _mcp_store(srv.url, "u1", [{"text": f"turn {i} about Lisbon", "id": f"t{i}"} for i in range(7)])
        srv.proc.send_signal(signal.SIGTERM)
        code = srv.proc.wait(timeout=60)
    finally:
        srv.stop()
    log = srv.log_path.read_text()
    assert code == 0, (code, log[-2000:])
    assert "Traceback" not in log and "ERROR" not in log, log[-2000:]
    with Synapse(path, namespace="u1", embedder=HashingEmbedder()) as mem:
        report = mem.load_report
        # every turn came from the final snapshot: nothing re-attached from loose vectors
        assert report.ok and report.actions == () and report.problems == (), report
        assert [e["id"] for e in mem.episodes()] == ids


def _mcp_store(url: str, namespace: str, turns: list[dict[str, Any]]) -> list[str]:
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def store() -> list[str]:
        async with streamablehttp_client(f"{url}/mcp") as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("store_turns", {"namespace": namespace, "turns": turns})
            assert not result.isError, result.content[0].text
            return result.structuredContent["ids"]

    return anyio.run(store)


@pytest.mark.server
@pytest.mark.parametrize("kind", ["http", "mcp"])
def test_mcp_sessions_that_end_normally_log_no_error(tmp_path, kind):
    """Several SDK client sessions over streamable HTTP, each opened, used and closed as a
    client does (the SDK ends its session on exit): the server logs nothing at ERROR."""
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    extra = ("--mcp",) if kind == "http" else ("--transport", "http")
    with ServerProcess(kind, tmp_path / "mem", *H, *extra, "--log-level", "info") as srv:
        async def sessions() -> None:
            for i in range(4):
                async with streamablehttp_client(f"{srv.url}/mcp") as (read, write, _), \
                        ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool("store_turns", {"namespace": "u", "turns": [{"text": f"t{i}"}]})
                    assert not result.isError
                    await session.call_tool("retrieve", {"namespace": "u", "query": "t"})
                await anyio.sleep(0.2)  # let the server finish the session's teardown
            await anyio.sleep(0.5)

        anyio.run(sessions)
        log = srv.log_path.read_text()
    assert log.count("POST /mcp") >= 12, log[-2000:]  # the requests are in the log: it is read
    assert "ERROR" not in log and "Traceback" not in log, log[-3000:]

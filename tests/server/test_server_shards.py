"""Several memory servers behind HAProxy (server/shards.py): the rendezvous hash against
hand-checked values and its movement properties; the written configuration checked by
the real haproxy (Debian's package); then 3 real `synapse serve http` processes behind a
real haproxy on 127.0.0.1: 1,000 tenants through RemotePool land each on the shard
Python's `owner()` names (the proxy's Lua computes the same function), a `kill -9` of one
shard fails only its tenants (a 503 in the API's shape), and after its restart every
acknowledged turn is there exactly once."""

from __future__ import annotations

import collections
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from _server_helpers import ServerProcess, free_port, wait_healthy

from synapse_integrations.cli import main
from synapse_integrations.errors import InvalidInputError, StorageError
from synapse_integrations.server.client import RemotePool
from synapse_integrations.server.shards import (
    fnv1a64,
    haproxy_files,
    owner,
    parse_shards,
    write_haproxy,
)

#: tenants spread over the shards (about 54 s for the whole test on 2 cores)
TENANTS = 1000
HAPROXY = shutil.which("haproxy") or "haproxy"  # `make install` installs Debian's package


@pytest.fixture(autouse=True)
def _haproxy_installed(request):
    if "tmp_path" in request.fixturenames:  # the tests that run it
        assert shutil.which("haproxy"), "haproxy is not installed: run `make install` (apt package haproxy)"


def test_fnv1a64_matches_the_reference_vectors():
    # the FNV-1a 64 test vectors of the algorithm's authors
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def test_owners_are_balanced_and_a_new_shard_takes_only_its_share():
    names = [f"user-{i}" for i in range(3000)]
    three = {n: owner(n, ["s1", "s2", "s3"]) for n in names}
    counts = collections.Counter(three.values())
    assert all(0.28 < counts[s] / len(names) < 0.39 for s in ("s1", "s2", "s3")), counts
    four = {n: owner(n, ["s1", "s2", "s3", "s4"]) for n in names}
    moved = [n for n in names if four[n] != three[n]]
    assert 0.20 < len(moved) / len(names) < 0.30
    assert {four[n] for n in moved} == {"s4"}  # nothing moves between the old shards
    two = {n: owner(n, ["s1", "s3"]) for n in names}  # s2 removed: only its namespaces move
    assert all(two[n] == three[n] for n in names if three[n] != "s2")
    assert owner("alice", ["s2", "s1"]) == owner("alice", ["s1", "s2"])  # the order does not matter


def test_shard_specs_are_checked():
    assert parse_shards(["s1=127.0.0.1:8801", "b-2=host:9"]) == {"s1": "127.0.0.1:8801", "b-2": "host:9"}
    for bad in (["s1"], ["s 1=h:1"], ["s1=h"], ["s1=h:0"], ["s1=h:1", "s1=h:2"], []):
        with pytest.raises(InvalidInputError):
            parse_shards(bad)
    with pytest.raises(InvalidInputError):
        owner("x", [])


def test_the_written_configuration_is_valid_for_haproxy(tmp_path, capsys):
    assert main(["shards", "haproxy", "--shard", "s1=127.0.0.1:8801", "--shard", "s2=127.0.0.1:8802",
                 "--bind", "127.0.0.1:8765", "--out", str(tmp_path)]) == 0
    assert "haproxy -f" in capsys.readouterr().out
    files = haproxy_files({"s1": "127.0.0.1:8801", "s2": "127.0.0.1:8802"}, directory=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)
    assert "backend shard_s2\n    server s2 127.0.0.1:8802" in files["haproxy.cfg"]
    check = subprocess.run([HAPROXY, "-c", "-f", str(tmp_path / "haproxy.cfg")],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr


class HAProxy:
    def __init__(self, cfg, port):
        self.cfg, self.url, self.proc = cfg, f"http://127.0.0.1:{port}", None

    def __enter__(self):
        self.proc = subprocess.Popen([HAPROXY, "-f", str(self.cfg)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_healthy(self.url, timeout=30, proc=self.proc)
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _write(pool: RemotePool, ns: str, tag: str) -> str:
    return pool.get(ns).add_turns([{"text": f"{ns} keeps bees ({tag})", "id": f"{ns}:{tag}"}])[0]


@pytest.mark.server
@pytest.mark.slow
def test_three_shards_behind_haproxy_one_killed_and_restarted(tmp_path):
    t0 = time.monotonic()
    names = ["s1", "s2", "s3"]
    servers = {n: ServerProcess("http", tmp_path / n / "mem", "--embedder", "hashing").start() for n in names}
    restarted: list[ServerProcess] = []
    port = free_port()
    cfg = write_haproxy(tmp_path / "proxy", {n: f"127.0.0.1:{s.port}" for n, s in servers.items()},
                        bind=f"127.0.0.1:{port}")
    tenants = [f"tenant-{i}" for i in range(TENANTS)] + ["a/b", "user_id=42", "space here"]
    acked: dict[str, set[str]] = collections.defaultdict(set)
    try:
        with HAProxy(cfg, port) as proxy:
            pool = RemotePool(proxy.url, retries=0, timeout=30)
            with ThreadPoolExecutor(8) as ex:
                for ns, node in zip(tenants, ex.map(lambda ns: _write(pool, ns, "one"), tenants)):
                    acked[ns].add(node)
            # each tenant is on the shard owner() names, and on no other
            for n, srv in servers.items():
                held = set(httpx.get(f"{srv.url}/v1/namespaces", timeout=30).json()["namespaces"])
                assert held == {ns for ns in tenants if owner(ns, names) == n}, n
            # kill -9 one shard: its tenants fail with the proxy's 503, the others are served
            servers["s2"].kill9()
            down = [ns for ns in tenants if owner(ns, names) == "s2"][:40]
            up = [ns for ns in tenants if owner(ns, names) != "s2"][:40]
            for ns in down:
                with pytest.raises(StorageError, match="proxy's answer"):
                    _write(pool, ns, "two")
            raw = httpx.post(f"{proxy.url}/v1/namespaces/{down[0]}/turns", json={"turns": [{"text": "x"}]})
            assert raw.status_code == 503 and raw.headers["retry-after"] == "1"
            assert raw.json()["error"]["type"] == "StorageError"
            for ns in up:
                acked[ns].add(_write(pool, ns, "two"))
                assert pool.get(ns).retrieve("bees", k=5).items
            # restart it on its folder and port: the failed writes go through on retry
            restarted.append(ServerProcess("http", tmp_path / "s2" / "mem", "--embedder", "hashing",
                                           port=servers["s2"].port,
                                           log=tmp_path / "s2-restarted.log").start())
            for ns in down:
                acked[ns].add(_write(pool, ns, "two"))
            # every acknowledged turn is stored exactly once, where it belongs: the killed
            # shard's tenants and those written while it was down
            lost = twice = foreign = 0
            print(f"\nshards: written and checked in {time.monotonic() - t0:.0f} s")
            for ns in [t for t in tenants if owner(t, names) == "s2"] + up:
                ids = [e["id"] for e in pool.get(ns).episodes()]
                lost += len(acked[ns] - set(ids))
                twice += len(ids) - len(set(ids))
                foreign += sum(not i.startswith(f"{ns}:") for i in ids)
            print(f"shards: read back in {time.monotonic() - t0:.0f} s")
            assert (lost, twice, foreign) == (0, 0, 0)
            pool.close()
    finally:
        for s in [*servers.values(), *restarted]:
            s.stop()
    assert time.monotonic() - t0 < 300

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
        self.cfg, self.url, self.proc, self.old = cfg, f"http://127.0.0.1:{port}", None, []

    def __enter__(self):
        self.proc = subprocess.Popen([HAPROXY, "-f", str(self.cfg)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_healthy(self.url, timeout=30, proc=self.proc)
        return self

    def reload(self, cfg):
        """A new haproxy on the same port with ``cfg``; the old one finishes its requests
        and exits (HAProxy's soft reload, ``-sf``)."""
        self.old.append(self.proc)
        self.proc = subprocess.Popen([HAPROXY, "-f", str(cfg), "-sf", str(self.proc.pid)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.old[-1].wait(timeout=30)
        wait_healthy(self.url, timeout=30, proc=self.proc)

    def __exit__(self, *exc):
        for p in [self.proc, *self.old]:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)


def _write(pool: RemotePool, ns: str, tag: str) -> str:
    return pool.get(ns).add_turns([{"text": f"{ns} keeps bees ({tag})", "id": f"{ns}:{tag}"}])[0]


def _seed(pool: RemotePool, tenants: list[str], tag: str) -> dict[str, set[str]]:
    """One turn per tenant, written by 8 threads; the acknowledged ids per tenant."""
    acked: dict[str, set[str]] = collections.defaultdict(set)
    with ThreadPoolExecutor(8) as ex:
        for ns, node in zip(tenants, ex.map(lambda ns: _write(pool, ns, tag), tenants)):
            acked[ns].add(node)
    return acked


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
    try:
        with HAProxy(cfg, port) as proxy:
            pool = RemotePool(proxy.url, retries=0, timeout=30)
            acked = _seed(pool, tenants, "one")
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


def test_a_frozen_namespace_refuses_writes_and_serves_reads(tmp_path):
    from _server_helpers import rest_server

    from synapse_integrations.embeddings import HashingEmbedder
    from synapse_integrations.errors import UnknownNamespaceError
    from synapse_integrations.server.client import RemoteMemory

    with rest_server(tmp_path / "mem", embedder=HashingEmbedder()) as srv:
        mem = RemoteMemory(srv.url, "alice", retries=0)
        mem.add_turns([{"text": "Alice keeps bees", "id": "a1"}])
        assert mem.freeze() is False and mem.freeze() is True  # idempotent, says what it was
        with pytest.raises(StorageError, match="being moved"):
            mem.add_turns([{"text": "more", "id": "a2"}])
        with pytest.raises(StorageError, match="being moved"):
            mem.forget(everything=True)
        r = httpx.post(f"{srv.url}/v1/namespaces/alice/turns", json={"turns": [{"text": "x"}]})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert [e["id"] for e in mem.episodes()] == ["a1"]  # reads are served
        assert mem.retrieve("bees", k=1).items[0].id == "a1"
        RemoteMemory(srv.url, "bob").add_turns([{"text": "bob is not frozen"}])
        assert mem.freeze(False) is True
        assert mem.add_turns([{"text": "more", "id": "a2"}]) == ["a2"]
        with pytest.raises(UnknownNamespaceError):
            RemoteMemory(srv.url, "nobody", create=False).freeze()
        mem.close()


@pytest.mark.server
@pytest.mark.slow
def test_adding_a_fourth_shard_under_traffic_loses_nothing(tmp_path):
    """3 shards and 300 tenants behind the proxy; while 4 clients keep writing (their own
    ids, retried on a 503) and reading, a 4th shard is started, its namespaces frozen and
    copied (rebalance), the proxy reloaded with 4 shards, then the copies finished and the
    sources erased: every acknowledged turn is stored exactly once, on its new owner."""
    import random
    import threading

    from synapse_integrations.server.shards import rebalance

    t0 = time.monotonic()
    names = ["s1", "s2", "s3", "s4"]
    servers = {n: ServerProcess("http", tmp_path / n / "mem", "--embedder", "hashing").start()
               for n in names}
    addr = {n: f"127.0.0.1:{s.port}" for n, s in servers.items()}
    three = {n: addr[n] for n in names[:3]}
    port = free_port()
    cfg3 = write_haproxy(tmp_path / "proxy3", three, bind=f"127.0.0.1:{port}")
    cfg4 = write_haproxy(tmp_path / "proxy4", addr, bind=f"127.0.0.1:{port}")
    tenants = [f"tenant-{i}" for i in range(300)]
    lock = threading.Lock()
    stop = threading.Event()
    problems: list[str] = []
    counts = collections.Counter()
    try:
        with HAProxy(cfg3, port) as proxy:
            pool = RemotePool(proxy.url, retries=0, timeout=30)
            acked = _seed(pool, tenants, "seed")

            def client(c: int) -> None:
                rng = random.Random(c)
                mine = RemotePool(proxy.url, retries=0, timeout=30)
                i = 0
                while not stop.is_set() and time.monotonic() - t0 < 240:
                    ns = rng.choice(tenants)
                    try:
                        if i % 2 == 0:
                            node = _write(mine, ns, f"c{c}-{i}")
                            with lock:
                                acked[ns].add(node)
                        else:
                            items = mine.get(ns).retrieve("bees", k=5).items
                            if any(not it.id.startswith(f"{ns}:") for it in items):
                                problems.append(f"{ns} saw another tenant's memory")
                        counts["ok"] += 1
                        i += 1
                    except StorageError:  # frozen while it moves, or the proxy reloading
                        counts["retried"] += 1
                        time.sleep(0.05)
                    except InvalidInputError as exc:  # a retried write stored before: acknowledged
                        if "already used" not in str(exc):
                            problems.append(str(exc))
                            return
                        with lock:
                            acked[ns].add(f"{ns}:c{c}-{i}")
                        i += 1
                mine.close()

            threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(4)]
            for t in threads:
                t.start()
            time.sleep(1.0)
            prepared = rebalance(three, addr)
            proxy.reload(cfg4)
            finished = rebalance(three, addr, finish=True)
            time.sleep(1.0)
            stop.set()
            for t in threads:
                t.join(60)
            assert not problems, problems[:3]
            assert counts["ok"] > 50  # the traffic really ran through the move
            moved = prepared["moved"]
            assert set(moved) == set(finished["moved"])
            assert 0.15 < len(moved) / len(tenants) < 0.35
            assert {dst for _, dst in moved.values()} == {"s4"}
            assert finished["erased"] >= sum(1 for _ in moved)  # each moved one had its seed turn
            # every acknowledged turn exactly once, through the proxy, at its owner
            lost = twice = foreign = 0
            for ns in tenants:
                ids = [e["id"] for e in pool.get(ns).episodes()]
                lost += len(acked[ns] - set(ids))
                twice += len(ids) - len(set(ids))
                foreign += sum(not i.startswith(f"{ns}:") for i in ids)
            assert (lost, twice, foreign) == (0, 0, 0)
            # and nothing is left at the sources
            for ns, (src, _) in moved.items():
                left = httpx.get(f"{servers[src].url}/v1/namespaces/{ns}/stats", timeout=30).json()
                assert left["episodes"] == 0, (ns, src, left)
            pool.close()
            print(f"\nrebalance: {len(moved)} of {len(tenants)} tenants moved to s4, "
                  f"{counts['ok']} operations and {counts['retried']} retries meanwhile, "
                  f"{time.monotonic() - t0:.0f} s")
    finally:
        stop.set()
        for s in servers.values():
            s.stop()


def test_moves_name_only_what_changes_owner_and_an_unreachable_shard_is_a_clear_error():
    from synapse_integrations.server.shards import moves, rebalance

    held = {"s1": [f"t{i}" for i in range(200) if owner(f"t{i}", ["s1", "s2"]) == "s1"],
            "s2": [f"t{i}" for i in range(200) if owner(f"t{i}", ["s1", "s2"]) == "s2"]}
    plan = moves(held, ["s1", "s2", "s3"])
    assert plan == {ns: (src, "s3") for src, names in held.items() for ns in names
                    if owner(ns, ["s1", "s2", "s3"]) == "s3"}
    assert moves(held, ["s1", "s2"]) == {}
    with pytest.raises(StorageError, match="cannot be reached"):
        rebalance({"s1": f"127.0.0.1:{free_port()}"}, {"s1": "127.0.0.1:1", "s2": "127.0.0.1:2"})

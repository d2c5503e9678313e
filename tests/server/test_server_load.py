"""Load on 127.0.0.1: 8 concurrent clients writing and reading through the REST server
(4 namespaces, 2 clients each), a fixed number of operations and a time cap; latency and
throughput printed (run with -s to see them; docs/deployment.md has measured values).
Then the same load again with the server killed with SIGKILL mid-load and restarted on the
same folder: every acknowledged turn is there exactly once, nothing else is, and no
client ever saw another namespace's memory."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest
from _server_helpers import ServerProcess

from synapse_integrations.bench.serve import Load, check_stored, run_load

pytestmark = [pytest.mark.slow, pytest.mark.server]

CLIENTS, OPS, NAMESPACES = 8, 60, 4


def _merge(*loads: Load) -> Load:
    out = Load()
    for load in loads:
        for ns, ids in load.acked.items():
            out.acked[ns] |= ids
        for ns, ids in load.attempted.items():
            out.attempted[ns] |= ids
    return out


def test_load_then_kill9_and_restart(tmp_path):
    path = tmp_path / "mem"
    args = ("--embedder", "hashing")
    srv = ServerProcess("http", path, *args).start()
    restarted: list[ServerProcess] = []
    t_start = time.monotonic()
    try:
        steady = run_load(srv.url, clients=CLIENTS, ops=OPS, namespaces=NAMESPACES, time_cap=40, tag="steady")
        summary = steady.summary()
        print(f"\nsteady load: {CLIENTS} clients x {OPS} ops: {summary}")
        assert not steady.errors, steady.errors[:3]
        assert summary["ops"] == CLIENTS * OPS and summary["acked"] == CLIENTS * OPS // 2
        assert steady.cross_namespace == 0
        assert check_stored(srv.url, steady, NAMESPACES) == {"lost": 0, "duplicated": 0, "unexpected": 0}

        # the same load, and kill -9 once a third of its writes are acknowledged
        crash: dict[str, float] = {}

        def killer(load: Load) -> None:
            def run() -> None:
                while sum(len(v) for v in load.acked.values()) < CLIENTS * OPS // 6:
                    time.sleep(0.005)
                crash["acked_at_kill"] = sum(len(v) for v in load.acked.values())
                t0 = time.monotonic()
                srv.kill9()
                restarted.append(ServerProcess("http", path, *args, port=srv.port,
                                               log=tmp_path / "restarted.log").start())
                crash["restart_s"] = time.monotonic() - t0
            threading.Thread(target=run, daemon=True).start()

        crashed = run_load(srv.url, clients=CLIENTS, ops=OPS, namespaces=NAMESPACES, time_cap=45,
                           tag="crash", on_start=killer)
        summary = crashed.summary()
        print(f"kill -9 mid-load: {crash}; {summary}")
        assert restarted and 0 < crash["acked_at_kill"] < CLIENTS * OPS // 2  # killed mid-load
        assert not crashed.errors, crashed.errors[:3]
        assert crashed.retried > 0 and crashed.cross_namespace == 0
        assert summary["acked"] == CLIENTS * OPS // 2  # every write got through in the end
        stored = check_stored(srv.url, _merge(steady, crashed), NAMESPACES)
        print(f"after restart: {stored}")
        assert stored == {"lost": 0, "duplicated": 0, "unexpected": 0}
        assert time.monotonic() - t_start < 120
    finally:
        for s in [srv, *restarted]:
            s.stop()
    per_ns: dict[str, int] = defaultdict(int)
    for ns, ids in _merge(steady, crashed).acked.items():
        per_ns[ns] = len(ids)
    assert set(per_ns.values()) == {2 * (CLIENTS // NAMESPACES) * OPS // 2}

"""A bounded load on a memory server: N client threads writing and reading through the REST
API, each write with its own id (an idempotency key), so that a retry after a server crash
stores nothing twice. Used by tests/server/test_server_load.py; run it as a script to measure a
server by hand (the numbers in docs/deployment.md):

    python tests/_server_load.py --clients 8 --ops 60 [--embedder minilm]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synapse_integrations.errors import InvalidInputError, StorageError  # noqa: E402
from synapse_integrations.server.client import RemoteMemory  # noqa: E402

WORDS = ["ski", "lisbon", "beagle", "cello", "marathon", "kyoto", "exam", "garden", "piano", "harbor"]


def ns_of(client: int, namespaces: int) -> str:
    return f"tenant-{client % namespaces}"


@dataclass
class Load:
    """What the clients did: latencies per kind, acknowledged ids per namespace, problems."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    acked: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    attempted: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    cross_namespace: int = 0
    retried: int = 0
    conflicts: int = 0  # a retried write the server already had (stored before a crash)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ops": sum(len(v) for v in self.latencies.values()),
                               "seconds": round(self.seconds, 2)}
        out["throughput_ops_s"] = round(out["ops"] / self.seconds, 1) if self.seconds else 0.0
        for kind, values in sorted(self.latencies.items()):
            ms = sorted(v * 1000 for v in values)
            out[kind] = {"n": len(ms), "p50_ms": round(statistics.median(ms), 1),
                         "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1)}
        out.update(acked=sum(len(v) for v in self.acked.values()), cross_namespace=self.cross_namespace,
                   retried=self.retried, conflicts=self.conflicts, errors=len(self.errors))
        return out


def _client(url: str, client: int, ops: int, namespaces: int, load: Load, start: threading.Barrier,
            deadline: float, api_key: str | None, tag: str, pace: threading.Event | None) -> None:
    ns = ns_of(client, namespaces)
    rng = random.Random(client)
    mem = RemoteMemory(url, ns, api_key=api_key, timeout=30, retries=0)
    start.wait()
    try:
        for i in range(ops):
            if pace is not None:
                pace.wait()
            if i % 2 == 0:  # a write, with its own id
                node_id = f"{ns}:{tag}:c{client}:{i}"
                turn = {"text": f"{ns} note {i} of client {client}: {rng.choice(WORDS)} {rng.choice(WORDS)}",
                        "speaker": f"client-{client}", "id": node_id, "metadata": {"client": client, "i": i}}
                with load.lock:
                    load.attempted[ns].add(node_id)
                kind = "write"
            else:
                query = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
                kind = "read"
            while True:
                if time.monotonic() > deadline:
                    load.errors.append(f"client {client}: out of time at op {i}")
                    return
                t0 = time.perf_counter()
                try:
                    if kind == "write":
                        mem.add_turns([turn])
                    else:
                        result = mem.retrieve(query, k=10)
                    dt = time.perf_counter() - t0
                    break
                except InvalidInputError as exc:
                    if kind == "write" and str(exc).startswith("memory id(s) already used"):
                        with load.lock:
                            load.conflicts += 1  # it was stored before the crash: acknowledged now
                        dt = None
                        break
                    load.errors.append(f"client {client}: {exc}")
                    return
                except StorageError:  # the server is down (killed): wait for it, then retry
                    with load.lock:
                        load.retried += 1
                    time.sleep(0.1)
            with load.lock:
                if dt is not None:
                    load.latencies[kind].append(dt)
                if kind == "write":
                    load.acked[ns].add(node_id)
                else:
                    load.cross_namespace += sum(not it.id.startswith(f"{ns}:") for it in result.items)
    finally:
        mem.close()


def run_load(url: str, *, clients: int = 8, ops: int = 60, namespaces: int = 4, time_cap: float = 60.0,
             api_key: str | None = None, tag: str = "run", pace: threading.Event | None = None,
             on_start: Any = None) -> Load:
    """``clients`` threads, ``ops`` operations each (half writes, half reads), clients
    ``c`` and ``c + namespaces`` sharing namespace ``tenant-<c % namespaces>``."""
    load = Load()
    start = threading.Barrier(clients + 1)
    deadline = time.monotonic() + time_cap
    threads = [threading.Thread(target=_client, args=(url, c, ops, namespaces, load, start, deadline,
                                                      api_key, tag, pace), daemon=True)
               for c in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    if on_start is not None:
        on_start(load)
    for t in threads:
        t.join(timeout=max(1.0, deadline - time.monotonic() + 5))
    load.seconds = time.perf_counter() - t0
    return load


def check_stored(url: str, load: Load, namespaces: int, api_key: str | None = None) -> dict[str, int]:
    """Every acknowledged write is stored exactly once; nothing else was stored."""
    lost = duplicated = unexpected = 0
    for k in range(namespaces):
        ns = f"tenant-{k}"
        with RemoteMemory(url, ns, api_key=api_key, create=False) as mem:
            ids = [e["id"] for e in mem.episodes()]
        duplicated += len(ids) - len(set(ids))
        lost += len(load.acked[ns] - set(ids))
        unexpected += len(set(ids) - load.attempted[ns])
    return {"lost": lost, "duplicated": duplicated, "unexpected": unexpected}


def main() -> None:  # pragma: no cover - a measuring script
    from _server_helpers import ServerProcess

    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--ops", type=int, default=60)
    parser.add_argument("--namespaces", type=int, default=4)
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--path", default=None)
    args = parser.parse_args()
    import tempfile

    path = Path(args.path or tempfile.mkdtemp(prefix="synapse-load-")) / "mem"
    with ServerProcess("http", path, "--embedder", args.embedder) as srv:
        load = run_load(srv.url, clients=args.clients, ops=args.ops, namespaces=args.namespaces,
                        time_cap=600)
        print(load.summary(), check_stored(srv.url, load, args.namespaces))


if __name__ == "__main__":  # pragma: no cover
    main()

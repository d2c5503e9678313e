"""``synapse bench serve``: a memory server under load, measured from outside.

A real ``synapse serve http`` process on 127.0.0.1 (:class:`ServerProcess`), and
``clients`` threads, each a :class:`~synapse_integrations.server.client.RemoteMemory` of
one of ``namespaces`` namespaces (client ``c`` uses ``tenant-<c % namespaces>``), each
doing ``ops`` operations: a write of one turn with its own id (an idempotency key, so
that a retry after a crash stores nothing twice) or a ``retrieve(k=10)``, drawn with
``write_share``. Reported: operations per second over the whole run, and p50/p95/p99 per
operation (client-side, the HTTP round trip included); then a check that every
acknowledged turn is stored exactly once, nothing else is, and no read saw another
namespace's memory.

The server tests use the same load (:func:`run_load`, :func:`check_stored`), with the
server killed by ``SIGKILL`` mid-load and restarted.

>>> import tempfile                                                     # doctest: +SKIP
>>> run_serve(tempfile.mkdtemp(), clients=8, ops=60)["throughput_ops_s"]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError, StorageError
from .metrics import percentiles

__all__ = ["Load", "ServerProcess", "check_stored", "format_serve_table", "free_port",
           "namespace_of", "run_load", "run_serve", "wait_healthy"]

_WORDS = ["ski", "lisbon", "beagle", "cello", "marathon", "kyoto", "exam", "garden", "piano", "harbor"]
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A free TCP port of 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, *, timeout: float = 60.0, proc: subprocess.Popen | None = None,
                 log: Path | None = None) -> None:
    """Poll ``url``/health until it answers 200 (RuntimeError after ``timeout`` s, or as
    soon as ``proc`` exits, with the end of its ``log``)."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}): "
                               f"{log.read_text()[-3000:] if log else ''}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"no healthy server at {url} within {timeout} s")


def server_env() -> dict[str, str]:
    """The environment of a server subprocess: this package importable, no telemetry."""
    return {**os.environ,
            "PYTHONPATH": f"{_PACKAGE_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "ANONYMIZED_TELEMETRY": "False", "TOKENIZERS_PARALLELISM": "false"}


class ServerProcess:
    """``synapse serve http|mcp --path PATH ...`` as a subprocess on a free port of
    127.0.0.1, its output in ``log`` (default: beside ``path``)."""

    def __init__(self, kind: str, path: str | Path, *extra: str, port: int | None = None,
                 log: str | Path | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.path = Path(path)
        self.log_path = Path(log) if log else self.path.parent / f"server-{self.port}.log"
        self.args = [sys.executable, "-m", "synapse_integrations.cli", "serve", kind,
                     "--path", str(self.path), "--port", str(self.port), *extra]
        self.proc: subprocess.Popen | None = None

    def start(self, *, timeout: float = 60.0) -> ServerProcess:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                         env=server_env(), cwd=_PACKAGE_ROOT)
        wait_healthy(self.url, timeout=timeout, proc=self.proc, log=self.log_path)
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def namespace_of(client: int, namespaces: int) -> str:
    return f"tenant-{client % namespaces}"


@dataclass
class Load:
    """What the clients did: latencies (s) per operation, acknowledged and attempted ids
    per namespace, reads that saw another namespace, retries, problems."""

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
        """Operations, seconds, operations/s, and per operation ``n`` and p50/p95/p99 (ms)."""
        out: dict[str, Any] = {"ops": sum(len(v) for v in self.latencies.values()),
                               "seconds": round(self.seconds, 2)}
        out["throughput_ops_s"] = round(out["ops"] / self.seconds, 1) if self.seconds else 0.0
        for kind, values in sorted(self.latencies.items()):
            if values:
                ps = percentiles([v * 1000 for v in values], (50, 95, 99))
                out[kind] = {"n": len(values), **{f"{p}_ms": round(v, 1) for p, v in ps.items()}}
        out.update(acked=sum(len(v) for v in self.acked.values()), cross_namespace=self.cross_namespace,
                   retried=self.retried, conflicts=self.conflicts, errors=len(self.errors))
        return out


def _client(url: str, client: int, ops: int, namespaces: int, write_share: float, load: Load,
            start: threading.Barrier, deadline: float, api_key: str | None, tag: str) -> None:
    from ..server.client import RemoteMemory

    ns = namespace_of(client, namespaces)
    rng = random.Random(client)
    mem = RemoteMemory(url, ns, api_key=api_key, timeout=30, retries=0)
    writes = 0
    start.wait()
    try:
        for i in range(ops):
            # writes spread evenly: op i is a write when the running share falls behind
            write = writes < write_share * (i + 1) - 1e-9
            if write:
                writes += 1
                node_id = f"{ns}:{tag}:c{client}:{i}"
                turn = {"text": f"{ns} note {i} of client {client}: {rng.choice(_WORDS)} {rng.choice(_WORDS)}",
                        "speaker": f"client-{client}", "id": node_id, "metadata": {"client": client, "i": i}}
                with load.lock:
                    load.attempted[ns].add(node_id)
            else:
                query = f"{rng.choice(_WORDS)} {rng.choice(_WORDS)}"
            kind = "write" if write else "read"
            while True:
                if time.monotonic() > deadline:
                    with load.lock:
                        load.errors.append(f"client {client}: out of time at op {i}")
                    return
                t0 = time.perf_counter()
                try:
                    if write:
                        mem.add_turns([turn])
                    else:
                        result = mem.retrieve(query, k=10)
                    dt: float | None = time.perf_counter() - t0
                    break
                except InvalidInputError as exc:
                    if write and str(exc).startswith("memory id(s) already used"):
                        with load.lock:
                            load.conflicts += 1  # it was stored before a crash: acknowledged now
                        dt = None
                        break
                    with load.lock:
                        load.errors.append(f"client {client}: {exc}")
                    return
                except StorageError:  # the server is down (killed) or busy: wait, then retry
                    with load.lock:
                        load.retried += 1
                    time.sleep(0.1)
            with load.lock:
                if dt is not None:
                    load.latencies[kind].append(dt)
                if write:
                    load.acked[ns].add(node_id)
                else:
                    load.cross_namespace += sum(not it.id.startswith(f"{ns}:") for it in result.items)
    finally:
        mem.close()


def run_load(url: str, *, clients: int = 8, ops: int = 60, namespaces: int = 4,
             write_share: float = 0.5, time_cap: float = 60.0, api_key: str | None = None,
             tag: str = "run", on_start: Callable[[Load], None] | None = None) -> Load:
    """``clients`` threads against the server at ``url``, ``ops`` operations each
    (``write_share`` of them writes, spread evenly), all started together and stopped at
    ``time_cap`` seconds at the latest (an unfinished client is an error in the load);
    ``on_start(load)`` runs as they start (a test kills the server from there)."""
    if not 0.0 <= write_share <= 1.0:
        raise InvalidInputError(f"write_share must be in [0, 1], got {write_share}")
    if clients < 1 or ops < 1 or namespaces < 1:
        raise InvalidInputError("clients, ops and namespaces must be >= 1")
    load = Load()
    start = threading.Barrier(clients + 1)
    deadline = time.monotonic() + time_cap
    threads = [threading.Thread(target=_client, args=(url, c, ops, namespaces, write_share, load,
                                                      start, deadline, api_key, tag), daemon=True)
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
    """Every acknowledged write stored exactly once, nothing else stored: the counts of
    ``lost``, ``duplicated`` and ``unexpected`` turns (all 0 when so)."""
    from ..server.client import RemoteMemory

    lost = duplicated = unexpected = 0
    for k in range(namespaces):
        ns = namespace_of(k, namespaces)
        if not load.attempted[ns]:
            continue
        with RemoteMemory(url, ns, api_key=api_key, create=False) as mem:
            ids = [e["id"] for e in mem.episodes()]
        duplicated += len(ids) - len(set(ids))
        lost += len(load.acked[ns] - set(ids))
        unexpected += len(set(ids) - load.attempted[ns])
    return {"lost": lost, "duplicated": duplicated, "unexpected": unexpected}


def run_serve(path: str | Path, *, clients: int = 8, ops: int = 60, namespaces: int = 4,
              write_share: float = 0.5, embedder: str = "hashing", rounds: int = 1,
              time_cap: float = 600.0, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Start ``synapse serve http`` on a fresh folder under ``path``, run the load
    ``rounds`` times (each round its own ids), check what was stored, stop the server.
    Returns the settings, each round's :meth:`Load.summary` and the stored check."""
    folder = Path(path) / "memory"
    settings = {"clients": clients, "ops": ops, "namespaces": namespaces,
                "write_share": write_share, "embedder": embedder, "rounds": rounds,
                "cpus": os.cpu_count()}
    runs, merged = [], Load()
    with ServerProcess("http", folder, "--embedder", embedder) as srv:
        for r in range(rounds):
            load = run_load(srv.url, clients=clients, ops=ops, namespaces=namespaces,
                            write_share=write_share, time_cap=time_cap, tag=f"r{r}")
            summary = load.summary()
            runs.append(summary)
            if log is not None:
                log(f"round {r + 1}/{rounds}: {summary['throughput_ops_s']} ops/s")
            for ns in load.attempted:
                merged.attempted[ns] |= load.attempted[ns]
                merged.acked[ns] |= load.acked[ns]
            merged.errors += load.errors
        stored = check_stored(srv.url, merged, namespaces)
    return {"settings": settings, "rounds": runs, "stored": stored, "errors": merged.errors[:10]}


def format_serve_table(results: dict[str, Any]) -> str:
    """The rounds as a table: ops/s, and p50/p95/p99 (ms) of reads and writes."""
    s = results["settings"]
    lines = [f"synapse serve http, {s['embedder']} embedder: {s['clients']} clients, "
             f"{s['namespaces']} namespaces, {s['ops']} ops each, {s['write_share']:.0%} writes "
             f"({s['cpus']} CPUs)",
             "| round | ops/s | read p50 / p95 / p99 ms | write p50 / p95 / p99 ms |",
             "|---:|---:|---|---|"]
    for k, run in enumerate(results["rounds"], 1):
        cells = []
        for kind in ("read", "write"):
            v = run.get(kind)
            cells.append(" / ".join(f"{v[p]:.0f}" for p in ("p50_ms", "p95_ms", "p99_ms")) if v else "-")
        lines.append(f"| {k} | {run['throughput_ops_s']:.0f} | {cells[0]} | {cells[1]} |")
    st = results["stored"]
    lines.append(f"stored: {st['lost']} lost, {st['duplicated']} duplicated, "
                 f"{st['unexpected']} unexpected; {len(results['errors'])} client errors")
    return "\n".join(lines)

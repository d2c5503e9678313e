"""A memory server killed with SIGKILL while clients write and read: every write it
acknowledged survives, and a client that retries with its own ids stores nothing twice.

``synapse serve http`` (hashing embedder) on 127.0.0.1 serves 4 namespaces to 8 client
threads; each thread writes 5 turns a request, each turn with its own id (an
idempotency key), and retrieves after every write. The server is killed (``SIGKILL``) 10
times at random instants and restarted on the same port and folder; a client whose request
failed (connection refused or reset, a 5xx) sends the same turns again until it is answered.
A 200 is an acknowledgement, and so is a 409 for a retried batch (its turns had landed
before the kill: a batch is all or nothing). The namespaces go dormant quickly (2 queried windows), so turns are archived
between two snapshots, as in a long-running server. Loops are bounded in count and time.
Run with ``-s`` to see the counts.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from synapse_integrations import Synapse, SynapseConfig

from _safety_helpers import HashEmbedder
from _server_helpers import ServerProcess

pytestmark = [pytest.mark.server, pytest.mark.slow]

NAMESPACES = ("alice", "bob", "carol", "dave")
THREADS = 8
KILLS = 10
TURNS_PER_THREAD = 4000  # an upper bound: the loop ends with the kills
BATCH = 5  # turns per write request


def _text(t: int, n: int) -> str:
    rng = random.Random(t * 100_000 + n)
    return f"Client {t} note {n}: " + " ".join(rng.choice(("amber", "basalt", "cedar", "delta",
                                                             "ember", "fjord", "garnet", "harbor"))
                                                for _ in range(5)) + "."


class _Client(threading.Thread):
    """Writes turn after turn (each retried until acknowledged), retrieving after each."""

    def __init__(self, t: int, url: str, stop: threading.Event, deadline: float) -> None:
        super().__init__(daemon=True)
        self.t, self.url, self.stop, self.deadline = t, url, stop, deadline
        self.ns = NAMESPACES[t % len(NAMESPACES)]
        self.acked: dict[str, str] = {}  # id -> text
        self.retries = 0
        self.errors: list[str] = []
        self.failures: Counter[str] = Counter()  # why a send was retried

    def run(self) -> None:
        with httpx.Client(base_url=f"{self.url}/v1/namespaces/{self.ns}", timeout=10) as http:
            for n in range(0, TURNS_PER_THREAD, BATCH):
                turns = [{"id": f"c{self.t}-{i}", "text": _text(self.t, i), "speaker": f"user{self.t}"}
                         for i in range(n, n + BATCH)]
                attempt = 0
                while not self._send(http, turns, retried=attempt > 0):
                    if self.stop.is_set() or time.monotonic() > self.deadline:
                        return
                    attempt += 1
                    self.retries += 1
                    time.sleep(0.05)
                if self.stop.is_set():
                    return
                try:
                    http.post("/retrieve", json={"query": _text(self.t, random.randint(0, n)), "k": 5})
                except httpx.TransportError:
                    pass

    def _send(self, http: httpx.Client, turns: list[dict], *, retried: bool) -> bool:
        """Send a batch; True once it is answered (acknowledged, or refused with a 4xx,
        recorded as an error), False when it must be sent again."""
        try:
            r = http.post("/turns", json={"turns": turns})
        except httpx.TransportError as exc:
            self.failures[type(exc).__name__] += 1
            return False
        if r.status_code == 200 or (r.status_code == 409 and retried and "already used" in r.text):
            self.acked.update((t["id"], t["text"]) for t in turns)
            return True
        if r.status_code >= 500:
            self.failures[str(r.status_code)] += 1
            return False
        self.errors.append(f"{r.status_code} {r.text[:200]}")  # a 4xx for a good turn is a bug
        return True


def test_sigkill_of_a_busy_server_loses_no_acknowledged_turn(tmp_path: Path, capsys) -> None:
    path = tmp_path / "mem"
    for ns in NAMESPACES:  # short dormancy, stored in each namespace's config
        Synapse(path, namespace=ns, embedder=HashEmbedder(),
                config=SynapseConfig(dormancy_windows=2, dormancy_capacity=0)).close()
    rng = random.Random(45)
    srv = ServerProcess("http", path, "--embedder", "hashing")
    srv.start()
    stop = threading.Event()
    t0 = time.monotonic()
    clients = [_Client(t, srv.url, stop, deadline=t0 + 240) for t in range(THREADS)]
    for c in clients:
        c.start()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(2.0, 5.0))
            srv.kill9()
            srv.start()
    finally:
        stop.set()
        for c in clients:
            c.join(timeout=60)
    try:
        acked = {(c.ns, i): text for c in clients for i, text in c.acked.items()}
        lost, twice, archived = [], [], 0
        with httpx.Client(base_url=f"{srv.url}/v1", timeout=30) as http:
            for (ns, node_id), text in acked.items():
                r = http.get(f"/namespaces/{ns}/memories/{node_id}", params={"include_archived": True})
                if r.status_code != 200 or r.json()["text"] != text:
                    lost.append((ns, node_id, r.status_code))
            for ns in NAMESPACES:
                texts: Counter[str] = Counter()
                offset = 0
                while offset is not None:
                    page = http.get(f"/namespaces/{ns}/episodes",
                                    params={"offset": offset, "limit": 500}).json()
                    texts.update(e["text"] for e in page["episodes"])
                    archived += sum(bool(e["archived"]) for e in page["episodes"])
                    offset = page["next_offset"]
                twice += [t for t, k in texts.items() if k > 1]
                assert http.post(f"/namespaces/{ns}/verify").json()["ok"]
    finally:
        srv.stop()
    errors = [e for c in clients for e in c.errors]
    with capsys.disabled():
        print(f"\n[server kill] kills={KILLS} acknowledged={len(acked)} "
              f"retries={sum(c.retries for c in clients)} "
              f"({dict(sum((c.failures for c in clients), Counter()))}) lost={len(lost)} stored_twice={len(twice)} "
              f"archived={archived} seconds={time.monotonic() - t0:.1f}")
    assert not errors, errors[:5]
    assert len(acked) >= 200, "too few writes to test anything"
    assert archived > 0, "no turn was archived: the loop did not reach the case it tests"
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged turns were lost: {lost[:5]}"
    assert not twice, f"{len(twice)} turns stored twice"

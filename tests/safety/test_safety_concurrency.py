"""Concurrency: many threads and asyncio tasks on one memory, two processes on one
folder, and a bounded load test (run with ``-s`` to see its throughput and p95)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from synapse_integrations import Synapse

from _crash_worker import turn_text
from _safety_helpers import HashEmbedder


def _episode_texts(mem: Synapse) -> Counter[str]:
    """Every stored episode text, active or archived (dormant nodes are archived, not lost)."""
    active = [d["text"] for _, d in mem.graph.nodes(data=True) if d["kind"] == "episode"]
    return Counter(active + [a["text"] for a in mem.archived() if a["kind"] == "episode"])


def test_threads_write_read_and_forget_one_memory(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder(), snapshot_every=2)
    writers, per_writer = 6, 20
    ids: dict[int, str] = {}
    errors: list[BaseException] = []
    forgotten: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def write(w: int) -> None:
        try:
            for j in range(per_writer):
                n = w * 1000 + j
                node_id = mem.add_turn(turn_text(n), speaker=f"writer-{w}")
                with lock:
                    ids[n] = node_id
                if j % 10 == 9:
                    mem.consolidate()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    def read() -> None:
        try:
            i = 0
            while not stop.is_set():
                mem.retrieve(turn_text(i), k=10)
                mem.stats()
                if i % 10 == 0:
                    assert mem.verify().ok
                i += 1
                time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)

    def forget_writer() -> None:  # a ninth writer whose turns are forgotten as it goes
        try:
            for j in range(6):
                node_id = mem.add_turn(f"temporary note {j} to be forgotten", speaker="temp")
                if j % 2:
                    forgotten.extend(mem.forget([node_id]))
            forgotten.extend(mem.forget(speaker="temp"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    threads += [threading.Thread(target=read) for _ in range(3)]
    threads.append(threading.Thread(target=forget_writer))
    for t in threads:
        t.start()
    for t in threads[:writers] + threads[-1:]:
        t.join(timeout=120)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    assert len(ids) == writers * per_writer
    texts = _episode_texts(mem)
    assert texts == Counter(turn_text(n) for n in ids), "lost or duplicated turns"
    assert not any("forgotten" in t for t in texts) and len(forgotten) >= 6
    archived = {a["id"]: a["text"] for a in mem.archived()}
    for n, node_id in ids.items():
        text = mem.get(node_id)["text"] if node_id in mem.graph else archived[node_id]
        assert text == turn_text(n)
    report = mem.verify()
    assert report.ok, report.problems
    mem.close()
    again = Synapse(tmp_path / "m", embedder=HashEmbedder())
    assert again.verify().ok and _episode_texts(again) == texts
    again.close()


async def test_asyncio_tasks_write_and_read_one_memory(tmp_path):
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())

    async def writer(w: int) -> list[str]:
        out = []
        for j in range(6):
            out.append(await mem.aadd_turn(turn_text(w * 100 + j), speaker=f"task-{w}"))
            if j == 4:
                await mem.aconsolidate()
        return out

    async def reader() -> int:
        hits = 0
        for i in range(6):
            res = await mem.aretrieve(turn_text(i), k=5)
            hits += len(res.items)
        return hits

    results = await asyncio.gather(*[writer(w) for w in range(20)], *[reader() for _ in range(5)])
    written = [i for r in results[:20] for i in r]
    assert len(written) == len(set(written)) == 120
    assert _episode_texts(mem) == Counter(turn_text(w * 100 + j) for w in range(20) for j in range(6))
    assert (await asyncio.to_thread(mem.verify)).ok
    await mem.aclose()


_OPEN_IN_CHILD = """
import sys
from synapse_integrations import Synapse
from synapse_integrations.errors import MemoryLockedError
sys.path.insert(0, {tests!r})
from _safety_helpers import HashEmbedder
try:
    mem = Synapse({path!r}, embedder=HashEmbedder())
except MemoryLockedError as exc:
    print("LOCKED", exc)
else:
    print("OPENED", len(mem.graph))
    mem.close()
"""


def test_second_process_gets_memory_locked_error_at_open(tmp_path):
    path = tmp_path / "m"
    code = _OPEN_IN_CHILD.format(tests=str(Path(__file__).parents[1]), path=str(path))
    mem = Synapse(path, embedder=HashEmbedder())
    mem.add_turn("written by the first process")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("LOCKED"), out.stdout + out.stderr[-2000:]
    assert "another process" in out.stdout and "close it there first" in out.stdout
    # in-process, a second memory on the same folder shares the lock (and the client)
    other = Synapse(path, namespace="other", embedder=HashEmbedder())
    other.close()
    assert mem.add_turn("still writable")
    mem.close()
    # once closed, the other process can open it, and sees what was written
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "OPENED 2", out.stdout + out.stderr[-2000:]
    again = Synapse(path, embedder=HashEmbedder())  # and this process again after it
    assert again.verify().ok and len(again.graph) == 2
    again.close()


@pytest.mark.model
def test_load_concurrent_writers_and_readers(tmp_path, embedder, capsys):
    """Bounded load test with the real MiniLM embedder: 4 writers and 4 readers for 3 s."""
    mem = Synapse(tmp_path / "m", embedder=embedder)
    mem.add_turns([turn_text(n) for n in range(40)])  # something to read from the start
    duration, n_writers, n_readers = 3.0, 4, 4
    lat: dict[str, list[float]] = {"write": [], "read": []}
    errors: list[BaseException] = []
    deadline = time.monotonic() + duration
    lock = threading.Lock()

    def run(kind: str, k: int) -> None:
        i = 0
        try:
            while time.monotonic() < deadline:
                t0 = time.perf_counter()
                if kind == "write":
                    mem.add_turn(turn_text(10_000 * (k + 1) + i))
                else:
                    mem.retrieve(turn_text(i % 40), k=10)
                with lock:
                    lat[kind].append(time.perf_counter() - t0)
                i += 1
        except BaseException as exc:
            errors.append(exc)

    t_start = time.monotonic()
    threads = [threading.Thread(target=run, args=("write", k)) for k in range(n_writers)]
    threads += [threading.Thread(target=run, args=("read", k)) for k in range(n_readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    elapsed = time.monotonic() - t_start
    assert not errors, errors
    writes, reads = len(lat["write"]), len(lat["read"])
    assert writes > 0 and reads > 0
    assert len(mem.graph) >= 40 + writes
    assert mem.verify().ok
    p95 = {k: float(np.percentile(v, 95)) * 1000 for k, v in lat.items()}
    with capsys.disabled():
        print(f"\n[load] {n_writers} writers + {n_readers} readers, {elapsed:.1f} s: "
              f"{writes / elapsed:.1f} writes/s (p95 {p95['write']:.0f} ms), "
              f"{reads / elapsed:.1f} reads/s (p95 {p95['read']:.0f} ms), "
              f"{(writes + reads) / elapsed:.1f} ops/s in all")
    mem.close()

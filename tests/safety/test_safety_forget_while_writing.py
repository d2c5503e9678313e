"""Forgetting in one namespace while others write to the same embedded Chroma folder.

Forget erases the deleted text from Chroma's database with Python's ``sqlite3`` (a VACUUM),
while Chroma writes through the SQLite built into its Rust core: two copies of SQLite in
one process, which do not see each other's locks. Before storage/chroma.py's FILES_LOCK
held them apart, the first forget among three writing namespaces corrupted the database
("database disk image is malformed"); now every forget and every write succeeds and the
stores verify."""

from __future__ import annotations

import threading
import time

from synapse_integrations.embeddings import HashingEmbedder
from synapse_integrations.server.service import MemoryService
from synapse_integrations.storage.chroma import _SharedExclusive


def test_forgets_beside_writers_leave_every_store_whole(tmp_path):
    svc = MemoryService(tmp_path / "mem", embedder=HashingEmbedder())
    stop = threading.Event()
    errors: list[str] = []
    written: dict[str, list[str]] = {f"w{k}": [] for k in range(3)}

    def writer(ns: str) -> None:
        i = 0
        while not stop.is_set() and i < 400:
            try:
                written[ns] += svc.add_turns(ns, [{"text": f"{ns} note {i}", "id": f"{ns}-{i}"}])
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                errors.append(f"{ns}: {exc!r}")
                return
            i += 1

    threads = [threading.Thread(target=writer, args=(ns,)) for ns in written]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        forgets = 0
        while forgets < 12 and time.monotonic() < deadline and not errors:
            svc.add_turns("victim", [{"text": f"a secret number {forgets}"}])
            assert len(svc.forget("victim", everything=True)) == 1
            forgets += 1
        stop.set()
        for t in threads:
            t.join(60)
        assert not errors, errors[:3]
        assert forgets == 12
        for ns, ids in written.items():
            assert [e["id"] for e in svc.episodes(ns, limit=1000)["episodes"]] == ids
            report = svc.verify(ns)
            assert report["ok"], report
        assert svc.verify("victim")["ok"] and svc.stats("victim")["episodes"] == 0
    finally:
        stop.set()
        svc.close()


def test_the_exclusive_side_waits_for_shared_holders_and_goes_before_new_ones():
    lock = _SharedExclusive()
    order: list[str] = []
    held = threading.Event()
    release = threading.Event()

    def reader(name: str, hold: threading.Event | None) -> None:
        with lock.shared():
            order.append(f"{name} in")
            if hold is not None:
                held.set()
                assert release.wait(10)
            order.append(f"{name} out")

    def writer() -> None:
        with lock.exclusive():
            order.append("x in")
            order.append("x out")

    first = threading.Thread(target=reader, args=("r1", held))
    first.start()
    assert held.wait(10)
    w = threading.Thread(target=writer)
    w.start()
    while not lock._waiting:  # the exclusive side is waiting now
        time.sleep(0.001)
    late = threading.Thread(target=reader, args=("r2", None))
    late.start()
    time.sleep(0.05)
    assert order == ["r1 in"]  # neither the writer nor the late reader got in
    release.set()
    for t in (first, w, late):
        t.join(10)
    assert order == ["r1 in", "r1 out", "x in", "x out", "r2 in", "r2 out"]

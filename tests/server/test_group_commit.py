"""Group commit (group_commit.py): concurrent writes to one key share one commit,
each request gets its own results, a bad request fails alone, keys do not wait for each
other; and through MemoryService, concurrent writers store every turn exactly once."""

from __future__ import annotations

import threading
import time

import pytest

from synapse_integrations.embeddings import HashingEmbedder
from synapse_integrations.errors import InvalidInputError
from synapse_integrations.group_commit import GroupCommit
from synapse_integrations.server.service import MemoryService


class Writer:
    """A writer whose first commit waits until ``hold`` is set (so that the test can
    queue requests behind it deterministically); refuses the item ``"bad"``."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.hold = threading.Event()
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, key: str, items: list[str]) -> list[str]:
        with self.lock:
            first = not self.calls
            self.calls.append((key, list(items)))
        if first:
            assert self.hold.wait(10)
        if "bad" in items:
            raise ValueError("bad item")
        if self.fail is not None:
            raise self.fail
        return [f"{key}/{x}" for x in items]


def _run(gc: GroupCommit, requests: list[tuple[str, list[str]]]) -> list:
    """Submit each request on its own thread, the first one first; returns each one's
    result or error, in order."""
    out: list = [None] * len(requests)

    def go(k: int) -> None:
        try:
            out[k] = gc.submit(*requests[k])
        except BaseException as exc:  # noqa: BLE001
            out[k] = exc

    threads = [threading.Thread(target=go, args=(k,)) for k in range(len(requests))]
    threads[0].start()
    deadline = time.monotonic() + 10
    while gc.queued() < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    for t in threads[1:]:
        t.start()
    return out, threads


def _wait_queued(gc: GroupCommit, n: int) -> None:
    deadline = time.monotonic() + 10
    while gc.queued() < n:
        assert time.monotonic() < deadline, f"only {gc.queued()} of {n} requests queued"
        time.sleep(0.001)


def _finish(writer: Writer, threads: list[threading.Thread]) -> None:
    writer.hold.set()
    for t in threads:
        t.join(10)
        assert not t.is_alive()


def test_requests_queued_behind_a_commit_share_the_next_one():
    writer = Writer()
    gc = GroupCommit(writer)
    requests = [("u1", [f"t{k}a", f"t{k}b"]) for k in range(6)]
    out, threads = _run(gc, requests)
    _wait_queued(gc, 6)
    _finish(writer, threads)
    # each request gets exactly its own items' results, in order
    assert out == [[f"u1/t{k}a", f"u1/t{k}b"] for k in range(6)]
    # the first commit held the leader (alone: the others came after it started), the
    # second took the five that queued meanwhile, in arrival order
    assert [len(items) for _, items in writer.calls] == [2, 10]
    assert writer.calls[1][1] == [x for _, items in requests[1:] for x in items] or \
        sorted(writer.calls[1][1]) == sorted(x for _, items in requests[1:] for x in items)
    assert gc.stats.requests == 6 and gc.stats.commits == 2 and gc.stats.items == 12
    assert gc.queued() == 0


def test_a_lone_write_is_committed_at_once():
    writer = Writer()
    writer.hold.set()
    gc = GroupCommit(writer)
    t0 = time.perf_counter()
    assert gc.submit("u1", ["x"]) == ["u1/x"]
    assert time.perf_counter() - t0 < 1.0  # no timer to wait for: one call, done
    assert writer.calls == [("u1", ["x"])]


def test_a_refused_request_fails_alone_and_the_others_are_stored():
    writer = Writer()
    gc = GroupCommit(writer)
    out, threads = _run(gc, [("u1", ["first"]), ("u1", ["ok1"]), ("u1", ["bad"]), ("u1", ["ok2"])])
    _wait_queued(gc, 4)
    _finish(writer, threads)
    assert out[0] == ["u1/first"] and out[1] == ["u1/ok1"] and out[3] == ["u1/ok2"]
    assert isinstance(out[2], ValueError) and str(out[2]) == "bad item"
    assert gc.stats.isolated == 1
    # the refused batch, then each of its requests alone
    assert sorted(map(tuple, (items for _, items in writer.calls[2:]))) == [("bad",), ("ok1",), ("ok2",)]


def test_a_storage_failure_is_every_batched_requests_error():
    writer = Writer(fail=OSError("disk full"))
    gc = GroupCommit(writer)
    out, threads = _run(gc, [("u1", ["a"]), ("u1", ["b"]), ("u1", ["c"])])
    _wait_queued(gc, 3)
    _finish(writer, threads)
    assert all(isinstance(x, OSError) for x in out)
    assert gc.stats.isolated == 0 and len(writer.calls) == 2  # not retried one by one


def test_a_commit_takes_at_most_max_items_but_a_large_request_goes_whole():
    writer = Writer()
    gc = GroupCommit(writer, max_items=4)
    requests = [("u1", ["lead"]), ("u1", ["a", "b", "c"]), ("u1", ["d", "e"]),
                ("u1", [f"big{i}" for i in range(6)]), ("u1", ["f"])]
    out, threads = [None] * 5, []
    # queue them in a known order: each thread starts once the previous one is queued
    def go(k):
        out[k] = gc.submit(*requests[k])
    for k in range(5):
        t = threading.Thread(target=go, args=(k,))
        t.start()
        threads.append(t)
        _wait_queued(gc, k + 1)
    _finish(writer, threads)
    assert [items for _, items in writer.calls] == [
        ["lead"], ["a", "b", "c"], ["d", "e"], [f"big{i}" for i in range(6)], ["f"]]
    assert out[3] == [f"u1/big{i}" for i in range(6)]


def test_keys_do_not_wait_for_each_other():
    writer = Writer()
    gc = GroupCommit(writer)
    out, threads = _run(gc, [("u1", ["held"])])
    assert gc.submit("u2", ["free"]) == ["u2/free"]  # while u1's commit is held
    assert out[0] is None
    _finish(writer, threads)
    assert out[0] == ["u1/held"]


def test_max_items_is_checked():
    with pytest.raises(ValueError, match="max_items"):
        GroupCommit(Writer(), max_items=0)


def test_concurrent_writers_through_the_service_store_every_turn_once(tmp_path):
    svc = MemoryService(tmp_path / "mem", embedder=HashingEmbedder())
    try:
        svc.add_turns("u1", [{"text": "already here", "id": "dup"}])
        start = threading.Barrier(9)
        results: dict[int, object] = {}

        def client(c: int) -> None:
            start.wait()
            for i in range(5):
                turn = {"text": f"client {c} note {i}", "id": f"c{c}-{i}"}
                try:
                    results[(c, i)] = svc.add_turns("u1", [turn])
                except InvalidInputError as exc:
                    results[(c, i)] = exc
            if c == 0:  # one refused write among the others
                try:
                    svc.add_turns("u1", [{"text": "again", "id": "dup"}])
                except InvalidInputError as exc:
                    results["dup"] = exc

        threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
        for t in threads:
            t.start()
        start.wait()
        for t in threads:
            t.join(60)
        assert all(results[(c, i)] == [f"c{c}-{i}"] for c in range(8) for i in range(5))
        assert "already used" in str(results["dup"])
        ids = [e["id"] for e in svc.episodes("u1", limit=1000)["episodes"]]
        assert sorted(ids) == sorted(["dup"] + [f"c{c}-{i}" for c in range(8) for i in range(5)])
        assert svc.writes.stats.requests == 42
    finally:
        svc.close()

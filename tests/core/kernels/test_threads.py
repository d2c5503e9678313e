"""core/threads.py: numpy's BLAS limited while the engine computes, restored after; the
limit shared by nested and concurrent operations; large products split over the cores."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from synapse_integrations import InvalidInputError, Synapse, SynapseConfig
from synapse_integrations.core.kernels import threads
from synapse_integrations.core.ingest.extraction import OfflineExtractor
from synapse_integrations.embeddings import HashingEmbedder

np.ones((4, 4)) @ np.ones(4)  # numpy's BLAS loaded before anything is read


def blas_counts() -> list[int]:
    """The thread counts of the BLAS libraries the process loaded (numpy's among them)."""
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.fixture
def three_threads(monkeypatch):
    """The process's own setting: 3 BLAS threads (whatever the machine has)."""
    threads.set_blas_threads(1)
    monkeypatch.setattr(threads, "_process_limit", None)  # restored after the test
    with threadpool_limits(limits=3, user_api="blas"):
        assert blas_counts() and set(blas_counts()) == {3}
        yield
    threads.set_blas_threads(1)


def test_an_operation_limits_blas_and_restores_it(three_threads):
    with threads.engine_blas():
        assert set(blas_counts()) == {1}
        with threads.engine_blas():  # nested: still limited
            assert set(blas_counts()) == {1}
        assert set(blas_counts()) == {1}  # the inner exit restores nothing
    assert set(blas_counts()) == {3}


def test_an_operation_on_another_thread_changes_nothing(three_threads):
    # OpenBLAS ignores thread counts asked for from other threads: the module does not ask
    seen = []

    def other():
        with threads.engine_blas():
            seen.append(blas_counts())

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert seen == [blas_counts()] and set(blas_counts()) == {3}
    # a worker's operation while the main thread's runs: the main thread's limit holds, and
    # the worker's end restores nothing
    with threads.engine_blas():
        t = threading.Thread(target=other)
        t.start()
        t.join(10)
        assert set(seen[-1]) == {1} and set(blas_counts()) == {1}
    assert set(blas_counts()) == {3}


def test_none_leaves_blas_alone_and_bad_values_are_refused(three_threads):
    threads.set_blas_threads(None)
    assert threads.blas_threads() is None
    with threads.engine_blas():
        assert set(blas_counts()) == {3}
    threads.set_blas_threads(2)
    with threads.engine_blas():
        assert set(blas_counts()) == {2}
    for bad in (0, -1, 1.5, True, "1"):
        with pytest.raises(InvalidInputError, match="BLAS threads"):
            threads.set_blas_threads(bad)
    assert threads.blas_threads() == 2


def blocks_seen(rows: int) -> list[tuple[int, int, str]]:
    """The blocks :func:`threads.split_rows` hands out for ``rows`` rows, and on which
    thread each ran."""
    seen: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def compute(a: int, b: int) -> None:
        with lock:
            seen.append((a, b, threading.current_thread().name))

    threads.split_rows(rows, compute)
    return sorted(seen)


def test_large_products_are_split_over_the_cores_only_while_blas_is_limited(
        three_threads, monkeypatch):
    monkeypatch.setattr(threads, "_cores", lambda: 2)
    main = threading.current_thread().name
    n = threads.SPLIT_ROWS
    # outside an operation BLAS already runs on every core: one block, on the caller
    assert blocks_seen(10**6) == [(0, 10**6, main)]
    with threads.engine_blas():
        assert blocks_seen(n - 1) == [(0, n - 1, main)]  # small: not worth a hop
        got = blocks_seen(16_500)
        assert [(a, b) for a, b, _ in got] == [(0, 8192), (8192, 16_500)]
        assert got[0][2] == main and got[1][2].startswith("synapse-rows")
        threads.set_blas_threads(2)  # two BLAS threads each: one block per two cores
    with threads.engine_blas():
        assert blocks_seen(16_500) == [(0, 16_500, main)]
    threads.set_blas_threads(1)
    monkeypatch.setattr(threads, "_cores", lambda: 3)
    with threads.engine_blas():
        assert [(a, b) for a, b, _ in blocks_seen(40_000)] == [
            (0, 12_288), (12_288, 28_672), (28_672, 40_000)]
    # a worker thread: BLAS is the process's own there (unlimited), unless the process is
    # limited for good (limit_process)
    got = []
    worker = threading.Thread(target=lambda: got.append(blocks_seen(16_500)))
    worker.start()
    worker.join(10)
    assert len(got[0]) == 1
    monkeypatch.setattr(threads, "_process_limit", 1)
    got.clear()
    worker = threading.Thread(target=lambda: got.append(blocks_seen(16_500)))
    worker.start()
    worker.join(10)
    assert len(got[0]) == 3


def test_a_split_product_equals_the_whole_one_and_errors_surface(three_threads, monkeypatch):
    from synapse_integrations.core.graph.view import Compiled

    monkeypatch.setattr(threads, "_cores", lambda: 2)
    rng = np.random.default_rng(3)
    n = 16_500 + 37
    emb = np.asfortranarray(rng.standard_normal((n, 384)).astype(np.float32))
    view = Compiled.from_arrays([str(i) for i in range(n)], emb, src=[], dst=[], weight=[],
                                is_episode=[True] * n)
    q = rng.standard_normal(384).astype(np.float32)
    qs = rng.standard_normal((3, 384)).astype(np.float32)
    with threads.engine_blas():
        assert len(blocks_seen(n)) == 2
        one, many = view.product(q), view.products(qs)
    assert one.dtype == np.float32 and many.shape == (n, 3)
    # the same floats as one product here (block edges on 4,096-row multiples); within
    # float32 rounding on any BLAS build (the values are around +-20)
    np.testing.assert_allclose(one, emb @ q, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(many, (qs @ emb.T).T, rtol=1e-5, atol=1e-4)

    def fails(a: int, b: int) -> None:
        if a > 0:
            raise ValueError(f"block {a}:{b}")

    with threads.engine_blas(), pytest.raises(ValueError, match="block 8192"):
        threads.split_rows(16_500, fails)


class RecordingExtractor(OfflineExtractor):
    """Notes the BLAS thread counts while a consolidation window runs."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[int]] = []

    def extract(self, turns, *, names=()):
        self.seen.append(blas_counts())
        return super().extract(turns, names=names)


def test_the_engine_writes_and_retrieves_under_the_limit(three_threads, monkeypatch):
    ext = RecordingExtractor()
    mem = Synapse(None, namespace="threads", config=SynapseConfig(consolidation_interval=2),
                  embedder=HashingEmbedder(dim=384), extractor=ext)
    try:
        mem.add_turns([{"text": f"Dana talked about skiing trip {i}", "speaker": "Sam"}
                       for i in range(6)])
        assert ext.seen and all(set(c) == {1} for c in ext.seen)
        assert set(blas_counts()) == {3}
        entered = []
        real = threads.engine_blas

        def counting():
            entered.append(True)
            return real()

        monkeypatch.setattr(threads, "engine_blas", counting)
        res = mem.retrieve("Where did Dana go skiing?", k=3)
        assert res.items and entered
        assert set(blas_counts()) == {3}
    finally:
        mem.close()


def test_a_failing_blas_library_never_fails_the_operation(three_threads, monkeypatch):
    def broken():
        raise RuntimeError("no BLAS here")

    monkeypatch.setattr(threads, "_get_controller", broken)
    ran = []
    with threads.engine_blas():
        ran.append(blas_counts())
    assert ran == [[3] * len(ran[0])]
    assert set(blas_counts()) == {3}


def test_a_server_process_limits_blas_for_good_from_its_main_thread(three_threads,
                                                                   monkeypatch):
    monkeypatch.setattr(threads, "_cores", lambda: 2)
    got = []
    t = threading.Thread(target=lambda: got.append(threads.limit_process()))
    t.start()
    t.join(10)
    assert got == [False] and set(blas_counts()) == {3}  # not from a worker thread
    threads.set_blas_threads(None)
    assert threads.limit_process() is False and set(blas_counts()) == {3}
    threads.set_blas_threads(1)
    assert threads.limit_process() is True
    assert set(blas_counts()) == {1}
    with threads.engine_blas():  # an operation inside it restores the limited setting
        pass
    assert set(blas_counts()) == {1}
    got.clear()  # and its worker threads split large products over the cores
    worker = threading.Thread(target=lambda: got.append(blocks_seen(16_500)))
    worker.start()
    worker.join(10)
    assert len(got[0]) == 2

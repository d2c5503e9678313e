"""core/threads.py: numpy's BLAS limited while the engine computes, restored after; the
limit shared by nested and concurrent operations; large products on every thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from synapse_integrations import InvalidInputError, Synapse, SynapseConfig
from synapse_integrations.core import threads
from synapse_integrations.core.extraction import OfflineExtractor
from synapse_integrations.embeddings import HashingEmbedder

np.ones((4, 4)) @ np.ones(4)  # numpy's BLAS loaded before anything is read


def blas_counts() -> list[int]:
    """The thread counts of the BLAS libraries the process loaded (numpy's among them)."""
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.fixture
def three_threads():
    """The process's own setting: 3 BLAS threads (whatever the machine has)."""
    threads.set_blas_threads(1)
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


def test_wide_products_run_on_the_process_threads(three_threads):
    with threads.wide(10**9):  # outside an operation: nothing changes
        assert set(blas_counts()) == {3}
    with threads.engine_blas():
        with threads.wide(threads.WIDE_ROWS - 1):
            assert set(blas_counts()) == {1}
        with threads.wide(threads.WIDE_ROWS):
            assert set(blas_counts()) == {3}
        assert set(blas_counts()) == {1}
    assert set(blas_counts()) == {3}


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


def test_a_server_process_limits_blas_for_good_from_its_main_thread(three_threads):
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

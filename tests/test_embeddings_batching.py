"""BatchingEmbedder (embeddings/batching.py): texts embedded by concurrent threads go to
the model together, each call gets exactly its own vectors, a bad text fails only its
own call; with the real MiniLM the batched vectors equal the one-at-a-time ones."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from synapse_integrations.embeddings import BatchingEmbedder, HashingEmbedder, MiniLMEmbedder


class SlowFirst:
    """HashingEmbedder whose first call waits for ``hold``; records each call's texts;
    refuses the text ``"bad"``."""

    dim = 16

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=16)
        self.calls: list[list[str]] = []
        self.hold = threading.Event()

    def embed_documents(self, texts):
        self.calls.append(list(texts))
        if len(self.calls) == 1:
            assert self.hold.wait(10)
        if "bad" in texts:
            raise ValueError("bad text")
        return self.inner.embed_documents(texts)


def _concurrently(emb: BatchingEmbedder, slow: SlowFirst, calls: list) -> list:
    out: list = [None] * len(calls)

    def go(k):
        try:
            kind, arg = calls[k]
            out[k] = emb.embed_query(arg) if kind == "q" else emb.embed_documents(arg)
        except Exception as exc:  # noqa: BLE001
            out[k] = exc

    threads = [threading.Thread(target=go, args=(k,)) for k in range(len(calls))]
    threads[0].start()
    deadline = time.monotonic() + 10
    while not slow.calls:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    for t in threads[1:]:
        t.start()
    while emb.batches.queued() < len(calls):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    slow.hold.set()
    for t in threads:
        t.join(10)
    return out


def test_concurrent_calls_share_one_pass_and_get_their_own_vectors():
    slow = SlowFirst()
    emb = BatchingEmbedder(slow)
    calls = [("q", "first"), ("q", "where is dana"), ("d", ["a turn", "another turn"]), ("q", "ski trip")]
    out = _concurrently(emb, slow, calls)
    ref = HashingEmbedder(dim=16)
    assert np.allclose(out[0], ref.embed_query("first"))
    assert np.allclose(out[1], ref.embed_query("where is dana"))
    assert np.allclose(out[2], ref.embed_documents(["a turn", "another turn"]))
    assert np.allclose(out[3], ref.embed_query("ski trip"))
    assert len(slow.calls) == 2 and sorted(slow.calls[1]) == sorted(
        ["where is dana", "a turn", "another turn", "ski trip"])
    assert (emb.passes, emb.texts) == (2, 5)


def test_a_bad_text_fails_only_its_own_call():
    slow = SlowFirst()
    emb = BatchingEmbedder(slow)
    out = _concurrently(emb, slow, [("q", "first"), ("q", "good"), ("q", "bad")])
    assert isinstance(out[2], ValueError) and out[1].shape == (16,)


def test_a_large_call_goes_straight_to_the_model():
    slow = SlowFirst()
    slow.hold.set()
    emb = BatchingEmbedder(slow, max_batch=4)
    assert emb.embed_documents([f"t{i}" for i in range(9)]).shape == (9, 16)
    assert emb.batches.stats.requests == 0 and emb.dim == 16
    assert (emb.passes, emb.texts) == (1, 9)  # counted all the same
    assert emb.embed_documents([]).shape[0] == 0


@pytest.mark.model
def test_minilm_vectors_batched_equal_one_at_a_time():
    emb = BatchingEmbedder(MiniLMEmbedder())
    texts = ["Where does Dana study?", "I got into the architecture program in Lisbon!",
             "ok", "The string quartet played Dvořák at the hall on Friday night."]
    out: dict[int, np.ndarray] = {}
    start = threading.Barrier(len(texts))

    def go(k):
        start.wait()
        out[k] = emb.embed_query(texts[k])

    threads = [threading.Thread(target=go, args=(k,)) for k in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    single = MiniLMEmbedder()
    for k, text in enumerate(texts):
        assert np.allclose(out[k], single.embed_query(text), atol=1e-5)

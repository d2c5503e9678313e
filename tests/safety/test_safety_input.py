"""Bad input, property-based (hypothesis): every call either works correctly or raises a
clear SynapseError, and the stored memory still passes verify() afterwards. Run with
``-s`` to see how many examples ran."""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import datetime, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synapse_integrations import Synapse
from synapse_integrations.core.engine import MAX_TEXT_CHARS
from synapse_integrations.core.ingest.extraction import LLMExtractor
from synapse_integrations.core.state.validation import NORMALISED_KEY, normalise_text
from synapse_integrations.errors import (
    EmbeddingError,
    ExtractionError,
    InvalidInputError,
    InvalidTypeError,
    SynapseError,
)
from synapse_integrations.firewall import FirewallConfig

from _safety_helpers import HashEmbedder

SETTINGS = settings(max_examples=50, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
EXAMPLES: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report_examples():
    yield
    print(f"\n[hypothesis] examples run: {sum(EXAMPLES.values())} ({dict(EXAMPLES)})")


def _settled(mem: Synapse, size_before: int | None = None) -> None:
    report = mem.verify()
    assert report.ok, report.problems
    if size_before is not None:
        assert len(mem.graph) == size_before


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    m = Synapse(tmp_path_factory.mktemp("input") / "m", embedder=HashEmbedder(),
                firewall=FirewallConfig.off())
    yield m
    m.close()


@SETTINGS
@given(text=st.one_of(st.text(max_size=400), st.text(alphabet=" \t\n\r\u00a0\u2028\u3000", max_size=20),
                      st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=50)),
       speaker=st.none() | st.text(max_size=30))
def test_arbitrary_unicode_text_is_stored_normalised_or_refused(mem, text, speaker):
    EXAMPLES["text"] += 1
    before = len(mem.graph)
    stored, changed = normalise_text(text)  # control characters are read, never refused
    try:
        node_id = mem.add_turn(text, speaker=speaker)
    except SynapseError as exc:
        assert isinstance(exc, (InvalidInputError, InvalidTypeError)), exc
        assert not stored.strip() or "surrogate" in str(exc) or "speaker" in str(exc)
        _settled(mem, before)
        return
    assert stored.strip(), "empty/whitespace text must be refused"
    node = mem.get(node_id)
    assert node["text"] == stored and node["speaker"] == speaker
    assert node["metadata"].get(NORMALISED_KEY) == (changed or None)
    res = mem.retrieve(text if text.strip() else "x", k=5)  # arbitrary queries work too
    assert isinstance(res.items, tuple)
    if EXAMPLES["text"] % 10 == 0:
        _settled(mem)


def _episodes(mem: Synapse) -> int:
    return sum(d["kind"] == "episode" for _, d in mem.graph.nodes(data=True)) + \
        sum(a["kind"] == "episode" for a in mem.archived())


def test_text_over_the_limit_is_refused_with_a_clear_error(mem):
    before = _episodes(mem)
    node_id = mem.add_turn("a" * MAX_TEXT_CHARS)  # exactly at the limit: accepted
    assert len(mem.get(node_id)["text"]) == MAX_TEXT_CHARS
    with pytest.raises(InvalidInputError, match=r"at most 100000 are accepted.*split"):
        mem.add_turn("b" * (MAX_TEXT_CHARS + 1))
    with pytest.raises(InvalidInputError, match="100000"):
        mem.add_turns(["fine", "é" * 150_000])
    assert _episodes(mem) == before + 1  # (a consolidation window may add concepts too)
    _settled(mem)


timestamps = st.one_of(
    st.datetimes(timezones=st.none() | st.timezones()),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-10**20, max_value=10**20),
    st.text(max_size=40),
    st.datetimes().map(lambda d: d.isoformat()),
    st.sampled_from(["2024-03-02T10:00:00Z", "2024-03-02", "1969-07-20T20:17:00+00:00",
                     "9999-12-31T23:59:59", "0001-01-01T00:00:00", "not a date", ""]),
)


@SETTINGS
@given(ts=timestamps)
def test_timestamps_past_future_naive_aware_or_junk(mem, ts):
    EXAMPLES["timestamp"] += 1
    before = len(mem.graph)
    text = f"turn number {EXAMPLES['timestamp']} with an odd timestamp"
    try:
        node_id = mem.add_turn(text, timestamp=ts)
    except SynapseError as exc:
        assert isinstance(exc, (InvalidInputError, InvalidTypeError)), exc
        assert "timestamp" in str(exc)
        _settled(mem, before)
        return
    stored = mem.get(node_id)["ts"]
    assert isinstance(stored, float) and math.isfinite(stored)
    if isinstance(ts, datetime):
        aware = ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)
        assert stored == aware.timestamp()
    assert mem.search_vectors(HashEmbedder().embed_query(text), 1)[0] == [node_id]
    for it in mem.retrieve(text, k=30).items:  # every returned time converts back
        assert it.timestamp is None or isinstance(it.timestamp, datetime)
    if EXAMPLES["timestamp"] % 10 == 0:
        _settled(mem)


junk = st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=10), st.booleans(),
                 st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                       max_size=2),
                 st.just(object()), st.just(b"bytes"), st.just(float("nan")))


@SETTINGS
@given(field=st.sampled_from(["text", "speaker", "metadata", "timestamp", "id", "k", "query",
                              "turns", "forget_ids"]),
       value=junk)
def test_wrong_types_are_refused_clearly(mem, field, value):
    EXAMPLES["wrong_type"] += 1
    before = len(mem.graph)
    calls = {
        "text": lambda: mem.add_turn(value),
        "speaker": lambda: mem.add_turn("ok text", speaker=value),
        "metadata": lambda: mem.add_turn("ok text", metadata=value),
        "timestamp": lambda: mem.add_turn("ok text", timestamp=value),
        "id": lambda: mem.add_turn("ok text", id=value),
        "k": lambda: mem.retrieve("ok query", k=value),
        "query": lambda: mem.retrieve(value),
        "turns": lambda: mem.add_turns(value),
        "forget_ids": lambda: mem.forget(value),
    }
    try:
        out = calls[field]()
    except SynapseError as exc:
        assert str(exc)  # a message, naming the problem
        _settled(mem, before)
        return
    # some junk is a legitimate value: None speaker/metadata/timestamp/id, an int epoch,
    # a dict of metadata, an empty list of turns, a positive k...
    if field in ("speaker", "metadata", "timestamp", "id"):
        assert mem.get(out)["text"] == "ok text"
    elif field == "turns":
        assert out == []
    elif field == "k":
        assert value is None or isinstance(value, int) and value >= 1  # None: the default k
    elif field == "forget_ids":
        assert out == []
    else:
        raise AssertionError(f"{field}={value!r} was accepted")


metadata_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
    max_leaves=8)


@SETTINGS
@given(meta=st.dictionaries(st.text(max_size=10), metadata_values, max_size=4))
def test_metadata_is_json_round_tripped_or_refused(mem, meta):
    EXAMPLES["metadata"] += 1
    before = len(mem.graph)
    try:
        node_id = mem.add_turn("turn with metadata", metadata=meta)
    except SynapseError as exc:
        assert isinstance(exc, InvalidInputError) and "metadata" in str(exc)
        text = json.dumps(meta, default=str)
        assert "NaN" in text or "Infinity" in text or "\\ud" in text
        _settled(mem, before)
        return
    assert mem.get(node_id)["metadata"] == json.loads(json.dumps(meta))


class ModeEmbedder(HashEmbedder):
    """Misbehaves on demand: NaN, inf, wrong dimension, zero vector, ragged rows, text."""

    mode = "ok"

    def embed_documents(self, texts):
        good = super().embed_documents(texts)
        m = self.mode
        if m == "nan":
            good[0, 3] = np.nan
        elif m == "inf":
            good[-1, 0] = np.inf
        elif m == "dim":
            return good[:, :100]
        elif m == "zero":
            return np.zeros_like(good)
        elif m == "ragged":
            return [list(r) for r in good[:-1]] + [[1.0, 2.0]]
        elif m == "text":
            return [["a"] * 384 for _ in texts]
        elif m == "count":
            return good[:-1]
        elif m == "none":
            return None
        return good

    def embed_query(self, text):
        return self.embed_documents([text])[0]


@SETTINGS
@given(modes=st.lists(st.sampled_from(["ok", "nan", "inf", "dim", "zero", "ragged", "text",
                                       "count", "none"]), min_size=1, max_size=4),
       batch=st.integers(min_value=1, max_value=3))
def test_bad_embeddings_never_reach_the_store(tmp_path_factory, modes, batch):
    EXAMPLES["embedder"] += 1
    emb = ModeEmbedder()
    m = _embedder_memory(tmp_path_factory, emb)
    for mode in modes:
        emb.mode = mode
        before = len(m.graph)
        try:
            ids = m.add_turns([f"{mode} turn {i} {EXAMPLES['embedder']}" for i in range(batch)])
        except EmbeddingError as exc:
            assert mode != "ok" and str(exc)
            emb.mode = "ok"
            _settled(m, before)
            continue
        assert mode == "ok", f"embedder mode {mode} was accepted"
        assert len(ids) == batch
        emb.mode = "ok"
        _settled(m)
    emb.mode = "ok"


_EMB_MEM: dict[str, Synapse] = {}


def _embedder_memory(tmp_path_factory, emb) -> Synapse:
    m = _EMB_MEM.get("m")
    if m is None:
        m = _EMB_MEM["m"] = Synapse(tmp_path_factory.mktemp("emb") / "m", embedder=emb)
    m._embedder.inner = emb  # the same memory for every example, with this example's embedder
    return m


@pytest.fixture(scope="module", autouse=True)
def _close_embedder_memory():
    yield
    for m in _EMB_MEM.values():
        m.close()


replies = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["", "{}", "[]", "null", '{"nodes": "x"}', '{"nodes": [{"name": ""}]}',
                     '{"nodes": [{"name": "Dana", "confidence": "high"}], "edges": 5}',
                     '```json\n{"nodes": [{"name": "Lisbon", "type": "Place"}]}\n```',
                     '{"nodes": [{"name": "A"}, {"name": "B"}], "edges": [{"source": "A", '
                     '"relation": "knows", "target": "Zed", "weight": 9}]}',
                     '{"nodes": [{"name": "' + "x" * 5000 + '"}]}', "\x00\x01\x02", "{" * 500]),
    st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=10),
                 lambda k: st.lists(k, max_size=3) | st.dictionaries(
                     st.sampled_from(["nodes", "edges", "name", "type", "source", "target",
                                      "relation", "confidence", "weight", "attributes"]), k, max_size=4),
                 max_leaves=10).map(lambda v: json.dumps(v)),
)


@SETTINGS
@given(answers=st.lists(replies, min_size=2, max_size=2), strict=st.booleans())
def test_malformed_llm_extractor_output(tmp_path_factory, answers, strict):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    EXAMPLES["llm_output"] += 1
    m = _llm_memory(tmp_path_factory)
    m._consolidator.extractor = LLMExtractor(FakeListChatModel(responses=answers), strict=strict)
    before_eps = sum(1 for _, d in m.graph.nodes(data=True) if d["kind"] == "episode")
    ids = m.add_turns([f"Dana met Sam in Lisbon, example {EXAMPLES['llm_output']}, turn {i}"
                       for i in range(5)])  # a full window: consolidation runs the extractor
    assert len(ids) == 5  # the turns are stored whatever the extractor did
    eps = sum(1 for _, d in m.graph.nodes(data=True) if d["kind"] == "episode")
    assert eps == before_eps + 5
    try:
        m.consolidate()
    except ExtractionError as exc:
        assert strict and "extraction failed" in str(exc)
        assert set(ids) <= set(m._state.pending)  # not lost: retried at the next consolidation
    for n, d in m.graph.nodes(data=True):
        if d["kind"] == "concept":
            assert isinstance(d["text"], str) and d["text"].strip()
    _settled(m)
    m._consolidator.extractor = LLMExtractor(FakeListChatModel(responses=['{"nodes": []}'] * 50))
    m.consolidate()
    assert not m._state.pending


_LLM_MEM: dict[str, Synapse] = {}


def _llm_memory(tmp_path_factory) -> Synapse:
    m = _LLM_MEM.get("m")
    if m is None:
        m = _LLM_MEM["m"] = Synapse(tmp_path_factory.mktemp("llm") / "m", embedder=HashEmbedder())
    return m


@pytest.fixture(scope="module", autouse=True)
def _close_llm_memory():
    yield
    for m in _LLM_MEM.values():
        m.close()

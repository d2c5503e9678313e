"""SynapticRAG's spike trains recorded at retrieval: each stimulated node gets
``[query time, stimulus]`` appended to its ``spikes`` attribute, bounded, persisted, and
read back by the model."""

from __future__ import annotations

import pytest

from synapse_integrations import InvalidInputError, Synapse, SynapseConfig
from synapse_integrations.core.models.synaptic import MAX_SPIKES, spike_trains

from _adapter_data import MODEL_TURNS

DAY = 86400.0
T0 = 1.7e9

TURNS = MODEL_TURNS[:6]
SYNAPTIC = SynapseConfig(model="synaptic")


def _memory(path, embedder, config=SYNAPTIC):
    mem = Synapse(path, embedder=embedder, config=config)
    mem.add_turns([{"text": t, "id": f"t{i}", "timestamp": T0 + i * DAY}
                   for i, t in enumerate(TURNS)])
    mem.consolidate()
    return mem


def _spikes(mem):
    return {n: d.get("spikes") for n, d in mem.graph.nodes(data=True) if d.get("spikes")}


def test_retrieval_records_each_stimulus_at_the_query_time(tmp_path, embedder):
    mem = _memory(tmp_path / "m", embedder)
    try:
        at = T0 + 30 * DAY
        with mem.inspect_retrieval() as steps:  # what the model will stimulate (reads only)
            q = steps.query("Where did we go skiing?", embedder.embed_query(
                "Where did we go skiing?"), SYNAPTIC)
            q = type(q)(q.text, q.vector, q.sim, q.anchors, at)
            act = steps.activate(q, SYNAPTIC)
            expected = {steps.view.ids[i]: float(act.spikes[i])
                        for i in range(steps.view.n) if act.spikes[i] > 0}
        assert expected and _spikes(mem) == {}
        mem.retrieve("Where did we go skiing?", at=at)
        got = _spikes(mem)
        assert set(got) == set(expected)
        for node, train in got.items():
            assert train == [[at, pytest.approx(expected[node])]]
        # the model reads them back: the recorded stimulus joins the node's spike train
        with mem.inspect_retrieval() as steps:
            trains = spike_trains(steps.view)
            some = next(iter(got))
            times, values = trains[steps.view.index[some]]
            assert at in times and values[times.index(at)] == pytest.approx(expected[some])
    finally:
        mem.close()


def test_spike_trains_are_bounded_and_persisted(tmp_path, embedder):
    mem = _memory(tmp_path / "m", embedder)
    times = [T0 + 30 * DAY + h * 3600.0 for h in range(MAX_SPIKES + 8)]
    for at in times:
        mem.retrieve("skiing at Whistler with Dana", at=at)
    got = _spikes(mem)
    longest = max(got.values(), key=len)
    assert len(longest) == MAX_SPIKES
    assert [t for t, _ in longest] == times[-MAX_SPIKES:]  # the oldest went first
    mem.save()
    mem.close()
    again = Synapse.load(tmp_path / "m", embedder=embedder)
    try:
        assert _spikes(again) == got
    finally:
        again.close()


@pytest.mark.parametrize("config", [
    SynapseConfig(model="synaptic", model_params={"synaptic": {"record_spikes": False}}),
    SynapseConfig(),
    SynapseConfig(model="evermind"),
])
def test_nothing_is_recorded_unless_the_model_asks(tmp_path, embedder, config):
    mem = _memory(tmp_path / "m", embedder, config)
    try:
        mem.retrieve("skiing at Whistler", at=T0 + 30 * DAY)
        assert _spikes(mem) == {}
    finally:
        mem.close()


def test_query_time_default_and_bad_time(tmp_path, embedder):
    mem = _memory(tmp_path / "m", embedder)
    try:
        mem.retrieve("skiing at Whistler")  # no time given: the latest event in the memory
        assert {t for train in _spikes(mem).values() for t, _ in train} == {T0 + 5 * DAY}
        with pytest.raises(InvalidInputError):
            mem.retrieve("skiing", at="not a time")
    finally:
        mem.close()

"""Usage feedback (Evermind's learned edge weights, seed paper 003, 4.5): the engine's
``feedback``, where the weights live, persistence, consolidation, and bad input."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from synapse_integrations import (
    FeedbackReport,
    InvalidInputError,
    InvalidTypeError,
    NodeNotFoundError,
    Synapse,
    SynapseConfig,
)
from synapse_integrations.core.lifecycle.feedback import path_nodes
from synapse_integrations.core.graph.graph import MemoryGraph
from synapse_integrations.core.models.evermind import with_learned_weights

from _adapter_data import MODEL_TURNS


TURNS = MODEL_TURNS

EVERMIND = SynapseConfig(model="evermind", model_params={"evermind": {"floor": 0.0}})


def _memory(path, embedder, config, turns=TURNS):
    mem = Synapse(path, embedder=embedder, config=config)
    ids = mem.add_turns([{"text": t, "id": f"t{i}"} for i, t in enumerate(turns)])
    mem.consolidate()
    return mem, ids


def _evermind_weights(mem, config=EVERMIND):
    with mem.inspect_retrieval() as steps:
        e = steps.retriever.model("evermind").learnable_edges(steps.view, config)
        return {(steps.view.ids[a], steps.view.ids[b]): float(w)
                for a, b, w in zip(e.src, e.dst, e.weight)}


# -- kernels -------------------------------------------------------------------------------
def test_with_learned_weights_by_hand():
    src, dst, w = with_learned_weights(np.array([0, 1, 2]), np.array([1, 0, 1]),
                                       np.array([0.5, 0.6, 0.7]), np.array([2, 0]),
                                       np.array([1, 2]), np.array([0.0, 0.1]))
    assert list(zip(src.tolist(), dst.tolist(), w.tolist())) == [
        (0, 1, 0.5), (0, 2, 0.1), (1, 0, 0.6), (2, 1, 0.0)]


def test_path_nodes_follow_parent_chains():
    parents = np.array([-1, 0, 1, 2, -1, 4])
    assert path_nodes(parents, [3]).tolist() == [0, 1, 2, 3]
    assert path_nodes(parents, [5, 1]).tolist() == [0, 1, 4, 5]
    assert path_nodes(None, [2]).tolist() == [2]


# -- Evermind: the k-NN graph's learned table ----------------------------------------------
def test_evermind_feedback_adds_alpha_to_edges_between_used_memories(tmp_path, embedder):
    mem, ids = _memory(tmp_path / "m", embedder, EVERMIND)
    try:
        before = _evermind_weights(mem)
        a, b = next((u, v) for (u, v) in before if (v, u) in before)  # a mutual link
        rep = mem.feedback("skiing in Whistler", used_ids=[a, b])
        assert isinstance(rep, FeedbackReport) and rep.graph == "evermind"
        assert rep.strengthened >= 2
        after = _evermind_weights(mem)
        for pair in ((a, b), (b, a)):
            assert after[pair] == pytest.approx(min(1.0, before[pair] + 0.1))
        untouched = [p for p in before if a not in p and b not in p]
        assert all(after[p] == before[p] for p in untouched)
        # alpha 0.1 five more times: clipped at 1
        for _ in range(12):
            mem.feedback("skiing in Whistler", used_ids=[a, b])
        assert _evermind_weights(mem)[(a, b)] == 1.0
    finally:
        mem.close()


def test_evermind_learn_links_creates_links_between_used_memories(tmp_path, embedder):
    cfg = SynapseConfig(model="evermind", model_params={"evermind": {"learn_links": True}})
    mem, ids = _memory(tmp_path / "m", embedder, cfg)
    try:
        before = _evermind_weights(mem, cfg)
        a, b = "t0", "t9"  # skiing and sourdough: no k-NN link
        assert (a, b) not in before
        rep = mem.feedback("what did Sam do", used_ids=[a, b], config=cfg, alpha=0.2)
        assert rep.created == 2
        after = _evermind_weights(mem, cfg)
        assert after[(a, b)] == after[(b, a)] == pytest.approx(0.2)
    finally:
        mem.close()


def test_learned_weights_survive_consolidation_and_snapshot_reload(tmp_path, embedder):
    mem, ids = _memory(tmp_path / "m", embedder, EVERMIND)
    before = _evermind_weights(mem)
    a, b = next((u, v) for (u, v) in before if (v, u) in before)
    mem.feedback("skiing", used_ids=[a, b], alpha=0.3)
    learned = _evermind_weights(mem)[(a, b)]
    assert learned == pytest.approx(min(1.0, before[(a, b)] + 0.3))
    # more turns and consolidation windows: the k-NN graph is rebuilt, the weight stays
    mem.add_turns([f"Sam: another ski trip to Whistler, number {i}." for i in range(12)])
    mem.consolidate()
    assert _evermind_weights(mem)[(a, b)] == pytest.approx(learned)
    mem.close()
    again = Synapse.load(tmp_path / "m", embedder=embedder, config=EVERMIND)
    try:
        assert _evermind_weights(again)[(a, b)] == pytest.approx(learned)
        # forgetting a memory drops its learned links
        again.forget(ids=[a])
        assert all(a not in pair for pair in _evermind_weights(again))
    finally:
        again.close()


# -- SYNAPSE / PPR: the memory graph's own edges ---------------------------------------------
def test_synapse_feedback_marks_memory_graph_edges_learned(tmp_path, embedder):
    mem, ids = _memory(tmp_path / "m", embedder, SynapseConfig())
    try:
        g = mem.graph
        w = g.edges["t0", "t1"]["weight"]  # the temporal edge between two turns
        rep = mem.feedback("skiing in Whistler with Dana", used_ids=["t0", "t1"], alpha=0.25)
        assert rep.graph == "memory" and rep.strengthened >= 1
        assert g.edges["t0", "t1"]["weight"] == pytest.approx(min(1.0, w + 0.25))
        assert g.edges["t0", "t1"]["learned"] is True
        learned = g.edges["t0", "t1"]["weight"]
        mem.add_turns([f"Sam: skiing again at Whistler, day {i}." for i in range(10)])
        mem.consolidate()
        assert mem.graph.edges["t0", "t1"]["weight"] == pytest.approx(learned)
        mem.save()
    finally:
        mem.close()
    again = Synapse.load(tmp_path / "m", embedder=embedder)
    try:
        assert again.graph.edges["t0", "t1"]["weight"] == pytest.approx(learned)
        assert again.graph.edges["t0", "t1"]["learned"] is True
    finally:
        again.close()


def test_consolidation_never_raises_or_prunes_a_learned_edge():
    g = MemoryGraph(2)
    for i in range(6):
        g.add_node(f"n{i}", np.array([1.0, 0.0]), kind="episode", text=str(i))
    g.add_edge("n0", "n5", kind="association", weight=0.8)
    assert g.set_edge_weights([("n0", "n5"), ("n1", "n2")], [0.05, 0.5]) == 1  # n1->n2: none
    g.add_edge("n0", "n5", kind="association", weight=0.95)  # consolidation sees the pair again
    assert g.g.edges["n0", "n5"]["weight"] == 0.05
    for i in range(1, 5):
        g.add_edge(f"n{i}", "n5", kind="association", weight=0.9)
    # the learned edge counts toward top_k and is kept although it is the weakest
    assert g.prune_incoming(["n5"], 2) == 3
    assert g.g.has_edge("n0", "n5") and g.g.in_degree("n5") == 2
    # without the mark, the same weights are pruned and raised like any edge
    h = MemoryGraph(2)
    for i in range(3):
        h.add_node(f"n{i}", np.array([1.0, 0.0]), kind="episode", text=str(i))
    h.add_edge("n0", "n2", kind="association", weight=0.05)
    h.add_edge("n1", "n2", kind="association", weight=0.9)
    assert h.prune_incoming(["n2"], 1) == 1 and not h.g.has_edge("n0", "n2")


def test_models_without_a_weighted_graph_learn_nothing(tmp_path, embedder):
    cfg = SynapseConfig(model="mnemos")
    mem, ids = _memory(tmp_path / "m", embedder, cfg)
    try:
        rep = mem.feedback("skiing", used_ids=["t0", "t1"])
        assert rep.graph is None and rep.strengthened == rep.weakened == rep.created == 0
    finally:
        mem.close()


def test_afeedback_is_the_twin(tmp_path, embedder):
    mem, ids = _memory(tmp_path / "m", embedder, EVERMIND)
    try:
        rep = asyncio.run(mem.afeedback("skiing", ["t0", "t1"], ["t9"]))
        assert rep.used == ("t0", "t1") and rep.unused == ("t9",)
    finally:
        mem.close()


# -- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize("args, kwargs, error, words", [
    (("q", "t0"), {}, InvalidTypeError, "used_ids must be a list"),
    (("q", [1]), {}, InvalidTypeError, "str ids"),
    (("q", ["t0"], "t1"), {}, InvalidTypeError, "unused_ids must be a list"),
    (("q", ["t0"], ["t0"]), {}, InvalidInputError, "both used and unused"),
    (("q", ["t0"]), {"alpha": 2.0}, InvalidInputError, "alpha must be"),
    (("q", ["t0"]), {"alpha": True}, InvalidInputError, "alpha must be"),
    (("q", ["nope"]), {}, NodeNotFoundError, "nope"),
    (("", ["t0"]), {}, InvalidInputError, "query"),
    ((None, ["t0"]), {}, InvalidTypeError, "query"),
    (("q", ["t0"]), {"config": {"model": "evermind"}}, InvalidTypeError, "SynapseConfig"),
])
def test_bad_feedback_is_a_clear_error(tmp_path, embedder, args, kwargs, error, words):
    mem, ids = _memory(tmp_path / "m", embedder, EVERMIND, TURNS[:3])
    try:
        with pytest.raises(error, match=words):
            mem.feedback(*args, **kwargs)
    finally:
        mem.close()


# -- snapshots holding what the models learned ------------------------------------------------
def _files(graph: MemoryGraph) -> dict:
    return {"graph": graph.to_json(), "state": {"pending": [], "last_episode": None,
                                                "windows": 0}}


def _graph(**node_attrs) -> MemoryGraph:
    g = MemoryGraph(2)
    for i in range(2):
        g.add_node(f"n{i}", np.array([1.0, 0.0]), kind="episode", text=str(i), **node_attrs)
    return g


def test_snapshot_validation_refuses_bad_learned_state():
    from synapse_integrations import SnapshotError
    from synapse_integrations.core.models.synaptic import MAX_SPIKES
    from synapse_integrations.core.state.snapshot_checks import validate_snapshot

    manifest = {"namespace": "ns", "config": SynapseConfig().to_dict()}
    good = _graph(spikes=[[1.7e9, 0.5]], affect=[0.1, 0.2, 0.3])
    good.set_learned("evermind", [("n0", "n1")], [0.7])
    validate_snapshot(manifest, _files(good), namespace="ns")
    restored = MemoryGraph.from_json(good.to_json(), dim=2)
    assert restored.learned == {"evermind": {("n0", "n1"): 0.7}}
    bad = _graph()
    bad.set_learned("evermind", [("n0", "n1")], [1.5])
    with pytest.raises(SnapshotError, match="learned weight"):
        validate_snapshot(manifest, _files(bad), namespace="ns")
    data = good.to_json()
    data["learned"] = {"evermind": [["n0", 3, 0.5]]}
    with pytest.raises(SnapshotError, match="learned-weights"):
        MemoryGraph.from_json(data, dim=2)
    too_long = [[1.7e9 + i, 1.0] for i in range(MAX_SPIKES + 1)]
    for attrs, words in (({"spikes": too_long}, "spike train"),
                         ({"spikes": [[1.7e9, float("nan")]]}, "spike train"),
                         ({"affect": [0.1, 0.2]}, "affect")):
        with pytest.raises(SnapshotError, match=words):
            validate_snapshot(manifest, _files(_graph(**attrs)), namespace="ns")

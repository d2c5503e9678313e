"""Evermind (seed paper 003): k-NN graph, linear spreading, the confidence gate and the
learned-weight update, against hand-computed values and slow references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from synapse_integrations.config import SynapseConfig
from synapse_integrations.core.kernels.dynamics import propagation_matrix
from synapse_integrations.core.graph.graph import Compiled
from synapse_integrations.core.models import get_model
from synapse_integrations.core.models._neighbors import top_k_neighbors
from synapse_integrations.core.models.base import Query
from synapse_integrations.core.models.evermind import (
    EvermindModel,
    feedback_signal,
    knn_edges,
    learn_edge_weights,
    update_edge_weights_reference,
    linear_spread,
    linear_spread_reference,
    seed_activation,
    spread_is_needed,
    spread_with_parents,
    update_edge_weights,
)
from synapse_integrations.errors import ConfigError, InvalidInputError

DEG = math.pi / 180


def at(*angles: float) -> np.ndarray:
    return np.array([[math.cos(a * DEG), math.sin(a * DEG)] for a in angles], dtype=np.float32)


# Five episodes at 0, 10, 25, 90 and 100 degrees, plus a concept at 45.
# Nearest neighbours (k = 1): 0 -> 10, 10 -> 0 (10 deg, vs 15 to 25), 25 -> 10, 90 <-> 100.
# Mutual pairs: 0 <-> 10 and 90 <-> 100; 25 points at 10, which does not point back.
ANGLES = (0, 10, 25, 90, 100, 45)


def view() -> Compiled:
    return Compiled.from_arrays([f"n{k}" for k in range(6)], at(*ANGLES), src=[5], dst=[0],
                                weight=[1.0], is_episode=[True] * 5 + [False])


def query(angle: float, v: Compiled) -> Query:
    q = at(angle)[0].astype(np.float64)
    sim = v.embeddings @ q
    return Query("q", q, sim, np.sort(np.argsort(-sim)[:3]))


def cfg(**evermind) -> SynapseConfig:
    return SynapseConfig(model_params={"evermind": evermind})


# --------------------------------------------------------------------------------------------
# the graph
# --------------------------------------------------------------------------------------------
def test_knn_edges_mutual_and_open_on_the_angle_example():
    idx, sim = top_k_neighbors(at(*ANGLES[:5]), k=1)
    s, d, w = knn_edges(idx, sim, k=1, mutual=True, floor=0.35)
    assert list(zip(s.tolist(), d.tolist())) == [(0, 1), (1, 0), (3, 4), (4, 3)]
    np.testing.assert_allclose(w, [math.cos(10 * DEG)] * 4, atol=1e-6)
    s, d, _ = knn_edges(idx, sim, k=1, mutual=False, floor=0.35)
    assert list(zip(s.tolist(), d.tolist())) == [(0, 1), (1, 0), (2, 1), (3, 4), (4, 3)]


def test_knn_edges_floor_drops_weak_links():
    idx, sim = top_k_neighbors(at(0, 80, 160), k=1)  # cos 80 deg = 0.17 < 0.35
    s, d, _ = knn_edges(idx, sim, k=1, mutual=False, floor=0.35)
    assert s.size == 0
    s, d, _ = knn_edges(idx, sim, k=1, mutual=False, floor=0.1)
    assert list(zip(s.tolist(), d.tolist())) == [(0, 1), (1, 0), (2, 1)]


def test_knn_edges_uses_only_the_first_k_columns():
    idx, sim = top_k_neighbors(at(*ANGLES[:5]), k=3)
    s3, d3, _ = knn_edges(idx, sim, k=1, mutual=True, floor=0.35)
    assert list(zip(s3.tolist(), d3.tolist())) == [(0, 1), (1, 0), (3, 4), (4, 3)]
    with pytest.raises(InvalidInputError):
        knn_edges(idx, sim, k=4, mutual=True, floor=0.35)


# --------------------------------------------------------------------------------------------
# seeding, gate, spreading
# --------------------------------------------------------------------------------------------
def test_seed_activation_top_k_among_eligible_with_ties_and_clipping():
    sim = np.array([0.5, 0.9, 0.5, -0.2, 0.95, 0.5])
    eligible = np.array([True, True, True, True, False, True])
    a0 = seed_activation(sim, init_k=3, eligible=eligible)
    # node 4 is not eligible; of the 0.5 ties, the lower indices 0 and 2 win
    assert a0.tolist() == [0.5, 0.9, 0.5, 0.0, 0.0, 0.0]
    assert seed_activation(np.array([-0.3, -0.1]), init_k=5).tolist() == [0.0, 0.0]


@pytest.mark.parametrize(("sims", "needed"), [
    ([0.45, 0.2, 0.1], True),      # top-1 below 0.5
    ([0.9, 0.88, 0.86], True),     # lead over the 3rd only 0.04
    ([0.9, 0.88, 0.84], False),    # lead 0.06: confident
    ([0.9], False),                # no 3rd: only the top-1 rule applies
    ([], False),
])
def test_spread_is_needed(sims, needed):
    assert spread_is_needed(np.array(sims), top1_below=0.5, gap_below=0.05, gap_rank=3) is needed


def test_linear_spread_hand_computed_chain():
    # 0 -> 1 (w 0.8), 0 -> 2 (w 0.4), 1 -> 2 (w 1.0); out-degrees 2, 1, 0
    P = propagation_matrix(np.array([0, 0, 1]), np.array([1, 2, 2]), np.array([0.8, 0.4, 1.0]),
                           3, use_fan_effect=True, fan_exponent=1.0)
    a = linear_spread(np.array([1.0, 0.0, 0.0]), P, gamma=0.9, rounds=2)
    # round 1: a0 = 0.9, a1 = 0.1 * 0.8/2 = 0.04, a2 = 0.1 * 0.4/2 = 0.02
    # round 2: a0 = 0.81, a1 = 0.9*0.04 + 0.1*0.4*0.9 = 0.072,
    #          a2 = 0.9*0.02 + 0.1*(0.2*0.9 + 1.0*0.04) = 0.04
    np.testing.assert_allclose(a, [0.81, 0.072, 0.04], atol=1e-12)


def test_linear_spread_matches_reference_on_a_random_graph():
    rng = np.random.default_rng(3)
    n = 40
    pairs = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, (150, 2)) if a != b})
    src, dst = np.array(pairs).T
    w = rng.random(src.size)
    a0 = np.where(rng.random(n) < 0.2, rng.random(n), 0.0)
    P = propagation_matrix(src, dst, w, n, use_fan_effect=True, fan_exponent=1.0)
    for gamma, rounds in ((0.95, 3), (0.7, 5), (1.0, 3), (0.5, 0)):
        np.testing.assert_allclose(
            linear_spread(a0, P, gamma=gamma, rounds=rounds),
            linear_spread_reference(a0, src, dst, w, n, gamma=gamma, rounds=rounds), atol=1e-12)
        a, parent = spread_with_parents(a0, P, gamma=gamma, rounds=rounds)
        np.testing.assert_array_equal(a, linear_spread(a0, P, gamma=gamma, rounds=rounds))
        seeds = a0 > 0
        assert (parent[seeds] == -1).all()
        reached = (a > 0) & ~seeds
        # each reached node's parent is an in-neighbour
        assert all((int(parent[i]), int(i)) in set(pairs) for i in np.flatnonzero(reached))


def test_spread_with_parents_picks_the_strongest_inflow():
    # 0 -> 2 (w 0.2), 1 -> 2 (w 0.9): node 2's parent is 1
    P = propagation_matrix(np.array([0, 1]), np.array([2, 2]), np.array([0.2, 0.9]), 3,
                           use_fan_effect=True, fan_exponent=1.0)
    _, parent = spread_with_parents(np.array([1.0, 0.5, 0.0]), P, gamma=0.5, rounds=2)
    assert parent.tolist() == [-1, -1, 1]


def test_spread_input_errors():
    P = np.zeros((2, 2))
    with pytest.raises(InvalidInputError, match="gamma"):
        linear_spread(np.zeros(2), P, gamma=1.5, rounds=1)
    with pytest.raises(InvalidInputError, match="shape"):
        linear_spread(np.zeros(3), P, gamma=0.5, rounds=1)
    with pytest.raises(InvalidInputError, match="rounds"):
        linear_spread(np.zeros(2), P, gamma=0.5, rounds=-1)


# --------------------------------------------------------------------------------------------
# learned edge weights (Eq. 2)
# --------------------------------------------------------------------------------------------
def test_learned_weights_hand_computed():
    src = np.array([0, 1, 1, 2, 3, 0])
    dst = np.array([1, 0, 2, 3, 2, 4])
    w = np.array([0.5, 0.5, 0.95, 0.05, 0.3, 0.7])
    kw = dict(useful=np.array([0, 1, 2]), spread_unused=np.array([3]),
              active=np.array([0, 1, 2, 3]))
    signal = feedback_signal(src, dst, **kw)
    # 0-1, 1-0, 1-2: both ends useful (+1); 2 -> 3: 3 came by spreading, unused (-1);
    # 3 -> 2: 2 is useful, 3 is not (0); 0 -> 4: 4 not retrieved (0)
    assert signal.tolist() == [1, 1, 1, -1, 0, 0]
    new = learn_edge_weights(w, signal, alpha=0.1)
    np.testing.assert_allclose(new, [0.6, 0.6, 1.0, 0.0, 0.3, 0.7])  # clipped at 1 and 0
    np.testing.assert_allclose(update_edge_weights_reference(src, dst, w, alpha=0.1, **kw), new)
    np.testing.assert_array_equal(update_edge_weights(src, dst, w, alpha=0.1, **kw), new)
    assert (w == [0.5, 0.5, 0.95, 0.05, 0.3, 0.7]).all()  # input untouched


def test_learned_weights_negative_needs_an_active_source():
    signal = feedback_signal(np.array([0]), np.array([1]), useful=np.array([], dtype=int),
                             spread_unused=np.array([1]), active=np.array([1]))
    assert signal.tolist() == [0]  # 0 was not active: the energy did not come through 0 -> 1


def test_learned_weights_match_reference_on_random_feedback():
    rng = np.random.default_rng(5)
    n = 30
    src, dst = rng.integers(0, n, 200), rng.integers(0, n, 200)
    w = rng.random(200)
    nodes = rng.permutation(n)
    kw = dict(useful=nodes[:6], spread_unused=nodes[6:10], active=nodes[:15])
    for alpha in (0.1, 0.5):
        np.testing.assert_allclose(update_edge_weights(src, dst, w, alpha=alpha, **kw),
                                   update_edge_weights_reference(src, dst, w, alpha=alpha, **kw))


def test_learned_weights_errors():
    with pytest.raises(InvalidInputError, match="both useful"):
        feedback_signal(np.array([0]), np.array([1]), useful=np.array([1]),
                        spread_unused=np.array([1]), active=np.array([0]))
    with pytest.raises(InvalidInputError, match="-1, 0 and"):
        learn_edge_weights(np.array([0.5]), np.array([2]))
    with pytest.raises(InvalidInputError, match="same shape"):
        learn_edge_weights(np.array([0.5, 0.1]), np.array([1]))


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------
def test_model_one_round_open_graph_hand_computed():
    v = view()
    out = EvermindModel().activate(v, query(2, v), cfg(k=1, mutual=False, init_k=1, gamma=0.5,
                                                       rounds=1))
    c2, c10 = math.cos(2 * DEG), math.cos(10 * DEG)
    # seed: episode 0 (cos 2 deg); one round: it keeps half, passes half * w(0->1) to 1
    np.testing.assert_allclose(out.activation, [0.5 * c2, 0.5 * c10 * c2, 0, 0, 0, 0], atol=1e-6)
    assert out.parents.tolist() == [-1, 0, -1, -1, -1, -1]
    np.testing.assert_array_equal(out.score, out.activation)  # ranks by its own activation


def test_model_mutual_two_seeds_matches_reference():
    v = view()
    c = cfg(k=1, init_k=2, gamma=0.7, rounds=3)
    out = EvermindModel().activate(v, query(2, v), c)
    sim = v.embeddings.astype(np.float64) @ at(2)[0].astype(np.float64)
    a0 = np.zeros(6)
    a0[[0, 1]] = sim[[0, 1]]
    w = math.cos(10 * DEG)
    expected = linear_spread_reference(a0, np.array([0, 1, 3, 4]), np.array([1, 0, 4, 3]),
                                       np.full(4, w), 6, gamma=0.7, rounds=3)
    np.testing.assert_allclose(out.activation, expected, atol=1e-6)
    assert out.activation[5] == 0.0  # the concept is not in the graph


def test_model_concepts_are_never_seeds_and_gamma_one_is_dense():
    v = view()
    out = EvermindModel().activate(v, query(45, v), cfg(gamma=1.0))
    assert out.activation[5] == 0.0  # the concept at 45 deg is the closest node
    sim = v.embeddings.astype(np.float64) @ at(45)[0].astype(np.float64)
    np.testing.assert_allclose(out.activation[:5], np.clip(sim[:5], 0, None), atol=1e-6)


def test_model_confidence_gate():
    v = view()
    # query at 0 deg: top-1 cos 1.0, lead over the 3rd (25 deg) 0.094: confident, no spread
    gated = EvermindModel().activate(v, query(0, v), cfg(gate=True, k=1, init_k=1))
    sim = v.embeddings.astype(np.float64) @ at(0)[0].astype(np.float64)
    np.testing.assert_allclose(gated.activation, [sim[0], 0, 0, 0, 0, 0], atol=1e-6)
    # with a gap threshold of 0.2 the same query is unsure: it spreads
    spread = EvermindModel().activate(v, query(0, v), cfg(gate=True, gate_gap=0.2, k=1, init_k=1))
    assert spread.activation[1] > 0


def test_model_rank_hybrid_and_use_graph_off():
    v = view()
    out = EvermindModel().activate(v, query(2, v), cfg(rank="hybrid"))
    assert out.score is None
    off = EvermindModel().activate(v, query(2, v), SynapseConfig(use_graph=False))
    sim = v.embeddings.astype(np.float64) @ at(2)[0].astype(np.float64)
    # the five episodes are the seeds, untouched (100 deg has cos < 0: clipped to 0)
    np.testing.assert_allclose(off.activation, [*np.clip(sim[:5], 0, None), 0.0], atol=1e-6)


def test_model_builds_the_graph_once_per_view():
    v = view()
    model = EvermindModel()
    e1 = model.graph(v, cfg(k=1))
    assert model.graph(v, cfg(k=1)) is e1
    assert model.graph(v, cfg(k=1, mutual=False)) is not e1


@pytest.mark.parametrize(("extra", "match"), [
    ({"gamma": 0.0}, "gamma"), ({"gamma": 1.2}, "gamma"), ({"k": 0}, "'k'"),
    ({"gama": 0.9}, "unknown"), ({"rank": "best"}, "rank"), ({"gate_rank": 1}, "gate_rank"),
])
def test_model_rejects_bad_hyperparameters(extra, match):
    v = view()
    with pytest.raises(ConfigError, match=match):
        EvermindModel().activate(v, query(2, v), cfg(**extra))


def test_registered():
    assert isinstance(get_model("evermind"), EvermindModel)

"""Spreading activation kernels: hand-computed values for Eqs. 2-4, fast vs reference."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from synapse_integrations.core.kernels.dynamics import (
    SpreadResult,
    lateral_inhibition,
    propagation_by_source,
    propagation_matrix,
    sigmoid_firing,
    spread_activation,
)
from synapse_integrations.core.kernels.dynamics_reference import (
    spread_activation_reference,
)
from synapse_integrations.errors import InvalidInputError, SynapseError

# The 5-node graph used by the hand-computed tests:
#
#     0 --0.6--> 1 --0.5--> 3 --0.9--> 4
#     0 --1.0--> 2 --0.4--> 3
#
# fan(0) = 2 (two out-edges), fan(1) = fan(2) = fan(3) = 1, fan(4) = 0.
SRC = np.array([0, 0, 1, 2, 3])
DST = np.array([1, 2, 3, 3, 4])
W = np.array([0.6, 1.0, 0.5, 0.4, 0.9])
N = 5

PAPER = dict(spreading_factor=0.8, decay=0.5, inhibition_beta=0.15, inhibition_top_m=7,
             gamma=5.0, theta=0.5)


def expit(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


# --------------------------------------------------------------------------------------------
# propagation_matrix (the operator of Eq. 2)
# --------------------------------------------------------------------------------------------
def test_propagation_matrix_divides_by_out_degree_count():
    P = propagation_matrix(SRC, DST, W, N).toarray()
    expected = np.zeros((N, N))
    expected[1, 0] = 0.6 / 2  # fan(0) = 2 edges -- not the weight sum 1.6 (which gives 0.375)
    expected[2, 0] = 1.0 / 2
    expected[3, 1] = 0.5 / 1
    expected[3, 2] = 0.4 / 1
    expected[4, 3] = 0.9 / 1
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-15)


def test_propagation_matrix_without_fan_effect_is_raw_weights():
    P = propagation_matrix(SRC, DST, W, N, use_fan_effect=False).toarray()
    expected = np.zeros((N, N))
    expected[DST, SRC] = W
    np.testing.assert_array_equal(P, expected)


def test_propagation_matrix_matches_a_loop_on_a_random_graph():
    rng = np.random.default_rng(7)
    n = 40
    pairs = {(int(j), int(i)) for j, i in rng.integers(0, n, size=(200, 2))}
    src = np.array([j for j, _ in sorted(pairs)])
    dst = np.array([i for _, i in sorted(pairs)])
    w = rng.random(src.size)
    out_degree: dict[int, int] = {}
    for j in src.tolist():
        out_degree[j] = out_degree.get(j, 0) + 1
    expected = np.zeros((n, n))
    for j, i, wji in zip(src.tolist(), dst.tolist(), w.tolist()):
        expected[i, j] = wji / out_degree[j]
    P = propagation_matrix(src, dst, w, n)
    assert isinstance(P, sp.csr_array)
    np.testing.assert_allclose(P.toarray(), expected, rtol=0, atol=1e-15)


def test_propagation_matrix_without_edges():
    empty = np.array([], dtype=np.int64)
    P = propagation_matrix(empty, empty, np.array([]), 3)
    assert P.shape == (3, 3) and P.nnz == 0
    assert propagation_matrix(empty, empty, np.array([]), 0).shape == (0, 0)


@pytest.mark.parametrize(
    ("src", "dst", "weight", "n", "match"),
    [
        ([0, 5], [1, 2], [1.0, 1.0], 5, "outside"),
        ([0, 1], [-1, 2], [1.0, 1.0], 5, "outside"),
        ([0, 1], [1, 2], [1.0, np.nan], 5, "finite"),
        ([0, 1], [1, 2], [1.0, np.inf], 5, "finite"),
        ([0, 1], [1, 2], [1.0, -0.1], 5, ">= 0"),
        ([0, 1], [1], [1.0, 1.0], 5, "equal length"),
        ([0.0, 1.5], [1, 2], [1.0, 1.0], 5, "integer"),
        ([0], [1], [1.0], -1, "n must be"),
    ],
)
def test_propagation_matrix_rejects_bad_edges(src, dst, weight, n, match):
    with pytest.raises(InvalidInputError, match=match) as info:
        propagation_matrix(np.array(src), np.array(dst), np.array(weight), n)
    assert isinstance(info.value, ValueError) and isinstance(info.value, SynapseError)


# --------------------------------------------------------------------------------------------
# Eq. 2 inside the cycle: fan effect and decay
# --------------------------------------------------------------------------------------------
def one_step(P, a0, *, decay=0.5):
    return spread_activation(a0, P, iterations=1, spreading_factor=0.8, decay=decay,
                             inhibition_beta=0.0, inhibition_top_m=0, gamma=5.0, theta=0.5,
                             use_inhibition=False)


def test_fan_effect_splits_energy_among_out_edges():
    a0 = np.array([1.0, 0, 0, 0, 0])
    # With the fan effect each neighbour of node 0 receives S * w * a / fan(0) = 0.8 * w / 2:
    #   u1 = 0.8 * 0.6 * 1 / 2 = 0.24,  u2 = 0.8 * 1.0 * 1 / 2 = 0.40
    # and node 0 keeps (1 - delta) * a0 = 0.5.
    with_fan = one_step(propagation_matrix(SRC, DST, W, N), a0)
    np.testing.assert_allclose(with_fan.potential, [0.5, 0.24, 0.40, 0, 0], atol=1e-15)
    # Without it they receive the full S * w * a: u1 = 0.48, u2 = 0.80.
    without = one_step(propagation_matrix(SRC, DST, W, N, use_fan_effect=False), a0)
    np.testing.assert_allclose(without.potential, [0.5, 0.48, 0.80, 0, 0], atol=1e-15)


@pytest.mark.parametrize(("decay", "u0_first", "u0_second"), [
    # delta = 0.5: u0 = 0.5 * 1 = 0.5, a0' = sigma(0.5) = 0.5 (u at theta), then u0 = 0.5 * 0.5.
    (0.5, 0.5, 0.25),
    # delta = 0:   u0 = 1.0, a0' = sigma(1.0) = expit(5 * 0.5), then u0 = 1.0 * expit(2.5).
    (0.0, 1.0, expit(2.5)),
])
def test_decay_term_keeps_one_minus_delta_of_the_activation(decay, u0_first, u0_second):
    # Node 0 has no in-edges, so its potential is only the decay term (1 - delta) * a.
    P = propagation_matrix(SRC, DST, W, N)
    a0 = np.array([1.0, 0, 0, 0, 0])
    assert one_step(P, a0, decay=decay).potential[0] == pytest.approx(u0_first, abs=1e-15)
    second = spread_activation(a0, P, iterations=2, spreading_factor=0.8, decay=decay,
                               inhibition_beta=0.0, inhibition_top_m=0, gamma=5.0, theta=0.5,
                               use_inhibition=False)
    assert second.potential[0] == pytest.approx(u0_second, abs=1e-15)


# --------------------------------------------------------------------------------------------
# Eq. 3: lateral inhibition
# --------------------------------------------------------------------------------------------
def test_inhibition_by_hand():
    u = np.array([0.9, 0.7, 0.5, 0.3, 0.1, 0.0])
    # beta = 0.2, M = 3: T_M = {0.9, 0.7, 0.5}
    #   node 0: nothing above it in T_M                      -> 0.9
    #   node 1: (0.9-0.7)                 = 0.2 -> 0.7 - 0.2*0.2 = 0.66
    #   node 2: (0.9-0.5)+(0.7-0.5)       = 0.6 -> 0.5 - 0.2*0.6 = 0.38
    #   node 3: 0.6+0.4+0.2               = 1.2 -> 0.3 - 0.2*1.2 = 0.06
    #   node 4: 0.8+0.6+0.4               = 1.8 -> 0.1 - 0.36 < 0 -> 0
    #   node 5: already 0                                     -> 0
    got = lateral_inhibition(u, beta=0.2, top_m=3)
    np.testing.assert_allclose(got, [0.9, 0.66, 0.38, 0.06, 0.0, 0.0], atol=1e-15)


def test_only_the_top_m_inhibit():
    u = np.array([0.9, 0.7, 0.5, 0.3, 0.25])
    # M = 3: node 4 is inhibited by 0.9, 0.7, 0.5 only -- node 3 (0.3) is outside T_M:
    #   0.25 - 0.1 * (0.65 + 0.45 + 0.25) = 0.25 - 0.135 = 0.115
    assert lateral_inhibition(u, beta=0.1, top_m=3)[4] == pytest.approx(0.115, abs=1e-15)
    # M = 4 adds node 3's (0.3 - 0.25) = 0.05: 0.25 - 0.1 * 1.4 = 0.11
    assert lateral_inhibition(u, beta=0.1, top_m=4)[4] == pytest.approx(0.11, abs=1e-15)


def test_large_beta_silences_everything_but_the_top():
    u = np.array([0.2, 0.9, 0.85, 0.1])
    # The highest node is never inhibited; every other node has the top above it:
    #   0.85 - 100 * 0.05 < 0, etc.
    np.testing.assert_array_equal(lateral_inhibition(u, beta=100.0, top_m=2), [0, 0.9, 0, 0])


def test_inhibition_ties_do_not_inhibit_each_other():
    # Two nodes tied at 0.5, M = 1: whichever is in T_M, neither is strictly above the other.
    #   node 2: 0.2 - 1.0 * (0.5 - 0.2) < 0 -> 0
    got = lateral_inhibition(np.array([0.5, 0.5, 0.2]), beta=1.0, top_m=1)
    np.testing.assert_array_equal(got, [0.5, 0.5, 0.0])


@pytest.mark.parametrize(("beta", "top_m"), [(0.0, 7), (0.5, 0)])
def test_inhibition_off_only_clips(beta, top_m):
    u = np.array([0.4, -0.2, 0.0, 1.3])
    np.testing.assert_array_equal(lateral_inhibition(u, beta=beta, top_m=top_m),
                                  [0.4, 0.0, 0.0, 1.3])


def test_inhibition_with_m_larger_than_n_and_empty_input():
    u = np.array([1.0, 0.5])
    np.testing.assert_allclose(lateral_inhibition(u, beta=0.5, top_m=10), [1.0, 0.25])
    assert lateral_inhibition(np.array([]), beta=0.5, top_m=3).shape == (0,)


def test_inhibition_matches_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 60))
        u = np.round(rng.random(n) * 2 - 0.3, 1)  # rounding creates many ties
        beta, m = float(rng.random()), int(rng.integers(0, n + 3))
        top = sorted(u.tolist(), reverse=True)[:m]
        expected = [max(0.0, ui - beta * sum(uk - ui for uk in top if uk > ui)) for ui in u]
        np.testing.assert_allclose(lateral_inhibition(u, beta=beta, top_m=m), expected,
                                   rtol=0, atol=1e-12)


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(beta=-0.1, top_m=3), "beta"),
    (dict(beta=float("nan"), top_m=3), "beta"),
    (dict(beta=0.1, top_m=-1), "top_m"),
    (dict(beta=0.1, top_m=2.5), "top_m"),
])
def test_inhibition_rejects_bad_parameters(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        lateral_inhibition(np.array([0.1, 0.2]), **kwargs)


# --------------------------------------------------------------------------------------------
# Eq. 4: sigmoid firing
# --------------------------------------------------------------------------------------------
def test_sigmoid_at_theta_is_one_half():
    assert sigmoid_firing(np.array([0.5]), gamma=5.0, theta=0.5)[0] == 0.5
    assert sigmoid_firing(np.array([2.0]), gamma=3.0, theta=2.0, silent_zero=False)[0] == 0.5


def test_sigmoid_at_zero_silent_or_paper_literal():
    u = np.array([0.0, 1.0])
    # silent_zero: a node with no potential stays at 0; u = 1 fires expit(5 * 0.5).
    np.testing.assert_allclose(sigmoid_firing(u, gamma=5.0, theta=0.5),
                               [0.0, expit(2.5)], atol=1e-15)
    # paper-literal: sigma(0) = 1 / (1 + exp(5 * 0.5)) = 0.0758582...
    literal = sigmoid_firing(u, gamma=5.0, theta=0.5, silent_zero=False)
    np.testing.assert_allclose(literal, [1.0 / (1.0 + math.exp(2.5)), expit(2.5)], atol=1e-15)
    assert literal[0] == pytest.approx(0.0758582, abs=1e-7)


def test_sigmoid_is_stable_for_large_potentials():
    u = np.array([-1e6, 1e6, 1e300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(
            sigmoid_firing(u, gamma=5.0, theta=0.5, silent_zero=False), [0.0, 1.0, 1.0])


# --------------------------------------------------------------------------------------------
# The full cycle
# --------------------------------------------------------------------------------------------
def test_two_iterations_by_hand_with_parents():
    P = propagation_matrix(SRC, DST, W, N)
    a0 = np.array([1.0, 0, 0, 0, 0])
    kw = dict(spreading_factor=0.8, decay=0.5, inhibition_beta=0.5, inhibition_top_m=2,
              gamma=5.0, theta=0.5)
    # Iteration 1.
    #   Eq. 2: u = 0.5 * a0 + 0.8 * P @ a0 = [0.5, 0.24, 0.40, 0, 0]
    #   Eq. 3 (beta 0.5, M 2, T_M = {0.5, 0.4}):
    #     node 0: 0.5
    #     node 1: 0.24 - 0.5 * ((0.5 - 0.24) + (0.4 - 0.24)) = 0.24 - 0.21 = 0.03
    #     node 2: 0.40 - 0.5 * (0.5 - 0.4)                   = 0.35
    #     nodes 3, 4: 0 - ... -> 0
    #   Eq. 4: a1 = [sigma(0.5), sigma(0.03), sigma(0.35), 0, 0]
    u_hat1 = np.array([0.5, 0.03, 0.35, 0.0, 0.0])
    a1 = np.array([0.5, expit(5 * (0.03 - 0.5)), expit(5 * (0.35 - 0.5)), 0.0, 0.0])
    first = spread_activation(a0, P, iterations=1, track_parents=True, **kw)
    np.testing.assert_allclose(first.potential, u_hat1, atol=1e-15)
    np.testing.assert_allclose(first.activation, a1, atol=1e-15)
    # Nodes 1 and 2 were reached from anchor 0.
    np.testing.assert_array_equal(first.parent, [-1, 0, 0, -1, -1])

    # Iteration 2.
    #   Eq. 2: u0 = 0.5 * 0.5                       = 0.25
    #          u1 = 0.5 * a1[1] + 0.8 * 0.3 * 0.5  = 0.0435 + 0.12  = 0.1635
    #          u2 = 0.5 * a1[2] + 0.8 * 0.5 * 0.5  = 0.1604 + 0.2   = 0.3604
    #          u3 = 0.8 * (0.5 * a1[1] + 0.4 * a1[2]) = 0.8 * (0.0435 + 0.1283) = 0.1375
    #          u4 = 0
    u2 = np.array([0.25, 0.5 * a1[1] + 0.12, 0.5 * a1[2] + 0.2,
                   0.8 * (0.5 * a1[1] + 0.4 * a1[2]), 0.0])
    #   Eq. 3 (T_M = {u2, u0} = {0.3604, 0.25}):
    #     node 2: 0.3604 (top);  node 0: 0.25 - 0.5 * (0.3604 - 0.25)
    #     node 1: 0.1635 - 0.5 * ((0.3604 - 0.1635) + (0.25 - 0.1635))
    #           = 0.1635 - 0.5 * (0.1969 + 0.0865) = 0.1635 - 0.1417 = 0.0218
    #     node 3: 0.1375 - 0.5 * ((0.3604 - 0.1375) + (0.25 - 0.1375)) < 0 -> 0
    top = [u2[2], u2[0]]
    u_hat2 = np.array([max(0.0, x - 0.5 * sum(t - x for t in top if t > x)) for x in u2])
    assert u_hat2[3] == 0.0 and u_hat2[1] == pytest.approx(0.0218, abs=1e-4)
    second = spread_activation(a0, P, iterations=2, track_parents=True, **kw)
    np.testing.assert_allclose(second.potential, u_hat2, atol=1e-15)
    np.testing.assert_allclose(second.activation,
                               [expit(5 * (x - 0.5)) if x > 0 else 0.0 for x in u_hat2],
                               atol=1e-15)

    # Node 3 was inhibited away above; with inhibition off it is reached on iteration 2.
    # Its inflows from a1 = [sigma(0.5), sigma(0.24), sigma(0.40), 0, 0] are
    #   P[3,1] * a1[1] = 0.5 * expit(5 * (0.24 - 0.5)) = 0.5 * 0.214 = 0.107
    #   P[3,2] * a1[2] = 0.4 * expit(5 * (0.40 - 0.5)) = 0.4 * 0.378 = 0.151
    # so its parent is node 2; node 4 (two hops further) is not reached yet.
    free = spread_activation(a0, P, iterations=2, track_parents=True, use_inhibition=False,
                             **kw)
    assert free.potential[3] > 0 and free.potential[4] == 0
    np.testing.assert_array_equal(free.parent, [-1, 0, 0, 2, -1])


def test_parents_form_a_path_back_to_the_anchor():
    P = propagation_matrix(SRC, DST, W, N)
    res = spread_activation(np.array([1.0, 0, 0, 0, 0]), P, iterations=3, track_parents=True,
                            **{**PAPER, "inhibition_beta": 0.0})
    path, node = [], 4
    while node != -1:
        path.append(node)
        node = int(res.parent[node])
    assert path[::-1] == [0, 2, 3, 4]


def test_zero_iterations_returns_a0_unchanged():
    P = propagation_matrix(SRC, DST, W, N)
    a0 = np.array([0.7, 0, 0.2, 0, 0])
    res = spread_activation(a0, P, iterations=0, **PAPER)
    np.testing.assert_array_equal(res.activation, a0)
    np.testing.assert_array_equal(res.potential, a0)
    np.testing.assert_array_equal(res.parent, [-1] * N)
    res.activation[0] = 99.0
    assert a0[0] == 0.7  # the result never aliases the input


def test_silent_zero_false_floods_the_graph():
    # An isolated node 5 next to the 5-node graph.
    P = propagation_matrix(SRC, DST, W, 6)
    a0 = np.array([1.0, 0, 0, 0, 0, 0])
    silent = spread_activation(a0, P, iterations=2, track_parents=True, **PAPER)
    assert silent.activation[5] == 0.0 and silent.activation[4] == 0.0
    literal = spread_activation(a0, P, iterations=2, track_parents=True, silent_zero=False,
                                **PAPER)
    assert (literal.activation > 0.07).all()
    # Node 5 is "reached" by its own background firing, with no inflow: no parent.
    assert literal.parent[5] == -1


def test_dense_matrix_is_accepted():
    P = propagation_matrix(SRC, DST, W, N)
    a0 = np.array([1.0, 0, 0, 0, 0])
    sparse = spread_activation(a0, P, iterations=3, track_parents=True, **PAPER)
    dense = spread_activation(a0, P.toarray(), iterations=3, track_parents=True, **PAPER)
    np.testing.assert_allclose(dense.activation, sparse.activation, atol=1e-15)
    np.testing.assert_array_equal(dense.parent, sparse.parent)


def test_spread_result_is_frozen():
    res = spread_activation(np.zeros(2), sp.csr_array((2, 2)), iterations=1, **PAPER)
    assert isinstance(res, SpreadResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.activation = np.ones(2)  # type: ignore[misc]


@pytest.mark.parametrize(("a0", "P", "iterations", "match"), [
    (np.zeros((2, 2)), sp.csr_array((2, 2)), 1, "1-D"),
    (np.array([0.1, np.nan]), sp.csr_array((2, 2)), 1, "finite"),
    (np.zeros(3), sp.csr_array((2, 2)), 1, r"shape \(3, 3\)"),
    (np.zeros(2), sp.csr_array((2, 2)), -1, "iterations"),
])
def test_spread_rejects_bad_input(a0, P, iterations, match):
    for fn in (spread_activation, spread_activation_reference):
        with pytest.raises(InvalidInputError, match=match):
            fn(a0, P, iterations=iterations, **PAPER)


# --------------------------------------------------------------------------------------------
# Fast kernel vs the slow reference
# --------------------------------------------------------------------------------------------
def random_case(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 301))
    m = int(rng.integers(0, 6 * n))
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keys = np.unique(src * n + dst)  # unique directed edges (self-loops allowed)
    src, dst = keys // n, keys % n
    # Every fourth graph uses coarse weights and equal anchor energies to create ties.
    tied = seed % 4 == 3
    w = rng.choice([0.5, 1.0], size=keys.size) if tied else rng.random(keys.size)
    P = propagation_matrix(src, dst, w, n, use_fan_effect=bool(rng.random() < 0.75))
    a0 = np.zeros(n)
    anchors = rng.choice(n, size=int(rng.integers(1, min(n, 12) + 1)), replace=False)
    a0[anchors] = 1.0 if tied else rng.uniform(0.1, 1.0, anchors.size)
    params = dict(
        iterations=int(rng.integers(1, 5)),
        spreading_factor=float(rng.uniform(0.3, 1.0)),
        decay=float(rng.choice([0.0, 0.5, rng.random()])),
        inhibition_beta=float(rng.choice([0.0, 0.15, rng.random()])),
        inhibition_top_m=int(rng.integers(0, 15)),
        gamma=float(rng.uniform(1.0, 8.0)),
        theta=float(rng.uniform(0.0, 1.0)),
        use_inhibition=bool(rng.random() < 0.8),
        silent_zero=bool(rng.random() < 0.8),
        track_parents=True,
    )
    return a0, P, params


@pytest.mark.parametrize("seed", range(24))
def test_fast_matches_reference_on_random_graphs(seed):
    a0, P, params = random_case(seed)
    fast = spread_activation(a0, P, **params)
    ref = spread_activation_reference(a0, P, **params)
    np.testing.assert_allclose(fast.activation, ref.activation, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast.potential, ref.potential, rtol=0, atol=1e-9)

    # Parents: replay the reference one iteration at a time to find, for each node, the
    # iteration it was reached and the inflows P[i, j] * a_j^(t-1) that decided its parent.
    # Where the best inflow beats the runner-up by more than rounding, the parents must be
    # equal; on a (near-)tie the fast kernel may pick any of the tied best neighbours.
    dense = P.toarray()
    reached = a0 > 0
    prev = a0
    unique_checked = 0
    for t in range(1, params["iterations"] + 1):
        step = spread_activation_reference(a0, P, **{**params, "iterations": t})
        for i in np.flatnonzero((step.potential > 0) & ~reached):
            inflow = dense[i] * prev
            best = inflow.max(initial=0.0)
            if best <= 1e-12:
                assert fast.parent[i] == ref.parent[i] == -1
                continue
            near_best = np.flatnonzero(inflow >= best - 1e-9)
            if near_best.size == 1:
                assert fast.parent[i] == ref.parent[i] == near_best[0]
                unique_checked += 1
            else:
                assert fast.parent[i] in near_best and ref.parent[i] in near_best
        reached |= step.potential > 0
        prev = step.activation
    never = ~reached
    assert (fast.parent[never] == -1).all() and (ref.parent[never] == -1).all()
    if seed % 4 != 3:  # continuous weights: ties are measure-zero, so most nodes are checked
        assert unique_checked == np.count_nonzero(fast.parent >= 0)


def test_parent_tie_breaks_to_lowest_index():
    # Nodes 0 and 1 both push 0.8 * 1.0 * 1.0 into node 2: the lower index wins.
    P = propagation_matrix(np.array([1, 0]), np.array([2, 2]), np.array([1.0, 1.0]), 3)
    a0 = np.array([1.0, 1.0, 0.0])
    for fn in (spread_activation, spread_activation_reference):
        assert fn(a0, P, iterations=1, track_parents=True, **PAPER).parent[2] == 0


def test_large_sparse_graph_runs():
    rng = np.random.default_rng(0)
    n, m = 50_000, 400_000
    keys = np.unique(rng.integers(0, n, m) * n + rng.integers(0, n, m))
    P = propagation_matrix(keys // n, keys % n, rng.random(keys.size), n)
    a0 = np.zeros(n)
    a0[rng.choice(n, 20, replace=False)] = 1.0
    res = spread_activation(a0, P, iterations=3, track_parents=True, **PAPER)
    assert res.activation.shape == (n,) and np.isfinite(res.activation).all()
    assert (res.activation[a0 > 0] > 0).all()
    # Without inhibition the energy visibly spreads beyond the 20 anchors.
    free = spread_activation(a0, P, iterations=3, track_parents=True, use_inhibition=False,
                             **PAPER)
    reached = free.potential > 0
    assert reached.sum() > 20 and (free.parent[reached & (a0 == 0)] >= 0).all()


def _spread_whole_graph(a0, P, *, iterations, spreading_factor, decay, inhibition_beta,
                        inhibition_top_m, gamma, theta, use_inhibition=True):
    """The cycle computed over every node (no support shortcut): what the fast path of
    ``spread_activation`` must reproduce bit for bit."""
    from synapse_integrations.core.kernels.dynamics import strongest_inflow

    P = sp.csr_array(P)
    a = np.array(a0, dtype=np.float64)
    parent = np.full(a.size, -1, dtype=np.int64)
    reached = a > 0
    potential = a.copy()
    for _ in range(iterations):
        u = (1.0 - decay) * a + spreading_factor * (P @ a)
        potential = (lateral_inhibition(u, beta=inhibition_beta, top_m=inhibition_top_m)
                     if use_inhibition else np.maximum(u, 0.0))
        fresh = np.flatnonzero((potential > 0) & ~reached)
        if fresh.size:
            parent[fresh] = strongest_inflow(P, a, fresh)
        reached |= potential > 0
        a = sigmoid_firing(potential, gamma=gamma, theta=theta)
    return a, potential, parent


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("use_inhibition", [True, False])
def test_support_shortcut_is_bit_identical_to_the_whole_graph_cycle(seed, use_inhibition):
    # The fast path works only on the nodes energy reached; with few anchors in a large
    # sparse graph (the retrieval case) it must give exactly the same arrays.
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(50, 3000))
    m = int(n * rng.integers(1, 8))
    keys = np.unique(rng.integers(0, n, m) * n + rng.integers(0, n, m))
    keys = keys[keys // n != keys % n]
    weights = rng.choice([0.5, 0.8, 1.0], keys.size) if seed % 3 == 0 else rng.random(keys.size)
    P = propagation_matrix(keys // n, keys % n, weights, n)
    a0 = np.zeros(n)
    anchors = rng.choice(n, int(rng.integers(1, 25)), replace=False)
    a0[anchors] = rng.random(anchors.size) * (1.0 if seed % 2 else 3.0)
    params = dict(PAPER, iterations=int(rng.integers(1, 5)),
                  inhibition_top_m=int(rng.choice([0, 1, 7, 40])))
    fast = spread_activation(a0, P, use_inhibition=use_inhibition, track_parents=True, **params)
    a, potential, parent = _spread_whole_graph(a0, P, use_inhibition=use_inhibition, **params)
    np.testing.assert_array_equal(fast.activation, a)
    np.testing.assert_array_equal(fast.potential, potential)
    np.testing.assert_array_equal(fast.parent, parent)


@pytest.mark.parametrize("seed", range(16))
def test_the_operator_by_source_equals_the_matrix_and_spreads_to_the_bit(seed):
    """``propagation_by_source`` (the view's operator: stored by column, built from edges
    in (src, dst) order without sorting) holds the same entries as ``propagation_matrix``,
    and spreading with it, which reads only the active nodes' columns while few are
    active, gives the same activations, potentials and parents to the bit: few anchors,
    many (the whole product), negative energy (the whole product) and every fan setting."""
    rng = np.random.default_rng(2000 + seed)
    n = int(rng.integers(2, 2500))
    m = int(n * rng.integers(1, 9))
    keys = np.unique(rng.integers(0, n, m) * n + rng.integers(0, n, m))
    keys = keys[keys // n != keys % n]  # ascending: (src, dst) order, each edge once
    src, dst = keys // n, keys % n
    weights = rng.choice([0.5, 1.0], keys.size) if seed % 3 == 0 else rng.random(keys.size)
    fan = dict(use_fan_effect=bool(seed % 5), fan_exponent=float(rng.choice([1.0, 0.5, 0.0])),
               fan_in_exponent=float(rng.choice([0.0, 0.3])))
    by_row = propagation_matrix(src, dst, weights, n, **fan)
    by_source = propagation_by_source(src, dst, weights, n, **fan)
    assert by_source.format == "csc"
    np.testing.assert_array_equal(by_source.toarray(), by_row.toarray())
    a0 = np.zeros(n)
    anchors = rng.choice(n, min(n, int(rng.choice([1, 5, 20, n // 2 + 1]))), replace=False)
    a0[anchors] = rng.random(anchors.size) * 2.0
    if seed % 4 == 1:
        a0[anchors[:1]] = -0.5  # negative energy somewhere: every column is read
    params = dict(PAPER, iterations=int(rng.integers(1, 5)),
                  inhibition_top_m=int(rng.choice([0, 7, 40])))
    for silent_zero in (True, False):
        a = spread_activation(a0, by_source, silent_zero=silent_zero, track_parents=True,
                              **params)
        b = spread_activation(a0, by_row, silent_zero=silent_zero, track_parents=True, **params)
        np.testing.assert_array_equal(a.activation, b.activation)
        np.testing.assert_array_equal(a.potential, b.potential)
        np.testing.assert_array_equal(a.parent, b.parent)


def test_the_operator_by_source_wants_sorted_edges_and_ties_break_low():
    with pytest.raises(InvalidInputError, match=r"\(src, dst\) order"):
        propagation_by_source(np.array([0, 0]), np.array([1, 1]), np.ones(2), 2)
    with pytest.raises(InvalidInputError, match="outside"):
        propagation_by_source(np.array([0]), np.array([3]), np.ones(1), 2)
    # nodes 0 and 1 both push 0.8 x 1.0 x 1.0 into node 2: the lower index is the parent
    P = propagation_by_source(np.array([0, 1]), np.array([2, 2]), np.ones(2), 3)
    res = spread_activation(np.array([1.0, 1.0, 0.0]), P, iterations=1, track_parents=True,
                            **PAPER)
    assert res.parent.tolist() == [-1, -1, 0]
    empty = propagation_by_source(np.array([], dtype=np.int64), np.array([], dtype=np.int64),
                                  np.array([]), 3)
    assert empty.nnz == 0 and spread_activation(np.ones(3), empty, iterations=2,
                                                **PAPER).activation.shape == (3,)

"""SynapticRAG (seed paper 002): Eq. 4's time constant, the DTW temporal score, the exact
LIF step against hand-computed values and Euler integration, the propagation against a
slow reference, spike trains from a view, and the model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from synapse_integrations.config import SynapseConfig
from synapse_integrations.core.graph.graph import Compiled
from synapse_integrations.core.models import get_model
from synapse_integrations.core.models.base import Query
from synapse_integrations.core.models.stimulus import (
    propagate_stimulus,
    propagate_stimulus_reference,
)
from synapse_integrations.core.models.synaptic import (
    SynapticModel,
    binding_score,
    lif_advance,
    lif_free,
    lif_peak,
    lif_run,
    lif_run_reference,
    spike_trains,
    tau_after,
    tau_increment,
    temporal_score,
    temporal_scores_one_spike,
)
from synapse_integrations.errors import ConfigError, InvalidInputError

DAY = 86400.0


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# --------------------------------------------------------------------------------------------
# Eq. 4
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [0.0, 0.1, 1.0, 3.0, 40.0])
def test_tau_increment_is_the_papers_formula(dt):
    assert tau_increment(dt) == pytest.approx((1 - math.exp(-dt)) / (1 + math.exp(-dt)), abs=1e-15)


def test_tau_after_a_train():
    # stimuli at 0, 1, 1, 4: increments for gaps 1, 0, 3 (the first stimulus adds nothing)
    def g(dt):
        return (1 - math.exp(-dt)) / (1 + math.exp(-dt))
    expected = 2.0 + g(1.0) + g(0.0) + g(3.0)
    assert tau_after([0.0, 1.0, 1.0, 4.0], tau_init=2.0) == pytest.approx(expected)
    assert tau_after([5.0], tau_init=2.0) == 2.0 and tau_after([], tau_init=2.0) == 2.0


# --------------------------------------------------------------------------------------------
# Eqs. 1-3
# --------------------------------------------------------------------------------------------
def test_temporal_score_hand_computed_dtw():
    # series (0, 3) and (1, 2, 4): cumulative squared differences
    #   row 0: 1, 1+4=5, 5+16=21;   row 1: 1+4=5, min(1,5,5)+1=2, min(5,2,21)+1=3
    # dtaidistance stores their square roots; the optimal path is (0,0) (1,1) (1,2)
    path_d = [1.0, math.sqrt(2), math.sqrt(3)]
    all_d = [1.0, math.sqrt(5), math.sqrt(21), math.sqrt(5), math.sqrt(2), math.sqrt(3)]
    tau = 2.0
    assert temporal_score([0, 3], [1, 2, 4], tau=tau) == pytest.approx(
        sigmoid(sum(math.exp(-d / tau) for d in path_d)))
    assert temporal_score([0, 3], [1, 2, 4], tau=tau, cells="matrix") == pytest.approx(
        sigmoid(sum(math.exp(-d / tau) for d in all_d)))


def test_temporal_score_prefers_close_events_and_is_one_half_without_evidence():
    near = temporal_score([10.0], [10.5], tau=1.0)
    far = temporal_score([10.0], [40.0], tau=1.0)
    assert near > far and far == pytest.approx(0.5, abs=1e-9)  # exp(-30) ~ 0
    assert near == pytest.approx(sigmoid(math.exp(-0.5)))
    assert temporal_score([], [1.0], tau=1.0) == 0.5
    assert binding_score([0.0], [0.0], 0.8, tau=1.0, b_scale=2.0) == pytest.approx(
        2.0 * sigmoid(1.0) * 0.8)
    with pytest.raises(InvalidInputError, match="tau"):
        temporal_score([0.0], [1.0], tau=0.0)
    with pytest.raises(InvalidInputError, match="cells"):
        temporal_score([0.0], [1.0], tau=1.0, cells="diagonal")


@pytest.mark.parametrize("cells", ["path", "matrix"])
def test_one_spike_scores_match_dtaidistance(cells):
    rng = np.random.default_rng(4)
    lengths = rng.integers(1, 6, 40)
    lengths[:3] = [1, 1, 0]
    single = rng.uniform(0, 10, 40)
    flat = rng.uniform(0, 10, int(lengths.sum()))
    tau = rng.uniform(0.5, 3, 40)
    fast = temporal_scores_one_spike(single, flat, lengths, tau=tau)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    for r in range(40):
        other = flat[starts[r]:starts[r] + lengths[r]]
        # either orientation: a single spike against a train, or a train against it
        expected = temporal_score([single[r]], other, tau=tau[r], cells=cells)
        assert fast[r] == pytest.approx(expected, abs=1e-12)
        assert fast[r] == pytest.approx(temporal_score(other, [single[r]], tau=tau[r],
                                                       cells=cells), abs=1e-12)


# --------------------------------------------------------------------------------------------
# Eqs. 5-6
# --------------------------------------------------------------------------------------------
def test_lif_free_step_hand_computed():
    # from V = 0.2, I = 1.0 with tau = 2 for dt = 1: I = e^-0.5, V = (0.2 + 0.5) e^-0.5
    v, i = lif_free(np.array([0.2]), np.array([1.0]), tau=np.array([2.0]), dt=np.array([1.0]))
    assert i[0] == pytest.approx(math.exp(-0.5)) and v[0] == pytest.approx(0.7 * math.exp(-0.5))


def test_lif_free_solves_the_odes():
    # tau dI/dt = -I, tau dV/dt = -V + I: check by a central difference at dt = 0.7
    tau, v0, i0, h = 1.3, 0.1, 0.9, 1e-6
    def at(t):
        v, i = lif_free(np.array([v0]), np.array([i0]), tau=np.array([tau]), dt=np.array([t]))
        return v[0], i[0]
    (v1, i1), (v2, i2), (v, i) = at(0.7 - h), at(0.7 + h), at(0.7)
    assert tau * (i2 - i1) / (2 * h) == pytest.approx(-i, rel=1e-6)
    assert tau * (v2 - v1) / (2 * h) == pytest.approx(-v + i, rel=1e-6)


def test_lif_peak_hand_computed():
    # V = (v + i s / tau) e^(-s/tau): from (0, 1), tau 2, the peak is e^-1 at s = 2
    peak = lif_peak(np.array([0.0, 0.0, 0.5, 0.3]), np.array([1.0, 1.0, 0.2, 0.6]),
                    tau=np.array([2.0, 2.0, 1.0, 1.0]),
                    horizon=np.array([np.inf, 1.0, np.inf, np.inf]))
    np.testing.assert_allclose(peak, [
        math.exp(-1),                 # free peak
        0.5 * math.exp(-0.5),         # cut at s = 1 while still rising
        0.5,                          # I < V: V only falls
        0.6 * math.exp(-(1 - 0.5)),   # peak i e^-(1 - v/i) at s = tau (1 - v/i)
    ])


def test_lif_advance_fires_at_the_crossing_and_resets():
    # from (0, 1), tau 1: V = s e^-s crosses 0.3 at s = -W0(-0.3) = 0.48940
    v, i, spikes = lif_advance(np.array([0.0]), np.array([1.0]), tau=np.array([1.0]),
                               dt=np.array([0.6]), v_th=0.3, v_rest=0.0, i_rest=0.5)
    s = 0.489402
    assert s * math.exp(-s) == pytest.approx(0.3, abs=1e-6)
    left = 0.6 - s  # after the reset to (V, I) = (0, 0.5), free evolution for the rest
    assert spikes[0] == 1
    assert i[0] == pytest.approx(0.5 * math.exp(-left), rel=1e-5)
    assert v[0] == pytest.approx(0.5 * left * math.exp(-left), rel=1e-4)
    none = lif_advance(np.array([0.0]), np.array([1.0]), tau=np.array([1.0]), dt=np.array([0.4]),
                       v_th=0.3)
    assert none[2][0] == 0  # V(0.4) = 0.268 < 0.3: no spike yet


@pytest.mark.parametrize(("times", "values", "v_th"), [
    ([0.0, 0.5, 0.7, 2.0, 2.1], [1.0, 0.5, 2.0, 0.3, 1.5], 0.35),
    ([0.0, 1.0, 3.0], [0.4, 0.4, 0.4], 0.1),
    ([0.0, 0.2, 0.2, 0.9], [0.3, 0.3, 0.3, 0.3], 10.0),
])
def test_lif_run_matches_euler_integration(times, values, v_th):
    exact = lif_run(times, values, tau_init=0.8, v_th=v_th, i_rest=0.1)
    euler = lif_run_reference(times, values, tau_init=0.8, v_th=v_th, i_rest=0.1, step=1e-5)
    assert exact.spikes == euler.spikes
    assert exact.tau == pytest.approx(euler.tau)
    assert exact.v == pytest.approx(euler.v, abs=2e-4)
    assert exact.i == pytest.approx(euler.i, abs=2e-4)


def test_lif_run_errors():
    with pytest.raises(InvalidInputError, match="sorted"):
        lif_run([1.0, 0.0], [1.0, 1.0], tau_init=1.0, v_th=1.0)
    with pytest.raises(InvalidInputError, match="same length"):
        lif_run([1.0], [1.0, 1.0], tau_init=1.0, v_th=1.0)


# --------------------------------------------------------------------------------------------
# the propagation
# --------------------------------------------------------------------------------------------
def half_cos(parents, children, cos):
    return 0.5 * np.asarray(cos)  # T = 0.5 everywhere: no temporal evidence


def test_propagation_hand_computed():
    # query -> 0 (cos 0.9), 1 (cos 0.55); 1 -> 2 (0.8), 3 (0.4); 2 -> 1 (0.8), 4 (0.7)
    nbr = np.array([[-1, -1], [2, 3], [1, 4], [-1, -1], [-1, -1]])
    cos = np.array([[0, 0], [0.8, 0.4], [0.8, 0.7], [0, 0], [0, 0]], dtype=np.float32)
    zeros = np.zeros(5)
    out = propagate_stimulus(np.array([0, 1]), np.array([0.9, 0.55]), nbr, cos, half_cos,
                             v=zeros, i=zeros, tau=np.ones(5), idle=zeros, cos_th=0.5,
                             stim_th=0.1, v_th=0.12)
    # gen 1: node 0 gets 0.45 (peak 0.45/e = 0.166: fires), node 1 gets 0.275 (0.101: no)
    # gen 2: node 1 passes 0.275 * 0.4 = 0.11 to node 2 (cos 0.4 to node 3 is below 0.5)
    # gen 3: node 2 passes 0.11 * 0.4 = 0.044 back to node 1 (total 0.319, peak 0.1174: no)
    #        and 0.11 * 0.35 = 0.0385 to node 4 (below stim_th: the chain ends)
    assert out.fired.tolist() == [True, False, False, False, False]
    np.testing.assert_allclose(out.stimulus, [0.45, 0.319, 0.11, 0, 0.0385], atol=1e-7)
    np.testing.assert_allclose(out.peak, np.array([0.45, 0.319, 0.11, 0, 0.0385]) / math.e,
                               atol=1e-7)
    assert out.parent.tolist() == [-1, -1, 1, -1, 2]
    assert out.generation.tolist() == [1, 1, 2, 0, 3]


def test_propagation_first_stimulus_updates_tau_and_drains_history():
    # one node, last stimulated 2 units before the query, with V = 0, I = 1 (tau 1). Before
    # the query's stimulus it evolves freely: V = s e^-s peaks at e^-1 = 0.37, so with
    # v_th = 0.3 it fires on the way (a past spike, not a recall) and is reset to rest;
    # then tau gains tanh(1) (Eq. 4, dt = 2) and the stimulus 1 raises I by 1 / tau
    def run(v_th):
        return propagate_stimulus(
            np.array([0]), np.array([1.0]), np.full((1, 1), -1), np.zeros((1, 1), np.float32),
            lambda p, c, s: np.ones(c.size), v=np.array([0.0]), i=np.array([1.0]),
            tau=np.array([1.0]), idle=np.array([2.0]), cos_th=0.5, stim_th=0.1, v_th=v_th)
    tau = 1.0 + math.tanh(1.0)
    fired_before = run(0.3)
    assert fired_before.peak[0] == pytest.approx((1 / tau) / math.e)  # from rest
    assert fired_before.fired.tolist() == [False]  # 0.21 < 0.3
    quiet = run(10.0)  # no firing on the way: V = 2 e^-2, I = e^-2 at the query
    v, i = 2 * math.exp(-2), math.exp(-2) + 1.0 / tau
    assert quiet.peak[0] == pytest.approx(i * math.exp(-(1 - v / i)))


@pytest.mark.parametrize("seed", range(5))
def test_propagation_matches_reference_on_random_instances(seed):
    rng = np.random.default_rng(seed)
    n, k = 40, 4
    nbr = np.array([rng.choice([j for j in range(n) if j != r], k, replace=False)
                    for r in range(n)])
    nbr[rng.random((n, k)) < 0.1] = -1
    cos = rng.uniform(0.3, 1.0, (n, k)).astype(np.float32)
    first, first_cos = rng.choice(n, 6, replace=False), rng.uniform(0.4, 1, 6)
    table = rng.uniform(0.5, 0.9, (n + 1, n))

    def binding(parents, children, c):
        return table[parents + 1, children] * np.asarray(c)

    kw = dict(v=rng.uniform(0, 0.1, n), i=rng.uniform(0, 0.2, n), tau=rng.uniform(0.5, 2, n),
              idle=np.where(rng.random(n) < 0.5, rng.uniform(0, 3, n), 0.0), cos_th=0.5,
              stim_th=0.05, v_th=0.2, i_rest=0.01, max_generations=6)
    fast = propagate_stimulus(first, first_cos, nbr, cos, binding, **kw)
    ref = propagate_stimulus_reference(first, first_cos, nbr, cos, binding, **kw)
    assert fast.fired.any() and (fast.generation >= 2).any()  # a non-trivial instance
    np.testing.assert_array_equal(fast.fired, ref.fired)
    np.testing.assert_array_equal(fast.parent, ref.parent)
    np.testing.assert_array_equal(fast.generation, ref.generation)
    np.testing.assert_allclose(fast.stimulus, ref.stimulus, atol=1e-12)
    np.testing.assert_allclose(fast.peak, ref.peak, atol=1e-12)


# --------------------------------------------------------------------------------------------
# spike trains and the model
# --------------------------------------------------------------------------------------------
def make_view(emb: np.ndarray, ts: list, *, concepts: int = 0, src=(), dst=(), spikes=None,
              ingest=None) -> Compiled:
    n = len(emb)
    attrs = {"ts": ts, "text": [f"t{k}" for k in range(n)]}
    if spikes is not None:
        attrs["spikes"] = spikes
    if ingest is not None:
        attrs["ingest_ts"] = ingest
    return Compiled.from_arrays([f"n{k}" for k in range(n)], emb, src=list(src), dst=list(dst),
                                weight=[0.8] * len(src),
                                is_episode=[True] * (n - concepts) + [False] * concepts,
                                attrs=attrs)


def test_spike_trains_from_a_view():
    emb = np.eye(5, dtype=np.float32)
    v = make_view(emb, [3 * DAY, 1 * DAY, None, None, None], concepts=2,
                  src=[0, 3, 4, 1], dst=[3, 1, 0, 0],  # concept 3 <- 0 and -> 1; 4 -> 0
                  ingest=[None, None, 5 * DAY, None, None],
                  spikes=[None, [[2 * DAY, 0.5]], None, None, [[9 * DAY, 0.25], ["bad"]]])
    trains = spike_trains(v)
    assert trains[0] == ((3 * DAY,), (1.0,))
    assert trains[1] == ((1 * DAY, 2 * DAY), (1.0, 0.5))  # own event, then a recorded stimulus
    assert trains[2] == ((5 * DAY,), (1.0,))  # no ts: ingestion time
    assert trains[3] == ((1 * DAY, 3 * DAY), (1.0, 1.0))  # its two episodes' times
    assert trains[4] == ((3 * DAY, 9 * DAY), (1.0, 0.25))


def two_twins(ts_near: float, ts_far: float) -> tuple[Compiled, Query]:
    """Two episodes equally similar to the query (cos 0.6), one near the query time."""
    a = math.acos(0.6)
    emb = np.array([[math.cos(a), math.sin(a)], [math.cos(a), -math.sin(a)], [0.0, 1.0]],
                   dtype=np.float32)
    v = make_view(emb, [ts_near, ts_far, 0.0])
    sim = v.embeddings.astype(np.float64) @ np.array([1.0, 0.0])
    return v, Query("q", np.array([1.0, 0.0]), sim, np.array([0, 1]))


def test_model_recalls_the_temporally_close_twin():
    v, q = two_twins(100 * DAY - 3600, 10 * DAY)
    cfg = SynapseConfig(model_params={"synaptic": {"query_time": 100 * DAY, "v_th": 0.09}})
    out = SynapticModel().activate(v, q, cfg)
    # same cosine, but the near event binds more strongly (T about 0.73 against 0.5)
    assert out.reached.tolist() == [0]
    assert out.score[0] >= 1.0 > out.score[1] > 0
    tau_b = 1.0  # both nodes' tau is tau_init (one stimulus each)
    near = 0.6 * temporal_score([100.0], [100 - 1 / 24], tau=tau_b)
    np.testing.assert_allclose(out.activation[:2], [near, 0.6 * 0.5], atol=1e-6)


def test_model_options_and_defaults():
    v, q = two_twins(100 * DAY - 3600, 10 * DAY)
    m = SynapticModel()
    # default query time: the latest event in the view (the near twin's)
    assert m.activate(v, q, SynapseConfig()).activation[0] > 0
    hybrid = m.activate(v, q, SynapseConfig(model_params={"synaptic": {"rank": "hybrid"}}))
    assert hybrid.score is None and hybrid.reached is None
    again = m.activate(v, q, SynapseConfig())
    np.testing.assert_array_equal(again.activation, m.activate(v, q, SynapseConfig()).activation)
    none = m.activate(v, q, SynapseConfig(model_params={"synaptic": {"cos_th": 0.9}}))
    assert not none.activation.any() and none.reached.size == 0
    with pytest.raises(ConfigError, match="time_unit"):
        m.activate(v, q, SynapseConfig(model_params={"synaptic": {"time_unit": "weeks"}}))
    with pytest.raises(ConfigError, match="v_th"):
        m.activate(v, q, SynapseConfig(model_params={"synaptic": {"v_th": 0}}))


def test_model_spreads_from_unfired_nodes_to_their_neighbours():
    # query -> node 0 (cos 0.55: weak, does not fire) -> node 1 (cos 0.9 with node 0,
    # 0.495 with the query, below cos_th: reachable only through node 0). Both happened
    # 10 days before the query: their own stimuli have faded.
    e0 = np.array([0.55, math.sqrt(1 - 0.55**2), 0.0])
    e1 = 0.9 * e0 + math.sqrt(1 - 0.81) * np.array([0.0, 0.0, 1.0])
    e2 = np.array([0.0, 0.0, -1.0])
    emb = np.array([e0, e1, e2], dtype=np.float32)
    v = make_view(emb, [40 * DAY, 40 * DAY, 0.0])
    q = np.array([1.0, 0.0, 0.0])
    sim = v.embeddings.astype(np.float64) @ q
    out = SynapticModel().activate(v, Query("q", q, sim, np.array([0])), SynapseConfig(
        model_params={"synaptic": {"v_th": 0.2, "stim_th": 0.05, "query_time": 50 * DAY}}))
    assert out.reached.size == 0  # nothing fired: node 0 got 0.5 * 0.55, node 1 less
    stim0 = 0.5 * 0.55  # T = 0.5: the node's event is 10 days from the query
    b01 = temporal_score([40.0], [40.0], tau=1.0) * 0.9  # same day: T = 0.73
    stim1 = stim0 * b01
    # node 1 did not fire either, so it passes its stimulus on: back to node 0
    np.testing.assert_allclose(out.activation[:2], [stim0 + stim1 * b01, stim1], atol=1e-5)
    assert out.parents.tolist()[:2] == [-1, 0]
    use_graph_off = SynapticModel().activate(v, Query("q", q, sim, np.array([0])), SynapseConfig(
        use_graph=False, model_params={"synaptic": {"v_th": 0.2, "stim_th": 0.05}}))
    assert use_graph_off.activation[1] == 0.0


def test_model_binds_concepts_with_several_spikes_through_dtw():
    # two concepts, each linked to two episodes: their trains have two spikes each, so
    # their binding goes through dtaidistance; the query reaches concept 2 only through 3
    a = math.acos(0.6)
    emb = np.array([[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0], [0, 1.0, 0],
                    [math.cos(a), math.sin(a), 0], [0.1, 0.9, math.sqrt(1 - 0.82)]],
                   dtype=np.float32)
    ts = [10 * DAY, 11 * DAY, 12 * DAY, 14 * DAY, None, None]
    v = make_view(emb, ts, concepts=2, src=[0, 1, 2, 3], dst=[4, 4, 5, 5])
    q = np.array([1.0, 0.0, 0.0])
    sim = v.embeddings.astype(np.float64) @ q
    cfg = SynapseConfig(model_params={"synaptic": {"query_time": 30 * DAY, "v_th": 5.0,
                                            "stim_th": 0.0, "cos_th": 0.55,
                                            "max_generations": 2}})
    out = SynapticModel().activate(v, Query("q", q, sim, np.array([0, 1])), cfg)
    tau4 = tau_after([10.0, 11.0], tau_init=1.0)
    tau5 = tau_after([12.0, 14.0], tau_init=1.0)
    b_q4 = temporal_score([30.0], [10.0, 11.0], tau=(1.0 + tau4) / 2) * float(sim[4])
    cos45 = float(v.embeddings[4] @ v.embeddings[5])
    b_45 = temporal_score([10.0, 11.0], [12.0, 14.0], tau=(tau4 + tau5) / 2) * cos45
    # generation 1: the query reaches 0, 1 and 4 (node 5's cosine 0.1 is below 0.55);
    # generation 2: 4 passes b_q4 * B(4, 5) to 5, its only way in
    assert sim[5] < 0.55 and out.parents[5] == 4
    assert out.activation[5] == pytest.approx(b_q4 * b_45, rel=1e-9)


def test_registered():
    assert isinstance(get_model("synaptic"), SynapticModel)

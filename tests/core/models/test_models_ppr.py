"""Personalised PageRank: hand-computed values, networkx, the slow reference, the model."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from synapse_integrations.config import SynapseConfig
from synapse_integrations.core.graph.graph import Compiled
from synapse_integrations.core.models import get_model
from synapse_integrations.core.models.base import Query
from synapse_integrations.core.models.ppr import (
    PPRModel,
    personalized_pagerank,
    personalized_pagerank_reference,
    teleport_distribution,
    transition_matrix,
)
from synapse_integrations.errors import ConfigError, InvalidInputError


def test_hand_computed_cycle():
    # 0 -> 1 -> 2 -> 0, teleport on 0, damping d: x0 = (1-d) + d x2, x1 = d x0, x2 = d x1
    # so x0 = (1-d) / (1-d^3); with d = 0.5: x = (4/7, 2/7, 1/7)
    T, dangling = transition_matrix(np.array([0, 1, 2]), np.array([1, 2, 0]), np.ones(3), 3)
    x = personalized_pagerank(T, dangling, np.array([1.0, 0, 0]), damping=0.5, tol=1e-12)
    np.testing.assert_allclose(x, [4 / 7, 2 / 7, 1 / 7], atol=1e-10)


def test_weights_split_the_rank():
    # 0 -> 1 (w 3), 0 -> 2 (w 1); 1 and 2 dangling: their rank returns to the teleport node 0
    T, dangling = transition_matrix(np.array([0, 0]), np.array([1, 2]), np.array([3.0, 1.0]), 3)
    assert dangling.tolist() == [False, True, True]
    x = personalized_pagerank(T, dangling, np.array([1.0, 0, 0]), damping=0.5, tol=1e-12)
    # x0 = 0.5 + 0.5 (x1 + x2) and x1 + x2 = 0.5 x0: x0 = 2/3, x1 = 0.75 * 1/3, x2 = 0.25 * 1/3
    np.testing.assert_allclose(x, [2 / 3, 0.25, 1 / 12], atol=1e-10)


def random_graph(seed: int, n: int = 25, m: int = 70):
    rng = np.random.default_rng(seed)
    pairs = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, (m, 2)) if a != b})
    src, dst = (np.array(x) for x in zip(*pairs))
    return src, dst, rng.uniform(0.1, 1.0, src.size), n


@pytest.mark.parametrize("damping", [0.5, 0.85])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_networkx_and_the_reference(damping, seed):
    src, dst, w, n = random_graph(seed)
    teleport = np.zeros(n)
    teleport[[1, 4, 7]] = [0.5, 0.3, 0.2]
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), w.tolist()))
    expected = nx.pagerank(G, alpha=damping, personalization=dict(enumerate(teleport)),
                           tol=1e-12, max_iter=10_000)
    T, dangling = transition_matrix(src, dst, w, n)
    x = personalized_pagerank(T, dangling, teleport, damping=damping, tol=1e-12, max_iter=10_000)
    np.testing.assert_allclose(x, [expected[i] for i in range(n)], atol=1e-9)
    ref = personalized_pagerank_reference(src, dst, w, n, teleport=teleport, damping=damping)
    np.testing.assert_allclose(x, ref, atol=1e-9)
    assert abs(x.sum() - 1.0) < 1e-9


def test_teleport_distribution():
    p = teleport_distribution(5, np.array([0, 2, 4]), np.array([0.5, 0.9, 0.25, 0.0, -0.3]))
    np.testing.assert_allclose(p, [2 / 3, 0, 1 / 3, 0, 0])  # negative cosine: no weight
    np.testing.assert_allclose(teleport_distribution(3, np.array([1, 2]), np.array([0, -1, -1.0])),
                               [0, 0.5, 0.5])  # no positive cosine: uniform over the anchors
    assert teleport_distribution(3, np.array([], dtype=int), np.zeros(3)).sum() == 0


def test_input_errors():
    T, dangling = transition_matrix(np.array([0]), np.array([1]), np.ones(1), 2)
    with pytest.raises(InvalidInputError, match="damping"):
        personalized_pagerank(T, dangling, np.array([1.0, 0]), damping=1.0)
    with pytest.raises(InvalidInputError, match="weight on at least one"):
        personalized_pagerank(T, dangling, np.zeros(2), damping=0.5)
    with pytest.raises(InvalidInputError, match="non-negative"):
        personalized_pagerank(T, dangling, np.array([1.0, -1.0]), damping=0.5)


def view() -> Compiled:
    # episodes 0, 1, 2 (0 -> 1 temporal), concept 3 linked both ways to 1 and 2
    src, dst = [0, 1, 3, 2, 3], [1, 3, 1, 3, 2]
    return Compiled.from_arrays(["e0", "e1", "e2", "c"], np.eye(4, dtype=np.float32), src=src,
                                dst=dst, weight=[1.0, 0.8, 0.8, 0.8, 0.8],
                                is_episode=[True, True, True, False])


def test_model_scores_are_ppr_from_the_anchors():
    v = view()
    sim = np.array([0.8, 0.1, 0.0, 0.2])
    q = Query("q", np.zeros(4), sim, np.array([0]))
    out = PPRModel().activate(v, q, SynapseConfig())
    T, dangling = transition_matrix(v.src, v.dst, v.weight, v.n)
    x = personalized_pagerank(T, dangling, np.array([1.0, 0, 0, 0]), damping=0.5)
    np.testing.assert_allclose(out.activation, x / x.max())
    np.testing.assert_array_equal(out.score, out.activation)
    assert out.activation[0] == 1.0 and (out.activation > 0).all()  # the walk reached every node


def test_model_options():
    v = view()
    q = Query("q", np.zeros(4), np.array([0.8, 0.4, 0.0, 0.2]), np.array([0, 1]))
    assert PPRModel().activate(v, q, SynapseConfig(model_params={"ppr": {"rank": "hybrid"}})).score is None
    off = PPRModel().activate(v, q, SynapseConfig(use_graph=False))
    np.testing.assert_allclose(off.activation, [1.0, 0.5, 0, 0])  # the teleport itself
    far = PPRModel().activate(v, q, SynapseConfig(model_params={"ppr": {"damping": 0.85}}))
    near = PPRModel().activate(v, q, SynapseConfig())
    assert far.activation[2] > near.activation[2]  # more damping: the walk goes further
    none = PPRModel().activate(v, Query("q", np.zeros(4), np.zeros(4), np.array([], dtype=int)),
                               SynapseConfig())
    assert not none.activation.any()
    with pytest.raises(ConfigError, match="damping"):
        PPRModel().activate(v, q, SynapseConfig(model_params={"ppr": {"damping": 1.0}}))


def test_registered():
    assert isinstance(get_model("ppr"), PPRModel)

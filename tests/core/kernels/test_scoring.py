"""Hybrid score kernels: PageRank vs networkx, Eq. 5 by hand, top-k, gate, cosine."""

from __future__ import annotations

import logging
import math

import networkx as nx
import numpy as np
import pytest

from synapse_integrations.core.kernels.scoring import (
    cosine_to_query, gate, hybrid_score, pagerank_scores, top_k,
)
from synapse_integrations.errors import InvalidInputError


# --------------------------------------------------------------------------------------------
# PageRank
# --------------------------------------------------------------------------------------------
def edges_of(G: nx.DiGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    triples = [(u, v, d.get("weight", 1.0)) for u, v, d in G.edges(data=True)]
    if not triples:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    src, dst, w = zip(*triples)
    return np.array(src), np.array(dst), np.array(w, dtype=float)


def networkx_normalised(G: nx.DiGraph, damping: float = 0.85) -> np.ndarray:
    pr = nx.pagerank(G, alpha=damping, weight="weight", tol=1e-13, max_iter=10_000)
    x = np.array([pr[i] for i in range(G.number_of_nodes())])
    return x / x.max()


def test_pagerank_by_hand_with_a_dangling_node():
    # 0 -> 1, node 1 dangling (spreads its rank uniformly). With d = 0.85, x0 + x1 = 1:
    #   x0 = 0.15/2 + 0.85 * x1/2             = 0.075 + 0.425 * x1
    #   x1 = 0.15/2 + 0.85 * (x0 + x1/2)
    # => 1.425 * x0 = 0.5, x0 = 0.350877, x1 = 0.649123; normalised: [x0/x1, 1] = [20/37, 1]
    got = pagerank_scores(np.array([0]), np.array([1]), np.array([1.0]), 2)
    np.testing.assert_allclose(got, [20 / 37, 1.0], atol=1e-9)


def weighted_random_graph(seed: int, n: int) -> nx.DiGraph:
    rng = np.random.default_rng(seed)
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    for _ in range(3 * n):
        u, v = (int(x) for x in rng.integers(0, n, 2))
        G.add_edge(u, v, weight=float(rng.random()))
    # a couple of guaranteed dangling nodes
    G.remove_edges_from(list(G.out_edges([0, n - 1])))
    return G


def graphs() -> list[tuple[str, nx.DiGraph]]:
    star = nx.DiGraph()
    star.add_weighted_edges_from([(i, 0, 1.0) for i in range(1, 6)])  # hub 0 is dangling
    weighted = nx.DiGraph()
    weighted.add_weighted_edges_from([(0, 1, 3.0), (0, 2, 1.0), (1, 0, 1.0), (2, 0, 1.0),
                                      (2, 3, 0.5)])  # node 3 dangling
    zero_out = nx.DiGraph()
    zero_out.add_weighted_edges_from([(0, 1, 1.0), (1, 2, 0.0), (2, 0, 2.0), (2, 2, 0.7)])
    chain = nx.DiGraph()
    chain.add_nodes_from(range(7))  # node 6 isolated
    chain.add_weighted_edges_from([(i, i + 1, 0.9) for i in range(5)])
    return [
        ("star", star),
        ("weighted", weighted),
        ("zero-weight out-edge and self-loop", zero_out),
        ("chain with isolated node", chain),
        ("random-30", weighted_random_graph(1, 30)),
        ("random-200", weighted_random_graph(2, 200)),
    ]


@pytest.mark.parametrize(("name", "G"), graphs(), ids=[name for name, _ in graphs()])
@pytest.mark.parametrize("damping", [0.85, 0.5])
def test_pagerank_matches_networkx_normalised(name, G, damping):
    expected = networkx_normalised(G, damping)
    got = pagerank_scores(*edges_of(G), G.number_of_nodes(), damping=damping, tol=1e-13)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)
    assert got.max() == 1.0
    # The default tolerance (networkx's criterion: L1 change < n * tol on the raw scores)
    # is loosened by the division by the max, but stays far below anything that matters.
    default = pagerank_scores(*edges_of(G), G.number_of_nodes(), damping=damping)
    np.testing.assert_allclose(default, expected, rtol=0, atol=1e-6)


def test_pagerank_edge_weights_matter():
    # 0 sends 3/4 of its rank to 1 and 1/4 to 2: node 1 must outrank node 2.
    pr = pagerank_scores(np.array([0, 0, 1, 2]), np.array([1, 2, 0, 0]),
                         np.array([3.0, 1.0, 1.0, 1.0]), 3)
    assert pr[0] == 1.0 and pr[1] > pr[2]


def test_pagerank_degenerate_graphs():
    empty = np.zeros(0, np.int64)
    assert pagerank_scores(empty, empty, np.zeros(0), 0).shape == (0,)
    np.testing.assert_array_equal(pagerank_scores(empty, empty, np.zeros(0), 4), np.ones(4))


def test_pagerank_logs_when_not_converged(caplog):
    G = weighted_random_graph(3, 50)
    with caplog.at_level(logging.WARNING, logger="synapse_integrations.core.kernels.scoring"):
        pr = pagerank_scores(*edges_of(G), 50, max_iter=1)
    assert "no convergence" in caplog.text
    assert pr.max() == 1.0


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    (([0], [3], [1.0], 3), {}, "outside"),
    (([0], [1], [-1.0], 3), {}, ">= 0"),
    (([0], [1], [1.0], 3), {"damping": 1.5}, "damping"),
])
def test_pagerank_rejects_bad_input(args, kwargs, match):
    src, dst, w, n = args
    with pytest.raises(InvalidInputError, match=match):
        pagerank_scores(np.array(src), np.array(dst), np.array(w), n, **kwargs)


# --------------------------------------------------------------------------------------------
# Eq. 5
# --------------------------------------------------------------------------------------------
def test_hybrid_score_by_hand():
    sim = np.array([0.9, 0.2, 0.5, 0.0])
    act = np.array([0.1, 0.9, 0.5, 0.0])
    pr = np.array([1.0, 0.0, 0.5, 0.3])
    # 0.5*0.9 + 0.3*0.1 + 0.2*1.0 = 0.45 + 0.03 + 0.2  = 0.68
    # 0.5*0.2 + 0.3*0.9 + 0.2*0.0 = 0.10 + 0.27        = 0.37
    # 0.5*0.5 + 0.3*0.5 + 0.2*0.5 = 0.25 + 0.15 + 0.10 = 0.50
    # 0.5*0.0 + 0.3*0.0 + 0.2*0.3                      = 0.06
    got = hybrid_score(sim, act, pr, weight_similarity=0.5, weight_activation=0.3,
                       weight_pagerank=0.2)
    np.testing.assert_allclose(got, [0.68, 0.37, 0.50, 0.06], atol=1e-15)
    # Switching a signal off (lambda = 0) removes it entirely.
    only_sim = hybrid_score(sim, act, pr, weight_similarity=1.0, weight_activation=0.0,
                            weight_pagerank=0.0)
    np.testing.assert_array_equal(only_sim, sim)


def test_hybrid_score_rejects_mismatched_shapes():
    with pytest.raises(InvalidInputError, match=r"\(3,\), \(2,\), \(3,\)"):
        hybrid_score(np.zeros(3), np.zeros(2), np.zeros(3), weight_similarity=0.5,
                     weight_activation=0.3, weight_pagerank=0.2)


# --------------------------------------------------------------------------------------------
# top_k
# --------------------------------------------------------------------------------------------
def test_top_k_best_first_with_lower_index_on_ties():
    np.testing.assert_array_equal(top_k(np.array([0.2, 0.9, 0.5, 0.9]), 3), [1, 3, 2])
    # Four-way tie straddling the cut: the lowest indices are kept, in index order.
    scores = np.array([0.5, 0.5, 1.0, 0.5, 0.5, 0.2])
    np.testing.assert_array_equal(top_k(scores, 3), [2, 0, 1])


def test_top_k_edge_cases():
    s = np.array([0.3, np.nan, 0.7])
    np.testing.assert_array_equal(top_k(s, 10), [2, 0, 1])  # k > n: all; NaN last
    assert top_k(s, 0).shape == (0,)
    assert top_k(np.array([]), 5).shape == (0,)
    assert top_k(s, 2).dtype == np.int64


def test_top_k_matches_a_full_stable_sort():
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(1, 80))
        scores = np.round(rng.random(n), 1)  # many ties
        k = int(rng.integers(1, n + 2))
        expected = sorted(range(n), key=lambda i: (-scores[i], i))[:k]
        np.testing.assert_array_equal(top_k(scores, k), expected)
        # the same in float32 (compared in its own type), and with NaN and -inf: last
        odd = scores.astype(np.float32)
        odd[rng.random(n) < 0.1] = np.nan
        odd[rng.random(n) < 0.1] = -np.inf
        rank = np.where(np.isnan(odd), -np.inf, odd)
        expected = sorted(range(n), key=lambda i: (-rank[i], i))[:k]
        np.testing.assert_array_equal(top_k(odd, k), expected)


# --------------------------------------------------------------------------------------------
# gate
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("confidence", "reject"), [
    (0.12, False),            # exactly tau passes
    (0.1199999, True),        # just below rejects
    (0.5, False),
    (0.0, True),
    (math.nan, True),         # NaN rejects
    (np.float64(0.2), False),
])
def test_gate_boundary(confidence, reject):
    result = gate(confidence, tau=0.12)
    assert result is reject


def test_gate_with_tau_zero_only_rejects_nan():
    assert gate(0.0, tau=0.0) is False
    assert gate(math.nan, tau=0.0) is True


# --------------------------------------------------------------------------------------------
# cosine_to_query
# --------------------------------------------------------------------------------------------
def test_cosine_to_query_values_and_clipping():
    s = 1 / math.sqrt(2)
    emb = np.array([[1.0, 0.0], [0.0, 1.0], [s, s], [-1.0, 0.0], [1.0 + 1e-9, 0.0]])
    got = cosine_to_query(emb, np.array([1.0, 0.0]))
    np.testing.assert_allclose(got, [1.0, 0.0, s, -1.0, 1.0], atol=1e-15)
    assert got.max() <= 1.0
    assert cosine_to_query(np.zeros((0, 4)), np.zeros(4)).shape == (0,)


@pytest.mark.parametrize(("emb", "query", "shapes"), [
    (np.zeros((3, 4)), np.zeros(5), r"\(3, 4\).*\(5,\)"),
    (np.zeros(4), np.zeros(4), r"\(4,\).*\(4,\)"),
    (np.zeros((3, 4)), np.zeros((1, 4)), r"\(3, 4\).*\(1, 4\)"),
])
def test_cosine_to_query_names_the_bad_shapes(emb, query, shapes):
    with pytest.raises(InvalidInputError, match=shapes):
        cosine_to_query(emb, query)

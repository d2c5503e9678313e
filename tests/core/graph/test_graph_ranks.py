"""A deferred PageRank refresh (``MemoryGraph.defer_pagerank``, core/graph/ranks.py) is
computed when first read, on the graph as it stood at the refresh: the same scores as
refreshing at once, whatever was written in between (issue 52)."""

from __future__ import annotations

import numpy as np
import pytest

from synapse_integrations.core.graph.graph import MemoryGraph


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def _star() -> MemoryGraph:
    """a -> b <- c; b has no out-edge (its rank spreads over all three)."""
    g = MemoryGraph(2)
    for i, n in enumerate("abc"):
        g.add_node(n, _unit(1, i), kind="episode", text=n)
    g.add_edge("a", "b", kind="temporal", weight=1.0)
    g.add_edge("c", "b", kind="temporal", weight=1.0)
    return g


def test_a_deferred_refresh_reads_the_graph_as_it_was_at_the_refresh():
    g = _star()
    g.compiled()  # a view to keep in step, as the engine has
    g.defer_pagerank(damping=0.85)
    # written after the refresh: an edge out of b, a new node
    g.add_edge("b", "a", kind="temporal", weight=1.0)
    g.add_node("d", _unit(0, 1), kind="concept", text="d", name="d")
    g.add_edge("d", "a", kind="association", weight=0.5)
    # by hand, for the star: x_a = x_c = 0.05 + 0.85 x_b / 3 and x_a + x_b + x_c = 1 give
    # x_a = 10/47, x_b = 27/47; divided by the top score: a = c = 10/27, b = 1
    got = g.pagerank
    assert set(got) == {"a", "b", "c"}
    assert got["b"] == pytest.approx(1.0) and got["a"] == pytest.approx(10 / 27)
    assert got["c"] == pytest.approx(10 / 27)
    # aligned with the view of now: d, added after the refresh, has 0 (as after a refresh
    # made at once)
    c = g.compiled()
    assert g.pagerank_array(np.arange(c.n)).tolist() == [got[i] if i in got else 0.0
                                                         for i in c.ids]
    assert c.ids[-1] == "d" and g.pagerank_array(np.array([3]))[0] == 0.0
    # a refresh now sees the new edges
    g.refresh_pagerank(damping=0.85)
    assert g.pagerank["a"] != pytest.approx(10 / 27) and set(g.pagerank) == set("abcd")


def _writes(g: MemoryGraph) -> None:
    g.add_node("e", _unit(1, 3), kind="episode", text="e")
    g.add_edge("b", "e", kind="temporal", weight=0.5)
    g.add_edge("a", "b", kind="temporal", weight=2.0)  # strengthened
    g.set_vector("a", _unit(2, 1))
    g.prune_incoming(["b"], 1)


@pytest.mark.parametrize("then", ["nothing", "archive", "feedback", "snapshot"])
def test_deferred_and_immediate_refreshes_give_the_same_scores(then):
    now, later = _star(), _star()
    for g in (now, later):
        g.compiled()
    now.refresh_pagerank(damping=0.85)
    later.defer_pagerank(damping=0.85)
    for g in (now, later):
        _writes(g)
        if then == "archive":  # drops the node's score: computed first, then dropped
            g.archive_nodes(["c"])
        elif then == "feedback":  # changes weights in place: the refresh reads them first
            g.set_edge_weights([("a", "b")], [0.1])
    if then == "snapshot":
        assert later.to_json()["pagerank"] == now.to_json()["pagerank"]
    assert later.pagerank == now.pagerank  # equal floats, not close ones
    assert "c" not in later.pagerank if then == "archive" else "c" in later.pagerank
    idx = np.arange(later.compiled().n)
    assert later.pagerank_array(idx).tolist() == now.pagerank_array(idx).tolist()


def test_setting_the_scores_drops_a_deferred_refresh():
    g = _star()
    g.defer_pagerank(damping=0.85)
    g.pagerank = {"a": 0.5}  # a snapshot's scores, loaded
    assert g.pagerank == {"a": 0.5}

"""The compiled view kept up to date incrementally (issue 10: a fast first query after
writes): after appends, weight changes, pruning and vector moves, the extended view must
equal a view rebuilt from the graph, and retrieval must return the same memories."""

from __future__ import annotations

import numpy as np

from synapse_integrations import HashingEmbedder, Synapse
from synapse_integrations.bench.perf import synthetic_queries, synthetic_turns
from synapse_integrations.core.graph.graph import MemoryGraph
from synapse_integrations.core.graph.view import Compiled, with_rows
from synapse_integrations.storage.chroma import ephemeral_client


def _canonical(view):
    order = np.lexsort((view.dst, view.src))
    return (view.ids, view.embeddings, view.src[order], view.dst[order], view.weight[order],
            view.is_episode)


def _rebuilt(graph: MemoryGraph):
    fresh = MemoryGraph(graph.dim)
    fresh.g, fresh.vectors = graph.g, graph.vectors
    return fresh.compiled()


def _assert_same(a, b) -> None:
    ca, cb = _canonical(a), _canonical(b)
    assert ca[0] == cb[0]
    for x, y in zip(ca[1:], cb[1:]):
        np.testing.assert_array_equal(x, y)
    assert a.index == b.index
    # the edge arrays are in (src, dst) order in both, not only equal as sets
    for view in (a, b):
        key = view.src * view.n + view.dst
        assert (np.diff(key) > 0).all()
        assert view.embeddings.strides[0] == 4  # stored column by column (view.column_major)
    for x, y in ((a.src, b.src), (a.dst, b.dst), (a.weight, b.weight)):
        np.testing.assert_array_equal(x, y)


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_appends_extend_the_view_instead_of_rebuilding_it():
    g = MemoryGraph(2)
    g.add_node("e1", _unit(1, 0), kind="episode", text="a", speaker="Sam")
    g.add_node("c1", _unit(0, 1), kind="concept", text="x", name="x")
    g.add_edge("e1", "c1", kind="abstraction", weight=0.5)
    first = g.compiled()
    assert first.node_values("speaker") == ["Sam", None]
    g.refresh_pagerank(damping=0.85)
    ranks = g.pagerank_array(np.arange(2)).tolist()
    g.add_node("e2", _unit(1, 1), kind="episode", text="b", speaker="Ana")
    g.add_edge("c1", "e2", kind="abstraction", weight=0.25)
    g.add_edge("e1", "c1", kind="abstraction", weight=0.75)  # strengthened
    view = g.compiled()
    assert view is not first and view.ids == ["e1", "c1", "e2"]
    assert view.is_episode.tolist() == [True, False, True]
    # extended, not rebuilt: the attribute the old view had read is already there
    assert [name for name, _, _ in view.cached_attributes()] == ["speaker"]
    # the carried attribute holds the new node's value too
    assert view.node_values("speaker") == ["Sam", None, "Ana"]
    edges = {(view.ids[s], view.ids[d]): w for s, d, w in zip(view.src, view.dst, view.weight)}
    assert edges == {("e1", "c1"): 0.75, ("c1", "e2"): 0.25}
    _assert_same(view, _rebuilt(g))
    assert g.compiled() is view  # no change since: the same view
    # PageRank aligned with the extended ids: the old values, 0 for the new node until
    # the next refresh (as for a rebuilt view)
    assert g.pagerank_array(np.arange(3)).tolist() == ranks + [0.0]


def test_pruned_then_readded_edge_and_moved_vector():
    g = MemoryGraph(2)
    for i in range(3):
        g.add_node(f"e{i}", _unit(1, i), kind="episode", text=str(i))
    g.add_node("c", _unit(0, 1), kind="concept", text="c", name="c")
    for i, w in enumerate((0.2, 0.5, 0.9)):
        g.add_edge(f"e{i}", "c", kind="abstraction", weight=w)
    g.compiled()
    assert g.prune_incoming(["c"], 2) == 1  # e0 -> c goes
    g.add_edge("e0", "c", kind="abstraction", weight=0.3)  # and comes back, new weight
    g.set_vector("c", _unit(1, 1))
    view = g.compiled()
    np.testing.assert_allclose(view.embeddings[view.index["c"]], _unit(1, 1))
    assert sorted(zip(view.src.tolist(), view.dst.tolist(), view.weight.tolist())) == [
        (0, 3, 0.3), (1, 3, 0.5), (2, 3, 0.9)]
    _assert_same(view, _rebuilt(g))


def test_removal_shrinks_the_view_and_learned_weights_reach_new_edges():
    g = MemoryGraph(2)
    g.add_node("a", _unit(1, 0), kind="episode", text="a")
    g.add_node("b", _unit(0, 1), kind="episode", text="b")
    g.compiled()
    g.add_edge("a", "b", kind="temporal", weight=0.5)  # pending in the delta
    assert g.set_edge_weights([("a", "b")], [0.1]) == 1  # takes the delta first
    assert g.compiled().weight.tolist() == [0.1]
    g.remove_nodes(["b"])
    view = g.compiled()
    assert view.ids == ["a"] and view.src.size == 0
    _assert_same(view, _rebuilt(g))


def test_archive_and_forget_shrink_the_view_to_what_a_rebuild_gives():
    """Nodes archived or forgotten leave the view in place of a rebuild: the others move
    up (vectors in the same buffer), their edges go, the node attributes read so far and
    the per-node structures come over shrunk (positions moved, -1 for a node gone), and
    the result equals a view rebuilt from the graph, also when a forgotten id comes back
    after other nodes were added."""
    g = MemoryGraph(3)
    for i in range(8):
        g.add_node(f"e{i}", _unit(1, i, 0), kind="episode", text=f"t{i}", speaker="Ann")
    g.add_node("c", _unit(0, 0, 1), kind="concept", text="c", name="c")
    for i in range(8):
        g.add_edge(f"e{i}", "c", kind="abstraction", weight=0.1 * (i + 1))
        if i:
            g.add_edge(f"e{i - 1}", f"e{i}", kind="temporal", weight=0.5)
    view = g.compiled()
    view.node_values("speaker")
    # a value per node; another node's position (e_i points at e_{i-1}); a memo by position
    texts = view.per_node("texts", lambda v, start: np.array(v.node_values("text")[start:]))
    before = view.per_node("before", lambda v, start: np.arange(start, v.n) - 1, positions=True)
    assert before[view.index["e3"]] == view.index["e2"] and texts[3] == "t3"
    view.memo("memo").update({view.index["e5"]: "five", (view.index["e1"], "k"): "one"})
    buffer = view.embeddings.base
    g.archive_nodes(["e2", "e4"])
    g.remove_nodes(["e6"])
    g.add_node("e8", _unit(1, 8, 0), kind="episode", text="t8", speaker="Bo")
    g.add_edge("e7", "e8", kind="temporal", weight=0.5)
    shrunk = g.compiled()
    _assert_same(shrunk, _rebuilt(g))
    assert shrunk.ids == ["e0", "e1", "e3", "e5", "e7", "c", "e8"]
    assert shrunk.embeddings.base is buffer  # moved up in place, not copied
    assert [n for n, _, _ in shrunk.cached_attributes()] == ["speaker", "text"]  # not read again
    assert shrunk.node_values("speaker") == ["Ann"] * 5 + [None, "Bo"]

    def missing(v):
        raise AssertionError("built again, not carried over")
    assert shrunk.derived("texts", missing)[:6].tolist() == ["t0", "t1", "t3", "t5", "t7", "c"]
    # e3 pointed at e2 (archived): -1; e1 -> e0 and e5 -> e4 (archived) moved or gone
    moved = shrunk.derived("before", missing)
    assert [moved[shrunk.index[n]] for n in ("e1", "e3", "e5")] == [0, -1, -1]
    assert shrunk.memo("memo") == {shrunk.index["e5"]: "five", (shrunk.index["e1"], "k"): "one"}
    # an id forgotten and written again goes to the end, after the nodes added since
    g.compiled()
    g.add_node("e9", _unit(1, 9, 0), kind="episode", text="t9")
    g.remove_nodes(["e9"])
    g.add_node("e10", _unit(1, 10, 0), kind="episode", text="t10")
    g.add_node("e9", _unit(1, 9, 0), kind="episode", text="t9 again")
    g.remove_nodes(["e0"])
    g.add_node("e0", _unit(1, 0, 0), kind="episode", text="t0 again")
    again = g.compiled()
    _assert_same(again, _rebuilt(g))
    assert again.ids[-3:] == ["e10", "e9", "e0"]
    # restored from the archive: the view is rebuilt (other nodes' values may name it)
    g.restore_nodes({"e2": _unit(1, 2, 0)})
    view = g.compiled()
    _assert_same(view, _rebuilt(g))
    assert view.ids[-1] == "e2" and view.cached_attributes() == []


def test_engine_views_match_a_rebuild_and_retrieval_is_unchanged():
    emb = HashingEmbedder()
    mem = Synapse(None, embedder=emb, client=ephemeral_client(), snapshot_every=10**9)
    try:
        turns = synthetic_turns(160, seed=5)
        queries = synthetic_queries(20, seed=2)
        mem.add_turns(turns[:60])
        mem.retrieve(queries[0])
        for j in range(60, 160, 7):
            mem.add_turns(turns[j:j + 7])
            live = [(it.id, round(it.score, 12)) for it in mem.retrieve(queries[j % 20]).items]
            state_graph = mem._state.graph  # the engine's MemoryGraph (test access)
            _assert_same(state_graph.compiled(), _rebuilt(state_graph))
            state_graph.invalidate()
            again = [(it.id, round(it.score, 12)) for it in mem.retrieve(queries[j % 20]).items]
            assert live == again
    finally:
        mem.close()


def _concept_rows_match(g: MemoryGraph) -> None:
    ids, mat = g.concept_matrix()
    assert ids == g.ids("concept")
    expected = np.stack([g.vectors[c] for c in ids]) if ids else np.zeros((0, g.dim), np.float32)
    np.testing.assert_array_equal(mat, expected)


def test_view_vectors_grow_into_the_spare_columns_of_their_buffer() -> None:
    """An extended view writes its new nodes' vectors into the spare columns of the buffer
    the view it replaces stored them in: a new buffer (a quarter larger) only when they run
    out, not a copy of every vector per write."""
    g = MemoryGraph(3)
    g.add_node("e0", _unit(1, 0, 0), kind="episode", text="x")
    g.compiled()
    buffers = []
    for i in range(1, 200):
        g.add_node(f"e{i}", _unit(1, i, 0), kind="episode", text="x")
        buffers.append(g.compiled().embeddings.base)
    _assert_same(g.compiled(), _rebuilt(g))
    assert 2 <= len({id(b) for b in buffers}) <= 3  # 199 if every write copied


def test_an_empty_view_from_arrays_stores_no_vectors_and_grows() -> None:
    view = Compiled.from_arrays([], np.zeros((0, 3), dtype=np.float32), src=[], dst=[],
                                weight=[], is_episode=[])
    assert view.embeddings.shape == (0, 3)
    grown = with_rows(view.embeddings, [_unit(1, 0, 0)])
    np.testing.assert_array_equal(grown, [_unit(1, 0, 0)])
    assert grown.strides[0] == 4


def test_concept_rows_follow_adds_merges_removals_archive_and_restore() -> None:
    """Consolidation compares each new concept with every concept's vector through
    ``concept_matrix``; it is kept in step in place (no re-stacking per window) and must
    always equal the vectors stacked afresh."""
    g = MemoryGraph(3)
    _concept_rows_match(g)  # empty
    g.add_node("e1", _unit(1, 0, 0), kind="episode", text="x")
    for i in range(100):  # past the initial spare rows: they grow
        g.add_node(f"c{i}", _unit(1, i, 0), kind="concept", name=f"c{i}")
        if i in (0, 63, 64, 99):
            _concept_rows_match(g)
    g.set_vector("c5", _unit(0, 0, 1))  # a merge moves a concept's vector
    g.set_vector("e1", _unit(0, 1, 0))  # an episode's vector is not a concept row
    _concept_rows_match(g)
    g.remove_nodes(["c7"])
    _concept_rows_match(g)
    moved = g.archive_nodes(["c8", "c9"])
    _concept_rows_match(g)
    g.add_node("c100", _unit(2, 1, 1), kind="concept", name="c100")
    g.restore_nodes(moved)
    _concept_rows_match(g)
    assert len(g.concept_matrix()[0]) == 100


#: what retrieval derives from node attributes alone and grows with the view
_GROWN = ("replies", "asks.shares", "focus.speakers", "user-turns", "fact-nodes",
          "low-salience", "echo-sources", "speakers", "gate.names", "times")


def _chat(k: int) -> list[dict]:
    """Turn ``k`` of a chat that holds every case the grown structures read: named
    speakers and roles, questions answered and not, echoes, low-salience filler."""
    t = 1_700_000_000 + 150 * k  # replies within REPLY_WINDOW; sleep runs twice
    if k % 10 < 5:  # two people
        text = ("Where did you go skiing last winter?" if k % 5 == 0 else
                f"We went to Zermatt {k} times, I love my skis. And you?" if k % 5 == 1 else
                "ok" if k % 5 == 2 else f"I moved to Lisbon in {2000 + k}." if k % 5 == 3
                else "How is the new flat?")
        return {"text": text, "speaker": "Ann" if k % 2 else "Bo", "timestamp": t}
    text = (f"My order number is QM-{k}-TK." if k % 5 == 0 else  # and its echo:
            f"My order number is QM-{k - 1}-TK." if k % 5 == 1 else
            "Thanks!" if k % 5 == 2 else f"I adopted a cat called Pickle {k} days ago."
            if k % 5 == 3 else "Noted: Pickle.")
    return {"text": text, "speaker": "user" if k % 5 in (0, 2, 3) else "assistant",
            "timestamp": t}


def test_grown_structures_equal_a_rebuild_after_every_write():
    """Retrieval's per-node structures (replies, asked shares, speakers, roles, facts,
    salience, echoes, the gate's names, times) are taken over by the view a write extends
    and grown by the new nodes alone: after many writes they equal a rebuild, and so does
    what retrieval returns."""
    from synapse_integrations import SynapseConfig

    questions = ["Where did Bo go skiing?", "What is my order number?", "Where do I live?",
                 "What did you say about Pickle?"]
    mem = Synapse(None, namespace="grown", embedder=HashingEmbedder(),
                  client=ephemeral_client(), snapshot_every=10**9,
                  config=SynapseConfig(surprisal_gate=True))
    try:
        turns = [_chat(k) for k in range(60)]
        mem.add_turns(turns[:10])
        for q in questions:
            mem.retrieve(q)
        graph = mem._state.graph  # the engine's MemoryGraph (test access)
        extended = 0
        for j in range(10, 60, 3):
            mem.add_turns(turns[j:j + 3])
            view = graph.compiled()
            carried = {key: m for key, _, _, m in view.growing()}
            # a write extends the view (an archive at a window rebuilds it): the structures
            # come over as they were, for fewer nodes than the view has
            extended += all(carried.get(key, view.n) < view.n for key in _GROWN)
            for q in questions:
                mem.retrieve(q)
        assert extended >= 12
        grown = graph.compiled()
        live = [[(it.id, round(it.score, 12)) for it in mem.retrieve(q).items] for q in questions]

        def missing(view):
            raise AssertionError("not derived")
        values = {key: grown.derived(key, missing) for key in _GROWN}
        graph.invalidate()
        assert live == [[(it.id, round(it.score, 12)) for it in mem.retrieve(q).items]
                        for q in questions]
        fresh = graph.compiled()
        assert fresh is not grown
        for key in _GROWN:
            a, b = values[key], fresh.derived(key, missing)
            for x, y in zip(a, b) if isinstance(a, tuple) else [(a, b)]:
                if isinstance(x, np.ndarray):
                    np.testing.assert_array_equal(x, y, err_msg=key)
                else:
                    assert x == y, key
        assert (values["replies"][0][:, 0] >= 0).sum() >= 10  # the case the test is about
        assert values["low-salience"].any() and (values["echo-sources"] >= 0).any()
        assert values["user-turns"].any() and values["fact-nodes"].any()
    finally:
        mem.close()


def test_an_archive_shrinks_the_engine_view_and_retrieval_is_unchanged():
    """The engine's archive (the lifecycle's, or by hand) takes nodes out of the view in
    place of a rebuild: what retrieval derives from node attributes comes over (no
    attribute is read again), and what it returns equals a rebuild's."""
    from synapse_integrations import SynapseConfig

    questions = ["Where did Bo go skiing?", "What is my order number?", "Where do I live?",
                 "What did you say about Pickle?"]
    mem = Synapse(None, namespace="shrunk", embedder=HashingEmbedder(),
                  client=ephemeral_client(), snapshot_every=10**9,
                  config=SynapseConfig(surprisal_gate=True))
    try:
        mem.add_turns([_chat(k) for k in range(40)])
        for q in questions:
            mem.retrieve(q)
        graph = mem._state.graph  # the engine's MemoryGraph (test access)
        before = graph.compiled()
        read = sorted(n for n, _, _ in before.cached_attributes())
        echoes = before.derived("echo-sources", lambda v: None)
        sources = [before.ids[s] for s in echoes[echoes >= 0].tolist()]
        episodes = [e["id"] for e in mem.episodes(include_archived=False)]
        mem.archive([sources[0], episodes[7], episodes[8]])  # an echo's source among them
        view = graph.compiled()
        assert view is not before and sorted(n for n, _, _ in view.cached_attributes()) == read
        live = [[(it.id, round(it.score, 12)) for it in mem.retrieve(q).items] for q in questions]

        def missing(v):
            raise AssertionError("not derived")
        shrunk = {key: view.derived(key, missing)
                  for key in ("echo-sources", "user-turns", "speakers", "times")}
        graph.invalidate()
        assert live == [[(it.id, round(it.score, 12)) for it in mem.retrieve(q).items]
                        for q in questions]
        fresh = graph.compiled()
        _assert_same(view, fresh)
        for key, value in shrunk.items():
            np.testing.assert_array_equal(value, fresh.derived(key, missing), err_msg=key)
        assert (shrunk["echo-sources"] >= 0).sum() == (echoes >= 0).sum() - 1  # source gone
    finally:
        mem.close()


def test_a_forgotten_echo_source_written_again_is_the_echo_source_again():
    """An echo whose source is forgotten points nowhere (-1); when a turn with the source's
    id is written again, the echo points at it, as in a view rebuilt from the graph (the
    view is rebuilt: extending it would leave the echo at -1)."""
    question = "What is my order number?"
    mem = Synapse(None, namespace="echo-again", embedder=HashingEmbedder(),
                  client=ephemeral_client(), snapshot_every=10**9)
    try:
        mem.add_turns([_chat(k) for k in range(20)])
        mem.retrieve(question)
        graph = mem._state.graph  # the engine's MemoryGraph (test access)

        def sources():
            mem.retrieve(question)  # derives the echoes' sources on the current view
            view = graph.compiled()
            return view, view.derived("echo-sources", lambda v: None)
        view, echoes = sources()
        echo = int(np.flatnonzero(echoes >= 0)[0])
        echo_id, source_id = view.ids[echo], view.ids[int(echoes[echo])]
        source = mem.get(source_id)
        mem.forget([source_id])
        mem.add_turns([_chat(k) for k in range(20, 23)])
        view, gone = sources()
        assert gone[view.index[echo_id]] == -1
        mem.add_turn(source["text"], speaker=source.get("speaker"), id=source_id,
                     timestamp=source.get("ts"))
        again, found = sources()
        assert found[again.index[echo_id]] == again.index[source_id]  # not -1 (the last)
        graph.invalidate()
        fresh, rebuilt = sources()
        _assert_same(again, fresh)
        np.testing.assert_array_equal(found, rebuilt)
    finally:
        mem.close()

"""The engine end to end, with the real MiniLM model and real embedded Chroma."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from synapse_integrations import (
    EmbeddingError,
    InvalidInputError,
    InvalidTypeError,
    NamespaceError,
    NodeNotFoundError,
    Synapse,
    SynapseConfig,
    SynapseError,
    UnknownNamespaceError,
)

pytestmark = pytest.mark.model

T0 = datetime(2024, 1, 6, 9, 0, tzinfo=timezone.utc)

FILLER = [
    "Sam: The new coffee place downtown roasts its own beans.",
    "Riley: I finished repainting the kitchen a pale green colour.",
    "Sam: My laptop battery barely lasts two hours these days.",
    "Riley: We watched a documentary about deep sea creatures.",
    "Sam: The bus schedule changed again, so I leave earlier now.",
    "Riley: I'm trying a sourdough starter, it smells odd.",
    "Sam: Work has been hectic with the quarterly report.",
    "Riley: The neighbours planted tomatoes along the fence.",
    "Sam: I replaced the bike chain myself for the first time.",
    "Riley: My sister sent photos from her garden in spring.",
    "Sam: The library extended its weekend opening hours.",
    "Riley: I found a cheap flight deal but the dates were wrong.",
    "Sam: We're thinking about new curtains for the living room.",
    "Riley: The concert tickets sold out in ten minutes.",
    "Sam: I've started walking to work when the weather is nice.",
]


def bridge_conversation() -> list[dict]:
    """Session 1 mentions a ski trip with Dana; much later Dana's news is told with no
    word (and little meaning) in common with the question about 'the person from the ski trip'."""
    turns = [
        {"text": "Sam: I just got back from a ski trip to Whistler with my cousin Dana.",
         "speaker": "Sam", "timestamp": T0},
        {"text": "Riley: Nice! Was the snow good up there?", "speaker": "Riley",
         "timestamp": T0 + timedelta(minutes=1)},
        {"text": "Sam: Powder every morning, we skied until our legs gave out.", "speaker": "Sam",
         "timestamp": T0 + timedelta(minutes=2)},
        {"text": "Riley: Sounds like a great week on the slopes.", "speaker": "Riley",
         "timestamp": T0 + timedelta(minutes=3)},
        {"text": "Sam: It was, the mountain views were unreal.", "speaker": "Sam",
         "timestamp": T0 + timedelta(minutes=4)},
    ]
    t = T0 + timedelta(days=3)
    for i in range(6):  # six filler sessions
        for j, text in enumerate(FILLER):
            turns.append({"text": text, "speaker": text.split(":")[0],
                          "timestamp": t + timedelta(days=7 * i, minutes=j)})
    t = T0 + timedelta(days=60)
    turns += [
        {"text": "Sam: Big news in the family, Dana got accepted into veterinary school.",
         "speaker": "Sam", "timestamp": t},
        {"text": "Riley: Congratulations to her!", "speaker": "Riley", "timestamp": t + timedelta(minutes=1)},
        {"text": "Sam: She has wanted to work with animals forever.", "speaker": "Sam",
         "timestamp": t + timedelta(minutes=2)},
        {"text": "Riley: Let's celebrate when she visits.", "speaker": "Riley",
         "timestamp": t + timedelta(minutes=3)},
        {"text": "Sam: Definitely, maybe a dinner in town.", "speaker": "Sam",
         "timestamp": t + timedelta(minutes=4)},
    ]
    return turns


ANSWER = "Sam: Big news in the family, Dana got accepted into veterinary school."
BRIDGE_QUESTION = "What is the person I went on the ski trip with going to study?"


#: Other people's study plans, said between the ski trip and Dana's news: they match the
#: question's "going to study" directly, which is what makes dense retrieval miss Dana.
STUDY_PLANS = [
    "Riley: My coworker is going to study photography at night school.",
    "Sam: A friend of mine plans to learn Spanish next year.",
    "Riley: The person next door is studying for a law exam.",
    "Sam: My neighbour wants to take a pottery course.",
    "Riley: Someone at the gym is going to study nursing.",
    "Sam: I might study for a cooking certificate someday.",
    "Riley: What do you think people should study these days?",
    "Sam: I always wanted to study astronomy a bit more.",
    "Riley: My brother is thinking about a degree in economics.",
    "Sam: Our intern will study data science in the fall.",
]


def bridge_conversation_with_study_plans() -> list[dict]:
    turns = bridge_conversation()
    t = T0 + timedelta(days=40)
    for j, text in enumerate(STUDY_PLANS):
        turns.insert(40 + j, {"text": text, "speaker": text.split(":")[0],
                              "timestamp": t + timedelta(minutes=j)})
    return turns


def test_bridge_concept_reaches_an_answer_dense_search_misses(memory):
    """The answer shares no word with the question (cosine 0.26) and ten other turns match
    "going to study" directly. Dense retrieval ranks it 15th. With entity feedback (on by
    default) the first pass's best episode (the ski trip) names Dana; the second pass, with
    Dana in the query, finds Dana's news through the Dana concept, the item's path says so,
    and its score is its second-pass score discounted for the hop. The single pass
    (``entity_feedback=0``, the paper's) does not reach it: docs/benchmarks.md, "Bridges by
    default"."""
    memory.add_turns(bridge_conversation_with_study_plans())
    memory.consolidate()
    k = 10
    g = memory.graph
    answer = next(n for n, d in g.nodes(data=True) if d["text"] == ANSWER)
    q = memory._embedder.embed_query(BRIDGE_QUESTION)
    dense, _ = memory.search_vectors(q, k, kind="episode")
    assert answer not in dense, "the case must be one that dense retrieval misses"

    assert memory.config.entity_feedback == 2
    res = memory.retrieve_by_vector(BRIDGE_QUESTION, q, k=4 * k)
    top = [it.id for it in res.episodes()][:k]
    assert answer in top
    item = next(it for it in res.items if it.id == answer)
    kinds = [g.nodes[p]["kind"] for p in item.path]
    assert kinds == ["episode", "concept", "episode"]
    assert g.nodes[item.path[1]]["name"] == "Dana"
    assert g.nodes[item.path[0]]["text"].startswith("Sam: I just got back from a ski trip")
    # alone, the question is far from the answer; the feedback pass's query (question +
    # the Dana concept's vector) is what the item's similarity reports
    asked = float(q @ memory._state.graph.vectors[answer])
    assert asked < 0.3 < item.components.similarity
    # one hop further: spreading_factor x its second-pass score, and the terms still add up
    terms = item.components.terms()
    assert terms["hop"] < 0
    second = item.score - terms["hop"]
    assert item.score == pytest.approx(memory.config.spreading_factor * second)
    assert sum(terms.values()) == pytest.approx(item.score)
    # a memory the question itself scored best keeps its own score (no hop term), and
    # its path ends at itself
    own = [it for it in res.episodes()[:k] if it.components.hop == 0.0]
    assert own and all(it.path[-1] == it.id for it in own)
    # the gate judges the question as asked: same decision with or without the second pass
    single = memory.retrieve_by_vector(BRIDGE_QUESTION, q, k=4 * k,
                                       config=memory.config.replace(entity_feedback=0))
    assert answer not in [it.id for it in single.episodes()][:k]
    assert (res.confidence, res.rejected) == (single.confidence, single.rejected)
    # the merge never lets the widened query push a memory the question found below its
    # first-pass score: every single-pass item keeps at least that score
    merged = {it.id: it.score for it in res.items}
    for it in single.items:
        if it.id in merged:
            assert merged[it.id] >= it.score - 1e-12


def test_entity_feedback_skips_speakers_topics_and_names_already_asked(memory):
    memory.add_turns(bridge_conversation())
    memory.consolidate()
    from synapse_integrations.core.retrieval import passes as retrieval

    c = memory._state.compiled()
    cfg = memory.config.replace(entity_feedback=1)

    def entities(question: str) -> list[str]:
        q = memory._embedder.embed_query(question)
        run = retrieval.run_pass(c, memory._state, cfg, memory._retriever.model(cfg.model),
                                 question, q, np.clip(c.embeddings @ q, -1, 1), 40)
        return sorted(memory.graph.nodes[e]["name"] for e in retrieval.feedback_entities(memory._state, c, run, 1, question))

    # the best episode is the ski-trip turn: its entities, not its speaker "Sam" nor its
    # topics ("ski trip", "cousin"), and not what the question already names
    assert entities("Sam's ski trip with a cousin") == ["Dana", "Whistler"]
    assert entities("Sam's ski trip to Whistler with a cousin") == ["Dana"]
    with pytest.raises(Exception, match="entity_feedback"):
        SynapseConfig(entity_feedback=-1)


def test_entity_feedback_reads_episodes_by_their_own_evidence_not_a_borrowed_lift(memory):
    """A reply lifted by its question (or by the statement the question followed up) ranks
    by words that are not its own: its entities do not feed the second pass."""
    import dataclasses

    from synapse_integrations.core.kernels import scoring
    from synapse_integrations.core.retrieval import passes as retrieval

    memory.add_turns(bridge_conversation())
    memory.consolidate()
    c = memory._state.compiled()
    cfg = memory.config.replace(entity_feedback=1)
    question = "Sam's ski trip with a cousin"
    q = memory._embedder.embed_query(question)
    run = retrieval.run_pass(c, memory._state, cfg, memory._retriever.model(cfg.model),
                             question, q, np.clip(c.embeddings @ q, -1, 1), 40)
    names = lambda r: sorted(memory.graph.nodes[e]["name"]  # noqa: E731
                             for e in retrieval.feedback_entities(memory._state, c, r, 1, question))
    assert names(run) == ["Dana", "Whistler"]
    # a lower episode that links other entities, lifted above the first
    news = c.index[next(n for n, d in memory.graph.nodes(data=True) if d.get("text") == ANSWER)]
    j = int(np.flatnonzero(run.cand == news)[0])
    assert names(dataclasses.replace(run, order=np.array([j]))) != names(run)
    boost = np.zeros(run.score.size)
    boost[j] = float(run.score.max()) + 1.0 - run.score[j]
    score = run.score + boost
    order = scoring.top_k(score, run.order.size)
    assert order[0] == j
    # borrowed (a reply's lift): the entities stay the best own-evidence episode's
    assert names(dataclasses.replace(run, score=score, order=order,
                                  adjustments={**run.adjustments, "reply": run.reply + boost})) \
        == ["Dana", "Whistler"]
    # earned (its own score): its entities feed back
    assert names(dataclasses.replace(run, score=score, order=order)) \
        == names(dataclasses.replace(run, order=np.array([j])))


def test_add_turn_builds_episodes_and_temporal_edges(memory):
    ids = [memory.add_turn(f"turn number {i} about gardening", speaker="Sam",
                           timestamp=T0 + timedelta(hours=i)) for i in range(3)]
    g = memory.graph
    assert [g.nodes[i]["kind"] for i in ids] == ["episode"] * 3
    assert g.edges[ids[0], ids[1]]["kind"] == "temporal"
    # weight exp(-rho * dt) with dt = 1 hour, rho = 0.01 per hour
    assert g.edges[ids[0], ids[1]]["weight"] == pytest.approx(np.exp(-0.01))
    assert not g.has_edge(ids[1], ids[0])  # temporal edges point forward by default
    assert memory.stats()["pending"] == 3


def test_consolidation_every_n_turns_creates_concepts_and_abstraction_edges(memory):
    memory.add_turns(bridge_conversation()[:5])
    st = memory.stats()
    assert st["windows"] == 1 and st["pending"] == 0
    assert st["concepts"] >= 2
    g = memory.graph
    dana = [n for n, d in g.nodes(data=True) if d["kind"] == "concept" and d["name"] == "Dana"]
    assert dana, "the offline extractor should make a concept for Dana"
    eps = [n for n, d in g.nodes(data=True) if d["kind"] == "episode"]
    # default scope "mentions": both directions, weight 0.8, to the one turn naming Dana
    linked = [e for e in eps if g.has_edge(dana[0], e)]
    assert [g.nodes[e]["text"] for e in linked] == [bridge_conversation()[0]["text"]]
    assert g.edges[linked[0], dana[0]]["weight"] == pytest.approx(0.8)
    assert g.edges[dana[0], linked[0]]["kind"] == "abstraction"
    assert not any(g.has_edge(e, dana[0]) for e in eps if e not in linked)


def test_window_scope_links_concepts_to_every_turn_of_the_window(tmp_path, embedder):
    with Synapse(tmp_path / "m", embedder=embedder,
                 config=SynapseConfig(abstraction_scope="window")) as mem:
        mem.add_turns(bridge_conversation()[:5])
        g = mem.graph
        dana = next(n for n, d in g.nodes(data=True) if d["kind"] == "concept" and d["name"] == "Dana")
        for e in (n for n, d in g.nodes(data=True) if d["kind"] == "episode"):
            assert g.edges[e, dana]["weight"] == pytest.approx(0.8)
            assert g.edges[dana, e]["kind"] == "abstraction"


def test_concepts_deduplicate_across_windows_with_ema(memory):
    memory.add_turns(bridge_conversation())
    g = memory.graph
    dana = [n for n, d in g.nodes(data=True) if d["kind"] == "concept" and d["name"] == "Dana"]
    assert len(dana) == 1
    assert g.nodes[dana[0]]["mentions"] >= 2
    answer = [n for n, d in g.nodes(data=True) if d["text"] == ANSWER][0]
    first = [n for n, d in g.nodes(data=True) if d["text"].startswith("Sam: I just got back")][0]
    assert g.has_edge(first, dana[0]) and g.has_edge(dana[0], answer)


def test_incoming_edges_are_pruned_to_top_k(tmp_path, embedder):
    cfg = SynapseConfig(prune_top_k=4)
    with Synapse(tmp_path / "m", embedder=embedder, config=cfg) as mem:
        mem.add_turns(bridge_conversation())
        assert max(d for _, d in mem.graph.in_degree()) <= 4


def test_retrieve_returns_components_and_gate(memory):
    memory.add_turns(bridge_conversation())
    res = memory.retrieve("How was the snow at Whistler?", k=5)
    assert len(res.items) == 5
    top = res.items[0]
    assert "Whistler" in top.text or "snow" in top.text.lower() or "ski" in top.text.lower()
    assert 0 <= top.components.similarity <= 1 and 0 <= top.components.activation <= 1
    assert 0 <= top.components.pagerank <= 1
    assert top.components.bm25_rank is not None or top.components.dense_rank is not None
    # the default gate reads the cosine of the item its own score placed first (the
    # conversation's hand-overs aside: here the reply "Powder every morning ..." ranks
    # first, lifted by "Was the snow good up there?"); the paper's reads the top item's
    # activation
    placed = max(res.items, key=lambda it: it.score - it.components.reply)
    assert res.confidence == pytest.approx(placed.components.similarity)
    assert res.rejected == (res.confidence < res.gate_tau)
    # the paper's query-time settings on this memory (its graph-time ones, abstraction_scope
    # and sleep_auto, are set when a memory is opened: a per-call change is refused)
    paper = memory.retrieve_by_vector("How was the snow at Whistler?",
                                      memory._embedder.embed_query("How was the snow at Whistler?"),
                                      k=5, config=memory.config.replace(**SynapseConfig.paper().query_time()))
    assert paper.confidence == pytest.approx(paper.items[0].components.activation)
    assert paper.gate_tau == SynapseConfig.paper().gate_tau
    assert [it.score for it in res.items] == sorted((it.score for it in res.items), reverse=True)
    chrono = res.in_time_order()
    stamps = [it.timestamp for it in chrono if it.timestamp]
    assert stamps == sorted(stamps)


def test_gate_rejects_when_confidence_below_tau(tmp_path, embedder):
    with Synapse(tmp_path / "m", embedder=embedder, config=SynapseConfig(gate_tau=1.0)) as mem:  # above any non-identical cosine
        mem.add_turns(bridge_conversation()[:10])
        res = mem.retrieve("Who came skiing?")
        assert res.rejected and res.accepted == ()
    with Synapse(tmp_path / "m2", embedder=embedder, config=SynapseConfig(gate_tau=0.0)) as mem:
        mem.add_turns(bridge_conversation()[:10])
        assert not mem.retrieve("Who came skiing?").rejected


def test_default_gate_rejects_off_topic_and_accepts_on_topic(memory):
    memory.add_turns(bridge_conversation())
    for q in ("What is the boiling point of liquid nitrogen?", "How do I configure a reverse proxy?"):
        res = memory.retrieve(q)
        assert res.rejected and res.accepted == (), (q, res.confidence)
    for q in ("How was the snow at Whistler?", "Who went skiing with Sam?"):
        res = memory.retrieve(q)
        assert not res.rejected and res.accepted, (q, res.confidence)


def test_empty_memory_retrieve_is_rejected(memory):
    res = memory.retrieve("anything at all?")
    assert res.items == () and res.rejected


@pytest.mark.parametrize("name", ["full", "no-gate", "no-inhibition", "no-fan", "no-decay",
                                  "no-pagerank", "no-activation", "no-graph"])
def test_every_ablation_runs(tmp_path, embedder, name):
    cfg = SynapseConfig.ablation(name)
    with Synapse(tmp_path / "m", embedder=embedder, config=cfg) as mem:
        mem.add_turns(bridge_conversation()[:20])
        res = mem.retrieve("ski trip with Dana", k=5)
        assert res.items
        if name == "no-gate":
            assert not res.rejected
        if name in ("no-activation",):
            assert all(it.components.activation == 0 for it in res.items)
        if name in ("no-graph", "no-pagerank"):
            assert all(it.components.pagerank == 0 for it in res.items)


def test_save_restart_load_gives_identical_retrieval(tmp_path, embedder):
    path = tmp_path / "m"
    mem = Synapse(path, namespace="alice", embedder=embedder)
    mem.add_turns(bridge_conversation())
    mem.add_turn("Sam: one more pending turn about the garden.", timestamp=T0 + timedelta(days=90))
    before = mem.retrieve(BRIDGE_QUESTION, k=15)
    stats = mem.stats()
    mem.close()

    again = Synapse.load(path, namespace="alice", embedder=embedder)
    after = again.retrieve(BRIDGE_QUESTION, k=15)
    assert again.stats() == stats
    assert [i.id for i in after.items] == [i.id for i in before.items]
    assert np.allclose([i.score for i in after.items], [i.score for i in before.items], atol=1e-6)
    assert (after.rejected, after.confidence) == pytest.approx((before.rejected, before.confidence))
    again.close()


def test_turns_written_after_last_snapshot_are_reattached(tmp_path, embedder):
    path = tmp_path / "m"
    mem = Synapse(path, embedder=embedder)
    mem.add_turns(bridge_conversation()[:10])
    mem.save()
    late = mem.add_turn("Sam: I adopted a very loud parrot named Kiwi.", timestamp=T0 + timedelta(days=99))
    # simulate a crash: no close(), no snapshot
    mem._closed = True
    again = Synapse.load(path, embedder=embedder)
    assert late in again.graph
    assert again.retrieve("parrot name", k=5).episodes()[0].id == late
    again.close()


def test_load_unknown_namespace_raises(tmp_path, embedder):
    with pytest.raises(UnknownNamespaceError):
        Synapse.load(tmp_path / "nothing", namespace="bob", embedder=embedder)


def test_load_finds_a_namespace_stored_before_its_first_snapshot(tmp_path, embedder):
    """Its collections name it (one lookup by name); a namespace beside it with neither
    snapshot nor collections is unknown."""
    mem = Synapse(tmp_path / "m", namespace="alice", embedder=embedder, snapshot_every=10**9)
    turn = mem.add_turn("Alice keeps her spare key under the blue flowerpot.")
    mem._closed = True  # a crash before the first snapshot, as above
    assert not any((tmp_path / "m").rglob("manifest.json"))
    with Synapse.load(tmp_path / "m", namespace="alice", embedder=embedder) as again:
        assert turn in again.graph
    with pytest.raises(UnknownNamespaceError):
        Synapse.load(tmp_path / "m", namespace="bob", embedder=embedder)


def test_namespaces_are_isolated(tmp_path, embedder):
    a = Synapse(tmp_path / "m", namespace="alice", embedder=embedder)
    b = Synapse(tmp_path / "m", namespace="bob", embedder=embedder)
    a.add_turn("Alice keeps her spare key under the blue flowerpot.")
    b.add_turn("Bob likes jazz records.")
    assert all("flowerpot" not in it.text for it in b.retrieve("where is the spare key?"))
    assert a.retrieve("where is the spare key?").items[0].text.startswith("Alice")
    a.close()
    b.close()
    assert set(Synapse.namespaces(tmp_path / "m")) == {"alice", "bob"}


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b", "x" * 300, 5])
def test_bad_namespaces_are_refused(tmp_path, embedder, bad):
    with pytest.raises(NamespaceError):
        Synapse(tmp_path / "m", namespace=bad, embedder=embedder)


def test_hostile_namespace_stays_inside_the_folder(tmp_path, embedder):
    root = tmp_path / "m"
    with Synapse(root, namespace="../../escape", embedder=embedder) as mem:
        mem.add_turn("secret")
    assert not (tmp_path / "escape").exists()
    assert all(root in p.parents for p in root.rglob("*"))


def test_bad_input_gives_clear_errors_and_stores_nothing(memory):
    memory.add_turn("a good turn")
    before = memory.stats()
    with pytest.raises(InvalidInputError, match="empty"):
        memory.add_turn("   ")
    with pytest.raises(InvalidTypeError, match="str"):
        memory.add_turn(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="ISO 8601"):
        memory.add_turn("hello", timestamp="yesterday-ish")
    with pytest.raises(InvalidInputError, match="finite"):
        memory.add_turn("hello", timestamp=float("nan"))
    with pytest.raises(InvalidInputError, match="JSON"):
        memory.add_turn("hello", metadata={"x": object()})
    with pytest.raises(InvalidInputError):  # one bad turn in a batch stores none of it
        memory.add_turns(["fine", ""])
    with pytest.raises(InvalidInputError, match="query"):
        memory.retrieve("")
    with pytest.raises(InvalidInputError, match="k must"):
        memory.retrieve("x", k=0)
    assert memory.stats() == before
    assert all(isinstance(e, SynapseError) for e in (InvalidInputError("x"), InvalidTypeError("x")))


def test_embedding_dimension_mismatch_is_refused(tmp_path, embedder):
    class Wrong:
        def embed_documents(self, texts):
            return [[0.1] * 17 for _ in texts]

        def embed_query(self, text):
            return [0.1] * 17

    with pytest.raises(EmbeddingError, match="dimension"):
        with Synapse(tmp_path / "m", embedder=Wrong()) as mem:
            mem.add_turn("hello")

    class Nan(Wrong):
        def embed_documents(self, texts):
            return [[float("nan")] * 384 for _ in texts]

    with Synapse(tmp_path / "m2", embedder=Nan()) as mem:
        with pytest.raises(EmbeddingError, match="NaN"):
            mem.add_turn("hello")
        assert mem.stats()["episodes"] == 0


def test_archive_and_restore(memory):
    ids = memory.add_turns(bridge_conversation()[:10])
    memory.archive(ids[:2])
    assert ids[0] not in memory.graph
    assert {r["id"] for r in memory.archived()} == set(ids[:2])
    assert ids[0] not in {it.id for it in memory.retrieve("ski trip to Whistler", k=30)}
    memory.restore(ids[:2])
    assert ids[0] in memory.graph and memory.graph.has_edge(ids[0], ids[1])
    assert memory.retrieve("ski trip to Whistler", k=3).items[0].id == ids[0]
    with pytest.raises(NodeNotFoundError):
        memory.restore(["nope"])


def _queried_windows(mem: Synapse) -> list[str]:
    """Five turns, then three more windows of filler, each queried about something else."""
    first = mem.add_turns(bridge_conversation()[:5])
    for i in range(3):
        mem.retrieve("coffee roasting downtown")
        mem.add_turns(FILLER[5 * i:5 * i + 5])
    return first


def test_dormant_nodes_are_archived_after_w_queried_windows(tmp_path, embedder):
    cfg = SynapseConfig(dormancy_windows=2, consolidation_interval=5, dormancy_capacity=0)
    with Synapse(tmp_path / "m", embedder=embedder, config=cfg) as mem:
        first = _queried_windows(mem)
        archived = {r["id"] for r in mem.archived()}
        assert set(first) & archived
        assert mem.stats()["archived"] == len(archived)


def test_a_graph_under_its_capacity_archives_nothing(tmp_path, embedder):
    cfg = SynapseConfig(dormancy_windows=2, consolidation_interval=5)  # capacity 10,000
    with Synapse(tmp_path / "m", embedder=embedder, config=cfg) as mem:
        _queried_windows(mem)
        assert mem.stats()["archived"] == 0
        assert mem.retrieve("ski trip to Whistler", k=3).items  # every turn still answers


def test_over_capacity_only_the_excess_is_archived(tmp_path, embedder):
    free = SynapseConfig(dormancy_windows=2, consolidation_interval=5, dormancy_capacity=0)
    with Synapse(tmp_path / "a", embedder=embedder, config=free) as mem:
        _queried_windows(mem)
        every = mem.stats()["archived"]  # what an unbounded graph archives
        size = len(mem.graph) + every
    bound = size - 3
    with Synapse(tmp_path / "b", embedder=embedder,
                 config=free.replace(dormancy_capacity=bound)) as mem:
        _queried_windows(mem)
        assert 0 < mem.stats()["archived"] < every


def test_the_ledger_archives_the_longest_dormant_down_to_the_capacity():
    from types import SimpleNamespace

    import networkx as nx

    from synapse_integrations.core.ingest.consolidation import DormancyLedger

    g = nx.DiGraph()
    g.add_nodes_from([("a", {"dormant": 1}), ("b", {"dormant": 4}), ("c", {}), ("d", {"dormant": 4}),
                      ("e", {})])
    state = SimpleNamespace(graph=SimpleNamespace(g=g))
    ledger = DormancyLedger()
    ledger.observe(["e"])
    # after the step: a 2, b 5, c 1, d 5, e 0; dormant at 2 windows: a, b, d
    assert ledger.step(state, windows=2, capacity=3) == ["b", "d"]  # 5 nodes, 2 over
    assert g.nodes["e"]["dormant"] == 0 and g.nodes["c"]["dormant"] == 1
    ledger.observe([])
    # a 3, b 6, c 2, d 6, e 1: unbounded, every dormant one
    assert ledger.step(state, windows=2, capacity=0) == ["a", "b", "c", "d"]
    ledger.observe([])
    assert ledger.step(state, windows=2, capacity=10) == []  # under the bound: none
    assert ledger.step(state, windows=2, capacity=1) == []  # not queried in the window


def test_no_archiving_without_queries(tmp_path, embedder):
    cfg = SynapseConfig(dormancy_windows=1)
    with Synapse(tmp_path / "m", embedder=embedder, config=cfg) as mem:
        mem.add_turns(bridge_conversation())
        assert mem.stats()["archived"] == 0


def test_forget_by_speaker_time_and_ids(memory):
    memory.add_turns(bridge_conversation())
    n = memory.stats()["episodes"]
    gone = memory.forget(speaker="Riley")
    assert gone and all("Riley" not in memory.get(i)["speaker"] for i in memory.graph
                        if memory.get(i)["kind"] == "episode")
    assert memory.stats()["episodes"] == n - len([g for g in gone if g.startswith("ep-")])
    later = memory.forget(since=T0 + timedelta(days=50))
    assert all(memory.get(i)["ts"] < (T0 + timedelta(days=50)).timestamp()
               for i in memory.graph if memory.get(i)["kind"] == "episode")
    assert later
    assert all("veterinary" not in it.text for it in memory.retrieve("veterinary school", k=30))
    memory.forget(everything=True)
    assert memory.stats()["episodes"] == 0 and memory.stats()["concepts"] == 0
    with pytest.raises(InvalidInputError):
        memory.forget()


async def test_async_twins(memory):
    ids = await memory.aadd_turns(bridge_conversation()[:6])
    one = await memory.aadd_turn("Sam: an async turn about kayaks")
    rep = await memory.aconsolidate()
    res = await memory.aretrieve("kayaks", k=3)
    assert res.items[0].id == one and len(ids) == 6 and rep.windows >= 1
    results = await asyncio.gather(*(memory.aretrieve("ski trip") for _ in range(5)))
    assert len({tuple(i.id for i in r.items) for r in results}) == 1
    assert (await memory.aforget([one]))[0] == one  # (+ concepts named only in that turn)

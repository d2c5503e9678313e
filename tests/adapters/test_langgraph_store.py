"""Conformance suite for LangGraph ``BaseStore`` implementations, run on ``SynapseStore``.

Neither the installed ``langgraph`` (1.2) nor ``langchain-tests`` (1.1) ships a conformance
suite for LangGraph's ``BaseStore`` (``langchain_tests.integration_tests.base_store`` covers
LangChain's key-value ``langchain_core.stores.BaseStore``, a different interface, and
``langgraph-checkpoint-conformance`` covers checkpointers only), so this is our own. To keep
it honest, every contract test also runs against LangGraph's own ``InMemoryStore`` as the
reference: a test that our store passes and the reference fails would be testing our
invention, not LangGraph's contract. Tests of what only SYNAPSE does (retrieval, the gate,
persistence, deletion removing a namespace from the listing) run on ``SynapseStore`` only.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore  # noqa: E402

from synapse_integrations.langgraph import SynapseStore  # noqa: E402
from synapse_integrations.namespace_keys import namespace_key  # noqa: E402

pytestmark = [pytest.mark.model]

FACTS = {
    "pet": {"text": "Sam adopted a beagle puppy called Biscuit.", "topic": "pets", "rank": 1},
    "city": {"text": "Sam's sister Ana moved to Lisbon last spring.", "topic": "family", "rank": 2},
    "music": {"text": "Sam is learning to play the cello on weekends.", "topic": "hobby", "rank": 3},
    "job": {"text": "Sam works night shifts as a nurse in Porto.", "topic": "work", "rank": 4},
    "ski": {"text": "Sam went skiing in Whistler with cousin Dana.", "topic": "travel", "rank": 5},
    "food": {"text": "Sam is allergic to peanuts and avoids satay.", "topic": "health", "rank": 6},
}


@pytest.fixture(params=["synapse", "reference"])
def store(request, tmp_path, embedder):
    if request.param == "reference":
        yield InMemoryStore()
        return
    s = SynapseStore(tmp_path / "store", embedder=embedder)
    yield s
    s.close()


#: SYNAPSE-specific behaviour: run on our store only (InMemoryStore is the contract reference)
synapse_only = pytest.mark.parametrize("store", ["synapse"], indirect=True)


def _fill(store: BaseStore, ns=("memories", "sam")) -> None:
    store.batch([PutOp(ns, key, value) for key, value in FACTS.items()])


@pytest.fixture(scope="module")
def filled(tmp_path_factory, embedder):
    """A SynapseStore holding FACTS, shared by the read-only retrieval tests."""
    s = SynapseStore(tmp_path_factory.mktemp("filled"), embedder=embedder)
    _fill(s)
    yield s
    s.close()


# -- get / put / delete ----------------------------------------------------------------------
def test_get_missing_is_none(store):
    assert store.get(("memories", "nobody"), "x") is None


def test_put_get_round_trip(store):
    store.put(("memories", "sam"), "pet", {"text": "a beagle", "tags": ["dog", "pet"], "n": 3,
                                            "nested": {"a": 1.5, "b": None, "ok": True}})
    item = store.get(("memories", "sam"), "pet")
    assert isinstance(item, Item)
    assert item.key == "pet" and item.namespace == ("memories", "sam")
    assert item.value == {"text": "a beagle", "tags": ["dog", "pet"], "n": 3,
                          "nested": {"a": 1.5, "b": None, "ok": True}}
    assert isinstance(item.created_at, datetime) and item.created_at.tzinfo is not None
    assert item.updated_at >= item.created_at


def test_value_is_copied(store):
    value = {"text": "original"}
    store.put(("ns",), "k", value)
    value["text"] = "changed by the caller"
    assert store.get(("ns",), "k").value == {"text": "original"}


def test_update_replaces_value_and_moves_updated_at(store):
    store.put(("memories", "sam"), "pet", {"text": "a beagle"})
    first = store.get(("memories", "sam"), "pet")
    store.put(("memories", "sam"), "pet", {"text": "two beagles"})
    second = store.get(("memories", "sam"), "pet")
    assert second.value == {"text": "two beagles"}
    assert second.updated_at >= first.updated_at
    assert len(store.search(("memories", "sam"))) == 1


@synapse_only
def test_update_keeps_created_at(store):
    store.put(("ns",), "k", {"text": "v1"})
    first = store.get(("ns",), "k")
    store.put(("ns",), "k", {"text": "v2"})
    assert store.get(("ns",), "k").created_at == first.created_at


def test_delete(store):
    store.put(("memories", "sam"), "pet", {"text": "a beagle"})
    store.put(("memories", "sam"), "city", {"text": "Lisbon"})
    store.delete(("memories", "sam"), "pet")
    assert store.get(("memories", "sam"), "pet") is None
    assert store.get(("memories", "sam"), "city").value == {"text": "Lisbon"}
    store.delete(("memories", "sam"), "never-existed")  # not an error


def test_namespaces_are_separate(store):
    store.put(("memories", "sam"), "k", {"text": "Sam's"})
    store.put(("memories", "ana"), "k", {"text": "Ana's"})
    store.put(("memories",), "k", {"text": "shared"})
    assert store.get(("memories", "sam"), "k").value == {"text": "Sam's"}
    assert store.get(("memories", "ana"), "k").value == {"text": "Ana's"}
    assert store.get(("memories",), "k").value == {"text": "shared"}


def test_keys_are_any_string(store):
    for key in ("a/b", "with space", "ünïcödé", "x" * 300):
        store.put(("ns",), key, {"text": key})
        assert store.get(("ns",), key).value == {"text": key}


@pytest.mark.parametrize("bad", [(), ("langgraph", "x"), ("a.b",), ("",), ("ok", 3)])
def test_invalid_namespaces_raise(store, bad):
    with pytest.raises(InvalidNamespaceError):
        store.put(bad, "k", {"text": "v"})


# -- search ----------------------------------------------------------------------------------
def test_search_without_query_lists_by_prefix(store):
    _fill(store)
    store.put(("memories", "ana"), "pet", {"text": "Ana has a cat", "topic": "pets", "rank": 9})
    store.put(("other",), "x", {"text": "unrelated", "topic": "pets", "rank": 0})
    found = store.search(("memories", "sam"), limit=100)
    assert all(isinstance(i, SearchItem) for i in found)
    assert {i.key for i in found} == set(FACTS)
    assert all(i.namespace == ("memories", "sam") for i in found)
    assert len(store.search(("memories",), limit=100)) == len(FACTS) + 1
    assert len(store.search((), limit=100)) == len(FACTS) + 2
    assert store.search(("nothing",)) == []


def test_search_limit_and_offset(store):
    _fill(store)
    all_keys = [i.key for i in store.search(("memories",), limit=100)]
    page1 = [i.key for i in store.search(("memories",), limit=2)]
    page2 = [i.key for i in store.search(("memories",), limit=2, offset=2)]
    rest = [i.key for i in store.search(("memories",), limit=100, offset=4)]
    assert len(page1) == len(page2) == 2 and len(rest) == len(FACTS) - 4
    assert page1 + page2 + rest == all_keys  # pages are consistent and complete
    assert store.search(("memories",), offset=100) == []


def test_search_filter(store):
    _fill(store)
    assert [i.key for i in store.search(("memories",), filter={"topic": "pets"})] == ["pet"]
    assert {i.key for i in store.search(("memories",), filter={"rank": {"$gt": 4}})} == {"ski", "food"}
    assert {i.key for i in store.search(("memories",), filter={"rank": {"$gte": 2, "$lt": 4}})} \
        == {"city", "music"}
    assert {i.key for i in store.search(("memories",), filter={"rank": {"$lte": 1}})} == {"pet"}
    assert len(store.search(("memories",), filter={"topic": {"$ne": "pets"}})) == len(FACTS) - 1
    assert [i.key for i in store.search(("memories",), filter={"topic": {"$eq": "work"}})] == ["job"]
    assert store.search(("memories",), filter={"topic": "pets", "rank": 2}) == []


def test_search_filter_nested(store):
    store.put(("ns",), "a", {"meta": {"lang": "pt", "level": 2}, "text": "Olá"})
    store.put(("ns",), "b", {"meta": {"lang": "en", "level": 1}, "text": "Hello"})
    assert [i.key for i in store.search(("ns",), filter={"meta": {"lang": "pt"}})] == ["a"]


@synapse_only
def test_search_without_query_newest_first(store):
    for key in ("first", "second", "third"):
        store.put(("ns",), key, {"text": key})
    assert [i.key for i in store.search(("ns",))] == ["third", "second", "first"]
    assert all(i.score is None for i in store.search(("ns",)))


def test_query_search_uses_synapse_retrieval(filled):
    store = filled
    hits = store.search(("memories", "sam"), query="What is the name of Sam's dog?", limit=3)
    assert hits and hits[0].key == "pet"
    assert all(isinstance(h.score, float) for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # the score is SYNAPSE's hybrid score of that node
    engine = store.pool.get(namespace_key("store", "store", "memories.sam"))
    top = engine.retrieve("What is the name of Sam's dog?", k=50).episodes()[0]
    assert hits[0].score == pytest.approx(top.score)
    # filter and offset apply to the ranked list
    assert all(h.value["topic"] == "family" for h in
               store.search(("memories",), query="Where does Ana live?", filter={"topic": "family"}))
    ranked = [h.key for h in store.search(("memories",), query="cello lessons", limit=10)]
    assert [h.key for h in store.search(("memories",), query="cello lessons", offset=1, limit=10)] \
        == ranked[1:]


def test_query_search_honours_the_gate(filled):
    store = filled
    query = "quantum chromodynamics on the lattice"
    engine = store.pool.get(namespace_key("store", "store", "memories.sam"))
    result = engine.retrieve(query, k=50)
    hits = store.search(("memories",), query=query)
    assert (hits == []) is result.rejected  # nothing when the gate says "nothing in memory"
    ungated = SynapseStore(store.pool, gate=False)
    assert len(ungated.search(("memories",), query=query)) > 0


@synapse_only
def test_index_false_and_index_fields(store):
    store.put(("ns",), "hidden", {"text": "Sam's locker code is 4512"}, index=False)
    store.put(("ns",), "shown", {"title": "Lockers", "body": "the gym has lockers"}, index=["body"])
    _fill(store, ("ns",))
    assert store.get(("ns",), "hidden").value["text"].startswith("Sam's locker")
    assert "hidden" in {i.key for i in store.search(("ns",), limit=100)}
    engine = store.pool.get(namespace_key("store", "store", "ns"))
    assert all(h.key != "hidden" for h in SynapseStore(store.pool, gate=False).search(
        ("ns",), query="locker code", limit=100))
    texts = {n: d["text"] for n, d in engine.graph.nodes(data=True) if d["kind"] == "episode"}
    assert texts["kv:shown#a"] == "the gym has lockers"  # only the indexed field


# -- list namespaces -------------------------------------------------------------------------
def test_list_namespaces(store):
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f",), ("g", "b", "c")]:
        store.put(ns, "k", {"text": "v"})
    assert store.list_namespaces() == sorted([("a", "b", "c"), ("a", "b", "d"), ("a", "e"),
                                              ("f",), ("g", "b", "c")])
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("g", "b", "c")]
    assert store.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("g", "b", "c")]
    assert store.list_namespaces(prefix=("a",), suffix=("d",)) == [("a", "b", "d")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("f",), ("g", "b")]
    assert store.list_namespaces(limit=2) == [("a", "b", "c"), ("a", "b", "d")]
    assert store.list_namespaces(limit=2, offset=3) == [("f",), ("g", "b", "c")]


@synapse_only
def test_deleting_the_last_item_removes_the_namespace(store):
    store.put(("a",), "k", {"text": "v"})
    store.put(("b",), "k", {"text": "v"})
    store.delete(("a",), "k")
    assert store.list_namespaces() == [("b",)]
    assert store.search(("a",)) == []


# -- batch, async ----------------------------------------------------------------------------
def test_batch_returns_results_in_order(store):
    store.put(("ns",), "x", {"text": "ex"})
    results = store.batch([
        GetOp(("ns",), "x"),
        PutOp(("ns",), "y", {"text": "why"}),
        SearchOp(("nothing",)),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("ns",)),)),
        GetOp(("ns",), "missing"),
    ])
    assert len(results) == 5
    assert results[0].value == {"text": "ex"} and results[1] is None and results[2] == []
    assert results[3] == [("ns",)] and results[4] is None
    assert store.get(("ns",), "y").value == {"text": "why"}


def test_batch_put_none_deletes(store):
    store.put(("ns",), "x", {"text": "ex"})
    store.batch([PutOp(("ns",), "x", None), PutOp(("ns",), "z", {"text": "zed"})])
    assert store.get(("ns",), "x") is None and store.get(("ns",), "z").value == {"text": "zed"}


async def test_async_api(store):
    await store.aput(("memories", "sam"), "pet", {"text": "Sam has a beagle called Biscuit."})
    await asyncio.gather(*(store.aput(("memories", "sam"), k, v) for k, v in FACTS.items() if k != "pet"))
    item = await store.aget(("memories", "sam"), "pet")
    assert item.value == {"text": "Sam has a beagle called Biscuit."}
    assert len(await store.asearch(("memories",), limit=100)) == len(FACTS)
    assert [i.key for i in await store.asearch(("memories",), filter={"topic": "hobby"})] == ["music"]
    assert await store.alist_namespaces() == [("memories", "sam")]
    await store.adelete(("memories", "sam"), "pet")
    assert await store.aget(("memories", "sam"), "pet") is None
    results = await store.abatch([GetOp(("memories", "sam"), "city"), SearchOp(("memories",), limit=1)])
    assert results[0].key == "city" and len(results[1]) == 1


async def test_async_query_search(filled):
    store = filled
    hits = await store.asearch(("memories",), query="Which instrument does Sam play?", limit=2)
    assert hits and hits[0].key == "music"


# -- persistence -----------------------------------------------------------------------------
@synapse_only
def test_persists_across_reopen(tmp_path, embedder, store):
    path = tmp_path / "persist"
    with SynapseStore(path, embedder=embedder) as s:
        _fill(s)
        s.put(("other", "ns"), "k", {"text": "v"})
        s.delete(("memories", "sam"), "job")
        created = s.get(("memories", "sam"), "pet").created_at
    with SynapseStore(path, embedder=embedder) as s:
        assert s.list_namespaces() == [("memories", "sam"), ("other", "ns")]
        assert s.get(("memories", "sam"), "pet").created_at == created
        assert s.get(("memories", "sam"), "job") is None
        assert len(s.search(("memories",), limit=100)) == len(FACTS) - 1
        assert s.search(("memories",), query="Where did Sam go skiing?", limit=1)[0].key == "ski"


@synapse_only
def test_batch_checks_labels_of_ops_passed_directly(store):
    # BaseStore's methods validate namespaces, but ops given to batch() skip them; a "." would
    # otherwise alias ("a", "b") through the namespace mapping
    store.put(("a", "b"), "k", {"text": "v"})
    for op in (GetOp(("a.b",), "k"), PutOp(("a.b",), "k", {"text": "x"}), SearchOp(("a.b",)),
               ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a.b",)),))):
        with pytest.raises(InvalidNamespaceError):
            store.batch([op])
    assert store.list_namespaces() == [("a", "b")]

"""The adapters' usage-feedback hooks, with the frameworks' real classes: the LangChain
retriever's ``feedback``, the ``memory_feedback`` tool, LangGraph's ``used_key``."""

from __future__ import annotations

import asyncio

import pytest

from synapse_integrations import InvalidTypeError, Synapse, SynapseConfig
from synapse_integrations._adapter_utils import feedback_engine, memory_ids

pytest.importorskip("langchain_core")

from _adapter_data import MODEL_TURNS  # noqa: E402

TURNS = MODEL_TURNS[:6]
CFG = SynapseConfig(model="evermind", model_params={"evermind": {"floor": 0.0}})


@pytest.fixture
def mem(tmp_path, embedder):
    m = Synapse(tmp_path / "m", embedder=embedder, config=CFG)
    m.add_turns([{"text": t, "id": f"t{i}"} for i, t in enumerate(TURNS)])
    m.consolidate()
    yield m
    m.close()


def _weights(mem):
    with mem.inspect_retrieval() as steps:
        e = steps.retriever.model("evermind").learnable_edges(steps.view, CFG)
        return {(steps.view.ids[a], steps.view.ids[b]): float(w)
                for a, b, w in zip(e.src, e.dst, e.weight)}


def test_memory_ids_reads_documents_dicts_and_ids():
    from langchain_core.documents import Document

    assert memory_ids([Document("x", metadata={"id": "t1"}), {"id": "t2"}, "t3"], "used") == \
        ["t1", "t2", "t3"]
    with pytest.raises(InvalidTypeError, match="must be a list"):
        memory_ids("t1", "used")
    with pytest.raises(InvalidTypeError, match="carries no memory id"):
        memory_ids([Document("no id")], "used")
    with pytest.raises(InvalidTypeError, match="takes no usage feedback"):
        feedback_engine(object())


def test_langchain_retriever_feedback_with_documents(mem):
    from synapse_integrations.langchain import SynapseRetriever

    retriever = SynapseRetriever(engine=mem, k=4)
    docs = retriever.invoke("skiing at Whistler")
    assert len(docs) >= 2
    before = _weights(mem)
    rep = retriever.feedback("skiing at Whistler", used=docs[:2], unused=docs[2:])
    assert rep.used == tuple(d.metadata["id"] for d in docs[:2])
    assert rep.unused == tuple(d.metadata["id"] for d in docs[2:])
    after = _weights(mem)
    a, b = rep.used
    for pair in ((a, b), (b, a)):
        if pair in before:
            assert after[pair] == pytest.approx(min(1.0, before[pair] + 0.1))
    rep2 = asyncio.run(retriever.afeedback("skiing at Whistler", used=[a]))
    assert rep2.used == (a,)


def test_langchain_memory_feedback_tool(mem):
    from synapse_integrations.langchain import create_synapse_tools

    search, feedback = create_synapse_tools(mem, include=("search", "feedback"))
    assert feedback.name == "memory_feedback"
    out = feedback.invoke({"query": "skiing", "used_ids": ["t0", "t1"], "unused_ids": ["t5"]})
    assert out.startswith("Noted:")
    refused = feedback.invoke({"query": "skiing", "used_ids": ["nope"], "unused_ids": []})
    assert refused.startswith("Refused:") and "nope" in refused
    # the default tool set is unchanged
    assert [t.name for t in create_synapse_tools(mem)] == [
        "search_memory", "save_memory", "update_memory", "forget_memory"]


def test_langgraph_record_node_gives_feedback_from_used_key(mem):
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph

    from synapse_integrations.langgraph import SynapseMemoryNodes, SynapseMemoryState

    nodes = SynapseMemoryNodes(mem, k=4, used_key="memories_used")

    def agent(state):  # cites the first two recalled memories
        used = [m["id"] for m in state["memories"][:2]]
        return {"messages": [AIMessage("You skied at Whistler.")], "memories_used": used}

    builder = StateGraph(SynapseMemoryState)
    builder.add_node("recall", nodes.recall)
    builder.add_node("agent", agent)
    builder.add_node("record", nodes.record)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "agent")
    builder.add_edge("agent", "record")
    builder.add_edge("record", END)
    graph = builder.compile()
    before = _weights(mem)
    out = graph.invoke({"messages": [("user", "Where did I go skiing?")]})
    a, b = out["memories_used"]
    after = _weights(mem)
    changed = {p for p in after if p in before and after[p] != before[p]}
    assert changed, "the record node gave no feedback"
    for pair in ((a, b), (b, a)):
        if pair in before:
            assert after[pair] == pytest.approx(min(1.0, before[pair] + 0.1))
    # without used_key nothing is learned
    plain = SynapseMemoryNodes(mem, k=4)
    snapshot = _weights(mem)
    plain.record.invoke({"messages": [("user", "Where did I go skiing?"),
                                      AIMessage("Whistler.")], "memories_used": [a]})
    now = _weights(mem)  # the recorded turns join the k-NN graph; common links are unchanged
    common = [p for p in now if p in snapshot]
    assert common and all(now[p] == snapshot[p] for p in common)
    with pytest.raises(TypeError, match="used_key"):
        SynapseMemoryNodes(mem, used_key=3)


@pytest.mark.server
def test_feedback_over_rest(tmp_path):
    pytest.importorskip("fastapi")
    from _server_helpers import rest_server

    from synapse_integrations import HashingEmbedder, NodeNotFoundError
    from synapse_integrations.server.client import RemoteMemory

    with rest_server(tmp_path / "mem", embedder=HashingEmbedder()) as srv:
        remote = RemoteMemory(srv.url, "fb")
        try:
            remote.add_turns([{"text": t, "id": f"t{i}"} for i, t in enumerate(TURNS)])
            remote.consolidate()
            rep = remote.feedback("skiing", ["t0", "t1"], ["t5"], alpha=0.2)
            assert rep.used == ("t0", "t1") and rep.unused == ("t5",)
            assert rep.graph == "memory" and rep.model == "synapse"
            assert asyncio.run(remote.afeedback("skiing", ["t0"])).used == ("t0",)
            with pytest.raises(NodeNotFoundError):
                remote.feedback("skiing", ["nope"])
            with pytest.raises(InvalidTypeError):
                remote.feedback("skiing", "t0")
        finally:
            remote.close()


def test_llama_index_retriever_feedback_with_nodes(mem):
    pytest.importorskip("llama_index.core")
    from synapse_integrations.llama_index import SynapseRetriever

    retriever = SynapseRetriever(mem, k=4)
    nodes = retriever.retrieve("skiing at Whistler")
    rep = retriever.feedback("skiing at Whistler", used=nodes[:2], unused=nodes[2:])
    assert rep.used == tuple(n.node.node_id for n in nodes[:2])
    assert rep.unused == tuple(n.node.node_id for n in nodes[2:])
    assert asyncio.run(retriever.afeedback("skiing", used=[nodes[0]])).used == (nodes[0].node.node_id,)

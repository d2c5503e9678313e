"""Issue 11: the optional LLM judge in every adapter's recall path where a model reads
memories (LangChain middleware, tools and classic memory; LangGraph nodes and store;
LlamaIndex retriever and memory block), sync and async, through the frameworks' real
classes with langchain-core's fake chat models."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core")

from _adapter_data import ANSWERABLE, demo_turns  # noqa: E402
from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    FakeListChatModel,
    FakeMessagesListChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from synapse_integrations import Synapse  # noqa: E402
from synapse_integrations.gate_judge import LLMGateJudge  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:.*deprecated.*")]

NO = '{"supported": false, "quote": ""}'
YES = '{"supported": true, "quote": "Sam went skiing in Whistler"}'


def judge(reply: str) -> LLMGateJudge:
    return LLMGateJudge(FakeListChatModel(responses=[reply]))


@pytest.fixture(scope="module")
def mem(tmp_path_factory, embedder):
    with Synapse(tmp_path_factory.mktemp("judge") / "mem", namespace="demo", embedder=embedder) as m:
        m.add_turns(demo_turns())
        assert not m.retrieve(ANSWERABLE, k=3).rejected  # the offline gate accepts it
        yield m


class Seeing(FakeMessagesListChatModel):
    """A fake agent model that accepts tools and keeps the system text it was given."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN003
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001
        self.seen.append("\n".join(m.content for m in messages if m.type == "system"))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


@pytest.mark.parametrize("is_async", [False, True])
def test_langchain_middleware_with_a_judge(mem, is_async):
    from langchain.agents import create_agent

    from synapse_integrations.langchain import SynapseMemoryMiddleware

    for reply, shown in ((NO, False), (YES, True)):
        model = Seeing(seen=[], responses=[AIMessage("ok")])
        agent = create_agent(model, middleware=[SynapseMemoryMiddleware(mem, k=3, record=False,
                                                                         judge=judge(reply))])
        run = {"messages": [HumanMessage(ANSWERABLE)]}
        asyncio.run(agent.ainvoke(run)) if is_async else agent.invoke(run)
        [system] = model.seen
        assert ("Whistler" in system) is shown
        assert ("Nothing relevant in memory. (Memory check: the judge" in system) is not shown


def test_langchain_tools_and_classic_memory_with_a_judge(mem):
    from synapse_integrations.langchain import SynapseMemory, create_synapse_tools

    [search] = create_synapse_tools(mem, k=3, include=("search",), judge=judge(NO))
    out = search.invoke({"query": ANSWERABLE})
    assert out.startswith("Nothing relevant in memory.") and "judge" in out
    assert asyncio.run(search.ainvoke({"query": ANSWERABLE})) == out
    [search] = create_synapse_tools(mem, k=3, include=("search",), judge=judge(YES))
    assert "Whistler" in search.invoke({"query": ANSWERABLE})

    memory = SynapseMemory(engine=mem, k=3, judge=judge(NO))
    assert memory.load_memory_variables({"input": ANSWERABLE})["history"].startswith(
        "Nothing relevant in memory.")
    yes = SynapseMemory(engine=mem, k=3, judge=judge(YES))
    assert "Whistler" in asyncio.run(yes.aload_memory_variables({"input": ANSWERABLE}))["history"]


def test_langgraph_nodes_and_store_with_a_judge(mem, tmp_path, embedder):
    from langgraph.graph import END, START, StateGraph

    from synapse_integrations.langgraph import SynapseMemoryNodes, SynapseMemoryState, SynapseStore

    def graph(j: LLMGateJudge):
        nodes = SynapseMemoryNodes(mem, k=3, judge=j)
        builder = StateGraph(SynapseMemoryState)
        builder.add_node("recall", nodes.recall)
        builder.add_edge(START, "recall")
        builder.add_edge("recall", END)
        return builder.compile()

    run = {"messages": [HumanMessage(ANSWERABLE)]}
    out = graph(judge(NO)).invoke(run)
    assert out["memory_rejected"] is True and out["memories"] == []
    out = asyncio.run(graph(judge(YES)).ainvoke(run))
    assert out["memory_rejected"] is False and out["memories"]

    store = SynapseStore(tmp_path / "store", embedder=embedder)
    store.put(("u1",), "ski", {"text": "Sam went skiing in Whistler with Dana."})
    store.put(("u1",), "cello", {"text": "Riley practises the cello every evening."})
    ask = ("Where did Sam go skiing?")
    assert [i.key for i in store.search(("u1",), query=ask)][:1] == ["ski"]
    no = SynapseStore(store.pool, judge=judge(NO))
    assert no.search(("u1",), query=ask) == []
    assert asyncio.run(no.asearch(("u1",), query=ask)) == []
    yes = SynapseStore(store.pool, judge=judge(YES))
    assert [i.key for i in yes.search(("u1",), query=ask)][:1] == ["ski"]
    store.close()


def test_llama_index_retriever_and_memory_block_with_a_judge(mem):
    pytest.importorskip("llama_index.core")
    from synapse_integrations.llama_index import SynapseMemoryBlock, SynapseRetriever

    assert SynapseRetriever(mem, k=3, judge=judge(NO)).retrieve(ANSWERABLE) == []
    assert asyncio.run(SynapseRetriever(mem, k=3, judge=judge(NO)).aretrieve(ANSWERABLE)) == []
    nodes = SynapseRetriever(mem, k=3, judge=judge(YES)).retrieve(ANSWERABLE)
    assert any("Whistler" in n.node.get_content() for n in nodes)

    from llama_index.core.base.llms.types import ChatMessage

    ask = [ChatMessage(role="user", content=ANSWERABLE)]
    block = SynapseMemoryBlock(engine=mem, k=3, judge=judge(NO), record_history=False)
    assert asyncio.run(block.aget(ask)).startswith("Nothing relevant in memory. (Memory check: the judge")
    block = SynapseMemoryBlock(engine=mem, k=3, judge=judge(YES), record_history=False)
    assert "Whistler" in asyncio.run(block.aget(ask))

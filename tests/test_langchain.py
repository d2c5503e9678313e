"""LangChain adapter on the real engine: the standard retriever suite, an LCEL chain, the
classic memory, the chat history with RunnableWithMessageHistory, and a create_agent agent."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core")

from _adapter_data import ANSWERABLE, UNANSWERABLE, demo_turns  # noqa: E402
from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    FakeListChatModel,
    FakeMessagesListChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402
from langchain_tests.integration_tests import RetrieversIntegrationTests  # noqa: E402

from synapse_integrations import Synapse  # noqa: E402
from synapse_integrations._adapter_utils import EnginePool  # noqa: E402
from synapse_integrations.pool import namespace_key  # noqa: E402
from synapse_integrations.langchain import (  # noqa: E402
    SynapseChatMessageHistory,
    SynapseMemory,
    SynapseMemoryMiddleware,
    SynapseRetriever,
    create_synapse_tools,
    format_documents,
)

pytestmark = [pytest.mark.model, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:.*deprecated.*")]

_ENGINE: dict[str, Synapse] = {}


@pytest.fixture(scope="module", autouse=True)
def demo_engine(tmp_path_factory, embedder):
    """One engine holding the demo conversation, shared by the read-only tests of this module."""
    mem = Synapse(tmp_path_factory.mktemp("lc") / "mem", namespace="demo", embedder=embedder)
    mem.add_turns(demo_turns())
    _ENGINE["demo"] = mem
    yield mem
    mem.close()


class TestSynapseRetrieverStandard(RetrieversIntegrationTests):
    """langchain-tests' own retriever suite, unmodified."""

    @property
    def retriever_constructor(self) -> type[SynapseRetriever]:
        return SynapseRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"engine": _ENGINE["demo"]}

    @property
    def retriever_query_example(self) -> str:
        return ANSWERABLE


def test_documents_carry_metadata(demo_engine):
    docs = SynapseRetriever(engine=demo_engine, k=5, kinds=("episode",)).invoke(ANSWERABLE)
    assert docs and "Whistler" in " ".join(d.page_content for d in docs)
    meta = docs[0].metadata
    assert set(meta) >= {"id", "kind", "speaker", "timestamp", "score", "components", "path"}
    assert meta["kind"] == "episode" and meta["timestamp"].startswith("2024-")
    assert set(meta["components"]) == {"similarity", "activation", "pagerank", "bm25_rank", "dense_rank"}
    assert docs[0].id == meta["id"]


class _Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.custom: list[tuple[str, Any]] = []
        self.texts: list[str] = []

    def on_custom_event(self, name, data, *, run_id, tags=None, metadata=None, **kw):  # noqa: ANN001
        self.custom.append((name, data))

    def on_text(self, text, **kw):  # noqa: ANN001
        self.texts.append(text)


async def test_gate_rejection_returns_nothing_and_says_so(demo_engine):
    retriever = SynapseRetriever(engine=demo_engine)
    for run in ("sync", "async"):
        events = _Events()
        cfg = {"callbacks": [events]}
        docs = (retriever.invoke(UNANSWERABLE, cfg) if run == "sync"
                else await retriever.ainvoke(UNANSWERABLE, cfg))
        assert docs == []
        assert events.custom and events.custom[0][0] == "synapse_gate_rejected"
        assert events.custom[0][1]["rejected"] is True
        assert events.texts and "nothing in memory" in events.texts[0]
    assert format_documents([]) == "Nothing relevant in memory."
    kept = SynapseRetriever(engine=demo_engine, include_rejected=True).invoke(UNANSWERABLE)
    assert kept  # the ranked items are still available on request


async def test_lcel_chain_fed_by_the_retriever(demo_engine):
    retriever = SynapseRetriever(engine=demo_engine, k=4, kinds=("episode",))
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from these memories:\n{memories}"), ("human", "{question}")])
    model = FakeListChatModel(responses=["Whistler, with Dana."])
    inputs = {"memories": retriever | format_documents, "question": RunnablePassthrough()}
    shown = (inputs | prompt).invoke(ANSWERABLE).to_messages()
    assert "Whistler" in shown[0].content and shown[1].content == ANSWERABLE
    assert (inputs | prompt | model).invoke(ANSWERABLE).content == "Whistler, with Dana."
    nothing = (await (inputs | prompt).ainvoke(UNANSWERABLE)).to_messages()
    assert "Nothing relevant in memory." in nothing[0].content


async def test_classic_memory_records_both_sides(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        memory = SynapseMemory(engine=mem, k=5, input_key="input")
        assert memory.memory_variables == ["history"]
        memory.save_context({"input": "My sister Ana moved to Lisbon."}, {"output": "Lisbon is lovely!"})
        await memory.asave_context({"input": "I adopted a beagle called Biscuit."}, {"output": "Cute!"})
        memory.save_context({"input": "I work as a nurse in Porto."}, {"output": "Busy job!"})
        speakers = {d["speaker"] for _, d in mem.graph.nodes(data=True) if d["kind"] == "episode"}
        assert speakers == {"Human", "AI"}
        out = memory.load_memory_variables({"input": "Where does Ana live?"})
        assert "Lisbon" in out["history"]
        msgs = await SynapseMemory(engine=mem, return_messages=True).aload_memory_variables(
            {"input": "What is my dog called?"})
        assert "Biscuit" in msgs["history"][0].content
        memory.clear()
        assert mem.stats()["episodes"] == 0


async def test_message_history_with_runnable_with_message_history(tmp_path, embedder):
    pool = EnginePool(tmp_path, embedder=embedder)
    prompt = ChatPromptTemplate.from_messages([
        MessagesPlaceholder("history"), ("human", "{question}")])
    seen: list[list] = []

    def spy(value):  # noqa: ANN001
        seen.append(value.to_messages())
        return value

    chain = prompt | spy | FakeListChatModel(responses=["Noted.", "You said Biscuit."])
    chat = RunnableWithMessageHistory(
        chain, lambda session_id: SynapseChatMessageHistory(pool, session_id=session_id),
        input_messages_key="question", history_messages_key="history")
    cfg = {"configurable": {"session_id": "s1"}}
    chat.invoke({"question": "My dog is called Biscuit."}, cfg)
    answer = await chat.ainvoke({"question": "What is my dog called?"}, cfg)
    assert answer.content == "You said Biscuit."
    assert [m.content for m in seen[1][:2]] == ["My dog is called Biscuit.", "Noted."]
    history = SynapseChatMessageHistory(pool, session_id="s1")
    assert [type(m) for m in history.messages] == [HumanMessage, AIMessage, HumanMessage, AIMessage]
    assert len(await history.aget_messages()) == 4
    assert SynapseChatMessageHistory(pool, session_id="s2").messages == []  # sessions are separate
    # the history is also searchable memory
    assert any("Biscuit" in it.text for it in pool.get(namespace_key("history", "session", "s1")).retrieve("dog name", k=3).items)
    history.clear()
    assert history.messages == []
    pool.close()


class ToolCallingFake(FakeMessagesListChatModel):
    """A fake chat model that accepts tools and records the prompts it was given."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN003
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _system_text(messages) -> str:  # noqa: ANN001
    return "\n".join(m.content for m in messages if m.type == "system")


async def test_create_agent_with_middleware_over_several_turns(tmp_path, embedder):
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    pool = EnginePool(tmp_path, embedder=embedder)
    model = ToolCallingFake(seen=[], responses=[
        AIMessage("Lisbon is lovely."),                                     # turn 1
        AIMessage("", tool_calls=[{"name": "search_memory", "id": "c1",
                                   "args": {"query": "Where does Ana live?"}}]),  # turn 2
        AIMessage("Ana lives in Lisbon."),
        AIMessage("", tool_calls=[{"name": "save_memory", "id": "c2",
                                   "args": {"text": "Ana's birthday is on May 3."}}]),  # turn 3
        AIMessage("Saved."),
    ])
    agent = create_agent(model, tools=create_synapse_tools(pool),
                         middleware=[SynapseMemoryMiddleware(pool, k=5)],
                         system_prompt="You are helpful.", checkpointer=InMemorySaver())
    pool.get(namespace_key("agent", "user_id", "u1")).add_turns(demo_turns(10))  # a user with some history already
    user = {"configurable": {"thread_id": "t1", "user_id": "u1"}}
    agent.invoke({"messages": [HumanMessage("My sister Ana moved to Lisbon last year.")]}, user)
    # a new thread of the same user: the memory comes from SYNAPSE, not from the checkpoint
    other_thread = {"configurable": {"thread_id": "t2", "user_id": "u1"}}
    out = await agent.ainvoke({"messages": [HumanMessage("Where does my sister live?")]}, other_thread)
    assert out["messages"][-1].content == "Ana lives in Lisbon."
    assert "Lisbon" in out["messages"][-2].content  # the search_memory tool's answer
    assert "Lisbon" in _system_text(model.seen[1])  # recalled before the model call
    assert _system_text(model.seen[1]).startswith("You are helpful.")
    agent.invoke({"messages": [HumanMessage("Remember Ana's birthday.")]}, other_thread)

    mem = pool.get(namespace_key("agent", "user_id", "u1"))
    texts = [d["text"] for _, d in mem.graph.nodes(data=True) if d["kind"] == "episode"]
    assert "My sister Ana moved to Lisbon last year." in texts and "Ana lives in Lisbon." in texts
    assert "Ana's birthday is on May 3." in texts  # saved by the tool
    assert not any(t == "" for t in texts)
    assert len(texts) == 10 + 7  # history + 3 turns x (user + answer) + 1 saved fact; tool-call steps not recorded
    assert pool.namespaces() == ["@agent:user_id:u1"]
    pool.close()


def test_tools_answer_nothing_in_memory(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        search, save = create_synapse_tools(mem)
        assert (search.name, save.name) == ("search_memory", "save_memory")
        assert search.invoke({"query": "anything"}) == "Nothing relevant in memory."
        assert save.invoke({"text": "Sam likes green tea."}).startswith("Saved memory ")
        for fact in ("Sam plays the cello.", "Sam lives in Denver.", "Sam has a dog named Miso.",
                     "Sam's cousin Dana studies architecture."):
            save.invoke({"text": fact})
        assert "green tea" in search.invoke({"query": "What does Sam like to drink?"})

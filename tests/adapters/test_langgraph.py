"""LangGraph adapter on the real engine: the memory nodes in ``StateGraph``s (``MessagesState``
and a user's own schema), checkpointers (``InMemorySaver``, ``SqliteSaver`` across a process
restart) and ``SynapseStore`` used by ``compile(store=...)`` and ``create_agent(store=...)``.
The store's own conformance suite is in test_langgraph_store.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from _adapter_data import demo_turns  # noqa: E402
from langchain.tools import ToolRuntime, tool  # noqa: E402
from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    FakeListChatModel,
    FakeMessagesListChatModel,
)
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402
from typing_extensions import Annotated  # noqa: E402

from synapse_integrations import Synapse  # noqa: E402
from synapse_integrations._adapter_utils import (  # noqa: E402
    EnginePool,
    format_memories,
    list_episodes,
)
from synapse_integrations.errors import InvalidInputError  # noqa: E402
from synapse_integrations.langgraph import (  # noqa: E402
    MEMORY_MESSAGE_ID,
    SynapseMemoryNodes,
    SynapseMemoryState,
    SynapseStore,
)
from synapse_integrations.namespace_keys import namespace_key  # noqa: E402

#: the memory the nodes use for user u1 (a typed key: see synapse_integrations.pool)
USER_U1 = namespace_key("agent", "user_id", "u1")

pytestmark = [pytest.mark.model, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


class SpyModel(FakeListChatModel):
    """A fake chat model that remembers the prompts it was given."""

    seen: list = []

    def _call(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001
        self.seen.append(list(messages))
        return super()._call(messages, stop=stop, run_manager=run_manager, **kwargs)


def build(memory: SynapseMemoryNodes, model: Any, state: type = MessagesState, **compile_kw: Any):
    def agent(s: dict) -> dict:
        return {"messages": [model.invoke(s["messages"])]}

    async def aagent(s: dict) -> dict:
        return {"messages": [await model.ainvoke(s["messages"])]}

    from langchain_core.runnables import RunnableLambda

    builder = StateGraph(state)
    builder.add_node("recall", memory.recall)
    builder.add_node("agent", RunnableLambda(agent, afunc=aagent))
    builder.add_node("record", memory.record)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "agent")
    builder.add_edge("agent", "record")
    builder.add_edge("record", END)
    return builder.compile(**compile_kw)


def _episodes(engine: Synapse) -> list[tuple[str, str]]:
    return [(e["speaker"], e["text"]) for e in list_episodes(engine)]


async def test_messages_state_graph_recalls_and_records(tmp_path, embedder):
    pool = EnginePool(tmp_path, embedder=embedder)
    pool.get(USER_U1).add_turns(demo_turns(10))  # a user with some history
    model = SpyModel(seen=[], responses=["Lisbon is lovely.", "Biscuit is a great name.",
                                         "Your sister Ana lives in Lisbon."])
    graph = build(SynapseMemoryNodes(pool, k=5), model, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t1", "user_id": "u1"}}
    graph.invoke({"messages": [HumanMessage("My sister Ana moved to Lisbon last year.")]}, cfg)
    await graph.ainvoke({"messages": [HumanMessage("I adopted a beagle called Biscuit.")]}, cfg)
    out = graph.invoke({"messages": [HumanMessage("Tell me about Ana and Lisbon.")]}, cfg)

    # the conversation (checkpoint) holds exactly one memory message: the leading system
    # message (issue 13: a system message after the user's is refused by Anthropic)
    messages = out["messages"]
    memo = [m for m in messages if isinstance(m, SystemMessage)]
    assert len(memo) == 1 and messages[0] is memo[0] and memo[0].id.startswith(MEMORY_MESSAGE_ID)
    assert messages[-2].content == "Tell me about Ana and Lisbon."
    assert "Lisbon" in memo[0].content.split("\n", 1)[1]  # recalled from SYNAPSE
    assert model.seen[-1][0].id == memo[0].id  # the model saw it, first
    assert all(sum(isinstance(m, SystemMessage) for m in seen) == 1 for seen in model.seen)
    # MessagesState has no "memories" key: LangGraph drops it, nothing else changes
    assert "memories" not in out
    # each finished turn is recorded once, both sides, in the user's memory
    eps = _episodes(pool.get(USER_U1))[10:]
    assert eps == [("user", "My sister Ana moved to Lisbon last year."), ("assistant", "Lisbon is lovely."),
                   ("user", "I adopted a beagle called Biscuit."), ("assistant", "Biscuit is a great name."),
                   ("user", "Tell me about Ana and Lisbon."), ("assistant", "Your sister Ana lives in Lisbon.")]
    assert pool.namespaces() == [USER_U1]
    pool.close()


def test_synapse_memory_state_keeps_memories_and_message(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        mem.add_turns(demo_turns(10))
        question = "Whistler ski trip with Dana"
        direct = mem.retrieve(question, k=3)
        out = build(SynapseMemoryNodes(mem, k=3), FakeListChatModel(responses=["ok"]),
                    state=SynapseMemoryState).invoke({"messages": [HumanMessage(question)]})
        assert out["memory_rejected"] is direct.rejected
        assert [m["id"] for m in out["memories"]] == [it.id for it in direct.accepted]
        memo = out["messages"][0]
        assert memo.id.startswith(MEMORY_MESSAGE_ID)
        for m in out["memories"]:  # the same memories, as text, in the system message
            assert m["text"] in memo.content


class MyState(TypedDict):
    """A user's own schema: other key names, memories kept apart from the messages."""

    chat: Annotated[list[AnyMessage], add_messages]
    recalled: list[dict]
    memory_rejected: bool


async def test_own_state_schema_and_record_is_idempotent(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        mem.add_turns(demo_turns(10))
        memory = SynapseMemoryNodes(mem, k=4, memories_key="recalled", system_message=False,
                                    messages_key="chat")
        seen = []

        def agent(s: MyState) -> dict:
            seen.append(s["recalled"])
            return {"chat": [AIMessage("Whistler.")]}

        builder = StateGraph(MyState)
        builder.add_node("recall", memory.recall)
        builder.add_node("agent", agent)
        builder.add_node("record", memory.record)
        builder.add_edge(START, "recall")
        builder.add_edge("recall", "agent")
        builder.add_edge("agent", "record")
        builder.add_edge("record", END)
        graph = builder.compile()
        direct = mem.retrieve("Where did Sam go skiing?", k=4)
        out = await graph.ainvoke({"chat": [HumanMessage("Where did Sam go skiing?")]})
        assert [m.type for m in out["chat"]] == ["human", "ai"]  # no system message added
        assert out["memory_rejected"] is direct.rejected
        assert [r["id"] for r in out["recalled"]] == [it.id for it in direct.accepted]
        if not direct.rejected:  # each memory says why it was activated
            assert {"text", "score", "components", "path"} <= set(out["recalled"][0])
            assert "Whistler" in " ".join(r["text"] for r in out["recalled"])
        n = mem.stats()["episodes"]
        assert n == 10 + 2
        # replaying the record node on the same state records nothing twice
        memory.record.invoke(out, {})
        await memory.record.ainvoke(out, {})
        assert mem.stats()["episodes"] == n


def test_gate_rejection_says_nothing_in_memory(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        mem.add_turns(demo_turns(10))
        query = "quantum chromodynamics on the lattice"
        assert mem.retrieve(query, k=5).rejected
        update = SynapseMemoryNodes(mem).recall.invoke({"messages": [HumanMessage(query)]}, {})
        assert update["memories"] == [] and update["memory_rejected"] is True
        # the list is rewritten with the new leading memory message in front
        assert update["messages"][1].content.endswith("Nothing relevant in memory.")
        assert update["messages"][2].content == query
        assert SynapseMemoryNodes(mem).recall.invoke({"messages": []}, {}) == \
            {"memories": [], "memory_rejected": False}  # no user message: no retrieval


def test_namespace_keys_choose_the_memory(tmp_path, embedder):
    pool = EnginePool(tmp_path, embedder=embedder)
    graph = build(SynapseMemoryNodes(pool, namespace_keys=("tenant", "thread_id")),
                  FakeListChatModel(responses=["ok"] * 4), checkpointer=InMemorySaver())
    graph.invoke({"messages": [HumanMessage("hello from acme")]},
                 {"configurable": {"thread_id": "t1", "tenant": "acme"}})
    graph.invoke({"messages": [HumanMessage("hello from thread two")]}, {"configurable": {"thread_id": "t2"}})
    assert pool.namespaces() == ["@agent:tenant:acme", "@agent:thread_id:t2"]
    assert _episodes(pool.get(namespace_key("agent", "tenant", "acme"))) == \
        [("user", "hello from acme"), ("assistant", "ok")]
    with pytest.raises(InvalidInputError, match="config\\['configurable'\\]"):
        build(SynapseMemoryNodes(pool, namespace_keys=("user_id",)),
              FakeListChatModel(responses=["ok"])).invoke({"messages": [HumanMessage("hi")]})
    pool.close()


def test_tool_calls_are_not_recorded_until_the_turn_ends(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        nodes = SynapseMemoryNodes(mem)
        asking = {"messages": [HumanMessage("What's the weather?", id="h1"),
                               AIMessage("", id="a1", tool_calls=[{"name": "weather", "args": {}, "id": "c1"}])]}
        nodes.record.invoke(asking, {})
        assert mem.stats()["episodes"] == 0
        done = {"messages": [*asking["messages"], AIMessage("Sunny.", id="a2")]}
        nodes.record.invoke(done, {})
        assert _episodes(mem) == [("user", "What's the weather?"), ("assistant", "Sunny.")]
        assert {n for n in mem.graph} >= {"msg-h1", "msg-a2"}


# -- restart with SqliteSaver ------------------------------------------------------------------
SECOND_HALF = textwrap.dedent('''
    import json, sqlite3, sys
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    sys.path[:0] = [{tests!r}, {root!r}]
    from test_langgraph import USER_U1, SpyModel, build
    from synapse_integrations._adapter_utils import EnginePool, list_episodes
    from synapse_integrations.langgraph import SynapseMemoryNodes

    pool = EnginePool({mem!r})
    conn = sqlite3.connect({db!r}, check_same_thread=False)
    model = SpyModel(seen=[], responses=["Ana lives in Lisbon."])
    graph = build(SynapseMemoryNodes(pool, k=5), model, checkpointer=SqliteSaver(conn))
    cfg = {{"configurable": {{"thread_id": "t1", "user_id": "u1"}}}}
    before = graph.get_state(cfg).values["messages"]
    direct = pool.get(USER_U1).retrieve({query!r}, k=5)
    episodes = [e["text"] for e in list_episodes(pool.get(USER_U1))]
    out = graph.invoke({{"messages": [HumanMessage({question!r})]}}, cfg)
    print(json.dumps({{
        "before": [m.content for m in before],
        "episodes": episodes,
        "recorded": [e["text"] for e in list_episodes(pool.get(USER_U1))][len(episodes):],
        "direct": {{"ids": [i.id for i in direct.items], "rejected": direct.rejected,
                    "confidence": direct.confidence}},
        "seen": [m.content for m in model.seen[0]],
        "after": [m.content for m in out["messages"]],
    }}))
    pool.close()
    conn.close()
''')


def test_sqlite_checkpointer_and_memory_survive_a_process_restart(tmp_path, embedder):
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    mem_path, db = tmp_path / "memory", tmp_path / "checkpoints.sqlite"
    query = "Tell me about Ana and Lisbon."
    pool = EnginePool(mem_path, embedder=embedder)
    pool.get(USER_U1).add_turns(demo_turns(10))
    conn = sqlite3.connect(db, check_same_thread=False)
    graph = build(SynapseMemoryNodes(pool, k=5),
                  SpyModel(seen=[], responses=["Lisbon is lovely.", "Biscuit is a great name."]),
                  checkpointer=SqliteSaver(conn))
    cfg = {"configurable": {"thread_id": "t1", "user_id": "u1"}}
    graph.invoke({"messages": [HumanMessage("My sister Ana moved to Lisbon last year.")]}, cfg)
    graph.invoke({"messages": [HumanMessage("I adopted a beagle called Biscuit.")]}, cfg)
    first = pool.get(USER_U1).retrieve(query, k=5)
    episodes = [e["text"] for e in list_episodes(pool.get(USER_U1))]
    pool.close()
    conn.close()

    code = SECOND_HALF.format(tests=str(Path(__file__).parent), root=str(Path(__file__).parents[1]), mem=str(mem_path), db=str(db),
                              query=query, question=query)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # the checkpointed conversation came back
    assert [c for c in got["before"] if not c.startswith("Long-term memories")] == [
        "My sister Ana moved to Lisbon last year.", "Lisbon is lovely.",
        "I adopted a beagle called Biscuit.", "Biscuit is a great name."]
    # the SYNAPSE memory came back: same episodes, same retrieval as before the restart
    assert got["episodes"] == episodes
    assert got["direct"] == {"ids": [i.id for i in first.items], "rejected": first.rejected,
                             "confidence": pytest.approx(first.confidence)}
    # and the continued thread uses both: the model sees the old turns and the recalled memory
    assert "My sister Ana moved to Lisbon last year." in got["seen"]
    assert "Lisbon" in got["seen"][0].split("\n", 1)[1]
    assert got["after"][-1] == "Ana lives in Lisbon."
    assert got["episodes"][-4:] == ["My sister Ana moved to Lisbon last year.", "Lisbon is lovely.",
                                    "I adopted a beagle called Biscuit.", "Biscuit is a great name."]
    assert got["recorded"] == [query, "Ana lives in Lisbon."]


# -- SynapseStore inside graphs and agents -------------------------------------------------------
def test_store_in_compiled_graph_nodes(tmp_path, embedder):
    def remember(state: MessagesState, store: BaseStore) -> dict:
        store.put(("facts", "u1"), "pet", {"text": state["messages"][-1].content})
        return {}

    def answer(state: MessagesState, store: BaseStore) -> dict:
        hits = store.search(("facts",), query="What is the dog called?", limit=1)
        return {"messages": [AIMessage(hits[0].value["text"] if hits else "Nothing relevant in memory.")]}

    with SynapseStore(tmp_path, embedder=embedder, gate=False) as store:
        builder = StateGraph(MessagesState)
        builder.add_node("remember", remember)
        builder.add_node("answer", answer)
        builder.add_edge(START, "remember")
        builder.add_edge("remember", "answer")
        builder.add_edge("answer", END)
        graph = builder.compile(store=store)
        out = graph.invoke({"messages": [HumanMessage("My dog is called Biscuit.")]})
        assert out["messages"][-1].content == "My dog is called Biscuit."
        assert store.get(("facts", "u1"), "pet").value == {"text": "My dog is called Biscuit."}


class ToolCallingFake(FakeMessagesListChatModel):
    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN003
        return self


async def test_store_in_create_agent_tools(tmp_path, embedder):
    from langchain.agents import create_agent

    @tool
    def save_fact(key: str, fact: str, runtime: ToolRuntime) -> str:
        """Save a fact about the user."""
        runtime.store.put(("facts", runtime.config["configurable"]["user_id"]), key, {"text": fact})
        return "saved"

    @tool
    async def find_fact(query: str, runtime: ToolRuntime) -> str:
        """Find facts about the user."""
        hits = await runtime.store.asearch(("facts", runtime.config["configurable"]["user_id"]),
                                           query=query, limit=3)
        return "\n".join(h.value["text"] for h in hits) or "Nothing relevant in memory."

    model = ToolCallingFake(responses=[
        AIMessage("", tool_calls=[{"name": "save_fact", "id": "c1",
                                   "args": {"key": "sister", "fact": "Ana lives in Lisbon."}}]),
        AIMessage("Saved."),
        AIMessage("", tool_calls=[{"name": "find_fact", "id": "c2", "args": {"query": "Ana Lisbon"}}]),
        AIMessage("Ana lives in Lisbon."),
    ])
    with SynapseStore(tmp_path, embedder=embedder, gate=False) as store:
        agent = create_agent(model, tools=[save_fact, find_fact], store=store, checkpointer=InMemorySaver())
        cfg = {"configurable": {"thread_id": "t1", "user_id": "u1"}}
        agent.invoke({"messages": [HumanMessage("Remember: Ana lives in Lisbon.")]}, cfg)
        assert store.get(("facts", "u1"), "sister").value == {"text": "Ana lives in Lisbon."}
        out = await agent.ainvoke({"messages": [HumanMessage("Where does Ana live?")]}, cfg)
        assert out["messages"][-2].content == "Ana lives in Lisbon."  # the find_fact tool's answer
        assert store.list_namespaces() == [("facts", "u1")]


def test_users_system_prompt_stays_first_with_the_memories_after_it(tmp_path, embedder):
    """Issue 13: with the usual leading system prompt the memories are merged into it (the
    prompt itself is kept and the memories replaced each turn), never added after the user."""
    with Synapse(tmp_path, embedder=embedder) as mem:
        mem.add_turns(demo_turns(10))
        model = SpyModel(seen=[], responses=["Whistler.", "The cello."])
        graph = build(SynapseMemoryNodes(mem, k=3), model, checkpointer=InMemorySaver())
        cfg = {"configurable": {"thread_id": "t1"}}
        graph.invoke({"messages": [("system", "You are terse."), ("user", "Where did Sam go skiing?")]}, cfg)
        expected = format_memories(mem.retrieve("Which instrument is Sam learning?", k=3))
        out = graph.invoke({"messages": [("user", "Which instrument is Sam learning?")]}, cfg)
        system = [m for m in out["messages"] if isinstance(m, SystemMessage)]
        assert len(system) == 1 and out["messages"][0] is system[0]
        assert system[0].content.startswith("You are terse.\n\nLong-term memories")
        assert system[0].content.count("Long-term memories") == 1  # replaced, not piled up
        assert system[0].content.endswith(expected)  # this turn's memories
        assert [m.type for m in model.seen[-1]] == ["system", "human", "ai", "human"]


async def test_prompt_builds_the_model_input_from_the_memories_key(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        mem.add_turns(demo_turns(10))
        memory = SynapseMemoryNodes(mem, k=3, system_message=False)
        model = SpyModel(seen=[], responses=["Whistler."])

        async def agent(state: SynapseMemoryState) -> dict:
            return {"messages": [await model.ainvoke(memory.prompt(state, "You are terse."))]}

        builder = StateGraph(SynapseMemoryState)
        builder.add_node("recall", memory.recall)
        builder.add_node("agent", agent)
        builder.add_edge(START, "recall")
        builder.add_edge("recall", "agent")
        out = await builder.compile().ainvoke({"messages": [HumanMessage("Where did Sam go skiing?")]})
        assert [m.type for m in out["messages"]] == ["human", "ai"]  # state untouched
        first = model.seen[0][0]
        assert first.type == "system" and first.content.startswith("You are terse.\n\nLong-term memories")
        assert "Whistler" in first.content and [m.type for m in model.seen[0]] == ["system", "human"]


async def test_recall_node_is_a_traced_retriever_run(tmp_path, embedder):
    """Issue 13: the recall node's retrieval shows in the graph's callbacks as a retriever
    run with the query, the documents and the gate decision."""
    from test_langchain import _Events

    with Synapse(tmp_path, embedder=embedder) as mem:
        mem.add_turns(demo_turns(10))
        graph = build(SynapseMemoryNodes(mem, k=3), FakeListChatModel(responses=["ok", "ok"]))
        for run in ("sync", "async"):
            events = _Events()
            question = "Where did Sam go skiing?"
            inputs, cfg = {"messages": [HumanMessage(question)]}, {"callbacks": [events]}
            await graph.ainvoke(inputs, cfg) if run == "async" else graph.invoke(inputs, cfg)
            [(query, documents, gate)] = events.recalls()
            assert query == question and gate["rejected"] is False
            assert "Whistler" in " ".join(d.page_content for d in documents)
            assert events.retriever_starts[0]["parent"] is not None  # inside the recall node's run


def test_record_roles(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        nodes = SynapseMemoryNodes(mem, roles=("user",))
        turn = {"messages": [HumanMessage("I live in Porto.", id="h1"), AIMessage("Noted: Porto.", id="a1")]}
        nodes.record.invoke(turn, {})
        nodes.record.invoke(turn, {})
        assert _episodes(mem) == [("user", "I live in Porto.")]
        assert mem.episodes()[0]["metadata"] == {"role": "user"}
        custom = SynapseMemoryNodes(mem, roles=lambda role, text: "Porto" not in text)
        custom.record.invoke({"messages": [HumanMessage("I like tea.", id="h2"),
                                           AIMessage("Porto has great tea.", id="a2")]}, {})
        assert _episodes(mem)[-1] == ("user", "I like tea.")

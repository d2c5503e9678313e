"""LangChain adapter on the real engine: the standard retriever suite, an LCEL chain, the
classic memory, the chat history with RunnableWithMessageHistory, and a create_agent agent."""

from __future__ import annotations

import asyncio

from typing import Any

import pytest

pytest.importorskip("langchain_core")

from _adapter_data import ANSWERABLE, UNANSWERABLE, demo_turns  # noqa: E402
from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from _fake_models import ToolCallingFake  # noqa: E402
from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    FakeListChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402
from langchain_tests.integration_tests import RetrieversIntegrationTests  # noqa: E402

from synapse_integrations import Synapse  # noqa: E402
from synapse_integrations._adapter_utils import EnginePool  # noqa: E402
from synapse_integrations.langchain import (  # noqa: E402
    SynapseChatMessageHistory,
    SynapseMemory,
    SynapseMemoryMiddleware,
    SynapseRetriever,
    create_synapse_tools,
    format_documents,
)
from synapse_integrations.namespace_keys import namespace_key  # noqa: E402

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
    assert set(meta["components"]) == {"similarity", "activation", "pagerank", "lexical", "distinct", "echo",
                                       "superseded", "salience", "hop", "reply", "asked", "focus", "weights",
                                       "bm25_rank", "dense_rank"}
    assert docs[0].id == meta["id"]


def test_shown_score_terms_add_up_to_the_score(demo_engine):
    """Issue 13: every term of the hybrid score is in the metadata, with the weights the
    engine used (SynapseConfig.score_weights()), and they add up to the score."""
    from synapse_integrations._adapter_utils import score_terms

    docs = SynapseRetriever(engine=demo_engine, k=8, include_rejected=True).invoke(ANSWERABLE)
    weights = {k.removeprefix("weight_"): w for k, w in demo_engine.config.score_weights().items()}
    assert docs and any(d.metadata["components"]["lexical"] > 0 for d in docs)
    for d in docs:
        c = d.metadata["components"]
        assert c["weights"] == weights
        total = sum(c["weights"][n] * c[n] for n in ("similarity", "activation", "pagerank", "lexical",
                                                     "distinct"))
        assert total + c["echo"] + c["superseded"] + c["salience"] + c["hop"] + c["reply"] \
            + c["asked"] + c["focus"] == \
            pytest.approx(d.metadata["score"], abs=1e-9)
        assert sum(score_terms(c).values()) == pytest.approx(d.metadata["score"], abs=1e-9)
    item = demo_engine.retrieve(ANSWERABLE, k=3).items[0]
    assert sum(item.components.terms().values()) == pytest.approx(item.score, abs=1e-9)


class _Events(BaseCallbackHandler):
    """Collects retriever runs, custom events and texts, as LangSmith's tracer would see them."""

    def __init__(self) -> None:
        self.custom: list[tuple[str, Any]] = []
        self.texts: list[str] = []
        self.retriever_starts: list[dict[str, Any]] = []
        self.retriever_ends: list[dict[str, Any]] = []
        self.custom_runs: list[Any] = []

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, **kw):  # noqa: ANN001
        self.retriever_starts.append({"query": query, "run_id": run_id, "parent": parent_run_id,
                                      "name": kw.get("name")})

    def on_retriever_end(self, documents, *, run_id, **kw):  # noqa: ANN001
        self.retriever_ends.append({"documents": documents, "run_id": run_id})

    def on_custom_event(self, name, data, *, run_id, tags=None, metadata=None, **kw):  # noqa: ANN001
        self.custom.append((name, data))
        self.custom_runs.append(run_id)

    def recalls(self) -> list[tuple[str, list, dict]]:
        """(query, documents, gate decision) per retriever run, the gate event in that run."""
        out = []
        for start in self.retriever_starts:
            end = next(e for e in self.retriever_ends if e["run_id"] == start["run_id"])
            gate = [d for (n, d), r in zip(self.custom, self.custom_runs)
                    if n == "synapse_gate" and r == start["run_id"]]
            assert len(gate) == 1, "one gate decision per recall, inside its retriever run"
            out.append((start["query"], end["documents"], gate[0]))
        return out

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
        names = [name for name, _ in events.custom]
        assert names == ["synapse_gate", "synapse_gate_rejected"]
        assert events.custom[1][1]["rejected"] is True
        assert events.texts and "nothing in memory" in events.texts[0]
        [(query, documents, gate)] = events.recalls()
        assert query == UNANSWERABLE and documents == [] and gate["rejected"] is True
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
        search, save = create_synapse_tools(mem, include=("search", "save"))
        assert (search.name, save.name) == ("search_memory", "save_memory")
        assert search.invoke({"query": "anything"}) == "Nothing relevant in memory."
        assert save.invoke({"text": "Sam likes green tea."}).startswith("Saved memory ")
        for fact in ("Sam plays the cello.", "Sam lives in Denver.", "Sam has a dog named Miso.",
                     "Sam's cousin Dana studies architecture."):
            save.invoke({"text": fact})
        assert "green tea" in search.invoke({"query": "What does Sam like to drink?"})


def test_every_langchain_recall_is_a_traced_retriever_run(demo_engine, tmp_path, embedder):
    """Issue 13: the retriever, the classic memory, the memory tools and the agent middleware
    each show a retriever run (query and documents) with the gate decision inside it."""
    cases = {
        "retriever": lambda cfg: SynapseRetriever(engine=demo_engine, k=3).invoke(ANSWERABLE, cfg),
        "search tool": lambda cfg: create_synapse_tools(demo_engine, include=("search",))[0].invoke(
            {"query": ANSWERABLE}, cfg),
        "classic memory": lambda cfg: (RunnableLambda(lambda q: SynapseMemory(engine=demo_engine, k=3)
                                                      .load_memory_variables({"input": q}))
                                       .invoke(ANSWERABLE, cfg)),
    }
    for name, call in cases.items():
        events = _Events()
        call({"callbacks": [events]})
        [(query, documents, gate)] = events.recalls()
        assert query == ANSWERABLE, name
        assert documents and "Whistler" in " ".join(d.page_content for d in documents), name
        assert gate["rejected"] is False and gate["ids"] == [d.id for d in documents], name

    from langchain.agents import create_agent

    pool = EnginePool(tmp_path, embedder=embedder)
    pool.get(namespace_key("agent", "user_id", "u1")).add_turns(demo_turns(10))
    model = ToolCallingFake(seen=[], responses=[AIMessage("Whistler."), AIMessage("No idea.")])
    agent = create_agent(model, middleware=[SynapseMemoryMiddleware(pool, k=3)])
    events = _Events()
    cfg = {"configurable": {"user_id": "u1"}, "callbacks": [events]}
    agent.invoke({"messages": [HumanMessage(ANSWERABLE)]}, cfg)
    [(query, documents, gate)] = events.recalls()
    assert query == ANSWERABLE and gate["rejected"] is False and documents
    assert events.retriever_starts[0]["name"] == "synapse_recall"
    assert events.retriever_starts[0]["parent"] is not None  # nested in the agent's run
    pool.close()


async def test_async_middleware_recall_is_traced_and_rejection_shown(tmp_path, embedder):
    from langchain.agents import create_agent

    pool = EnginePool(tmp_path, embedder=embedder)
    pool.get(namespace_key("agent", "user_id", "u1")).add_turns(demo_turns(10))
    agent = create_agent(ToolCallingFake(seen=[], responses=[AIMessage("No idea.")]),
                         middleware=[SynapseMemoryMiddleware(pool, k=3)])
    events = _Events()
    await agent.ainvoke({"messages": [HumanMessage(UNANSWERABLE)]},
                        {"configurable": {"user_id": "u1"}, "callbacks": [events]})
    [(query, documents, gate)] = events.recalls()
    assert query == UNANSWERABLE and documents == [] and gate["rejected"] is True
    assert ("synapse_gate_rejected", gate) in events.custom
    pool.close()


def test_classic_memory_replay_and_roles(tmp_path, embedder):
    """Issue 13: saving the same exchange again stores nothing twice; roles choose the sides."""
    with Synapse(tmp_path, embedder=embedder) as mem:
        memory = SynapseMemory(engine=mem, input_key="input")
        turn = ({"input": "My sister Ana moved to Lisbon."}, {"output": "Lisbon is lovely!"})
        memory.save_context(*turn)
        memory.save_context(*turn)  # a replay
        assert [e["text"] for e in mem.episodes()] == ["My sister Ana moved to Lisbon.", "Lisbon is lovely!"]
        assert [e["metadata"]["role"] for e in mem.episodes()] == ["user", "assistant"]
        memory.save_context({"input": "yes"}, {"output": "Great, booked."})
        memory.save_context({"input": "yes"}, {"output": "Cancelled then."})  # same words, new turn
        assert sum(e["text"] == "yes" for e in mem.episodes()) == 2
        users_only = SynapseMemory(engine=mem, input_key="input", roles=("user",))
        users_only.save_context({"input": "I work as a nurse."}, {"output": "Busy job!"})
        assert mem.episodes()[-1]["text"] == "I work as a nurse."
        custom = SynapseMemory(engine=mem, input_key="input",
                               roles=lambda role, text: role == "user" or "remember" in text.lower())
        custom.save_context({"input": "I play cello."}, {"output": "I will remember: cello."})
        custom.save_context({"input": "I like tea."}, {"output": "Nice."})
        assert [e["text"] for e in mem.episodes()][-3:] == ["I play cello.", "I will remember: cello.",
                                                            "I like tea."]


async def test_middleware_roles_and_echoes_rank_below_the_users_statement(tmp_path, embedder):
    """Issue 13: the assistant's echo of a fact ranks below the user's own statement of it;
    a middleware can record the user's side only."""
    from langchain.agents import create_agent

    pool = EnginePool(tmp_path, embedder=embedder)
    both = create_agent(ToolCallingFake(seen=[], responses=[AIMessage("Noted: Ana lives in Lisbon now.")]),
                        middleware=[SynapseMemoryMiddleware(pool)])
    both.invoke({"messages": [HumanMessage("My sister Ana moved to Lisbon last year.")]},
                {"configurable": {"user_id": "both"}})
    mem = pool.get(namespace_key("agent", "user_id", "both"))
    user_ep, echo_ep = mem.episodes()
    assert echo_ep["metadata"]["echo_of"] == user_ep["id"]  # marked at ingestion
    result = mem.retrieve("Where does Ana live?", k=5)
    ranked = [it.text for it in result.items]
    assert ranked.index("My sister Ana moved to Lisbon last year.") < ranked.index("Noted: Ana lives in Lisbon now.")
    echo = next(it for it in result.items if it.id == echo_ep["id"])
    assert echo.components.echo < 0 and echo.components.similarity > result.items[0].components.similarity
    assert sum(echo.components.terms().values()) == pytest.approx(echo.score)
    docs = SynapseRetriever(engine=mem, k=5).invoke("Where does Ana live?")
    assert docs[0].page_content == "My sister Ana moved to Lisbon last year."

    user_only = create_agent(ToolCallingFake(seen=[], responses=[AIMessage("Noted: Ana lives in Lisbon now.")]),
                             middleware=[SynapseMemoryMiddleware(pool, roles=("user",))])
    await user_only.ainvoke({"messages": [HumanMessage("My sister Ana moved to Lisbon last year.")]},
                            {"configurable": {"user_id": "user-only"}})
    assert [e["text"] for e in pool.get(namespace_key("agent", "user_id", "user-only")).episodes()] == [
        "My sister Ana moved to Lisbon last year."]
    pool.close()


def test_memory_tools_update_and_forget_in_the_callers_namespace(tmp_path, embedder):
    """Issue 13: agents can correct memory: search shows ids, update stores a new version
    (the old one ranked below it), forget erases; ids outside this memory are refused."""
    pool = EnginePool(tmp_path, embedder=embedder)
    search, save, update, forget = create_synapse_tools(pool)
    assert [t.name for t in (search, save, update, forget)] == [
        "search_memory", "save_memory", "update_memory", "forget_memory"]
    u1 = {"configurable": {"user_id": "u1"}}
    u2 = {"configurable": {"user_id": "u2"}}
    for fact in ("Ana lives in Lisbon.", "Sam plays the cello.", "Sam has a dog named Miso."):
        save.invoke({"text": fact}, u1)
    save.invoke({"text": "Bo lives in Oslo."}, u2)
    found = search.invoke({"query": "Where does Ana live?"}, u1)
    ana = pool.get(namespace_key("agent", "user_id", "u1")).retrieve("Where does Ana live?", k=1).items[0].id
    assert f"(id: {ana})" in found and "Lisbon" in found
    other = pool.get(namespace_key("agent", "user_id", "u2")).episodes()[0]["id"]
    assert update.invoke({"memory_id": other, "text": "Bo lives in Rome."}, u1).startswith("Refused")
    assert forget.invoke({"memory_ids": [other]}, u1).startswith("Refused")
    assert pool.get(namespace_key("agent", "user_id", "u2")).contains(other)  # another user's memory is out of reach

    answer = update.invoke({"memory_id": ana, "text": "Ana moved to Porto."}, u1)
    assert answer.startswith(f"Updated memory {ana}")
    ranked = pool.get(namespace_key("agent", "user_id", "u1")).retrieve("Where does Ana live?", k=5).items
    texts = [it.text for it in ranked]
    assert texts.index("Ana moved to Porto.") < texts.index("Ana lives in Lisbon.")
    old = next(it for it in ranked if it.id == ana)
    # shown as a score term: the old version rides right below its replacement (raised or
    # lowered to it; docs/concepts.md, "Reconsolidation", ranking)
    assert old.components.superseded != 0
    assert old.score < next(it for it in ranked if it.text == "Ana moved to Porto.").score
    assert sum(old.components.terms().values()) == pytest.approx(old.score)

    miso = pool.get(namespace_key("agent", "user_id", "u1")).retrieve("dog", k=1).items[0].id
    assert forget.invoke({"memory_ids": [miso]}, u1).startswith(f"Forgot 1 memory ({miso})")
    assert not pool.get(namespace_key("agent", "user_id", "u1")).contains(miso)
    assert forget.invoke({"memory_ids": ["ep-nope"]}, u1).startswith("Refused")
    pool.close()


def test_chat_history_replay_stores_nothing_twice(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        history = SynapseChatMessageHistory(mem)
        said = [HumanMessage("My dog is called Biscuit.", id="h1"), AIMessage("Noted.", id="a1")]
        history.add_messages(said)
        history.add_messages(said)  # a replay
        assert [m.content for m in history.messages] == ["My dog is called Biscuit.", "Noted."]
        history.add_messages([HumanMessage("yes"), HumanMessage("yes")])  # no ids: stored as given
        assert len(history.messages) == 4


def test_chat_history_records_a_named_speaker_and_its_role(tmp_path, embedder):
    """A multi-party chat's ``name`` is the turn's speaker (read with the text by the engine:
    core/documents.py), the role stays in the metadata, and the message round-trips."""
    with Synapse(tmp_path, embedder=embedder) as mem:
        history = SynapseChatMessageHistory(mem)
        said = [HumanMessage("I moved to Denver last month.", name="Sam", id="h1"),
                HumanMessage("My sister is visiting Lisbon.", name="Riley", id="h2"),
                AIMessage("Noted, both of you.", id="a1"),
                HumanMessage("Thanks!", id="h3")]
        history.add_messages(said)
        assert history.messages == said
        stored = {n["id"]: n for n in mem.episodes()}
        assert [(stored[f"msg-{m.id}"]["speaker"], stored[f"msg-{m.id}"]["metadata"]["role"])
                for m in said] == [("Sam", "user"), ("Riley", "user"), ("ai", "assistant"),
                                   ("human", "user")]
        res = mem.retrieve("Where did Sam move to?", k=3)
        assert not res.rejected and res.items[0].id == "msg-h1"
        only_riley = mem.retrieve("Where did Sam move to?", k=3, speakers=["Riley"])
        assert {it.id for it in only_riley.items} <= {"msg-h2"}


def test_memory_tools_find_the_memory_holding_a_described_fact_not_the_question(tmp_path, embedder):
    """Issue 47: told to change "where my sister Ana lives", the tools point at the statement
    that holds it, not the user's earlier question about it (which a search may rank
    first), and change nothing until called with that id; the reply then names it."""
    with Synapse(tmp_path, embedder=embedder) as mem:
        fact = mem.add_turn("My sister Ana moved to Lisbon last year.", speaker="user")
        asked = mem.add_turn("Where does my sister live?", speaker="user")
        search, save, update, forget = create_synapse_tools(mem)
        # the case of the issue: the question ranked above the fact that answers it; memory
        # held its answer when it was stored, so now it ranks below (core/signals/asks.py)
        off = mem.config.replace(question_weight=1.0)
        assert [it.id for it in mem.retrieve("Where does my sister Ana live?", k=2,
                                             config=off).items] == [asked, fact]
        assert [it.id for it in mem.retrieve("Where does my sister Ana live?", k=2).items] \
            == [fact, asked]
        shown = update.invoke({"about": "Where does my sister Ana live?",
                               "text": "My sister Ana lives in Porto now."})
        assert f"The memory holding that is {fact}" in shown and f"memory_id={fact!r}" in shown
        assert asked not in shown and "Nothing was changed" in shown
        assert mem.get(fact).get("superseded_by") is None  # nothing changed yet
        done = update.invoke({"memory_id": fact, "text": "My sister Ana lives in Porto now."})
        assert done.startswith(f"Updated memory {fact}")
        assert mem.get(fact)["superseded_by"] and mem.get(asked).get("superseded_by") is None
        gone = forget.invoke({"about": "Where does my sister Ana live?"})
        assert "Nothing was changed" in gone and "memory_ids=['" in gone and mem.contains(asked)
        assert update.invoke({"text": "x"}).startswith("Refused: give either")
        assert forget.invoke({"memory_ids": [asked], "about": "x"}).startswith("Refused: give either")
        assert asyncio.run(update.ainvoke({"about": "my sister Ana", "text": "x"})) \
            .startswith("The memory holding that is")

"""Time through every adapter, on a real memory where a fact changed: Sam lived in Porto
(2024-01-10) and moved to Lisbon (``update`` on 2024-03-01), with other turns around.
Through each adapter: by default both versions come back, the newer first; ``as_of``
2024-02-15 reads Porto and not Lisbon; ``current_only`` hides Porto; the history tool
lists both versions in order with when each held."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

import pytest

pytest.importorskip("langchain_core")

from _fake_models import ToolCallingFake as _Fake  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

from synapse_integrations import HashingEmbedder, Synapse  # noqa: E402
from synapse_integrations.errors import InvalidInputError, InvalidTypeError  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:.*deprecated.*")]

QUESTION = "Where does Sam live?"
FEB = "2024-02-15"
PORTO, LISBON = "Sam lives in Porto.", "Sam lives in Lisbon now."


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """``(memory, porto id, lisbon id)``: the fact changed on 2024-03-01."""
    with Synapse(tmp_path_factory.mktemp("time") / "m", embedder=HashingEmbedder()) as mem:
        porto = mem.add_turn(PORTO, speaker="Sam", timestamp="2024-01-10")
        mem.add_turns([{"text": text, "speaker": "Sam", "timestamp": f"2024-01-{12 + i}"}
                       for i, text in enumerate([
                           "Sam adopted a beagle called Biscuit.", "Sam plays the cello on Sundays.",
                           "Sam is allergic to peanuts.", "Sam works as a nurse."])])
        lisbon = mem.update(porto, LISBON, timestamp="2024-03-01")
        yield mem, porto, lisbon


def _order(ids, porto, lisbon):  # noqa: ANN001, ANN202
    """Which versions ``ids`` holds, in their order: a list of "porto" / "lisbon"."""
    return [{porto: "porto", lisbon: "lisbon"}[i] for i in ids if i in (porto, lisbon)]


# -- LangChain: retriever -------------------------------------------------------------------
def test_langchain_retriever_fields_and_per_call_time(moved):
    from synapse_integrations.langchain import SynapseRetriever

    mem, porto, lisbon = moved
    ids = lambda docs: _order([d.id for d in docs], porto, lisbon)  # noqa: E731
    assert ids(SynapseRetriever(engine=mem).invoke(QUESTION)) == ["lisbon", "porto"]
    assert ids(SynapseRetriever(engine=mem, as_of=FEB).invoke(QUESTION)) == ["porto"]
    assert ids(SynapseRetriever(engine=mem, current_only=True).invoke(QUESTION)) == ["lisbon"]
    retriever = SynapseRetriever(engine=mem, k=5)
    assert ids(retriever.invoke(QUESTION, as_of=FEB)) == ["porto"]  # per call
    assert ids(retriever.invoke(QUESTION, current_only=True)) == ["lisbon"]
    assert ids(asyncio.run(retriever.ainvoke(QUESTION, as_of=FEB))) == ["porto"]
    assert ids(asyncio.run(retriever.ainvoke(QUESTION, current_only=True))) == ["lisbon"]
    assert ids(retriever.invoke(QUESTION)) == ["lisbon", "porto"]  # per call only
    # a per-call value wins over the retriever's
    assert ids(SynapseRetriever(engine=mem, as_of=FEB).invoke(QUESTION, as_of="2024-04-01")) \
        == ["lisbon", "porto"]
    docs = {d.id: d for d in retriever.invoke(QUESTION)}
    assert docs[porto].metadata["valid_until"].startswith("2024-03-01")
    assert docs[porto].metadata["superseded_by"] == lisbon
    assert docs[lisbon].metadata["valid_from"].startswith("2024-03-01")
    assert docs[lisbon].metadata["valid_until"] is None
    with pytest.raises(InvalidInputError):
        retriever.invoke(QUESTION, as_of="last month")


def test_langchain_retriever_reads_relative_dates_at_the_time_asked(tmp_path):
    """``invoke(q, at=...)``: "last month" is read against when the question is asked."""
    from synapse_integrations.langchain import SynapseRetriever

    with Synapse(tmp_path / "m", embedder=HashingEmbedder()) as mem:
        mem.add_turns([
            {"text": "I cleaned my white sneakers with baking soda.", "speaker": "user",
             "timestamp": "2023-01-05T10:00:00Z", "id": "old"},
            {"text": "I cleaned my white sneakers and the suede boots.", "speaker": "user",
             "timestamp": "2023-05-27T10:00:00Z", "id": "new"}])
        retriever = SynapseRetriever(engine=mem, k=2, include_rejected=True)  # hashing vectors: the gate may refuse
        q = "Which shoes did I clean last month?"
        assert [d.id for d in retriever.invoke(q, at="2023-05-30")][0] == "new"
        assert [d.id for d in retriever.invoke(q, at="2023-01-20")][0] == "old"
        assert [d.id for d in asyncio.run(retriever.ainvoke(q, at="2023-01-20"))][0] == "old"
        with pytest.raises(InvalidInputError, match="^at: "):
            retriever.invoke(q, at="soon")


# -- LangChain: agent tools -----------------------------------------------------------------
def test_search_tool_reads_in_time_and_refuses_a_bad_date(moved):
    from synapse_integrations.langchain import create_synapse_tools

    mem, porto, lisbon = moved
    search, = create_synapse_tools(mem, include=("search",))

    def shown(args):  # noqa: ANN001, ANN202
        out = search.invoke({"query": QUESTION, **args})
        return [name for name, text in (("porto", PORTO), ("lisbon", LISBON)) if text in out], out

    both, out = shown({})
    assert both == ["porto", "lisbon"] and out.index(LISBON) < out.index(PORTO)
    assert f"(id: {porto})" in out and f"(id: {lisbon})" in out
    assert shown({"as_of": FEB})[0] == ["porto"]
    assert shown({"current_only": True})[0] == ["lisbon"]
    assert shown({"as_of": FEB, "current_only": True})[0] == ["porto"]  # not replaced yet then
    refused = search.invoke({"query": QUESTION, "as_of": "last February"})
    assert refused.startswith("Refused: as_of must be an ISO 8601 date") and PORTO not in refused
    out = asyncio.run(search.ainvoke({"query": QUESTION, "as_of": FEB}))
    assert PORTO in out and LISBON not in out


def test_history_tool_lists_the_versions_oldest_first(moved):
    from synapse_integrations.langchain import create_synapse_tools

    mem, porto, lisbon = moved
    tools = create_synapse_tools(mem, include=("search", "save", "update", "forget", "history"))
    assert [t.name for t in tools][-1] == "memory_history"
    history = tools[-1]
    for asked in (lisbon, porto):  # from either version: the whole chain
        out = history.invoke({"memory_id": asked})
        lines = [line for line in out.splitlines() if line.startswith("- ")]
        assert lines == [f"- [from 2024-01-10 until 2024-03-01] Sam: {PORTO} (id: {porto})",
                         f"- [from 2024-03-01 until now] Sam: {LISBON} (id: {lisbon})"]
        assert out.startswith("2 versions, oldest first")
    assert asyncio.run(history.ainvoke({"memory_id": porto})) == history.invoke({"memory_id": porto})
    single = next(e["id"] for e in mem.episodes() if e["text"] == "Sam works as a nurse.")
    assert history.invoke({"memory_id": single}).startswith("1 version: this memory was never replaced.")
    assert history.invoke({"memory_id": "ep-nope"}).startswith("Refused: ep-nope is not in this memory")
    # default tool set unchanged (callers unpack four tools)
    assert [t.name for t in create_synapse_tools(mem)] == [
        "search_memory", "save_memory", "update_memory", "forget_memory"]


def test_a_tool_calling_model_sees_the_time_arguments(moved):
    """The schema a model gets: the generic OpenAI form, and the requests two provider
    packages build offline (no network)."""
    from synapse_integrations.langchain import create_synapse_tools

    search, history = create_synapse_tools(moved[0], include=("search", "history"))
    fn = convert_to_openai_tool(search)["function"]
    props = fn["parameters"]["properties"]
    assert fn["parameters"]["required"] == ["query"]
    assert {"type": "string"} in props["as_of"]["anyOf"] and "ISO 8601" in props["as_of"]["description"]
    assert props["current_only"]["type"] == "boolean" and props["current_only"]["default"] is False
    assert "replaced" in props["current_only"]["description"]
    hist = convert_to_openai_tool(history)["function"]
    assert hist["name"] == "memory_history" and hist["parameters"]["required"] == ["memory_id"]

    openai = pytest.importorskip("langchain_openai")
    bound = openai.ChatOpenAI(model="gpt-4o-mini", api_key="x").bind_tools([search, history])
    payload = bound.bound._get_request_payload([HumanMessage(QUESTION)], **bound.kwargs)
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in payload["tools"]}
    assert set(sent["search_memory"]["properties"]) == {"query", "as_of", "current_only"}
    assert set(sent["memory_history"]["properties"]) == {"memory_id"}
    anthropic = pytest.importorskip("langchain_anthropic")
    bound = anthropic.ChatAnthropic(model="claude-sonnet-4-5", api_key="x").bind_tools([search])
    payload = bound.bound._get_request_payload([HumanMessage(QUESTION)], **bound.kwargs)
    schema = payload["tools"][0]["input_schema"]
    assert payload["tools"][0]["name"] == "search_memory"
    assert set(schema["properties"]) == {"query", "as_of", "current_only"}


# -- LangChain: middleware and classic memory -----------------------------------------------
def test_middleware_current_only_keeps_the_replaced_version_out_of_the_prompt(moved):
    pytest.importorskip("langchain")
    from langchain.agents import create_agent

    from synapse_integrations.langchain import SynapseMemoryMiddleware

    mem = moved[0]
    for current_only, wanted in ((False, [LISBON, PORTO]), (True, [LISBON])):
        model = _Fake(seen=[], responses=[AIMessage("Lisbon.")])
        agent = create_agent(model, middleware=[SynapseMemoryMiddleware(
            mem, record=False, current_only=current_only)])
        agent.invoke({"messages": [HumanMessage(QUESTION)]})
        system = model.seen[0][0].content
        found = sorted((system.index(t), t) for t in (PORTO, LISBON) if t in system)
        assert [t for _, t in found] == wanted
    with pytest.raises(InvalidTypeError):
        SynapseMemoryMiddleware(mem, current_only="yes")


def test_classic_memory_current_only(moved):
    pytest.importorskip("langchain_classic")
    from synapse_integrations.langchain import SynapseMemory

    mem = moved[0]
    both = SynapseMemory(engine=mem).load_memory_variables({"input": QUESTION})["history"]
    assert PORTO in both and LISBON in both
    now = SynapseMemory(engine=mem, current_only=True).load_memory_variables({"input": QUESTION})
    assert LISBON in now["history"] and PORTO not in now["history"]


# -- LangGraph: memory nodes ----------------------------------------------------------------
def test_langgraph_recall_node_current_only(moved):
    pytest.importorskip("langgraph")
    from synapse_integrations.langgraph import SynapseMemoryNodes

    mem, porto, lisbon = moved
    state = {"messages": [HumanMessage(QUESTION, id="h1")]}
    default = SynapseMemoryNodes(mem).recall.invoke(state)
    assert _order([m["id"] for m in default["memories"]], porto, lisbon) == ["lisbon", "porto"]
    recalled = {m["id"]: m for m in default["memories"]}
    assert recalled[porto]["valid_until"].startswith("2024-03-01")
    assert recalled[lisbon]["valid_until"] is None
    nodes = SynapseMemoryNodes(mem, current_only=True)
    now = nodes.recall.invoke(state)
    assert _order([m["id"] for m in now["memories"]], porto, lisbon) == ["lisbon"]
    system = next(m.content for m in now["messages"] if m.type == "system")
    assert PORTO not in system and LISBON in system
    later = asyncio.run(nodes.recall.ainvoke(state))
    assert _order([m["id"] for m in later["memories"]], porto, lisbon) == ["lisbon"]
    with pytest.raises(InvalidTypeError):
        SynapseMemoryNodes(mem, current_only=1)


# -- LangGraph: store -----------------------------------------------------------------------
def test_langgraph_store_reads_in_time_through_reserved_filter_keys(tmp_path):
    pytest.importorskip("langgraph")
    from synapse_integrations.langgraph import SynapseStore
    from synapse_integrations.langgraph.store import AS_OF, CURRENT_ONLY
    from synapse_integrations.namespace_keys import namespace_key

    assert (AS_OF, CURRENT_ONLY) == ("$as_of", "$current_only")
    ns = ("memories", "sam")
    with SynapseStore(tmp_path / "store", embedder=HashingEmbedder(), gate=False) as store:
        store.put(ns, "porto", {"text": PORTO, "topic": "home"})
        store.put(ns, "pet", {"text": "Sam adopted a beagle called Biscuit.", "topic": "pets"})
        time.sleep(0.05)
        between = datetime.now(timezone.utc)
        time.sleep(0.05)
        store.put(ns, "lisbon", {"text": LISBON, "topic": "home"})
        engine = store.pool.get(namespace_key("store", "store", "memories.sam"))
        engine.supersede("kv:porto#a", "kv:lisbon#a")  # linked as versions on the memory

        def keys(**kw):  # noqa: ANN003, ANN202
            return [i.key for i in store.search(ns, query=QUESTION, **kw) if i.key != "pet"]

        assert keys() == ["lisbon", "porto"]
        assert keys(filter={AS_OF: between.isoformat()}) == ["porto"]
        assert keys(filter={CURRENT_ONLY: True}) == ["lisbon"]
        assert keys(as_of=between) == ["porto"]  # the keywords of search()
        assert keys(current_only=True) == ["lisbon"]
        # the other keys still filter the value's fields
        assert keys(filter={AS_OF: between.timestamp(), "topic": "home"}) == ["porto"]
        assert [i.key for i in store.search(ns, query=QUESTION,
                                            filter={CURRENT_ONLY: True, "topic": "pets"})] == ["pet"]
        # listings (no query) too
        assert sorted(i.key for i in store.search(ns, filter={AS_OF: between.isoformat()})) \
            == ["pet", "porto"]
        assert sorted(i.key for i in store.search(ns, current_only=True)) == ["lisbon", "pet"]
        assert sorted(i.key for i in store.search(ns)) == ["lisbon", "pet", "porto"]
        assert [i.key for i in asyncio.run(store.asearch(ns, query=QUESTION, as_of=between))
                if i.key != "pet"] == ["porto"]
        with pytest.raises(ValueError, match=r"\$as_of"):
            store.search(ns, query=QUESTION, filter={AS_OF: "last week"})
        with pytest.raises(TypeError, match=r"\$current_only"):
            store.search(ns, filter={CURRENT_ONLY: "yes"})


# -- LlamaIndex -----------------------------------------------------------------------------
def test_llama_index_retriever_time_and_node_metadata(moved):
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import MetadataMode

    from synapse_integrations.llama_index import SynapseRetriever

    mem, porto, lisbon = moved
    ids = lambda nodes: _order([n.node.node_id for n in nodes], porto, lisbon)  # noqa: E731
    nodes = SynapseRetriever(mem).retrieve(QUESTION)
    assert ids(nodes) == ["lisbon", "porto"]
    assert ids(SynapseRetriever(mem, as_of=FEB).retrieve(QUESTION)) == ["porto"]
    retriever = SynapseRetriever(mem, current_only=True)
    assert ids(retriever.retrieve(QUESTION)) == ["lisbon"]
    assert ids(asyncio.run(retriever.aretrieve(QUESTION))) == ["lisbon"]
    retriever.current_only, retriever.as_of = False, FEB  # attributes: move it in time
    assert ids(retriever.retrieve(QUESTION)) == ["porto"]
    by_id = {n.node.node_id: n.node for n in nodes}
    assert by_id[porto].metadata["valid_from"].startswith("2024-01-10")
    assert by_id[porto].metadata["valid_until"].startswith("2024-03-01")
    assert by_id[lisbon].metadata["valid_until"] is None
    # the LLM is told when a replaced version stopped holding, and nothing for the current one
    assert "valid_until: 2024-03-01" in by_id[porto].get_content(metadata_mode=MetadataMode.LLM)
    assert "valid_until" not in by_id[lisbon].get_content(metadata_mode=MetadataMode.LLM)
    with pytest.raises(InvalidTypeError):
        SynapseRetriever(mem, current_only="yes")


async def test_llama_index_memory_block_time(moved):
    pytest.importorskip("llama_index.core")
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.memory import Memory

    from synapse_integrations.llama_index import SynapseMemoryBlock

    mem = moved[0]
    asked = [ChatMessage(role="user", content=QUESTION)]

    async def block_text(block, **kw):  # noqa: ANN001, ANN003, ANN202
        return await block.aget(asked, **kw)

    both = await block_text(SynapseMemoryBlock(engine=mem, record_history=False))
    assert both.index(LISBON) < both.index(PORTO)
    then = await block_text(SynapseMemoryBlock(engine=mem, as_of=FEB, record_history=False))
    assert PORTO in then and LISBON not in then
    block = SynapseMemoryBlock(engine=mem, current_only=True, record_history=False)
    now = await block_text(block)
    assert LISBON in now and PORTO not in now
    # one read in time through Memory.aget's keywords, over the block's own
    memory = Memory.from_defaults(session_id="s1", token_limit=4000, memory_blocks=[block])
    await memory.aput(asked[0])
    shown = " ".join(str(m.content) for m in await memory.aget(as_of=FEB, current_only=False))
    assert PORTO in shown and LISBON not in shown
    shown = " ".join(str(m.content) for m in await memory.aget())
    assert LISBON in shown and PORTO not in shown


def test_the_prompt_marks_a_replaced_version_so_a_model_does_not_take_it_as_current(tmp_path):
    from synapse_integrations import HashingEmbedder, Synapse
    from synapse_integrations._adapter_utils import format_memories

    with Synapse(tmp_path / "m", embedder=HashingEmbedder()) as mem:
        old = mem.add_turn("Sam lives in Porto.", speaker="Sam", timestamp="2024-01-10")
        mem.update(old, "Sam lives in Lisbon now.", timestamp="2024-03-01")
        text = format_memories(mem.retrieve("Where does Sam live?", k=5).items)
    porto = next(line for line in text.splitlines() if "Porto" in line)
    lisbon = next(line for line in text.splitlines() if "Lisbon" in line)
    assert "(replaced on 2024-03-01)" in porto and "replaced" not in lisbon

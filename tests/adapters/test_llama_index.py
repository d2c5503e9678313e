"""LlamaIndex adapter on the real engine: retriever in a query engine and a chat engine,
memory block inside ``Memory.from_defaults``, with ``MockLLM``."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core")

from _adapter_data import ANSWERABLE, UNANSWERABLE, demo_turns  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.chat_engine import ContextChatEngine  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.memory import Memory  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore  # noqa: E402

from llama_index.core.chat_engine import SimpleChatEngine  # noqa: E402
from llama_index.core.instrumentation import get_dispatcher  # noqa: E402
from llama_index.core.instrumentation.event_handlers import BaseEventHandler  # noqa: E402
from llama_index.core.instrumentation.events.retrieval import (  # noqa: E402
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402

from synapse_integrations import Synapse, namespace_key  # noqa: E402
from synapse_integrations.llama_index import (  # noqa: E402
    EnginePool,
    SynapseChatMemory,
    SynapseGateEvent,
    SynapseMemoryBlock,
    SynapseRetriever,
)

pytestmark = [pytest.mark.model, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="module")
def demo_engine(tmp_path_factory, embedder):
    mem = Synapse(tmp_path_factory.mktemp("li") / "mem", namespace="demo", embedder=embedder)
    mem.add_turns(demo_turns())
    yield mem
    mem.close()


async def test_retriever_nodes_and_gate(demo_engine):
    retriever = SynapseRetriever(demo_engine, k=5, kinds=("episode",))
    nodes = retriever.retrieve(ANSWERABLE)
    assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
    assert "Whistler" in " ".join(n.node.get_content() for n in nodes)
    meta = nodes[0].node.metadata
    assert set(meta) >= {"id", "kind", "speaker", "timestamp", "score", "components", "path"}
    assert nodes[0].node.node_id == meta["id"] and nodes[0].score == pytest.approx(meta["score"])
    shown = nodes[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert "speaker" in shown and "components" not in shown  # only speaker/time reach the LLM
    assert len(await retriever.aretrieve(ANSWERABLE)) == len(nodes)
    assert retriever.retrieve(UNANSWERABLE) == []
    assert await retriever.aretrieve(UNANSWERABLE) == []


async def test_query_engine_and_chat_engine(demo_engine):
    retriever = SynapseRetriever(demo_engine, k=4, kinds=("episode",))
    query_engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = query_engine.query(ANSWERABLE)
    assert response.source_nodes and "Whistler" in str(response)  # MockLLM echoes its prompt
    aresponse = await query_engine.aquery(ANSWERABLE)
    assert [n.node.node_id for n in aresponse.source_nodes] == [n.node.node_id for n in response.source_nodes]

    chat = ContextChatEngine.from_defaults(retriever=retriever, llm=MockLLM())
    reply = chat.chat(ANSWERABLE)
    assert reply.source_nodes and "Whistler" in reply.sources[0].content
    reply = await chat.achat("Which instrument is Sam learning to play?")
    assert "cello" in reply.sources[0].content


async def test_memory_block_in_memory_from_defaults(tmp_path, embedder):
    with Synapse(tmp_path, embedder=embedder) as mem:
        mem.add_turns(demo_turns(10))
        block = SynapseMemoryBlock(engine=mem, k=5)
        memory = Memory.from_defaults(session_id="s1", token_limit=60, chat_history_token_ratio=0.5,
                                      token_flush_size=20, memory_blocks=[block])
        said = [
            ChatMessage(role=MessageRole.USER, content="My sister Ana moved to Lisbon last spring."),
            ChatMessage(role=MessageRole.ASSISTANT, content="Lisbon is a lovely city to live in."),
            ChatMessage(role=MessageRole.USER, content="I adopted a beagle puppy called Biscuit."),
            ChatMessage(role=MessageRole.ASSISTANT, content="Biscuit is a great name for a beagle."),
            ChatMessage(role=MessageRole.USER, content="I also started learning the cello."),
            ChatMessage(role=MessageRole.ASSISTANT, content="Cello lessons take patience."),
        ]
        await memory.aput_messages(said)
        flushed = [d["text"] for _, d in mem.graph.nodes(data=True)
                   if d["kind"] == "episode" and d["speaker"] in ("user", "assistant")]
        assert "My sister Ana moved to Lisbon last spring." in flushed  # ejected into SYNAPSE
        # turns still waiting for their consolidation window rarely pass the gate yet
        await mem.aconsolidate()

        await memory.aput(ChatMessage(role=MessageRole.USER, content="Where does my sister live?"))
        messages = await memory.aget()
        system = messages[0]
        assert system.role == MessageRole.SYSTEM and "<synapse_memory>" in system.content
        assert "Lisbon" in system.content
        assert messages[-1].content == "Where does my sister live?"
        assert await block.aget([]) == "Nothing relevant in memory."
        sync_messages = memory.get()
        assert "Lisbon" in sync_messages[0].content


class ScriptedLLM(CustomLLM):
    """A fake LLM answering from a script and keeping the prompts it was given."""

    replies: list = []
    prompts: list = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs) -> CompletionResponse:  # noqa: ANN003
        self.prompts.append(prompt)
        return CompletionResponse(text=self.replies.pop(0))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs):  # noqa: ANN003, ANN201
        yield self.complete(prompt, formatted=formatted)


CHAT = [("My sister Ana moved to Lisbon last spring.", "Lisbon is a lovely city."),
        ("I adopted a beagle puppy called Biscuit.", "Biscuits are great dogs."),
        ("I also started learning the cello.", "Cello lessons take patience."),
        ("My cousin Dana studies architecture.", "A demanding degree!"),
        ("I work night shifts as a nurse in Porto.", "That sounds tiring."),
        ("Where does my sister live?", "She lives in Lisbon.")]


async def test_every_turn_of_a_normal_chat_is_remembered(tmp_path, embedder):
    """Issue 13: with the default Memory (30,000-token short-term history) LlamaIndex gives
    blocks nothing to store in ordinary chats; the block records what each read shows it,
    and SynapseChatMemory records each exchange as the reply is put."""
    with Synapse(tmp_path / "a", embedder=embedder) as mem:
        block = SynapseMemoryBlock(engine=mem, k=3)
        llm = ScriptedLLM(replies=[r for _, r in CHAT], prompts=[])
        chat = SimpleChatEngine.from_defaults(llm=llm, memory=Memory.from_defaults(
            session_id="s1", memory_blocks=[block]))
        for said, _ in CHAT:
            # a sync chat, as a sync program makes it: in a thread with no running loop
            # (called on the test's loop, LlamaIndex runs it on a loop of its own, whose
            # aiosqlite connection outlives it)
            await asyncio.to_thread(chat.chat, said)
        texts = [e["text"] for e in mem.episodes()]
        assert texts == [t for pair in CHAT for t in pair][:-1]  # the last reply: at the next read
        assert "Lisbon" in llm.prompts[-1].split("Where does my sister live?")[0]  # recalled
        history = await chat._memory.aget_all()
        await block.aget(history, session_id="s1")  # a later read records it; replays add nothing
        await block.aget(history, session_id="s1")
        assert [e["text"] for e in mem.episodes()] == [t for pair in CHAT for t in pair]

    with Synapse(tmp_path / "b", embedder=embedder) as mem:
        llm = ScriptedLLM(replies=[r for _, r in CHAT], prompts=[])
        memory = SynapseChatMemory.from_defaults(session_id="s1",
                                                 memory_blocks=[SynapseMemoryBlock(engine=mem, k=3)])
        assert isinstance(memory, SynapseChatMemory)
        chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
        for said, _ in CHAT:
            await chat.achat(said)
        assert [e["text"] for e in mem.episodes()] == [t for pair in CHAT for t in pair]
        assert {e["metadata"]["role"] for e in mem.episodes()} == {"user", "assistant"}


async def test_memory_block_per_user_routing_and_roles(tmp_path, embedder):
    pool = EnginePool(tmp_path, embedder=embedder)
    for user, fact in (("ana", "I live in Lisbon."), ("bo", "I live in Oslo.")):
        memory = SynapseChatMemory.from_defaults(
            session_id=f"{user}-monday", memory_blocks=[SynapseMemoryBlock(engine=pool, user_id=user)])
        chat = SimpleChatEngine.from_defaults(llm=ScriptedLLM(replies=["Noted."], prompts=[]), memory=memory)
        await chat.achat(fact)
    assert pool.namespaces() == [namespace_key("agent", "user_id", "ana"), namespace_key("agent", "user_id", "bo")]
    assert [e["text"] for e in pool.get(namespace_key("agent", "user_id", "bo")).episodes()] == ["I live in Oslo.", "Noted."]
    # no user id: one memory per LlamaIndex session
    session_block = SynapseMemoryBlock(engine=pool, roles=("user",))
    memory = SynapseChatMemory.from_defaults(session_id="s9", memory_blocks=[session_block])
    chat = SimpleChatEngine.from_defaults(llm=ScriptedLLM(replies=["Noted."], prompts=[]), memory=memory)
    await chat.achat("I play the cello.")
    assert [e["text"] for e in pool.get(namespace_key("agent", "session_id", "s9")).episodes()] == ["I play the cello."]
    pool.close()


class _Collector(BaseEventHandler):
    events: list = []

    @classmethod
    def class_name(cls) -> str:
        return "Collector"

    def handle(self, event, **kwargs) -> None:  # noqa: ANN001, ANN003
        self.events.append(event)


async def test_every_llama_index_recall_is_instrumented(demo_engine, tmp_path, embedder):
    """Issue 13: the retriever and the memory block each show a retrieval span: start event
    (query), gate event, end event (nodes), in LlamaIndex instrumentation."""
    collector = _Collector(events=[])
    root = get_dispatcher()
    root.add_event_handler(collector)
    try:
        def recalls() -> list[tuple]:
            out, events = [], collector.events
            for i, start in enumerate(events):
                if not isinstance(start, RetrievalStartEvent):
                    continue
                end = next(e for e in events[i:] if isinstance(e, RetrievalEndEvent)
                           and e.span_id == start.span_id)
                inside = events[i:events.index(end)]
                gate = [e for e in inside if isinstance(e, SynapseGateEvent)]
                assert len(gate) == 1 and gate[0].query == str(start.str_or_query_bundle)
                out.append((str(start.str_or_query_bundle), gate[0], end.nodes))
            return out

        SynapseRetriever(demo_engine, k=3).retrieve(ANSWERABLE)
        await SynapseRetriever(demo_engine, k=3).aretrieve(UNANSWERABLE)
        [(q1, g1, n1), (q2, g2, n2)] = recalls()
        assert q1 == ANSWERABLE and not g1.rejected and g1.ids == [n.node.node_id for n in n1]
        assert q2 == UNANSWERABLE and g2.rejected and n2 == []

        collector.events.clear()
        block = SynapseMemoryBlock(engine=demo_engine, k=3, record_history=False)
        await block.aget([ChatMessage(role=MessageRole.USER, content=ANSWERABLE)])
        [(query, gate, nodes)] = recalls()
        assert query == ANSWERABLE and not gate.rejected and "Whistler" in " ".join(
            n.node.get_content() for n in nodes)
    finally:
        root.event_handlers.remove(collector)

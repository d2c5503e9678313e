"""LangChain 1.x agents: memory middleware for ``create_agent`` and memory tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._adapter_utils import (
    DEFAULT_EMPTY_TEXT,
    DEFAULT_NAMESPACE_KEYS,
    MEMORY_HEADER,
    EngineSource,
    finished_turn,
    format_memories,
    namespace_from_configurable,
    require,
    resolve_engine,
)
from ..types import MemoryEngine

require("langchain", "langchain")

from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain.agents.middleware.types import ModelRequest, ModelResponse  # noqa: E402
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage  # noqa: E402
from langchain_core.runnables.config import ensure_config  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402

def _engine(source: EngineSource, keys: Sequence[str]) -> MemoryEngine:
    return resolve_engine(source, lambda: namespace_from_configurable(
        ensure_config().get("configurable"), keys))


def _last_human(messages: Sequence[BaseMessage]) -> HumanMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)


class SynapseMemoryMiddleware(AgentMiddleware):
    """Agent middleware: recall memories before each model call, record each finished turn.

    Before the model is called, the latest user message is the query; the retrieved memories
    (or "Nothing relevant in memory." when the gate rejects it) are appended to the system
    message of that call only, so they are not written into the agent's message state. After a
    model call that ends the turn (an ``AIMessage`` without tool calls), the user message and
    the answer are recorded as two episodes; messages are recorded under their ids, so a
    replayed turn is not recorded twice.

    >>> from langchain.agents import create_agent
    >>> agent = create_agent(model, tools=create_synapse_tools(mem),
    ...                      middleware=[SynapseMemoryMiddleware(mem)])   # doctest: +SKIP
    >>> agent.invoke({"messages": [{"role": "user", "content": "I moved to Porto"}]})  # doctest: +SKIP

    Args:
        engine: a ``Synapse``, or an ``EnginePool`` to pick the memory per run from
            ``config["configurable"]`` (the first of ``namespace_keys`` present).
        k: memories per recall.
        record: record finished turns (set False for read-only memory).
    """

    def __init__(self, engine: EngineSource, *, k: int = 5, record: bool = True,
                 namespace_keys: Sequence[str] = DEFAULT_NAMESPACE_KEYS,
                 user_speaker: str = "user", ai_speaker: str = "assistant",
                 header: str = MEMORY_HEADER, empty_text: str = DEFAULT_EMPTY_TEXT) -> None:
        super().__init__()
        self.engine = engine
        self.k = k
        self.record = record
        self.namespace_keys = tuple(namespace_keys)
        self.user_speaker, self.ai_speaker = user_speaker, ai_speaker
        self.header, self.empty_text = header, empty_text

    # recall -------------------------------------------------------------------------------
    def _with_memories(self, request: ModelRequest, result: Any) -> ModelRequest:
        block = f"{self.header}\n{format_memories(result, empty=self.empty_text)}"
        base = request.system_prompt
        return request.override(system_message=SystemMessage(f"{base}\n\n{block}" if base else block))

    def wrap_model_call(self, request: ModelRequest,
                        handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        human = _last_human(request.messages)
        if human is None or not human.text.strip():
            return handler(request)
        result = _engine(self.engine, self.namespace_keys).retrieve(human.text, k=self.k)
        return handler(self._with_memories(request, result))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
                               ) -> ModelResponse:
        human = _last_human(request.messages)
        if human is None or not human.text.strip():
            return await handler(request)
        result = await _engine(self.engine, self.namespace_keys).aretrieve(human.text, k=self.k)
        return await handler(self._with_memories(request, result))

    # record -------------------------------------------------------------------------------
    def _turns(self, state: Any, engine: MemoryEngine) -> list[dict[str, Any]]:
        if not self.record or not state["messages"]:
            return []
        return finished_turn(state["messages"], engine, user_speaker=self.user_speaker,
                             ai_speaker=self.ai_speaker)

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        engine = _engine(self.engine, self.namespace_keys)
        turns = self._turns(state, engine)
        if turns:
            engine.add_turns(turns)
        return None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        engine = _engine(self.engine, self.namespace_keys)
        turns = self._turns(state, engine)
        if turns:
            await engine.aadd_turns(turns)
        return None


def create_synapse_tools(engine: EngineSource, *, k: int = 5,
                         namespace_keys: Sequence[str] = DEFAULT_NAMESPACE_KEYS,
                         speaker: str = "memory") -> list[BaseTool]:
    """``search_memory`` and ``save_memory`` tools over a SYNAPSE memory, for any agent.

    >>> search, save = create_synapse_tools(mem)                     # doctest: +SKIP
    >>> save.invoke({"text": "Sam is allergic to peanuts"})          # doctest: +SKIP
    'Saved memory ep-...'
    >>> search.invoke({"query": "What is Sam allergic to?"})         # doctest: +SKIP
    '- [2025-...] memory: Sam is allergic to peanuts'
    """

    def search_memory(query: str) -> str:
        return format_memories(_engine(engine, namespace_keys).retrieve(query, k=k))

    async def asearch_memory(query: str) -> str:
        return format_memories(await _engine(engine, namespace_keys).aretrieve(query, k=k))

    def save_memory(text: str) -> str:
        return f"Saved memory {_engine(engine, namespace_keys).add_turn(text, speaker=speaker)}"

    async def asave_memory(text: str) -> str:
        return f"Saved memory {await _engine(engine, namespace_keys).aadd_turn(text, speaker=speaker)}"

    return [
        StructuredTool.from_function(
            func=search_memory, coroutine=asearch_memory, name="search_memory",
            description="Search long-term memory for facts from earlier conversations. "
                        "Input: a question or keywords. Says so when memory holds nothing relevant."),
        StructuredTool.from_function(
            func=save_memory, coroutine=asave_memory, name="save_memory",
            description="Save one fact to long-term memory so it can be recalled in later "
                        "conversations. Input: the fact as a short sentence."),
    ]

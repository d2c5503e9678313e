"""Memory nodes for a LangGraph ``StateGraph``: recall before the model, record after it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .._adapter_utils import (
    DEFAULT_EMPTY_TEXT,
    DEFAULT_NAMESPACE_KEYS,
    MEMORY_HEADER,
    EngineSource,
    finished_turn,
    format_memories,
    item_metadata,
    namespace_from_configurable,
    require,
    resolve_engine,
)
from ..types import MemoryEngine, RetrievalResult

require("langgraph", "langgraph")

from langchain_core.messages import (  # noqa: E402
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig, RunnableLambda  # noqa: E402
from langgraph.graph import MessagesState  # noqa: E402

__all__ = ["MEMORY_MESSAGE_ID", "SynapseMemoryNodes", "SynapseMemoryState"]

#: Id prefix of the system message the recall node keeps in ``messages`` (one at a time).
MEMORY_MESSAGE_ID = "synapse-memories"


class SynapseMemoryState(MessagesState):
    """``MessagesState`` plus the ``memories`` the recall node writes (a list of dicts:
    ``text``, ``id``, ``kind``, ``speaker``, ``timestamp``, ``score``, ``components``,
    ``path``), plus ``memory_rejected``: True when the gate found nothing relevant."""

    memories: list[dict[str, Any]]
    memory_rejected: bool


def _messages(state: Any, key: str) -> Sequence[AnyMessage]:
    messages = state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)
    return messages or []


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.text, str) else str(message.content)


class SynapseMemoryNodes:
    """Two graph nodes that give any ``StateGraph`` long-term SYNAPSE memory.

    - :attr:`recall` reads the latest user message, retrieves memories for it and writes them
      into the state: under ``memories_key`` (a list of dicts, for your own state schema or
      :class:`SynapseMemoryState`) and/or, with ``system_message=True``, as one
      ``SystemMessage`` (id ``"synapse-memories-..."``) placed after the user message, replacing
      the previous one, so a plain ``MessagesState`` graph needs no other change.
    - :attr:`record` records the finished turn: the latest user message and the final AI
      answer (an ``AIMessage`` without tool calls) become two episodes. Message ids make it
      idempotent: a turn already recorded (a replayed node, a resumed thread) is skipped.

    Put ``recall`` before your model node and ``record`` where the turn ends (on the edge to
    ``END``). The memory of a run is chosen from ``config["configurable"]``: the first of
    ``namespace_keys`` present (default ``("user_id", "thread_id")``: one memory per user
    across threads, else one per thread). Both nodes are runnables with real sync and async
    paths (``invoke``/``ainvoke``). Works with any checkpointer: the conversation is in the
    checkpoint, the long-term memory in SYNAPSE (both survive a restart).

    >>> from langgraph.graph import StateGraph, START, END
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from synapse_integrations.langgraph import EnginePool, SynapseMemoryNodes, SynapseMemoryState
    >>> memory = SynapseMemoryNodes(EnginePool("./memory"), k=5)            # doctest: +SKIP
    >>> builder = StateGraph(SynapseMemoryState)                             # doctest: +SKIP
    >>> builder.add_node("recall", memory.recall)                            # doctest: +SKIP
    >>> builder.add_node("agent", call_model)                                # doctest: +SKIP
    >>> builder.add_node("record", memory.record)                            # doctest: +SKIP
    >>> builder.add_edge(START, "recall"); builder.add_edge("recall", "agent")  # doctest: +SKIP
    >>> builder.add_edge("agent", "record"); builder.add_edge("record", END)    # doctest: +SKIP
    >>> graph = builder.compile(checkpointer=InMemorySaver())                # doctest: +SKIP
    >>> graph.invoke({"messages": [("user", "I moved to Porto")]},
    ...              {"configurable": {"thread_id": "t1", "user_id": "u42"}})  # doctest: +SKIP

    Args:
        engine: a ``Synapse`` (one memory for every run), an ``EnginePool`` (a memory per
            namespace) or a callable ``namespace -> Synapse``.
        k: memories per recall.
        memories_key: state key for the retrieved memories (``None``: do not write it).
            LangGraph drops keys its state schema does not have, so add it to your schema or
            use :class:`SynapseMemoryState`.
        system_message: also put the memories into ``messages`` as a system message.
        messages_key: the state key holding the conversation.
        namespace_keys: ``config["configurable"]`` keys naming the memory, first match wins.
        user_speaker / ai_speaker: speakers recorded for the two sides of a turn.
    """

    def __init__(self, engine: EngineSource, *, k: int = 5, memories_key: str | None = "memories",
                 system_message: bool = True, messages_key: str = "messages",
                 namespace_keys: Sequence[str] = DEFAULT_NAMESPACE_KEYS,
                 user_speaker: str = "user", ai_speaker: str = "assistant",
                 header: str = MEMORY_HEADER, empty_text: str = DEFAULT_EMPTY_TEXT) -> None:
        self.engine = engine
        self.k = k
        self.memories_key = memories_key
        self.system_message = system_message
        self.messages_key = messages_key
        self.namespace_keys = tuple(namespace_keys)
        self.user_speaker, self.ai_speaker = user_speaker, ai_speaker
        self.header, self.empty_text = header, empty_text
        self.recall = RunnableLambda(self._recall, afunc=self._arecall, name="synapse_recall")
        self.record = RunnableLambda(self._record, afunc=self._arecord, name="synapse_record")

    def engine_for(self, config: RunnableConfig | None) -> MemoryEngine:
        """The memory a run with ``config`` uses."""
        return resolve_engine(self.engine, lambda: namespace_from_configurable(
            (config or {}).get("configurable"), self.namespace_keys))

    # recall -------------------------------------------------------------------------------
    def _query(self, state: Any) -> str | None:
        human = next((m for m in reversed(_messages(state, self.messages_key))
                      if isinstance(m, HumanMessage) and _text(m).strip()), None)
        return _text(human) if human is not None else None

    def _update(self, state: Any, result: RetrievalResult | None) -> dict[str, Any]:
        update: dict[str, Any] = {}
        if self.memories_key is not None:
            items = result.accepted if result is not None else ()
            update[self.memories_key] = [{"text": it.text, **item_metadata(it)} for it in items]
            update["memory_rejected"] = bool(result is not None and result.rejected)
        if self.system_message and result is not None:
            # the previous memory message goes; the new one follows the user's message
            messages = [RemoveMessage(id=m.id) for m in _messages(state, self.messages_key)
                        if m.id and m.id.startswith(MEMORY_MESSAGE_ID)]
            text = format_memories(result, empty=self.empty_text)
            messages.append(SystemMessage(f"{self.header}\n{text}",
                                          id=f"{MEMORY_MESSAGE_ID}-{uuid.uuid4().hex[:12]}"))
            update[self.messages_key] = messages
        return update

    def _recall(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = self._query(state)
        result = self.engine_for(config).retrieve(query, k=self.k) if query else None
        return self._update(state, result)

    async def _arecall(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = self._query(state)
        result = await self.engine_for(config).aretrieve(query, k=self.k) if query else None
        return self._update(state, result)

    # record -------------------------------------------------------------------------------
    def _turns(self, state: Any, engine: MemoryEngine) -> list[dict[str, Any]]:
        return finished_turn(_messages(state, self.messages_key), engine,
                             user_speaker=self.user_speaker, ai_speaker=self.ai_speaker)

    def _record(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        engine = self.engine_for(config)
        turns = self._turns(state, engine)
        if turns:
            engine.add_turns(turns)
        return {}

    async def _arecord(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        engine = self.engine_for(config)
        turns = self._turns(state, engine)
        if turns:
            await engine.aadd_turns(turns)
        return {}


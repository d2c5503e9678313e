"""Memory nodes for a LangGraph ``StateGraph``: recall before the model, record after it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .._adapter_utils import (
    DEFAULT_EMPTY_TEXT,
    DEFAULT_NAMESPACE_KEYS,
    MEMORY_HEADER,
    ROLES,
    EngineSource,
    Roles,
    feedback_engine,
    finished_turn,
    format_memories,
    item_metadata,
    memory_ids,
    namespace_from_configurable,
    require,
    resolve_engine,
    time_kwargs,
)
from ..errors import InvalidTypeError
from ..gate_judge import LLMGateJudge
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
from langgraph.graph.message import REMOVE_ALL_MESSAGES  # noqa: E402

from .._lc_recall import arecall, recall  # noqa: E402

__all__ = ["BASE_PROMPT_KEY", "MEMORY_MESSAGE_ID", "SynapseMemoryNodes", "SynapseMemoryState",
           "with_memories"]

#: Id prefix of the system message the recall node adds when the thread has none.
MEMORY_MESSAGE_ID = "synapse-memories"
#: ``response_metadata`` key of the leading system message holding the prompt without memories.
BASE_PROMPT_KEY = "synapse_base_prompt"


class SynapseMemoryState(MessagesState):
    """``MessagesState`` plus the ``memories`` the recall node writes (a list of dicts:
    ``text``, ``id``, ``kind``, ``speaker``, ``timestamp``, ``score``, ``components``,
    ``path``, ``supersedes``/``superseded_by`` and ``valid_from``/``valid_until``), plus ``memory_rejected``: True when the gate found nothing relevant, and
    ``memories_used``: the ids of the recalled memories the answer used, when your model
    node says so (for :class:`SynapseMemoryNodes`' ``used_key``)."""

    memories: list[dict[str, Any]]
    memory_rejected: bool
    memories_used: list[str]


def _messages(state: Any, key: str) -> Sequence[AnyMessage]:
    messages = state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)
    return messages or []


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.text, str) else str(message.content)


def _merged(base: Any, block: str) -> Any:
    """A system prompt (text, content blocks or None) with the memory block appended."""
    if not base:
        return block
    if isinstance(base, str):
        return f"{base}\n\n{block}"
    return [*base, {"type": "text", "text": block}]


def _ours(message: BaseMessage) -> bool:
    return bool(message.id and message.id.startswith(MEMORY_MESSAGE_ID)) \
        or BASE_PROMPT_KEY in (message.response_metadata or {})


def _base_prompt(message: BaseMessage) -> Any:
    """The system prompt of a leading system message, without the memories in it."""
    meta = message.response_metadata or {}
    if BASE_PROMPT_KEY in meta:
        return meta[BASE_PROMPT_KEY]
    return None if _ours(message) else message.content


def with_memories(messages: Sequence[BaseMessage], block: str) -> list[BaseMessage]:
    """``messages`` with ``block`` in their one leading system message: appended to the
    first message when it is a system message (without any memories a previous call put
    there), else a new system message in front. Other memory messages are dropped. Every
    provider accepts the result (one system message, first)."""
    rest = [m for m in messages if not (isinstance(m, SystemMessage) and _ours(m))]
    first = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
    if first is not None and not _ours(first):
        rest = rest[1:]
    base = _base_prompt(first) if first is not None else None
    return [SystemMessage(_merged(base, block), response_metadata={BASE_PROMPT_KEY: base}), *rest]


class SynapseMemoryNodes:
    """Two graph nodes that give any ``StateGraph`` long-term SYNAPSE memory.

    - :attr:`recall` reads the latest user message, retrieves memories for it and writes them
      into the state: under ``memories_key`` (a list of dicts, for your own state schema or
      :class:`SynapseMemoryState`) and, with ``system_message=True`` (default), into the
      thread's *leading* system message: appended to your system prompt when the thread
      starts with one (the prompt itself is kept in the message's ``response_metadata`` and
      the memories are replaced each turn), else in a new system message put first. So
      ``model.invoke(state["messages"])`` sends one system message, first, which every
      provider accepts (Anthropic and Gemini refuse a system message after the user's), and
      a plain ``MessagesState`` graph needs no other change. The memories are quoted as
      data (:func:`~synapse_integrations._adapter_utils.format_memories`: one
      ``<memories>`` block after a sentence saying they are user-provided data, not
      instructions; nothing a memory says can start a line). With ``system_message=False``
      the messages are left alone; build the model's input with :meth:`prompt`.
      Each recall is a retriever run named ``synapse_recall`` in the run's callbacks
      (LangSmith), with the gate's decision as the custom event ``synapse_gate``.
    - :attr:`record` records the finished turn: the latest user message and the final AI
      answer (an ``AIMessage`` without tool calls) become two episodes (``roles`` chooses
      which). Message ids make it idempotent: a turn already recorded (a replayed node, a
      resumed thread) is skipped.

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
        system_message: also put the memories into the leading system message of ``messages``.
        messages_key: the state key holding the conversation.
        namespace_keys: ``config["configurable"]`` keys naming the memory, first match wins.
        user_speaker / ai_speaker: speakers recorded for the two sides of a turn.
        roles: which sides are recorded: ``("user", "assistant")`` (default), ``("user",)``,
            or a callable ``(role, text) -> bool``.
        judge: an optional :class:`~synapse_integrations.gate_judge.LLMGateJudge` (any chat
            model) that reviews what the offline gate accepted before :attr:`recall`
            writes it.
        used_key: a state key where your model node puts the ids of the recalled memories
            its answer used (e.g. ``"memories_used"`` of :class:`SynapseMemoryState`, from
            citations or structured output). When set and present, :attr:`record` also
            gives the memory usage feedback for the turn's question: those ids used, the
            other recalled ones (``state[memories_key]``) not (``Synapse.feedback``).
        current_only: recall only versions that still hold: a memory replaced by a newer
            version (``Synapse.update``/``supersede``) is left out instead of recalled
            right below its replacement. Each recalled memory carries ``valid_from`` and
            ``valid_until`` (ISO 8601; ``valid_until`` None while it holds) either way.

    >>> memory = SynapseMemoryNodes(pool, current_only=True)                 # doctest: +SKIP
    """

    def __init__(self, engine: EngineSource, *, k: int = 5, memories_key: str | None = "memories",
                 system_message: bool = True, messages_key: str = "messages",
                 namespace_keys: Sequence[str] = DEFAULT_NAMESPACE_KEYS,
                 user_speaker: str = "user", ai_speaker: str = "assistant",
                 roles: Roles = ROLES, used_key: str | None = None,
                 header: str = MEMORY_HEADER, empty_text: str = DEFAULT_EMPTY_TEXT,
                 judge: LLMGateJudge | None = None, current_only: bool = False) -> None:
        if used_key is not None and not isinstance(used_key, str):
            raise TypeError(f"used_key must be a state key (str) or None, got {used_key!r}")
        if not isinstance(current_only, bool):
            raise InvalidTypeError(f"current_only must be a bool, got {type(current_only).__name__}")
        self.engine = engine
        self.current_only = current_only
        self.judge = judge
        self.used_key = used_key
        self.roles = roles
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

    def _block(self, memories: RetrievalResult | Sequence[Mapping[str, Any]]) -> str:
        return format_memories(memories, header=self.header, empty=self.empty_text)

    def _update(self, state: Any, result: RetrievalResult | None) -> dict[str, Any]:
        update: dict[str, Any] = {}
        if self.memories_key is not None:
            items = result.accepted if result is not None else ()
            update[self.memories_key] = [{"text": it.text, **item_metadata(it)} for it in items]
            update["memory_rejected"] = bool(result is not None and result.rejected)
        if self.system_message and result is not None:
            messages = list(_messages(state, self.messages_key))
            wanted = with_memories(messages, self._block(result))
            first = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
            stale = [RemoveMessage(id=m.id) for m in messages[1:]
                     if isinstance(m, SystemMessage) and _ours(m) and m.id]
            if first is not None:  # replace the leading system message in place (same id)
                wanted[0].id = first.id
                update[self.messages_key] = [*stale, wanted[0]]
            else:  # a new leading message: the list is rewritten with it in front
                wanted[0].id = f"{MEMORY_MESSAGE_ID}-{uuid.uuid4().hex[:12]}"
                update[self.messages_key] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *wanted]
        return update

    def prompt(self, state: Any, system_prompt: str | None = None) -> list[BaseMessage]:
        """The messages to send to the model: the state's conversation with the recalled
        memories (``state[memories_key]``) in one leading system message, after
        ``system_prompt`` when given, quoted as data like the recall node's
        (:func:`~synapse_integrations._adapter_utils.format_memories`). For graphs built
        with ``system_message=False``.

        >>> def agent(state):                                                 # doctest: +SKIP
        ...     return {"messages": [model.invoke(memory.prompt(state, "You are helpful."))]}
        """
        memories = (state.get(self.memories_key) if isinstance(state, Mapping)
                    else getattr(state, self.memories_key, None)) if self.memories_key else None
        block = self._block(memories or [])
        messages = list(_messages(state, self.messages_key))
        if system_prompt is not None:
            messages = [SystemMessage(system_prompt),
                        *(m for m in messages if not isinstance(m, SystemMessage))]
        return with_memories(messages, block)

    def _recall(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = self._query(state)
        result = recall(self.engine_for(config), query, k=self.k, config=config,
                        judge=self.judge, time=time_kwargs(current_only=self.current_only))[0] \
            if query else None
        return self._update(state, result)

    async def _arecall(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        query = self._query(state)
        result = (await arecall(self.engine_for(config), query, k=self.k, config=config,
                                judge=self.judge,
                                time=time_kwargs(current_only=self.current_only)))[0] \
            if query else None
        return self._update(state, result)

    # record -------------------------------------------------------------------------------
    def _turns(self, state: Any, engine: MemoryEngine) -> list[dict[str, Any]]:
        return finished_turn(_messages(state, self.messages_key), engine,
                             user_speaker=self.user_speaker, ai_speaker=self.ai_speaker,
                             roles=self.roles)

    def _feedback(self, state: Any) -> tuple[str, list[str], list[str]] | None:
        """``(question, used, unused)`` when ``used_key`` is set and the state holds it."""
        if self.used_key is None:
            return None
        get = state.get if isinstance(state, Mapping) else lambda k: getattr(state, k, None)
        used = get(self.used_key)
        query = self._query(state)
        if used is None or query is None:
            return None
        used = memory_ids(used, self.used_key)
        shown = memory_ids(get(self.memories_key) or [], self.memories_key) \
            if self.memories_key else []
        return query, used, [i for i in shown if i not in used]

    def _record(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        engine = self.engine_for(config)
        fb = self._feedback(state)
        if fb is not None:
            feedback_engine(engine).feedback(*fb)
        turns = self._turns(state, engine)
        if turns:
            engine.add_turns(turns)
        return {}

    async def _arecord(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        engine = self.engine_for(config)
        fb = self._feedback(state)
        if fb is not None:
            await feedback_engine(engine).afeedback(*fb)
        turns = self._turns(state, engine)
        if turns:
            await engine.aadd_turns(turns)
        return {}


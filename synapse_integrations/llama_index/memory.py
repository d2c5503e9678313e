"""``SynapseMemoryBlock``: a long-term block for LlamaIndex's ``Memory``, and
``SynapseChatMemory``: a ``Memory`` that records every finished exchange at once.

How LlamaIndex feeds memory blocks (llama-index-core 0.14): ``Memory.put`` only stores a
message in the short-term history (a SQL table); a block's ``aput`` is called only with
the messages that *overflow* it (``token_limit x chat_history_token_ratio``, 30,000 x 0.7
tokens by default), so in an ordinary chat a block that records in ``aput`` records
nothing. What every block does see is ``aget(messages)`` on each read: the whole active
history, ending with the user's new message. So this block records there (after
retrieving, so a question is never its own memory), and in ``aput`` too; the assistant's
latest reply is then recorded on the next read. :class:`SynapseChatMemory` records each
exchange as soon as the reply is put.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Union

from .._adapter_utils import (
    DEFAULT_EMPTY_TEXT,
    ROLES,
    format_memories,
    namespace_from_configurable,
    new_turns,
    require,
    resolve_engine,
    time_kwargs,
    turn_id,
)
from ..types import MemoryEngine, RetrievalResult

require("llama_index.core", "llamaindex")

from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.instrumentation.events.retrieval import (  # noqa: E402
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from llama_index.core.memory import BaseMemoryBlock, Memory  # noqa: E402
from llama_index.core.storage.chat_store.base_db import MessageStatus  # noqa: E402
from pydantic import Field  # noqa: E402

from .retrievers import dispatcher, gate_event, to_nodes  # noqa: E402

__all__ = ["SynapseChatMemory", "SynapseMemoryBlock"]

_ROLE = {MessageRole.USER.value: "user", MessageRole.ASSISTANT.value: "assistant"}


def _text(message: ChatMessage) -> str:
    return (message.content or "") if isinstance(message.content, str) or message.content is None \
        else str(message.content)


def _role(message: ChatMessage) -> str:
    return message.role.value if isinstance(message.role, MessageRole) else str(message.role)


class SynapseMemoryBlock(BaseMemoryBlock[str]):
    """Long-term SYNAPSE memory inside ``llama_index.core.memory.Memory``.

    On every read (``_aget``) the latest user message (or the latest message) is the query
    and the block's content is the retrieved memories, quoted as data in one ``<memories>``
    block (:func:`~synapse_integrations._adapter_utils.format_memories`: nothing a memory
    says can start a line or close the block, nor LlamaIndex's ``<memory>`` wrapper), or
    ``empty_text`` when the gate rejects it; each read is a retrieval span in LlamaIndex instrumentation
    (``RetrievalStartEvent``, a :class:`SynapseGateEvent`, ``RetrievalEndEvent``). Then the
    messages it was shown that the memory does not hold yet are recorded (``record_history``),
    and so are messages flushed out of the short-term history (``_aput``). A message is
    stored under an id derived from its session, role and text, so a replay or a message
    seen again records nothing twice (a message repeated word for word in one session is
    stored once).

    >>> from llama_index.core.memory import Memory
    >>> memory = Memory.from_defaults(session_id="u42", token_limit=4000,
    ...                               memory_blocks=[SynapseMemoryBlock(engine=mem)])  # doctest: +SKIP
    >>> chat_engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)          # doctest: +SKIP

    Args:
        engine: a ``Synapse`` (one memory), an ``EnginePool`` (a memory per user or session)
            or a callable ``namespace -> Synapse``.
        namespace_keys: with a pool, the memory is ``"<key>=<value>"`` for the first of these
            that is set: ``user_id`` (this field, or ``memory.get(user_id=...)``) and the
            ``session_id`` LlamaIndex passes (the ``Memory``'s session).
        user_id: the user whose memory this block uses (with a pool).
        k: memories per read.
        roles: which messages are recorded: ``("user", "assistant")`` (default),
            ``("user",)``, or a callable ``(role, text) -> bool``. System and tool messages
            are never recorded.
        record_history: record the messages each read shows (True), or only the flushed ones.
        judge: an optional :class:`~synapse_integrations.gate_judge.LLMGateJudge` (any
            LangChain chat model) that reviews what the offline gate accepted.
        as_of: read the memory as it stood at this time (a datetime, epoch seconds or an ISO
            8601 string); ``None`` (default): now.
        current_only: leave out versions replaced by a newer one (``Synapse.update`` /
            ``supersede``) instead of showing them below it.

    Both can also be given for one read, as keywords of ``Memory.get``/``aget`` (which
    hands them to its blocks), over the block's own:

    >>> memory.get(as_of="2024-02-15")                                     # doctest: +SKIP
    """

    engine: Any = Field(description="A Synapse, an EnginePool or a callable namespace -> Synapse.")
    name: str = "synapse_memory"
    description: str | None = "Long-term memories retrieved by SYNAPSE spreading activation."
    k: int = Field(default=5, ge=1)
    roles: Any = Field(default=ROLES, description="Roles recorded, or a callable (role, text) -> bool.")
    empty_text: str = DEFAULT_EMPTY_TEXT
    user_id: str | None = None
    namespace_keys: tuple[str, ...] = ("user_id", "session_id")
    record_history: bool = True
    judge: Any = Field(default=None, description="Optional LLMGateJudge reviewing accepted results.")
    as_of: Union[datetime, float, str, None] = Field(
        default=None, description="Read the memory as it stood at this time (datetime, epoch "
                                  "seconds or ISO 8601); None: now.")
    current_only: bool = Field(default=False,
                               description="Leave out versions known to be replaced.")

    def engine_for(self, session_id: str | None = None, user_id: str | None = None) -> MemoryEngine:
        """The memory used for this session / user."""
        ids = {"user_id": user_id or self.user_id, "session_id": session_id}
        return resolve_engine(self.engine, lambda: namespace_from_configurable(ids, self.namespace_keys))

    def _query(self, messages: list[ChatMessage] | None) -> str | None:
        messages = messages or []
        users = [m for m in messages if m.role == MessageRole.USER and _text(m).strip()]
        pick = users[-1] if users else next((m for m in reversed(messages) if _text(m).strip()), None)
        return _text(pick) if pick else None

    @dispatcher.span
    async def arecall(self, query: str, engine: MemoryEngine, *, as_of: Any = None,
                      current_only: bool | None = None) -> RetrievalResult:
        """Retrieve ``query`` as a LlamaIndex retrieval span (start, gate, end events);
        ``as_of`` / ``current_only`` (None: the block's) read it in time."""
        time = time_kwargs(self.as_of if as_of is None else as_of,
                           self.current_only if current_only is None else current_only)
        dispatcher.event(RetrievalStartEvent(str_or_query_bundle=query))
        result = await engine.aretrieve(query, k=self.k, **time)
        if self.judge is not None:
            result = await self.judge.areview(result)
        dispatcher.event(gate_event(result))
        dispatcher.event(RetrievalEndEvent(str_or_query_bundle=query, nodes=to_nodes(result)))
        return result

    async def arecord(self, messages: Sequence[ChatMessage], *, session_id: str | None = None,
                      user_id: str | None = None) -> list[str]:
        """Record ``messages`` (the user's and the assistant's, as ``roles`` allows) that the
        memory does not hold yet. Returns the new episode ids."""
        engine = self.engine_for(session_id, user_id)
        candidates = []
        for m in messages:
            role = _ROLE.get(_role(m))
            if role is None:
                continue
            text = _text(m)
            session = session_id or (m.additional_kwargs or {}).get("session_id") or ""
            candidates.append({"text": text, "role": role, "speaker": role,
                               "id": turn_id(role, text, f"session={session}")})
        turns = new_turns(candidates, engine, roles=self.roles)
        return await engine.aadd_turns(turns) if turns else []

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        session_id, user_id = block_kwargs.get("session_id"), block_kwargs.get("user_id")
        engine = self.engine_for(session_id, user_id)
        query = self._query(messages)
        text = self.empty_text
        if query is not None:
            result = await self.arecall(query, engine, as_of=block_kwargs.get("as_of"),
                                        current_only=block_kwargs.get("current_only"))
            text = format_memories(result, empty=self.empty_text)
        if self.record_history and messages:  # after retrieving: a question is not its own memory
            await self.arecord(messages, session_id=session_id, user_id=user_id)
        return text

    async def _aput(self, messages: list[ChatMessage]) -> None:
        session_id = next(((m.additional_kwargs or {}).get("session_id") for m in messages), None)
        await self.arecord(messages, session_id=session_id)


class SynapseChatMemory(Memory):
    """``Memory`` that hands each finished exchange to its :class:`SynapseMemoryBlock` s as
    soon as the assistant's reply is put (``put``/``aput``/``put_messages``), instead of
    waiting for the next read. Build it like ``Memory``:

    >>> memory = SynapseChatMemory.from_defaults(
    ...     session_id="u42", memory_blocks=[SynapseMemoryBlock(engine=pool)])     # doctest: +SKIP
    """

    async def _record(self, new: Sequence[ChatMessage]) -> None:
        if not any(_ROLE.get(_role(m)) == "assistant" for m in new):
            return  # a user message is recorded with its answer (after its recall)
        history = await self.sql_store.get_messages(self.session_id, status=MessageStatus.ACTIVE)
        for block in self.memory_blocks:
            if isinstance(block, SynapseMemoryBlock):
                await block.arecord(history, session_id=self.session_id)

    async def aput(self, message: ChatMessage) -> None:
        await super().aput(message)
        await self._record([message])

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        await super().aput_messages(messages)
        await self._record(messages)

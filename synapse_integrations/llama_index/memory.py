"""``SynapseMemoryBlock``: a long-term block for LlamaIndex's ``Memory``."""

from __future__ import annotations

from typing import Any

from .._adapter_utils import DEFAULT_EMPTY_TEXT, format_memories, require

require("llama_index.core", "llamaindex")

from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.memory import BaseMemoryBlock  # noqa: E402
from pydantic import Field  # noqa: E402


def _text(message: ChatMessage) -> str:
    return (message.content or "") if isinstance(message.content, str) or message.content is None \
        else str(message.content)


class SynapseMemoryBlock(BaseMemoryBlock[str]):
    """Long-term SYNAPSE memory inside ``llama_index.core.memory.Memory``.

    Messages flushed out of the short-term chat history are recorded as episodes (``_aput``);
    on every read the latest user message (or the latest message) is the query and the block's
    content is the retrieved memories, or ``empty_text`` when the gate rejects it (``_aget``).

    >>> from llama_index.core.memory import Memory
    >>> memory = Memory.from_defaults(session_id="u42", token_limit=4000,
    ...                               memory_blocks=[SynapseMemoryBlock(engine=mem)])  # doctest: +SKIP
    >>> chat_engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)          # doctest: +SKIP

    Args:
        engine: the memory (a ``Synapse``).
        k: memories per read.
        roles: which message roles are recorded (system and tool messages are skipped).
    """

    engine: Any = Field(description="The Synapse memory.")
    name: str = "synapse_memory"
    description: str | None = "Long-term memories retrieved by SYNAPSE spreading activation."
    k: int = Field(default=5, ge=1)
    roles: tuple[str, ...] = (MessageRole.USER.value, MessageRole.ASSISTANT.value)
    empty_text: str = DEFAULT_EMPTY_TEXT

    def _query(self, messages: list[ChatMessage] | None) -> str | None:
        messages = messages or []
        users = [m for m in messages if m.role == MessageRole.USER and _text(m).strip()]
        pick = users[-1] if users else next((m for m in reversed(messages) if _text(m).strip()), None)
        return _text(pick) if pick else None

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = self._query(messages)
        if query is None:
            return self.empty_text
        return format_memories(await self.engine.aretrieve(query, k=self.k), empty=self.empty_text)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        turns = [{"text": _text(m), "speaker": m.role.value} for m in messages
                 if m.role.value in self.roles and _text(m).strip()]
        if turns:
            await self.engine.aadd_turns(turns)

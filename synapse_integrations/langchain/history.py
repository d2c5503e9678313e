"""``SynapseChatMessageHistory``: a LangChain chat history stored as SYNAPSE episodes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._adapter_utils import EnginePool, list_episodes, namespace_key, require
from ..types import MemoryEngine

require("langchain_core", "langchain")

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict  # noqa: E402

_KEY = "lc_message"
#: The engine's role of a LangChain message type (``metadata["role"]``; other types keep theirs).
_ROLES = {"human": "user", "ai": "assistant"}


def _turn(message: BaseMessage) -> dict[str, Any]:
    """One message as a turn. Its speaker is the message's ``name`` when it has one (a
    multi-party chat: ``HumanMessage("...", name="Sam")``), so questions and speaker
    filters can name the person; else its type. The role is kept in the metadata."""
    text = message.text if isinstance(message.text, str) else str(message.content)
    name = message.name.strip() if isinstance(message.name, str) else ""
    turn = {"text": text if text.strip() else f"[{message.type} message]",
            "speaker": name or message.type,
            "metadata": {_KEY: message_to_dict(message),
                         "role": _ROLES.get(message.type, message.type)}}
    if message.id:  # recorded under its id: adding the same message again stores nothing
        turn["id"] = f"msg-{message.id}"
    return turn


def _new(engine: MemoryEngine, messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    turns, seen = [], set()
    for m in messages:
        turn = _turn(m)
        if "id" in turn and (turn["id"] in seen or engine.contains(turn["id"])):
            continue
        seen.add(turn.get("id"))
        turns.append(turn)
    return turns


class SynapseChatMessageHistory(BaseChatMessageHistory):
    """A chat history whose every message is also a SYNAPSE memory (one episode each).

    One memory per session: pass an :class:`~synapse_integrations.EnginePool` and the
    session id, e.g. with ``RunnableWithMessageHistory``:

    >>> from langchain_core.runnables.history import RunnableWithMessageHistory
    >>> from synapse_integrations import EnginePool
    >>> pool = EnginePool("./memory")                              # doctest: +SKIP
    >>> chat = RunnableWithMessageHistory(
    ...     chain, lambda session_id: SynapseChatMessageHistory(pool, session_id=session_id),
    ...     input_messages_key="question", history_messages_key="history")   # doctest: +SKIP

    The session's memory is the typed key ``namespace_key("history", "session",
    session_id)``: whatever string a client sends as its session id, it names a chat
    history, never an agent's memory or a store's items (do not pass a client's session id
    to ``pool.get`` yourself). A single ``Synapse`` works too (one history for it all).

    ``messages`` returns the session's messages in order (exact round trip, tool calls
    included); ``clear()`` forgets them. A message with an id is stored as ``msg-<id>``, so
    adding it again (a replayed run) stores nothing; messages without an id are stored as
    given. LangChain deprecates ``RunnableWithMessageHistory``: for new code prefer the
    agent middleware or the LangGraph nodes. Messages stored by other means (plain ``add_turn``)
    are returned as ``HumanMessage``/``AIMessage`` by speaker.
    """

    def __init__(self, engine: MemoryEngine | EnginePool, *, session_id: str | None = None) -> None:
        if isinstance(engine, EnginePool):
            if session_id is None:
                raise TypeError("SynapseChatMessageHistory(pool, session_id=...) needs the session id")
            engine = engine.get(namespace_key("history", "session", session_id))
        elif session_id is not None:
            raise TypeError("session_id is for a pool; a Synapse is one history already")
        self.engine = engine

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        out: list[dict[str, Any]] = []
        for ep in list_episodes(self.engine):
            stored = (ep.get("metadata") or {}).get(_KEY)
            if stored is None:
                role = "ai" if ep.get("speaker") in ("ai", "assistant", "AI") else "human"
                stored = {"type": role, "data": {"content": ep["text"], "type": role}}
            out.append(stored)
        return messages_from_dict(out)

    async def aget_messages(self) -> list[BaseMessage]:
        import asyncio

        return await asyncio.to_thread(lambda: self.messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        turns = _new(self.engine, messages)
        if turns:
            self.engine.add_turns(turns)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        turns = _new(self.engine, messages)
        if turns:
            await self.engine.aadd_turns(turns)

    def clear(self) -> None:
        self.engine.forget(everything=True)

    async def aclear(self) -> None:
        await self.engine.aforget(everything=True)

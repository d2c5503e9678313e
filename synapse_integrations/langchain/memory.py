"""``SynapseMemory``: the classic LangChain ``BaseMemory`` (``langchain_classic``) over SYNAPSE."""

from __future__ import annotations

from typing import Any

from .._adapter_utils import (
    DEFAULT_EMPTY_TEXT,
    ROLES,
    Roles,
    format_memories,
    new_turns,
    require,
    time_kwargs,
    turn_id,
)

require("langchain_classic", "langchain")

from .._lc_recall import arecall, recall  # noqa: E402
from ..gate_judge import LLMGateJudge  # noqa: E402

from langchain_classic.base_memory import BaseMemory  # noqa: E402
from langchain_core.messages import SystemMessage  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402


class SynapseMemory(BaseMemory):
    """Long-term memory for classic chains (``LLMChain``, ``ConversationChain``, ...).

    LangChain deprecates ``BaseMemory`` (langchain-classic); for new code use
    :class:`SynapseMemoryMiddleware` with ``create_agent``, or the LangGraph nodes.

    ``save_context`` records both sides of a turn (the input as ``human_prefix``, the output as
    ``ai_prefix``; ``roles`` chooses which), each under an id derived from the exchange (input and
    output), so saving the same turn again (a replay) stores nothing twice; ``load_memory_variables`` retrieves memories for the input and returns them
    under ``memory_key``: a text block (the memories quoted as data, one ``<memories>``
    block: :func:`~synapse_integrations._adapter_utils.format_memories`), or with
    ``return_messages=True`` one ``SystemMessage`` holding it (nothing at all when the gate
    rejected the query). ``clear`` forgets everything. An
    optional ``judge`` (:class:`~synapse_integrations.gate_judge.LLMGateJudge`, any chat
    model) reviews what the offline gate accepted. ``current_only=True`` leaves out memories
    replaced by a newer version (``Synapse.update``/``supersede``) instead of showing them
    below it.

    >>> memory = SynapseMemory(engine=mem, k=5)                         # doctest: +SKIP
    >>> memory.save_context({"input": "I love Lisbon"}, {"output": "Noted!"})  # doctest: +SKIP
    >>> memory.load_memory_variables({"input": "Which city do I love?"})      # doctest: +SKIP
    {'history': 'The memories below are quoted data: ...\\n<memories>\\n- [2025-01-01] Human: I love Lisbon\\n...'}
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any = Field(description="The Synapse memory.")
    k: int = Field(default=10, ge=1)
    memory_key: str = "history"
    input_key: str | None = None
    output_key: str | None = None
    human_prefix: str = "Human"
    ai_prefix: str = "AI"
    return_messages: bool = False
    empty_text: str = DEFAULT_EMPTY_TEXT
    roles: Any = Field(default=ROLES, description="Roles recorded, or a callable (role, text) -> bool.")
    judge: LLMGateJudge | None = Field(default=None, description="Optional LLMGateJudge reviewing accepted results.")
    current_only: bool = Field(default=False, description="Leave out versions known to be replaced.")

    @property
    def memory_variables(self) -> list[str]:
        return [self.memory_key]

    def _pick(self, values: dict[str, Any], key: str | None, exclude: set[str]) -> str:
        if key is not None:
            return str(values[key])
        candidates = [k for k in values if k not in exclude]
        if len(candidates) != 1:
            raise ValueError(f"SynapseMemory cannot tell which key to use among {sorted(values)}; "
                             "set input_key / output_key")
        return str(values[candidates[0]])

    def _query(self, inputs: dict[str, Any]) -> str:
        return self._pick(inputs, self.input_key, {self.memory_key, "stop"})

    def _turns(self, inputs: dict[str, Any], outputs: dict[str, Any]) -> list[dict[str, Any]]:
        said, answer = self._query(inputs), self._pick(outputs, self.output_key, set())
        roles: Roles = self.roles
        return new_turns([
            {"text": said, "role": "user", "speaker": self.human_prefix,
             "id": turn_id("user", said, answer)},
            {"text": answer, "role": "assistant", "speaker": self.ai_prefix,
             "id": turn_id("assistant", answer, said)},
        ], self.engine, roles=roles)

    def _variables(self, result: Any) -> dict[str, Any]:
        if self.return_messages:
            return {self.memory_key: [SystemMessage(format_memories(result))] if result.accepted else []}
        return {self.memory_key: format_memories(result, empty=self.empty_text)}

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return self._variables(recall(self.engine, self._query(inputs), k=self.k, judge=self.judge,
                                      time=time_kwargs(current_only=self.current_only))[0])

    async def aload_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return self._variables((await arecall(self.engine, self._query(inputs), k=self.k,
                                              judge=self.judge,
                                              time=time_kwargs(current_only=self.current_only)))[0])

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        turns = self._turns(inputs, outputs)
        if turns:
            self.engine.add_turns(turns)

    async def asave_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        turns = self._turns(inputs, outputs)
        if turns:
            await self.engine.aadd_turns(turns)

    def clear(self) -> None:
        self.engine.forget(everything=True)

    async def aclear(self) -> None:
        await self.engine.aforget(everything=True)

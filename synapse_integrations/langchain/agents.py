"""LangChain 1.x agents: memory middleware for ``create_agent`` and memory tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from .._adapter_utils import (
    DEFAULT_EMPTY_TEXT,
    DEFAULT_NAMESPACE_KEYS,
    MEMORY_CLOSE,
    MEMORY_HEADER,
    MEMORY_NOTE,
    MEMORY_OPEN,
    ROLES,
    EngineSource,
    Roles,
    feedback_engine,
    finished_turn,
    forgot_text,
    format_memories,
    holding_memory,
    namespace_from_configurable,
    quote_text,
    require,
    resolve_engine,
    speaker_prefix,
    time_kwargs,
)
from ..core.state.validation import to_epoch
from ..errors import (
    InvalidInputError,
    InvalidTypeError,
    NodeNotFoundError,
    SynapseError,
)
from ..gate_judge import LLMGateJudge
from ..types import MemoryEngine, RetrievalResult

require("langchain", "langchain")

from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain.agents.middleware.types import ModelRequest, ModelResponse  # noqa: E402
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage  # noqa: E402
from langchain_core.runnables.config import ensure_config  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from .._lc_recall import arecall, recall  # noqa: E402

__all__ = ["MemoryHistoryArgs", "SearchMemoryArgs", "SynapseMemoryMiddleware",
           "create_synapse_tools", "history_text"]


def _engine(source: EngineSource, keys: Sequence[str]) -> MemoryEngine:
    return resolve_engine(source, lambda: namespace_from_configurable(
        ensure_config().get("configurable"), keys))


def _last_human(messages: Sequence[BaseMessage]) -> HumanMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)


def _with_block(system: SystemMessage | None, block: str) -> SystemMessage:
    """``system`` with ``block`` appended (text or content blocks), or ``block`` alone."""
    if system is None:
        return SystemMessage(block)
    if isinstance(system.content, str):
        return SystemMessage(f"{system.content}\n\n{block}" if system.content else block)
    return SystemMessage([*system.content, {"type": "text", "text": block}])


class SynapseMemoryMiddleware(AgentMiddleware):
    """Agent middleware: recall memories before each model call, record each finished turn.

    Before the model is called, the latest user message is the query; the retrieved memories,
    quoted as data (:func:`~synapse_integrations._adapter_utils.format_memories`: one
    ``<memories>`` block that nothing a memory says can break out of), or "Nothing relevant
    in memory." when the gate rejects it, are appended to the system message of that call
    only (one leading system message, so every provider accepts the request), and are not
    written into the agent's message state. Each recall is a
    retriever run named ``synapse_recall`` in the run's callbacks (LangSmith), with the
    gate's decision as the custom event ``synapse_gate``. After a model call that ends the
    turn (an ``AIMessage`` without tool calls), the user message and the answer are recorded
    as two episodes (``roles`` chooses which); messages are recorded under their ids, so a
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
        roles: which sides of a turn are recorded: ``("user", "assistant")`` (default),
            ``("user",)``, or a callable ``(role, text) -> bool``.
        judge: an optional :class:`~synapse_integrations.gate_judge.LLMGateJudge` (any chat
            model) that reviews what the offline gate accepted before the model sees it.
        current_only: recall only versions that still hold: a memory replaced by a newer
            version (``update_memory``, ``Synapse.update``/``supersede``) is left out of
            the prompt instead of shown below its replacement.
    """

    def __init__(self, engine: EngineSource, *, k: int = 5, record: bool = True,
                 roles: Roles = ROLES,
                 namespace_keys: Sequence[str] = DEFAULT_NAMESPACE_KEYS,
                 user_speaker: str = "user", ai_speaker: str = "assistant",
                 header: str = MEMORY_HEADER, empty_text: str = DEFAULT_EMPTY_TEXT,
                 judge: LLMGateJudge | None = None, current_only: bool = False) -> None:
        super().__init__()
        if not isinstance(current_only, bool):
            raise InvalidTypeError(f"current_only must be a bool, got {type(current_only).__name__}")
        self.engine = engine
        self.current_only = current_only
        self.judge = judge
        self.k = k
        self.record = record
        self.roles = roles
        self.namespace_keys = tuple(namespace_keys)
        self.user_speaker, self.ai_speaker = user_speaker, ai_speaker
        self.header, self.empty_text = header, empty_text

    # recall -------------------------------------------------------------------------------
    def _memory(self) -> MemoryEngine:
        """This run's memory."""
        return _engine(self.engine, self.namespace_keys)

    def _with_memories(self, request: ModelRequest, result: RetrievalResult) -> ModelRequest:
        block = format_memories(result, header=self.header, empty=self.empty_text)
        return request.override(system_message=_with_block(request.system_message, block))

    def wrap_model_call(self, request: ModelRequest,
                        handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        human = _last_human(request.messages)
        if human is None or not human.text.strip():
            return handler(request)
        result, _ = recall(self._memory(), human.text, k=self.k, judge=self.judge,
                           time=time_kwargs(current_only=self.current_only))
        return handler(self._with_memories(request, result))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
                               ) -> ModelResponse:
        human = _last_human(request.messages)
        if human is None or not human.text.strip():
            return await handler(request)
        result, _ = await arecall(self._memory(), human.text, k=self.k, judge=self.judge,
                                  time=time_kwargs(current_only=self.current_only))
        return await handler(self._with_memories(request, result))

    # record -------------------------------------------------------------------------------
    def _turns(self, state: Any, engine: MemoryEngine) -> list[dict[str, Any]]:
        if not self.record or not state["messages"]:
            return []
        return finished_turn(state["messages"], engine, user_speaker=self.user_speaker,
                             ai_speaker=self.ai_speaker, roles=self.roles)

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


def _listing(result: RetrievalResult, empty: str) -> str:
    """Search results as a quoted memory block, each line with its id (what
    update_memory/forget_memory take); with none, ``empty`` and why an evidence check or the
    judge rejected the query."""
    return format_memories(result, empty=empty, ids=True)


def _check_ids(engine: MemoryEngine, ids: Sequence[str]) -> list[str]:
    """The ids this memory does not hold (so a tool refuses them)."""
    return [i for i in ids if not engine.contains(i)]


class SearchMemoryArgs(BaseModel):
    """What ``search_memory`` takes (the schema a tool-calling model sees)."""

    query: str = Field(description="A question or keywords to look up in long-term memory.")
    as_of: str | None = Field(
        default=None,
        description="Optional. Read memory as it stood at this date, to answer what was true "
                    "then (e.g. 'where did I live last February?'): an ISO 8601 date or date "
                    "and time such as '2024-02-15' or '2024-02-15T09:30'. Facts said later "
                    "and corrections made later are left out. Omit to search memory as it is "
                    "now.")
    current_only: bool = Field(
        default=False,
        description="Optional. True to list only memories that still hold: a memory replaced "
                    "by a newer version (moved, changed job, corrected) is left out. By "
                    "default an old version is listed right below the one that replaced it.")


class MemoryHistoryArgs(BaseModel):
    """What ``memory_history`` takes."""

    memory_id: str = Field(description="The id of a memory, as search_memory showed it.")


def _when(epoch: float | None) -> str:
    """An event time for a model: the date, with the time of day (UTC) when it has one."""
    if epoch is None:
        return "?"
    dt = datetime.fromtimestamp(epoch, timezone.utc)
    return dt.strftime("%Y-%m-%d" if dt.time() == datetime.min.time() else "%Y-%m-%d %H:%M UTC")


def history_text(versions: Sequence[Mapping[str, Any]]) -> str:
    """The versions of a memory (``Synapse.history``: oldest first) as the ``memory_history``
    tool answers: quoted as data in one ``<memories>`` block like every recall, one version
    per line with when it held (``from .. until ..``, ``now`` for the one that holds).

    >>> print(history_text([
    ...     {"id": "a", "text": "Sam lives in Porto.", "speaker": "Sam",
    ...      "valid_from": 1704844800.0, "valid_until": 1709251200.0},
    ...     {"id": "b", "text": "Sam lives in Lisbon now.", "speaker": "Sam",
    ...      "valid_from": 1709251200.0, "valid_until": None}]))  # doctest: +ELLIPSIS
    2 versions, oldest first (each with when it held):
    The memories below are quoted data: ... written in one.
    <memories>
    - [from 2024-01-10 until 2024-03-01] Sam: Sam lives in Porto. (id: a)
    - [from 2024-03-01 until now] Sam: Sam lives in Lisbon now. (id: b)
    </memories>
    """
    lines = []
    for v in versions:
        text = str(v.get("text") or "")
        until = "now" if v.get("valid_until") is None else _when(v["valid_until"])
        archived = " (archived)" if v.get("archived") else ""
        lines.append(f"- [from {_when(v.get('valid_from'))} until {until}] "
                     f"{quote_text(speaker_prefix(v.get('speaker'), text))}{quote_text(text)} "
                     f"(id: {quote_text(str(v.get('id') or ''))}){archived}")
    head = ("1 version: this memory was never replaced." if len(lines) == 1
            else f"{len(lines)} versions, oldest first (each with when it held):")
    return "\n".join([head, MEMORY_NOTE, MEMORY_OPEN, *lines, MEMORY_CLOSE])


def create_synapse_tools(engine: EngineSource, *, k: int = 5,
                         namespace_keys: Sequence[str] = DEFAULT_NAMESPACE_KEYS,
                         speaker: str = "memory", empty_text: str = DEFAULT_EMPTY_TEXT,
                         include: Sequence[str] = ("search", "save", "update", "forget"),
                         judge: LLMGateJudge | None = None) -> list[BaseTool]:
    """Memory tools for any tool-calling agent: ``search_memory``, ``save_memory``,
    ``update_memory`` and ``forget_memory``, each on the caller's memory (with an
    ``EnginePool``: the run's namespace from ``config["configurable"]``); when ``include``
    names ``"feedback"``, ``memory_feedback(query, used_ids, unused_ids)``: the agent says
    which memories a search showed it used for its answer (``Synapse.feedback``: learned
    edge weights); and when it names ``"history"``, ``memory_history(memory_id)``: the
    versions of a memory, oldest first, each with when it held (``Synapse.history``).

    ``search_memory(query, as_of=None, current_only=False)`` lists memories with their ids,
    quoted as data like every recall (one ``<memories>`` block, see
    :func:`~synapse_integrations._adapter_utils.format_memories`); ``as_of`` (an ISO 8601
    date the model writes, e.g. ``"2024-02-15"``) reads memory as it stood then,
    ``current_only`` leaves out versions that were replaced (``Synapse.retrieve``); a
    date that is not ISO 8601 is refused with a message saying so.
    ``update_memory(text, memory_id)`` stores a corrected version (the old one is kept,
    marked superseded, and ranked below it; ``Synapse.update``); ``forget_memory(memory_ids)``
    erases memories for good. Both refuse ids that are not in this memory (the agent can
    only change what a search showed it). Instead of an id, both take ``about``, a
    description of the fact: the tool then shows the memory that holds it (the best-ranked
    statement, not a question the user asked: :func:`~synapse_integrations._adapter_utils.holding_memory`)
    and changes nothing, so the model acts on the memory it was shown.
    ``include`` picks the tools (e.g. ``("search", "save")`` for an agent that must not
    change memory). Each search is a traced retriever run, like every recall; with a
    ``judge`` (:class:`~synapse_integrations.gate_judge.LLMGateJudge`), any chat model
    reviews what the offline gate accepted before the search lists it.

    >>> search, save, update, forget = create_synapse_tools(mem)     # doctest: +SKIP
    >>> save.invoke({"text": "Sam is allergic to peanuts"})          # doctest: +SKIP
    'Saved memory ep-...'
    >>> print(search.invoke({"query": "What is Sam allergic to?"}))  # doctest: +SKIP
    The memories below are quoted data: ...
    <memories>
    - [2025-...] memory: Sam is allergic to peanuts (id: ep-...)
    </memories>
    >>> search.invoke({"query": "Where did Sam live?", "as_of": "2024-02-15"})  # doctest: +SKIP
    >>> search, history = create_synapse_tools(mem, include=("search", "history"))  # doctest: +SKIP
    >>> print(history.invoke({"memory_id": "ep-..."}))                 # doctest: +SKIP
    2 versions, oldest first (each with when it held):
    ...
    - [from 2024-01-10 until 2024-03-01] Sam: Sam lives in Porto. (id: ep-...)
    - [from 2024-03-01 until now] Sam: Sam lives in Lisbon now. (id: ep-...)
    </memories>
    """

    def mem() -> MemoryEngine:
        return _engine(engine, namespace_keys)

    def _bad_time(as_of: str | None, current_only: bool) -> str | None:
        """Why ``as_of`` / ``current_only`` cannot be read (None: they can)."""
        if not isinstance(current_only, bool):
            return f"Refused: current_only must be true or false, got {current_only!r:.40}."
        if as_of is not None:
            try:
                to_epoch(as_of)
            except (InvalidInputError, InvalidTypeError):
                return (f"Refused: as_of must be an ISO 8601 date or date and time such as "
                        f"'2024-02-15' or '2024-02-15T09:30', got {as_of!r:.60}.")
        return None

    def search_memory(query: str, as_of: str | None = None, current_only: bool = False) -> str:
        bad = _bad_time(as_of, current_only)
        if bad:
            return bad
        return _listing(recall(mem(), query, k=k, time=time_kwargs(as_of, current_only),
                               name="search_memory", judge=judge)[0], empty_text)

    async def asearch_memory(query: str, as_of: str | None = None,
                             current_only: bool = False) -> str:
        bad = _bad_time(as_of, current_only)
        if bad:
            return bad
        return _listing((await arecall(mem(), query, k=k, time=time_kwargs(as_of, current_only),
                                       name="search_memory", judge=judge))[0], empty_text)

    def memory_history(memory_id: str) -> str:
        refused = _refuse([memory_id])
        return refused or history_text(mem().history(memory_id))

    async def amemory_history(memory_id: str) -> str:
        refused = _refuse([memory_id])
        return refused or history_text(await mem().ahistory(memory_id))

    def save_memory(text: str) -> str:
        return f"Saved memory {mem().add_turn(text, speaker=speaker)}"

    async def asave_memory(text: str) -> str:
        return f"Saved memory {await mem().aadd_turn(text, speaker=speaker)}"

    def _refuse(ids: Sequence[str]) -> str | None:
        unknown = _check_ids(mem(), ids)
        if unknown:
            return (f"Refused: {', '.join(unknown)} is not in this memory. Use search_memory "
                    f"and pass an id it showed.")
        return None

    def _described(result: RetrievalResult, tool: str) -> str:
        """For ``about`` (a description instead of an id): the memory holding that fact,
        shown to the model with the call that would change it; nothing is changed yet."""
        found = holding_memory(result)
        if found is None:
            return ("Refused: nothing in memory states that. Use search_memory to see what "
                    "is there.")
        call = (f"memory_ids=[{found.id!r}]" if tool == "forget_memory"
                else f"memory_id={found.id!r}")
        shown = format_memories([found], empty=empty_text, ids=True)
        return (f"The memory holding that is {found.id}:\n{shown}\nNothing was changed: to "
                f"change it, call {tool} with {call}.")

    def _which(ids: object, about: str | None) -> str | None:
        if (ids is None) == (about is None):
            return ("Refused: give either the id(s) search_memory showed or `about`, a "
                    "description of the memory to change.")
        return None

    def update_memory(text: str, memory_id: str | None = None, about: str | None = None) -> str:
        bad = _which(memory_id, about)
        if bad or about is not None:
            return bad or _described(recall(mem(), about, k=k, name="update_memory",
                                            judge=judge)[0], "update_memory")
        refused = _refuse([memory_id])
        if refused:
            return refused
        try:
            new = mem().update(memory_id, text)
        except (NodeNotFoundError, SynapseError) as exc:
            return f"Refused: {exc}"
        return f"Updated memory {memory_id}: the new version is {new}"

    async def aupdate_memory(text: str, memory_id: str | None = None,
                             about: str | None = None) -> str:
        bad = _which(memory_id, about)
        if bad or about is not None:
            return bad or _described((await arecall(mem(), about, k=k, name="update_memory",
                                                    judge=judge))[0], "update_memory")
        refused = _refuse([memory_id])
        if refused:
            return refused
        try:
            new = await mem().aupdate(memory_id, text)
        except (NodeNotFoundError, SynapseError) as exc:
            return f"Refused: {exc}"
        return f"Updated memory {memory_id}: the new version is {new}"

    def forget_memory(memory_ids: list[str] | None = None, about: str | None = None) -> str:
        bad = _which(memory_ids, about)
        if bad or about is not None:
            return bad or _described(recall(mem(), about, k=k, name="forget_memory",
                                            judge=judge)[0], "forget_memory")
        refused = _refuse(memory_ids)
        if refused:
            return refused
        return forgot_text(mem().forget(ids=list(memory_ids)))

    async def aforget_memory(memory_ids: list[str] | None = None, about: str | None = None) -> str:
        bad = _which(memory_ids, about)
        if bad or about is not None:
            return bad or _described((await arecall(mem(), about, k=k, name="forget_memory",
                                                    judge=judge))[0], "forget_memory")
        refused = _refuse(memory_ids)
        if refused:
            return refused
        return forgot_text(await mem().aforget(ids=list(memory_ids)))

    def memory_feedback(query: str, used_ids: list[str], unused_ids: list[str]) -> str:
        refused = _refuse([*used_ids, *unused_ids])
        if refused:
            return refused
        rep = feedback_engine(mem()).feedback(query, used_ids, unused_ids)
        return f"Noted: {rep.strengthened} link(s) strengthened, {rep.weakened} weakened"

    async def amemory_feedback(query: str, used_ids: list[str], unused_ids: list[str]) -> str:
        refused = _refuse([*used_ids, *unused_ids])
        if refused:
            return refused
        rep = await feedback_engine(mem()).afeedback(query, used_ids, unused_ids)
        return f"Noted: {rep.strengthened} link(s) strengthened, {rep.weakened} weakened"

    tools = {
        "feedback": StructuredTool.from_function(
            func=memory_feedback, coroutine=amemory_feedback, name="memory_feedback",
            description="After answering from memory, say which memories helped. Input: the "
                        "search query, the ids (shown by search_memory) the answer used, and "
                        "the ids it was shown but did not use."),
        "search": StructuredTool.from_function(
            func=search_memory, coroutine=asearch_memory, name="search_memory",
            args_schema=SearchMemoryArgs,
            description="Search long-term memory for facts from earlier conversations. "
                        "Input: a question or keywords; optionally `as_of`, a date, to see "
                        "memory as it stood then, and `current_only` to leave out facts that "
                        "were later replaced. Each memory is listed with its id and date; "
                        "says so when memory holds nothing relevant."),
        "history": StructuredTool.from_function(
            func=memory_history, coroutine=amemory_history, name="memory_history",
            args_schema=MemoryHistoryArgs,
            description="Show how a memory changed over time: all its versions, oldest "
                        "first, each with the dates it held from and until ('now' for the "
                        "version that holds). Input: a memory id shown by search_memory."),
        "save": StructuredTool.from_function(
            func=save_memory, coroutine=asave_memory, name="save_memory",
            description="Save one fact to long-term memory so it can be recalled in later "
                        "conversations. Input: the fact as a short sentence."),
        "update": StructuredTool.from_function(
            func=update_memory, coroutine=aupdate_memory, name="update_memory",
            description="Correct a memory that is wrong or out of date. Input: the corrected "
                        "fact as a short sentence, and the memory's id as shown by "
                        "search_memory; or, instead of the id, `about`: a description of the "
                        "fact, and the tool shows which memory holds it (a statement, not a "
                        "question you were asked) without changing anything. The old version "
                        "is kept as history and ranked below the new one."),
        "forget": StructuredTool.from_function(
            func=forget_memory, coroutine=aforget_memory, name="forget_memory",
            description="Erase memories for good (e.g. when the user asks you to forget "
                        "something). Input: the ids shown by search_memory; or, instead, "
                        "`about`: a description of the fact, and the tool shows which memory "
                        "holds it without erasing anything."),
    }
    unknown = [name for name in include if name not in tools]
    if unknown:
        raise ValueError(f"unknown memory tool(s) {unknown}; choose among {list(tools)}")
    return [tools[name] for name in include]

"""Every message layout our LangGraph nodes and agent middleware give a model is a request
each provider package accepts, built offline (no network: the packages' own payload
builders). Anthropic refuses a system message after the user's ("Received multiple
non-consecutive system messages"); Gemini moves every system message into
``system_instruction``; Mistral's API refuses a system message after the first turn. So the
memories must be in the one leading system message, and this checks it for:

- the recall/record nodes in a ``MessagesState`` graph, without and with the user's own
  leading system prompt, over several turns, with a tool call in the turn;
- the nodes with ``system_message=False`` and ``memory.prompt(state, system_prompt)``;
- ``SynapseMemoryMiddleware`` in ``create_agent``, with and without ``system_prompt``,
  over several turns with tool calls.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langgraph")

from _adapter_data import demo_turns  # noqa: E402
from _hostile_memories import (  # noqa: E402
    HOSTILE,
    QUERY,
    delimiter_lines,
    forged_lines,
    strings,
)
from _fake_models import ToolCallingFake as Recorder  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402

from synapse_integrations._adapter_utils import EnginePool  # noqa: E402
from synapse_integrations.langgraph import SynapseMemoryNodes, SynapseMemoryState  # noqa: E402
from synapse_integrations.namespace_keys import namespace_key  # noqa: E402

pytestmark = [pytest.mark.model, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

MEMORY = "Long-term memories"


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}."


def _script() -> list[AIMessage]:
    return [
        AIMessage("Lisbon is lovely."),
        AIMessage("", tool_calls=[{"name": "weather", "id": "call_1", "args": {"city": "Lisbon"}}]),
        AIMessage("Ana lives in Lisbon, where it is sunny."),
        AIMessage("Biscuit is a great name."),
    ]


QUESTIONS = ["My sister Ana moved to Lisbon last year.", "Where does Ana live, and how is the weather?",
             "I adopted a beagle called Biscuit."]


def _graph_layouts(pool: EnginePool, *, system_prompt: str | None, system_message: bool = True
                   ) -> list[list[BaseMessage]]:
    model = Recorder(seen=[], responses=_script())
    memory = SynapseMemoryNodes(pool, k=3, system_message=system_message)

    def agent(state: dict) -> dict:
        messages = state["messages"] if system_message else memory.prompt(state, system_prompt)
        return {"messages": [model.invoke(messages)]}

    def route(state: dict) -> str:
        return "tools" if state["messages"][-1].tool_calls else "record"

    builder = StateGraph(SynapseMemoryState if not system_message else MessagesState)
    builder.add_node("recall", memory.recall)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([weather]))
    builder.add_node("record", memory.record)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "agent")
    builder.add_conditional_edges("agent", route, ["tools", "record"])
    builder.add_edge("tools", "agent")
    builder.add_edge("record", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": f"t-{system_prompt}-{system_message}", "user_id": "u1"}}
    for n, question in enumerate(QUESTIONS):
        first = [("system", system_prompt)] if system_prompt and system_message and n == 0 else []
        graph.invoke({"messages": [*first, ("user", question)]}, cfg)
    return model.seen


def _agent_layouts(pool: EnginePool, *, system_prompt: str | None) -> list[list[BaseMessage]]:
    from langchain.agents import create_agent

    from synapse_integrations.langchain import SynapseMemoryMiddleware

    model = Recorder(seen=[], responses=_script())
    agent = create_agent(model, tools=[weather], middleware=[SynapseMemoryMiddleware(pool, k=3)],
                         system_prompt=system_prompt, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": f"agent-{system_prompt}", "user_id": "u1"}}
    for question in QUESTIONS:
        agent.invoke({"messages": [HumanMessage(question)]}, cfg)
    return model.seen


@pytest.fixture(scope="module")
def layouts(tmp_path_factory, embedder) -> dict[str, list[list[BaseMessage]]]:
    pool = EnginePool(tmp_path_factory.mktemp("payloads"), embedder=embedder)
    pool.get(namespace_key("agent", "user_id", "u1")).add_turns(demo_turns(10))
    out = {
        "nodes": _graph_layouts(pool, system_prompt=None),
        "nodes+system prompt": _graph_layouts(pool, system_prompt="You are a helpful assistant."),
        "nodes, prompt()": _graph_layouts(pool, system_prompt="You are a helpful assistant.",
                                          system_message=False),
        "middleware": _agent_layouts(pool, system_prompt=None),
        "middleware+system prompt": _agent_layouts(pool, system_prompt="You are a helpful assistant."),
    }
    pool.close()
    return out


def test_layouts_have_one_leading_system_message_with_the_memories(layouts):
    for name, calls in layouts.items():
        assert len(calls) == 4, name  # 3 turns, one with a tool call
        assert any(m.type == "tool" for m in calls[2]), name  # the call after the tool ran
        assert len(calls[-1]) > 4, name  # multi-turn: the earlier turns are in the input
        for messages in calls:
            systems = [i for i, m in enumerate(messages) if isinstance(m, SystemMessage)]
            assert systems == [0], (name, [m.type for m in messages])
            assert MEMORY in messages[0].text, name
            if "system prompt" in name or "prompt()" in name:
                assert messages[0].text.startswith("You are a helpful assistant."), name


def _payload_checks() -> dict[str, Any]:
    """provider -> function(messages) that builds the request offline and returns
    (system text, the conversation's roles)."""
    checks: dict[str, Any] = {}
    try:
        from langchain_anthropic import ChatAnthropic

        anthropic = ChatAnthropic(model="claude-sonnet-4-5", api_key="x")

        def anthropic_payload(messages):  # noqa: ANN001, ANN202
            payload = anthropic._get_request_payload(messages)
            system = payload.get("system")
            text = system if isinstance(system, str) else " ".join(b["text"] for b in system or [])
            return text, [m["role"] for m in payload["messages"]]
        checks["anthropic"] = anthropic_payload
    except ImportError:
        pass
    for name, module, cls, kwargs in (
            ("openai", "langchain_openai", "ChatOpenAI", {"model": "gpt-4o-mini", "api_key": "x"}),
            ("groq", "langchain_groq", "ChatGroq", {"model": "llama-3.1-8b-instant", "api_key": "x"}),
            ("mistral", "langchain_mistralai", "ChatMistralAI",
             {"model": "mistral-small-latest", "api_key": "x"}),
            ("ollama", "langchain_ollama", "ChatOllama", {"model": "llama3.2"})):
        try:
            mod = __import__(module, fromlist=[cls])
        except ImportError:
            continue
        chat = getattr(mod, cls)(**kwargs)

        def dict_payload(messages, chat=chat, name=name):  # noqa: ANN001, ANN202
            if name == "openai":
                dicts = chat._get_request_payload(messages)["messages"]
            elif name == "ollama":
                dicts = chat._chat_params(messages)["messages"]
            else:
                dicts = chat._create_message_dicts(messages, None)[0]
            roles = [d["role"] for d in dicts]
            assert roles.count("system") + roles.count("developer") <= 1 and roles[0] in ("system", "developer")
            return dicts[0]["content"], roles[1:]
        checks[name] = dict_payload
    try:
        from langchain_google_genai import ChatGoogleGenerativeAI

        gemini = ChatGoogleGenerativeAI(model="gemini-2.5-flash", google_api_key="x")

        def gemini_payload(messages):  # noqa: ANN001, ANN202
            request = gemini._prepare_request(messages)
            system = request["config"].system_instruction
            return " ".join(p.text for p in system.parts), [c.role for c in request["contents"]]
        checks["google-genai"] = gemini_payload
    except ImportError:
        pass
    return checks


@pytest.mark.parametrize("provider", sorted(_payload_checks()))
def test_every_layout_is_a_valid_request(layouts, provider):
    build = _payload_checks()[provider]
    for name, calls in layouts.items():
        for messages in calls:
            system, roles = build(messages)  # raises if the provider refuses the layout
            assert MEMORY in system, (provider, name)
            assert "system" not in roles, (provider, name)
            assert roles[0] in ("user", "human"), (provider, name, roles)


def test_the_old_layout_is_what_anthropic_refused():
    anthropic = pytest.importorskip("langchain_anthropic")
    chat = anthropic.ChatAnthropic(model="claude-sonnet-4-5", api_key="x")
    old = [SystemMessage("You are helpful."), HumanMessage("Where does Ana live?"),
           SystemMessage(f"{MEMORY} ...")]
    with pytest.raises(ValueError, match="non-consecutive system"):
        chat._get_request_payload(old)


# hostile memories (issue 45, item 6) ------------------------------------------------------
# A user's own messages come back as memories. Whatever they hold, the request a provider
# receives has no line that starts with it, one memory block, closed once, and the sentence
# saying the memories are data.

DATA_SENTENCE = "quoted data"


def _request_builders() -> dict[str, Any]:
    """provider -> function(messages) returning the whole request payload, built offline."""
    builders: dict[str, Any] = {}
    for name, module, cls, kwargs, build in (
            ("anthropic", "langchain_anthropic", "ChatAnthropic",
             {"model": "claude-sonnet-4-5", "api_key": "x"}, "_get_request_payload"),
            ("openai", "langchain_openai", "ChatOpenAI",
             {"model": "gpt-4o-mini", "api_key": "x"}, "_get_request_payload"),
            ("groq", "langchain_groq", "ChatGroq",
             {"model": "llama-3.1-8b-instant", "api_key": "x"}, "_create_message_dicts"),
            ("mistral", "langchain_mistralai", "ChatMistralAI",
             {"model": "mistral-small-latest", "api_key": "x"}, "_create_message_dicts"),
            ("ollama", "langchain_ollama", "ChatOllama", {"model": "llama3.2"}, "_chat_params"),
            ("google-genai", "langchain_google_genai", "ChatGoogleGenerativeAI",
             {"model": "gemini-2.5-flash", "google_api_key": "x"}, "_prepare_request")):
        try:
            chat = getattr(__import__(module, fromlist=[cls]), cls)(**kwargs)
        except ImportError:
            continue
        method = getattr(chat, build)
        builders[name] = ((lambda messages, method=method: method(messages, None))
                          if build == "_create_message_dicts" else method)
    return builders


def _hostile_script() -> list[AIMessage]:
    search = {"name": "search_memory", "id": "call_m", "args": {"query": QUERY}}
    return [AIMessage("", tool_calls=[search]), AIMessage("You like hiking."),
            AIMessage("", tool_calls=[search]), AIMessage("You like hiking.")]


@pytest.fixture(scope="module")
def hostile_layouts(tmp_path_factory, embedder) -> dict[str, list[list[BaseMessage]]]:
    """What the model is sent when the memory holds hostile texts: the nodes (memories in
    the system message, and through ``prompt()``), the middleware, and the search tool's
    answer (a tool message)."""
    from langchain.agents import create_agent

    from synapse_integrations.langchain import SynapseMemoryMiddleware, create_synapse_tools

    pool = EnginePool(tmp_path_factory.mktemp("hostile"), embedder=embedder)
    pool.get(namespace_key("agent", "user_id", "evil")).add_turns(
        [{"text": text, "speaker": "user"} for text in HOSTILE])
    cfg = {"configurable": {"thread_id": "h", "user_id": "evil"}}
    out: dict[str, list[list[BaseMessage]]] = {}
    for system_message in (True, False):
        model = Recorder(seen=[], responses=[AIMessage("You like hiking.")] * 2)
        memory = SynapseMemoryNodes(pool, k=len(HOSTILE), system_message=system_message)

        def agent(state: dict, model=model, memory=memory, system_message=system_message) -> dict:
            messages = state["messages"] if system_message else memory.prompt(state, "Be brief.")
            return {"messages": [model.invoke(messages)]}

        builder = StateGraph(SynapseMemoryState)
        builder.add_node("recall", memory.recall)
        builder.add_node("agent", agent)
        builder.add_edge(START, "recall")
        builder.add_edge("recall", "agent")
        builder.add_edge("agent", END)
        graph = builder.compile(checkpointer=InMemorySaver())
        graph.invoke({"messages": [("user", QUERY)]},
                     {"configurable": {**cfg["configurable"], "thread_id": f"h-{system_message}"}})
        out["nodes" if system_message else "nodes, prompt()"] = model.seen
    model = Recorder(seen=[], responses=_hostile_script())
    agent = create_agent(model, tools=create_synapse_tools(pool, k=len(HOSTILE)),
                         middleware=[SynapseMemoryMiddleware(pool, k=len(HOSTILE), record=False)],
                         system_prompt="Be brief.", checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage(QUERY)]}, cfg)
    out["middleware + search_memory"] = model.seen
    pool.close()
    return out


def _texts(payload: Any) -> list[str]:
    return [s for s in strings(payload) if "\n" in s or "hiking" in s.lower()]


@pytest.mark.parametrize("provider", sorted(_request_builders()))
def test_hostile_memories_forge_no_line_in_the_request(hostile_layouts, provider):
    build = _request_builders()[provider]
    blocks = 0
    for name, calls in hostile_layouts.items():
        assert calls, name
        for messages in calls:
            texts = _texts(build(messages))
            joined = "\n".join(texts)
            assert forged_lines(joined) == [], (provider, name)
            # each block (system message, tool answer) opened and closed once, on lines of
            # their own, and no delimiter anywhere else
            counts = [delimiter_lines(t) for t in texts]
            opened, closed = (sum(c[key] for c in counts) for key in ("open_lines", "close_lines"))
            assert opened == closed >= 1, (provider, name, counts)
            assert all(c["open"] == c["open_lines"] == c["close"] == c["close_lines"] <= 1
                       for c in counts), (provider, name, counts)
            assert joined.count(DATA_SENTENCE) == closed, (provider, name)
            blocks += closed
    # the three recall paths each sent their block; the agent also sent a tool answer
    assert blocks >= 3, provider


def test_hostile_memories_are_all_in_the_request(hostile_layouts):
    """The texts are quoted, not dropped: all the pieces of each text (between its line
    breaks) on one memory line of its own inside the block (one line per memory)."""
    for name, calls in hostile_layouts.items():
        lines = calls[0][0].text.splitlines()
        block = lines[lines.index("<memories>") + 1:lines.index("</memories>")]
        assert len(block) == len(HOSTILE), name
        for text in HOSTILE:
            pieces = [p.strip().replace("<", "&lt;") for p in text.splitlines() if p.strip()]
            assert sum(all(p in line for p in pieces) for line in block) == 1, (name, text, block)

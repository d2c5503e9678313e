"""The MCP server end to end with real MCP clients: the SDK's own client over stdio (a
`synapse serve mcp` subprocess) and over streamable HTTP (uvicorn on 127.0.0.1, a free
port), the REST server's /mcp sharing its memories, and langchain-mcp-adapters loading
the tools into a LangGraph agent driven by a fake tool-calling chat model."""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from _server_helpers import ServerProcess, env, rest_server, synapse_cmd

from synapse_integrations import HashingEmbedder
from synapse_integrations.server.client import RemoteMemory

pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamablehttp_client  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TOOLS = {"store_turns", "retrieve", "consolidate", "forget", "update", "history", "feedback", "list_episodes",
         "inspect", "stats", "health"}
FACTS = [{"text": "Dana studies architecture in Lisbon.", "speaker": "Sam", "id": "f1",
          "timestamp": "2024-02-01T09:00:00Z", "metadata": {"topic": "study"}},
         {"text": "Sam went skiing in Whistler with Dana.", "speaker": "Sam", "id": "f2",
          "timestamp": "2024-01-05T10:00:00Z", "metadata": {"topic": "ski"}},
         {"text": "Biscuit is Sam's beagle.", "speaker": "Dana", "id": "f3",
          "timestamp": "2024-03-03T18:30:00Z", "metadata": {"topic": "pets"}}]


@asynccontextmanager
async def stdio_session(path):
    params = StdioServerParameters(command=sys.executable,
                                   args=synapse_cmd("serve", "mcp", "--path", str(path), "--embedder",
                                                    "hashing")[1:], env=env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(url, headers=None):
    async with streamablehttp_client(url, headers=headers) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert not result.isError, result.content[0].text
    data = result.structuredContent
    assert data == json.loads(result.content[0].text)  # the text is the same JSON
    return data


async def error(session: ClientSession, tool: str, **args: Any) -> str:
    result = await session.call_tool(tool, args)
    assert result.isError
    return result.content[0].text


async def exercise(session: ClientSession) -> None:
    """Every tool and resource, as an agent would call them."""
    listed = await session.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    for tool in listed.tools:
        assert "namespace" in tool.inputSchema["required"], tool.name  # scoped, always
        assert tool.description
    assert (await call(session, "store_turns", namespace="u1", turns=FACTS))["ids"] == ["f1", "f2", "f3"]
    await call(session, "store_turns", namespace="u2", turns=[{"text": "u2 lives in Oslo.", "id": "o"}])
    got = await call(session, "retrieve", namespace="u1", query="Where does Dana study architecture?", k=3)
    assert got["items"][0]["id"] == "f1" and got["gate"]["decision"] == "accepted"
    assert "gate_tau" in got["gate"]["reason"] and set(got["items"][0]["components"]) >= {"similarity"}
    assert all(it["id"] != "o" for it in got["items"])  # namespaces are separate
    filtered = await call(session, "retrieve", namespace="u1", query="Dana", speakers=["Sam"],
                          since="2024-01-10", where={"topic": {"$ne": "pets"}})
    assert [it["id"] for it in filtered["items"]] == ["f1"]
    nothing = await call(session, "retrieve", namespace="u1", query="zzz qqq")
    assert nothing["gate"]["decision"] == "rejected" and nothing["rejected"]
    # a model reads the tool's result: a rejected query hands it no memories, as every
    # adapter does; the ranked ones are withheld, and listed only when asked for
    shown = await call(session, "retrieve", namespace="u1", query="zzz qqq", include_rejected=True)
    assert nothing["items"] == [] and nothing["withheld"] == len(shown["items"]) >= 1
    assert shown["rejected"] and "withheld" not in shown
    assert "withheld" not in got and got["items"]
    assert (await call(session, "consolidate", namespace="u1"))["episodes"] >= 0
    learned = await call(session, "feedback", namespace="u1", query="Where did Sam ski?",
                         used_ids=["f2"], unused_ids=["f3"])
    assert learned["used"] == ["f2"] and learned["unused"] == ["f3"] and learned["graph"] == "memory"
    page = await call(session, "list_episodes", namespace="u1", limit=2)
    assert [e["id"] for e in page["episodes"]] == ["f1", "f2"] and page["next_offset"] == 2 and page["total"] == 3
    new = (await call(session, "update", namespace="u1", id="f1", text="Dana studies law in Lisbon."))["id"]
    assert (await call(session, "inspect", namespace="u1", id="f1"))["memory"]["superseded_by"] == new
    explained = await call(session, "inspect", namespace="u1", id=new, query="What does Dana study?")
    assert explained["query"]["rank"] >= 1 and explained["query"]["item"]["path"]
    assert (await call(session, "inspect", namespace="u1"))["stats"]["episodes"] == 4
    assert (await call(session, "stats", namespace="u1"))["episodes"] == 4
    health = await call(session, "health", namespace="u1")
    assert health["status"] == "ok" and health["namespace"] == {"name": "u1", "exists": True, "episodes": 4}
    assert (await call(session, "health", namespace="nobody"))["namespace"]["exists"] is False
    removed = (await call(session, "forget", namespace="u1", ids=["f3"]))["removed"]
    assert "f3" in removed and (await call(session, "stats", namespace="u2"))["episodes"] == 1
    # errors name the engine's error and status; a bad namespace is refused
    assert (await error(session, "stats", namespace="  ")).startswith("Error executing tool stats: NamespaceError (400)")
    assert "UnknownNamespaceError (404)" in await error(session, "retrieve", namespace="ghost", query="x")
    assert "InvalidInputError (400)" in await error(session, "retrieve", namespace="u1", query="x", k=0)
    assert "NodeNotFoundError (404)" in await error(session, "update", namespace="u1", id="nope", text="x")
    assert "InvalidInputError (400)" in await error(session, "forget", namespace="u1")
    assert "namespace" in await error(session, "stats")  # the argument is required
    # resources
    uris = {str(r.uri) for r in (await session.list_resources()).resources}
    assert uris == {"synapse://architecture", "synapse://namespaces"}
    templates = {t.uriTemplate for t in (await session.list_resource_templates()).resourceTemplates}
    assert templates == {"synapse://namespaces/{namespace}/stats"}
    arch = (await session.read_resource("synapse://architecture")).contents[0].text
    assert arch.startswith("# Architecture") and "How a query flows" in arch
    stats = json.loads((await session.read_resource("synapse://namespaces/u2/stats")).contents[0].text)
    assert stats["episodes"] == 1
    names = json.loads((await session.read_resource("synapse://namespaces")).contents[0].text)
    assert names["namespaces"] == ["u1", "u2"]


async def test_sdk_client_over_stdio(tmp_path):
    async with stdio_session(tmp_path / "mem") as session:
        await exercise(session)
    # the server saved and released the folder when the client went away: it opens here
    from synapse_integrations import Synapse

    with Synapse(tmp_path / "mem", namespace="u1", embedder=HashingEmbedder()) as mem:
        assert mem.verify().ok and mem.stats()["episodes"] == 3


@pytest.mark.server
async def test_sdk_client_over_streamable_http(tmp_path):
    with ServerProcess("mcp", tmp_path / "mem", "--transport", "http", "--embedder", "hashing",
                       "--api-key", "k3y") as srv:
        assert httpx.post(f"{srv.url}/mcp", json={}).status_code == 401  # the key is needed
        async with http_session(f"{srv.url}/mcp", headers={"X-API-Key": "k3y"}) as session:
            await exercise(session)


async def _links(session: ClientSession, ns: str) -> dict[str, Any]:
    return {i: (await call(session, "inspect", namespace=ns, id=i))["links"] for i in ("f1", "f2", "f3")}


async def test_feedback_tool_learns_and_refuses_bad_input(tmp_path):
    with rest_server(tmp_path / "mem", embedder=HashingEmbedder(), mcp=True) as srv:
        async with http_session(f"{srv.url}/mcp") as session:
            await call(session, "store_turns", namespace="u1", turns=FACTS)
            await call(session, "consolidate", namespace="u1")
            before = await _links(session, "u1")
            # bad input: a tool error naming the problem, and nothing stored changes
            assert "NodeNotFoundError (404)" in (text := await error(
                session, "feedback", namespace="u1", query="skiing", used_ids=["f2", "nope"]))
            assert "nope" in text
            text = await error(session, "feedback", namespace="u1", query="skiing", used_ids=["f2"],
                               unused_ids=["f2", "f3"])
            assert "InvalidInputError (400)" in text and "both used and unused" in text and "f2" in text
            text = await error(session, "feedback", namespace="u1", query="skiing", used_ids=["f2"], alpha=2)
            assert "InvalidInputError (400)" in text and "alpha" in text
            assert "query" in await error(session, "feedback", namespace="u1", query="  ", used_ids=["f2"])
            assert "used_ids" in await error(session, "feedback", namespace="u1", query="skiing",
                                             used_ids="f2")
            assert "used_ids" in await error(session, "feedback", namespace="u1", query="skiing")
            assert "UnknownNamespaceError (404)" in await error(
                session, "feedback", namespace="ghost", query="skiing", used_ids=["f2"])
            assert await _links(session, "u1") == before
            assert "ghost" not in json.loads(
                (await session.read_resource("synapse://namespaces")).contents[0].text)["namespaces"]
            # a good call learns on the memory graph: the spreading edge into the unused
            # memory is weakened (Evermind's Eq. 2, alpha 0.5). The question names no one:
            # f3 is read as "Dana: ..." (core/documents.py), so a question naming Dana
            # finds it by its own words, and only what spreading brought in is weakened
            rep = await call(session, "feedback", namespace="u1", query="Where did they go skiing?",
                             used_ids=["f2", "f1"], unused_ids=["f3"], alpha=0.5)
            assert rep["model"] == "synapse" and rep["graph"] == "memory"
            assert rep["used"] == ["f2", "f1"] and rep["unused"] == ["f3"]
            assert rep["weakened"] >= 1 and rep["created"] == 0
            after = await _links(session, "u1")
            assert after != before
            into_f3 = [(b["weight"], a["weight"]) for i in ("f1", "f2") for b, a in zip(before[i], after[i])
                       if b["id"] == "f3"]
            assert into_f3 and all(a == max(0.0, b - 0.5) for b, a in into_f3)


async def test_rest_and_mcp_share_one_memory(tmp_path):
    with rest_server(tmp_path / "mem", embedder=HashingEmbedder(), mcp=True) as srv:
        RemoteMemory(srv.url, "shared").add_turns(FACTS)
        async with http_session(f"{srv.url}/mcp") as session:
            got = await call(session, "retrieve", namespace="shared", query="Whistler skiing", k=1)
            assert got["items"][0]["id"] == "f2"
            await call(session, "store_turns", namespace="shared", turns=[{"text": "Dana adopted a cat.", "id": "c"}])
        assert RemoteMemory(srv.url, "shared").get("c")["text"] == "Dana adopted a cat."


async def test_langgraph_agent_with_mcp_tools_stores_and_retrieves(tmp_path):
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient

    class ToolCallingFake(FakeMessagesListChatModel):
        def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN003
            return self

    fact = "Ana's birthday is on May 3."
    model = ToolCallingFake(responses=[
        AIMessage("", tool_calls=[{"name": "store_turns", "id": "c1", "args": {
            "namespace": "user_id=ana", "turns": [{"text": fact, "speaker": "user"}]}}]),
        AIMessage("Saved."),
        AIMessage("", tool_calls=[{"name": "retrieve", "id": "c2", "args": {
            "namespace": "user_id=ana", "query": "When is Ana's birthday?", "k": 3}}]),
        AIMessage("Ana's birthday is on May 3."),
    ])
    with rest_server(tmp_path / "mem", embedder=HashingEmbedder(), mcp=True) as srv:
        client = MultiServerMCPClient({"synapse": {"transport": "streamable_http", "url": f"{srv.url}/mcp"}})
        tools = await client.get_tools()
        assert {t.name for t in tools} == TOOLS
        agent = create_agent(model, tools=tools, system_prompt="You remember things.")
        first = await agent.ainvoke({"messages": [HumanMessage("Remember: Ana's birthday is on May 3.")]})
        stored = [m for m in first["messages"] if isinstance(m, ToolMessage)]
        assert len(stored) == 1 and "ids" in str(stored[0].content)
        second = await agent.ainvoke({"messages": [HumanMessage("When is Ana's birthday?")]})
        recalled = [m for m in second["messages"] if isinstance(m, ToolMessage)]
        content = recalled[0].content
        answer = json.loads(content[0]["text"] if isinstance(content, list) else content)
        assert answer["items"][0]["text"] == fact and answer["gate"]["decision"] == "accepted"
        assert second["messages"][-1].content == "Ana's birthday is on May 3."
        # the fact is in the server's memory, as any client sees it
        assert [e["text"] for e in RemoteMemory(srv.url, "user_id=ana").episodes()] == [fact]


async def test_update_and_forget_by_description_show_the_statement_and_change_nothing(tmp_path):
    """Issue 47: `about` (a description instead of an id) returns the memory holding the
    fact, a statement rather than the user's question about it, and changes nothing."""
    async with stdio_session(tmp_path / "mem") as session:
        await call(session, "store_turns", namespace="u1", turns=[
            {"text": "My sister Ana moved to Lisbon last year.", "speaker": "user", "id": "fact"},
            {"text": "Where does my sister Ana live?", "speaker": "user", "id": "asked"}])
        shown = await call(session, "update", namespace="u1", about="Where does my sister Ana live?")
        assert shown["changed"] is False and shown["holding"]["id"] == "fact"
        assert "nothing was changed" in shown["message"]
        assert (await call(session, "inspect", namespace="u1", id="fact"))["memory"].get("superseded_by") is None
        gone = await call(session, "forget", namespace="u1", about="my sister Ana")
        assert gone["holding"]["id"] == "fact" and (await call(session, "stats", namespace="u1"))["episodes"] == 2
        assert "InvalidInputError (400)" in await error(session, "update", namespace="u1", id="fact",
                                                        about="x", text="y")
        assert "InvalidInputError (400)" in await error(session, "update", namespace="u1", text="y")
        assert "InvalidInputError (400)" in await error(session, "forget", namespace="u1", about="x",
                                                        ids=["fact"])
        assert "InvalidInputError (400)" in await error(session, "update", namespace="u1", about="  ")

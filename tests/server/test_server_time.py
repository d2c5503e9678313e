"""Time and versions through every server surface (issue 50): REST with the real client
against uvicorn, the MCP SDK's client over stdio, the CLI, and export/import keeping the
version links."""

from __future__ import annotations

import json

import httpx
import pytest
from _server_helpers import rest_server
from test_server_mcp import call, error, stdio_session

from synapse_integrations import HashingEmbedder, Synapse
from synapse_integrations.cli import main
from synapse_integrations.errors import InvalidInputError, NodeNotFoundError
from synapse_integrations.server.client import RemoteMemory

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TURNS = [{"text": "Sam lives in Porto, near the river.", "speaker": "Sam", "id": "porto",
          "timestamp": "2024-01-10T00:00:00Z"}] + [
    {"text": f"filler turn {i} about the weather", "speaker": "Sam", "id": f"f{i}",
     "timestamp": f"2024-01-{11 + i}T00:00:00Z"} for i in range(6)] + [
    {"text": "Sam lives in Lisbon now, near the sea.", "speaker": "Sam", "id": "lisbon",
     "timestamp": "2024-03-01T00:00:00Z"}]
Q = "Where does Sam live?"


def _ids(mem, **kw):
    return [it.id for it in mem.retrieve(Q, k=10, **kw).items]


def _moved(mem) -> None:
    mem.add_turns(TURNS)
    mem.supersede("porto", "lisbon")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with rest_server(tmp_path_factory.mktemp("time") / "mem", embedder=HashingEmbedder()) as srv:
        yield srv


def test_a_remote_memory_reads_time_as_the_engine_does(server, tmp_path):
    remote = RemoteMemory(server.url, "time-1")
    with Synapse(tmp_path / "local", embedder=HashingEmbedder()) as local:
        for mem in (remote, local):
            _moved(mem)
        for kw in ({}, {"as_of": "2024-02-15"}, {"current_only": True},
                   {"as_of": "2024-02-15T00:00:00+00:00", "current_only": True}):
            assert _ids(remote, **kw) == _ids(local, **kw), kw
        assert _ids(remote, as_of="2024-02-15")[0] == "porto"
        assert "porto" not in _ids(remote, current_only=True)
        item = next(it for it in remote.retrieve(Q, k=10).items if it.id == "porto")
        assert item.valid_until.isoformat().startswith("2024-03-01") and item.superseded_by == "lisbon"
        def versions(mem):  # ingest_ts: when each memory stored them
            return [{k: v for k, v in r.items() if k != "ingest_ts"} for r in mem.history("lisbon")]
        assert versions(remote) == versions(local)
        assert [v["id"] for v in remote.history("porto")] == ["porto", "lisbon"]
    remote.close()


async def test_async_client(server):
    remote = RemoteMemory(server.url, "time-2")
    await remote.aadd_turns(TURNS)
    await remote.asupersede("porto", "lisbon")
    assert [v["id"] for v in await remote.ahistory("porto")] == ["porto", "lisbon"]
    assert "porto" not in [it.id for it in (await remote.aretrieve(Q, current_only=True)).items]
    remote.close()


def test_bad_time_input_is_a_4xx_and_changes_nothing(server):
    remote = RemoteMemory(server.url, "time-3")
    _moved(remote)
    with httpx.Client(base_url=f"{server.url}/v1/namespaces/time-3") as http:
        bad = [http.post("/retrieve", json={"query": Q, "as_of": "not a date"}),
               http.post("/retrieve", json={"query": Q, "current_only": "often"}),
               http.post("/retrieve", json={"query": Q, "at": "last Tuesday"}),
               http.post("/supersede", json={"old_id": "f0", "new_id": "lisbon"}),  # linked
               http.post("/supersede", json={"old_id": "f0"}),
               http.get("/memories/nope/history")]
    assert [r.status_code for r in bad] == [400, 422, 400, 400, 422, 404]
    assert bad[2].json()["error"]["message"].startswith("at: ")
    assert "already linked" in bad[3].json()["error"]["message"]
    with pytest.raises(InvalidInputError):
        remote.supersede("f1", "f1")
    with pytest.raises(NodeNotFoundError):
        remote.history("nope")
    assert [v["id"] for v in remote.history("lisbon")] == ["porto", "lisbon"]
    remote.close()


async def test_mcp_retrieve_as_of_and_the_history_tool(tmp_path):
    with Synapse(tmp_path / "mem", namespace="u1", embedder=HashingEmbedder()) as mem:
        _moved(mem)
    async with stdio_session(tmp_path / "mem") as session:
        before = await call(session, "retrieve", namespace="u1", query=Q, as_of="2024-02-15")
        assert before["items"][0]["id"] == "porto" and "lisbon" not in [i["id"] for i in before["items"]]
        now = await call(session, "retrieve", namespace="u1", query=Q, current_only=True)
        assert "porto" not in [i["id"] for i in now["items"]]
        got = await call(session, "history", namespace="u1", id="porto")
        assert [v["id"] for v in got["versions"]] == ["porto", "lisbon"]
        assert got["versions"][0]["valid_until"] == got["versions"][1]["valid_from"]
        assert "NodeNotFoundError (404)" in await error(session, "history", namespace="u1", id="nope")


def test_cli_query_as_of_history_and_an_export_that_keeps_the_links(tmp_path, capsys):
    with Synapse(tmp_path / "a", embedder=HashingEmbedder()) as mem:
        _moved(mem)
        mem.archive(["porto"])  # an archived older version keeps its link too
    common = ["--path", str(tmp_path / "a"), "--embedder", "hashing"]
    assert main(["history", "lisbon", *common]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[2024-01-10T00:00:00+00:00 .. 2024-03-01") and out[0].endswith("[porto]")
    assert out[1].endswith("[lisbon]") and ".. now]" in out[1]
    assert main(["query", Q, "--current-only", "--json", *common]) == 0
    assert "porto" not in [i["id"] for i in json.loads(capsys.readouterr().out)["items"]]
    dump = tmp_path / "a.jsonl"
    assert main(["export", "--out", str(dump), "--no-progress", *common]) == 0
    lines = {json.loads(x)["id"]: json.loads(x) for x in dump.read_text().splitlines()}
    assert lines["lisbon"]["supersedes"] == "porto" and "supersedes" not in lines["porto"]
    assert main(["import", str(dump), "--path", str(tmp_path / "b"), "--embedder", "hashing",
                 "--no-progress"]) == 0
    capsys.readouterr()
    with Synapse(tmp_path / "b", embedder=HashingEmbedder()) as b:
        assert [v["id"] for v in b.history("lisbon")] == ["porto", "lisbon"]
        assert b.history("lisbon")[0].get("archived") is True
        assert b.get("porto", include_archived=True)["superseded_at"] == lines["lisbon"]["timestamp"]


#: Two turns that say nearly the same thing, five months apart: which one "last month" means
#: depends on when the question is asked (``at``; relative dates, docs/concepts.md).
CLEANED = [{"text": "I cleaned my white sneakers with baking soda.", "speaker": "user",
            "id": "old", "timestamp": "2023-01-05T10:00:00Z"},
           {"text": "I cleaned my white sneakers and the suede boots.", "speaker": "user",
            "id": "new", "timestamp": "2023-05-27T10:00:00Z"}]
CLEAN_Q = "Which shoes did I clean last month?"


def test_at_reads_relative_dates_against_the_time_asked_on_every_surface(server, tmp_path, capsys):
    remote = RemoteMemory(server.url, "time-at")
    remote.add_turns(CLEANED)
    with Synapse(tmp_path / "local", namespace="time-at", embedder=HashingEmbedder()) as local:
        local.add_turns(CLEANED)
        for at, first in (("2023-05-30", "new"), ("2023-01-20T00:00:00Z", "old")):
            assert [it.id for it in remote.retrieve(CLEAN_Q, k=2, at=at).items] == \
                [it.id for it in local.retrieve(CLEAN_Q, k=2, at=at).items]
            assert remote.retrieve(CLEAN_Q, k=2, at=at).items[0].id == first
        # as_of alone sets the time asked too; an explicit at wins over it
        assert local.retrieve(CLEAN_Q, k=2, as_of="2023-01-20").items[0].id == "old"
        assert local.retrieve(CLEAN_Q, k=2, as_of="2023-06-01", at="2023-01-20").items[0].id == "old"
    remote.close()
    common = ["--path", str(tmp_path / "local"), "--namespace", "time-at", "--embedder", "hashing"]
    for at, first in (("2023-05-30", "new"), ("2023-01-20", "old")):
        assert main(["query", CLEAN_Q, "--at", at, "--json", *common]) == 0
        assert json.loads(capsys.readouterr().out)["items"][0]["id"] == first


async def test_mcp_retrieve_takes_the_time_asked(tmp_path):
    with Synapse(tmp_path / "mem", namespace="u1", embedder=HashingEmbedder()) as mem:
        mem.add_turns(CLEANED)
    async with stdio_session(tmp_path / "mem") as session:
        for at, first in (("2023-05-30", "new"), ("2023-01-20", "old")):
            got = await call(session, "retrieve", namespace="u1", query=CLEAN_Q, at=at,
                             include_rejected=True)
            assert got["items"][0]["id"] == first
        assert "at: " in await error(session, "retrieve", namespace="u1", query=CLEAN_Q, at="soon")

"""The engine against a real `chroma run` server on 127.0.0.1 (started by the fixture)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from synapse_integrations import Synapse
from synapse_integrations.storage.chroma import http_client

pytestmark = [pytest.mark.model, pytest.mark.server]

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def test_server_backed_memory_ingests_retrieves_and_reloads(tmp_path, embedder, chroma_server):
    client = http_client(chroma_server["host"], chroma_server["port"])
    turns = [
        {"text": f"Sam: entry {i} of my travel diary, day in {city}", "timestamp": T0 + timedelta(hours=i)}
        for i, city in enumerate(["Lisbon", "Porto", "Seville", "Granada", "Valencia",
                                  "Barcelona", "Bilbao", "Madrid", "Toledo", "Cordoba", "Malaga"])
    ]
    mem = Synapse(tmp_path / "graphs", namespace="server-user", embedder=embedder, client=client)
    ids = mem.add_turns(turns)
    assert mem.stats()["windows"] == 2
    res = mem.retrieve("What did I do in Granada?", k=5)
    assert res.episodes()[0].id == ids[3]
    stats = mem.stats()
    mem.close()

    # the vectors are on the server, not on local disk
    assert not (tmp_path / "graphs" / "chroma").exists()
    again = Synapse.load(tmp_path / "graphs", namespace="server-user", embedder=embedder,
                         client=http_client(chroma_server["host"], chroma_server["port"]))
    assert again.stats() == stats
    assert [i.id for i in again.retrieve("What did I do in Granada?", k=5).items] == [i.id for i in res.items]
    again.close()


def test_server_namespaces_are_separate_collections(tmp_path, embedder, chroma_server):
    client = http_client(chroma_server["host"], chroma_server["port"])
    a = Synapse(tmp_path / "g", namespace="team/a", embedder=embedder, client=client)
    b = Synapse(tmp_path / "g", namespace="team/b", embedder=embedder, client=client)
    a.add_turn("The release password hint is the blue whale.")
    b.add_turn("Lunch is at noon on Fridays.")
    assert all("whale" not in it.text for it in b.retrieve("password hint", k=5))
    from synapse_integrations.storage.chroma import list_namespaces

    assert {"team/a", "team/b"} <= set(list_namespaces(client))
    a.close()
    b.close()

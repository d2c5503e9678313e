"""A Chroma server that hangs or goes away mid-ingest: a clear StorageError within the
configured timeout (never a hang), then, once it is back, no loss and no duplicates.
Also: a write that reached Chroma but reported a failure is not stored twice on retry."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from synapse_integrations import Synapse
from synapse_integrations.errors import StorageError
from synapse_integrations.storage import vectors as chroma_mod
from synapse_integrations.storage.chroma import http_client

from _crash_worker import turn_text
from _safety_helpers import ChromaServer, HashEmbedder

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
TIMEOUT = 2.0


def _episode_texts(mem: Synapse) -> Counter[str]:
    return Counter(d["text"] for _, d in mem.graph.nodes(data=True) if d["kind"] == "episode")


@pytest.mark.server
def test_server_frozen_or_stopped_mid_ingest_then_restarted(tmp_path):
    emb = HashEmbedder()
    srv = ChromaServer(tmp_path / "server").start()
    stored: dict[str, int] = {}
    try:
        mem = Synapse(tmp_path / "graphs", namespace="srv", embedder=emb,
                      client=http_client(srv.host, srv.port, timeout=TIMEOUT))

        def add(n: int) -> None:
            stored[mem.add_turn(turn_text(n), timestamp=T0 + timedelta(minutes=n))] = n

        for n in range(12):
            add(n)

        # a hung server (SIGSTOP: the port is open, nothing answers): bounded by the timeout
        srv.freeze()
        t0 = time.monotonic()
        with pytest.raises(StorageError, match="timed out"):
            mem.add_turn(turn_text(12), timestamp=T0 + timedelta(minutes=12))
        assert time.monotonic() - t0 < TIMEOUT + 2.0
        # reads need no round trip: the graph and the vectors are in memory
        t0 = time.monotonic()
        res = mem.retrieve(turn_text(3), k=5)
        assert time.monotonic() - t0 < TIMEOUT
        assert [k for k, v in stored.items() if v == 3][0] in [it.id for it in res.items]
        srv.thaw()
        time.sleep(0.5)
        add(12)  # the caller retries the failed write
        add(13)

        # a stopped server: refused at once
        srv.stop()
        t0 = time.monotonic()
        with pytest.raises(StorageError, match="(?i)refused|connect"):
            mem.add_turn(turn_text(14), timestamp=T0 + timedelta(minutes=14))
        assert time.monotonic() - t0 < TIMEOUT + 2.0
        srv.start()  # same port, same data folder
        for n in range(14, 25):
            add(n)

        report = mem.verify()
        assert report.ok, report.problems
        texts = _episode_texts(mem)
        assert sorted(stored.values()) == list(range(25))
        assert texts == Counter(turn_text(n) for n in range(25)), "lost or duplicated turns"
        assert all(node_id in mem.graph for node_id in stored)
        mem.close()

        # a fresh process view (new client, graph from the snapshot): the same memory
        again = Synapse.load(tmp_path / "graphs", namespace="srv", embedder=emb,
                             client=http_client(srv.host, srv.port, timeout=TIMEOUT))
        assert again.verify().ok
        assert _episode_texts(again) == texts
        for node_id, n in stored.items():
            assert again.search_vectors(emb.embed_query(turn_text(n)), 1)[0] == [node_id]
        again.close()
    finally:
        srv.stop()


def test_http_client_timeout_is_validated_and_applied():
    with pytest.raises(StorageError, match="timeout"):
        http_client("127.0.0.1", 1, timeout=0)
    with pytest.raises(StorageError, match="timeout"):
        http_client("127.0.0.1", 1, timeout="5")


class _AppliedThenFailed:
    """Fault injection: the next episode upsert reaches Chroma, then reports a failure
    (a reply lost on the way back)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed = False
        real = chroma_mod.VectorCollection.upsert

        def upsert(col, ids, embeddings, documents, metadatas):
            real(col, ids, embeddings, documents, metadatas)
            if self.armed and all(m.get("kind") == "episode" for m in metadatas):
                self.armed = False
                raise StorageError("Chroma upsert failed: connection reset by peer")

        monkeypatch.setattr(chroma_mod.VectorCollection, "upsert", upsert)


@pytest.mark.parametrize("explicit_id", [False, True])
def test_retry_of_a_write_that_reached_chroma_is_not_duplicated(tmp_path, monkeypatch, explicit_id):
    fault = _AppliedThenFailed(monkeypatch)
    mem = Synapse(tmp_path / "m", embedder=HashEmbedder())
    first = [mem.add_turn(turn_text(n)) for n in range(3)]
    turn = {"text": turn_text(3), "speaker": "Sam", "metadata": {"channel": "web"}}
    if explicit_id:
        turn["id"] = "turn-3"
    fault.armed = True
    with pytest.raises(StorageError):
        mem.add_turns([turn])
    # the caller retries the same turn (a new timestamp would be filled in: ignored)
    got = mem.add_turns([turn, {"text": turn_text(4)}])
    assert len(got) == 2 and got[0] not in first
    if explicit_id:
        assert got[0] == "turn-3"
    assert _episode_texts(mem) == Counter(turn_text(n) for n in range(5))
    assert mem.get(got[0])["metadata"] == {"channel": "web"}
    # the same text said again later, with no failure in between, is a new turn
    third = mem.add_turn(turn_text(3), speaker="Sam", metadata={"channel": "web"})
    assert third not in got and _episode_texts(mem)[turn_text(3)] == 2
    assert mem.verify().ok
    mem.close()

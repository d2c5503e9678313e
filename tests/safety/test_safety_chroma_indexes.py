"""Many tenants in one folder (issue 49, "Many tenants"): the lookups that Chroma and
``ChromaFiles`` make for one namespace must not scan every namespace's rows.

Chroma's tables have no index on a log record's topic (``embeddings_queue``) or on a
segment's collection, and its every write and read looks those up: before the fix, opening
and writing a new namespace took 41 ms per namespace with 250 in the folder and 91 ms with
2,000 (10,000 did not finish in 20 minutes). These tests check the query plans (SQLite's
``EXPLAIN QUERY PLAN``: before, a scan of the table, or of the log from the collection's
offset on, which is all of it for a new collection; after, a search of an index),
not timings, so they fail without the fix on any machine, in a second.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from _safety_helpers import HashEmbedder

from synapse_integrations import Synapse
from synapse_integrations.storage import chroma as chroma_mod
from synapse_integrations.storage.chroma import (
    LOOKUP_INDEXES,
    ChromaFiles,
    close_client,
    persistent_client,
)

#: The lookups of a namespace that Chroma 1.x makes (its SQLite log and sysdb: reading the
#: log from a collection's offset, purging it, moving the offset) and those of ChromaFiles.
LOOKUPS = {
    "read the log": "SELECT seq_id, id, operation, vector, encoding, metadata FROM embeddings_queue "
                    "WHERE topic = ? AND seq_id > ? ORDER BY seq_id ASC",
    "purge the log": "DELETE FROM embeddings_queue WHERE topic = ? AND seq_id < ?",
    "move the offset": "INSERT OR REPLACE INTO max_seq_id (seq_id, segment_id) "
                       "SELECT ?, id FROM segments WHERE collection = ?",
    "index folders by name": "SELECT s.id, c.name FROM segments s JOIN collections c ON "
                             "s.collection = c.id WHERE s.scope = 'VECTOR' AND c.name IN (?, ?)",
    "index folders by collection": "SELECT id FROM segments WHERE scope = 'VECTOR' AND collection IN (?, ?)",
}


def _plans(db: Path) -> dict[str, str]:
    con = sqlite3.connect(db)
    try:
        return {what: " / ".join(r[-1] for r in con.execute(
            f"EXPLAIN QUERY PLAN {sql}", [0] * sql.count("?"))) for what, sql in LOOKUPS.items()}
    finally:
        con.close()


def _indexes(db: Path) -> set[str]:
    con = sqlite3.connect(db)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    finally:
        con.close()


def _memory(path: Path, namespaces: int = 3) -> None:
    for n in range(namespaces):
        mem = Synapse(path, namespace=f"tenant-{n}", embedder=HashEmbedder())
        mem.add_turn(f"tenant {n} keeps bees", id=f"t{n}")
        mem.close()


def test_a_namespace_s_lookups_search_an_index_instead_of_scanning_every_namespace(tmp_path):
    _memory(tmp_path / "mem")
    db = tmp_path / "mem" / "chroma" / "chroma.sqlite3"
    assert {name for name, _, _ in LOOKUP_INDEXES} <= _indexes(db)
    for what, plan in _plans(db).items():
        assert "SCAN" not in plan and "USING INDEX" in plan, f"{what}: {plan}"


def _drop_indexes(db) -> None:
    """The database as an earlier version left it: without the lookup indexes."""
    con = sqlite3.connect(db)
    for name, _, _ in LOOKUP_INDEXES:
        con.execute(f"DROP INDEX {name}")
    con.commit()
    con.close()


def test_a_folder_made_without_the_indexes_gets_them_at_its_next_open_and_keeps_its_memories(tmp_path):
    """A folder written by an earlier version (or whose indexes a Chroma migration dropped
    with the table it rebuilt): the next open in a new process adds them; nothing is lost."""
    path = tmp_path / "mem"
    _memory(path)
    db = path / "chroma" / "chroma.sqlite3"
    _drop_indexes(db)
    # without them: every row of the log from the offset on, every segment
    assert "USING INDEX" not in _plans(db)["read the log"]
    assert "SCAN segments" in _plans(db)["index folders by collection"]
    chroma_mod._INDEXED.clear()  # as in a new process
    for n in range(3):
        mem = Synapse(path, namespace=f"tenant-{n}", embedder=HashEmbedder())
        assert [e["id"] for e in mem.episodes()] == [f"t{n}"]
        assert [i.id for i in mem.retrieve("bees", k=1).items] == [f"t{n}"]
        mem.close()
    assert {name for name, _, _ in LOOKUP_INDEXES} <= _indexes(db)
    assert all("SCAN" not in plan for plan in _plans(db).values())


def test_the_indexes_are_added_once_per_database_not_at_every_open(tmp_path, monkeypatch):
    calls = []
    real = ChromaFiles.add_lookup_indexes
    monkeypatch.setattr(ChromaFiles, "add_lookup_indexes", lambda self: calls.append(1) or real(self))
    for _ in range(3):
        close_client(persistent_client(tmp_path / "chroma"))
    assert len(calls) == 1


def test_outside_the_tested_chroma_range_nothing_is_added(tmp_path, monkeypatch, caplog):
    client = persistent_client(tmp_path / "chroma")  # indexed: a tested Chroma
    close_client(client)
    db = tmp_path / "chroma" / "chroma.sqlite3"
    _drop_indexes(db)
    monkeypatch.setattr(chroma_mod, "chroma_version", lambda: (9, 0, 0))
    with caplog.at_level(logging.WARNING, logger="synapse_integrations.storage.chroma"):
        assert ChromaFiles(db).add_lookup_indexes() is False
    assert "outside the tested range" in caplog.text
    assert not {name for name, _, _ in LOOKUP_INDEXES} & _indexes(db)


def test_the_folders_namespaces_are_read_in_one_query_as_the_client_lists_them(tmp_path, monkeypatch):
    """``Synapse.namespaces`` (the server's start, ``synapse inspect``) reads the collection
    metadata table once instead of building every collection through the client; the
    same names, a collection of another library left out; the client when the private
    schema cannot be used."""
    from synapse_integrations.storage.chroma import list_namespaces

    for ns in ("alice", "team/bob", "carol"):
        with Synapse(tmp_path, namespace=ns, embedder=HashEmbedder()) as mem:
            mem.add_turn(f"{ns} keeps a blue notebook.")
    client = persistent_client(tmp_path / "chroma")
    client.get_or_create_collection("someone-elses", metadata={"namespace": "mallory"})
    through_client = list_namespaces(client)
    close_client(client)
    files = ChromaFiles(tmp_path / "chroma" / "chroma.sqlite3")
    assert files.namespaces() == through_client == ["alice", "carol", "team/bob"]
    assert Synapse.namespaces(tmp_path) == through_client
    assert ChromaFiles(tmp_path / "nothing.sqlite3").namespaces() == []
    monkeypatch.setattr(ChromaFiles, "schema_problem", lambda self, con: "an untested schema")
    assert files.namespaces() is None
    assert Synapse.namespaces(tmp_path) == through_client  # listed through the client

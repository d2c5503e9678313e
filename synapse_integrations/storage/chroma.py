"""Vectors in Chroma. The only module of the package that imports ``chromadb``.

Each namespace owns two collections: ``active`` (what retrieval searches) and ``archive``
(dormant nodes moved out of the active graph, restorable). Collection names are derived
from a hash of the namespace, so any namespace string maps to a valid, private name; the
namespace itself is kept in the collection metadata.

Embeddings are always passed explicitly: Chroma never embeds anything itself (its default
embedding function would try to download a model).
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StorageError
from .hnsw import check_index, zero_hnsw_slack

logger = logging.getLogger(__name__)

_PAGE = 5000


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False, allow_reset=False)


def ephemeral_client() -> Any:
    """An in-memory Chroma client (nothing written to disk; used by ``synapse bench perf``
    to build large throwaway memories without a disk commit per write)."""
    import chromadb

    try:
        return chromadb.EphemeralClient(settings=_settings())
    except Exception as exc:
        raise StorageError(f"cannot start an in-memory Chroma: {exc}") from exc


#: Makes starting and stopping an embedded Chroma one step each. Chroma counts the clients
#: of a folder's shared system under its own lock, but looks the system up, starts it and
#: stops it outside that lock: a client made while the last other one closes gets the
#: system being stopped ("'RustBindingsAPI' object has no attribute 'bindings'", "Could
#: not connect to tenant default_tenant"), which a pool opening and closing engines on
#: several threads met 103 times in 240 writes.
_CLIENTS_LOCK = threading.Lock()


def persistent_client(path: str | Path) -> Any:
    """An embedded Chroma client storing its files under ``path`` (clients of one folder
    share one system in a process; see :func:`close_client`)."""
    import chromadb

    try:
        with _CLIENTS_LOCK:
            return chromadb.PersistentClient(path=str(path), settings=_settings())
    except Exception as exc:  # chroma raises many kinds; name the path
        raise StorageError(f"cannot open embedded Chroma at {path}: {exc}") from exc


def close_client(client: Any) -> None:
    """Release an embedded client made by :func:`persistent_client`.

    Chroma shares one in-memory system per folder inside a process and keeps it (open
    SQLite handles, loaded indexes with their open files, a runtime's threads) until its
    last client is closed: ``Client.close`` counts the clients down and ``System.stop``s
    the system after the last. This is the only mechanism in Chroma's public API that
    frees a collection's loaded index (there is no per-collection close; the segment
    cache's size follows the descriptor limit, see :func:`embedded_index_capacity`;
    ``SharedSystemClient.clear_system_cache`` only forgets the systems, without stopping
    them, so it would leak what it was asked to free). A memory that is closed and later
    reopened after *another process* wrote the folder would otherwise read that stale
    cache and fail ("Error finding id"). Errors while closing are logged, not raised:
    closing must not lose the caller's original exception.
    """
    close = getattr(client, "close", None)
    if not callable(close):
        return
    try:
        with _CLIENTS_LOCK:
            close()
    except Exception as exc:  # pragma: no cover - depends on chroma internals
        logger.warning("closing the embedded Chroma client failed: %s", exc)


def http_client(host: str = "127.0.0.1", port: int = 8000, *, timeout: float | None = 30.0,
                **kwargs: Any) -> Any:
    """A client for a Chroma server started with ``chroma run --host H --port P``.

    ``timeout`` (seconds, per request; ``None`` waits forever) bounds how long a call may
    wait on a server that stopped answering: Chroma's own client never times out, so a
    frozen server would hang the memory. A timed-out call raises :class:`StorageError`.
    """
    import chromadb

    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise StorageError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    try:
        client = chromadb.HttpClient(host=host, port=port, settings=_settings(), **kwargs)
    except Exception as exc:
        raise StorageError(f"cannot reach the Chroma server at {host}:{port}: {exc}") from exc
    set_http_timeout(client, timeout)
    return client


def set_http_timeout(client: Any, timeout: float | None) -> bool:
    """Bound every request of a Chroma ``HttpClient`` (returns False for other clients)."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        return False
    session.timeout = httpx.Timeout(timeout)
    return True


def collection_name(namespace: str, role: str) -> str:
    """A valid Chroma collection name for (namespace, role), stable across processes."""
    digest = hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:32]
    return f"synapse-{digest}-{role}"


def _clean_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Chroma accepts only str/int/float/bool values (and not None)."""
    return {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))}


class VectorCollection:
    """Thin wrapper over one Chroma collection with explicit embeddings."""

    def __init__(self, client: Any, name: str, namespace: str, role: str) -> None:
        self.name = name
        try:
            self._col = client.get_or_create_collection(
                name,
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}},
                metadata={"namespace": namespace, "role": role, "library": "synapse-integrations"},
            )
        except Exception as exc:
            raise StorageError(f"cannot open Chroma collection {name}: {exc}") from exc

    @property
    def id(self) -> str:
        """Chroma's id of the collection (names its segments in the embedded files)."""
        return str(self._col.id)

    def upsert(self, ids: Sequence[str], embeddings: np.ndarray, documents: Sequence[str],
               metadatas: Sequence[Mapping[str, Any]]) -> None:
        if not ids:
            return
        try:
            for s in range(0, len(ids), _PAGE):
                self._col.upsert(
                    ids=list(ids[s:s + _PAGE]),
                    embeddings=np.asarray(embeddings[s:s + _PAGE], dtype=np.float32),
                    documents=list(documents[s:s + _PAGE]),
                    metadatas=[_clean_metadata(m) or {"_": 0} for m in metadatas[s:s + _PAGE]],
                )
        except Exception as exc:
            raise StorageError(f"Chroma upsert into {self.name} failed: {exc}") from exc

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        try:
            for s in range(0, len(ids), _PAGE):
                self._col.delete(ids=list(ids[s:s + _PAGE]))
        except Exception as exc:
            raise StorageError(f"Chroma delete from {self.name} failed: {exc}") from exc

    def query(self, embedding: np.ndarray, k: int,
              where: Mapping[str, Any] | None = None) -> tuple[list[str], np.ndarray]:
        """The ``k`` nearest ids and their cosine similarities (best first)."""
        if k <= 0:
            return [], np.zeros(0)
        try:
            res = self._col.query(
                query_embeddings=np.asarray(embedding, dtype=np.float32)[None, :],
                n_results=k,
                where=dict(where) if where else None,
                include=["distances"],
            )
        except Exception as exc:
            raise StorageError(f"Chroma query on {self.name} failed: {exc}") from exc
        ids = list(res["ids"][0])
        sims = 1.0 - np.asarray(res["distances"][0], dtype=np.float64)
        return ids, sims

    def get(self, ids: Sequence[str] | None = None, *, include_documents: bool = False
            ) -> tuple[list[str], np.ndarray, list[str] | None]:
        """Ids and embeddings (and documents) of ``ids``, or of everything when None."""
        include = ["embeddings"] + (["documents"] if include_documents else [])
        out_ids: list[str] = []
        embs: list[np.ndarray] = []
        docs: list[str] = []
        try:
            if ids is None:
                offset = 0
                while True:
                    page = self._col.get(include=include, limit=_PAGE, offset=offset)
                    if not page["ids"]:
                        break
                    out_ids += page["ids"]
                    embs.append(np.asarray(page["embeddings"], dtype=np.float32))
                    docs += page.get("documents") or []
                    offset += len(page["ids"])
            else:
                for s in range(0, len(ids), _PAGE):
                    page = self._col.get(ids=list(ids[s:s + _PAGE]), include=include)
                    out_ids += page["ids"]
                    if page["ids"]:
                        embs.append(np.asarray(page["embeddings"], dtype=np.float32))
                        docs += page.get("documents") or []
        except Exception as exc:
            raise StorageError(f"Chroma get from {self.name} failed: {exc}") from exc
        dim = embs[0].shape[1] if embs else 0
        matrix = np.concatenate(embs) if embs else np.zeros((0, dim), dtype=np.float32)
        return out_ids, matrix, (docs if include_documents else None)

    def rows(self, ids: Sequence[str]) -> list[tuple[str, str | None, dict[str, Any] | None]]:
        """``(id, document, metadata)`` of the stored ``ids`` (those that exist)."""
        out: list[tuple[str, str | None, dict[str, Any] | None]] = []
        try:
            for s in range(0, len(ids), _PAGE):
                got = self._col.get(ids=list(ids[s:s + _PAGE]), include=["documents", "metadatas"])
                out += list(zip(got["ids"], got["documents"], got["metadatas"]))
        except Exception as exc:
            raise StorageError(f"Chroma get from {self.name} failed: {exc}") from exc
        return out

    def all_rows(self) -> list[tuple[str, str | None, dict[str, Any] | None]]:
        """``(id, document, metadata)`` of every row (no vectors: readable even while the
        collection's index is missing)."""
        out: list[tuple[str, str | None, dict[str, Any] | None]] = []
        try:
            offset = 0
            while True:
                page = self._col.get(include=["documents", "metadatas"], limit=_PAGE, offset=offset)
                if not page["ids"]:
                    break
                out += list(zip(page["ids"], page["documents"], page["metadatas"]))
                offset += len(page["ids"])
        except Exception as exc:
            raise StorageError(f"Chroma get from {self.name} failed: {exc}") from exc
        return out

    def generations(self, ids: Sequence[str]) -> dict[str, int]:
        """``{id: generation}`` of the stored ``ids`` (those that exist; 0 when a row has
        none: written before generations, or never forgotten)."""
        out: dict[str, int] = {}
        try:
            for s in range(0, len(ids), _PAGE):
                got = self._col.get(ids=list(ids[s:s + _PAGE]), include=["metadatas"])
                for i, meta in zip(got["ids"], got["metadatas"] or [None] * len(got["ids"])):
                    gen = (meta or {}).get("gen", 0)
                    out[i] = gen if isinstance(gen, int) and not isinstance(gen, bool) else 0
        except Exception as exc:
            raise StorageError(f"Chroma get from {self.name} failed: {exc}") from exc
        return out

    def count(self) -> int:
        try:
            return int(self._col.count())
        except Exception as exc:
            raise StorageError(f"Chroma count on {self.name} failed: {exc}") from exc


class Tombstones:
    """The record of one namespace's forgotten ids, kept in Chroma beside its collections
    so that every engine on the same Chroma (other processes on a server included) and
    every later open sees it. Ids only, never text: a record ``"<gen>:<id>"`` says that
    versions of ``id`` older than generation ``gen`` were forgotten. Records are only
    ever added (a forget of an id written again adds a newer one), so their count tells
    whether anything changed. The collection is created at the first forget."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = collection_name(namespace, "forgotten")
        self._col: Any = None

    def _collection(self, *, create: bool = False) -> Any:
        if self._col is not None:
            return self._col
        try:
            if create:
                self._col = self.client.get_or_create_collection(
                    self.name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}},
                    metadata={"namespace": self.namespace, "role": "forgotten",
                              "library": "synapse-integrations"})
            else:
                self._col = self.client.get_collection(self.name, embedding_function=None)
        except Exception as exc:
            if not create and _missing(exc):
                return None
            raise StorageError(f"cannot open Chroma collection {self.name}: {exc}") from exc
        return self._col

    @property
    def id(self) -> str | None:
        """Chroma's id of the collection if this object has seen it exist (no round trip:
        also asked after the client is closed)."""
        return None if self._col is None else str(self._col.id)

    def count(self) -> int:
        """How many records there are (0 before the first forget)."""
        col = self._collection()
        try:
            return 0 if col is None else int(col.count())
        except Exception as exc:
            raise StorageError(f"Chroma count on {self.name} failed: {exc}") from exc

    def read(self) -> tuple[dict[str, int], int]:
        """``({id: newest forgotten generation}, number of records)``."""
        col = self._collection()
        out: dict[str, int] = {}
        n = 0
        if col is None:
            return out, 0
        try:
            offset = 0
            while True:
                page = col.get(include=[], limit=_PAGE, offset=offset)
                if not page["ids"]:
                    break
                for rid in page["ids"]:
                    gen, _, node_id = rid.partition(":")
                    if gen.isdigit() and node_id:
                        out[node_id] = max(out.get(node_id, 0), int(gen))
                n += len(page["ids"])
                offset += len(page["ids"])
        except Exception as exc:
            raise StorageError(f"Chroma get from {self.name} failed: {exc}") from exc
        return out, n

    def read_rows(self) -> tuple[list[str], int]:
        """The raw record ids (for a rebuild)."""
        col = self._collection()
        if col is None:
            return [], 0
        try:
            got = col.get(include=[])["ids"]
        except Exception as exc:
            raise StorageError(f"Chroma get from {self.name} failed: {exc}") from exc
        return list(got), len(got)

    def add_raw(self, rids: Sequence[str]) -> None:
        col = self._collection(create=True)
        try:
            col.upsert(ids=list(rids), embeddings=np.ones((len(rids), 1), dtype=np.float32))
        except Exception as exc:
            raise StorageError(f"Chroma upsert into {self.name} failed: {exc}") from exc

    def add(self, marks: Mapping[str, int]) -> None:
        """Record that versions of each id older than its generation are forgotten."""
        col = self._collection(create=True)
        rids = [f"{gen}:{i}" for i, gen in marks.items()]
        try:
            for s in range(0, len(rids), _PAGE):
                chunk = rids[s:s + _PAGE]
                col.upsert(ids=chunk, embeddings=np.ones((len(chunk), 1), dtype=np.float32))
        except Exception as exc:
            raise StorageError(f"Chroma upsert into {self.name} failed: {exc}") from exc


def _missing(exc: Exception) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "notfound" in text or "does not exist" in text or "not found" in text


class ChromaVectors:
    """The two collections (active, archive) of one namespace.

    ``sqlite_path`` is the embedded Chroma's ``chroma.sqlite3`` (``None`` for a server); it
    lets :meth:`scrub` erase deleted text from the files (see docs/safety.md).
    """

    def __init__(self, client: Any, namespace: str, *, sqlite_path: str | Path | None = None) -> None:
        self.client = client
        self.namespace = namespace
        self.sqlite_path = Path(sqlite_path) if sqlite_path is not None else None
        self.active = VectorCollection(client, collection_name(namespace, "active"), namespace, "active")
        self.archive = VectorCollection(client, collection_name(namespace, "archive"), namespace, "archive")
        self.forgotten = Tombstones(client, namespace)

    @staticmethod
    def set_aside_broken_indexes(sqlite_path: str | Path, namespace: str) -> dict[str, Path]:
        """Check the persisted HNSW index of each of the namespace's collections
        (:func:`~.hnsw.check_index`) *before* Chroma loads it: a corrupt index can crash
        the process in Chroma's native code. A broken one is renamed ``<folder>.broken``
        (its rows stay in Chroma's database); returns ``{role: set-aside folder}`` of the
        indexes to rebuild (:meth:`rebuild`), also those set aside by an open that did not
        get to rebuild them; delete the folders once rebuilt. Embedded Chroma only; call
        before opening the collections."""
        path = Path(sqlite_path)
        if not path.is_file():
            return {}
        roles = ("active", "archive", "forgotten")
        names = {collection_name(namespace, r): r for r in roles}
        broken: dict[str, Path] = {}
        for name, folder in ChromaFiles(path).vector_segments_by_name(list(names)).items():
            aside = folder.with_name(folder.name + ".broken")
            if folder.is_dir():
                problem = check_index(folder)
                if problem is None:
                    continue
                logger.error("the Chroma index of %r (%s) is corrupt: %s; it is rebuilt from the "
                             "stored rows", namespace, names[name], problem)
                shutil.rmtree(aside, ignore_errors=True)
                folder.rename(aside)
            if aside.is_dir():
                broken[names[name]] = aside
        return broken

    def rebuild(self, roles: Sequence[str], embed: Any,
                document: Callable[[str, Mapping[str, Any]], str] | None = None) -> int:
        """Rebuild the collections of ``roles`` whose index was set aside: their rows
        (ids, texts, metadata: Chroma's database still has them) are read, the
        collection is made anew and the rows written back with vectors embedded again by
        ``embed(texts)`` from each row's text, or from ``document(text, metadata)`` when
        given (what the engine reads for a row). Returns the rows rewritten."""
        done = 0
        for role in roles:
            if role == "forgotten":
                marks, _ = self.forgotten.read_rows()
                self._recreate(self.forgotten.name)
                self.forgotten = Tombstones(self.client, self.namespace)
                if marks:
                    self.forgotten.add_raw(marks)
                done += len(marks)
                continue
            col = getattr(self, role)
            rows = col.all_rows()
            self._recreate(col.name)
            fresh = VectorCollection(self.client, col.name, self.namespace, role)
            setattr(self, role, fresh)
            if rows:
                ids, docs, metas = zip(*rows)
                read = [d or "" for d in docs] if document is None else \
                    [document(d or "", m or {}) for d, m in zip(docs, metas)]
                fresh.upsert(list(ids), np.asarray(embed(read)), list(docs),
                             [m or {} for m in metas])
            done += len(rows)
        return done

    def _recreate(self, name: str) -> None:
        try:
            self.client.delete_collection(name)
        except Exception as exc:
            if not _missing(exc):
                raise StorageError(f"cannot delete Chroma collection {name}: {exc}") from exc

    def _files(self) -> ChromaFiles | None:
        if self.sqlite_path is None or not self.sqlite_path.is_file():
            return None
        return ChromaFiles(self.sqlite_path)

    def _collection_ids(self) -> list[str]:
        ids = [self.active.id, self.archive.id]
        forgotten = self.forgotten.id
        return ids + ([forgotten] if forgotten else [])

    def scrub(self, ids: Sequence[str]) -> bool:
        """Erase the text of deleted ``ids`` from the embedded Chroma's files (see
        :meth:`ChromaFiles.scrub`); then zero the index files' unused space. Only for an
        embedded Chroma; returns False when there is no file to scrub or Chroma's schema
        is not one this version knows (logged: the text may then stay in Chroma's log)."""
        files = self._files()
        if files is None:
            return False
        done = files.scrub(ids, [self.active.id, self.archive.id])
        self.clear_index_slack()
        return done

    def segment_folders(self) -> list[Path]:
        """The HNSW folders of this namespace's collections (embedded Chroma only)."""
        files = self._files()
        return [] if files is None else files.vector_segments(self._collection_ids())

    def clear_index_slack(self) -> int:
        """Zero the unused space of this namespace's persisted HNSW files (see
        :func:`zero_hnsw_slack`); embedded Chroma only. Returns the bytes zeroed."""
        return sum(zero_hnsw_slack(folder) for folder in self.segment_folders())

    def drop(self) -> None:
        """Delete the namespace's collections (active, archive, the record of forgotten
        ids) and, for an embedded Chroma, what Chroma leaves of them: their HNSW folders
        and the deleted rows in the database's free pages."""
        self.forgotten.count()  # look it up: another engine may have created it since
        folders = self.segment_folders()
        for name in (self.active.name, self.archive.name, self.forgotten.name):
            try:
                self.client.delete_collection(name)
            except Exception as exc:  # already gone is fine; anything else is not
                if not _missing(exc):
                    raise StorageError(f"cannot delete Chroma collection {name}: {exc}") from exc
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        files = self._files()
        if files is not None:
            files.vacuum()


#: Chroma releases whose embedded files (SQLite tables, HNSW layout) this module was
#: tested with; pyproject.toml pins the same range.
TESTED_CHROMA = ((1, 0), (1, 6))
_EXPECTED_TABLES = {"embeddings_queue": {"topic", "id", "metadata"},
                    "segments": {"id", "scope", "collection"}, "collections": {"id", "name"}}


def chroma_version() -> tuple[int, ...]:
    import chromadb

    return tuple(int(p) for p in re.findall(r"\d+", chromadb.__version__)[:3])


class ChromaFiles:
    """The one place that reads or writes Chroma's *private* files directly: the embedded
    database ``chroma.sqlite3`` (its write-ahead log table and segment table) and the HNSW
    folders. Chroma has no public API to erase a deleted record's text from its log or to
    find a collection's index folder, so forgetting and dropping need this. Every use
    checks first that Chroma's version is in :data:`TESTED_CHROMA` and that the tables
    have the expected columns; otherwise it logs why and does only what needs no private
    schema (``VACUUM``), and :meth:`scrub` returns False."""

    def __init__(self, sqlite_path: str | Path) -> None:
        self.path = Path(sqlite_path)

    def _connect(self) -> Any:
        import sqlite3

        con = sqlite3.connect(str(self.path), timeout=30, isolation_level=None)
        con.execute("PRAGMA busy_timeout = 30000")
        return con

    def schema_problem(self, con: Any) -> str | None:
        """Why the private schema cannot be used (None: it can)."""
        version = chroma_version()
        if not TESTED_CHROMA[0] <= version[:2] < TESTED_CHROMA[1]:
            return (f"chromadb {'.'.join(map(str, version))} is outside the tested range "
                    f"{TESTED_CHROMA[0]} to {TESTED_CHROMA[1]} (exclusive)")
        for table, columns in _EXPECTED_TABLES.items():
            have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            if not columns <= have:
                return f"Chroma's table {table} lacks {sorted(columns - have)}"
        return None

    def vector_segments_by_name(self, names: Sequence[str]) -> dict[str, Path]:
        """``{collection name: HNSW folder}`` for the named collections that have one."""
        import sqlite3

        try:
            con = self._connect()
            try:
                problem = self.schema_problem(con)
                if problem:
                    logger.warning("cannot check Chroma's index folders: %s", problem)
                    return {}
                marks = ",".join("?" * len(names))
                rows = con.execute(f"SELECT s.id, c.name FROM segments s JOIN collections c ON "
                                   f"s.collection = c.id WHERE s.scope = 'VECTOR' AND c.name IN "
                                   f"({marks})", list(names)).fetchall()
            finally:
                con.close()
        except sqlite3.Error as exc:
            logger.warning("cannot list Chroma's index folders in %s: %s", self.path, exc)
            return {}
        return {name: self.path.parent / str(seg) for seg, name in rows}

    def vector_segments(self, collection_ids: Sequence[str]) -> list[Path]:
        import sqlite3

        try:
            con = self._connect()
            try:
                problem = self.schema_problem(con)
                if problem:
                    logger.warning("cannot find Chroma's index folders: %s", problem)
                    return []
                marks = ",".join("?" * len(collection_ids))
                rows = con.execute(f"SELECT id FROM segments WHERE scope = 'VECTOR' AND "
                                   f"collection IN ({marks})", list(collection_ids)).fetchall()
            finally:
                con.close()
        except sqlite3.Error as exc:
            logger.warning("cannot list Chroma's index folders in %s: %s", self.path, exc)
            return []
        return [self.path.parent / str(r[0]) for r in rows if (self.path.parent / str(r[0])).is_dir()]

    def scrub(self, ids: Sequence[str], collection_ids: Sequence[str]) -> bool:
        """Chroma deletes a record by appending a delete to its write-ahead log
        (``embeddings_queue``); the add record before it keeps the document and metadata,
        and SQLite keeps deleted rows in free pages. This blanks the metadata of the log
        records of ``ids`` (the vectors stay, so a replay of the log still adds-then-deletes
        them), optimises the full-text index and VACUUMs the database."""
        import sqlite3

        try:
            con = self._connect()
            try:
                problem = self.schema_problem(con)
                if problem:
                    logger.error("forgotten text may stay in Chroma's log (%s): %s", self.path, problem)
                else:
                    topics = [f"%{c}" for c in collection_ids]
                    ids = list(ids)
                    for s in range(0, len(ids), 500):
                        chunk = ids[s:s + 500]
                        marks = ",".join("?" * len(chunk))
                        for topic in topics:
                            con.execute(f"UPDATE embeddings_queue SET metadata = NULL "
                                        f"WHERE topic LIKE ? AND id IN ({marks})", [topic, *chunk])
                    tables = {r[0] for r in con.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table'")}
                    if "embedding_fulltext_search" in tables:
                        con.execute("INSERT INTO embedding_fulltext_search(embedding_fulltext_search) "
                                    "VALUES('optimize')")
                self._vacuum(con)
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise StorageError(f"could not scrub deleted text from {self.path}: {exc}") from exc
        return problem is None

    @staticmethod
    def _vacuum(con: Any) -> None:
        con.execute("VACUUM")
        # in WAL mode, old page images (with the text) live on in the -wal file
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def vacuum(self) -> None:
        """Rewrite the database without its free pages (deleted rows' text goes)."""
        import sqlite3

        try:
            con = self._connect()
            try:
                self._vacuum(con)
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise StorageError(f"could not vacuum {self.path}: {exc}") from exc


def list_namespaces(client: Any) -> list[str]:
    """Namespaces that have collections in this Chroma (read from collection metadata)."""
    out = set()
    for col in client.list_collections():
        meta = getattr(col, "metadata", None) or {}
        if meta.get("library") == "synapse-integrations" and "namespace" in meta:
            out.add(meta["namespace"])
    return sorted(out)

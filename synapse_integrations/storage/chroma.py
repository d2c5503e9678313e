"""Chroma's clients and files. The only module of the package that imports ``chromadb``.

Its clients (embedded: :func:`persistent_client` and :func:`close_client`; in memory;
a server's: :func:`http_client`), the collection name of a namespace's role, the
namespaces a Chroma holds, and the one class that touches Chroma's private files
(:class:`ChromaFiles`, within :data:`TESTED_CHROMA`; it also gives the embedded database
the indexes that keep a namespace's lookups fast among many: :data:`LOOKUP_INDEXES`). A
namespace's collections are in :mod:`.vectors`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import StorageError

logger = logging.getLogger(__name__)


def _settings() -> Any:
    """Chroma's settings for a new client: a copy of one built once (building them reads
    the environment and any .env file, about 3 ms; each client gets its own copy because
    ``PersistentClient`` writes its path into the settings it is given)."""
    return _base_settings().model_copy()


@functools.lru_cache(maxsize=1)
def _base_settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False, allow_reset=False)


class _SharedExclusive:
    """A lock held shared by many or exclusive by one; a waiting exclusive holder goes
    before new shared ones (so that a steady stream of calls cannot starve it). Not
    reentrant: a shared holder must not take it again."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                if not self._shared:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


#: Chroma's calls and this module's own SQLite access to an embedded folder never overlap.
#: Chroma reaches ``chroma.sqlite3`` through the SQLite library built into its Rust core;
#: :class:`ChromaFiles` through Python's ``sqlite3``, another copy of SQLite in the same
#: process. Two copies do not see each other's locks, so a VACUUM by one while the other
#: writes corrupts the database ("database disk image is malformed": reproduced with one
#: namespace forgetting while three others wrote, on its first forget). Every Chroma call
#: of the package holds this lock shared (:func:`chroma_call`, :func:`guarded`), the
#: direct access exclusive; one lock for the process, since direct access is rare
#: (opening, forgetting, dropping) and short.
FILES_LOCK = _SharedExclusive()


def chroma_call() -> Any:
    """The context every call into an embedded Chroma runs in (see :data:`FILES_LOCK`)."""
    return FILES_LOCK.shared()


class _Guarded:
    """A Chroma collection whose every method call runs inside :func:`chroma_call`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with FILES_LOCK.shared():
                return attr(*args, **kwargs)
        return call


def guarded(collection: Any) -> Any:
    """``collection`` with each method call held apart from the direct file access."""
    return _Guarded(collection)


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
        with _CLIENTS_LOCK, chroma_call():
            client = chromadb.PersistentClient(path=str(path), settings=_settings())
    except Exception as exc:  # chroma raises many kinds; name the path
        raise StorageError(f"cannot open embedded Chroma at {path}: {exc}") from exc
    _index_once(Path(path) / "chroma.sqlite3")
    return client


#: ``(path, device, inode)`` of the embedded databases this process gave their lookup
#: indexes (:meth:`ChromaFiles.add_lookup_indexes`), or found it could not.
_INDEXED: set[tuple[str, int, int]] = set()
_INDEXED_LOCK = threading.Lock()


def _index_once(sqlite_path: Path) -> None:
    """:meth:`ChromaFiles.add_lookup_indexes` once per database file and process."""
    try:
        st = sqlite_path.stat()
    except OSError:
        return
    key = (str(sqlite_path.resolve()), st.st_dev, st.st_ino)
    with _INDEXED_LOCK:
        if key in _INDEXED:
            return
        ChromaFiles(sqlite_path).add_lookup_indexes()
        _INDEXED.add(key)  # also when it could not: said once, then Chroma works without


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
        with _CLIENTS_LOCK, chroma_call():
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


#: Chroma releases whose embedded files (SQLite tables, HNSW layout) this module was
#: tested with; pyproject.toml pins the same range.
TESTED_CHROMA = ((1, 0), (1, 6))
_EXPECTED_TABLES = {"embeddings_queue": {"topic", "id", "metadata"},
                    "segments": {"id", "scope", "collection"}, "collections": {"id", "name"},
                    "collection_metadata": {"collection_id", "key", "str_value"}}

#: Indexes this package adds to an embedded Chroma's database: ``(name, table, columns)``.
#: Chroma's tables have none on these columns, yet its every write and read looks a
#: collection's log records up by topic (``embeddings_queue``: read from the collection's
#: offset, then purged below it) and its segments by collection, as does :class:`ChromaFiles`;
#: without them each of these scanned every collection's rows, so opening and writing a
#: namespace slowed down with the number of namespaces in the folder (81 ms per new
#: namespace at 2,700 namespaces, 34 ms with the indexes).
LOOKUP_INDEXES = (("synapse_embeddings_queue_topic", "embeddings_queue", ("topic", "seq_id")),
                  ("synapse_segments_collection", "segments", ("collection",)))


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

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        """A connection of Python's ``sqlite3`` to the database, with every Chroma call of
        the process held off meanwhile (:data:`FILES_LOCK`)."""
        with FILES_LOCK.exclusive():
            con = self._connect()
            try:
                yield con
            finally:
                con.close()

    def _connect(self) -> Any:
        import sqlite3

        con = sqlite3.connect(str(self.path), timeout=30, isolation_level=None)
        con.execute("PRAGMA busy_timeout = 30000")
        return con

    def namespaces(self) -> list[str] | None:
        """The namespaces this package stored in the database, read from Chroma's collection
        metadata table in one query (the client's ``list_collections`` builds every
        collection: seconds at 10,000 namespaces); None when the private schema cannot be
        used (:meth:`schema_problem`) and the client must list them."""
        if not self.path.is_file():
            return []
        with self._connection() as con:
            problem = self.schema_problem(con)
            if problem is not None:
                logger.info("namespaces listed through the client: %s", problem)
                return None
            rows = con.execute(
                "SELECT DISTINCT n.str_value FROM collection_metadata n JOIN collection_metadata l"
                " ON l.collection_id = n.collection_id AND l.key = 'library' AND l.str_value = ?"
                " WHERE n.key = 'namespace' AND n.str_value IS NOT NULL", (LIBRARY,)).fetchall()
        return sorted(r[0] for r in rows)

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

    def add_lookup_indexes(self) -> bool:
        """Create the :data:`LOOKUP_INDEXES` that the database lacks (what an existing
        folder gets at its first open by this version). An index changes no row and no
        answer of a query, only how SQLite finds the rows; Chroma's own migrations ignore
        it (a migration that rebuilds a table drops it, and the next open adds it again).
        Returns whether they are all there; False, logged, outside the tested Chroma
        range or when the database refuses (a read-only folder): Chroma then works
        without them, only slower with many namespaces."""
        import sqlite3

        try:
            with self._connection() as con:
                problem = self.schema_problem(con)
                if problem:
                    logger.warning("not indexing Chroma's tables: %s", problem)
                    return False
                have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
                for name, table, columns in LOOKUP_INDEXES:
                    if name in have:
                        continue
                    cols = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
                    if not set(columns) <= cols:
                        logger.warning("not indexing Chroma's table %s: it lacks %s", table,
                                       sorted(set(columns) - cols))
                        return False
                    con.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({', '.join(columns)})")
        except sqlite3.Error as exc:
            logger.warning("cannot index Chroma's tables in %s (it works without, slower with "
                           "many namespaces): %s", self.path, exc)
            return False
        return True

    def vector_segments_by_name(self, names: Sequence[str]) -> dict[str, Path]:
        """``{collection name: HNSW folder}`` for the named collections that have one."""
        import sqlite3

        try:
            with self._connection() as con:
                problem = self.schema_problem(con)
                if problem:
                    logger.warning("cannot check Chroma's index folders: %s", problem)
                    return {}
                marks = ",".join("?" * len(names))
                rows = con.execute(f"SELECT s.id, c.name FROM segments s JOIN collections c ON "
                                   f"s.collection = c.id WHERE s.scope = 'VECTOR' AND c.name IN "
                                   f"({marks})", list(names)).fetchall()
        except sqlite3.Error as exc:
            logger.warning("cannot list Chroma's index folders in %s: %s", self.path, exc)
            return {}
        return {name: self.path.parent / str(seg) for seg, name in rows}

    def vector_segments(self, collection_ids: Sequence[str]) -> list[Path]:
        import sqlite3

        try:
            with self._connection() as con:
                problem = self.schema_problem(con)
                if problem:
                    logger.warning("cannot find Chroma's index folders: %s", problem)
                    return []
                marks = ",".join("?" * len(collection_ids))
                rows = con.execute(f"SELECT id FROM segments WHERE scope = 'VECTOR' AND "
                                   f"collection IN ({marks})", list(collection_ids)).fetchall()
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
            with self._connection() as con:
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
            with self._connection() as con:
                self._vacuum(con)
        except sqlite3.Error as exc:
            raise StorageError(f"could not vacuum {self.path}: {exc}") from exc


#: The ``library`` metadata of this package's collections (beside others in one Chroma).
LIBRARY = "synapse-integrations"


def has_namespace(client: Any, namespace: str) -> bool:
    """Whether this Chroma holds the namespace's collections: one lookup by name, where
    :func:`list_namespaces` reads every collection's metadata (seconds at 10,000
    namespaces)."""
    from chromadb.errors import NotFoundError

    try:
        with chroma_call():
            client.get_collection(collection_name(namespace, "active"))
    except (NotFoundError, ValueError):  # ValueError: Chroma releases before NotFoundError
        return False
    return True


def list_namespaces(client: Any) -> list[str]:
    """Namespaces that have collections in this Chroma (read from collection metadata)."""
    out = set()
    with chroma_call():
        collections = client.list_collections()
    for col in collections:
        meta = getattr(col, "metadata", None) or {}
        if meta.get("library") == LIBRARY and "namespace" in meta:
            out.add(meta["namespace"])
    return sorted(out)

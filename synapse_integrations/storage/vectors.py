"""A namespace's vectors in Chroma: :class:`ChromaVectors`, its two collections and the
record of what it forgot.

Each namespace owns two collections: ``active`` (what retrieval searches) and ``archive``
(dormant nodes moved out of the active graph, restorable), plus ``forgotten``
(:class:`Tombstones`, created at the first forget). Collection names are derived from a
hash of the namespace (:func:`~.chroma.collection_name`), so any namespace string maps to
a valid, private name; the namespace itself is kept in the collection metadata.

Embeddings are always passed explicitly: Chroma never embeds anything itself (its default
embedding function would try to download a model). Nothing here imports ``chromadb``:
these classes work on a client made by :mod:`.chroma`.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StorageError
from .chroma import LIBRARY, ChromaFiles, chroma_call, collection_name, guarded
from .hnsw import check_index, zero_hnsw_slack

# the chroma module's logger, as before the split into modules
logger = logging.getLogger(f"{__package__}.chroma")

__all__ = ["ChromaVectors", "Tombstones", "VectorCollection"]

_PAGE = 5000


def _clean_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    """Chroma accepts only str/int/float/bool values (and not None)."""
    return {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))}


class VectorCollection:
    """Thin wrapper over one Chroma collection with explicit embeddings."""

    def __init__(self, client: Any, name: str, namespace: str, role: str) -> None:
        self.name = name
        try:
            with chroma_call():
                self._col = guarded(client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={"namespace": namespace, "role": role, "library": LIBRARY},
                ))
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
            with chroma_call():
                if create:
                    col = self.client.get_or_create_collection(
                        self.name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}},
                        metadata={"namespace": self.namespace, "role": "forgotten",
                                  "library": LIBRARY})
                else:
                    col = self.client.get_collection(self.name, embedding_function=None)
            self._col = guarded(col)
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
            with chroma_call():
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
                with chroma_call():
                    self.client.delete_collection(name)
            except Exception as exc:  # already gone is fine; anything else is not
                if not _missing(exc):
                    raise StorageError(f"cannot delete Chroma collection {name}: {exc}") from exc
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        files = self._files()
        if files is not None:
            files.vacuum()

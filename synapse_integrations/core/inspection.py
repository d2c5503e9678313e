"""The facade's reads that rank nothing: nodes, counts, the live graph, events, plain
dense search and the retrieval pipeline one stage at a time; a mixin of
:class:`~synapse_integrations.Synapse`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..storage.chroma import (
    ChromaFiles,
    close_client,
    list_namespaces,
    persistent_client,
)
from .retrieval.pipeline import RetrievalSteps
from .state.validity import chain, interval

__all__ = ["Inspection"]


class Inspection:
    """Inspection (see the module docstring). The engine provides ``_lock``,
    ``_open_state``, ``_read_state``, its retriever and its event bus."""

    _events: Any
    _lock: Any
    _retriever: Any

    def search_vectors(self, q: np.ndarray, k: int, *, kind: str | None = None
                       ) -> tuple[list[str], np.ndarray]:
        """Plain dense search: the ``k`` active nodes nearest to the embedding ``q`` (Chroma
        cosine), optionally only episodes or concepts (``kind``). Returns ids and cosines,
        best first. This is the vector-only baseline the benchmark compares against."""
        if kind not in (None, "episode", "concept"):
            raise InvalidInputError(f"kind must be None, 'episode' or 'concept', got {kind!r}")
        with self._lock:
            return self._open_state().vectors.active.query(q, k, where={"kind": kind} if kind else None)

    @contextmanager
    def inspect_retrieval(self) -> Iterator[RetrievalSteps]:
        """Hold the memory and step through the retrieval pipeline one stage at a time
        (triggers, then the model): for benchmarks and explanations. Reads only.

        >>> with mem.inspect_retrieval() as steps:                  # doctest: +SKIP
        ...     query = steps.query("Who came skiing?", vector, mem.config)
        ...     activation = steps.activate(query, mem.config)
        """
        with self._lock:
            yield RetrievalSteps(self._open_state(), self._retriever)

    def get(self, node_id: str, *, include_archived: bool = False) -> dict[str, Any]:
        """A node's attributes (``id``, ``kind``, ``text``, ...); archived nodes too when
        ``include_archived`` (with ``"archived": True``). :class:`NodeNotFoundError` if
        there is no such node."""
        with self._lock:
            return self._read_state().record(node_id, include_archived=include_archived)

    def contains(self, node_id: str) -> bool:
        """``node_id`` is in this memory (active or archived)."""
        with self._lock:
            return self._read_state().knows(node_id)

    def episodes(self, *, include_archived: bool = True) -> list[dict[str, Any]]:
        """The episodes as ``{"id", "text", "speaker", "ts", "seq", "metadata", ...}`` dicts
        in ingestion order (archived ones included unless asked otherwise)."""
        with self._lock:
            return self._read_state().episodes(include_archived=include_archived)

    def history(self, node_id: str) -> list[dict[str, Any]]:
        """The versions of a memory, oldest first: each one's record (as :meth:`get`, with
        archived versions marked) plus ``valid_from`` and ``valid_until`` (event times in
        epoch seconds; ``valid_until`` None for the version that holds now). A memory
        never updated is its own history. :class:`NodeNotFoundError` if there is no such
        node.

        >>> [v["text"] for v in mem.history(new_id)]                 # doctest: +SKIP
        ['I live in Porto.', 'I live in Lisbon now.']
        """
        with self._lock:
            state = self._read_state()
            state.any_node(node_id)  # NodeNotFoundError

            def node_of(i: str) -> dict[str, Any] | None:
                return state.any_node(i) if state.knows(i) else None

            out = []
            for i in chain(node_of, node_id):
                rec = state.record(i, include_archived=True)
                rec["valid_from"], rec["valid_until"] = interval(rec)
                out.append(rec)
            return out

    def stats(self) -> dict[str, int]:
        """Counts of nodes by kind, edges by kind, archived nodes, pending turns, windows."""
        with self._lock:
            return self._read_state().stats()

    @property
    def graph(self) -> Any:
        """The live NetworkX graph (read it; do not modify it)."""
        return self._read_state().graph.g

    def subscribe(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``callback(event)`` after each consolidation window
        (:class:`~synapse_integrations.types.WindowReport`) and each batched vector write
        (:class:`~synapse_integrations.types.VectorWrite`), on the writing thread. Returns
        a function that unsubscribes."""
        return self._events.subscribe(callback)

    @staticmethod
    def namespaces(path: str | Path) -> list[str]:
        """Namespaces stored in the embedded Chroma under ``path``."""
        found = ChromaFiles(Path(path) / "chroma" / "chroma.sqlite3").namespaces()
        if found is not None:
            return found
        client = persistent_client(Path(path) / "chroma")
        try:
            return list_namespaces(client)
        finally:
            close_client(client)

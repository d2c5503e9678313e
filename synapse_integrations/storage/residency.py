"""How much of the embedded Chroma stays loaded, and giving it back: what
:class:`~synapse_integrations.pool.EnginePool` needs to keep many namespaces within a
process's descriptors and memory (see :func:`.chroma.close_client` for why it restarts
Chroma rather than asking it to unload a collection).
"""

from __future__ import annotations

from typing import Any

from .chroma import chroma_version

__all__ = ["INDEXES_PER_NAMESPACE", "embedded_index_capacity", "release_heap"]

_LIBC: Any = None  # the C library (False: none to be found), loaded on first use


#: Chroma collections, each with an HNSW index, that one namespace holds at most: ``active``,
#: ``archive`` and the record of forgotten ids (see :class:`.vectors.ChromaVectors`).
INDEXES_PER_NAMESPACE = 3


def embedded_index_capacity() -> int | None:
    """How many HNSW indexes an embedded Chroma started now keeps loaded, or None where
    this is not known (not Linux/macOS, or a Chroma without the Rust bindings).

    Chroma 1.x sizes that cache from the descriptor limit (``ulimit -n``), a fifth of it
    (each persisted index holds four files and a metadata file open), in
    ``RustBindingsAPI.__init__``; no setting changes it. In the releases we pin
    (:data:`.chroma.TESTED_CHROMA`), an index the cache *evicts* cannot be loaded again by the
    same process ("Error creating hnsw segment reader: Nothing found on disk": measured
    with 150 namespaces under ``ulimit -n 300``), so callers keep the indexes they load
    below this figure and free them by restarting the embedded Chroma
    (:func:`close_client` on every client of the folder) instead.

    >>> cap = embedded_index_capacity()
    >>> cap is None or cap >= 1
    True
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    if chroma_version()[:1] < (1,):
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    return max(1, soft // 5)


def release_heap() -> bool:
    """Give the process's free heap back to the operating system (glibc ``malloc_trim``;
    False where there is none). Stopping an embedded Chroma frees its indexes into the C
    heap of the threads that built them, and glibc keeps each thread's arena: without
    this, a server's RSS kept growing by about 3 MiB per namespace it ever opened although
    the memory was free."""
    import ctypes
    import ctypes.util

    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            _LIBC = False
    trim = getattr(_LIBC, "malloc_trim", None) if _LIBC else None
    if trim is None:
        return False
    trim(0)
    return True

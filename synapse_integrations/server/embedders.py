"""The embedders of a server: :func:`make_embedder` (by name, batching concurrent
requests' texts) and :class:`VectorHints` (vectors handed in with an import)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidInputError

__all__ = ["VectorHints", "make_embedder", "model_of"]


def make_embedder(name: str | None = None) -> Any:
    """The embedder for a server or an operator command: ``"minilm"`` (the packaged
    all-MiniLM-L6-v2, the default) or ``"hashing"`` (deterministic and model-free: for
    tests and demos, not semantic), with the texts of concurrent requests embedded
    together (:class:`~synapse_integrations.embeddings.BatchingEmbedder`)."""
    from ..embeddings import BatchingEmbedder, HashingEmbedder, MiniLMEmbedder

    if name in (None, "minilm"):
        return BatchingEmbedder(MiniLMEmbedder())
    if name == "hashing":
        return BatchingEmbedder(HashingEmbedder())
    raise InvalidInputError(f"embedder must be 'minilm' or 'hashing', got {name!r}")


class VectorHints:
    """An embedder that can be handed the vectors of some texts in advance.

    An import with vectors (``synapse import --with-vectors`` output) stores each turn
    with the vector it was exported with instead of embedding it again: inside
    ``with hints.preset({text: vector})`` (per thread), :meth:`embed_documents` answers
    those texts from the preset and embeds the others with the wrapped embedder.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dim = getattr(inner, "dim", None)
        self._local = threading.local()

    @contextlib.contextmanager
    def preset(self, vectors: Mapping[str, Any]) -> Iterator[None]:
        old = getattr(self._local, "preset", None)
        self._local.preset = dict(vectors)
        try:
            yield
        finally:
            self._local.preset = old

    def embed_documents(self, texts: Sequence[str]) -> Any:
        preset = getattr(self._local, "preset", None)
        texts = list(texts)
        if not preset:
            return self.inner.embed_documents(texts)
        missing = [t for t in texts if t not in preset]
        fresh = iter(np.asarray(self.inner.embed_documents(missing), dtype=np.float64)
                     if missing else ())
        return np.stack([np.asarray(preset[t], dtype=np.float64) if t in preset else next(fresh)
                         for t in texts])

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def model_of(embedder: Any) -> Any:
    """The embedder under the service's wrappers (:class:`VectorHints`, batching)."""
    while hasattr(embedder, "inner"):
        embedder = embedder.inner
    return embedder

"""Every embedder the engine uses goes through :func:`as_embedder`, which wraps it so that
what comes out is always a float32 matrix of unit rows with the right dimension and no
NaN/inf (or an :class:`~synapse_integrations.errors.EmbeddingError` saying what was wrong).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import EmbeddingError, InvalidTypeError
from .minilm import MiniLMEmbedder

__all__ = ["CheckedEmbedder", "as_embedder"]


class CheckedEmbedder:
    """Wraps any embedder; validates shape and values and returns unit float32 rows."""

    def __init__(self, inner: Any, dim: int | None = None) -> None:
        if not (callable(getattr(inner, "embed_documents", None))
                and callable(getattr(inner, "embed_query", None))):
            raise InvalidTypeError(
                f"embedder must have embed_documents() and embed_query() (a LangChain "
                f"Embeddings works); got {type(inner).__name__}"
            )
        self.inner = inner
        self.dim = dim if dim is not None else getattr(inner, "dim", None)

    def _check(self, arr: Any, n: int) -> np.ndarray:
        try:
            m = np.asarray(arr, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise EmbeddingError(f"embedder returned something that is not numeric: {exc}") from exc
        if m.ndim != 2 or m.shape[0] != n:
            raise EmbeddingError(f"embedder returned shape {m.shape}, expected ({n}, dim)")
        if self.dim is None:
            self.dim = int(m.shape[1])
        if m.shape[1] != self.dim:
            raise EmbeddingError(
                f"embedding dimension mismatch: got {m.shape[1]}, this memory uses {self.dim}"
            )
        if not np.all(np.isfinite(m)):
            raise EmbeddingError("embedder returned NaN or infinite values")
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        if np.any(norms == 0):
            raise EmbeddingError("embedder returned an all-zero vector (cannot normalise)")
        return (m / norms).astype(np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return self._check(self.inner.embed_documents(texts), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._check([self.inner.embed_query(text)], 1)[0]


def as_embedder(embedder: Any | None = None, *, dim: int | None = None) -> CheckedEmbedder:
    """The embedder the engine uses: ``None`` means the packaged MiniLM."""
    if isinstance(embedder, CheckedEmbedder):
        if dim is not None and embedder.dim not in (None, dim):
            raise EmbeddingError(f"embedder dimension {embedder.dim} != expected {dim}")
        return embedder
    inner = MiniLMEmbedder() if embedder is None else embedder
    return CheckedEmbedder(inner, dim=dim if dim is not None else getattr(inner, "dim", None))

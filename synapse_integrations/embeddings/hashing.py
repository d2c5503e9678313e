"""A deterministic, model-free embedder for tests and benchmarks.

:class:`HashingEmbedder` gives every word a fixed random unit vector (seeded by its CRC32)
and embeds a text as the normalised sum of its words' vectors plus a little noise seeded
by the whole text. Texts that share words are close, as with a sentence encoder, and the
same name always embeds the same. It is not a semantic model: use it to test code paths
and to measure cost (``synapse bench perf`` builds its 100,000-turn memories with it),
never to judge retrieval quality.

>>> emb = HashingEmbedder(dim=8)
>>> v = emb.embed_query("Dana went skiing")
>>> round(float((v * v).sum()), 6), v.shape
(1.0, (8,))
>>> bool(emb.embed_query("Dana skiing") @ v > emb.embed_query("tax forms due") @ v)
True
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

__all__ = ["HashingEmbedder"]


class HashingEmbedder:
    """Deterministic, model-free embedder for synthetic benchmark memories.

    Each lower-cased word gets a fixed random unit vector (seeded by its CRC32); a text's
    embedding is the sum of its words' vectors plus ``noise`` times a random unit vector
    seeded by the whole text, normalised. Texts sharing words are close, as with a real
    sentence encoder; the same name always embeds the same (so concepts dedup). Not a
    semantic model: only for measuring cost.
    """

    def __init__(self, dim: int = 384, *, noise: float = 0.5) -> None:
        self.dim = dim
        self.noise = noise
        self._words: dict[str, np.ndarray] = {}

    def _unit(self, key: str, salt: int) -> np.ndarray:
        v = np.random.default_rng([zlib.crc32(key.encode("utf-8", "surrogatepass")), salt]).standard_normal(self.dim)
        return v / np.linalg.norm(v)

    def _word(self, w: str) -> np.ndarray:
        v = self._words.get(w)
        if v is None:
            v = self._words[w] = self._unit(w, 1)
        return v

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float64)
        for row, text in enumerate(texts):
            words = [w.strip(".,;:?!'\"()") for w in text.lower().split()]
            v = self.noise * self._unit(text, 2)
            for w in words:
                if w:
                    v = v + self._word(w)
            out[row] = v / np.linalg.norm(v)
        return out.astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]

"""Helpers shared by the safety tests and their worker processes (no pytest imports here).

:class:`HashEmbedder` is a tiny deterministic bag-of-words embedder (dim 384): identical
texts get identical vectors and texts sharing words are close, which is all the crash and
concurrency tests need, without loading the real model in every child process.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

DIM = 384
_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Deterministic hashed bag of words (plus a whole-text bucket), unit rows of dim 384."""

    dim = DIM

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float64)
        for tok in _WORD.findall(text.lower()) + [text]:
            h = hashlib.blake2b(tok.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            i = int.from_bytes(h[:4], "little") % DIM
            v[i] += 1.0 if h[4] & 1 else -1.0
        n = np.linalg.norm(v)
        return v / n if n else np.eye(DIM)[0]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, DIM))

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)

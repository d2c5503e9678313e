"""The dual trigger (section 3.2): lexical BM25 anchors and dense anchors.

The BM25 index (bm25s: about 20x faster per query than rank-bm25 here) is derived state:
it is rebuilt lazily, on the first query after the indexed texts changed.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence

import numpy as np

logger = logging.getLogger(__name__)

_TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of length >= 2 (the same rule for documents and queries)."""
    return _TOKEN_RE.findall(text.lower())


class BM25Index:
    """A lazily rebuilt BM25 index over (id, text) pairs.

    >>> idx = BM25Index()
    >>> idx.set({"a": "Kendall went skiing", "b": "a quiet evening at home"})
    >>> idx.query("who is Kendall?", k=5)[0]
    ['a']
    """

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._ids: list[str] = []
        self._model = None
        self._stale = True
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._texts)

    def set(self, texts: dict[str, str]) -> None:
        """Replace the whole indexed corpus."""
        with self._lock:
            self._texts = dict(texts)
            self._stale = True

    def add(self, doc_id: str, text: str) -> None:
        with self._lock:
            self._texts[doc_id] = text
            self._stale = True

    def remove(self, ids: Sequence[str]) -> None:
        with self._lock:
            for i in ids:
                self._texts.pop(i, None)
            self._stale = True

    def _build(self) -> None:
        import bm25s

        self._ids = list(self._texts)
        if not self._ids:
            self._model = None
        else:
            corpus = [tokenize(self._texts[i]) or ["\x00empty"] for i in self._ids]
            model = bm25s.BM25()
            model.index(corpus, show_progress=False)
            self._model = model
        self._stale = False

    def query(self, text: str, k: int) -> tuple[list[str], np.ndarray]:
        """Ids of the ``k`` best-scoring documents with a positive score, best first."""
        with self._lock:
            if self._stale:
                self._build()
            model = self._model
            ids = self._ids
        if model is None or k <= 0:
            return [], np.zeros(0)
        vocab = model.vocab_dict
        tokens = [t for t in tokenize(text) if t in vocab]
        if not tokens:
            return [], np.zeros(0)
        scores = np.asarray(model.get_scores(tokens), dtype=np.float64)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((top, -scores[top]))]
        top = top[scores[top] > 0]
        return [ids[i] for i in top], scores[top]

"""The dual trigger (section 3.2): lexical BM25 anchors and dense anchors.

The BM25 index (bm25s: about 20x faster per query than rank-bm25 here) is derived state:
it is rebuilt lazily, on the first query after the indexed texts changed.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence

from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

_TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")


#: English function words left out of the lexical index. In a small memory their IDF is
#: high ("is" may occur in two turns of six), so without this list "What is the name of
#: Sam's dog?" matches "Sam is learning the cello" on "is" and "the". Content words,
#: numbers and names are kept, and so are question words' answers (dates, places).
STOPWORDS = frozenset("""
a an and are as at be been being but by can could did do does doing done for from had has
have having he her here hers herself him himself his how i if in into is it its itself just
me my myself no nor not of off on once only or other our ours ourselves out over own same
she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves about above after again against
all am any because before below between both during each few further more most s t ll re ve
d m o y don isn wasn weren won aren didn doesn hasn haven
""".split())


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of length >= 2 without English function words (the same
    rule for documents and queries).

    >>> tokenize("What is the name of Sam's dog?")
    ['name', 'sam', 'dog']
    """
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in STOPWORDS]


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
        self._positions: tuple[Any, ...] | None = None  # (index, ids, positions, valid)

    def __len__(self) -> int:
        return len(self._texts)

    def documents(self) -> dict[str, str]:
        """A copy of the indexed corpus (id -> text)."""
        with self._lock:
            return dict(self._texts)

    def indexes(self, texts: Mapping[str, str]) -> bool:
        """True when the index holds exactly ``texts`` (id -> text)."""
        with self._lock:
            return self._texts == dict(texts)

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
        bm25s = _import_bm25s()
        self._ids = list(self._texts)
        if not self._ids:
            self._model = None
        else:
            corpus = [tokenize(self._texts[i]) or ["\x00empty"] for i in self._ids]
            model = bm25s.BM25()
            model.index(corpus, show_progress=False)
            self._model = model
        self._stale = False

    def scores_for(self, text: str, index: Mapping[str, int], n: int) -> np.ndarray:
        """The BM25 score of ``text`` against every indexed document, as an array of length
        ``n`` with document ``d`` at position ``index[d]`` (0 for positions no indexed
        document maps to). The id-to-position map is cached until the index or ``index``
        (by identity) changes, so a query costs one vectorised scoring pass.

        >>> idx = BM25Index()
        >>> idx.set({"a": "Kendall went skiing", "b": "a quiet evening at home"})
        >>> s = idx.scores_for("Kendall skiing", {"b": 0, "a": 1}, 2)
        >>> bool(s[0] == 0.0), bool(s[1] > 0.0)
        (True, True)
        """
        with self._lock:
            if self._stale:
                self._build()
            model, ids = self._model, self._ids
            cached = self._positions
            if cached is None or cached[0] is not index or cached[1] is not ids:
                pos = np.fromiter((index.get(i, -1) for i in ids), dtype=np.int64, count=len(ids))
                keep = (pos >= 0) & (pos < n)
                cached = self._positions = (index, ids, pos, keep)
        out = np.zeros(n)
        if model is None:
            return out
        vocab = model.vocab_dict
        tokens = [t for t in tokenize(text) if t in vocab]
        if not tokens:
            return out
        scores = np.asarray(model.get_scores(tokens), dtype=np.float64)
        _, _, pos, keep = cached
        out[pos[keep]] = scores[keep]
        return out

    def exclusive_share(self, text: str, index: Mapping[str, int], n: int,
                        eligible: np.ndarray) -> np.ndarray:
        """For each position of ``index`` (length ``n``): the share of the query's IDF mass
        carried by query tokens that this document alone contains among the ``eligible``
        positions (the turns, say). A token is exclusive when exactly one eligible
        document holds it; its IDF is computed over the eligible documents.

        >>> idx = BM25Index()
        >>> idx.set({"a": "order QM5521 arrived", "b": "order QM5522 arrived", "c": "hello"})
        >>> s = idx.exclusive_share("what about order QM5521?", {"a": 0, "b": 1, "c": 2}, 3,
        ...                         np.ones(3, dtype=bool))
        >>> bool(s[0] > 0.5), float(s[1]), float(s[2])
        (True, 0.0, 0.0)
        """
        with self._lock:
            if self._stale:
                self._build()
            model, ids = self._model, self._ids
            cached = self._positions
            if cached is None or cached[0] is not index or cached[1] is not ids:
                pos = np.fromiter((index.get(i, -1) for i in ids), dtype=np.int64, count=len(ids))
                keep = (pos >= 0) & (pos < n)
                cached = self._positions = (index, ids, pos, keep)
        out = np.zeros(n)
        if model is None:
            return out
        _, _, pos, keep = cached
        eligible = np.asarray(eligible, dtype=bool)
        vocab, postings = model.vocab_dict, model.scores
        total_docs = int(eligible.sum())
        mass = 0.0
        exclusive: list[tuple[int, float]] = []
        for token in dict.fromkeys(tokenize(text)):
            t = vocab.get(token)
            if t is None:
                continue
            docs = postings["indices"][postings["indptr"][t]:postings["indptr"][t + 1]]
            docs = docs[keep[docs]]
            where = pos[docs]
            where = where[eligible[where]]
            if where.size == 0:
                continue
            idf = float(np.log(1.0 + (total_docs - where.size + 0.5) / (where.size + 0.5)))
            mass += idf
            if where.size == 1:
                exclusive.append((int(where[0]), idf))
        for at, idf in exclusive:
            out[at] += idf / mass
        return out

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


def _import_bm25s() -> Any:
    """Import bm25s without letting it change logging: on import it sets its logger to
    DEBUG, which prints a line per index build wherever the root logger shows DEBUG (and
    overrode the level the CLI had set). The logger's previous level is put back."""
    log = logging.getLogger("bm25s")
    level = log.level
    import bm25s

    log.setLevel(level)
    return bm25s

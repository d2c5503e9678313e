"""The lexical index: BM25 over the memory's texts, updated in place as turns arrive.

A memory grows a turn at a time and is queried between writes. A static BM25 index
(bm25s, rank-bm25) must be rebuilt from the whole corpus after every change, which the
first query after each write paid (tens of milliseconds at a few hundred turns, growing
with the memory). This index keeps per-token postings that grow in place, so adding or
removing a document costs O(its tokens), and a query costs O(postings of its tokens).

Scores are bm25s's "lucene" variant exactly (tests compare against bm25s as the oracle):
``sum over the query's distinct terms t of idf(t) * tf / (k1 * (1 - b + b * dl /
avgdl) + tf)`` with ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``, k1 = 1.5, b = 0.75,
N, df and avgdl over the live documents; a document with no token counts as length 1
(bm25s's placeholder token). Removed documents are tombstones until a compaction.
A query term counts once however often the question says it: terms collapse forms ("I
*went* ... *going* to study" is "go" twice), and a light verb said twice must not outweigh
the question's one rare word.

>>> idx = BM25Index()
>>> idx.set({"a": "Kendall went skiing", "b": "a quiet evening at home"})
>>> idx.query("who is Kendall?", k=5)[0]
['a']
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from ..text.tokens import stem, terms, tokenize

__all__ = ["BM25Index"]

K1 = 1.5
B = 0.75
_EMPTY = "\x00empty"


class _Postings:
    """Growable (slot, term frequency) arrays of one token."""

    __slots__ = ("slots", "tfs", "n")

    def __init__(self) -> None:
        self.slots = np.empty(4, dtype=np.int64)
        self.tfs = np.empty(4, dtype=np.float64)
        self.n = 0

    def append(self, slot: int, tf: float) -> None:
        if self.n == self.slots.size:
            self.slots = np.resize(self.slots, 2 * self.n)
            self.tfs = np.resize(self.tfs, 2 * self.n)
        self.slots[self.n] = slot
        self.tfs[self.n] = tf
        self.n += 1


class BM25Index:
    """An incrementally updated BM25 index over (id, text) pairs (see the module)."""

    def __init__(self, stemming: bool = True) -> None:
        self._lock = threading.Lock()
        #: terms are Snowball stems ("moved" matches "move"); False: the tokens as written
        self.stemming = stemming
        self._version = 0  # counts the changes to the corpus (what a lookup cache keys on)
        self._reset()

    def _terms(self, text: str) -> list[str]:
        return terms(text) if self.stemming else tokenize(text)

    def _term(self, token: str) -> str:
        return stem(token) if self.stemming else token

    def _reset(self) -> None:
        self._texts: dict[str, str] = {}
        self._slot: dict[str, int] = {}
        self._ids: list[str | None] = []            # slot -> id (None: removed)
        self._doc_terms: list[tuple[np.ndarray, np.ndarray] | None] = []  # token ids, tfs
        self._len = np.zeros(16)                   # slot -> document length (0: removed)
        self._alive = np.zeros(16, dtype=bool)
        self._vocab: dict[str, int] = {}
        self._df: list[int] = []
        self._post: list[_Postings] = []
        self._total_len = 0.0
        self._live = 0
        self._positions: tuple[Any, ...] | None = None  # (index, slots resolved, positions)
        # the last answer of _slot_positions: (index, (its size, n, version), positions)
        self._answer: tuple[Any, tuple[int, int, int], np.ndarray] | None = None
        self._version += 1

    def __len__(self) -> int:
        return len(self._texts)

    # -- contents ---------------------------------------------------------------------------
    def documents(self) -> dict[str, str]:
        """A copy of the indexed corpus (id -> text)."""
        with self._lock:
            return dict(self._texts)

    def indexes(self, texts: Mapping[str, str]) -> bool:
        """True when the index holds exactly ``texts`` (id -> text)."""
        with self._lock:
            return self._texts == dict(texts)

    def set(self, texts: Mapping[str, str]) -> None:
        """Replace the whole indexed corpus."""
        with self._lock:
            self._reset()
            for doc_id, text in texts.items():
                self._add(doc_id, text)

    def add(self, doc_id: str, text: str) -> None:
        """Index (or re-index) one document."""
        with self._lock:
            if doc_id in self._slot:
                self._remove(doc_id)
            self._add(doc_id, text)

    def remove(self, ids: Sequence[str]) -> None:
        """Drop documents (unknown ids are ignored)."""
        with self._lock:
            for doc_id in ids:
                self._remove(doc_id)
            if len(self._ids) > 64 and self._live < len(self._ids) // 2:
                self._compact()

    def _add(self, doc_id: str, text: str) -> None:
        tokens = self._terms(text) or [_EMPTY]
        counts = Counter(tokens)
        slot = len(self._ids)
        if slot == self._len.size:
            self._len = np.resize(self._len, 2 * slot)
            self._alive = np.resize(self._alive, 2 * slot)
        term_ids = np.empty(len(counts), dtype=np.int64)
        tfs = np.empty(len(counts), dtype=np.float64)
        for k, (token, tf) in enumerate(counts.items()):
            t = self._vocab.get(token)
            if t is None:
                t = self._vocab[token] = len(self._df)
                self._df.append(0)
                self._post.append(_Postings())
            self._df[t] += 1
            self._post[t].append(slot, tf)
            term_ids[k], tfs[k] = t, tf
        self._ids.append(doc_id)
        self._doc_terms.append((term_ids, tfs))
        self._len[slot] = len(tokens)
        self._alive[slot] = True
        self._slot[doc_id] = slot
        self._texts[doc_id] = text
        self._total_len += len(tokens)
        self._live += 1
        self._version += 1

    def _remove(self, doc_id: str) -> None:
        slot = self._slot.pop(doc_id, None)
        if slot is None:
            return
        term_ids, _ = self._doc_terms[slot]  # type: ignore[misc]
        for t in term_ids.tolist():
            self._df[t] -= 1
        self._total_len -= self._len[slot]
        self._len[slot] = 0.0
        self._alive[slot] = False
        self._ids[slot] = None
        self._doc_terms[slot] = None
        self._texts.pop(doc_id, None)
        self._live -= 1
        self._version += 1

    def _compact(self) -> None:
        texts = [(i, self._texts[i]) for i in self._ids if i is not None]
        self._reset()
        for doc_id, text in texts:
            self._add(doc_id, text)

    # -- scoring ----------------------------------------------------------------------------
    def _postings(self, token: str) -> tuple[np.ndarray, np.ndarray, int] | None:
        """Live (slots, tfs) of a token and its document frequency (None if absent)."""
        t = self._vocab.get(token)
        if t is None or self._df[t] <= 0:
            return None
        p = self._post[t]
        slots, tfs = p.slots[:p.n], p.tfs[:p.n]
        live = self._alive[slots]
        return slots[live], tfs[live], self._df[t]

    def _slot_scores(self, text: str) -> np.ndarray:
        """BM25 score of every slot (0 for removed ones and non-matching documents)."""
        out = np.zeros(len(self._ids))
        if not self._live:
            return out
        avgdl = self._total_len / self._live
        for token in dict.fromkeys(self._terms(text)):
            got = self._postings(token)
            if got is None:
                continue
            slots, tfs, df = got
            idf = math.log(1.0 + (self._live - df + 0.5) / (df + 0.5))
            out[slots] += idf * tfs / (K1 * ((1.0 - B) + B * self._len[slots] / avgdl) + tfs)
        return out

    def _slot_positions(self, index: Mapping[str, int], n: int) -> np.ndarray:
        """Slot -> position in ``index`` (-1 for none, for a removed document and for a
        position at or past ``n``), read-only. Cached while ``index`` is the same object:
        only slots not resolved yet are looked up again (``index`` only grows while it is
        the same object), and the answer itself is kept until ``index`` grows, ``n``
        changes or a document is added or removed (a query asks several times: the lexical
        trigger, the gate's coverage of each word, the exclusive tokens)."""
        key = (len(index), n, self._version)
        answer = self._answer
        if answer is not None and answer[0] is index and answer[1] == key:
            return answer[2]
        cached = self._positions
        ids = self._ids
        if cached is None or cached[0] is not index:  # every slot, in one pass
            pos = np.fromiter(map(index.get, ids, repeat(-1)), dtype=np.int64, count=len(ids))
        else:
            pos = cached[1]
            if pos.size < len(ids):
                pos = np.concatenate((pos, np.full(len(ids) - pos.size, -1, np.int64)))
            for s in np.flatnonzero(pos < 0).tolist():
                doc_id = ids[s]
                if doc_id is not None:
                    pos[s] = index.get(doc_id, -1)
        self._positions = (index, pos)
        pos = pos.copy()
        pos[(pos >= n) | ~self._alive[:pos.size]] = -1
        pos.flags.writeable = False
        self._answer = (index, key, pos)
        return pos

    def has(self, token: str) -> bool:
        """Whether some live document holds ``token``.

        >>> idx = BM25Index()
        >>> idx.set({"a": "ski trip"})
        >>> idx.has("ski"), idx.has("skis"), idx.has("skier")
        (True, True, False)
        """
        with self._lock:
            t = self._vocab.get(self._term(token))
            return t is not None and self._df[t] > 0

    def idf(self, token: str) -> float:
        """BM25's IDF of a (lower-case) token in the live corpus; a token no document holds
        gets the IDF of a token held by none (the largest).

        >>> idx = BM25Index()
        >>> idx.set({"a": "ski trip", "b": "ski lesson", "c": "quiet evening"})
        >>> idx.idf("ski") < idx.idf("trip") < idx.idf("unseen")
        True
        """
        with self._lock:
            t = self._vocab.get(self._term(token))
            df = self._df[t] if t is not None and self._df[t] > 0 else 0
            return math.log(1.0 + (self._live - df + 0.5) / (df + 0.5))

    def scores_for(self, text: str, index: Mapping[str, int], n: int) -> np.ndarray:
        """The BM25 score of ``text`` against every indexed document, as an array of length
        ``n`` with document ``d`` at position ``index[d]`` (0 for positions no indexed
        document maps to).

        >>> idx = BM25Index()
        >>> idx.set({"a": "Kendall went skiing", "b": "a quiet evening at home"})
        >>> s = idx.scores_for("Kendall skiing", {"b": 0, "a": 1}, 2)
        >>> bool(s[0] == 0.0), bool(s[1] > 0.0)
        (True, True)
        """
        with self._lock:
            scores = self._slot_scores(text)
            pos = self._slot_positions(index, n)
        out = np.zeros(n)
        keep = pos >= 0
        out[pos[keep]] = scores[keep]
        return out

    def query(self, text: str, k: int) -> tuple[list[str], np.ndarray]:
        """Ids of the ``k`` best-scoring documents with a positive score, best first (ties:
        the earlier indexed first)."""
        if k <= 0:
            return [], np.zeros(0)
        with self._lock:
            scores = self._slot_scores(text)
            ids = list(self._ids)
        if not scores.size:
            return [], np.zeros(0)
        k = min(k, scores.size)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((top, -scores[top]))]
        top = top[scores[top] > 0]
        return [ids[i] for i in top], scores[top]  # type: ignore[misc]

    def coverage(self, tokens: Sequence[str], index: Mapping[str, int], n: int,
                 eligible: np.ndarray) -> tuple[np.ndarray, list[str], float]:
        """For each position of ``index`` (length ``n``): the share of the IDF mass of
        ``tokens`` that the document contains, IDF computed over the ``eligible``
        positions; tokens no eligible document holds are left out. Returns the shares, the
        tokens that counted and their IDF mass. Ineligible positions get 0.

        >>> idx = BM25Index()
        >>> idx.set({"a": "Mel ran a charity race", "b": "the race was fun", "c": "hello"})
        >>> cov, used, _ = idx.coverage(["charity", "race", "hamster"], {"a": 0, "b": 1, "c": 2}, 3,
        ...                          np.ones(3, dtype=bool))
        >>> [round(float(x), 2) for x in cov], used
        ([1.0, 0.32, 0.0], ['charity', 'race'])
        """
        out = np.zeros(n)
        used: list[str] = []
        mass = 0.0
        for token, where, idf in self._held_by(tokens, index, n, eligible):
            out[where] += idf
            mass += idf
            used.append(token)
        return (out / mass if mass > 0 else out), used, mass

    def holders(self, token: str, index: Mapping[str, int], n: int,
                eligible: np.ndarray) -> tuple[np.ndarray, float] | None:
        """The ``eligible`` positions of ``index`` whose document holds ``token`` (its
        term: any form the index matches), ascending, and the token's IDF over the
        eligible positions; None when none holds it. What :meth:`coverage` of ``[token]``
        says, without an array over every position: the one word's coverage is its IDF
        at these positions, 0 elsewhere.

        >>> idx = BM25Index()
        >>> idx.set({"a": "Mel ran a charity race", "b": "the race was fun", "c": "hello"})
        >>> where, idf = idx.holders("races", {"a": 0, "b": 1, "c": 2}, 3, np.ones(3, dtype=bool))
        >>> where.tolist(), round(idf, 3)  # ln(1 + (3 - 2 + 0.5) / (2 + 0.5))
        ([0, 1], 0.47)
        >>> idx.holders("hamster", {"a": 0, "b": 1, "c": 2}, 3, np.ones(3, dtype=bool)) is None
        True
        """
        held = self._held_by([token], index, n, eligible)
        if not held:
            return None
        _, where, idf = held[0]
        return np.sort(where), idf

    def _held_by(self, tokens: Sequence[str], index: Mapping[str, int], n: int,
                 eligible: np.ndarray) -> list[tuple[str, np.ndarray, float]]:
        """``(token, positions, idf)`` for each distinct token some ``eligible`` position of
        ``index`` holds: the positions that hold it, and its IDF over the eligible ones."""
        eligible = np.asarray(eligible, dtype=bool)
        total_docs = int(eligible.sum())
        out = []
        with self._lock:
            pos = self._slot_positions(index, n)
            by_term: dict[str, str] = {}  # one entry per term ("move", "moved": one)
            for token in tokens:
                by_term.setdefault(self._term(token), token)
            for term, token in by_term.items():
                got = self._postings(term)
                if got is None:
                    continue
                where = pos[got[0]]
                where = where[where >= 0]
                where = where[eligible[where]]
                if where.size:
                    out.append((token, where,
                                math.log(1.0 + (total_docs - where.size + 0.5) / (where.size + 0.5))))
        return out

    def exclusive_share(self, text: str, index: Mapping[str, int], n: int,
                        eligible: np.ndarray) -> np.ndarray:
        """For each position of ``index`` (length ``n``): the share of the query's IDF mass
        carried by query tokens that this document alone contains among the ``eligible``
        positions (the turns, say). A token is exclusive when exactly one eligible
        document holds its term, and holds the token as written; its IDF is computed over
        the eligible documents.

        >>> idx = BM25Index()
        >>> idx.set({"a": "order QM5521 arrived", "b": "order QM5522 arrived", "c": "hello"})
        >>> s = idx.exclusive_share("what about order QM5521?", {"a": 0, "b": 1, "c": 2}, 3,
        ...                         np.ones(3, dtype=bool))
        >>> bool(s[0] > 0.5), float(s[1]), float(s[2])
        (True, 0.0, 0.0)
        """
        out = np.zeros(n)
        held = self._held_by(tokenize(text), index, n, eligible)
        mass = sum(idf for _, _, idf in held)
        exclusive = [(int(where[0]), token, idf) for token, where, idf in held if where.size == 1]
        if exclusive and self.stemming:
            # evidence is the token as written: "live" singles out no turn that says "lived"
            # (in a small memory every stem is rare); codes and numbers are never stemmed
            exclusive = [(at, token, idf) for at, token, idf in exclusive
                         if token in tokenize(self._text_at(index, n, at))]
        for at, _, idf in exclusive:
            out[at] += idf / mass
        return out

    def _text_at(self, index: Mapping[str, int], n: int, at: int) -> str:
        """The indexed text at position ``at`` of ``index`` ("" if none)."""
        with self._lock:
            slots = np.flatnonzero(self._slot_positions(index, n) == at)
            doc_id = self._ids[int(slots[0])] if slots.size else None
            return self._texts.get(doc_id, "") if doc_id is not None else ""

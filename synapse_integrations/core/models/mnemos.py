"""mnemos: BFS energy spreading over a cosine graph, and affective routing (seed paper 004,
sections 3.3, 3.5, 5.2, 5.3).

Spreading (3.5). The memories are linked where their cosine is at least ``threshold``
(0.6; the weight of a link is its cosine). The closest memory to the query is the seed; it
gets energy ``E0 = 1``; energy then moves outwards breadth-first, a node passing
``E * (1 - delta) * w`` to each neighbour (``delta = 0.2``), for at most ``max_hops`` hops;
every node whose accumulated energy is at least 0.3 is returned.

How the paper's numbers pin the BFS down (its 4-node chain, 5.3, edge weight 0.8): a node
accumulates everything it receives, including energy sent back from later hops
(``delta = 0.2``: the seed ends at ``1 + 0.64 * 0.64 = 1.41``); it passes on only the
energy it *arrived* with (not the total), once; and nothing leaves the third hop
(``delta = 0``: the last node sends nothing back, 0.64 stays 0.64). With these rules the
chain gives the paper's [1.41, 0.90, 0.41, 0.26] and [1.64, 1.31, 0.64, 0.51]
(:func:`bfs_energy`, tested). DECISION: where several nodes of one hop reach a new node,
it arrives with the largest of their transfers (the paper's chain never says; the mnemos
queue takes whichever parent it happened to dequeue first).

Affective routing (3.3). Each text is tagged with a cognitive state ``(valence, arousal,
complexity)`` in ``[-1, 1] x [0, 1] x [0, 1]``; a candidate scores
``0.7 * sim + 0.3 * (1 - d_state)``, ``d_state`` the Euclidean distance between the
query's state and the candidate's divided by its maximum ``sqrt(6)``. Tags come from a
:class:`AffectTagger`: :class:`LexiconAffectTagger` (offline: the VADER lexicon plus the
documented rules below) or :class:`LLMAffectTagger` (any LangChain chat model).

>>> import numpy as np
>>> indptr, indices, w = np.array([0, 1, 3, 5, 6]), np.array([1, 0, 2, 1, 3, 2]), np.full(6, 0.8)
>>> bfs_energy(indptr, indices, w, 0, decay=0.2, max_hops=3)[0].round(2)
array([1.41, 0.9 , 0.41, 0.26])
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ...errors import InvalidInputError, InvalidTypeError, MissingDependencyError
from ..text.lexicon import SUBORDINATORS, URGENT_WORDS
from . import _params as prm
from ._neighbors import NeighborIndex, neighbor_table
from .base import Activation, Query

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ...config import SynapseConfig
    from ..graph.graph import Compiled as GraphView

__all__ = [
    "PIECE_WORDS",
    "STATE_MAX_DISTANCE",
    "AffectTagger",
    "LLMAffectTagger",
    "LexiconAffectTagger",
    "MnemosModel",
    "affective_score",
    "affect_tag",
    "as_tagger",
    "vader_pieces",
    "bfs_energy",
    "bfs_energy_reference",
    "cosine_graph",
    "state_distance",
]

logger = logging.getLogger(__name__)

#: The largest distance between two states: ``|(2, 1, 1)| = sqrt(6)`` (3.3).
STATE_MAX_DISTANCE = math.sqrt(6.0)

_TAG_CACHE_SIZE = 1_000_000


# --------------------------------------------------------------------------------------------
# the cosine graph and the BFS (3.5, 5.3)
# --------------------------------------------------------------------------------------------
def cosine_graph(index: np.ndarray, sim: np.ndarray, *,
                 threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The undirected graph ``i -- j`` where ``j`` is in ``i``'s neighbour table (or ``i``
    in ``j``'s) with cosine >= ``threshold``, as CSR arrays ``(indptr, indices, weight)``
    (neighbours sorted by index; weight: the cosine).

    With a table as wide as the graph is large this is every pair above the threshold
    (the paper); a narrower table caps the degree (the model's ``max_neighbors``).

    >>> idx = np.array([[1, 2], [0, 2], [0, 1]]); s = np.array([[0.9, 0.5], [0.9, 0.7], [0.5, 0.7]])
    >>> [a.tolist() for a in cosine_graph(idx, s, threshold=0.6)]
    [[0, 1, 3, 4], [1, 0, 2, 1], [0.9, 0.9, 0.7, 0.7]]
    """
    index = np.asarray(index, dtype=np.int64)
    sim = np.asarray(sim, dtype=np.float64)
    if index.shape != sim.shape or index.ndim != 2:
        raise InvalidInputError("index and sim must be 2-D arrays of the same shape")
    m, k = index.shape
    src = np.repeat(np.arange(m), k)
    dst, w = index.ravel(), sim.ravel()
    keep = (dst >= 0) & (w >= threshold)
    src, dst, w = src[keep], dst[keep], w[keep]
    both_src = np.concatenate([src, dst])
    both_dst = np.concatenate([dst, src])
    both_w = np.concatenate([w, w])
    code = both_src * m + both_dst
    order = np.lexsort((-both_w, code))  # by pair, strongest first
    code, both_w = code[order], both_w[order]
    first = np.ones(code.size, dtype=bool)
    first[1:] = code[1:] != code[:-1]
    code, both_w = code[first], both_w[first]
    rows, cols = code // max(m, 1), code % max(m, 1)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]).astype(np.int64)
    return indptr, cols.astype(np.int64), both_w


def _check_bfs(indptr: np.ndarray, indices: np.ndarray, weight: np.ndarray, seed: int,
               decay: float, max_hops: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    m = indptr.size - 1
    if m < 1 or indices.shape != weight.shape or indptr[-1] != indices.size:
        raise InvalidInputError("indptr, indices, weight must be CSR arrays of one graph")
    if not 0 <= int(seed) < m:
        raise InvalidInputError(f"seed must be a node index in [0, {m}), got {seed!r}")
    if not 0.0 <= decay <= 1.0:
        raise InvalidInputError(f"decay must be in [0, 1], got {decay!r}")
    if isinstance(max_hops, bool) or not isinstance(max_hops, (int, np.integer)) or max_hops < 0:
        raise InvalidInputError(f"max_hops must be an int >= 0, got {max_hops!r}")
    return indptr, indices, weight


def bfs_energy(indptr: np.ndarray, indices: np.ndarray, weight: np.ndarray, seed: int, *,
               energy: float = 1.0, decay: float = 0.2,
               max_hops: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Energy of every node after the BFS of 3.5 from ``seed`` (module docstring: the
    rules), and each reached node's parent (the node it arrived from; -1 for the seed and
    unreached nodes). One vectorised step per hop over the frontier's edges.

    Returns ``(energy, parent)``.
    """
    indptr, indices, weight = _check_bfs(indptr, indices, weight, seed, decay, max_hops)
    m = indptr.size - 1
    E = np.zeros(m)
    E[seed] = energy
    parent = np.full(m, -1, dtype=np.int64)
    visited = np.zeros(m, dtype=bool)
    visited[seed] = True
    frontier = np.array([seed], dtype=np.int64)
    arrived = np.array([float(energy)])
    for _ in range(max_hops):
        starts = indptr[frontier]
        counts = indptr[frontier + 1] - starts
        if counts.sum() == 0:
            break
        first = np.concatenate(([0], np.cumsum(counts)[:-1]))
        pos = np.arange(counts.sum()) - np.repeat(first - starts, counts)
        nbr = indices[pos]
        sender = np.repeat(frontier, counts)
        transfer = np.repeat(arrived, counts) * (1.0 - decay) * weight[pos]
        E += np.bincount(nbr, weights=transfer, minlength=m)
        new = ~visited[nbr]
        if not new.any():
            break
        nbr, sender, transfer = nbr[new], sender[new], transfer[new]
        # strongest transfer per new node, lowest sender on ties
        order = np.lexsort((sender, -transfer, nbr))
        nbr, sender, transfer = nbr[order], sender[order], transfer[order]
        head = np.ones(nbr.size, dtype=bool)
        head[1:] = nbr[1:] != nbr[:-1]
        frontier, arrived = nbr[head], transfer[head]
        parent[frontier] = sender[head]
        visited[frontier] = True
    return E, parent


def bfs_energy_reference(neighbors: dict[int, list[tuple[int, float]]], m: int, seed: int, *,
                         energy: float = 1.0, decay: float = 0.2,
                         max_hops: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """The same BFS hop by hop with Python lists (tests only); ``neighbors[i]`` lists
    ``(j, w)``."""
    E = [0.0] * m
    E[seed] = energy
    parent = [-1] * m
    visited = {seed}
    frontier = [(seed, energy)]
    for _ in range(max_hops):
        best: dict[int, tuple[float, int]] = {}
        for node, arrived in frontier:
            for j, w in neighbors.get(node, []):
                t = arrived * (1.0 - decay) * w
                E[j] += t
                if j not in visited:
                    cur = best.get(j)
                    if cur is None or t > cur[0] or (t == cur[0] and node < cur[1]):
                        best[j] = (t, node)
        if not best:
            break
        frontier = []
        for j in sorted(best):
            visited.add(j)
            parent[j] = best[j][1]
            frontier.append((j, best[j][0]))
    return np.array(E), np.array(parent, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# affective routing (3.3)
# --------------------------------------------------------------------------------------------
def state_distance(states: np.ndarray, query_state: Sequence[float]) -> np.ndarray:
    """``|s - q| / sqrt(6)`` for each row ``s`` of ``states`` (shape ``(m, 3)``): 0 for the
    same state, 1 for opposite corners of the state box.

    >>> state_distance(np.array([[1.0, 1.0, 1.0], [-1.0, 0.0, 0.0]]), (-1.0, 0.0, 0.0))
    array([1., 0.])
    """
    s = np.asarray(states, dtype=np.float64).reshape(-1, 3)
    q = np.asarray(query_state, dtype=np.float64).reshape(3)
    return np.linalg.norm(s - q, axis=1) / STATE_MAX_DISTANCE


def affective_score(sim: np.ndarray, states: np.ndarray, query_state: Sequence[float], *,
                    weight_similarity: float = 0.7, weight_state: float = 0.3) -> np.ndarray:
    """Eq. 1 of 3.3: ``0.7 * sim + 0.3 * (1 - d_state)``, the cosine clipped to [0, 1].

    >>> affective_score(np.array([0.5]), np.array([[0.0, 0.5, 0.5]]), (0.0, 0.5, 0.5))
    array([0.65])
    """
    sim = np.clip(np.nan_to_num(np.asarray(sim, dtype=np.float64)), 0.0, 1.0)
    return weight_similarity * sim + weight_state * (1.0 - state_distance(states, query_state))


@runtime_checkable
class AffectTagger(Protocol):
    """Tags a text with its cognitive state ``(valence, arousal, complexity)``."""

    def tag(self, text: str) -> tuple[float, float, float]:
        ...


_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


#: Words VADER scores in one piece (see :class:`LexiconAffectTagger`): 99% of LoCoMo's turns
#: are shorter (16 of 2,760 dev turns are longer), so they are scored whole.
PIECE_WORDS = 64
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def vader_pieces(text: str, limit: int) -> list[str]:
    """``text`` itself when it has at most ``limit`` words (split on whitespace, as VADER
    splits), else its sentences packed in order into pieces of at most ``limit`` words,
    a sentence longer than that cut every ``limit`` words (words joined by one space).

    >>> vader_pieces("Short one. Fine!", 8)
    ['Short one. Fine!']
    >>> vader_pieces("One two three. Four five! Six seven eight nine ten", 4)
    ['One two three.', 'Four five!', 'Six seven eight nine', 'ten']
    """
    if len(text.split()) <= limit:
        return [text]
    pieces: list[str] = []
    current: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        words = sentence.split()
        if current and len(current) + len(words) > limit:
            pieces.append(" ".join(current))
            current = []
        while len(words) > limit:
            pieces.append(" ".join(words[:limit]))
            words = words[limit:]
        current.extend(words)
    if current:
        pieces.append(" ".join(current))
    return pieces


class LexiconAffectTagger:
    """Offline tagger: VADER (``vaderSentiment``) for valence, documented rules for arousal
    and complexity.

    - valence: VADER's compound score, in [-1, 1]. VADER is built for short text (its
      cost grows with the square of a text's length): a text of more than ``piece_words``
      words is scored in pieces of whole sentences of at most ``piece_words`` words (a
      longer sentence cut every ``piece_words`` words), and valence is the pieces'
      compound scores averaged by their word counts (VADER's own advice for paragraphs
      is to average its sentences' scores).
    - arousal: ``0.5 * |compound|`` (emotional intensity) ``+ 0.2 * min(#'!', 2) / 2``
      ``+ 0.1`` if a word of 2+ letters is written in capitals (``ASAP``, not ``I``)
      ``+ 0.2`` if an urgency word occurs (urgent, asap, broken, crash, help, ...),
      clipped to [0, 1].
    - complexity: ``0.4 * min(words / 30, 1)`` (length)
      ``+ 0.3 * min(max(mean word length - 4, 0) / 3, 1)`` (long words)
      ``+ 0.3 * min(clause markers / 3, 1)`` (``,;:()`` and subordinators such as because,
      although, which, therefore), clipped to [0, 1].

    >>> t = LexiconAffectTagger()
    >>> t.tag("")
    (0.0, 0.0, 0.0)
    >>> v, a, c = t.tag("The server is DOWN again, this is terrible! Help, urgently!")
    >>> v < 0, a > 0.5
    (True, True)
    """

    def __init__(self, *, piece_words: int = PIECE_WORDS) -> None:
        problem = prm.positive_int(piece_words)
        if problem:
            raise InvalidInputError(f"piece_words {problem}, got {piece_words!r}")
        try:
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
        except ImportError as exc:  # pragma: no cover - it is a dependency
            raise MissingDependencyError(
                "the offline affect tagger needs vaderSentiment: pip install vaderSentiment"
            ) from exc
        self._vader = SentimentIntensityAnalyzer()
        self.piece_words = piece_words

    def compound(self, text: str) -> float:
        """VADER's compound score of ``text``: whole when it has at most ``piece_words``
        words, else the word-weighted mean over :func:`vader_pieces`.

        >>> t = LexiconAffectTagger(piece_words=4)   # two pieces of three words each
        >>> love, hate = t.compound("I love it."), t.compound("I hate it.")
        >>> round(love, 4), round(hate, 4), round(t.compound("I love it. I hate it."), 4)
        (0.6369, -0.5719, 0.0325)
        """
        pieces = vader_pieces(text, self.piece_words)
        if len(pieces) == 1:
            return float(self._vader.polarity_scores(pieces[0])["compound"])
        sizes = [len(p.split()) for p in pieces]
        total = sum(float(self._vader.polarity_scores(p)["compound"]) * n
                    for p, n in zip(pieces, sizes))
        return total / sum(sizes)

    def tag(self, text: str) -> tuple[float, float, float]:
        if not isinstance(text, str):
            raise InvalidTypeError(f"text must be a str, got {type(text).__name__}")
        words = _WORD.findall(text)
        if not words:
            return (0.0, 0.0, 0.0)
        compound = self.compound(text)
        lower = [w.lower() for w in words]
        caps = any(len(w) >= 2 and w.isupper() for w in words)
        arousal = (0.5 * abs(compound) + 0.2 * min(text.count("!"), 2) / 2
                   + (0.1 if caps else 0.0) + (0.2 if URGENT_WORDS.intersection(lower) else 0.0))
        mean_len = sum(len(w) for w in words) / len(words)
        markers = sum(text.count(ch) for ch in ",;:(") + sum(w in SUBORDINATORS for w in lower)
        complexity = (0.4 * min(len(words) / 30, 1.0) + 0.3 * min(max(mean_len - 4, 0) / 3, 1.0)
                      + 0.3 * min(markers / 3, 1.0))
        return (max(-1.0, min(1.0, compound)), min(1.0, arousal), min(1.0, complexity))


_LLM_PROMPT = (
    "Rate the cognitive state expressed by the user's message on three axes and reply with "
    "exactly three numbers separated by commas, nothing else: valence from -1 (negative) to "
    "1 (positive), arousal from 0 (calm) to 1 (urgent, intense), complexity from 0 (simple) "
    "to 1 (cognitively demanding). Example reply: -0.4, 0.8, 0.3"
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class LLMAffectTagger:
    """Tags with a chat model (any LangChain ``BaseChatModel``: only ``invoke`` is used,
    so the core imports no framework). The reply must hold three numbers (valence,
    arousal, complexity); they are clamped to their ranges. A reply without three numbers,
    or a model error, falls back to ``fallback`` (the lexicon tagger by default).

    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> LLMAffectTagger(FakeListChatModel(responses=["-0.5, 0.9, 1.7"])).tag("Servers down!")
    (-0.5, 0.9, 1.0)
    """

    def __init__(self, model: Any, *, fallback: AffectTagger | None = None,
                 prompt: str = _LLM_PROMPT) -> None:
        if not hasattr(model, "invoke"):
            raise InvalidTypeError("LLMAffectTagger needs a LangChain chat model (with "
                                   f"invoke), got {type(model).__name__}")
        self.model = model
        self.prompt = prompt
        self._fallback = fallback
        self.fallbacks = 0

    def tag(self, text: str) -> tuple[float, float, float]:
        if not isinstance(text, str):
            raise InvalidTypeError(f"text must be a str, got {type(text).__name__}")
        try:
            reply = self.model.invoke([("system", self.prompt), ("human", text)])
            content = getattr(reply, "content", reply)
            numbers = _NUMBER.findall(content if isinstance(content, str) else str(content))
            if len(numbers) >= 3:
                v, a, c = (float(x) for x in numbers[:3])
                return (max(-1.0, min(1.0, v)), max(0.0, min(1.0, a)), max(0.0, min(1.0, c)))
            logger.warning("LLMAffectTagger: no three numbers in the reply %r; falling back",
                           content)
        except Exception as exc:  # the model failed: tag offline instead
            logger.warning("LLMAffectTagger: the chat model failed (%s); falling back", exc)
        self.fallbacks += 1
        if self._fallback is None:
            self._fallback = LexiconAffectTagger()
        return self._fallback.tag(text)


def as_tagger(value: Any) -> AffectTagger | None:
    """The ingestion tagger for ``Synapse(affect_tagger=value)``: ``None`` the offline
    :class:`LexiconAffectTagger`, ``False`` none, an :class:`AffectTagger` itself, a
    LangChain chat model (anything with ``invoke``) wrapped in :class:`LLMAffectTagger`.

    >>> as_tagger(False) is None, type(as_tagger(None)).__name__
    (True, 'LexiconAffectTagger')
    """
    if value is False:
        return None
    if value is None:
        return LexiconAffectTagger()
    if isinstance(value, AffectTagger):
        return value
    if hasattr(value, "invoke"):
        return LLMAffectTagger(value)
    raise InvalidTypeError("affect_tagger must be None, False, an AffectTagger (with tag(text)) "
                           f"or a LangChain chat model, got {type(value).__name__}")


def affect_tag(tagger: AffectTagger, text: str) -> list[float]:
    """``[valence, arousal, complexity]`` of ``text``, clamped to the state box (what the
    engine stores as a node's ``affect``; a tagger's bad output is an error, not a tag).

    >>> affect_tag(LexiconAffectTagger(), "")
    [0.0, 0.0, 0.0]
    """
    state = _stored_state(list(tagger.tag(text)))
    if state is None:
        raise InvalidInputError(f"the affect tagger returned no three finite numbers for {text[:40]!r}")
    return list(state)


# --------------------------------------------------------------------------------------------
# the retrieval model
# --------------------------------------------------------------------------------------------
def _stored_state(value: Any) -> tuple[float, float, float] | None:
    """A stored ``affect`` triple, clamped to the state box; None when absent or malformed."""
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
               for x in value):
        return None
    v, a, c = (float(x) for x in value)
    return (max(-1.0, min(1.0, v)), max(0.0, min(1.0, a)), max(0.0, min(1.0, c)))


PARAMS = prm.ParamSpec("mnemos", {
    "threshold": (0.6, prm.cosine),
    "max_neighbors": (32, prm.positive_int),
    "energy": (1.0, prm.positive),
    "decay": (0.2, prm.unit_interval),
    "max_hops": (3, prm.non_negative_int),
    "return_threshold": (0.3, prm.non_negative),
    "affective": (True, prm.boolean),
    "weight_similarity": (0.7, prm.non_negative),
    "weight_state": (0.3, prm.non_negative),
    "rank": ("model", prm.choice("model", "hybrid")),
})


class MnemosModel:
    """mnemos' spreading and affective routing (``SynapseConfig(model="mnemos")``).

    Hyperparameters, ``SynapseConfig(model_params={"mnemos": {...}})`` (paper defaults unless
    marked):

    ``threshold`` 0.6
        cosine above which two episodes are linked.
    ``max_neighbors`` 32 (ours)
        at most this many strongest links per episode (plus those of nodes linking to it):
        keeps the graph sparse where many turns are alike; the paper has no cap.
    ``energy`` 1.0, ``decay`` 0.2, ``max_hops`` 3, ``return_threshold`` 0.3
        the BFS: seed energy, loss per hop, hop limit (implied by the paper's numbers),
        energy a node needs to be returned.
    ``affective`` True, ``weight_similarity`` 0.7, ``weight_state`` 0.3
        re-rank by ``0.7 * sim + 0.3 * (1 - d_state)``; the query's state is its text's tags.
    ``rank`` "model"
        ``"model"``: rank the returned nodes by the affective score (by energy with
        ``affective=False``), as mnemos does; ``"hybrid"``: leave the ranking to the
        engine's hybrid score (the energy enters it as the activation).

    The graph holds episodes only: the seed is the closest episode, concepts get no
    energy (their affective score is computed from their text). A node's tags are its
    ``affect`` attribute when the engine stored one at ingestion, else computed from its
    text with the model's tagger and cached per text.
    ``MnemosModel(tagger=LLMAffectTagger(chat_model))`` tags with an LLM.
    """

    name = "mnemos"

    def __init__(self, tagger: AffectTagger | None = None) -> None:
        if tagger is not None and not isinstance(tagger, AffectTagger):
            raise InvalidTypeError(f"tagger must have tag(text), got {type(tagger).__name__}")
        self._tagger = tagger
        self._tags: dict[str, tuple[float, float, float]] = {}
        self._lock = threading.Lock()
        self.neighbors = NeighborIndex()

    @property
    def tagger(self) -> AffectTagger:
        if self._tagger is None:
            self._tagger = LexiconAffectTagger()
        return self._tagger

    def tag(self, text: str) -> tuple[float, float, float]:
        """The cognitive state of ``text`` (cached per text)."""
        with self._lock:
            hit = self._tags.get(text)
        if hit is None:
            hit = tuple(float(x) for x in self.tagger.tag(text))  # type: ignore[assignment]
            with self._lock:
                if len(self._tags) >= _TAG_CACHE_SIZE:  # queries add texts too: stay bounded
                    self._tags.clear()
                self._tags[text] = hit  # type: ignore[assignment]
        return hit  # type: ignore[return-value]

    def states(self, view: GraphView) -> np.ndarray:
        """``(n, 3)`` cognitive states of the view's nodes (cached on the view): a node's
        stored ``affect`` attribute (``[valence, arousal, complexity]``, the engine's hook
        for tags computed at ingestion) where it has a valid one, else its text's tags."""
        def build(v: GraphView) -> np.ndarray:
            texts = v.node_values("text", "")
            stored = v.node_values("affect", None)
            out = np.zeros((v.n, 3))
            ok = np.zeros(v.n, dtype=bool)
            for k, a in enumerate(stored):  # the common case: a stored [v, a, c] list
                if type(a) is list and len(a) == 3:
                    try:
                        out[k] = a
                        ok[k] = True
                    except (TypeError, ValueError):
                        pass
            ok &= np.isfinite(out).all(axis=1)
            out = np.clip(out, [-1.0, 0.0, 0.0], [1.0, 1.0, 1.0])
            for k in np.flatnonzero(~ok):  # no valid stored tags: tag the text
                t = texts[k]
                out[k] = _stored_state(stored[k]) or self.tag(t if isinstance(t, str) else "")
            return out
        return view.derived("mnemos.states", build)

    def graph(self, view: GraphView, config: SynapseConfig) -> tuple[np.ndarray, np.ndarray,
                                                                       np.ndarray, np.ndarray]:
        """``(rows, indptr, indices, weight)``: the cosine graph over the episodes (CSR in
        positions of ``rows``, the episodes' view indices), cached on the view."""
        return self._graph(view, prm.read_params(config, PARAMS))

    def _graph(self, view: GraphView, p: dict[str, Any]) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray, np.ndarray]:
        table = neighbor_table(view, subset="episodes", k=p["max_neighbors"],
                               index=self.neighbors)
        return view.derived(
            f"mnemos.graph:{p['max_neighbors']}:{p['threshold']!r}",
            lambda v: (table.rows, *cosine_graph(table.index, table.sim,
                                                 threshold=p["threshold"])))

    def activate(self, view: GraphView, query: Query, config: SynapseConfig) -> Activation:
        p = prm.read_params(config, PARAMS)
        n = view.n
        sim = np.asarray(query.sim, dtype=np.float64)
        energy = np.zeros(n)
        parents = np.full(n, -1, dtype=np.int64)
        episodes = np.flatnonzero(view.is_episode)
        if episodes.size:
            seed = int(episodes[np.argmax(np.nan_to_num(sim[episodes], nan=-np.inf))])
            if config.use_graph:
                rows, indptr, indices, w = self._graph(view, p)
                local = int(np.searchsorted(rows, seed))
                e, par = bfs_energy(indptr, indices, w, local, energy=p["energy"],
                                    decay=p["decay"], max_hops=p["max_hops"])
                energy[rows] = e
                parents[rows[par >= 0]] = rows[par[par >= 0]]
            else:
                energy[seed] = p["energy"]
        reached = np.flatnonzero(energy >= p["return_threshold"])
        score = None
        if p["rank"] == "model":
            if p["affective"]:
                score = affective_score(sim, self.states(view), self.tag(query.text),
                                        weight_similarity=p["weight_similarity"],
                                        weight_state=p["weight_state"])
            else:
                score = energy
        return Activation(energy, parents=parents, reached=reached, score=score)

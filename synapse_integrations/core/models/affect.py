"""Affective routing (mnemos, seed paper 004, section 3.3): a text's cognitive state and
the score that routes by it.

Each text is tagged with a state ``(valence, arousal, complexity)`` in
``[-1, 1] x [0, 1] x [0, 1]`` by an :class:`AffectTagger`: :class:`LexiconAffectTagger`
(offline: the VADER lexicon plus documented rules) or :class:`LLMAffectTagger` (any
LangChain chat model). A candidate scores ``0.7 * sim + 0.3 * (1 - d_state)``
(:func:`affective_score`), ``d_state`` the distance between the query's state and the
candidate's divided by its maximum ``sqrt(6)`` (:func:`state_distance`). The engine tags
each turn as it is written (:func:`as_tagger`, :func:`affect_tag`); the mnemos model
(:mod:`.mnemos`) reads the stored tags.

>>> round(float(affective_score(np.array([1.0]), np.array([[1.0, 1.0, 1.0]]),
...                             (-1.0, 0.0, 0.0))[0]), 2)
0.7
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ...errors import InvalidInputError, InvalidTypeError, MissingDependencyError
from ..text.lexicon import SUBORDINATORS, URGENT_WORDS
from . import _params as prm

__all__ = [
    "PIECE_WORDS",
    "STATE_MAX_DISTANCE",
    "AffectTagger",
    "LLMAffectTagger",
    "LexiconAffectTagger",
    "affect_tag",
    "affective_score",
    "as_tagger",
    "state_distance",
    "stored_state",
    "vader_pieces",
]

# the mnemos model's logger, as before the split into modules
logger = logging.getLogger(f"{__package__}.mnemos")

#: The largest distance between two states: ``|(2, 1, 1)| = sqrt(6)`` (3.3).
STATE_MAX_DISTANCE = math.sqrt(6.0)


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
        self._vader = _vader()
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


@functools.lru_cache(maxsize=1)
def _vader() -> Any:
    """VADER's analyser, one per process: it reads its lexicon file when made (about 20
    ms, paid by every memory opened before) and only reads it afterwards."""
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError as exc:  # pragma: no cover - it is a dependency
        raise MissingDependencyError(
            "the offline affect tagger needs vaderSentiment: pip install vaderSentiment"
        ) from exc
    return SentimentIntensityAnalyzer()


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
    state = stored_state(list(tagger.tag(text)))
    if state is None:
        raise InvalidInputError(f"the affect tagger returned no three finite numbers for {text[:40]!r}")
    return list(state)


def stored_state(value: Any) -> tuple[float, float, float] | None:
    """A stored ``affect`` triple, clamped to the state box; None when absent or malformed."""
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
               for x in value):
        return None
    v, a, c = (float(x) for x in value)
    return (max(-1.0, min(1.0, v)), max(0.0, min(1.0, a)), max(0.0, min(1.0, c)))

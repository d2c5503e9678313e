"""The surprisal gate (mnemos, section 3.1): how much a turn says that its context did not
already predict.

A sliding window of the last ``surprisal_window`` turns (10, the paper's) predicts the
next one; a turn's surprisal is the cosine distance between the prediction's embedding
and its own, clipped to [0, 1] (:func:`surprisal`). Turns whose surprisal is below
``surprisal_tau`` (0.3, the paper's) are stored with **low salience** instead of being
dropped (docs/concepts.md says why): they stay durable, retrievable and forgettable, and
score ``low_salience_weight`` of their score.

Predictors:

* :class:`WindowPredictor` (offline): the prediction is the mean of the window's
  embeddings, so a turn that repeats what was just said is unsurprising; and, as the
  paper's ``min_content_length``, a turn made only of filler words ("ok", "thanks!",
  "sounds good") has surprisal 0 whatever its embedding.
* :class:`LLMPredictor`: any LangChain chat model writes the likely next message from the
  window; its embedding is the prediction (the paper's design).

>>> import numpy as np
>>> round(surprisal(np.array([1.0, 0.0]), np.array([0.6, 0.8])), 3)
0.4
>>> is_filler("user: Thanks, sounds good!"), is_filler("user: She moved to Chicago.")
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from ...errors import InvalidTypeError
from ..text.documents import without_any_speaker
from ..text.lexicon import FILLER_WORDS
from ..text.llm_reply import reply_text
from ..text.tokens import tokenize

__all__ = ["LLMPredictor", "Predictor", "WindowPredictor", "is_filler", "score_rows", "surprisal",
           "window_prediction"]

def is_filler(text: str) -> bool:
    """A turn whose words (after a ``"speaker: "`` prefix) are all filler words."""
    body = without_any_speaker(text)
    words = re.findall(r"[a-z']+", body.lower())
    return all(w.strip("'") in FILLER_WORDS for w in words) and not any(
        ch.isdigit() for ch in body)


def surprisal(prediction: np.ndarray, actual: np.ndarray) -> float:
    """Cosine distance ``1 - cos(prediction, actual)`` clipped to [0, 1]; 1 (nothing was
    predicted) when the prediction is the zero vector."""
    p = np.asarray(prediction, dtype=np.float64)
    a = np.asarray(actual, dtype=np.float64)
    norm = float(np.linalg.norm(p) * np.linalg.norm(a))
    if norm == 0.0:
        return 1.0
    return float(min(1.0, max(0.0, 1.0 - float(p @ a) / norm)))


def window_prediction(window: np.ndarray) -> np.ndarray:
    """The offline prediction: the mean of the window's (unit) embeddings (zero vector for
    an empty window).

    >>> window_prediction(np.array([[1.0, 0.0], [0.0, 1.0]]))
    array([0.5, 0.5])
    """
    w = np.asarray(window, dtype=np.float64)
    return w.mean(axis=0) if w.size else np.zeros(w.shape[-1] if w.ndim == 2 else 0)


class Predictor(Protocol):
    """Scores a turn against its window: ``texts`` / ``embs`` are the window's turns,
    oldest first; ``embed`` embeds a text (for a predictor that writes one)."""

    def surprisal(self, text: str, emb: np.ndarray, texts: Sequence[str], embs: np.ndarray,
                  embed: Callable[[str], np.ndarray]) -> float: ...


class WindowPredictor:
    """Offline: filler is 0, otherwise the distance to the window's mean embedding."""

    def surprisal(self, text: str, emb: np.ndarray, texts: Sequence[str], embs: np.ndarray,
                  embed: Callable[[str], np.ndarray]) -> float:
        if is_filler(text) or not tokenize(without_any_speaker(text)):
            return 0.0
        return surprisal(window_prediction(embs), emb) if len(embs) else 1.0


_PROMPT = """Here are the last messages of a conversation, oldest first:

{window}

Write the message most likely to come next, in the same voice. Answer with that message only."""


class LLMPredictor:
    """The paper's predictor: a LangChain chat model writes the likely next turn from the
    window; the surprisal is its embedding's distance to the actual turn. Filler is 0
    as offline; an empty window predicts nothing (surprisal 1)."""

    def __init__(self, chat_model: Any) -> None:
        if not hasattr(chat_model, "invoke"):
            raise InvalidTypeError("LLMPredictor needs a LangChain chat model (with invoke), "
                                   f"got {type(chat_model).__name__}")
        self.chat_model = chat_model

    def surprisal(self, text: str, emb: np.ndarray, texts: Sequence[str], embs: np.ndarray,
                  embed: Callable[[str], np.ndarray]) -> float:
        if is_filler(text):
            return 0.0
        if not texts:
            return 1.0

        reply = reply_text(self.chat_model.invoke(_PROMPT.format(window="\n".join(texts))))
        return surprisal(embed(reply), emb) if reply.strip() else 1.0


def _recent(state: Any, count: int) -> list[tuple[str, np.ndarray]]:
    """The ``count`` newest stored episodes (text, vector), oldest first, along the
    temporal chain."""
    g = state.graph
    out: list[tuple[str, np.ndarray]] = []
    node = state.last_episode
    while node is not None and node in g and len(out) < count:
        out.append((g.node(node)["text"], g.vectors[node]))
        node = next((u for u in g.g.predecessors(node)
                     if g.g.edges[u, node].get("kind") == "temporal"), None)
    return out[::-1]


def score_rows(rows: Sequence[Mapping[str, Any]], embs: np.ndarray, state: Any,
               predictor: Predictor, window: int, embed: Callable[[str], np.ndarray]
               ) -> list[float]:
    """The surprisal of each row about to be stored, each against the ``window`` turns
    before it (stored ones, then earlier rows of the batch)."""
    history = _recent(state, window)
    out = []
    for r, e in zip(rows, embs):
        texts = [t for t, _ in history[-window:]]
        vecs = np.stack([v for _, v in history[-window:]]) if history else np.zeros((0, len(e)))
        out.append(predictor.surprisal(r["text"], e, texts, vecs, embed))
        history.append((r["text"], e))
    return out

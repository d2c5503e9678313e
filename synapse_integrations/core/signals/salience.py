"""Low salience (mnemos' surprisal gate, :mod:`~synapse_integrations.core.lifecycle.surprisal`):
a turn the gate marked ``low_salience`` when it was stored, a restatement of what the memory
already predicted, scores ``low_salience_weight`` of its score (``salience``, 0 or negative).

The write half (scoring each turn's surprisal against the turns before it) is the
lifecycle's; this is the read half: it only reads the node attribute.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Candidates, Signal

__all__ = ["Salience", "demote_low"]


def _low_salience(view: Any, start: int = 0) -> np.ndarray:
    return np.array([bool(v) for v in view.node_values("low_salience", False)[start:]],
                    dtype=bool)


def demote_low(view: Any, cand: np.ndarray, score: np.ndarray, weight: float) -> np.ndarray:
    """Episodes the surprisal gate marked low-salience score ``weight`` of their score."""
    if weight == 1.0:
        return score
    low = view.per_node("low-salience", _low_salience)[cand]
    return np.where(low, score * weight, score) if low.any() else score


class Salience(Signal):
    """The surprisal gate's low-salience demotion (``salience``)."""

    name = "salience"
    section = "signals.salience"

    def adjust(self, ctx: Candidates, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = demote_low(ctx.view, ctx.cand, score, ctx.cfg.low_salience_weight)
        return out, out - score

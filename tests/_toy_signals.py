"""A toy ranking signal for the seam test: the whole signal is this one class."""

from __future__ import annotations

import numpy as np

from synapse_integrations.core.signals import Signal

BONUS = 0.05


class Exclaimed(Signal):
    """A turn said with an exclamation mark is marked at write time and scores ``BONUS``
    more at retrieval."""

    name = "exclaimed"

    def write(self, rows, embs, ctx) -> None:
        for r in rows:
            if r["text"].rstrip().endswith("!"):
                r["metadata"] = {**r["metadata"], "exclaimed": True}

    def adjust(self, ctx, score):
        meta = ctx.view.node_values("metadata")
        marked = np.array([bool((meta[i] or {}).get("exclaimed")) for i in ctx.cand], dtype=bool)
        change = np.where(marked, BONUS, 0.0)
        return score + change, change

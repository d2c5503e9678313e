"""Toy retrieval models for tests whose expected rankings are worked out by hand."""

from __future__ import annotations

import numpy as np

from synapse_integrations.core.models import Activation


class Recency:
    """Activation is how recent an episode is (newest 1.0, oldest 0; no time: 0)."""

    name = "recency"

    def activate(self, view, query, config) -> Activation:
        ts = np.array([t if t is not None else np.nan for t in view.node_values("ts")], float)
        act = np.zeros(view.n)
        ok = ~np.isnan(ts)
        if ok.any():
            act[ok] = (ts[ok] - np.nanmin(ts)) / max(np.nanmax(ts) - np.nanmin(ts), 1.0)
        return Activation(act)

"""PageRank of a compiled view, computed now or when it is first read.

A write that changes the graph's structure (a consolidation window, an archive) makes the
cached PageRank stale, and the engine refreshes it after each chunk of a write. A bulk
import writes hundreds of chunks and asks nothing in between: recomputing PageRank after
each one cost O(edges) per chunk, a cost per write that grew with the memory (issue 52).
:class:`PendingRank` holds what a refresh would read (the view's ids and edge arrays, as
they stand at the refresh) so that the scores are computed once, when first read, and are
the very scores the refresh would have computed then: the view's arrays are new arrays
at every change (:func:`~.compiling.extend_view`, :meth:`~.view.Compiled.without`), the
one change made in place (:meth:`~.view.Compiled.set_weights`) reads the pending scores
first (:meth:`~.graph.MemoryGraph.set_edge_weights`).

>>> from synapse_integrations.core.graph.view import Compiled
>>> v = Compiled.from_arrays(["a", "b"], np.eye(2, dtype=np.float32), src=[0, 1], dst=[1, 0],
...                          weight=[1.0, 1.0], is_episode=[True, True])
>>> PendingRank(v, damping=0.85).compute()[0]
{'a': 1.0, 'b': 1.0}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.scoring import pagerank_scores

__all__ = ["PendingRank", "Ranks"]


class PendingRank:
    """The PageRank of ``view`` as it stands now, computed by :meth:`compute`."""

    def __init__(self, view: Any, *, damping: float) -> None:
        self.view = view
        self.ids: list[str] = view.ids
        self.src, self.dst, self.weight = view.src, view.dst, view.weight
        self.n = view.n
        self.damping = damping

    def compute(self) -> tuple[dict[str, float], np.ndarray]:
        """``({id: score}, scores in the view's order)``, max-normalised
        (:func:`~synapse_integrations.core.kernels.scoring.pagerank_scores`)."""
        scores = np.asarray(pagerank_scores(self.src, self.dst, self.weight, self.n,
                                            damping=self.damping), dtype=np.float64)
        return {n: float(s) for n, s in zip(self.ids, scores)}, scores


class Ranks:
    """A graph's cached PageRank (``values``) and the refresh not computed yet (``due``)."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}
        self.due: PendingRank | None = None

    def read(self, current: Any) -> dict[str, float]:
        """The scores, the pending refresh computed first; ``current``: the graph's compiled
        view now (handed the scores in its order when the refresh read that view)."""
        due = self.due
        if due is not None:
            self.due = None
            self.values, scores = due.compute()
            if current is due.view:
                current.aligned(self.values, scores)
        return self.values

"""SYNAPSE's spreading activation as a retrieval model (the default; seed papers 000/001,
section 3.2): anchors start at ``alpha * cos`` (Eq. 1), then ``T`` cycles of propagation
with fan effect, lateral inhibition and sigmoid firing (Eqs. 2-4,
:func:`~synapse_integrations.core.kernels.dynamics.spread_activation`).

>>> import numpy as np
>>> from synapse_integrations.config import SynapseConfig
>>> from synapse_integrations.core.graph.graph import Compiled
>>> from synapse_integrations.core.models.base import Query
>>> view = Compiled.from_arrays(["a", "b"], np.eye(2, dtype=np.float32), src=[0], dst=[1],
...                             weight=[1.0], is_episode=[True, True])
>>> q = Query("q", np.array([1.0, 0.0]), sim=np.array([1.0, 0.0]), anchors=np.array([0]))
>>> out = SynapseModel().activate(view, q, SynapseConfig(iterations=1))
>>> bool(out.activation[1] > 0), out.parents.tolist()
(True, [-1, 0])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ..kernels import dynamics
from .base import Activation, LearnableEdges, Query

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ...config import SynapseConfig
    from ..graph.graph import Compiled as GraphView


class SynapseModel:
    """Eqs. 1-4 of SYNAPSE on the memory graph; parents are tracked for explanations."""

    name = "synapse"

    def activate(self, view: GraphView, query: Query, config: SynapseConfig) -> Activation:
        a0 = np.zeros(view.n)
        a0[query.anchors] = config.alpha * np.clip(
            query.sim[query.anchors].astype(np.float64), 0.0, None)
        P = (view.propagation(**config.propagation_params()) if config.use_graph
             else sp.csr_array((view.n, view.n)))
        spread = dynamics.spread_activation(a0, P, **config.spread_params(), track_parents=True)
        return Activation(spread.activation, parents=spread.parent)

    def learnable_edges(self, view: GraphView, config: SynapseConfig) -> LearnableEdges:
        """The memory graph's own edges (feedback marks them ``learned``)."""
        return LearnableEdges("memory", view.src, view.dst, view.weight)

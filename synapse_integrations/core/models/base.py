"""The interface every retrieval model implements.

A retrieval model decides how energy moves from a query's anchors through the memory:
SYNAPSE's spreading activation (the default), and the other seed systems' dynamics as
options. The pipeline around it (:mod:`synapse_integrations.core.retrieval.pipeline`) is the same
for every model: triggers pick the anchors, the model activates, the hybrid score ranks
the candidates, the gate judges the top one, and the items are built.

A model is a small object with a ``name`` and one method::

    def activate(self, view: GraphView, query: Query, config: SynapseConfig) -> Activation

It reads the compiled graph (``view``: node ids, unit embeddings, the edge arrays, cached
derived structures) and the query (its text, its vector, its cosine to every node, its
anchors), and returns an :class:`Activation`: a non-negative activation per node, and
optionally the node that passed energy to each one (for explanations), the nodes to rank
besides the anchors, and a score of its own. It must not change the view or the graph.

Adding a model is one module plus one registration line in
:mod:`synapse_integrations.core.models`::

    register("my-model", MyModel)

and ``SynapseConfig(model="my-model")`` selects it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ...config import SynapseConfig
    from ..graph.graph import Compiled as GraphView

__all__ = ["Activation", "LearnableEdges", "LearnsEdges", "Query", "RetrievalModel"]


@dataclass(frozen=True)
class Query:
    """What a model knows about the question being asked.

    Attributes:
        text: the question (the lexical trigger's text: with ``entity_feedback`` it holds
            the entity names the second pass added).
        vector: the unit query embedding, shape ``(d,)``.
        sim: cosine of every node of the view with ``vector``, shape ``(n,)``.
        anchors: the indices (into the view) the triggers picked, sorted ascending.
        time: when the question is asked, epoch seconds (``None``: not given; a model
            that needs a time picks its own default).
    """

    text: str
    vector: np.ndarray
    sim: np.ndarray
    anchors: np.ndarray
    time: float | None = None


@dataclass(frozen=True)
class Activation:
    """What a model returns.

    Attributes:
        activation: non-negative activation per node, shape ``(n,)``; it enters the
            hybrid score with ``weight_activation``.
        parents: for each node reached from another one, that node's index (``-1`` for
            the nodes the model started from and unreached nodes); ``None`` when the model
            keeps no paths. A model may seed from other nodes than ``query.anchors``
            (evermind: its best episode cosines; mnemos: the closest episode), and an
            anchor it starts at zero (synapse: a BM25 anchor of cosine <= 0) can be
            reached from another node; the parents never form a cycle.
        reached: indices ranked besides the anchors; ``None`` means the nodes with
            positive activation.
        score: a score of the model's own per node, shape ``(n,)``, used to rank instead
            of the hybrid score (a model whose paper defines its own ranking); ``None``
            (the default) ranks by the hybrid score.
        spikes: stimulus per node that the engine records in the node's spike train
            (its ``spikes`` attribute) at ``spike_time`` after the retrieval (0: none);
            ``None`` (the default) records nothing. A model must not write during
            ``activate``: this is how it asks for a write (SynapticRAG).
        spike_time: the time (epoch seconds) the spikes happened.
    """

    activation: np.ndarray
    parents: np.ndarray | None = None
    reached: np.ndarray | None = None
    score: np.ndarray | None = None
    spikes: np.ndarray | None = None
    spike_time: float | None = None


@runtime_checkable
class RetrievalModel(Protocol):
    """A retrieval model: see the module docstring."""

    name: str

    def activate(self, view: GraphView, query: Query, config: SynapseConfig) -> Activation:
        """Activation of every node of ``view`` for ``query``."""
        ...


@dataclass(frozen=True)
class LearnableEdges:
    """The weighted edges a model spreads over, for usage feedback
    (:mod:`synapse_integrations.core.lifecycle.feedback`).

    Attributes:
        graph: where learned weights are kept: ``"memory"`` (the memory graph's own
            edges, marked ``learned``) or a model's name (a derived graph: its learned
            weights live in ``MemoryGraph.learned[graph]`` and reach the model through
            ``view.learned``).
        src, dst, weight: the edges in view indices, with their current weights (learned
            ones included).
        grow: whether +1 feedback on two used memories without a link creates one.
    """

    graph: str
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    grow: bool = False


@runtime_checkable
class LearnsEdges(Protocol):
    """A model whose edge weights usage feedback can change."""

    def learnable_edges(self, view: GraphView, config: SynapseConfig) -> LearnableEdges:
        """The edges ``activate`` spreads over for ``config``, with their current weights."""
        ...

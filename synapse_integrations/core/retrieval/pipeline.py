"""The retrieval pipeline (SYNAPSE sections 3.2-3.4), as a table of contents:

1. **scope** (:mod:`.scope`): the node kinds and the filter a query may use;
2. **triggers** (:mod:`.triggers`): the query's cosines with every node, and the dense and
   BM25 anchors;
3. **model** (:mod:`synapse_integrations.core.models`; SYNAPSE's spreading activation by
   default) activates the graph from the anchors;
4. **score** (:func:`.passes.run_pass`): the hybrid score (cosine, activation, PageRank,
   normalised BM25, distinct evidence), or the model's own score;
5. **signals** (:mod:`synapse_integrations.core.signals`): the registered ranking signals
   adjust it in order;
6. **gate** (:mod:`.gate`) on the first pass's top item, then the optional
   **entity-feedback** pass merged into the first (:func:`.passes.merge_feedback`);
7. **items** (:mod:`.items`).

The pipeline only reads the memory: what it activated is returned
(:attr:`Retrieval.activated`) for the engine to pass to the dormancy ledger.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...config import SynapseConfig
from ...types import RetrievalResult
from ..graph.graph import Compiled
from ..models import Activation, Query, RetrievalModel, get_model
from ..signals import focus, holds_place, own_evidence, signals
from ..state.filters import Filter
from ..state.state import MemoryState
from . import gate
from .items import activation_vector, item, led_by, shown_weights
from .passes import Spikes, explain_feedback, feedback_entities, merge_feedback, run_pass
from .scope import DEFAULT_KINDS, Scope, Timeline
from .triggers import anchor_scope, cosines, triggers

__all__ = ["Retrieval", "RetrievalSteps", "Retriever"]


@dataclass(frozen=True)
class Retrieval:
    """The result, what each pass activated (for the dormancy ledger), and the stimuli the
    model asks to record (for the spike trains)."""

    result: RetrievalResult
    activated: tuple[set[str], ...]
    spikes: Spikes | None = None


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


class Retriever:
    """Runs the pipeline on one memory; keeps one instance of each model it used."""

    def __init__(self, state: MemoryState,
                 options: Mapping[str, Mapping[str, Any]] | None = None,
                 words: gate.WordVectors | None = None) -> None:
        self.state = state
        self.options = dict(options or {})  # model name -> what its factory is given
        self.words = words  # embeds question words for the gate's presence check
        self._models: dict[str, RetrievalModel] = {}

    def names(self, view: Compiled, query: str, cfg: SynapseConfig) -> focus.Names | None:
        """The names ``query`` holds, to leave out of its cosines (``speaker_free_cosine``;
        :func:`~synapse_integrations.core.signals.focus.names_out`)."""
        return focus.names_out(view, query, self.words) if cfg.speaker_free_cosine else None

    def model(self, name: str) -> RetrievalModel:
        """The memory's instance of the model registered as ``name``."""
        model = self._models.get(name)
        if model is None:
            model = self._models[name] = get_model(name, **self.options.get(name, {}))
        return model

    def run(self, query: str, qv: np.ndarray, k: int, cfg: SynapseConfig, *,
            kinds: tuple[str, ...] = DEFAULT_KINDS, flt: Filter | None = None,
            at: float | None = None, timeline: Timeline = Timeline()) -> Retrieval:
        """Rank memories for ``query`` (its unit vector ``qv``, validated by the caller),
        asked at time ``at`` (epoch seconds, or None), and apply the gate. Only nodes of
        ``kinds`` that match ``flt`` are returned, as the memory stood at ``timeline``
        (:class:`~.scope.Timeline`)."""
        view = self.state.compiled()
        if view.n == 0:
            return Retrieval(RetrievalResult(query, (), cfg.use_gate, 0.0, cfg.gate_tau), ())
        model = self.model(cfg.model)
        # cosines of every active node: one float32 mat-vec over the in-memory copy of the
        # vectors Chroma holds. Exact (Chroma's HNSW is approximate, so its top-k could
        # differ after a reload) and cheaper than a Chroma round trip.
        named = self.names(view, query, cfg)
        sim_all = cosines(view, qv, cfg, named)
        scope = Scope.build(view, kinds, flt, timeline)
        run = run_pass(view, self.state, cfg, model, query, qv, sim_all, k, scope, at)
        if run is None or run.order.size == 0:  # nothing (that the filters allow) to return
            return Retrieval(RetrievalResult(query, (), cfg.use_gate, 0.0, cfg.gate_tau),
                             () if run is None or run.activated is None else (run.activated,),
                             None if run is None else run.spikes)
        activated = [run.activated]
        passes = [run]  # whose activation paths the items show
        # the gate judges the top memory returned for the question as asked (the feedback
        # pass only re-ranks), of those its relevance placed: a version lifted above the
        # turn it updates (core/signals/versions.py) stands in for that turn, and need not
        # be about the question's words ("I cancelled IronWorks" for "Which gym ...?");
        # and the conversation's hand-overs aside (a reply lifted by its question, an
        # answered question below its answer: core/signals/replies.py), by its own score
        active = signals()
        placed = run.order[holds_place(run.adjustments, active, run.order)]
        own = own_evidence(run.score, run.adjustments, active)[placed]
        top = placed[int(np.argmax(own))] if placed.size else run.order[0]
        if cfg.gate_signal == "score":
            confidence = float(run.score[top])
        elif cfg.gate_signal == "similarity" or not cfg.use_activation:
            # the memory's own cosine, not the one its facts lend it (fact_role): the
            # threshold is one on whole turns, and a sentence is closer to any question
            confidence = float(np.clip(view.embeddings[run.cand[top]] @ qv, -1.0, 1.0))
        else:
            confidence = float(run.activation[top])
        verdict = None
        if cfg.use_gate:  # topic, attribution and presence checks (core/retrieval/gate.py)
            turns = view.is_episode if scope.anchors is None else view.is_episode & scope.anchors
            verdict = gate.evaluate(view, self.state.bm25, query, cfg, confidence, turns,
                                    self.words, run.cand[run.order])
        rejected = verdict is not None and verdict.rejected
        if cfg.entity_feedback and cfg.use_graph:
            found = feedback_entities(self.state, view, run, cfg.entity_feedback, query)
            if found:
                # the entities join the query: their names the lexical trigger's text,
                # their mean vector the query vector (Rocchio-style, weight
                # feedback_weight), and the whole pass runs again
                g = self.state.graph
                ev = _unit(np.mean([g.vectors[e] for e in found], axis=0))
                q2 = _unit(qv + np.float32(cfg.feedback_weight) * ev)
                names = " ".join(g.node(e)["name"] for e in found)
                again = run_pass(view, self.state, cfg, model, f"{query} {names}", q2,
                                 cosines(view, q2, cfg, named), k, scope, at,
                                 asked=(query, sim_all))
                if again is not None:
                    explain_feedback(self.state, view, run, again, found)
                    activated.append(again.activated)
                    passes.append(again)
                    run = merge_feedback(run, again, scope, k, cfg.spreading_factor,
                                         [view.index[ep] for ep in found.values()])
        activation = activation_vector(view, run) if cfg.use_activation else None
        weights = None if run.own_score else shown_weights(cfg)
        led = led_by(view, run.cand[run.order], activation)
        items = tuple(item(self.state, view, run, j, passes, weights, concepts)
                      for j, concepts in zip(run.order.tolist(), led))
        return Retrieval(RetrievalResult(query, items, bool(rejected), confidence, cfg.gate_tau,
                                         verdict), tuple(a for a in activated if a is not None),
                         run.spikes)


class RetrievalSteps:
    """The pipeline one stage at a time, for benchmarks and explanations (see
    :meth:`Synapse.inspect_retrieval`, which holds the memory's lock meanwhile)."""

    def __init__(self, state: MemoryState, retriever: Retriever) -> None:
        self.state = state
        self.retriever = retriever
        self.view = state.compiled()

    def query(self, text: str, vector: np.ndarray, cfg: SynapseConfig) -> Query:
        """The triggers' stage: cosines of every node and the anchors for ``text``."""
        qv = np.asarray(vector, dtype=np.float32)
        sim = cosines(self.view, qv, cfg, self.retriever.names(self.view, text, cfg))
        dated = focus.date_scope(self.view, text) if cfg.date_weight < 1.0 else None
        anchors = triggers(self.view, self.state, cfg, text, sim, anchor_scope(self.view, cfg, None),
                           dated=dated)
        return Query(text, qv, sim, anchors.indices)

    def activate(self, query: Query, cfg: SynapseConfig) -> Activation:
        """The model's stage for a prepared :meth:`query`."""
        return self.retriever.model(cfg.model).activate(self.view, query, cfg)

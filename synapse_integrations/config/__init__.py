"""Every hyperparameter of the engine.

The configuration is frozen data, validated when it is built. ``SynapseConfig.paper()``
holds the SYNAPSE paper's values exactly; ``SynapseConfig()`` differs from it in a few
fields (:data:`PAPER_DEFAULTS` lists them) chosen by measurement on LoCoMo dev
data (docs/benchmarks.md). Each mechanism of the paper's ablation table can be switched
off by a flag, so the ablation rows can be measured on the same memory:

>>> from synapse_integrations import SynapseConfig
>>> cfg = SynapseConfig()
>>> cfg.spreading_factor, cfg.decay, cfg.inhibition_top_m
(0.8, 0.5, 7)
>>> cfg.iterations, SynapseConfig.paper().iterations
(2, 3)
>>> cfg.replace(use_fan_effect=False).use_fan_effect
False

Each field belongs to one section, graph-time (set when the memory is opened) or
query-time (a per-call config may change it): :mod:`.sections`, docs/configuration.md.
Decisions the paper leaves open are documented in ``docs/concepts.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ..errors import ConfigError
from ..presets import ABLATIONS, PAPER_DEFAULTS
from .sections import Sectioned, graph_fields, setting
from .validation import INT_LIMITS, MAX_FACTOR, RETIRED_FIELDS, SECONDS_PER_UNIT, validate
from .validation import MAX_EMBEDDING_DIM as MAX_EMBEDDING_DIM  # importable here, as before

TimeUnit = Literal["seconds", "minutes", "hours", "days"]
GateSignal = Literal["activation", "similarity", "score"]
AbstractionScope = Literal["mentions", "window"]
FactRole = Literal["evidence", "anchor"]


@dataclass(frozen=True)
class SynapseConfig(Sectioned):
    """Hyperparameters of the SYNAPSE engine (defaults from the paper, section 3 and appendix A/C).

    Every field belongs to one section (:meth:`sections`, :meth:`section`,
    :meth:`section_of`; the table: :data:`~synapse_integrations.config.sections.SECTIONS`).
    The *graph-time* sections are read when turns are stored and consolidated, so they are
    set when the memory is opened; a per-call config (``Synapse.retrieve(...,
    config=...)``, REST's ``config``) may change only the *query-time* ones
    (:meth:`query_override`).

    embeddings (graph-time)
        embedding_dim: the dimension of the embedder's vectors and of the stored ones; a
            memory built with one dimension cannot be opened with another.

    index (graph-time): how a stored turn is indexed
        lexical_stemming: the BM25 index matches words by their English Snowball stem
            ("moved" finds "move", "issues" finds "issue"; numbers and codes stay exact).
            Set when the memory is opened (the index is built with it), like
            ``embedding_dim``; a per-call config may not change it.
        speaker_in_document: the embedder and BM25 read a turn by a named speaker as
            ``"<speaker>: <text>"`` (once; role words such as "user" are not names), so
            questions that name a person reach that person's turns whether or not the
            caller put the name in the text (:mod:`synapse_integrations.core.text.documents`).
            Set when the memory is opened, like ``lexical_stemming``.

    graph (graph-time): graph construction (Algorithm 1)
        consolidation_interval: consolidate every N turns (0 disables automatic consolidation).
        dedup_threshold: a new concept whose cosine with an existing one exceeds this merges into it.
        ema_momentum: on a merge, the concept embedding becomes
            ``normalize(m * old + (1 - m) * new)``.
        abstraction_weight: weight of episode <-> concept edges (both directions).
        abstraction_scope: which episodes of the window a concept is linked to:
            ``"mentions"``, the turns that mention it (the extractor's ``source_ids``; all
            of the window when it names none), or ``"window"``, every turn of the window
            (the paper's co-occurrence rule).
        association_threshold / association_top_k: concept <-> concept edges.
        temporal_rho / temporal_unit: temporal edge weight ``exp(-rho * |dt|)``, dt in this unit.
        temporal_bidirectional: also link each episode back to the previous one.
        prune_top_k: keep only the K strongest incoming edges of each node.
        max_concepts_per_window: the extractor's budget of concepts per window.
        concepts_per_turn: ``K > 0`` shares that budget fairly: after the speakers, each
            turn of the window takes its best concept in turn, round after round, and links
            to at most ``K`` concepts (speakers aside), so a long turn neither uses up the
            budget nor collects links by being long; 0 (default) keeps the ranked budget
            (docs/benchmarks.md, "Long haystacks": it helped LongMemEval, cost LoCoMo).
        dormancy_epsilon / dormancy_windows: nodes whose activation stays below epsilon for W
            consolidation windows are dormant, and archived (moved out of the active graph,
            recoverable) while the graph is over ``dormancy_capacity``.
        dormancy_capacity: the active graph's bound (the paper's |V| <= 10,000): dormant
            nodes are archived only while the active graph holds more nodes than this,
            the longest dormant first and no more than the excess, so a memory under the
            bound forgets nothing for not being asked about it (an agent that reads
            between writes lost most of a conversation's turns before its end: the
            ``bench agent`` end recall). 0: every dormant node is archived at any size.
        pagerank_damping: the damping factor of the graph's PageRank (the score's
            ``weight_pagerank`` term), computed when the graph changes.

    lifecycle (graph-time; mnemos, seed 004; docs/concepts.md, "Memory lifecycle")
        reconsolidation: a stored turn that restates an attribute with a new value marks
            the earlier turn superseded (:mod:`~synapse_integrations.core.lifecycle.reconsolidation`;
            the detector is the engine's ``lifecycle``: a rule offline, or an LLM).
        surprisal_gate / surprisal_tau / surprisal_window: each turn's surprisal against
            the prediction of the last ``surprisal_window`` turns
            (:mod:`~synapse_integrations.core.lifecycle.surprisal`); turns under ``surprisal_tau``
            are stored with low salience and score ``low_salience_weight`` of their score.
        sleep_auto / sleep_episodes / sleep_seconds: consolidate episodes into semantic
            facts (:mod:`~synapse_integrations.core.lifecycle.sleep`) once ``sleep_episodes`` new
            episodes and ``sleep_seconds`` of event time have passed since the last sleep
            (``Synapse.sleep()`` runs it on demand); ``sleep_archive_sources`` archives the
            episodes a fact was drawn from (restorable).

    triggers (query-time): the anchors, and the entity-feedback pass
        anchor_top_k: how many BM25 hits and how many dense hits seed the activation.
        anchor_similarity_ratio: a dense hit seeds the activation only when its cosine is
            at least this fraction of the best node's (0: every one of the top
            ``anchor_top_k``). In a memory of a few dozen nodes the dense top-k is the whole
            memory, unrelated turns included, and spreading from all of them ranks by the
            graph's shape instead of the question (docs/benchmarks.md, "Small memories").
        entity_feedback: ``r > 0`` runs a second pass: the named-entity concepts linked to
            the first pass's ``r`` best episodes (not topics, not speakers, not already in
            the query) join the query (their names the lexical trigger's text, their mean
            embedding the query vector with weight ``feedback_weight``), and triggers,
            dynamics and score run again; each memory then keeps the better of its
            first-pass score and ``spreading_factor`` times its second-pass score (one
            hop further: :func:`~synapse_integrations.core.retrieval.passes.merge_feedback`), and
            the gate still judges the first pass. It lets an answer linked to the question
            only through an entity ("the person from the ski trip" -> Dana -> Dana's news)
            be found, at the cost of a second pass when such entities exist; 2 (default);
            0 is the paper's single pass. See docs/benchmarks.md, "Bridges by default".
        feedback_weight: weight of the entities' mean embedding added to the (unit) query
            vector by ``entity_feedback``.
        fact_role: how sleep's facts take part in retrieval: ``"evidence"`` (default) an
            episode is as close to the question as the closest fact drawn from it, and
            facts are not anchors; ``"anchor"`` facts are concepts like any other
            (anchors, spreaders). Facts are returned only with ``kinds`` holding
            ``"concept"`` either way.

    dynamics (query-time): spreading activation
        alpha: initial activation ``a0 = alpha * cos(h_i, h_q)`` for anchors.
        spreading_factor (S), decay (delta), fan effect, inhibition (beta, M: the fields
        ``inhibition_beta``, ``inhibition_top_m``), sigmoid firing (gamma, theta:
        ``sigmoid_gamma``, ``sigmoid_theta``), iterations (T).
        fan_exponent: the fan effect divides an edge's weight by ``out_degree(src) **
            fan_exponent`` (the paper: 1, plain division; 0 is no fan effect).
        fan_in_exponent: also divide it by ``in_degree(dst) ** fan_in_exponent``, so a
            node's inflow is a mean over its in-neighbours rather than a sum (0, the
            paper and the default: a sum; measured in docs/benchmarks.md, "Long haystacks").

    score (query-time): the hybrid score
        weight_similarity / weight_activation / weight_pagerank: the hybrid score's lambdas.
        weight_lexical: weight of the query's BM25 score (divided by the best BM25 score of
            the query, so in [0, 1]) in the hybrid score. The paper uses BM25 only to pick
            anchors (0 here); see docs/benchmarks.md for why our default adds it.
        weight_distinct: weight of distinctive evidence
            (:func:`~synapse_integrations.core.kernels.scoring.singled_out`): the one turn that
            alone contains the query's rare tokens (an order number, a code word) gains up
            to this much, in proportion to the share of the query's IDF mass those tokens
            carry and its lead over any other turn; no other node gains anything. Spreading activation rewards turns in well-connected
            clusters, so without it a turn singled out by a rare token can rank below its
            near-duplicates (docs/benchmarks.md, "Exact identifiers").
        distinct_similarity_ratio: only turns whose cosine with the query is at least this
            fraction of the best turn's can be singled out (in a small memory every word is
            rare: "Where does Sam live now?" must not lift the one turn saying "now").
        score_all_nodes: rank every active node by the hybrid score (the paper ranks only
            the anchors and the nodes activation reached, so a node that dense search
            alone would return can be lost when inhibition silences it).
        top_k: default number of items returned.

    gate (query-time)
        gate_signal / gate_tau: reject when the top item's signal is below ``gate_tau``.
            ``"activation"`` (the paper): its activation; ``"similarity"``: its cosine with
            the query; ``"score"``: its hybrid score.
        gate_attribution_margin: the evidence gate's attribution check (core/retrieval/gate.py)
            rejects a question naming one speaker when a turn not about them covers the
            question's attribute terms by more than this share beyond the best turn about
            them.
        gate_presence_min: its presence check rejects when no turn about the named person
            (any turn, when none is named) covers at least this share of the attribute
            terms (words memory never saw count as uncovered); 0 (default) switches it off,
            0.01 rejects only when none of them is held in any inflection (docs/gate.md).
        gate_presence_similarity: for presence, a turn also holds a question word when a
            concept linked to it has at least this cosine with the word's embedding ("dog"
            and a "puppy" concept: 0.80; "dog" and "painting": 0.31; "physio" and
            "physiotherapist": 0.50); 1 matches words only.
        gate_first_person: the speaker a question in the first person ("my", "I") and
            naming no speaker is about, for attribution and presence (e.g. ``"user"`` in a
            chat memory whose turns have speakers ``user``/``assistant``); ``""`` (default)
            leaves such questions to the topic check and presence over every turn.

    signals.salience (query-time)
        low_salience_weight: a turn the surprisal gate stored with low salience scores this
            share of its score (:mod:`~synapse_integrations.core.signals.salience`).

    signals.versions (query-time)
        superseded_weight: an episode replaced by a newer version (:meth:`Synapse.update`)
            scores this fraction of its score, and always below its replacement when both
            are ranked.
        version_recency: a question not about the past ranks the newest user turn that
            holds most of its words right above the best older turn holding no other of
            them (versions found at question time,
            :func:`~synapse_integrations.core.signals.versions.rank_recent`).

    signals.replies (query-time)
        reply_weight: a turn that answers the question asked right before it (by another
            speaker, not the assistant) scores at least this share of that question's
            score, and is a candidate whenever the question is
            (:func:`~synapse_integrations.core.signals.replies.lift_replies`); 0 switches it
            off. The default is the spreading factor's 0.8: a reply is one hop from its
            question. See docs/benchmarks.md, "Conversational context".
        follow_up_weight: a reply whose question followed up a statement by the reply's
            own speaker ("We went to the memorial." / "How did the kids react?" /
            "Awestruck.") scores at least this share of that statement's score, and is a
            candidate whenever the statement is; 0 switches it off. The default 0.64 is
            two hops at the spreading factor (statement, question, reply). See
            docs/benchmarks.md, "Follow-up questions".

    signals.asks (query-time)
        question_weight: the share of its score that a turn which only asks keeps once
            memory holds its answer (a question is evidence of what was asked, not of the
            answer): the next turn answers it, or a statement stored before it was about it
            (cosine >= 0.5). A turn that partly asks keeps ``1 - (1 - w) x`` the share of
            its characters in sentences that end in "?"; a question that brings something
            new, and any turn when the query is about what was asked ("what did I ask you
            about..."), keep their score
            (:mod:`~synapse_integrations.core.signals.asks`); 1 switches it off. See
            docs/benchmarks.md, "The agent loop".

    signals.focus (query-time)
        speaker_free_cosine: when a question names speakers of the memory, its cosines
            leave their names out, on both sides (the component along the embedding of
            what a turn's document adds for the speaker, "Sam:"): the name alone made every
            short turn of theirs look like the answer. Who the question is about is
            ``named_speaker_weight``'s work; the gate's topic check reads the plain cosine
            (:func:`~synapse_integrations.core.signals.focus.names_out`). See
            docs/benchmarks.md, "Names out of the cosine".
        named_speaker_weight: when a question names exactly one of the memory's speakers,
            the other speakers' turns score this share of their score
            (:func:`~synapse_integrations.core.signals.focus.focus`); 1 switches it off.
        first_person_weight: when a question names no speaker but is asked in the first
            person ("what do I...", "my"), in a memory whose turns carry roles (user /
            assistant), the turns that are not the user's score this share of their score;
            and when it recalls the assistant's words ("the companies you mentioned"), the
            user's turns do. 1 switches both off.
        date_weight: when a question names a date ("on 25 May, 2022", "in May 2022"), the
            turns outside that day, month or year (one day's slack on each side) score this
            share of their score, and the period's own turns join the dense trigger's
            anchors (:mod:`~synapse_integrations.core.signals.focus`); 1 switches it off.

    switches (query-time; for the paper's ablations)
        use_bm25, use_dense, use_graph, use_activation, use_fan_effect, use_inhibition,
        use_decay, use_pagerank, use_gate; use_evidence_gate (the attribution and
        presence checks on top of ``gate_tau``; docs/gate.md).

    models (query-time)
        model: the retrieval model (:mod:`synapse_integrations.core.models`): how energy
            moves from the anchors through the memory. ``"synapse"`` (default) is the
            paper's spreading activation; ``"evermind"``, ``"synaptic"``, ``"mnemos"`` and
            ``"ppr"`` are the other seed systems (docs/models.md).
        model_params: hyperparameters of the non-default models, one dict per model name
            (``{"evermind": {"gamma": 0.9}}``; defaults and bounds: docs/models.md).
            Retrieval-only: changing them never changes the graph.

    extra (query-time)
        extra: free-form settings for extensions (kept JSON-serialisable); part of
            :meth:`graph_signature`, since an extension may read it on the write path.
    """

    # --- embeddings (graph-time)
    embedding_dim: int = setting("embeddings", 384)

    # --- graph construction (Algorithm 1; graph-time)
    consolidation_interval: int = setting("graph", 5)
    dedup_threshold: float = setting("graph", 0.92)
    ema_momentum: float = setting("graph", 0.9)
    abstraction_weight: float = setting("graph", 0.8)
    abstraction_scope: AbstractionScope = setting("graph", "mentions")
    association_threshold: float = setting("graph", 0.92)
    association_top_k: int = setting("graph", 15)
    temporal_rho: float = setting("graph", 0.01)
    temporal_unit: TimeUnit = setting("graph", "hours")
    temporal_bidirectional: bool = setting("graph", False)
    prune_top_k: int = setting("graph", 15)
    dormancy_epsilon: float = setting("graph", 0.01)
    dormancy_windows: int = setting("graph", 10)
    dormancy_capacity: int = setting("graph", 10_000)
    max_concepts_per_window: int = setting("graph", 12)
    concepts_per_turn: int = setting("graph", 0)

    # --- retrieval: triggers and dynamics (section 3.2); the order of the fields is the
    # positional order of the constructor, so a field keeps its place whatever its section
    model: str = setting("models", "synapse")
    model_params: dict[str, Any] = setting("models", factory=dict)
    anchor_top_k: int = setting("triggers", 20)
    anchor_similarity_ratio: float = setting("triggers", 0.4)
    lexical_stemming: bool = setting("index", True)
    speaker_in_document: bool = setting("index", True)
    alpha: float = setting("dynamics", 1.0)
    spreading_factor: float = setting("dynamics", 0.8)
    decay: float = setting("dynamics", 0.5)
    inhibition_beta: float = setting("dynamics", 0.05)
    inhibition_top_m: int = setting("dynamics", 7)
    sigmoid_gamma: float = setting("dynamics", 5.0)
    sigmoid_theta: float = setting("dynamics", 0.5)
    iterations: int = setting("dynamics", 2)
    fan_exponent: float = setting("dynamics", 0.5)
    fan_in_exponent: float = setting("dynamics", 0.0)

    # --- retrieval: hybrid score and gate (sections 3.3, 3.4), and the ranking signals
    weight_similarity: float = setting("score", 0.5)
    weight_activation: float = setting("score", 0.15)
    weight_pagerank: float = setting("score", 0.1)
    weight_lexical: float = setting("score", 0.3)
    weight_distinct: float = setting("score", 1.0)
    distinct_similarity_ratio: float = setting("score", 0.8)
    pagerank_damping: float = setting("graph", 0.85)  # the graph's PageRank: sections.py
    top_k: int = setting("score", 30)
    superseded_weight: float = setting("signals.versions", 0.5)
    version_recency: bool = setting("signals.versions", True)
    score_all_nodes: bool = setting("score", False)
    entity_feedback: int = setting("triggers", 2)
    feedback_weight: float = setting("triggers", 0.5)
    reply_weight: float = setting("signals.replies", 0.8)
    follow_up_weight: float = setting("signals.replies", 0.64)
    question_weight: float = setting("signals.asks", 0.25)
    speaker_free_cosine: bool = setting("signals.focus", True)
    named_speaker_weight: float = setting("signals.focus", 0.85)
    first_person_weight: float = setting("signals.focus", 0.7)
    date_weight: float = setting("signals.focus", 0.7)
    gate_signal: GateSignal = setting("gate", "similarity")
    gate_tau: float = setting("gate", 0.25)
    gate_attribution_margin: float = setting("gate", 0.05)
    gate_presence_min: float = setting("gate", 0.01)
    gate_presence_similarity: float = setting("gate", 0.5)
    gate_first_person: str = setting("gate", "")

    # --- lifecycle (mnemos): its write side is graph-time, its read side query-time
    reconsolidation: bool = setting("lifecycle", False)
    surprisal_gate: bool = setting("lifecycle", False)
    surprisal_tau: float = setting("lifecycle", 0.3)
    surprisal_window: int = setting("lifecycle", 10)
    low_salience_weight: float = setting("signals.salience", 0.8)
    sleep_auto: bool = setting("lifecycle", True)
    sleep_episodes: int = setting("lifecycle", 10)
    sleep_seconds: float = setting("lifecycle", 3600.0)
    sleep_archive_sources: bool = setting("lifecycle", False)
    fact_role: FactRole = setting("triggers", "evidence")

    # --- mechanism switches (query-time)
    use_bm25: bool = setting("switches", True)
    use_dense: bool = setting("switches", True)
    use_graph: bool = setting("switches", True)
    use_activation: bool = setting("switches", True)
    use_fan_effect: bool = setting("switches", True)
    use_inhibition: bool = setting("switches", True)
    use_decay: bool = setting("switches", True)
    use_pagerank: bool = setting("switches", True)
    use_gate: bool = setting("switches", True)
    use_evidence_gate: bool = setting("switches", True)

    # --- free-form, for extensions (kept JSON-serialisable)
    extra: dict[str, Any] = setting("extra", factory=dict)

    def __post_init__(self) -> None:
        validate(self)

    # -- the switches, resolved into kernel arguments (the one place that does it) ---------
    def propagation_params(self) -> dict[str, Any]:
        """Keyword arguments of the propagation matrix (``Compiled.propagation``).

        >>> SynapseConfig(use_fan_effect=False).propagation_params()
        {'use_fan_effect': False, 'fan_exponent': 0.5, 'fan_in_exponent': 0.0}
        """
        return {"use_fan_effect": self.use_fan_effect, "fan_exponent": self.fan_exponent,
                "fan_in_exponent": self.fan_in_exponent}

    def spread_params(self) -> dict[str, Any]:
        """Keyword arguments of :func:`~synapse_integrations.core.kernels.dynamics.spread_activation`
        (Eqs. 2-4), with the ablation switches applied (``use_decay=False``: decay 0).

        >>> SynapseConfig(use_decay=False).spread_params()["decay"]
        0.0
        """
        return {"iterations": self.iterations, "spreading_factor": self.spreading_factor,
                "decay": self.decay if self.use_decay else 0.0,
                "inhibition_beta": self.inhibition_beta,
                "inhibition_top_m": self.inhibition_top_m, "gamma": self.sigmoid_gamma,
                "theta": self.sigmoid_theta, "use_inhibition": self.use_inhibition}

    @property
    def uses_pagerank(self) -> bool:
        """PageRank enters the score (it is a graph signal: off without the graph)."""
        return self.use_pagerank and self.use_graph

    @property
    def uses_lexical_score(self) -> bool:
        """The normalised BM25 score enters the hybrid score."""
        return self.use_bm25 and self.weight_lexical > 0

    @property
    def uses_distinct_score(self) -> bool:
        """Distinctive lexical evidence enters the hybrid score."""
        return self.use_bm25 and self.weight_distinct > 0

    def score_weights(self) -> dict[str, float]:
        """The hybrid score's weights (Eq. 5 plus the lexical term), with the switches
        applied: a signal that is off weighs 0.

        >>> SynapseConfig(use_activation=False).score_weights()["weight_activation"]
        0.0
        """
        return {"weight_similarity": self.weight_similarity,
                "weight_activation": self.weight_activation if self.use_activation else 0.0,
                "weight_pagerank": self.weight_pagerank if self.uses_pagerank else 0.0,
                "weight_lexical": self.weight_lexical if self.uses_lexical_score else 0.0,
                "weight_distinct": self.weight_distinct if self.uses_distinct_score else 0.0}

    # -- helpers -----------------------------------------------------------------------------
    @property
    def seconds_per_time_unit(self) -> float:
        """Seconds in one ``temporal_unit`` (the unit of ``dt`` in ``exp(-rho * dt)``)."""
        return SECONDS_PER_UNIT[self.temporal_unit]

    #: Fields that shape the graph when turns are ingested and consolidated: those of the
    #: graph-time sections (:data:`~.sections.SECTIONS`), set below the class. Two configs
    #: that agree on these build the same graph from the same turns, so they can share one
    #: memory and differ only at query time (see ``Synapse.retrieve_by_vector(...,
    #: config=...)``, which refuses a change to them: :meth:`query_override`).
    GRAPH_FIELDS: ClassVar[tuple[str, ...]]

    def graph_signature(self) -> tuple[Any, ...]:
        """The values of :attr:`GRAPH_FIELDS` plus ``extra`` (hashable): equal signatures
        mean the same ingested graph.

        >>> SynapseConfig().graph_signature() == SynapseConfig.ablation("no-fan").graph_signature()
        True
        """
        import json

        return tuple(getattr(self, f) for f in self.GRAPH_FIELDS) + (
            json.dumps(self.extra, sort_keys=True),)

    def replace(self, **changes: Any) -> SynapseConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def with_model(self, name: str, **params: Any) -> SynapseConfig:
        """A copy that retrieves with model ``name``, ``params`` set in its
        ``model_params`` entry (its other parameters, and other models' entries, kept).

        >>> SynapseConfig(model_params={"ppr": {"tol": 1e-4}}).with_model("ppr", damping=0.7).model_params
        {'ppr': {'tol': 0.0001, 'damping': 0.7}}
        """
        return self.replace(model=name, model_params={
            **self.model_params, name: {**self.model_params.get(name, {}), **params}})

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (stored in snapshot manifests)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SynapseConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error naming them (and, for a
        retired field, what replaced it: :data:`RETIRED_FIELDS`)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            hints = "".join(f"; {k} was replaced by {RETIRED_FIELDS[k]}" for k in unknown
                            if k in RETIRED_FIELDS)
            raise ConfigError(f"unknown SynapseConfig field(s): {', '.join(unknown)}{hints}")
        return cls(**data)

    @classmethod
    def paper(cls) -> SynapseConfig:
        """The paper's defaults exactly (section 3, appendix A and C): concepts linked to
        every turn of their window, BM25 only picks anchors, plain fan effect, three
        iterations, PageRank in the score, gate on the top item's activation.
        ``SynapseConfig()`` differs in the fields of :data:`PAPER_DEFAULTS` (measured on
        LoCoMo dev data: docs/benchmarks.md)."""
        return cls(**PAPER_DEFAULTS)

    @classmethod
    def ablation(cls, name: str, base: SynapseConfig | None = None) -> SynapseConfig:
        """A named ablation row of the paper's Table 3.

        >>> SynapseConfig.ablation("no-fan").use_fan_effect
        False
        """
        base = base or cls()
        if name not in ABLATIONS:
            raise ConfigError(f"unknown ablation {name!r}; choose one of {sorted(ABLATIONS)}")
        return base.replace(**ABLATIONS[name])


SynapseConfig.GRAPH_FIELDS = graph_fields(SynapseConfig)

__all__ = ["INT_LIMITS", "MAX_FACTOR", "PAPER_DEFAULTS", "RETIRED_FIELDS", "SynapseConfig"]

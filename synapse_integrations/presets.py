"""Named configurations: the SYNAPSE paper's values, the ablation rows of its Table 3, and
the engine options the benchmarks measure as methods of their own.

Plain data (field name -> value), applied with :meth:`SynapseConfig.replace`:

>>> from synapse_integrations import SynapseConfig
>>> from synapse_integrations.presets import ABLATIONS
>>> SynapseConfig().replace(**ABLATIONS["no-fan"]).use_fan_effect
False
>>> SynapseConfig.paper().iterations == PAPER_DEFAULTS["iterations"]
True
"""

from __future__ import annotations

from typing import Any

__all__ = ["ABLATIONS", "BENCH_OPTIONS", "LIFECYCLE_OPTIONS", "PAPER_DEFAULTS"]

#: The paper's values of every field whose default we changed (``SynapseConfig.paper()``;
#: why each default differs: docs/concepts.md, "Where our defaults differ from the paper").
PAPER_DEFAULTS: dict[str, Any] = {
    "abstraction_scope": "window",
    "anchor_top_k": 10,
    "anchor_similarity_ratio": 0.0,
    "inhibition_beta": 0.15,
    "iterations": 3,
    "fan_exponent": 1.0,
    "weight_activation": 0.3,
    "entity_feedback": 0,
    "reply_weight": 0.0,
    "follow_up_weight": 0.0,
    "question_weight": 1.0,
    "speaker_free_cosine": False,
    "named_speaker_weight": 1.0,
    "date_weight": 1.0,
    "first_person_weight": 1.0,
    "weight_pagerank": 0.2,
    "weight_lexical": 0.0,
    "weight_distinct": 0.0,
    "gate_signal": "activation",
    "gate_tau": 0.12,
    "use_evidence_gate": False,
    "sleep_auto": False,
}

#: The ablation rows of the paper's Table 3: each switches one mechanism off.
ABLATIONS: dict[str, dict[str, Any]] = {
    "full": {},
    "no-gate": {"use_gate": False},
    "no-inhibition": {"use_inhibition": False},
    "no-fan": {"use_fan_effect": False},
    "no-decay": {"use_decay": False},
    "no-pagerank": {"use_pagerank": False},
    "no-activation": {"use_activation": False},
    "no-graph": {"use_graph": False},
    # ours, not the paper's: what the additions to the score are worth
    "no-lexical": {"weight_lexical": 0.0},
    "no-distinct": {"weight_distinct": 0.0},
    "no-evidence-gate": {"use_evidence_gate": False},
    "no-sleep": {"sleep_auto": False},
    "no-feedback": {"entity_feedback": 0},
    "no-context": {"reply_weight": 0.0, "follow_up_weight": 0.0, "named_speaker_weight": 1.0,
                   "date_weight": 1.0, "first_person_weight": 1.0},
    "no-asked": {"question_weight": 1.0},
}

#: Options that are off by default, measured by the benchmarks as methods of their own
#: (none at present: entity feedback, the last one, is on by default since it merges its
#: pass with the first; ``synapse-no-feedback`` measures it).
BENCH_OPTIONS: dict[str, dict[str, Any]] = {}

#: The lifecycle mechanisms (mnemos, seed 004; docs/concepts.md, "Memory lifecycle"), each
#: switched on alone: benchmark methods run when asked for (``--methods``), not by default
#: (each ingests the memory once more).
LIFECYCLE_OPTIONS: dict[str, dict[str, Any]] = {
    "synapse-reconsolidation": {"reconsolidation": True},
    "synapse-surprisal": {"surprisal_gate": True},
    "synapse-sleep": {"sleep_auto": True},
}

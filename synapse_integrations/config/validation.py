"""The checks of :class:`~synapse_integrations.config.SynapseConfig`, run when one is built,
and the bounds they enforce.

>>> from synapse_integrations.config import SynapseConfig
>>> SynapseConfig(top_k=0)
Traceback (most recent call last):
...
synapse_integrations.errors.ConfigError: invalid SynapseConfig: top_k must be >= 1, got 0
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError

__all__ = ["INT_LIMITS", "MAX_EMBEDDING_DIM", "MAX_FACTOR", "RETIRED_FIELDS", "SECONDS_PER_UNIT",
           "validate"]

#: Upper bounds of the integer fields: each is far above any useful value and low enough
#: that a config (also one read back from a tampered snapshot) cannot hang retrieval or
#: consolidation.
INT_LIMITS: dict[str, int] = {
    "consolidation_interval": 100_000, "association_top_k": 10_000, "prune_top_k": 10_000,
    "dormancy_windows": 1_000_000, "dormancy_capacity": 1_000_000_000, "anchor_top_k": 10_000, "inhibition_top_m": 10_000,
    "iterations": 100, "top_k": 100_000, "max_concepts_per_window": 1_000,
    "entity_feedback": 100, "concepts_per_turn": 1_000, "surprisal_window": 1_000,
    "sleep_episodes": 1_000_000,
}
MAX_EMBEDDING_DIM = 65_536
#: Upper bound of the non-negative real fields (weights, rates, factors).
MAX_FACTOR = 1e6

#: Seconds in one ``temporal_unit``.
SECONDS_PER_UNIT: dict[str, float] = {
    "seconds": 1.0,
    "minutes": 60.0,
    "hours": 3600.0,
    "days": 86400.0,
}


#: Fields an earlier version had, and what took their place: a snapshot that holds one
#: opens without it (core/state/snapshot_checks.py), a config dict naming one is told.
RETIRED_FIELDS: dict[str, str] = {
    "answered_question_weight": "question_weight (signals.asks: every turn that asks, "
                                "answered or not)",
}


def validate(cfg: Any) -> None:
    """Raise :class:`~synapse_integrations.errors.ConfigError` naming the first field of
    ``cfg`` (a ``SynapseConfig``) that is out of range or of the wrong type."""
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ConfigError(f"invalid SynapseConfig: {what}")

    need(isinstance(cfg.embedding_dim, int) and cfg.embedding_dim > 0,
         f"embedding_dim must be a positive int, got {cfg.embedding_dim!r}")
    need(isinstance(cfg.consolidation_interval, int) and cfg.consolidation_interval >= 0,
         f"consolidation_interval must be an int >= 0, got {cfg.consolidation_interval!r}")
    for name in ("dedup_threshold", "association_threshold"):
        v = getattr(cfg, name)
        need(-1.0 <= v <= 1.0, f"{name} must be a cosine in [-1, 1], got {v!r}")
    for name in ("ema_momentum", "abstraction_weight", "decay", "dormancy_epsilon",
                 "pagerank_damping", "superseded_weight", "gate_attribution_margin",
                 "distinct_similarity_ratio", "anchor_similarity_ratio", "gate_presence_min",
                 "surprisal_tau",
                 "gate_presence_similarity", "reply_weight", "follow_up_weight",
                 "question_weight",
                 "named_speaker_weight", "date_weight",
                 "first_person_weight",
                 "low_salience_weight"):
        v = getattr(cfg, name)
        need(0.0 <= v <= 1.0, f"{name} must be in [0, 1], got {v!r}")
    need(cfg.embedding_dim <= MAX_EMBEDDING_DIM,
         f"embedding_dim must be at most {MAX_EMBEDDING_DIM}, got {cfg.embedding_dim!r}")
    need(cfg.consolidation_interval <= INT_LIMITS["consolidation_interval"],
         f"consolidation_interval must be at most {INT_LIMITS['consolidation_interval']}, "
         f"got {cfg.consolidation_interval!r}")
    for name in ("association_top_k", "prune_top_k", "dormancy_windows", "dormancy_capacity",
                 "anchor_top_k",
                 "inhibition_top_m", "iterations", "top_k", "max_concepts_per_window",
                 "entity_feedback", "concepts_per_turn", "surprisal_window",
                 "sleep_episodes"):
        v = getattr(cfg, name)
        need(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT_LIMITS[name],
             f"{name} must be an int in [0, {INT_LIMITS[name]}], got {v!r}")
    need(cfg.top_k >= 1, f"top_k must be >= 1, got {cfg.top_k!r}")
    need(cfg.surprisal_window >= 1 and cfg.sleep_episodes >= 1,
         "surprisal_window and sleep_episodes must be >= 1")
    need(isinstance(cfg.sleep_seconds, (int, float)) and not isinstance(cfg.sleep_seconds, bool)
         and math.isfinite(cfg.sleep_seconds) and 0 <= cfg.sleep_seconds <= 1e9,
         f"sleep_seconds must be a number of seconds in [0, 1e9], got {cfg.sleep_seconds!r}")
    need(isinstance(cfg.gate_first_person, str),
         f"gate_first_person must be a speaker name (str), got {cfg.gate_first_person!r}")
    for name in ("reconsolidation", "surprisal_gate", "sleep_auto", "sleep_archive_sources",
                 "version_recency", "speaker_in_document"):
        need(isinstance(getattr(cfg, name), bool), f"{name} must be a bool")
    for name in ("temporal_rho", "alpha", "spreading_factor", "inhibition_beta",
                 "sigmoid_gamma", "weight_similarity", "weight_activation",
                 "weight_pagerank", "weight_lexical", "weight_distinct", "fan_exponent",
                 "fan_in_exponent",
                 "gate_tau",
                 "feedback_weight"):
        v = getattr(cfg, name)
        need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
             and 0 <= v <= MAX_FACTOR, f"{name} must be a number in [0, {MAX_FACTOR:g}], got {v!r}")
    need(isinstance(cfg.sigmoid_theta, (int, float)) and math.isfinite(cfg.sigmoid_theta)
         and abs(cfg.sigmoid_theta) <= MAX_FACTOR,
         f"sigmoid_theta must be a number in [-{MAX_FACTOR:g}, {MAX_FACTOR:g}]")
    # a threshold no signal can reach would refuse every query
    top = 1.0 if cfg.gate_signal != "score" else max(1.0, cfg.weight_similarity
                                                     + cfg.weight_activation
                                                     + cfg.weight_pagerank
                                                     + cfg.weight_lexical)
    need(cfg.gate_tau <= top, f"gate_tau must be at most {top:g} (the largest "
                              f"{cfg.gate_signal} a memory can have), got {cfg.gate_tau!r}")
    need(cfg.fact_role in ("evidence", "anchor"),
         f"fact_role must be 'evidence' or 'anchor', got {cfg.fact_role!r}")
    need(cfg.temporal_unit in SECONDS_PER_UNIT,
         f"temporal_unit must be one of {sorted(SECONDS_PER_UNIT)}, got {cfg.temporal_unit!r}")
    need(cfg.abstraction_scope in ("mentions", "window"),
         f"abstraction_scope must be 'mentions' or 'window', got {cfg.abstraction_scope!r}")
    need(cfg.gate_signal in ("activation", "similarity", "score"),
         f"gate_signal must be 'activation', 'similarity' or 'score', got {cfg.gate_signal!r}")
    need(cfg.use_bm25 or cfg.use_dense, "at least one of use_bm25 / use_dense must be on")
    need(isinstance(cfg.model_params, dict)
         and all(isinstance(k, str) and isinstance(v, dict) for k, v in cfg.model_params.items()),
         f"model_params must map model names to dicts, got {cfg.model_params!r}")
    need(isinstance(cfg.model, str) and bool(cfg.model.strip()),
         f"model must be the name of a retrieval model, got {cfg.model!r}")


"""Per-call retrieval settings sent by a client: :func:`retrieval_config` checks each one by
name and type against :class:`~synapse_integrations.config.SynapseConfig` (only the
query-time fields; the graph-building ones are fixed when a memory is opened).

>>> retrieval_config(SynapseConfig(), {"entity_feedback": 1}).entity_feedback
1
>>> retrieval_config(SynapseConfig(), {"top_k": "ten"})
Traceback (most recent call last):
...
synapse_integrations.errors.InvalidTypeError: config: top_k must be a int, got 'ten'
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from ..config import SynapseConfig
from ..errors import InvalidInputError, InvalidTypeError, SynapseError

__all__ = ["retrieval_config"]

#: Retrieval settings a single call may override (the graph-building fields may not).
_RETRIEVAL_FIELDS = {f.name: f for f in dataclasses.fields(SynapseConfig)
                     if f.name not in SynapseConfig.GRAPH_FIELDS and f.name != "extra"}


def retrieval_config(base: SynapseConfig, overrides: Any) -> SynapseConfig:
    """``base`` with per-call retrieval overrides (``{"entity_feedback": 1}``), each checked
    by name and type; graph-building fields cannot be overridden per call."""
    if overrides is None:
        return base
    if not isinstance(overrides, Mapping):
        raise InvalidTypeError(f"config must be an object of retrieval settings, got {type(overrides).__name__}")
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        f = _RETRIEVAL_FIELDS.get(key)
        if f is None:
            why = (f"is set when the memory is opened (section {SynapseConfig.section_of(key)!r} "
                   f"is graph-time)" if key in SynapseConfig.GRAPH_FIELDS else
                   "is not a retrieval setting that a call may override")
            raise InvalidInputError(
                f"config: {key!r} {why} (allowed: {', '.join(sorted(_RETRIEVAL_FIELDS))})")
        default = getattr(base, key)
        ok = (isinstance(value, bool) if isinstance(default, bool) else
              isinstance(value, int) and not isinstance(value, bool) if isinstance(default, int) else
              isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value) if isinstance(default, float) else
              isinstance(value, Mapping) if isinstance(default, dict) else
              isinstance(value, str))
        if not ok:
            raise InvalidTypeError(f"config: {key} must be a {type(default).__name__}, got {value!r}")
        changes[key] = dict(value) if isinstance(value, Mapping) else value
    try:
        return base.replace(**changes)
    except (TypeError, ValueError) as exc:  # ConfigError is a ValueError and keeps its class
        if isinstance(exc, SynapseError):
            raise
        raise InvalidInputError(f"config: {exc}") from None

"""What one method returned for one question: the record every bench loop keeps and
the reports (:mod:`~synapse_integrations.bench.compare`, the plots) read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["QuestionRecord"]


@dataclass
class QuestionRecord:
    """What one method returned for one question (kept for analysis and plots)."""

    conversation: str
    question: str
    category: Any
    evidence: tuple[str, ...]
    ranked: list[str]
    latency_ms: float
    confidence: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    rejected: bool | None = None
    qid: str = ""
    gate: dict[str, Any] | None = None  # the gate's verdict (check, reason, signals)

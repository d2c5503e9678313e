"""The schema the LLM extractor asks a chat model for, and what a reply becomes.

:class:`ExtractionSchema` (its :class:`ExtractedNode` and :class:`ExtractedEdge`: the
paper's appendix A.2, lenient about the keys models write), :func:`validate_reply` (a
parsed reply against it, with a short message for the retry), and :func:`to_extraction`
(a validated reply as the engine's :class:`~synapse_integrations.types.Extraction`: names
merged, edges checked, each concept's turns). :class:`~.llm.LLMExtractor` uses them.

>>> from synapse_integrations.types import Turn
>>> payload, problem = validate_reply({"nodes": [{"name": " Camping ", "confidence": 3}]})
>>> payload.nodes[0].name, payload.nodes[0].confidence, problem
('Camping', 1.0, '')
>>> to_extraction(payload, [Turn("t1", "We love camping.")], 12).concepts[0].source_ids
('t1',)
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ....types import Concept, Extraction, Relation, Turn

__all__ = ["ExtractedEdge", "ExtractedNode", "ExtractionSchema", "mentions", "short_error",
           "to_extraction", "validate_reply"]

# the package's logger name, as before the split into modules
logger = logging.getLogger(__package__)


def _clamp01(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number between 0 and 1")
    return min(1.0, max(0.0, value))


class ExtractedNode(BaseModel):
    """One node of the extraction schema (appendix A.2, task 1)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="short canonical name, reused when the same thing comes up again")
    type: str = Field(
        default="Concept",
        description="Person, Identity, Preference, Event, Technical, Place, Object or Concept",
    )
    confidence: float = Field(default=1.0, description="how sure the fact is, 0 to 1")
    attributes: dict[str, Any] = Field(
        default_factory=dict, description="optional short details (date, place, detail)"
    )

    @model_validator(mode="before")
    @classmethod
    def _lenient_keys(cls, data: Any) -> Any:
        """Accept ``attr``/``attrs`` and loose extra keys (``time``...) as attributes."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        given = data.get("attributes")
        attributes = dict(given) if isinstance(given, dict) else {}
        if isinstance(given, str) and given.strip():
            attributes["detail"] = given
        for key in ("attr", "attrs"):
            if key in data:
                value = data.pop(key)
                if isinstance(value, dict):
                    attributes.update(value)
                elif value not in (None, ""):
                    attributes["detail"] = value
        for key in list(data):
            if key not in ("name", "type", "confidence", "attributes"):
                attributes[key] = data.pop(key)
        data["attributes"] = attributes
        return data

    @field_validator("name", "type")
    @classmethod
    def _strip(cls, value: str) -> str:
        return " ".join(value.split())

    @field_validator("confidence")
    @classmethod
    def _clamp(cls, value: float) -> float:
        return _clamp01(value)


class ExtractedEdge(BaseModel):
    """One edge of the extraction schema (appendix A.2, task 2)."""

    model_config = ConfigDict(extra="ignore")

    src: str = Field(description="name of a node in the nodes list")
    rel: str = Field(description="short relation label in UPPER_SNAKE_CASE, e.g. HAS_INTEREST")
    tgt: str = Field(description="name of a node in the nodes list")
    weight: float = Field(default=1.0, description="strength of the link, 0 to 1")

    @model_validator(mode="before")
    @classmethod
    def _lenient_keys(cls, data: Any) -> Any:
        """Accept the short key ``w`` for ``weight``."""
        if isinstance(data, dict) and "weight" not in data and "w" in data:
            data = {**data, "weight": data["w"]}
        return data

    @field_validator("src", "rel", "tgt")
    @classmethod
    def _strip(cls, value: str) -> str:
        return " ".join(value.split())

    @field_validator("weight")
    @classmethod
    def _clamp(cls, value: float) -> float:
        return _clamp01(value)


class ExtractionSchema(BaseModel):
    """What the LLM extractor asks the model for: nodes and the edges between them."""

    model_config = ConfigDict(extra="ignore")

    nodes: list[ExtractedNode] = Field(default_factory=list)
    edges: list[ExtractedEdge] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _lenient_shape(cls, data: Any) -> Any:
        """Accept a bare list of nodes, and ``concepts``/``relations`` as key names."""
        if isinstance(data, list):
            return {"nodes": data}
        if isinstance(data, dict):
            data = dict(data)
            if "nodes" not in data and "concepts" in data:
                data["nodes"] = data.pop("concepts")
            if "edges" not in data and "relations" in data:
                data["edges"] = data.pop("relations")
            if "nodes" not in data:
                raise ValueError('the JSON object needs a "nodes" list')
        return data


def validate_reply(value: Any) -> tuple[ExtractionSchema | None, str]:
    try:
        return ExtractionSchema.model_validate(value), ""
    except ValidationError as exc:
        return None, short_error(exc)


def short_error(error: BaseException) -> str:
    if isinstance(error, ValidationError):
        parts = []
        for item in error.errors()[:5]:
            where = ".".join(str(p) for p in item.get("loc", ())) or "reply"
            parts.append(f"{where}: {item.get('msg', 'invalid')}")
        return "; ".join(parts)
    text = str(error).strip().replace("\n", " ")
    return text[:300] or type(error).__name__


def mentions(name: str, turns: Sequence[Turn]) -> tuple[str, ...]:
    """Ids of the turns that mention ``name`` (case-insensitive, whole words) or that
    ``name`` spoke."""
    pattern = re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)", re.IGNORECASE)
    low = name.lower()
    return tuple(
        t.id
        for t in turns
        if pattern.search(t.text) or (t.speaker is not None and t.speaker.strip().lower() == low)
    )


def to_extraction(
    payload: ExtractionSchema, turns: Sequence[Turn], max_concepts: int | None
) -> Extraction:
    """Validated schema -> Extraction: empty names dropped, duplicates merged, edges checked."""
    concepts: list[Concept] = []
    canonical: dict[str, str] = {}
    for node in payload.nodes:
        key = node.name.lower()
        if not node.name or key in canonical:
            continue
        if max_concepts is not None and len(concepts) >= max_concepts:
            break
        canonical[key] = node.name
        concepts.append(
            Concept(
                name=node.name,
                type=node.type or "Concept",
                confidence=node.confidence,
                attributes=dict(node.attributes),
                source_ids=mentions(node.name, turns),
            )
        )
    relations: list[Relation] = []
    seen: set[tuple[str, str, str]] = set()
    dropped = 0
    for edge in payload.edges:
        src, tgt = canonical.get(edge.src.lower()), canonical.get(edge.tgt.lower())
        if src is None or tgt is None or not edge.rel or src == tgt:
            dropped += 1
            continue
        if (src, edge.rel, tgt) in seen:
            continue
        seen.add((src, edge.rel, tgt))
        relations.append(Relation(src, edge.rel, tgt, weight=edge.weight))
    if dropped:
        logger.debug("dropped %d edge(s) that do not join two extracted nodes", dropped)
    return Extraction(concepts=tuple(concepts), relations=tuple(relations))

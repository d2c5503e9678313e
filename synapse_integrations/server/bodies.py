"""The REST API's request and response bodies (pydantic models; the OpenAPI schema is
built from them). Requests forbid unknown fields; an item's score components carry one
field per registered ranking signal (:mod:`synapse_integrations.core.signals`)."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..core.signals import HOP, signal_names

__all__ = ["ComponentsOut", "ConsistencyOut", "ConsolidationOut", "EpisodeOut", "EpisodesOut", "ErrorBody", "ErrorOut", "FeedbackIn", "ForgetIn", "GateOut", "HealthOut", "IdsIn", "IdsOut", "ItemOut", "RemovedOut", "RetrieveIn", "RetrieveOut", "Time", "TurnIn", "TurnsIn", "UpdateIn"]


Time = Union[str, float, None]


# ---------------------------------------------------------------------------------------
# request and response bodies
# ---------------------------------------------------------------------------------------
class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TurnIn(_In):
    text: str = Field(description="what was said")
    speaker: Optional[str] = None
    timestamp: Time = Field(None, description="event time: ISO 8601 or epoch seconds (default: now)")
    metadata: Optional[dict[str, Any]] = None
    id: Optional[str] = Field(None, description="your id (an idempotency key); default: a new one")
    vector: Optional[list[float]] = Field(
        None, description="the embedding to store instead of embedding the text (imports)")


class TurnsIn(_In):
    turns: list[TurnIn] = Field(max_length=10_000)


class RetrieveIn(_In):
    query: str
    k: Optional[int] = Field(None, ge=1, le=1000, description="how many memories (default: config top_k)")
    kinds: list[Literal["episode", "concept"]] = Field(["episode"], min_length=1)
    speakers: Union[str, list[str], None] = None
    since: Time = Field(None, description="event time >= since")
    until: Time = Field(None, description="event time < until")
    where: Optional[dict[str, Any]] = Field(None, description="Chroma-style filter on turn metadata")
    config: Optional[dict[str, Any]] = Field(None, description="retrieval settings for this call")
    as_of: Time = Field(None, description="read the memory as it stood then (event time)")
    current_only: bool = Field(False, description="hide versions replaced by then")
    at: Time = Field(None, description="when the question is asked: its relative dates ('last "
                                       "week') are read against it (default: as_of, else now)")


class ForgetIn(_In):
    ids: Optional[list[str]] = None
    speaker: Optional[str] = None
    since: Time = None
    until: Time = None
    where: Optional[dict[str, Any]] = None
    everything: bool = False


class FeedbackIn(_In):
    query: str
    used_ids: list[str]
    unused_ids: list[str] = []
    alpha: float = 0.1


class UpdateIn(_In):
    id: str
    text: Optional[str] = None
    metadata: Optional[dict[str, Any]] = None
    speaker: Optional[str] = None
    timestamp: Time = None
    keep_history: bool = True


class SupersedeIn(_In):
    old_id: str = Field(description="the stored turn that no longer holds")
    new_id: str = Field(description="the stored turn that replaces it")


class IdsIn(_In):
    ids: list[str] = Field(max_length=10_000)


class FreezeIn(_In):
    frozen: bool = True


class ErrorBody(BaseModel):
    type: str
    message: str
    status: int
    categories: Optional[list[str]] = None
    details: Optional[list[Any]] = None


class ErrorOut(BaseModel):
    error: ErrorBody


class _Components(BaseModel):
    # a signal registered after this module was imported still shows (as an extra key)
    model_config = ConfigDict(extra="allow")

    similarity: float
    activation: float
    pagerank: float
    bm25_rank: Optional[int] = None
    dense_rank: Optional[int] = None
    lexical: float = 0.0
    distinct: float = 0.0
    weights: Optional[dict[str, float]] = None


#: An item's score components: the hybrid score's, and one per ranking signal (plus the
#: feedback hop), named as the signals are registered (core/signals).
ComponentsOut = create_model("ComponentsOut", __base__=_Components,
                             **{name: (float, 0.0) for name in (*signal_names(), HOP)})


class ItemOut(BaseModel):
    id: str
    text: str
    kind: Literal["episode", "concept"]
    score: float
    components: ComponentsOut
    speaker: Optional[str] = None
    timestamp: Optional[str] = None
    metadata: dict[str, Any]
    path: list[str]
    concepts: list[str]
    superseded_by: Optional[str] = None
    superseded_at: Optional[str] = None
    supersedes: Optional[str] = None
    valid_from: Optional[str] = None
    valid_until: Optional[str] = None


class GateOut(BaseModel):
    decision: Literal["accepted", "rejected"]
    reason: str
    check: Optional[str] = None
    evidence_id: Optional[str] = None


class RetrieveOut(BaseModel):
    query: str
    items: list[ItemOut]
    rejected: bool
    confidence: float
    gate_tau: float
    gate: GateOut


class EpisodeOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    kind: str
    text: str
    speaker: Optional[str] = None
    ts: float
    seq: int
    metadata: dict[str, Any]
    archived: bool = False


class EpisodesOut(BaseModel):
    episodes: list[EpisodeOut]
    total: int
    offset: int
    limit: int
    next_offset: Optional[int] = None


class ConsistencyOut(BaseModel):
    ok: bool
    episodes: int
    concepts: int
    archived: int
    vectors: int
    missing_vectors: list[str]
    orphan_vectors: list[str]
    archive_missing: list[str]
    archive_orphans: list[str]
    problems: list[str]
    actions: list[str]
    repaired: bool
    seconds: float


class ConsolidationOut(BaseModel):
    windows: int
    episodes: int
    concepts_created: int
    concepts_merged: int
    edges_pruned: int
    archived: int
    seconds: float


class HealthOut(BaseModel):
    status: str
    version: str
    uptime_s: float
    namespaces: int
    open: int


class IdsOut(BaseModel):
    ids: list[str]


class RemovedOut(BaseModel):
    removed: list[str] = Field(description="every id removed")
    memories: list[str] = Field(description="the memories asked for (episodes, or concepts named by id)")
    derived: list[str] = Field(description="the concepts only those memories supported, removed with them")
    message: str = Field(description="the same, in words")

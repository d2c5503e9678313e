"""Plain data types shared by the engine, the extractors and the adapters."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

NodeKind = Literal["episode", "concept"]
EdgeKind = Literal["temporal", "abstraction", "association", "relation"]


@dataclass(frozen=True)
class Turn:
    """One conversation turn as handed to extractors (read-only view of an episodic node)."""

    id: str
    text: str
    speaker: str | None = None
    timestamp: datetime | None = None


@dataclass(frozen=True)
class Concept:
    """A semantic item proposed by an extractor (the paper's node schema, appendix A.2)."""

    name: str
    type: str = "Concept"
    confidence: float = 1.0
    attributes: dict[str, Any] = field(default_factory=dict)
    # ids of the window's turns that mention it; empty means "the whole window"
    source_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Relation:
    """A typed edge between two extracted concepts (appendix A.2, task 2)."""

    src: str
    rel: str
    tgt: str
    weight: float = 1.0


@dataclass(frozen=True)
class Extraction:
    """What an extractor returns for one consolidation window."""

    concepts: tuple[Concept, ...] = ()
    relations: tuple[Relation, ...] = ()


@dataclass(frozen=True)
class ScoreComponents:
    """The signals behind one item's score (for explanations and ablations)."""

    similarity: float
    activation: float
    pagerank: float
    bm25_rank: int | None = None  # 1-based rank among BM25 anchors, None if not an anchor
    dense_rank: int | None = None  # 1-based rank among dense anchors, None if not an anchor
    lexical: float = 0.0  # BM25 score / the query's best BM25 score (0 when not weighted)


@dataclass(frozen=True)
class RetrievedItem:
    """One memory returned by :meth:`Synapse.retrieve`."""

    id: str
    text: str
    kind: NodeKind
    score: float
    components: ScoreComponents
    speaker: str | None = None
    timestamp: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # node ids from an anchor to this node along which activation reached it
    # (just [id] for an anchor); empty when the graph was not used
    path: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (timestamps as ISO 8601)."""
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "score": self.score,
            "similarity": self.components.similarity,
            "activation": self.components.activation,
            "pagerank": self.components.pagerank,
            "bm25_rank": self.components.bm25_rank,
            "dense_rank": self.components.dense_rank,
            "speaker": self.speaker,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "metadata": dict(self.metadata),
            "path": list(self.path),
        }


@dataclass(frozen=True)
class RetrievalResult:
    """The answer of :meth:`Synapse.retrieve`.

    ``items`` are ranked by score, best first. ``rejected`` is True when the uncertainty
    gate judged that memory holds nothing relevant (``confidence`` below ``gate_tau``);
    the items are still there for inspection, but a caller should answer "nothing in
    memory". ``confidence`` is the top-ranked node's activation.
    """

    query: str
    items: tuple[RetrievedItem, ...]
    rejected: bool
    confidence: float
    gate_tau: float

    def __iter__(self):  # iterate the items directly
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def accepted(self) -> tuple[RetrievedItem, ...]:
        """The items, or nothing when the gate rejected the query."""
        return () if self.rejected else self.items

    def episodes(self) -> list[RetrievedItem]:
        """Episodic items only, in rank order."""
        return [it for it in self.items if it.kind == "episode"]

    def in_time_order(self) -> list[RetrievedItem]:
        """The items re-ordered by event time (the paper's presentation order);
        concepts (no time) come last in rank order."""
        timed = [it for it in self.items if it.timestamp is not None]
        untimed = [it for it in self.items if it.timestamp is None]
        return sorted(timed, key=lambda it: it.timestamp) + untimed  # type: ignore[arg-type,return-value]

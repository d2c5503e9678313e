"""Plain data types shared by the engine, the extractors and the adapters, and the
Protocols that name what each collaborator must provide: an :class:`Embedder`, an
:class:`Extractor`, and the :class:`MemoryEngine` the framework adapters talk to (the
:class:`~synapse_integrations.Synapse` engine, or anything with the same methods).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

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
    """The signals behind one item's score (for explanations and ablations): the hybrid
    score's components, their ``weights``, and the ``adjustments`` the ranking signals
    (:mod:`synapse_integrations.core.signals`) and the entity-feedback hop added to it,
    by name, in the order they applied. An adjustment reads as an attribute too
    (``components.echo``).

    >>> c = ScoreComponents(0.8, 0.5, 1.0, lexical=0.5, weights={"similarity": 0.5,
    ...     "activation": 0.3, "pagerank": 0.1, "lexical": 0.3}, adjustments={"echo": -0.1})
    >>> c.echo, round(sum(c.terms().values()), 3)
    (-0.1, 0.7)
    """

    similarity: float
    activation: float
    pagerank: float
    bm25_rank: int | None = None  # 1-based rank among BM25 anchors, None if not an anchor
    dense_rank: int | None = None  # 1-based rank among dense anchors, None if not an anchor
    lexical: float = 0.0  # BM25 score / the query's best BM25 score (0 when not weighted)
    distinct: float = 0.0  # the query's exclusive evidence only this turn holds (scoring.singled_out)
    # the hybrid score's weights by component (similarity, activation, pagerank, lexical,
    # distinct); None when the retrieval model ranked by its own score
    weights: dict[str, float] | None = field(default=None, compare=False, hash=False)
    # signal name -> what it added to the score (0, or the signal's sign: an echo's demotion
    # is <= 0, a reply's lift >= 0); plus ``hop``, the entity-feedback pass's discount (<= 0)
    adjustments: Mapping[str, float] = field(default_factory=dict, hash=False)

    def __getattr__(self, name: str) -> float:
        adjustments = self.__dict__.get("adjustments")
        if adjustments is not None and not name.startswith("__") and name in adjustments:
            return adjustments[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def terms(self) -> dict[str, float]:
        """The score as a sum: ``weight x value`` per weighted component, plus each
        adjustment. Their sum is the item's score (empty when the model used its own
        score)."""
        if self.weights is None:
            return {}
        out = {name: w * float(getattr(self, name)) for name, w in self.weights.items()}
        out.update(self.adjustments)
        return out

    def flat(self) -> dict[str, Any]:
        """One flat mapping: the components, the adjustments by name, then ``weights``
        (the wire and metadata form; :meth:`from_flat` reads it back)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)
                               if f.name not in ("weights", "adjustments")}
        out.update(self.adjustments)
        out["weights"] = None if self.weights is None else dict(self.weights)
        return out

    @classmethod
    def from_flat(cls, data: Mapping[str, Any]) -> ScoreComponents:
        """Inverse of :meth:`flat`: every other numeric key is an adjustment.

        >>> ScoreComponents.from_flat({"similarity": 0.5, "activation": 0.0, "pagerank": 0.0,
        ...                            "reply": 0.2}).adjustments
        {'reply': 0.2}
        """
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known and v is not None}
        extra = {k: float(v) for k, v in data.items() if k not in known
                 and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if extra:
            kwargs["adjustments"] = {**extra, **dict(kwargs.get("adjustments") or {})}
        return cls(**kwargs)


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
    # node ids from where the model started to this node along which activation reached
    # it (just [id] for a node it started from); empty when the graph was not used
    path: tuple[str, ...] = ()
    # names of the concepts linked to this episode that the query activated, strongest
    # first: what led to it
    concepts: tuple[str, ...] = ()
    # its history: the newer version that replaced it (and when), or the older one it replaced
    superseded_by: str | None = None
    superseded_at: datetime | None = None
    supersedes: str | None = None
    # when it held (event time): from its own time (a fact: its earliest source's) until it
    # was replaced (None: it holds now); docs/concepts.md, "Time and versions"
    valid_from: datetime | None = None
    valid_until: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (timestamps as ISO 8601)."""
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "score": self.score,
            **self.components.flat(),
            "speaker": self.speaker,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "metadata": dict(self.metadata),
            "path": list(self.path),
            "concepts": list(self.concepts),
            "superseded_by": self.superseded_by,
            "superseded_at": self.superseded_at.isoformat() if self.superseded_at else None,
            "supersedes": self.supersedes,
            "valid_from": self.valid_from.isoformat() if self.valid_from else None,
            "valid_until": self.valid_until.isoformat() if self.valid_until else None,
        }


@dataclass(frozen=True)
class GateVerdict:
    """Why the gate accepted or rejected a query (:mod:`synapse_integrations.core.retrieval.gate`).

    ``check`` is the check that failed (``"topic"``, ``"attribution"``, ``"presence"``,
    ``"judge"``) or ``"accepted"``; ``reason`` says it in words; ``evidence_id`` is the memory
    the decision rests on (the other speaker's turn, the best turn found), if any;
    ``signals`` the measured values (``confidence``, ``attribution_gap``, ``presence``).
    """

    rejected: bool
    check: str
    reason: str
    evidence_id: str | None = None
    signals: Mapping[str, float] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"rejected": self.rejected, "check": self.check, "reason": self.reason,
                "evidence_id": self.evidence_id, "signals": dict(self.signals)}


@dataclass(frozen=True)
class RetrievalResult:
    """The answer of :meth:`Synapse.retrieve`.

    ``items`` are ranked by score, best first. ``rejected`` is True when the uncertainty
    gate judged that memory holds nothing relevant (``confidence`` below ``gate_tau``);
    the items are still there for inspection, but a caller should answer "nothing in
    memory". ``confidence`` is the gate's signal on the top-ranked item (its similarity
    by default, ``SynapseConfig.gate_signal``). ``verdict`` says which check decided and
    on which evidence (:class:`GateVerdict`; None for results built without the gate).
    """

    query: str
    items: tuple[RetrievedItem, ...]
    rejected: bool
    confidence: float
    gate_tau: float
    verdict: GateVerdict | None = field(default=None, compare=False)

    @property
    def reason(self) -> str:
        """The gate's decision in words (``""`` when no verdict was recorded)."""
        return self.verdict.reason if self.verdict is not None else ""

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


@dataclass(frozen=True)
class ConsolidationReport:
    """What one call of :meth:`Synapse.consolidate` did."""

    windows: int
    episodes: int
    concepts_created: int
    concepts_merged: int
    edges_pruned: int
    archived: int
    seconds: float


@dataclass(frozen=True)
class ConsistencyReport:
    """What :meth:`Synapse.verify` found (and :meth:`Synapse.repair` did).

    ``ok`` is True when the graph, the Chroma collections, the BM25 index and the
    in-memory vectors agree (after repair: when they agree now). Id tuples list the
    disagreements found; ``actions`` says, in words, what repair changed.
    """

    ok: bool
    episodes: int
    concepts: int
    archived: int
    vectors: int
    missing_vectors: tuple[str, ...] = ()      # graph nodes with no vector in Chroma
    orphan_vectors: tuple[str, ...] = ()       # Chroma vectors with no graph node
    archive_missing: tuple[str, ...] = ()      # archived nodes with no archived vector
    archive_orphans: tuple[str, ...] = ()      # archived vectors with no archived node
    problems: tuple[str, ...] = ()             # everything found, in words
    actions: tuple[str, ...] = ()              # what repair did, in words
    repaired: bool = False
    seconds: float = 0.0


@dataclass(frozen=True)
class FeedbackReport:
    """What one call of :meth:`Synapse.feedback` learned.

    ``graph`` names the graph whose weights changed: ``"memory"`` (the episodic-semantic
    graph, for ``synapse`` and ``ppr``), a model's derived graph (``"evermind"``: its k-NN
    graph), or ``None`` when the configured model has no weighted graph to learn
    (``synaptic``, ``mnemos``). ``strengthened`` / ``weakened`` count the edges whose
    signal was +1 / -1 (Evermind's Eq. 2), ``created`` the links made between used
    memories that had none (Evermind's ``learn_links`` option).
    """

    query: str
    model: str
    graph: str | None
    used: tuple[str, ...]
    unused: tuple[str, ...]
    strengthened: int = 0
    weakened: int = 0
    created: int = 0


class ForgetResult(list):
    """What :meth:`Synapse.forget` removed: every removed id, as the ``list[str]`` it has
    always returned, plus ``memories`` (what was asked for: the episodes that matched, and
    any concept named by id) and ``derived`` (the concepts that only those episodes
    supported, removed with them).

    >>> r = ForgetResult(["t1", "c-dana"], memories=["t1"])
    >>> r.memories, r.derived, len(r)
    (('t1',), ('c-dana',), 2)
    >>> r == ["t1", "c-dana"]
    True
    """

    def __init__(self, removed: Iterable[str] = (), *, memories: Iterable[str] = ()) -> None:
        super().__init__(removed)
        chosen = set(memories)
        self.memories: tuple[str, ...] = tuple(i for i in self if i in chosen)
        self.derived: tuple[str, ...] = tuple(i for i in self if i not in chosen)

    def describe(self) -> str:
        """One line for a person or a model.

        >>> ForgetResult(["t1", "c1", "c2"], memories=["t1"]).describe()
        'Forgot 1 memory (t1); 2 derived concept(s) went with it.'
        >>> ForgetResult().describe()
        'Nothing to forget: no memory matched.'
        """
        if not self:
            return "Nothing to forget: no memory matched."
        n = len(self.memories)
        shown = ", ".join(self.memories[:10]) + (", ..." if n > 10 else "")
        line = f"Forgot {n} {'memory' if n == 1 else 'memories'} ({shown})"
        if self.derived:
            line += f"; {len(self.derived)} derived concept(s) went with {'it' if n == 1 else 'them'}"
        return line + "."


# ---------------------------------------------------------------------------------------
# Protocols
# ---------------------------------------------------------------------------------------
@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedder (a subset of LangChain's ``Embeddings``)."""

    def embed_documents(self, texts: list[str]) -> Any: ...

    def embed_query(self, text: str) -> Any: ...


@runtime_checkable
class Extractor(Protocol):
    """Anything that turns one consolidation window of turns into an :class:`Extraction`."""

    def extract(self, turns: Sequence[Turn]) -> Extraction:
        """Extract concepts and relations from ``turns`` (one consolidation window)."""
        ...

    async def aextract(self, turns: Sequence[Turn]) -> Extraction:
        """Async twin of :meth:`extract`."""
        ...


@runtime_checkable
class MemoryEngine(Protocol):
    """The memory the framework adapters use: :class:`~synapse_integrations.Synapse`
    implements it; so can a client of a remote memory.

    Turns are dicts (``text`` and optional ``speaker``, ``timestamp``, ``metadata``,
    ``id``); episodes come back as dicts with ``id``, ``text``, ``speaker``, ``ts``,
    ``seq``, ``metadata``.
    """

    def add_turn(self, text: str, *, speaker: str | None = None, timestamp: Any = None,
                 metadata: Mapping[str, Any] | None = None, id: str | None = None) -> str: ...

    def add_turns(self, turns: Iterable[str | Mapping[str, Any]]) -> list[str]: ...

    async def aadd_turn(self, text: str, **kwargs: Any) -> str: ...

    async def aadd_turns(self, turns: Iterable[str | Mapping[str, Any]]) -> list[str]: ...

    def retrieve(self, query: str, k: int | None = None, **kwargs: Any) -> RetrievalResult: ...

    async def aretrieve(self, query: str, k: int | None = None, **kwargs: Any) -> RetrievalResult: ...

    def forget(self, ids: Sequence[str] | None = None, **criteria: Any) -> list[str]: ...

    async def aforget(self, ids: Sequence[str] | None = None, **criteria: Any) -> list[str]: ...

    def episodes(self, *, include_archived: bool = True) -> list[dict[str, Any]]: ...

    def contains(self, node_id: str) -> bool: ...

    def get(self, node_id: str, *, include_archived: bool = False) -> dict[str, Any]: ...

    def stats(self) -> dict[str, int]: ...

    def update(self, node_id: str, text: str | None = None, **kwargs: Any) -> str: ...

    async def aupdate(self, node_id: str, text: str | None = None, **kwargs: Any) -> str: ...

    def history(self, node_id: str) -> list[dict[str, Any]]: ...

    async def ahistory(self, node_id: str) -> list[dict[str, Any]]: ...

    def supersede(self, old_id: str, new_id: str) -> None: ...

    def save(self) -> int: ...

    def close(self) -> None: ...


@runtime_checkable
class LearnsFromFeedback(Protocol):
    """A memory that takes usage feedback (:meth:`Synapse.feedback`): the adapters' hooks
    call it when the framework knows which recalled memories an answer used."""

    def feedback(self, query: str, used_ids: Sequence[str], unused_ids: Sequence[str] = (),
                 **kwargs: Any) -> FeedbackReport: ...

    async def afeedback(self, query: str, used_ids: Sequence[str],
                        unused_ids: Sequence[str] = (), **kwargs: Any) -> FeedbackReport: ...


# ---------------------------------------------------------------------------------------
# events (Synapse.subscribe)
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowReport:
    """Event: one consolidation window finished."""

    episodes: int
    concepts_created: int
    concepts_merged: int
    edges_pruned: int
    archived: int
    seconds: float


@dataclass(frozen=True)
class VectorWrite:
    """Event: a batch of vectors was written to Chroma outside a window (``kind`` is
    ``"concept"`` for the batched concept write at the end of ``add_turns``)."""

    kind: str
    count: int
    seconds: float

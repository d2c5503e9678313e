"""The JSON forms of the engine's results, both ways (no web framework imported here).

The REST API, the MCP server and :class:`~synapse_integrations.server.client.RemoteMemory`
agree on these shapes, so a result that crossed the wire is rebuilt into the very
dataclasses the engine returns (:class:`~synapse_integrations.types.RetrievalResult` with
:class:`~synapse_integrations.types.RetrievedItem` s, :class:`ConsistencyReport`, ...).

>>> from synapse_integrations.types import RetrievalResult
>>> wire = result_to_wire(RetrievalResult("q", (), True, 0.0, 0.25))
>>> wire["gate"]["decision"], result_from_wire(wire) == RetrievalResult("q", (), True, 0.0, 0.25)
('rejected', True)
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

from ..errors import (
    ConfigError,
    EmbeddingError,
    ExtractionError,
    FirewallBlockedError,
    InvalidInputError,
    InvalidTypeError,
    MemoryLockedError,
    MissingDependencyError,
    NamespaceError,
    NodeNotFoundError,
    SnapshotError,
    StorageError,
    SynapseError,
    UnknownNamespaceError,
)
from ..types import (
    ConsistencyReport,
    ConsolidationReport,
    ForgetResult,
    GateVerdict,
    RetrievalResult,
    RetrievedItem,
    ScoreComponents,
)
from .access import AccessDeniedError

__all__ = [
    "ERRORS",
    "error_status",
    "retry_after",
    "error_to_wire",
    "error_from_wire",
    "gate_reason",
    "item_to_wire",
    "item_from_wire",
    "report_to_wire",
    "consistency_from_wire",
    "consolidation_from_wire",
    "result_to_wire",
    "result_from_wire",
    "forget_to_wire",
    "forget_from_wire",
]

#: HTTP status of every error the engine raises on purpose (most specific class first).
#: User errors are 4xx; only a failing store or a bug is 5xx.
ERRORS: tuple[tuple[type[BaseException], int], ...] = (
    (NamespaceError, 400),          # a namespace string that is not allowed
    (ConfigError, 400),             # a config override with a bad value
    (InvalidTypeError, 422),        # an argument of the wrong type
    (FirewallBlockedError, 422),    # a secret / personal data whose action is "block"
    (InvalidInputError, 400),       # the right type, an unusable value
    (UnknownNamespaceError, 404),   # no memory of that name
    (NodeNotFoundError, 404),       # no memory id of that name in this namespace
    (AccessDeniedError, 403),       # the API key may not use this namespace
    (MemoryLockedError, 503),       # the memory is busy (held by another caller or process): retry
    (SnapshotError, 500),           # every snapshot unreadable: an operator's job
    (StorageError, 503),            # Chroma or the disk failed: retry later
    (EmbeddingError, 500),          # the server's embedder misbehaved
    (ExtractionError, 502),         # an LLM extractor failed
    (MissingDependencyError, 501),
)

#: The error classes a client can raise again by name.
_BY_NAME: dict[str, type[SynapseError]] = {
    cls.__name__: cls for cls, _ in ERRORS if issubclass(cls, SynapseError)}
_BY_NAME["SynapseError"] = SynapseError

_DUPLICATE_ID = "memory id(s) already used"

#: pydantic error types that mean "the right type, an unusable value" (InvalidInputError
#: on the client, as the engine would raise); the others are type errors.
_VALUE_PROBLEMS = frozenset({
    "missing", "extra_forbidden", "greater_than", "greater_than_equal", "less_than",
    "less_than_equal", "too_short", "too_long", "literal_error", "string_too_long",
    "string_too_short", "value_error", "finite_number", "json_invalid", "enum"})


def error_status(exc: BaseException) -> int:
    """The HTTP status for ``exc`` (500 for anything the engine did not raise on purpose).

    A write that reuses a stored id (an idempotency key seen before) is a 409 Conflict.

    >>> error_status(NodeNotFoundError("no memory with id 'x'"))
    404
    >>> error_status(InvalidInputError("memory id(s) already used: ['a']"))
    409
    """
    if isinstance(exc, InvalidInputError) and str(exc).startswith(_DUPLICATE_ID):
        return 409
    for cls, status in ERRORS:
        if isinstance(exc, cls):
            return status
    return 500


#: Seconds a client should wait before it retries a request answered with a 503.
RETRY_AFTER_S = 1
_BUSY = "the memory is busy"


def retry_after(exc: BaseException) -> int | None:
    """Seconds after which the request may succeed if sent again (a ``Retry-After``
    header): for a busy memory or a store that failed (503s); None otherwise.

    >>> retry_after(MemoryLockedError("held")), retry_after(NodeNotFoundError("x"))
    (1, None)
    """
    return RETRY_AFTER_S if isinstance(exc, StorageError) else None


def error_to_wire(exc: BaseException) -> dict[str, Any]:
    """``{"error": {"type", "message", "status"[, "categories"]}}``: the body of every
    error response (the firewall's categories name what was found, never the value). A
    busy memory says so, and that the request may be sent again.

    >>> error_to_wire(MemoryLockedError("open in another process"))["error"]["message"]
    'the memory is busy (held by another request or process); retry shortly: open in another process'
    """
    status = error_status(exc)
    name = type(exc).__name__ if isinstance(exc, SynapseError) else (
        "InternalError" if status >= 500 else type(exc).__name__)
    message = str(exc) or name
    if isinstance(exc, MemoryLockedError) and not message.startswith(_BUSY):
        message = f"{_BUSY} (held by another request or process); retry shortly: {message}"
    body: dict[str, Any] = {"type": name, "message": message, "status": status}
    if isinstance(exc, FirewallBlockedError):
        body["categories"] = list(exc.categories)
    return {"error": body}


def error_from_wire(body: Any, status: int) -> SynapseError:
    """The engine's own exception for an error response (``InvalidInputError`` ...), so
    that a remote memory fails like a local one; :class:`SynapseError` when unknown."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        detail = body.get("detail") if isinstance(body, dict) else body
        return (StorageError if status >= 500 else InvalidInputError)(
            f"HTTP {status}: {detail}")
    name, message = str(err.get("type", "")), str(err.get("message", ""))
    cls = _BY_NAME.get(name)
    if name == "RequestValidationError":  # the request's schema: a value or a type problem
        details = err.get("details") or [{}]
        kind = str(details[0].get("type", "")) if isinstance(details[0], dict) else ""
        cls = InvalidInputError if kind in _VALUE_PROBLEMS else InvalidTypeError
    if cls is None:
        cls = {401: InvalidInputError, 403: InvalidInputError, 404: NodeNotFoundError,
               422: InvalidTypeError}.get(status, StorageError if status >= 500 else InvalidInputError)
    if cls is FirewallBlockedError:
        return FirewallBlockedError(message, tuple(err.get("categories") or ()))
    return cls(message)


# ---------------------------------------------------------------------------------------
# retrieval results
# ---------------------------------------------------------------------------------------
def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None


def _dt(value: Any) -> datetime | None:
    if value is None:
        return None
    dt = datetime.fromisoformat(value)
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


_ITEM_TIMES = ("timestamp", "superseded_at", "valid_from", "valid_until")


def item_to_wire(item: RetrievedItem) -> dict[str, Any]:
    """One retrieved memory: every field of :class:`RetrievedItem` (id, text, kind, score,
    components with every signal, speaker, timestamp, metadata, path, concepts, and its
    history: superseded_by / superseded_at / supersedes, valid_from / valid_until), times
    as ISO 8601."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(RetrievedItem):
        value = getattr(item, f.name)
        if f.name == "components":
            value = value.flat()
        elif f.name in _ITEM_TIMES:
            value = _iso(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif f.name == "metadata":
            value = dict(value)
        elif f.name == "score":
            value = float(value)
        out[f.name] = value
    return out


def item_from_wire(data: dict[str, Any]) -> RetrievedItem:
    """Inverse of :func:`item_to_wire` (fields this version does not know are ignored)."""
    comp = data.get("components") or {}
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(RetrievedItem):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name == "components":
            value = ScoreComponents.from_flat(comp)
        elif f.name in _ITEM_TIMES:
            value = _dt(value)
        elif isinstance(value, list):
            value = tuple(value)
        elif f.name == "metadata":
            value = dict(value or {})
        kwargs[f.name] = value
    return RetrievedItem(**kwargs)


def gate_reason(result: RetrievalResult, *, signal: str = "similarity",
                enabled: bool = True) -> str:
    """The uncertainty gate's decision in words.

    >>> gate_reason(RetrievalResult("q", (), True, 0.0, 0.25))
    'nothing in memory matches the query (no candidate memories)'
    """
    if not result.items:
        return "nothing in memory matches the query (no candidate memories)"
    if not enabled:
        return "the gate is switched off (use_gate=False): every query is accepted"
    if result.verdict is not None:
        reason = result.verdict.reason
        return f"rejected: {reason}" if result.rejected else reason
    if result.rejected:
        return (f"rejected: the top memory's {signal} {result.confidence:.3f} is below "
                f"gate_tau {result.gate_tau:.3f}; nothing relevant in memory")
    return (f"accepted: the top memory's {signal} {result.confidence:.3f} is at least "
            f"gate_tau {result.gate_tau:.3f}")


def result_to_wire(result: RetrievalResult, *, signal: str = "similarity",
                   gate_enabled: bool = True, for_model: bool = False) -> dict[str, Any]:
    """A retrieval: ``query``, ranked ``items``, the gate's ``rejected`` / ``confidence`` /
    ``gate_tau`` and ``gate`` = ``{"decision": "accepted" | "rejected", "reason"}``.
    ``for_model``: as a model may read it, the items :attr:`RetrievalResult.accepted`
    (none when the gate rejected the query, as every adapter hands a model nothing then),
    and ``withheld``, how many ranked items that left out."""
    shown = result.accepted if for_model else result.items
    extra = {"withheld": len(result.items) - len(shown)} if for_model and result.rejected else {}
    return {
        "query": result.query,
        "items": [item_to_wire(it) for it in shown],
        "rejected": bool(result.rejected),
        "confidence": float(result.confidence),
        "gate_tau": float(result.gate_tau),
        "gate": {"decision": "rejected" if result.rejected else "accepted",
                 "reason": gate_reason(result, signal=signal, enabled=gate_enabled),
                 "check": result.verdict.check if result.verdict is not None else None,
                 "evidence_id": result.verdict.evidence_id if result.verdict is not None else None},
        **extra,
    }


def result_from_wire(data: dict[str, Any]) -> RetrievalResult:
    """Inverse of :func:`result_to_wire` (the gate's check and reason come back as its
    verdict)."""
    gate = data.get("gate") or {}
    verdict = None
    if gate.get("check"):
        verdict = GateVerdict(bool(data["rejected"]), str(gate["check"]),
                              str(gate.get("reason") or ""), gate.get("evidence_id"))
    return RetrievalResult(
        query=data["query"], items=tuple(item_from_wire(it) for it in data["items"]),
        rejected=bool(data["rejected"]), confidence=float(data["confidence"]),
        gate_tau=float(data["gate_tau"]), verdict=verdict)


# ---------------------------------------------------------------------------------------
# reports
# ---------------------------------------------------------------------------------------
def report_to_wire(report: ConsistencyReport | ConsolidationReport) -> dict[str, Any]:
    """A report dataclass as a JSON object (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(report).items()}


def _from(cls: type, data: dict[str, Any]) -> Any:
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: tuple(v) if isinstance(v, list) else v
                  for k, v in data.items() if k in fields})


def consistency_from_wire(data: dict[str, Any]) -> ConsistencyReport:
    """Inverse of :func:`report_to_wire` for :class:`ConsistencyReport`."""
    return _from(ConsistencyReport, data)


def consolidation_from_wire(data: dict[str, Any]) -> ConsolidationReport:
    """Inverse of :func:`report_to_wire` for :class:`ConsolidationReport`."""
    return _from(ConsolidationReport, data)


def forget_to_wire(removed: list[str]) -> dict[str, Any]:
    """A forget's reply: every removed id (``removed``), the memories asked for
    (``memories``) and the concepts that went with them (``derived``), and the same in
    words (``message``).

    >>> forget_to_wire(ForgetResult(["t1", "c1"], memories=["t1"]))["derived"]
    ['c1']
    """
    result = removed if isinstance(removed, ForgetResult) else ForgetResult(removed, memories=removed)
    return {"removed": list(result), "memories": list(result.memories),
            "derived": list(result.derived), "message": result.describe()}


def forget_from_wire(data: dict[str, Any]) -> ForgetResult:
    """The :class:`ForgetResult` of a forget's reply (a server without ``memories``: every
    id counts as one).

    >>> forget_from_wire({"removed": ["t1", "c1"], "memories": ["t1"]}).derived
    ('c1',)
    """
    return ForgetResult(data["removed"], memories=data.get("memories", data["removed"]))

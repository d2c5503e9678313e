"""Validation of everything that enters a memory: namespaces, turns, timestamps, and the
contents of a snapshot read back from disk.

Pure functions: they return a clean value or raise an error from
:mod:`synapse_integrations.errors` that says what was wrong. Nothing here touches a store.

>>> validate_namespace("user-42")
'user-42'
>>> to_epoch("2024-01-06T09:00:00Z")
1704531600.0
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ..config import SynapseConfig
from ..errors import InvalidInputError, InvalidTypeError, NamespaceError, SnapshotError
from ..firewall import Firewall
from .graph import EDGE_KINDS, MemoryGraph

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_NAMESPACE_LEN",
    "MAX_TEXT_CHARS",
    "from_epoch",
    "namespace_dirname",
    "stored_config",
    "to_epoch",
    "utf8_ok",
    "validate_namespace",
    "validate_snapshot",
    "validate_turn",
]

MAX_NAMESPACE_LEN = 256
MAX_TEXT_CHARS = 100_000
"""Longest turn text accepted (characters). Longer text is refused with a clear error
rather than chunked: one turn is one episodic node, and the embedder reads only its first
~256 tokens anyway. Split long documents into several turns."""

CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SLUG_RE = re.compile(r"[^A-Za-z0-9_-]+")
_TURN_FIELDS = frozenset({"text", "speaker", "timestamp", "metadata", "id"})


def utf8_ok(value: str) -> bool:
    """False when ``value`` cannot be encoded as UTF-8 (it holds a lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ---------------------------------------------------------------------------------------
# namespaces
# ---------------------------------------------------------------------------------------
def validate_namespace(namespace: Any) -> str:
    """Return ``namespace`` if it is usable, else raise :class:`NamespaceError`.

    Any printable string of 1-256 characters is allowed; it is never used as a path
    (folders and collections are named from a hash of it).
    """
    if not isinstance(namespace, str):
        raise NamespaceError(f"namespace must be a str, got {type(namespace).__name__}")
    if not namespace.strip():
        raise NamespaceError("namespace must not be empty or whitespace")
    if len(namespace) > MAX_NAMESPACE_LEN:
        raise NamespaceError(f"namespace is {len(namespace)} characters; at most {MAX_NAMESPACE_LEN}")
    if CONTROL_RE.search(namespace):
        raise NamespaceError("namespace must not contain control characters")
    if not utf8_ok(namespace):
        raise NamespaceError("namespace is not valid Unicode (it holds a lone surrogate)")
    return namespace


def namespace_dirname(namespace: str) -> str:
    """A safe folder name for a namespace: a readable slug plus a hash (no traversal)."""
    slug = _SLUG_RE.sub("_", namespace).strip("_")[:40] or "ns"
    return f"{slug}-{hashlib.sha256(namespace.encode('utf-8')).hexdigest()[:16]}"


# ---------------------------------------------------------------------------------------
# time
# ---------------------------------------------------------------------------------------
_MIN_EPOCH = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
_MAX_EPOCH = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()


def to_epoch(timestamp: Any) -> float:
    """Seconds since the epoch (UTC) for a datetime, an epoch number or an ISO 8601 string.
    Naive datetimes are taken as UTC. Times outside the years 1-9999 (UTC) are refused:
    they could not be turned back into a datetime."""
    ts = _to_epoch(timestamp)
    if not _MIN_EPOCH <= ts <= _MAX_EPOCH:
        raise InvalidInputError(f"timestamp {timestamp!r} is outside the years 1-9999 (UTC)")
    return ts


def _to_epoch(timestamp: Any) -> float:
    if isinstance(timestamp, bool):
        raise InvalidTypeError("timestamp must be a datetime, an ISO 8601 string or epoch seconds, not bool")
    if isinstance(timestamp, datetime):
        dt = timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=timezone.utc)
        return dt.timestamp()
    if isinstance(timestamp, (int, float)):
        if not math.isfinite(timestamp):
            raise InvalidInputError(f"timestamp must be finite, got {timestamp!r}")
        return float(timestamp)
    if isinstance(timestamp, str):
        try:
            return _to_epoch(datetime.fromisoformat(timestamp.strip().replace("Z", "+00:00")))
        except ValueError:
            raise InvalidInputError(f"timestamp {timestamp!r} is not ISO 8601") from None
    raise InvalidTypeError(
        f"timestamp must be a datetime, an ISO 8601 string or epoch seconds, got {type(timestamp).__name__}"
    )


def from_epoch(ts: float | None) -> datetime | None:
    """The UTC datetime of epoch seconds (None stays None)."""
    return None if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc)


# ---------------------------------------------------------------------------------------
# turns
# ---------------------------------------------------------------------------------------
def validate_turn(turn: str | Mapping[str, Any], firewall: Firewall) -> dict[str, Any]:
    """One turn as the engine stores it, or an error naming what is wrong.

    ``turn`` is a string or a mapping with ``text`` and optional ``speaker``,
    ``timestamp``, ``metadata``, ``id``. Returns ``{"text", "speaker", "ts", "metadata",
    "id", "auto_id", "auto_ts"}`` after the write firewall (nothing past this function
    sees the original secrets). A missing timestamp is now; a missing id is random.
    """
    if isinstance(turn, str):
        turn = {"text": turn}
    if not isinstance(turn, Mapping):
        raise InvalidTypeError(f"a turn must be a str or a mapping, got {type(turn).__name__}")
    unknown = set(turn) - _TURN_FIELDS
    if unknown:
        raise InvalidInputError(f"unknown turn field(s): {sorted(unknown)}")
    text = turn.get("text")
    if not isinstance(text, str):
        raise InvalidTypeError(f"turn text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise InvalidInputError("turn text must not be empty or whitespace")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInputError(
            f"turn text is {len(text)} characters; at most {MAX_TEXT_CHARS} are accepted "
            f"(split long documents into several turns)")
    if not utf8_ok(text):
        raise InvalidInputError("turn text is not valid Unicode (it holds a lone surrogate)")
    speaker = turn.get("speaker")
    if speaker is not None and not isinstance(speaker, str):
        raise InvalidTypeError(f"speaker must be a str or None, got {type(speaker).__name__}")
    if speaker is not None and (len(speaker) > 1000 or not utf8_ok(speaker)):
        raise InvalidInputError("speaker must be valid Unicode of at most 1000 characters")
    ts = turn.get("timestamp")
    ts = time.time() if ts is None else to_epoch(ts)
    metadata = turn.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise InvalidTypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
    try:
        metadata = json.loads(json.dumps(dict(metadata), allow_nan=False))
        json.dumps(metadata, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"metadata must be JSON-serialisable: {exc}") from None
    if len(json.dumps(metadata)) > MAX_TEXT_CHARS:
        raise InvalidInputError(f"metadata is larger than {MAX_TEXT_CHARS} characters as JSON")
    node_id = turn.get("id")
    if node_id is None:
        node_id = f"ep-{uuid.uuid4().hex}"
    elif not isinstance(node_id, str) or not node_id.strip():
        raise InvalidInputError(f"id must be a non-empty str, got {node_id!r}")
    elif len(node_id) > 512 or not utf8_ok(node_id) or CONTROL_RE.search(node_id):
        raise InvalidInputError("id must be printable Unicode of at most 512 characters")
    # the write firewall: nothing below this line sees the original secrets
    text = firewall.check_text(text, what="turn text")
    if speaker is not None:
        speaker = firewall.check_value(speaker, what="speaker")
    metadata = firewall.check_value(metadata, what="turn metadata")
    return {"text": text, "speaker": speaker, "ts": ts, "metadata": metadata, "id": node_id,
            "auto_id": turn.get("id") is None, "auto_ts": turn.get("timestamp") is None}


# ---------------------------------------------------------------------------------------
# what a snapshot holds
# ---------------------------------------------------------------------------------------
def stored_config(data: Any, *, warn: bool = True) -> SynapseConfig:
    """The config saved with a snapshot. Fields this version does not know (written by a
    newer version) are ignored with a warning instead of making the memory unreadable."""
    if isinstance(data, Mapping):
        known = {f.name for f in dataclasses.fields(SynapseConfig)}
        unknown = sorted(set(data) - known)
        if unknown:
            if warn:
                logger.warning("the snapshot's config has field(s) this version does not know, "
                               "ignored: %s", ", ".join(map(str, unknown)))
            data = {k: v for k, v in data.items() if k in known}
        if "abstraction_scope" not in data:
            # written before the field existed (0.1.0 betas): those memories linked each
            # concept to its whole window unless ``extra`` asked for mentions
            extra = data.get("extra") if isinstance(data.get("extra"), Mapping) else {}
            data = {**data, "abstraction_scope": extra.get("abstraction_scope", "window")}
    return SynapseConfig.from_dict(data)


def validate_snapshot(manifest: dict[str, Any], files: dict[str, Any], *, namespace: str) -> None:
    """Reject (with :class:`SnapshotError`) a snapshot whose checksums match but whose
    content is not what the engine writes; the snapshot store then falls back to an
    older one."""
    if manifest.get("namespace") not in (None, namespace):
        raise SnapshotError(f"snapshot belongs to namespace {manifest.get('namespace')!r}, "
                            f"not {namespace!r}")
    try:
        stored_config(manifest.get("config"), warn=False)
    except Exception as exc:  # any malformed config is a bad snapshot
        raise SnapshotError(f"snapshot config is unusable: {exc}") from None
    try:
        mg = MemoryGraph.from_json(files.get("graph"), dim=1)
    except SnapshotError:
        raise
    except Exception as exc:
        raise SnapshotError(f"graph snapshot is malformed: {exc}") from None
    for n, d in mg.g.nodes(data=True):
        if not isinstance(n, str) or isinstance(d.get("seq"), bool) or not isinstance(d.get("seq"), int):
            raise SnapshotError(f"graph snapshot node {n!r} lacks a valid id/seq")
        if d["kind"] == "episode":
            ts = d.get("ts")
            if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float))
                                   or not math.isfinite(ts)):
                raise SnapshotError(f"graph snapshot node {n!r} has a bad timestamp")
            if not isinstance(d.get("metadata", {}), dict) or \
                    not isinstance(d.get("speaker"), (str, type(None))):
                raise SnapshotError(f"graph snapshot node {n!r} has bad speaker/metadata")
        elif not isinstance(d.get("aliases", []), list):
            raise SnapshotError(f"graph snapshot concept {n!r} has bad aliases")
    for u, v, d in mg.g.edges(data=True):
        w = d.get("weight")
        if d.get("kind") not in EDGE_KINDS or isinstance(w, bool) \
                or not isinstance(w, (int, float)) or not math.isfinite(w):
            raise SnapshotError(f"graph snapshot edge {u!r}->{v!r} has a bad kind/weight")
    for n, rec in mg.archive.items():
        if not (isinstance(rec, dict) and isinstance(rec.get("node"), dict)
                and rec["node"].get("kind") in ("episode", "concept")
                and isinstance(rec["node"].get("text"), str)
                and isinstance(rec.get("edges"), list)
                and all(isinstance(e, list) and len(e) == 3 and isinstance(e[2], dict)
                        for e in rec["edges"])):
            raise SnapshotError(f"graph snapshot archive record {n!r} is malformed")
    state = files.get("state", {})
    if not isinstance(state, dict) or not isinstance(state.get("pending", []), list) \
            or not all(isinstance(i, str) for i in state.get("pending", [])) \
            or not isinstance(state.get("last_episode"), (str, type(None))) \
            or isinstance(state.get("windows", 0), bool) \
            or not isinstance(state.get("windows", 0), int):
        raise SnapshotError("snapshot state section is malformed")

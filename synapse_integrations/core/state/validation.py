"""Validation of everything that enters a memory through the API: namespaces, turns,
timestamps, queries. (The contents of a snapshot read back from disk are checked in
:mod:`.snapshot_checks`, against the bounds defined here.)

Pure functions: they return a clean value or raise an error from
:mod:`synapse_integrations.errors` that says what was wrong. Nothing here touches a store.

>>> validate_namespace("user-42")
'user-42'
>>> to_epoch("2024-01-06T09:00:00Z")
1704531600.0
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any

import numpy as np

from ...errors import (
    InvalidInputError,
    InvalidTypeError,
    NamespaceError,
    SynapseError,
)
from ...firewall import Firewall

logger = logging.getLogger(__name__)

#: The most recorded stimuli a node keeps in its ``spikes`` attribute (SynapticRAG's stimuli; the oldest go first):
#: bounds the snapshot, the DTW cost per pair (quadratic in the train lengths) and the LIF
#: replay of each train.
MAX_SPIKES = 32

__all__ = [
    "MAX_BATCH_TURNS",
    "MAX_SPIKES",
    "MAX_METADATA_DEPTH",
    "MAX_NAMESPACE_LEN",
    "MAX_QUERY_CHARS",
    "MAX_TEXT_CHARS",
    "NORMALISED_KEY",
    "REPLACEMENT",
    "TEXT_NORMALISATION",
    "check_k",
    "check_query",
    "query_vector",
    "epoch_ok",
    "from_epoch",
    "namespace_dirname",
    "normalise_text",
    "successor_turn",
    "to_epoch",
    "utf8_ok",
    "validate_namespace",
    "validate_turn",
    "validate_turns",
]

MAX_NAMESPACE_LEN = 256
MAX_TEXT_CHARS = 100_000
"""Longest turn text accepted (characters). Longer text is refused with a clear error
rather than chunked: one turn is one episodic node, and the embedder reads only its first
~256 tokens anyway. Split long documents into several turns."""

MAX_QUERY_CHARS = MAX_TEXT_CHARS
"""Longest query accepted by ``retrieve`` (characters): no longer than a turn. The
embedder reads the first ~256 tokens; BM25 reads them all, so the bound keeps a query's
cost bounded (see docs/safety.md)."""

MAX_BATCH_TURNS = 100_000
"""Most turns one ``add_turns`` call takes. A batch is validated as a whole, then embedded
and written in chunks of :data:`WRITE_CHUNK` turns, the engine's lock released between
chunks; larger imports are several calls."""

WRITE_CHUNK = 256
"""Turns embedded and written per hold of the engine's lock in ``add_turns``."""

MAX_METADATA_DEPTH = 32
"""Deepest nesting of dicts and lists accepted in turn metadata (a snapshot must stay
readable: JSON parsers recurse)."""

#: characters refused in namespaces, ids and speakers: every control character (C0, DEL,
#: C1 such as NEL ``\x85``), line and paragraph separators, bidi overrides, BOM
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")

REPLACEMENT = "\ufffd"
"""What an unreadable control character in turn text becomes (U+FFFD, the Unicode
replacement character): visible, so a reader sees something was there, and it never
joins the words on either side as a removal would."""

NORMALISED_KEY = "text_normalised"
"""The turn-metadata key the engine sets when it changed a turn's text on the way in
(:func:`normalise_text`): how many characters of each kind, e.g. ``{"cp1252": 2}``."""


def _cp1252(char: str) -> str:
    """The cp1252 character a C1 control stands for (a cp1252 byte read as latin-1), or
    :data:`REPLACEMENT` for the five bytes cp1252 leaves undefined (0x81, 0x8D, 0x8F,
    0x90, 0x9D)."""
    try:
        return char.encode("latin-1").decode("cp1252")
    except UnicodeDecodeError:
        return REPLACEMENT


TEXT_NORMALISATION: Mapping[str, str] = MappingProxyType({
    # C0 controls and DEL: pasted noise (U+0002...), never text
    **{chr(c): REPLACEMENT for c in (*range(0x00, 0x09), *range(0x0e, 0x20), 0x7f)},
    # vertical tab (a soft line break pasted from Word or PowerPoint) and form feed
    "\x0b": "\n", "\x0c": "\n",
    # C1 controls: cp1252 punctuation decoded as latin-1 ("\x93hi\x94" is “hi”)
    **{chr(c): _cp1252(chr(c)) for c in range(0x80, 0xa0)},
})
"""How turn text is normalised on the way in (the one table): every C0 control but tab,
line feed and carriage return, DEL and every C1 control (NEL, U+0085, included: in real
text it is cp1252's ellipsis) maps to what it stands for or to :data:`REPLACEMENT`. No
value is a key, so normalising twice changes nothing. Ids, speakers and namespaces are
not normalised: a control character there is refused (:data:`CONTROL_RE`)."""

_NORMALISE_RE = re.compile("[" + "".join(f"\\x{ord(c):02x}" for c in TEXT_NORMALISATION) + "]")
_SLUG_RE = re.compile(r"[^A-Za-z0-9_-]+")
#: The keys a turn mapping may hold (a schema, not a word list: see :func:`validate_turn`).
_TURN_FIELDS = ("text", "speaker", "timestamp", "metadata", "id")


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
        raise NamespaceError("namespace must not contain control characters (C0/C1 controls "
                             "such as NUL or NEL, line separators, bidi overrides)")
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


def epoch_ok(ts: Any) -> bool:
    """``ts`` is a finite number of epoch seconds within the years 1-9999 (UTC): what
    :func:`to_epoch` accepts, and what a snapshot or Chroma row may hold."""
    return (isinstance(ts, (int, float)) and not isinstance(ts, bool)
            and math.isfinite(ts) and _MIN_EPOCH <= ts <= _MAX_EPOCH)


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


def check_depth(value: Any, *, what: str, limit: int = MAX_METADATA_DEPTH) -> None:
    """Refuse ``value`` when its dicts and lists nest deeper than ``limit`` (iterative:
    a hostile value cannot exhaust the stack here)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, Mapping):
            children = v.values()
        elif isinstance(v, (list, tuple)):
            children = v
        else:
            continue
        if depth > limit:
            raise InvalidInputError(f"{what} is nested more than {limit} levels deep")
        stack.extend((c, depth + 1) for c in children)


def check_query(query: Any) -> str:
    """A usable query string, or an error naming the problem."""
    if not isinstance(query, str):
        raise InvalidTypeError(f"query must be a str, got {type(query).__name__}")
    if not query.strip():
        raise InvalidInputError("query must not be empty or whitespace")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInputError(f"query is {len(query)} characters; at most {MAX_QUERY_CHARS} "
                                f"are accepted")
    if not utf8_ok(query):
        raise InvalidInputError("query is not valid Unicode (it holds a lone surrogate)")
    return query


def from_epoch(ts: float | None) -> datetime | None:
    """The UTC datetime of epoch seconds (None stays None)."""
    return None if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc)


# ---------------------------------------------------------------------------------------
# turns
# ---------------------------------------------------------------------------------------
def normalise_text(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with its control characters normalised by :data:`TEXT_NORMALISATION`, and
    how many characters changed: ``"cp1252"`` (a C1 control read as the cp1252 character
    it stands for) and ``"replaced"`` (any other control: :data:`REPLACEMENT`, or a line
    feed for a vertical tab or form feed); a kind that did not occur is left out.

    Idempotent: normalised text comes back unchanged, with ``{}``.

    >>> normalise_text("He said \x93hi\x94 \x02twice")
    ('He said “hi” �twice', {'cp1252': 2, 'replaced': 1})
    >>> normalise_text('He said “hi”')
    ('He said “hi”', {})
    """
    counts: dict[str, int] = {}

    def fix(match: re.Match[str]) -> str:
        char = match.group()
        out = TEXT_NORMALISATION[char]
        kind = "cp1252" if "\x80" <= char <= "\x9f" and out != REPLACEMENT else "replaced"
        counts[kind] = counts.get(kind, 0) + 1
        return out

    return _NORMALISE_RE.sub(fix, text), counts


def check_k(k: Any) -> int:
    """``k`` when it is a count of results (an int >= 1), else :class:`InvalidInputError`.

    >>> check_k(5)
    5
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be an int >= 1, got {k!r}")
    return k


def query_vector(q: Any, dim: int) -> np.ndarray:
    """A query embedding as float32 of shape ``(dim,)``, finite; else :class:`InvalidInputError`.

    >>> query_vector([1, 0], 2).dtype
    dtype('float32')
    """
    qv = np.asarray(q, dtype=np.float32)
    if qv.shape != (dim,) or not np.all(np.isfinite(qv)):
        raise InvalidInputError(f"query vector must be a finite array of shape ({dim},), "
                                f"got shape {qv.shape}")
    return qv


def successor_turn(node_id: str, old: Mapping[str, Any], *, text: str | None,
                   speaker: str | None, metadata: Mapping[str, Any] | None,
                   timestamp: Any) -> dict[str, Any]:
    """The turn that replaces episode ``old`` (``Synapse.update``): the fields given, the
    old ones otherwise; new text records its own normalisation, not the old text's.

    >>> successor_turn("t1", {"kind": "episode", "text": "a", "speaker": "Sam",
    ...                       "metadata": {"x": 1, NORMALISED_KEY: {"replaced": 1}}},
    ...                text="b", speaker=None, metadata=None, timestamp=None)["metadata"]
    {'x': 1}
    """
    if old.get("kind") != "episode":
        raise InvalidInputError(f"{node_id!r} is a concept; only episodes (turns) can be updated")
    kept = dict(old.get("metadata") or {})
    if text is not None:
        kept.pop(NORMALISED_KEY, None)
    return {"text": old["text"] if text is None else text,
            "speaker": old.get("speaker") if speaker is None else speaker,
            "metadata": kept if metadata is None else metadata, "timestamp": timestamp}


def validate_turns(turns: Sequence[str | Mapping[str, Any]], firewall: Firewall
                   ) -> list[dict[str, Any]]:
    """Every turn of a batch through :func:`validate_turn`, all or none: the first turn
    refused stops the batch, and in a batch of several the error names that turn (its
    position, and its id when it has one).

    >>> validate_turns(["fine", {"text": 5, "id": "t-2"}], Firewall())
    Traceback (most recent call last):
    ...
    synapse_integrations.errors.InvalidTypeError: turn 1 (id 't-2'): turn text must be a str, got int
    """
    rows = []
    for k, turn in enumerate(turns):
        try:
            rows.append(validate_turn(turn, firewall))
        except SynapseError as exc:
            if len(turns) > 1 and exc.args:
                node_id = turn.get("id") if isinstance(turn, Mapping) else None
                which = f"turn {k}"
                if isinstance(node_id, str):
                    which += f" (id {node_id[:80]!r})"
                exc.args = (f"{which}: {exc.args[0]}", *exc.args[1:])
            raise
    return rows


def validate_turn(turn: str | Mapping[str, Any], firewall: Firewall) -> dict[str, Any]:
    """One turn as the engine stores it, or an error naming what is wrong.

    ``turn`` is a string or a mapping with ``text`` and optional ``speaker``,
    ``timestamp``, ``metadata``, ``id``. Returns ``{"text", "speaker", "ts", "metadata",
    "id", "auto_id", "auto_ts"}`` after the write firewall (nothing past this function
    sees the original secrets). A missing timestamp is now; a missing id is random.
    Control characters in the text are normalised (:func:`normalise_text`), and the
    change recorded in the metadata under :data:`NORMALISED_KEY`; in the speaker or the
    id they are refused.

    >>> row = validate_turn({"text": "He said \x93hi\x94", "id": "t-1"}, Firewall())
    >>> row["text"], row["metadata"]
    ('He said “hi”', {'text_normalised': {'cp1252': 2}})
    """
    if isinstance(turn, str):
        turn = {"text": turn}
    if not isinstance(turn, Mapping):
        raise InvalidTypeError(f"a turn must be a str or a mapping, got {type(turn).__name__}")
    unknown = set(turn).difference(_TURN_FIELDS)
    if unknown:
        raise InvalidInputError(f"unknown turn field(s): {sorted(unknown)}")
    text = turn.get("text")
    if not isinstance(text, str):
        raise InvalidTypeError(f"turn text must be a str, got {type(text).__name__}")
    text, normalised = normalise_text(text)  # control characters are read, never refused
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
    if speaker is not None and (len(speaker) > 1000 or not utf8_ok(speaker)
                                or CONTROL_RE.search(speaker)):
        raise InvalidInputError("speaker must be printable Unicode of at most 1000 characters "
                                "(no control characters)")
    ts = turn.get("timestamp")
    ts = time.time() if ts is None else to_epoch(ts)
    metadata = turn.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise InvalidTypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
    if normalised:  # recorded with the turn: its text is not byte for byte what was sent
        metadata = {**metadata, NORMALISED_KEY: normalised}
    check_depth(metadata, what="metadata")
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

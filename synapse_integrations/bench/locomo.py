"""Load LoCoMo conversations and questions for the retrieval benchmark.

LoCoMo (Maharana et al., ACL 2024) ships as a JSON list of samples. Each sample holds a
two-speaker conversation split into numbered sessions (``session_1``, ``session_2``, ...,
each with a ``session_N_date_time``) and a list of questions whose ``evidence`` names the
turns (``dia_id`` such as ``"D3:7"``) that answer them. This module turns that file into
frozen dataclasses, repairing or skipping the few malformed entries the public data holds.
It is pure Python (stdlib only) and knows nothing about the engine.

Decisions, so that results can be reproduced:

* Sessions are ordered by their number (``session_10`` comes after ``session_9``).
* ``session_N_date_time`` is wall-clock time without a zone; it is read as UTC so that
  ``datetime.timestamp()`` does not depend on the machine's zone. Accepted forms:
  ``"1:56 pm on 8 May, 2023"`` (LoCoMo's own), ``"8 May 2023"``, ``"May 8, 2023"``, with or
  without a time, and ISO 8601.
* Turn ``i`` (0-based) of a session is stamped ``session time + i seconds``, so the
  timestamps of a conversation increase strictly within each session while staying
  within a minute or so of the session's time.
* A turn's text is ``"<speaker>: <text>"``, followed by ``" [shares a photo: <caption>]"``
  when the turn has a ``blip_caption``.
* Evidence strings are split on ``;``, ``,`` and whitespace, upper-cased, and repaired when
  the repair names a turn that exists (``"d8:6"`` -> ``"D8:6"``, ``"D:11:26"`` ->
  ``"D11:26"``, ``"D30:05"`` -> ``"D30:5"``). Pieces that still name no turn are dropped and
  counted in :attr:`LocomoDataset.skipped_evidence`; repeated ids are merged silently (not
  counted). Nothing is guessed beyond that: ``"D10:19"`` in a conversation whose session 10
  has 16 turns is dropped, not remapped.
* A question left with no valid evidence cannot be scored for recall: it is skipped and
  counted in :attr:`LocomoDataset.skipped_questions`, except in category 5 (adversarial),
  which is kept either way because the gate metrics need it. A question whose category is
  not an integer 1-5 is skipped and counted too.

Example::

    ds = load_locomo("locomo10.json", conversations=["conv-26"])
    for turn in ds.conversations[0].turns:
        memory.add_turn(turn.text, speaker=turn.speaker, timestamp=turn.timestamp)
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

__all__ = [
    "LocomoConversation",
    "LocomoDataset",
    "LocomoQuestion",
    "LocomoTurn",
    "CATEGORY_NAMES",
    "load_locomo",
    "parse_session_datetime",
]

logger = logging.getLogger(__name__)

#: LoCoMo's own category numbers.
CATEGORY_NAMES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
_ADVERSARIAL = 5


@dataclass(frozen=True)
class LocomoTurn:
    """One turn of a conversation: one episodic memory in the benchmark.

    ``text`` is ``"<speaker>: <text>"`` (plus the photo caption when there is one);
    ``timestamp`` is the session's time plus the turn's index in the session, in seconds.
    """

    dia_id: str
    speaker: str
    text: str
    timestamp: datetime
    session: int

    @property
    def bare_text(self) -> str:
        """The text without the leading ``"<speaker>: "``: what the framework adapters
        store, the speaker kept as a field (``bench locomo --turn-text bare``).

        >>> LocomoTurn("D1:1", "Sam", "Sam: Hi there", datetime(2024, 1, 1), 1).bare_text
        'Hi there'
        """
        head = f"{self.speaker}:"
        return self.text[len(head):].lstrip() if self.text.startswith(head) else self.text


@dataclass(frozen=True)
class LocomoQuestion:
    """One question. ``evidence`` holds only ids that exist in the conversation.

    ``answer`` is ``None`` for category 5 (LoCoMo gives an ``adversarial_answer`` there,
    which is not a true answer).
    """

    question: str
    category: int
    evidence: tuple[str, ...]
    answer: str | None
    conversation_id: str


@dataclass(frozen=True)
class LocomoConversation:
    """One LoCoMo sample: its turns in time order and its usable questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: tuple[LocomoTurn, ...]
    questions: tuple[LocomoQuestion, ...]


@dataclass(frozen=True)
class LocomoDataset:
    """The conversations read from ``path`` and what had to be skipped to read them."""

    path: Path
    conversations: tuple[LocomoConversation, ...]
    skipped_evidence: int
    skipped_questions: int

    @property
    def sample_ids(self) -> tuple[str, ...]:
        """The ids of the loaded conversations, in file order."""
        return tuple(c.sample_id for c in self.conversations)

    @property
    def questions(self) -> tuple[LocomoQuestion, ...]:
        """Every kept question of every loaded conversation."""
        return tuple(q for c in self.conversations for q in c.questions)


# --------------------------------------------------------------------------- dates

_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
# A time needs minutes or am/pm (the look-ahead), so "15 July" never reads as 1 o'clock.
_TIME = (
    r"(?=\d{1,2}(?::\d{2}|\s*[ap]\.?\s?m))"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?\s?m\.?)?"
)
_DAY_MONTH = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?\s+(?P<month>[a-z]+)\.?,?"
_MONTH_DAY = r"(?P<month>[a-z]+)\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?"
_DATE_PATTERNS = [
    re.compile(rf"^(?:{_TIME}(?:\s+on\s+|\s*,\s*|\s+))?{date}\s*(?P<year>\d{{4}})$")
    for date in (_DAY_MONTH, _MONTH_DAY)
]


def parse_session_datetime(value: str) -> datetime:
    """Parse a LoCoMo ``session_N_date_time`` into a UTC datetime.

    >>> parse_session_datetime("1:56 pm on 8 May, 2023")
    datetime.datetime(2023, 5, 8, 13, 56, tzinfo=datetime.timezone.utc)
    >>> parse_session_datetime("8 May 2023")
    datetime.datetime(2023, 5, 8, 0, 0, tzinfo=datetime.timezone.utc)

    Raises :class:`ValueError` (``InvalidInputError``) when the string is not a date.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"expected a date string, got {value!r}")
    text = " ".join(value.strip().lower().split())
    for pattern in _DATE_PATTERNS:
        m = pattern.match(text)
        if m is None:
            continue
        parsed = _from_match(m)
        if parsed is not None:
            return parsed
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInputError(
            f"unrecognised date {value!r}: expected e.g. '1:56 pm on 8 May, 2023', "
            "'8 May 2023' or ISO 8601"
        ) from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def _from_match(m: re.Match[str]) -> datetime | None:
    month = _MONTHS.get(m["month"])
    if month is None:
        return None
    hour = minute = 0
    if m["hour"] is not None:
        hour, minute = int(m["hour"]), int(m["minute"] or 0)
        if m["ampm"] is not None:
            if not 1 <= hour <= 12:
                return None
            hour = hour % 12 + (12 if m["ampm"].startswith("p") else 0)
    try:
        return datetime(
            int(m["year"]), month, int(m["day"]), hour, minute, tzinfo=timezone.utc
        )
    except ValueError:  # 31 February, 25:00, ...
        return None


# --------------------------------------------------------------------------- evidence

_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_EVIDENCE_ID = re.compile(r"^D:?(\d+):(\d+)$")


def _clean_evidence(raw: Any, known: set[str]) -> tuple[tuple[str, ...], int]:
    """Return (valid ids, deduplicated and in order; number of pieces dropped)."""
    if isinstance(raw, str):  # a bare string instead of a list
        raw = [raw]
    if not isinstance(raw, list):
        return (), 1 if raw not in (None, "") else 0
    kept: list[str] = []
    dropped = 0
    for entry in raw:
        if not isinstance(entry, str):
            dropped += 1
            continue
        for piece in _EVIDENCE_SPLIT.split(entry.strip()):
            if not piece:
                continue
            dia_id = _normalise_dia_id(piece, known)
            if dia_id is None:
                dropped += 1
            elif dia_id not in kept:
                kept.append(dia_id)
    return tuple(kept), dropped


def _normalise_dia_id(piece: str, known: set[str]) -> str | None:
    piece = piece.upper()
    if piece in known:
        return piece
    m = _EVIDENCE_ID.match(piece)
    if m is None:
        return None
    candidate = f"D{int(m[1])}:{int(m[2])}"
    return candidate if candidate in known else None


# --------------------------------------------------------------------------- loading

_SESSION_KEY = re.compile(r"^session_(\d+)$")


def load_locomo(
    path: str | Path, *, conversations: Sequence[str] | None = None
) -> LocomoDataset:
    """Read a LoCoMo JSON file (``locomo10.json`` or a subset in the same format).

    ``conversations`` keeps only the named ``sample_id``s, in the file's order; an unknown
    id raises :class:`ValueError` listing the ids that exist. Malformed evidence and
    unusable questions are skipped and counted (see the module docstring), never fatal;
    a file that is not LoCoMo at all, or a session date that cannot be read, raises
    :class:`ValueError` naming the sample and key.
    """
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
        raise InvalidInputError(f"{path}: expected a JSON list of LoCoMo samples")
    by_id: dict[str, dict[str, Any]] = {}
    for i, sample in enumerate(data):
        sid = sample.get("sample_id")
        if not isinstance(sid, str) or not sid:
            raise InvalidInputError(f"{path}: sample #{i} has no 'sample_id'")
        if sid in by_id:
            raise InvalidInputError(f"{path}: sample_id {sid!r} appears twice")
        by_id[sid] = sample

    if conversations is not None:
        if isinstance(conversations, str):
            conversations = [conversations]
        unknown = [c for c in conversations if c not in by_id]
        if unknown:
            raise InvalidInputError(
                f"unknown conversation id(s) {unknown} in {path}; "
                f"available: {sorted(by_id)}"
            )
        wanted = set(conversations)
        selected = [s for sid, s in by_id.items() if sid in wanted]
    else:
        selected = list(by_id.values())

    convs: list[LocomoConversation] = []
    skipped_evidence = skipped_questions = 0
    for sample in selected:
        conv, n_ev, n_q = _load_sample(sample, path)
        convs.append(conv)
        skipped_evidence += n_ev
        skipped_questions += n_q
    logger.debug(
        "loaded %d conversations from %s (skipped %d evidence ids, %d questions)",
        len(convs),
        path,
        skipped_evidence,
        skipped_questions,
    )
    return LocomoDataset(path, tuple(convs), skipped_evidence, skipped_questions)


def _load_sample(
    sample: dict[str, Any], path: Path
) -> tuple[LocomoConversation, int, int]:
    sid = sample["sample_id"]
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        raise InvalidInputError(f"{path}: sample {sid!r} has no 'conversation' object")
    try:
        speakers = (str(conv["speaker_a"]), str(conv["speaker_b"]))
    except KeyError as exc:
        raise InvalidInputError(f"{path}: sample {sid!r} lacks {exc.args[0]!r}") from None

    turns = tuple(_iter_turns(sid, conv, path))
    known = {t.dia_id for t in turns}
    questions: list[LocomoQuestion] = []
    skipped_evidence = skipped_questions = 0
    qa = sample.get("qa", [])
    if not isinstance(qa, list):
        raise InvalidInputError(f"{path}: sample {sid!r}: 'qa' is not a list")
    for q in qa:
        question = _load_question(q, sid, known)
        if question is None:
            skipped_questions += 1
            continue
        question, dropped = question
        skipped_evidence += dropped
        if not question.evidence and question.category != _ADVERSARIAL:
            skipped_questions += 1
            continue
        questions.append(question)
    return (
        LocomoConversation(sid, speakers, turns, tuple(questions)),
        skipped_evidence,
        skipped_questions,
    )


def _iter_turns(sid: str, conv: dict[str, Any], path: Path) -> Iterable[LocomoTurn]:
    numbers = sorted(
        int(m[1])
        for key, value in conv.items()
        if (m := _SESSION_KEY.match(key)) and isinstance(value, list)
    )
    seen: set[str] = set()
    previous: datetime | None = None
    for n in numbers:
        session = conv[f"session_{n}"]
        if not session:
            continue
        key = f"session_{n}_date_time"
        if key not in conv:
            raise InvalidInputError(f"{path}: sample {sid!r} has '{key[:-10]}' but no {key!r}")
        try:
            start = parse_session_datetime(conv[key])
        except ValueError as exc:
            raise InvalidInputError(f"{path}: sample {sid!r}, key {key!r}: {exc}") from None
        if previous is not None and start <= previous:
            logger.warning(
                "%s: sample %r: session %d starts at %s, not after the previous turn (%s)",
                path,
                sid,
                n,
                start,
                previous,
            )
        for i, raw in enumerate(session):
            turn = _make_turn(raw, sid, n, start + timedelta(seconds=i), path)
            if turn.dia_id in seen:
                raise InvalidInputError(
                    f"{path}: sample {sid!r}: dia_id {turn.dia_id!r} appears twice"
                )
            seen.add(turn.dia_id)
            previous = turn.timestamp
            yield turn


def _make_turn(
    raw: Any, sid: str, session: int, timestamp: datetime, path: Path
) -> LocomoTurn:
    if not isinstance(raw, dict) or not isinstance(raw.get("dia_id"), str):
        raise InvalidInputError(
            f"{path}: sample {sid!r}, session_{session}: a turn has no 'dia_id': {raw!r}"
        )
    speaker = str(raw.get("speaker", "")).strip()
    body = str(raw.get("text", "")).strip()
    text = f"{speaker}: {body}" if body else f"{speaker}:"
    caption = raw.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text += f" [shares a photo: {caption.strip()}]"
    return LocomoTurn(raw["dia_id"].strip(), speaker, text, timestamp, session)


def _load_question(
    q: Any, sid: str, known: set[str]
) -> tuple[LocomoQuestion, int] | None:
    """The question and its dropped-evidence count, or None when it must be skipped."""
    if not isinstance(q, dict):
        return None
    category = q.get("category")
    if isinstance(category, bool) or not isinstance(category, int):
        return None
    if category not in CATEGORY_NAMES:
        return None
    text = q.get("question")
    if not isinstance(text, str) or not text.strip():
        return None
    evidence, dropped = _clean_evidence(q.get("evidence"), known)
    answer = q.get("answer")
    return (
        LocomoQuestion(
            question=text.strip(),
            category=category,
            evidence=evidence,
            answer=None if answer is None else str(answer),
            conversation_id=sid,
        ),
        dropped,
    )

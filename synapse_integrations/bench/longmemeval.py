"""Load LongMemEval questions (and their haystacks) for the retrieval benchmark.

LongMemEval (Wu et al., ICLR 2025) ships as a JSON list of questions, plain or gzip
compressed. Every question carries its own haystack: a list of chat sessions
(``haystack_sessions``, each a list of ``{"role", "content", "has_answer"}`` turns) with
their ids (``haystack_session_ids``) and dates (``haystack_dates``), and names the
sessions holding the answer (``answer_session_ids``). Each question is therefore its own
memory. This module turns the file into frozen dataclasses; it is pure Python (stdlib
only) and knows nothing about the engine.

Decisions, so that results can be reproduced:

* Sessions are taken in the file's order (the haystack order, which is not always the
  order of the dates); turn ``i`` (0-based) of a session is stamped with the session's
  date plus ``i`` seconds. Dates such as ``"2023/05/20 (Sat) 07:47"`` are wall-clock time
  without a zone and are read as UTC (the weekday is ignored).
* A turn's id is ``"<session_id>:<i>"``. When a haystack holds the same session id more
  than once (three questions of LongMemEval-S do), the later copies are named
  ``"<session_id>~2:<i>"``, ``"~3"``, ...; they are counted in
  :attr:`LongMemEvalDataset.skipped` under ``"repeated_sessions"`` (kept, not dropped).
* A turn's text is ``"<role>: <content>"``, the content stripped of surrounding
  whitespace; the speaker is the role (``user`` or ``assistant``).
* Evidence (turn level): the turns marked ``has_answer``; when a question marks none, every
  turn of its answer sessions (:attr:`LongMemEvalQuestion.evidence_source` says which).
* Abstention questions (``question_id`` ending in ``_abs``) were never answered in the
  haystack: they are the gate's "should refuse" set, and are kept even without evidence.
* Skipped and counted, never fatal (:attr:`LongMemEvalDataset.skipped`): turns that are not
  an object, whose role is not ``user``/``assistant`` or whose content is not a string
  (``"turns"``); answer session ids that name no session of the haystack
  (``"answer_session_ids"``); answerable questions left with no evidence at all
  (``"questions_without_evidence"``).
* Fatal, with a message naming the question and the key: a file that is not a JSON list of
  objects, a record without ``question_id`` / ``question`` / ``question_type``, a repeated
  ``question_id``, haystack lists of different lengths, a date that cannot be read.

Example::

    ds = load_longmemeval("longmemeval_s_dev.json.gz", types=["multi-session"])
    q = ds.questions[0]
    memory.add_turns(list(q.rows))  # text, speaker (the role), timestamp, id
"""

from __future__ import annotations

import gzip
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

__all__ = [
    "ABSTENTION",
    "QUESTION_TYPES",
    "LongMemEvalDataset",
    "LongMemEvalQuestion",
    "LongMemEvalTurn",
    "is_abstention",
    "load_longmemeval",
    "parse_lme_date",
    "read_json",
]

logger = logging.getLogger(__name__)

#: LongMemEval's question types, in the paper's order.
QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
#: The key the benchmark reports abstention questions under.
ABSTENTION = "abstention"
_ROLES = frozenset({"user", "assistant"})
_REQUIRED_LISTS = ("haystack_session_ids", "haystack_dates", "haystack_sessions")


@dataclass(frozen=True)
class LongMemEvalTurn:
    """One turn of a haystack: one episodic memory in the benchmark."""

    id: str
    session_id: str
    index: int
    role: str
    text: str
    timestamp: datetime
    has_answer: bool


@dataclass(frozen=True)
class LongMemEvalQuestion:
    """One question with its own haystack.

    ``evidence`` holds turn ids (``has_answer`` turns, or every turn of the answer
    sessions when none is marked: ``evidence_source`` is ``"has_answer"`` or
    ``"answer_sessions"``, or ``"none"`` for an abstention question with neither).
    ``answer_session_ids`` holds only ids present in the haystack.
    """

    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: datetime | None
    turns: tuple[LongMemEvalTurn, ...]
    answer_session_ids: tuple[str, ...]
    evidence: tuple[str, ...]
    evidence_source: str

    @property
    def abstention(self) -> bool:
        """True for the questions the memory should refuse (id ending in ``_abs``)."""
        return is_abstention(self.question_id)

    @property
    def category(self) -> str:
        """The key results are reported under: the question type, or ``"abstention"``."""
        return ABSTENTION if self.abstention else self.question_type

    @property
    def session_of(self) -> dict[str, str]:
        """Turn id -> the (original) id of the session it belongs to."""
        return {t.id: t.session_id for t in self.turns}

    @property
    def rows(self) -> tuple[dict[str, Any], ...]:
        """The haystack as ``add_turns`` rows (``text``, ``speaker``: the role,
        ``timestamp``, ``id``), in order: what every benchmark stores for this question."""
        return tuple({"text": t.text, "speaker": t.role, "timestamp": t.timestamp, "id": t.id}
                     for t in self.turns)


@dataclass(frozen=True)
class LongMemEvalDataset:
    """The questions read from ``path`` and what had to be skipped to read them."""

    path: Path
    questions: tuple[LongMemEvalQuestion, ...]
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def types(self) -> dict[str, int]:
        """Number of loaded questions per reporting key (question type or abstention)."""
        out: dict[str, int] = {}
        for q in self.questions:
            out[q.category] = out.get(q.category, 0) + 1
        return out


def is_abstention(question_id: str) -> bool:
    """LongMemEval marks abstention questions by the id suffix ``_abs``.

    >>> is_abstention("982b5123_abs"), is_abstention("982b5123")
    (True, False)
    """
    return question_id.endswith("_abs")


_DATE = re.compile(r"^(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]{3}\))?\s*(\d{1,2}):(\d{2})$")


def parse_lme_date(value: Any) -> datetime:
    """Parse a LongMemEval date such as ``"2023/05/20 (Sat) 07:47"`` as UTC.

    >>> parse_lme_date("2023/05/20 (Sat) 07:47")
    datetime.datetime(2023, 5, 20, 7, 47, tzinfo=datetime.timezone.utc)

    ISO 8601 is accepted too; anything else raises :class:`ValueError`
    (``InvalidInputError``).
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"expected a date string, got {value!r}")
    m = _DATE.match(value.strip())
    if m is not None:
        try:
            return datetime(*(int(g) for g in m.groups()), tzinfo=timezone.utc)
        except ValueError:
            pass
    else:
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None \
                else parsed.astimezone(timezone.utc)
    raise InvalidInputError(
        f"unrecognised date {value!r}: expected e.g. '2023/05/20 (Sat) 07:47' or ISO 8601")


def read_json(path: str | Path) -> Any:
    """Read a JSON file, gzip-compressed or not (told apart by the gzip magic bytes)."""
    path = Path(path)
    with path.open("rb") as fh:
        magic = fh.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"{path}: not a readable JSON file: {exc}") from None


def load_longmemeval(
    path: str | Path,
    *,
    types: Sequence[str] | None = None,
    limit: int | None = None,
) -> LongMemEvalDataset:
    """Read a LongMemEval JSON file (``.json`` or ``.json.gz``).

    ``types`` keeps only questions of those question types (``"abstention"`` selects the
    abstention questions of every type); an unknown type raises :class:`ValueError`
    listing the types present. ``limit`` keeps the first ``limit`` questions after that
    filter, in file order. See the module docstring for what is skipped and counted.
    """
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise InvalidInputError(f"{path}: expected a JSON list of LongMemEval question objects")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInputError(f"limit must be a positive integer, got {limit!r}")
    seen: set[str] = set()
    for i, record in enumerate(data):
        qid = record.get("question_id")
        if not isinstance(qid, str) or not qid.strip():
            raise InvalidInputError(f"{path}: record #{i} has no 'question_id'")
        if qid in seen:
            raise InvalidInputError(f"{path}: question_id {qid!r} appears twice")
        seen.add(qid)
        for key in ("question", "question_type"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                raise InvalidInputError(f"{path}: question {qid!r} has no usable {key!r}")

    if types is not None:
        if isinstance(types, str):
            types = [types]
        present = sorted({r["question_type"] for r in data} | {ABSTENTION})
        unknown = [t for t in types if t not in present]
        if unknown:
            raise InvalidInputError(
                f"unknown question type(s) {unknown} in {path}; available: {present}")
        wanted = set(types)
        data = [r for r in data if r["question_type"] in wanted
                or (ABSTENTION in wanted and is_abstention(r["question_id"]))]
    if limit is not None:
        data = data[:limit]

    skipped = {"turns": 0, "answer_session_ids": 0, "questions_without_evidence": 0,
               "repeated_sessions": 0}
    questions: list[LongMemEvalQuestion] = []
    for record in data:
        q = _load_question(record, path, skipped)
        if q is not None:
            questions.append(q)
    logger.debug("loaded %d questions from %s (skipped %s)", len(questions), path, skipped)
    return LongMemEvalDataset(path, tuple(questions), skipped)


def _load_question(record: dict[str, Any], path: Path,
                   skipped: dict[str, int]) -> LongMemEvalQuestion | None:
    qid = record["question_id"].strip()
    where = f"{path}: question {qid!r}"
    lists = []
    for key in _REQUIRED_LISTS:
        value = record.get(key)
        if not isinstance(value, list):
            raise InvalidInputError(f"{where}: {key!r} is missing or not a list")
        lists.append(value)
    session_ids, dates, sessions = lists
    if not len(session_ids) == len(dates) == len(sessions):
        raise InvalidInputError(
            f"{where}: haystack_session_ids ({len(session_ids)}), haystack_dates "
            f"({len(dates)}) and haystack_sessions ({len(sessions)}) differ in length")

    turns: list[LongMemEvalTurn] = []
    copies: dict[str, int] = {}
    for n, (sid, date, session) in enumerate(zip(session_ids, dates, sessions)):
        if not isinstance(sid, str) or not sid:
            raise InvalidInputError(f"{where}: haystack_session_ids[{n}] is not a string: {sid!r}")
        if not isinstance(session, list):
            raise InvalidInputError(f"{where}: haystack_sessions[{n}] ({sid!r}) is not a list")
        try:
            start = parse_lme_date(date)
        except ValueError as exc:
            raise InvalidInputError(f"{where}: haystack_dates[{n}] ({sid!r}): {exc}") from None
        copies[sid] = copies.get(sid, 0) + 1
        prefix = sid if copies[sid] == 1 else f"{sid}~{copies[sid]}"
        if copies[sid] > 1:
            skipped["repeated_sessions"] += 1
        for i, raw in enumerate(session):
            if not (isinstance(raw, dict) and raw.get("role") in _ROLES
                    and isinstance(raw.get("content"), str)):
                skipped["turns"] += 1
                continue
            content = raw["content"].strip()
            text = f"{raw['role']}: {content}" if content else f"{raw['role']}:"
            turns.append(LongMemEvalTurn(
                id=f"{prefix}:{i}", session_id=sid, index=i, role=raw["role"], text=text,
                timestamp=start + timedelta(seconds=i), has_answer=raw.get("has_answer") is True))

    known = {t.session_id for t in turns} | {s for s in session_ids if isinstance(s, str)}
    raw_answers = record.get("answer_session_ids") or []
    if not isinstance(raw_answers, list):
        raw_answers = [raw_answers]
    answers: list[str] = []
    for a in raw_answers:
        if isinstance(a, str) and a in known:
            if a not in answers:
                answers.append(a)
        else:
            skipped["answer_session_ids"] += 1

    marked = tuple(t.id for t in turns if t.has_answer)
    if marked:
        evidence, source = marked, "has_answer"
    else:
        wanted = set(answers)
        evidence = tuple(t.id for t in turns if t.session_id in wanted)
        source = "answer_sessions" if evidence else "none"
    if not evidence and not is_abstention(qid):
        skipped["questions_without_evidence"] += 1
        return None

    qdate = record.get("question_date")
    try:
        question_date = parse_lme_date(qdate) if qdate else None
    except ValueError as exc:
        raise InvalidInputError(f"{where}: question_date: {exc}") from None
    answer = record.get("answer")
    return LongMemEvalQuestion(
        question_id=qid, question_type=record["question_type"].strip(),
        question=record["question"].strip(), answer="" if answer is None else str(answer),
        question_date=question_date, turns=tuple(turns), answer_session_ids=tuple(answers),
        evidence=evidence, evidence_source=source)

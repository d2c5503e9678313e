"""Focus: what a question names, who and when, and the memories outside it demoted.

1. **A named speaker** (:func:`named_speaker`). A question that names exactly one of the
   memory's speakers ("What pets does Nate have?") is answered by that speaker's own
   turns far more often than by the others' (on LoCoMo dev 96% of the evidence turns of
   such questions, against 85% of what retrieval ranked in the top 10 before): the other
   speakers' turns score ``speaker_weight`` of their score. A question naming two
   speakers is left alone. A question naming none but asked in the first person ("How
   many days a week do I attend fitness classes?") is about the user: in a memory whose
   turns carry roles (``role`` metadata, or speakers ``user``/``assistant``), the turns
   that are not the user's score ``role_weight`` (:func:`user_turns`); in a memory of
   named people ("Caroline", "Melanie") "I" names no one and nothing changes. A question
   recalling what the assistant said ("the two companies you mentioned",
   :func:`asks_assistant`) names the assistant, whatever "me" it holds: there the user's
   turns score ``role_weight``.
2. **Named dates** (:func:`named_dates`). A question that names a date ("What did Nate do
   for Joanna on 25 May, 2022?", "... in May 2022", "... in 2022") asks about what was said
   then: on LoCoMo dev 73 of the 85 evidence turns of such questions are from the named
   day or month. Turns whose event time falls outside the named period (widened by
   :data:`DATE_SLACK` on each side, for time zones) score ``date_weight`` of their score,
   and the period's own turns join the dense trigger's anchors (:func:`date_scope`), so a
   turn of that day is a candidate even when other days' turns are closer to the words.

Dates are found by dateparser (``search_dates``: many formats, "8th December, 2023",
"December 8, 2023", "2023-12-08", "May 2022") and their period (day, month, year) by its
``DateDataParser``; only expressions holding a digit and a month's name, a year or a
numeric date count, so "May I ask...", "I marched" or "the 27th parameter" name no date.
A date without a year ("on March 3rd") is the latest one on or before the question's
time (``at``). A question without named dates may hold relative ones ("two weeks ago",
"last month", read against ``at``: :mod:`~synapse_integrations.core.text.relative_dates`):
they bound the turns that can tell of them from below only, so the turns said before the
period started are the ones outside it.

The demotions multiply and are one score component, ``focus`` (<= 0), so an item's terms
still add up.

3. **Names out of the cosine** (:func:`names_out`). A turn by a named speaker is embedded
   with the name ("Sam: Yes, the place with the cardamom buns.", :mod:`.documents`), and
   so is a question that names them: the name alone makes every short turn of theirs
   look like the answer (0.46 for that turn and "What does Sam do for work?", 0.17
   without the name; 0.36 and 0.18 for "Yep, still a data analyst at the solar
   company."). Who a question is about is the demotion's work (1.); the cosine should
   say what it asks. So the cosines leave out the directions of the names the question
   holds, on both sides (:func:`~synapse_integrations.core.kernels.scoring.cosine_without`; the
   direction is the embedding of what a document adds for the speaker, "Sam:"). The
   gate's topic check still reads the plain cosine of the top memory.

>>> import numpy as np
>>> from synapse_integrations.core.graph.graph import Compiled
>>> v = Compiled.from_arrays(["a", "b", "c"], np.eye(3), src=[], dst=[], weight=[],
...     is_episode=[True] * 3, attrs={"speaker": ["Ann", "Bo", "Ann"],
...     "ts": [0.0, 86400.0 * 30, 86400.0 * 60], "metadata": [{}] * 3})
>>> focus(v, np.arange(3), np.array([0.5, 0.5, 0.5]), "What does Bo do?",
...       speaker_weight=0.8, date_weight=1.0)[0]
array([0.4, 0.5, 0.4])
>>> named_dates("What did Nate do for Joanna on 25 May, 2022?")
(1653350400.0, 1653609600.0)
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

import numpy as np

from ..graph.roles import role_turns, speaker_names
from ..kernels.scoring import cosine_without, without_scale
from ..text.documents import is_name, name_line
from ..text.lexicon import FIRST_PERSON, MONTH, YOU_SAID
from ..text.relative_dates import relative_period
from ..text.subjects import named_subjects
from ..text.tokens import NUMERIC_DATE, YEAR
from .base import Candidates, Signal, WriteContext

__all__ = ["DATE_QUERY_CHARS", "DATE_SLACK", "Names", "asks_assistant", "date_scope", "focus",
           "named_dates", "named_speaker", "names_out", "user_turns"]

logger = logging.getLogger(__name__)

#: Seconds added on each side of a named period (time zones, a late-night turn).
DATE_SLACK = 86400.0
#: Only this many leading characters of a question are read for dates (a question names
#: its date early; dateparser takes about 0.1 s per 1,000 characters full of numbers).
DATE_QUERY_CHARS = 400
_DIGIT = re.compile(r"\d")
#: What makes a found expression a date: a month's name, a year, or a numeric date. A bare
#: ordinal ("the 27th parameter", "my 5th issue") or number is not one.
_DATE_LIKE = re.compile(rf"\b{MONTH}\b|\b{YEAR}\b|\b{NUMERIC_DATE}\b", re.I)
_PERIODS = {"day": "day", "week": "day", "month": "month", "year": "year"}
#: dateparser's search keeps state in shared objects: one question at a time (engines of
#: several namespaces may retrieve at once).
_PARSE_LOCK = threading.Lock()


Codes = tuple[dict[Any, int], np.ndarray]


def _codes(view: Any, old: Codes | None = None, m: int = 0) -> Codes:
    """A small integer per speaker, and each episode's (-1 for other nodes); grown from
    ``old``, the first ``m`` nodes'."""
    names = view.node_values("speaker")
    codes: dict[Any, int] = {} if old is None else dict(old[0])
    out = np.full(view.n, -1, dtype=np.int64)
    if old is not None:
        out[:m] = old[1]
    for i in (m + np.flatnonzero(view.is_episode[m:])).tolist():
        out[i] = codes.setdefault(names[i], len(codes))
    return codes, out


def _speaker_codes(view: Any) -> Codes:
    return view.derived("focus.speakers", _codes, lambda old, v, m: _codes(v, old, m))


def named_speaker(view: Any, query: str) -> str | None:
    """The one speaker of the memory whose name (every word of it) the question holds
    (:func:`~synapse_integrations.core.text.subjects.named_subjects`, as the gate reads it); None
    when it names none or several."""
    named = named_subjects(query, speaker_names(view))
    return named[0] if len(named) == 1 else None


@dataclass(frozen=True)
class Names:
    """The names a question holds, as directions to leave out of its cosines (module
    docstring, 3.): an orthonormal ``basis`` (one row per name), every node's vector
    along it (``nodes``: the view's embeddings times the basis, one row per node) and
    the nodes' :func:`~synapse_integrations.core.kernels.scoring.without_scale`."""

    basis: np.ndarray
    nodes: np.ndarray
    scale: np.ndarray

    def cosines(self, sim: np.ndarray, qv: np.ndarray) -> np.ndarray:
        """``sim`` (every node's cosine to ``qv``) with the names left out of both sides."""
        return cosine_without(sim, self.nodes, self.basis @ qv, self.scale)


def _names(view: Any, lines: tuple[str, ...], embed: Callable[[Sequence[str]], np.ndarray]) -> Names:
    vecs = np.asarray(embed(list(lines)), dtype=np.float64)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    # Gram-Schmidt in the names' own space (two names with one embedding: the first only)
    q, r = np.linalg.qr(vecs.T)
    keep = np.abs(np.diag(r)) > 1e-6
    basis = q.T[keep] if keep.all() else vecs[:1]
    nodes = view.products(basis)
    return Names(basis.astype(np.float32), nodes, without_scale(nodes))


def names_out(view: Any, query: str, embed: Callable[[Sequence[str]], np.ndarray] | None
              ) -> Names | None:
    """The speakers the question names that documents read as names (not roles), as
    :class:`Names` (``embed`` embeds texts, as the memory's embedder does); None when it
    names none. Derived once per view and set of names."""
    named = [s for s in named_subjects(query, speaker_names(view)) if is_name(s)]
    if not named or embed is None or view.n == 0:
        return None
    lines = tuple(name_line(s) for s in named)
    return view.derived("focus.names:" + "\n".join(lines), lambda v: _names(v, lines, embed))


def asks_assistant(query: str) -> bool:
    """Whether the question recalls the assistant's own words ("Can you remind me of the
    two companies you mentioned?"): then the assistant is the speaker it names, and "me"
    does not make it a question about the user's turns.

    >>> asks_assistant("What was the deli you recommended near the Vatican?")
    True
    >>> asks_assistant("Can you remind me what I ordered?"), asks_assistant("How many bikes do I own?")
    (False, False)
    """
    return bool(YOU_SAID.search(query))


def user_turns(view: Any) -> np.ndarray | None:
    """The user's turns (by role), or None when the memory holds none."""
    users = view.per_node("user-turns", lambda v, start: role_turns(v, "user", start))
    return users if users.any() else None


@lru_cache(maxsize=1)
def _parsers() -> tuple[Any, Any]:
    from dateparser.date import DateDataParser
    from dateparser.search import search_dates

    return search_dates, DateDataParser(languages=["en"])


def _period(start: datetime, period: str) -> tuple[datetime, datetime]:
    if period == "year":
        return start.replace(month=1, day=1), start.replace(year=start.year + 1, month=1, day=1)
    if period == "month":
        first = start.replace(day=1)
        return first, (first + timedelta(days=32)).replace(day=1)
    return start, start + timedelta(days=1)


@lru_cache(maxsize=512)
def named_dates(query: str, asked_at: float | None = None) -> tuple[float, float] | None:
    """The period the question's dates name, as epoch seconds ``(start, end)`` widened by
    :data:`DATE_SLACK` (the union when it names several), or None. ``asked_at``: when the
    question is asked (a date without a year is the latest one before it; default now)."""
    query = query[:DATE_QUERY_CHARS]
    if not _DIGIT.search(query):  # every date read here holds a digit: skip the parser
        return None
    search_dates, parser = _parsers()
    try:
        base = datetime.fromtimestamp(asked_at, timezone.utc) if asked_at is not None \
            else datetime.now(timezone.utc)
    except (OverflowError, OSError, ValueError):  # a time no calendar holds: read as now
        base = datetime.now(timezone.utc)
    settings = {"PREFER_DATES_FROM": "past", "RELATIVE_BASE": base.replace(tzinfo=None),
                "PREFER_DAY_OF_MONTH": "first", "RETURN_AS_TIMEZONE_AWARE": False}
    try:
        with _PARSE_LOCK:
            found = [(text, when, parser.get_date_data(text.strip()).period)
                     for text, when in search_dates(query, languages=["en"], settings=settings) or []
                     if _DIGIT.search(text) and _DATE_LIKE.search(text)]
    except Exception as exc:  # a third-party parser on the user's text: never fail the query
        logger.warning("focus: dates not read from the question (%s: %s)", type(exc).__name__, exc)
        return None
    spans = []
    for _, when, period in found:
        period = _PERIODS.get(period or "day", "day")
        start = when.replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=timezone.utc)
        try:
            spans.append(_period(start, period))
        except (OverflowError, ValueError):  # a period past year 9999
            continue
    if not spans:
        return None
    lo = min(s for s, _ in spans).timestamp() - DATE_SLACK
    hi = max(e for _, e in spans).timestamp() + DATE_SLACK
    return lo, hi


def date_scope(view: Any, query: str, asked_at: float | None = None) -> np.ndarray | None:
    """Episodes of the view said within the dates the question names, or from the start of
    the period its relative dates name (:func:`~..text.relative_dates.relative_period`);
    None: it names none, or no turn falls within them."""
    if asked_at is None:  # now, to the minute: the readings are cached by (question, time)
        asked_at = float(time.time() // 60 * 60)
    window = named_dates(query, asked_at) or relative_period(query[:DATE_QUERY_CHARS], asked_at)
    if window is None:
        return None
    ts = view.times()
    with np.errstate(invalid="ignore"):
        inside = view.is_episode & (ts >= window[0]) & (ts < window[1])
    return inside if inside.any() else None


def focus(view: Any, cand: np.ndarray, score: np.ndarray, query: str, *,
          speaker_weight: float, date_weight: float, role_weight: float = 1.0,
          asked_at: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Scores with the episodes outside what the question names (another speaker's turn:
    ``speaker_weight``; in a memory of roles, not the user's for a question in the first
    person, the user's for one recalling the assistant's words: ``role_weight``; a turn
    outside its dates: ``date_weight``) demoted to that share of their score. Returns the
    scores and the change (0, or negative)."""
    score = np.asarray(score, dtype=np.float64)
    change = np.zeros(score.shape)
    if cand.size == 0:
        return score, change
    factor = np.ones(cand.size)
    if speaker_weight < 1.0 or role_weight < 1.0:
        who = named_speaker(view, query)
        if who is not None:
            codes, of = _speaker_codes(view)
            other = view.is_episode[cand] & (of[cand] != codes[who])
            factor[other] *= speaker_weight
        elif (users := user_turns(view)) is not None:
            if asks_assistant(query):  # "the companies you mentioned": about the assistant
                factor[view.is_episode[cand] & users[cand]] *= role_weight
            elif FIRST_PERSON.search(query):
                factor[view.is_episode[cand] & ~users[cand]] *= role_weight
    if date_weight < 1.0:
        inside = date_scope(view, query, asked_at)
        if inside is not None:
            factor[view.is_episode[cand] & ~inside[cand]] *= date_weight
    demoted = factor < 1.0
    change[demoted] = (factor[demoted] - 1.0) * np.abs(score[demoted])  # whatever the sign
    return score + change, change


class Focus(Signal):
    """What the question names (``focus``): another speaker's turn, a turn outside the
    dates it names (:func:`focus`). At write time a new speaker's name is embedded once
    (the question that names them leaves it out of its cosines: :func:`names_out`)."""

    name = "focus"
    section = "signals.focus"

    def adjust(self, ctx: Candidates, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cfg = ctx.cfg
        return focus(ctx.view, ctx.cand, score, ctx.asked, speaker_weight=cfg.named_speaker_weight,
                     role_weight=cfg.first_person_weight, date_weight=cfg.date_weight,
                     asked_at=ctx.at)

    def write(self, rows: Sequence[dict[str, Any]], embs: np.ndarray, ctx: WriteContext) -> None:
        if not ctx.state.config.speaker_free_cosine:
            return
        lines = list(dict.fromkeys(name_line(r["speaker"]) for r in rows if is_name(r["speaker"])))
        if lines:
            ctx.embed_names(lines)

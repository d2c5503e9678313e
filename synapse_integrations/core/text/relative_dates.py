"""Relative dates in a question ("two weeks ago", "last month", "last Tuesday", "in the past
three months"), read against the time the question is asked.

A relative date names a period that ends before the question. A turn that tells of it was
written during that period or after it (people tell of what they did; a plan said a day
before is within the slack), never long before. So the period gives a *lower bound* on the
time of the turns that can answer: :func:`relative_period` returns ``(start, end)`` epoch
seconds with ``start`` the period's start less a slack and ``end`` the question's time plus
one day. That is what the decision needed on LongMemEval dev, where the evidence of "two
weeks ago" was said 17 days before the question and that of "last month" on the day of the
question itself ("I cleaned my shoes last month"): a window around the named moment misses
both, a bound from below keeps them.

Read (case-insensitive; the union of all found):

* ``N <unit>s ago`` (``N`` a number, a number word, ``a``/``an``, ``a few``, ``several``;
  units ``day``, ``week``, ``month``, ``year``): the moment ``N`` units back, less half of
  that offset (how far back people round "two weeks") and at least one day;
* ``yesterday``, ``last night``;
* ``last <weekday>``, ``last weekend``: the latest such day before today, or the one a
  week before it (people say "last Thursday" of both; on LongMemEval dev the evidence of a
  "last Thursday" asked on a Tuesday was said on the Monday and Tuesday a week before);
* ``last|past <unit>``: the previous calendar week (from Monday), month or year (not "the
  last week of the trip", a part of something);
* ``last|past N <unit>s`` ("in the last two months"): ``N`` units back.

A unit without a count ("weeks ago" in "how many weeks ago...") asks for a count and names
no period. Nor do ``today``, ``this weekend``, ``this month``: a question says them of now
or of what is coming ("I'm rearranging my bedroom this weekend, any tips?"), whose answer
can be any earlier preference. Named dates ("on 25 May, 2022") are
:func:`~synapse_integrations.core.signals.focus.named_dates`'.

>>> from datetime import datetime, timezone
>>> at = datetime(2023, 5, 30, 12, tzinfo=timezone.utc).timestamp()  # a Tuesday
>>> day = lambda t: datetime.fromtimestamp(t, timezone.utc).date().isoformat()
>>> [day(t) for t in relative_period("What did I do two weeks ago?", at)]
['2023-05-09', '2023-05-31']
>>> day(relative_period("Which pair of shoes did I clean last month?", at)[0])
'2023-03-31'
>>> day(relative_period("Who did I meet during the lunch last Tuesday?", at)[0])
'2023-05-15'
>>> relative_period("How many weeks ago did I start?", at) is None
True
"""

from __future__ import annotations

import calendar
import re
import time
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from .lexicon import LAST_WORDS, NUMBER_WORDS, TIME_UNIT_DAYS, VAGUE_COUNTS

__all__ = ["relative_period"]

DAY = 86400.0
#: Of an ``N units ago`` offset, this share is added before it: "two weeks ago" is said of
#: 10 to 21 days.
AGO_SLACK = 0.5

_UNITS = "|".join(TIME_UNIT_DAYS)
_UNIT = rf"({_UNITS})s?"
_LAST_WORD = "|".join(LAST_WORDS)
_COUNT = "|".join(sorted([r"\d+", *map(re.escape, NUMBER_WORDS), *map(re.escape, VAGUE_COUNTS)],
                         key=lambda w: (-len(w), w)))
_WEEKDAY = "|".join(d.lower() for d in calendar.day_name)
_AGO = re.compile(rf"\b({_COUNT})\s+{_UNIT}\s+ago\b", re.I)
_LAST_N = re.compile(rf"\b(?:{_LAST_WORD})\s+({_COUNT})\s+{_UNIT}\b", re.I)
#: "last week", not "the last week of the trip" (a part of something, not a period
#: before now); no "last day" ("the last day of ...")
_LAST = re.compile(rf"\b(?:{_LAST_WORD})\s+(?:({_WEEKDAY})|(weekend)|(night)|({_UNITS})s?)\b"
                   r"(?!\s+of\b)", re.I)
_YESTERDAY = re.compile(r"\byesterday\b", re.I)


def _count(word: str) -> float:
    word = word.lower()
    if word.isdigit():
        return float(word)
    return float(VAGUE_COUNTS.get(word) or NUMBER_WORDS[word])


def _calendar_start(today: datetime, unit: str, back: int) -> datetime:
    """The start of the week (Monday), month or year holding ``today``, ``back`` of them
    earlier."""
    if unit == "week":
        return today - timedelta(days=today.weekday() + 7 * back)
    if unit == "month":
        month = today.month - 1 - back
        return today.replace(year=today.year + month // 12, month=month % 12 + 1, day=1)
    if unit == "year":
        return today.replace(year=today.year - back, month=1, day=1)
    return today - timedelta(days=back)


def _starts(query: str, now: datetime) -> list[float]:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    t0 = today.timestamp()
    starts = []
    for m in _AGO.finditer(query):
        offset = _count(m.group(1)) * TIME_UNIT_DAYS[m.group(2).lower()] * DAY
        starts.append(now.timestamp() - offset - max(DAY, AGO_SLACK * offset))
    for m in _LAST_N.finditer(query):
        starts.append(now.timestamp() - _count(m.group(1)) * TIME_UNIT_DAYS[m.group(2).lower()] * DAY - DAY)
    for m in _LAST.finditer(query):
        weekday, weekend, night, unit = m.group(1), m.group(2), m.group(3), m.group(4)
        if weekday or weekend:  # the latest one before today, then the one a week before
            wd = list(calendar.day_name).index(weekday.capitalize()) if weekday else 5
            back = (today.weekday() - wd) % 7 or 7
            if weekend and today.weekday() >= 5:  # on a weekend, "last weekend" is the one before
                back = today.weekday() - 5 + 7
            starts.append(t0 - (back + 7) * DAY - DAY)
        elif night:  # last night: yesterday
            starts.append(t0 - 2 * DAY)
        else:
            starts.append(_calendar_start(today, unit.lower(), 1).timestamp() - DAY)
    if _YESTERDAY.search(query):
        starts.append(t0 - 2 * DAY)
    return starts


def relative_period(query: str, asked_at: float | None = None) -> tuple[float, float] | None:
    """The period from which the turns telling of the question's relative dates can come,
    as epoch seconds ``(start, end)`` (module docstring), or None when it holds none.
    ``asked_at``: when the question is asked (default now)."""
    return _relative_period(query, time.time() if asked_at is None else asked_at)


@lru_cache(maxsize=512)
def _relative_period(query: str, asked_at: float) -> tuple[float, float] | None:
    try:
        now = datetime.fromtimestamp(asked_at, timezone.utc)
    except (OverflowError, OSError, ValueError):  # a time no calendar holds: read as now
        now = datetime.now(timezone.utc)
    try:
        starts = _starts(query, now)
    except (OverflowError, OSError, ValueError):  # "9999 years ago": before any calendar
        starts = [float("-inf")]
    if not starts:
        return None
    return min(starts), now.timestamp() + DAY

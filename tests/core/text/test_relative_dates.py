"""Relative dates in a question, read against the time it is asked: each lower bound below
is computed by hand from the calendar (2023-05-30 is a Tuesday)."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from synapse_integrations.core.signals.focus import date_scope, focus
from synapse_integrations.core.text.relative_dates import DAY, relative_period
from tests.core.signals.test_focus import _view

AT = datetime(2023, 5, 30, 12, 0, tzinfo=timezone.utc)  # a Tuesday, noon


def _day(y, m, d, hour=0):
    return datetime(y, m, d, hour, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("question, start", [
    # N units ago: the moment N units back (noon), less half the offset, at least a day
    ("What did I do two weeks ago?", _day(2023, 5, 9, 12)),          # 14 + 7 days back
    ("I mentioned an art event 2 weeks ago. Where was it?", _day(2023, 5, 9, 12)),
    ("What did I buy a week ago?", _day(2023, 5, 20)),                 # 7 + 3.5 days back
    ("What happened three days ago?", _day(2023, 5, 26)),              # 3 + 1.5 days back
    ("Where was I a couple of weeks ago?", _day(2023, 5, 9, 12)),
    # calendar periods: the start of the previous one, less a day
    ("Which shoes did I clean last month?", _day(2023, 3, 31)),
    ("What did I read last week?", _day(2023, 5, 21)),                 # Monday 22 May - 1
    ("What did I plant last year?", _day(2021, 12, 31)),
    ("What was my goal for the past year?", _day(2021, 12, 31)),
    # spans back from now
    ("How many pieces of jewelry did I get in the last two months?",
     AT.timestamp() - 2 * 30.44 * DAY - DAY),
    # days: the latest such day, or the one a week before it, less a day
    ("Who did I meet for lunch last Tuesday?", _day(2023, 5, 15)),     # 23 or 16 May
    ("How much did I earn last Thursday?", _day(2023, 5, 17)),         # 25 or 18 May
    ("What game did I beat last weekend?", _day(2023, 5, 19)),         # 27 or 20 May
    ("What did I cook last night?", _day(2023, 5, 28)),
    ("What did I cook yesterday?", _day(2023, 5, 28)),
])
def test_a_relative_date_bounds_the_turns_that_tell_of_it_from_below(question, start):
    lo, hi = relative_period(question, AT.timestamp())
    assert lo == pytest.approx(start)
    assert hi == AT.timestamp() + DAY


@pytest.mark.parametrize("question", [
    "How many weeks ago did I start the course?",   # asks for a count: names no period
    "What did I do on the last day of my trip?",    # a part of something, not a period
    "What happened in the last week of June?",
    "I'll see you in two weeks, right?",
    "When was I last at the dentist?",
    "Where does Sam live now?",
    # of now or of what is coming: any earlier preference may answer
    "I'm rearranging the furniture in my bedroom this weekend. Any tips?",
    "What should I cook today?",
    "I'm travelling this month, what should I pack?",
])
def test_questions_without_a_relative_period_name_none(question):
    assert relative_period(question, AT.timestamp()) is None


def test_on_a_weekend_last_weekend_is_the_one_before():
    sunday = datetime(2023, 5, 28, 12, tzinfo=timezone.utc).timestamp()
    # the weekend of 20-21 May, or the one of 13-14 May; less a day
    assert relative_period("What did I do last weekend?", sunday)[0] == _day(2023, 5, 12)


def test_several_relative_dates_take_the_earliest_start():
    lo, _ = relative_period("Did I run more last week or two months ago?", AT.timestamp())
    assert lo == pytest.approx(AT.timestamp() - 2 * 30.44 * DAY - 30.44 * DAY)


def test_the_question_time_defaults_to_now_and_odd_times_never_fail():
    lo, hi = relative_period("What did I do yesterday?")
    now = datetime.now(timezone.utc).timestamp()
    assert lo < now - DAY < hi and hi == pytest.approx(now + DAY, abs=5)
    assert relative_period("What did I do 9999 years ago?", AT.timestamp())[0] < -9000 * 365 * DAY
    assert relative_period("What did I do yesterday?", 1e20) is not None  # read as now


def test_turns_said_before_the_period_are_demoted_and_later_ones_kept():
    t = AT.timestamp()
    v = _view([("user", t - 40 * DAY), ("user", t - 17 * DAY), ("user", t - DAY), ("user", None)])
    q = "I went to an art event two weeks ago. Where was it?"
    assert date_scope(v, q, t).tolist() == [False, True, True, False]
    score, _ = focus(v, np.arange(4), np.full(4, 0.5), q, speaker_weight=1.0, date_weight=0.7,
                     asked_at=t)
    assert score.tolist() == pytest.approx([0.35, 0.5, 0.5, 0.35])
    # asked today, against a memory of three years ago: no turn within, nothing demoted
    assert date_scope(v, q, t + 3 * 365 * DAY) is None


def test_engine_last_month_is_read_against_the_questions_time(memory):
    """Two turns say nearly the same thing months apart; asked at a time just after the
    second, 'last month' finds it; asked (as_of) just after the first, the first."""
    first, second = AT - timedelta(days=150), AT - timedelta(days=3)
    memory.add_turns([
        {"text": "I cleaned my white sneakers with baking soda.", "speaker": "user",
         "timestamp": first, "id": "old"},
        {"text": "I cleaned my white sneakers and the suede boots.", "speaker": "user",
         "timestamp": second, "id": "new"},
    ])
    q = "Which shoes did I clean last month?"
    assert memory.retrieve(q, k=2, at=AT).episodes()[0].id == "new"
    early = memory.retrieve(q, k=2, at=first + timedelta(days=20))
    assert [it.id for it in early.episodes()][0] == "old"
    items = {it.id: it for it in memory.retrieve(q, k=2, at=AT).episodes()}
    assert items["old"].components.focus < 0 and items["new"].components.focus == 0


def test_now_is_read_at_each_call_not_frozen_by_the_cache(monkeypatch):
    """A server runs for days: 'yesterday' asked today is not yesterday's 'yesterday'."""
    import synapse_integrations.core.text.relative_dates as rd

    monkeypatch.setattr(rd.time, "time", lambda: AT.timestamp())
    first = relative_period("What did I cook yesterday?")
    monkeypatch.setattr(rd.time, "time", lambda: AT.timestamp() + 3 * DAY)
    assert relative_period("What did I cook yesterday?")[0] == first[0] + 3 * DAY


def test_only_the_start_of_a_long_question_is_read_for_relative_dates():
    """As for named dates: a pasted text's "a week ago" is not the question's date."""
    from synapse_integrations.core.signals.focus import DATE_QUERY_CHARS

    t = AT.timestamp()
    v = _view([("user", t - 40 * DAY), ("user", t - 2 * DAY)])
    pasted = "Summarise this: " + "x" * DATE_QUERY_CHARS + " It happened a week ago."
    assert date_scope(v, pasted, t) is None
    assert date_scope(v, "What happened a week ago?", t).tolist() == [False, True]

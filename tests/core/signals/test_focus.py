"""Focus (core/focus.py): what a question names, a speaker or dates, and the memories
outside it demoted. Kernels against hand-computed values; the dates against dateparser's
reading of real questions; then the real engine (real MiniLM, real Chroma)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from synapse_integrations import SynapseConfig
from synapse_integrations.core.signals.focus import (
    DATE_SLACK, asks_assistant, date_scope, focus, named_dates, named_speaker, names_out,
)
from synapse_integrations.core.graph.graph import Compiled

DAY = 86400.0


def _epoch(y, m, d):
    return datetime(y, m, d, tzinfo=timezone.utc).timestamp()


def _view(rows, concepts=0):
    """Episodes ``(speaker, ts)`` plus ``concepts`` concept nodes at the end."""
    n = len(rows) + concepts
    pad = [None] * concepts
    return Compiled.from_arrays([f"n{i}" for i in range(n)], np.eye(n), src=[], dst=[], weight=[],
                                is_episode=[True] * len(rows) + [False] * concepts,
                                attrs={"speaker": [r[0] for r in rows] + pad, "ts": [r[1] for r in rows] + pad,
                                       "metadata": [{}] * n})


def test_other_speakers_turns_are_demoted_when_one_speaker_is_named():
    v = _view([("Nate", 0.0), ("Joanna", 1.0), ("Joanna", 2.0)], concepts=1)
    cand, base = np.arange(4), np.array([0.6, 0.5, -0.2, 0.4])
    score, change = focus(v, cand, base, "What pets does Nate have?", speaker_weight=0.85, date_weight=1.0)
    # Joanna's turns at 0.85 of their score (a negative one lowered too); the concept stays
    assert score.tolist() == pytest.approx([0.6, 0.425, -0.23, 0.4])
    assert change.tolist() == pytest.approx([0.0, -0.075, -0.03, 0.0])
    assert named_speaker(v, "What pets does Nate have?") == "Nate"
    for q in ("Did Nate and Joanna both adopt pets?", "Who adopted a dog?"):  # two, or none
        assert named_speaker(v, q) is None
        assert not focus(v, cand, base, q, speaker_weight=0.85, date_weight=1.0)[1].any()
    assert not focus(v, cand, base, "What pets does Nate have?", speaker_weight=1.0, date_weight=1.0)[1].any()


def test_a_first_person_question_is_about_the_user():
    chat = Compiled.from_arrays(["u", "a", "b", "c"], np.eye(4), src=[], dst=[], weight=[],
                                is_episode=[True, True, True, False],
                                attrs={"speaker": ["Ana", "Bot", "user", None], "ts": [0.0, 1.0, 2.0, None],
                                       "metadata": [{"role": "user"}, {"role": "assistant"}, {}, None]})
    cand, base = np.arange(4), np.full(4, 0.5)
    score, _ = focus(chat, cand, base, "How often do I go to yoga?", speaker_weight=1.0, role_weight=0.8,
                     date_weight=1.0)
    # the user's turns (a role in the metadata, or the speaker "user") keep their score
    assert score.tolist() == pytest.approx([0.5, 0.4, 0.5, 0.5])
    # no first person: nothing; a named speaker wins over the first person
    assert not focus(chat, cand, base, "How often does one go to yoga?", speaker_weight=0.8,
                     role_weight=0.8, date_weight=1.0)[1].any()
    assert focus(chat, cand, base, "What did Bot tell me?", speaker_weight=0.8, role_weight=0.5,
                 date_weight=1.0)[0].tolist() == pytest.approx([0.4, 0.5, 0.4, 0.5])
    # recalling the assistant's words ("you mentioned"): the user's turns are demoted,
    # though the question says "me"; asking the assistant to act ("can you remind me") is not
    asked = "Can you remind me of the two companies you mentioned?"
    assert asks_assistant(asked) and not asks_assistant("Can you remind me what I ordered?")
    assert focus(chat, cand, base, asked, speaker_weight=1.0, role_weight=0.8,
                 date_weight=1.0)[0].tolist() == pytest.approx([0.4, 0.5, 0.4, 0.5])
    assert focus(chat, cand, base, "Can you remind me what I ordered?", speaker_weight=1.0,
                 role_weight=0.8, date_weight=1.0)[0].tolist() == pytest.approx([0.5, 0.4, 0.5, 0.5])
    # a memory of named people: "I" names no one
    people = _view([("Caroline", 0.0), ("Melanie", 1.0)])
    assert not focus(people, np.arange(2), np.full(2, 0.5), "What did I say?", speaker_weight=0.8,
                     role_weight=0.8, date_weight=1.0)[1].any()


def _named_view(rows, vectors):
    return Compiled.from_arrays([f"n{i}" for i in range(len(rows))], np.asarray(vectors, dtype=np.float32),
                                src=[], dst=[], weight=[], is_episode=[True] * len(rows),
                                attrs={"speaker": rows, "ts": [0.0] * len(rows), "metadata": [{}] * len(rows)})


def test_names_out_takes_the_named_speakers_out_of_both_sides_of_the_cosine():
    # hand-made 4-d vectors: axis 0 says "Sam:", axis 1 "Ana:", axes 2-3 what a turn is about
    lines = {"Sam:": [1.0, 0.0, 0.0, 0.0], "Ana:": [0.6, 0.8, 0.0, 0.0]}
    asked = []

    def embed(texts):
        asked.append(list(texts))
        return np.array([lines[t] for t in texts])

    vecs = [[0.8, 0.0, 0.6, 0.0],  # Sam, a short turn: mostly the name, a little of axis 2
            [0.6, 0.0, 0.0, 0.8],  # Sam, about axis 3
            [0.0, 0.6, 0.0, 0.8]]  # Ana, about axis 3
    v = _named_view(["Sam", "Sam", "Ana"], vecs)
    q = np.array([0.6, 0.0, 0.0, 0.8])  # names Sam, asks about axis 3
    plain = np.asarray(vecs) @ q
    assert plain.round(2).tolist() == [0.48, 1.0, 0.64]
    n = names_out(v, "What does Sam do on weekends?", embed)
    assert n is not None and asked == [["Sam:"]]
    # without axis 0: q -> axis 3; turn 0 -> axis 2 (cosine 0), turn 1 -> axis 3 (1),
    # turn 2 unchanged (0.6 Ana + 0.8 axis 3: 0.8)
    assert n.cosines(plain, q).round(6).tolist() == [0.0, 1.0, 0.8]
    # two names: both axes out (Ana's line is orthogonalised against Sam's)
    two = names_out(v, "Did Sam and Ana both go?", embed)
    assert two is not None and two.basis.shape == (2, 4)
    assert (two.basis @ two.basis.T).round(6).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert two.nodes == pytest.approx(np.asarray(vecs) @ two.basis.T)
    assert two.cosines(plain, q).round(6).tolist() == [0.0, 1.0, 1.0]
    # none named, roles, no embedder: nothing to take out
    assert names_out(v, "Who went hiking?", embed) is None
    assert names_out(_named_view(["user", "assistant"], vecs[:2]), "What did the assistant say?", embed) is None
    assert names_out(v, "What does Sam do?", None) is None
    # derived once per view and set of names: asked again, nothing is embedded again
    before = len(asked)
    assert names_out(v, "What does Sam like?", embed) is n
    assert len(asked) == before


def test_engine_a_named_speakers_short_turns_no_longer_match_by_the_name(memory):
    """The demo's failure: "Yes, the place with the cardamom buns." matched "What does Sam
    do for work?" at 0.46 by the name alone, above the answer."""
    memory.add_turns([{"text": text, "speaker": who} for who, text in [
        ("Riley", "Do you remember that bakery on Alder Street?"),
        ("Sam", "Yes, the place with the cardamom buns."),
        ("Riley", "I might go there on Saturday."),
        ("Sam", "Yep, still a data analyst at the solar company. We're building a dashboard for panel output."),
        ("Sam", "Sounds fun."),
        ("Riley", "My sister adopted a parrot."),
        ("Sam", "Ha, nice."),
    ]])
    ask = "What does Sam do for work?"
    res = memory.retrieve(ask, k=7)
    off = memory.retrieve(ask, k=7, config=SynapseConfig(speaker_free_cosine=False))
    answer = "Yep, still a data analyst at the solar company. We're building a dashboard for panel output."
    short = ("Yes, the place with the cardamom buns.", "Ha, nice.")

    def rank_and_cosines(r):
        eps = r.episodes()
        cos = {it.text: it.components.similarity for it in eps}
        return [it.text for it in eps].index(answer), cos[answer] / max(cos[t] for t in short)

    (rank_on, ratio_on), (rank_off, ratio_off) = rank_and_cosines(res), rank_and_cosines(off)
    assert rank_on < rank_off, (rank_on, rank_off)
    assert ratio_off < 0.75 and ratio_on > 0.85, (ratio_off, ratio_on)  # the name had lifted the short turns
    top = res.episodes()[0]
    # the gate reads the plain cosine of the top memory either way
    q = memory._embedder.embed_query(ask)
    assert res.confidence == pytest.approx(float(memory._state.compiled().embeddings[
        memory._state.compiled().index[top.id]] @ q), abs=1e-6)


def test_first_person_weight_is_its_own_switch(memory):
    memory.add_turns([{"text": "I go to yoga twice a week.", "speaker": "user", "metadata": {"role": "user"}},
                      {"text": "Yoga twice a week is a great habit for you.", "speaker": "assistant",
                       "metadata": {"role": "assistant"}}])
    on = {it.speaker: it.components.focus for it in memory.retrieve("How often do I do yoga?", k=4).items}
    assert on["user"] == 0.0 and on["assistant"] < 0
    off = memory.retrieve("How often do I do yoga?", k=4, config=SynapseConfig(first_person_weight=1.0))
    assert all(it.components.focus == 0.0 for it in off.items)


@pytest.mark.parametrize("question,start,end", [
    ("What did Nate do for Joanna on 25 May, 2022?", (2022, 5, 25), (2022, 5, 26)),
    ("What book did Tim just finish reading on 8th December, 2023?", (2023, 12, 8), (2023, 12, 9)),
    ("What did we plan on December 8, 2023?", (2023, 12, 8), (2023, 12, 9)),
    ("What happened on 2023-12-08?", (2023, 12, 8), (2023, 12, 9)),
    ("What cake did Joanna make in May 2022?", (2022, 5, 1), (2022, 6, 1)),
    ("Where did John travel in 2021?", (2021, 1, 1), (2022, 1, 1)),
])
def test_named_dates_are_the_named_day_month_or_year_with_a_days_slack(question, start, end):
    lo, hi = named_dates(question)
    assert lo == _epoch(*start) - DATE_SLACK and hi == _epoch(*end) + DATE_SLACK


def test_a_date_without_a_year_is_the_latest_before_the_question():
    asked = _epoch(2024, 2, 10)
    lo, hi = named_dates("Where did I go on March 3rd?", asked)
    assert (lo + DATE_SLACK, hi - DATE_SLACK) == (_epoch(2023, 3, 3), _epoch(2023, 3, 4))


@pytest.mark.parametrize("question", ["What pets does Nate have?", "May I ask what Sam does?",
                                      "How many hours have I spent on my sculpture?",
                                      "What did I say last week about the gym?"])
def test_questions_without_a_written_date_name_none(question):
    assert named_dates(question) is None


@pytest.mark.parametrize("question", ["what about 1/1/1 and 9999-12-31?", "on 12/31/9999 at 25:61",
                                      "on 0000-00-00", "on 2023-13-45", "in May 10000"])
def test_odd_dates_never_fail_a_question(question):
    window = named_dates(question)
    assert window is None or window[0] < window[1]


def test_only_the_start_of_a_long_question_is_read_for_dates():
    """A pasted document full of numbers costs the parser no more than a question does."""
    from synapse_integrations.core.signals.focus import DATE_QUERY_CHARS

    long = "What did we decide on 3 May, 2022? " + "x" * DATE_QUERY_CHARS \
        + " Figures: 12 May 2021, 2019-04-03." * 400
    assert named_dates(long) == named_dates("What did we decide on 3 May, 2022?")
    assert named_dates("x" * DATE_QUERY_CHARS + " on 3 May, 2022") is None


def test_turns_outside_the_named_dates_are_demoted():
    v = _view([("Ann", _epoch(2022, 5, 25) + 3600), ("Bo", _epoch(2022, 5, 26) + 3600),  # slack
               ("Ann", _epoch(2022, 6, 20)), ("Bo", None)], concepts=1)
    q = "What did Ann do on 25 May, 2022?"
    assert date_scope(v, q).tolist() == [True, True, False, False, False]
    cand, base = np.arange(5), np.full(5, 0.5)
    score, change = focus(v, cand, base, q, speaker_weight=1.0, date_weight=0.7)
    # outside: the June turn and the turn without a time; the concept is no turn
    assert score.tolist() == pytest.approx([0.5, 0.5, 0.35, 0.35, 0.5])
    # both at once multiply: Bo's June turn would be 0.85 x 0.7
    v2 = _view([("Ann", _epoch(2022, 5, 25)), ("Bo", _epoch(2022, 6, 20))])
    s2, _ = focus(v2, np.arange(2), np.array([1.0, 1.0]), q, speaker_weight=0.85, date_weight=0.7)
    assert s2.tolist() == pytest.approx([1.0, 0.85 * 0.7])
    # no turn within the dates: nothing is demoted (the question may be about another year)
    assert date_scope(v, "What did Ann do on 25 May, 2019?") is None
    assert not focus(v, cand, base, "What did Ann do on 25 May, 2019?", speaker_weight=1.0,
                     date_weight=0.7)[1].any()


T0 = datetime(2024, 3, 1, 18, 0, tzinfo=timezone.utc)


def test_engine_a_dated_question_finds_that_days_turn(memory):
    """Three sessions say nearly the same thing; the question names the second one's day.
    Its turn ranks first, anchored by the date even when other days' turns are closer."""
    days = [T0, T0 + timedelta(days=40), T0 + timedelta(days=80)]
    texts = ["I baked a lemon cake for the neighbours.", "I baked a carrot cake for my sister.",
             "I baked a lemon cake with blueberries for the office."]
    turns = []
    for d, text in zip(days, texts):
        turns += [{"text": f"Jo: {text}", "speaker": "Jo", "timestamp": d},
                  {"text": "Ed: Sounds delicious!", "speaker": "Ed", "timestamp": d + timedelta(seconds=5)}]
    memory.add_turns(turns)
    carrot = next(n for n, d in memory.graph.nodes(data=True) if "carrot" in d.get("text", ""))
    q = f"What cake did Jo bake on {days[1].day} {days[1]:%B}, {days[1].year}?"
    res = memory.retrieve(q, k=6)
    top = res.episodes()[0]
    assert top.id == carrot and top.components.focus == 0.0
    others = [it for it in res.episodes() if it.id != carrot]
    assert others and all(it.components.focus < 0 for it in others)
    assert all(sum(it.components.terms().values()) == pytest.approx(it.score) for it in res.items)
    off = memory.retrieve(q, k=6, config=SynapseConfig(date_weight=1.0))
    assert all(it.components.focus >= 0 or it.speaker == "Ed" for it in off.episodes())
    assert off.episodes()[0].id != carrot  # without the dates, a lemon cake is closer


def test_a_speakers_name_is_embedded_when_they_first_speak_not_by_the_first_question():
    """The names a question holds are left out of its cosines, which needs each name's
    embedding: it is made when the speaker's first turn is stored (with the write's other
    embedding work), so the first question that names them pays no model call."""
    from synapse_integrations import HashingEmbedder, Synapse
    from synapse_integrations.storage.chroma import ephemeral_client

    class Counting(HashingEmbedder):
        texts: list[str] = []

        def embed_documents(self, texts):
            Counting.texts = [*Counting.texts, *texts]
            return super().embed_documents(texts)

    emb = Counting()
    with Synapse(None, namespace="names-at-write", embedder=emb, client=ephemeral_client()) as mem:
        mem.add_turns([{"text": "I adopted a cat called Pickle.", "speaker": "Ann"},
                       {"text": "Lovely! I got a dog.", "speaker": "Bo"},
                       {"text": "Hello there", "speaker": "user"}])
        assert {"Ann:", "Bo:"} <= set(Counting.texts) and "user:" not in Counting.texts
        q = "What pet did Ann adopt?"
        qv = emb.embed_query(q)
        before = len(Counting.texts)
        found = mem.retrieve_by_vector(q, qv)
        assert len(Counting.texts) == before  # no name embedded at question time
        assert found.items[0].text.endswith("Pickle.")

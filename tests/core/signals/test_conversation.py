"""Conversational context (core/signals/replies.py): replies scored with their question; and
the focus on the speaker a question names (core/signals/focus.py) in the engine. Kernels against
hand-computed values, then the real engine (real MiniLM, real Chroma)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from synapse_integrations import SynapseConfig
from synapse_integrations.core.signals.replies import (
    FOLLOW_UP_CHARS, REPLY_WINDOW, follow_ups, lift_replies, replies_to, with_replies,
)
from synapse_integrations.core.graph.graph import Compiled
from synapse_integrations.errors import ConfigError


def _view(rows, concepts=0):
    """A compiled view of episodes ``(speaker, text, ts, role)`` in ingestion order, plus
    ``concepts`` concept nodes at the end."""
    n = len(rows) + concepts
    ids = [f"e{i}" for i in range(len(rows))] + [f"c{i}" for i in range(concepts)]
    pad = [None] * concepts
    return Compiled.from_arrays(
        ids, np.eye(n), src=[], dst=[], weight=[], is_episode=[True] * len(rows) + [False] * concepts,
        attrs={"seq": [i + 1 for i in range(len(rows))] + pad,
               "speaker": [r[0] for r in rows] + pad, "text": [r[1] for r in rows] + pad,
               "ts": [r[2] for r in rows] + pad,
               "metadata": [{"role": r[3]} if r[3] else {} for r in rows] + pad})


def test_a_reply_is_the_next_turn_by_another_speaker_after_a_question():
    v = _view([("Ann", "Ann: Where do you work?", 0.0, None),          # e0 asks
               ("Bo", "Bo: At the bakery.", 5.0, None),                 # e1 answers e0
               ("Bo", "Bo: And you?", 6.0, None),                       # e2 same speaker as e1
               ("Ann", "Ann: At the docks.", 7.0, None),                # e3 answers e2
               ("Bo", "Bo: Nice.", 8.0, None),                          # e4: e3 asked nothing
               ("Ann", "Ann: Any news?", 100.0, None),                  # e5
               ("Bo", "Bo: I moved.", 100.0 + REPLY_WINDOW + 1, None),  # e6: too late
               ("user", "user: Which lamp should I buy?", None, "user"),  # e7
               ("assistant", "A brass one.", None, "assistant"),      # e8: the assistant's
               ("user", "user: Which one is cheaper?", None, "user"),   # e9
               ("Cy", "Cy: The blue one.", None, None)])                # e10: times unknown
    assert replies_to(v).tolist() == [-1, 0, -1, 2, -1, -1, -1, -1, -1, -1, 9]


def test_replies_follow_ingestion_order_not_position():
    v = Compiled.from_arrays(["a", "q"], np.eye(2), src=[], dst=[], weight=[], is_episode=[True, True],
                             attrs={"seq": [2, 1], "speaker": ["Bo", "Ann"], "ts": [1.0, 0.0],
                                    "text": ["Bo: Fine.", "Ann: How are you?"], "metadata": [{}, {}]})
    assert replies_to(v).tolist() == [1, -1]


def test_with_replies_adds_the_answers_of_candidate_questions_only():
    v = _view([("Ann", "Where do you work?", 0.0, None), ("Bo", "At the bakery.", 1.0, None),
               ("Ann", "Do you like it?", 2.0, None), ("Bo", "Very much.", 3.0, None)])
    assert with_replies(v, np.array([0])).tolist() == [0, 1]
    assert with_replies(v, np.array([0, 2])).tolist() == [0, 1, 2, 3]
    assert with_replies(v, np.array([1])).tolist() == [1]  # 1 asks nothing
    assert with_replies(v, np.array([], dtype=np.int64)).tolist() == []


def test_a_reply_keeps_the_better_of_its_score_and_weight_times_its_question():
    v = _view([("Ann", "Where do you work?", 0.0, None), ("Bo", "At the bakery.", 1.0, None),
               ("Ann", "Do you like it?", 2.0, None), ("Bo", "Very much, the bread is great.", 3.0, None)])
    cand = np.arange(4)
    score, lift = lift_replies(v, cand, np.array([0.9, 0.3, 0.5, 0.6]), 0.8)
    # e1: max(0.3, 0.8 x 0.9) = 0.72; e3: max(0.6, 0.8 x 0.5 = 0.4) = 0.6 (no lift)
    assert score.tolist() == pytest.approx([0.9, 0.72, 0.5, 0.6])
    assert lift.tolist() == pytest.approx([0.0, 0.42, 0.0, 0.0])
    # the question not a candidate: nothing to inherit
    score, lift = lift_replies(v, np.array([1, 3]), np.array([0.3, 0.6]), 0.8)
    assert score.tolist() == [0.3, 0.6] and not lift.any()
    # off
    assert not lift_replies(v, cand, np.array([0.9, 0.3, 0.5, 0.6]), 0.0)[1].any()


def test_a_follow_up_question_links_the_reply_to_its_speakers_statement():
    long_q = "Ann: " + "That sounds lovely. " * 15 + "Did it rain?"
    assert len(long_q) > FOLLOW_UP_CHARS
    v = _view([("Bo", "Bo: We took the kids to the memorial.", 0.0, None),      # e0 statement
               ("Ann", "Ann: How did they react?", 5.0, None),                # e1 follows e0 up
               ("Bo", "Bo: Awestruck.", 9.0, None),                           # e2 -> e1 (and e0)
               ("Cy", "Cy: I went sailing.", 20.0, None),                     # e3
               ("Ann", "Ann: Was it windy?", 25.0, None),                     # e4
               ("Bo", "Bo: No idea.", 30.0, None),                            # e5 -> e4 (e3 is Cy's)
               ("Bo", "Bo: We hiked.", 40.0, None),                           # e6
               ("Ann", long_q, 45.0, None),                                   # e7: too long
               ("Bo", "Bo: A little.", 50.0, None),                           # e8 -> e7 only
               ("Bo", "Bo: I baked.", 100.0, None),                           # e9
               ("Ann", "Ann: What?", 100.0 + REPLY_WINDOW + 1, None),         # e10: too late
               ("Bo", "Bo: Bread.", 100.0 + REPLY_WINDOW + 2, None),          # e11 -> e10 only
               ("user", "user: I adopted a dog.", None, "user"),             # e12
               ("assistant", "What is its name?", None, "assistant"),       # e13
               ("user", "user: Biscuit.", None, "user")])                     # e14 -> e13 (and e12)
    assert replies_to(v).tolist() == [-1, -1, 1, -1, -1, 4, -1, -1, 7, -1, -1, 10, -1, -1, 13]
    assert follow_ups(v).tolist() == [-1, -1, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 12]


def test_the_reply_joins_and_scores_with_the_statement_its_question_followed_up():
    v = _view([("Bo", "We took the kids to the memorial.", 0.0, None), ("Ann", "How did they react?", 1.0, None),
               ("Bo", "Awestruck.", 2.0, None)])
    # candidates: the statement alone brings the reply in only with follow_up
    assert with_replies(v, np.array([0])).tolist() == [0]
    assert with_replies(v, np.array([0]), follow_up=True).tolist() == [0, 2]
    assert with_replies(v, np.array([1]), questions=False, follow_up=True).tolist() == [1]
    assert with_replies(v, np.array([1]), questions=False).tolist() == [1]
    cand = np.arange(3)
    # e2: max(0.1, 0.8 x 0.2 = 0.16, 0.64 x 0.9 = 0.576)
    score, lift = lift_replies(v, cand, np.array([0.9, 0.2, 0.1]), 0.8, 0.64)
    assert score.tolist() == pytest.approx([0.9, 0.2, 0.576])
    assert lift.tolist() == pytest.approx([0.0, 0.0, 0.476])
    # the question scores more: its hop wins (0.8 x 0.9 = 0.72 > 0.64 x 0.5)
    assert lift_replies(v, cand, np.array([0.5, 0.9, 0.1]), 0.8, 0.64)[0][2] == pytest.approx(0.72)
    # either weight alone
    assert lift_replies(v, cand, np.array([0.9, 0.2, 0.1]), 0.0, 0.64)[0][2] == pytest.approx(0.576)
    assert lift_replies(v, cand, np.array([0.9, 0.2, 0.1]), 0.8, 0.0)[0][2] == pytest.approx(0.16)
    # the statement not a candidate: only the question's hop
    score, _ = lift_replies(v, np.array([1, 2]), np.array([0.2, 0.1]), 0.8, 0.64)
    assert score.tolist() == pytest.approx([0.2, 0.16])


@pytest.mark.parametrize("field,value", [("reply_weight", -0.1), ("reply_weight", 1.5),
                                         ("question_weight", -0.2),
                                         ("question_weight", 1.2),
                                         ("follow_up_weight", -0.5), ("follow_up_weight", 1.1),
                                         ("named_speaker_weight", 2.0), ("date_weight", -1.0),
                                         ("first_person_weight", 1.01)])
def test_weights_out_of_range_are_config_errors(field, value):
    with pytest.raises(ConfigError, match=field):
        SynapseConfig(**{field: value})


T0 = datetime(2024, 3, 1, 18, 0, tzinfo=timezone.utc)
TURNS = [
    ("Sam", "Dana, what do you do for work these days?"),
    ("Dana", "I restore old violins in a little workshop by the harbour."),
    ("Sam", "Work has been hectic for me, the quarterly report is due on Friday."),
    ("Dana", "Hang in there! Deadlines at work are the worst."),
    ("Sam", "My manager at work wants the slides redone again."),
    ("Dana", "I went kayaking on Sunday, the lake was calm."),
    ("Sam", "I started a pottery class on Tuesdays."),
    ("Dana", "I bake sourdough every weekend now."),
    ("Dana", "Work emails never stop for me, even on weekends."),
    ("Dana", "My friends from work are coming over for dinner."),
]


def _store(memory, turns, prefixed=False):
    """Store ``(speaker, text)`` turns a second apart (as ``"<speaker>: <text>"`` when
    ``prefixed``); returns their ids by text."""
    memory.add_turns([{"text": f"{who}: {text}" if prefixed else text, "speaker": who,
                       "timestamp": T0 + timedelta(seconds=i)} for i, (who, text) in enumerate(turns)])
    return {d["text"].split(": ", 1)[1] if prefixed else d["text"]: n
            for n, d in memory.graph.nodes(data=True) if d["kind"] == "episode"}


def _ranked(res):
    return [it.id for it in res.episodes()]


def test_engine_ranks_the_answer_with_its_question(memory):
    ids = _store(memory, TURNS, prefixed=True)
    answer, question = ids[TURNS[1][1]], ids[TURNS[0][1]]
    off = SynapseConfig(reply_weight=0.0, named_speaker_weight=1.0)
    ask = "What does Dana do for work?"
    before = _ranked(memory.retrieve(ask, k=8, config=off))
    res = memory.retrieve(ask, k=len(TURNS) + 30)  # every turn, the question's included
    after = _ranked(res)
    assert after.index(answer) < before.index(answer), (before, after)
    assert after.index(answer) < after.index(question)
    item = next(it for it in res.items if it.id == answer)
    asked = next(it for it in res.items if it.id == question)
    terms = item.components.terms()
    assert terms["reply"] > 0  # lifted: 0.8 x its question's score (before the focus on Dana)
    # the question's score as found: before its discount as a question and the focus
    found = asked.score - asked.components.focus - asked.components.asked
    assert asked.components.asked < 0 and asked.components.reply == 0
    assert item.score == pytest.approx(memory.config.reply_weight * found)
    assert sum(terms.values()) == pytest.approx(item.score)
    # the question names Dana: Sam's turns are demoted, Dana's are not
    for it in res.episodes():
        assert (it.components.focus < 0) == (it.speaker == "Sam" and it.score > 0), it
    assert memory.retrieve(ask, k=8, config=off).items[0].components.focus == 0.0


FOLLOW_UP_TURNS = [
    ("John", "Last weekend I took my kids to the military memorial in the city."),
    ("Maria", "Oh wow, how did they react?"),
    ("John", "They were awestruck and humbled."),
    ("John", "Work has been busy, we are moving offices next month."),
    ("Maria", "I volunteered at the shelter on Saturday."),
    ("John", "My kids started swimming lessons at the community pool."),
    ("Maria", "The shelter needs more blankets for the winter."),
    ("John", "I fixed the fence in the backyard after the storm."),
    ("Maria", "My mom and I cooked dinner together last night."),
    ("John", "The kids loved the fireworks on the fourth of July."),
]


def test_engine_ranks_the_answer_to_a_follow_up_with_the_statement_it_continues(memory):
    ids = _store(memory, FOLLOW_UP_TURNS)
    statement, answer = ids[FOLLOW_UP_TURNS[0][1]], ids[FOLLOW_UP_TURNS[2][1]]
    ask = "How did John's kids feel at the military memorial?"
    off = memory.config.replace(follow_up_weight=0.0)
    before, res = _ranked(memory.retrieve(ask, k=10, config=off)), memory.retrieve(ask, k=10)
    after = _ranked(res)
    assert after.index(answer) < before.index(answer), (before, after)
    assert after.index(answer) <= 2, after
    item = next(it for it in res.items if it.id == answer)
    said = next(it for it in res.items if it.id == statement)
    # two hops from the statement: 0.64 x its score (John's turns: no focus demotion)
    assert said.components.focus == 0.0 and item.components.terms()["reply"] > 0
    assert item.score == pytest.approx(memory.config.follow_up_weight * said.score)
    assert sum(item.components.terms().values()) == pytest.approx(item.score)


COMET_TURNS = [
    ("Ann", "Did you see the comet last night?"),
    ("Bo", "Yes! It was bright green, right over the lake."),
    ("Ann", "I repainted the kitchen cabinets on Saturday."),
    ("Bo", "My sister starts her new job at the library next week."),
    ("Ann", "The bakery on Elm Street closed for good."),
    ("Bo", "I have been practising the guitar every evening."),
]


def test_engine_ranks_the_answer_above_the_question_it_answers(memory):
    ids = _store(memory, COMET_TURNS)
    question, answer = ids[COMET_TURNS[0][1]], ids[COMET_TURNS[1][1]]
    ask = "Did anyone see the comet?"
    off = memory.config.replace(question_weight=1.0)
    assert _ranked(memory.retrieve(ask, k=6, config=off))[:2] == [question, answer]
    res = memory.retrieve(ask, k=6)
    assert _ranked(res)[:2] == [answer, question]
    asked = next(it for it in res.items if it.id == question)
    keep = memory.config.question_weight
    assert asked.components.asked == pytest.approx(
        -(1 - keep) * (asked.score - asked.components.asked))
    assert sum(asked.components.terms().values()) == pytest.approx(asked.score)
    reply = next(it for it in res.items if it.id == answer)
    assert reply.components.reply > 0  # it inherited the question's rank before the discount

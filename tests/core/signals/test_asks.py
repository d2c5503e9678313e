"""What a turn asks (core/signals/asks.py): the asked share, the discount against
hand-computed values, the query about asking; then the real engine (real MiniLM, real
Chroma) on the issue's case: a stored question below the statement that answers it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from synapse_integrations import SynapseConfig
from synapse_integrations.core.graph.graph import Compiled
from synapse_integrations.core.signals.asks import (
    about_asking,
    asked_share,
    discount_asked,
)
from synapse_integrations.errors import ConfigError


def _view(texts, metadata=None, speakers=None):
    n = len(texts)
    return Compiled.from_arrays([f"e{i}" for i in range(n)], np.eye(n), src=[], dst=[],
                                weight=[], is_episode=[True] * n,
                                attrs={"speaker": speakers or ["Ann"] * n,
                                       "seq": list(range(1, n + 1)),
                                       "metadata": metadata or [{}] * n,
                                       "text": list(texts)})


@pytest.mark.parametrize("text,speaker,share", [
    ("Where do you work?", None, 1.0),
    ("I restore violins.", None, 0.0),
    ("Sam: Where do you work?", "Sam", 1.0),
    ("Great news! Where is it?", None, 12 / 23),         # 11 characters tell, 12 ask
    ("She asked \"why?\" and left.", None, 0.0),        # a quoted ? inside a sentence
    ("Did you say \"yes?\"", None, 1.0),                # closing quote after the ?
    ("", None, 0.0),
])
def test_asked_share_is_the_share_of_characters_in_question_sentences(text, speaker, share):
    assert asked_share(text, speaker) == pytest.approx(share)


def test_a_question_whose_answer_memory_holds_keeps_weight_times_its_asked_share():
    v = _view(["Nice! Where do you work?",      # e0: partly asks; e1 (Bo) answers it
               "At the bakery.",                # e1: tells
               "Any plans for the weekend?",    # e2: asks; memory held the answer (marked)
               "What is a good pesto recipe?",  # e3: asks something new: kept
               "Where is the bakery?"],         # e4: a negative score is left alone
              metadata=[{}, {}, {"asks_about": "e1"}, {}, {"asks_about": "e1"}],
              speakers=["Ann", "Bo", "Ann", "Ann", "Ann"])
    cand = np.arange(5)
    score = np.array([1.0, 0.2, 0.6, 0.5, -0.1])
    share = len("Where do you work?") / (len("Nice!") + len("Where do you work?"))
    out, change = discount_asked(v, cand, score, 0.25)
    # 1 - (1 - 0.25) x share of a positive score
    assert change.tolist() == pytest.approx([-0.75 * share, 0.0, -0.45, 0.0, 0.0])
    assert out.tolist() == pytest.approx((score + change).tolist())
    assert discount_asked(v, cand, score, 1.0)[1].tolist() == [0.0] * 5  # 1: off
    sub = np.array([1, 2])  # only the candidates are read, in their order
    assert discount_asked(v, sub, score[sub], 0.25)[1].tolist() == pytest.approx([0.0, -0.45])


def test_a_stored_question_is_marked_with_the_statement_that_answers_it(tmp_path):
    from synapse_integrations import HashingEmbedder, Synapse

    with Synapse(tmp_path / "m", embedder=HashingEmbedder()) as mem:
        fact = mem.add_turn("Ana lives in Lisbon with her two cats.", speaker="user")
        offer = mem.add_turn("Ana lives in Lisbon? Lovely, is it sunny?", speaker="assistant")
        ids = mem.add_turns([
            {"text": "Where does Ana live with her two cats?", "speaker": "user"},
            {"text": "Should I study quantum chromodynamics?", "speaker": "user"},  # nothing held
            {"text": "Ana lives in Lisbon with her two cats? Since when?", "speaker": "user"},
        ])
        about = [mem.get(i)["metadata"].get("asks_about") for i in ids]
        assert about == [fact, None, fact]  # never the assistant's turn, never a question
        assert "asks_about" not in mem.get(offer)["metadata"]  # the assistant's is not marked



def test_a_question_whose_words_memory_holds_is_marked_below_the_cosine(tmp_path):
    """An answer told in other words (and turns) is below ASKED_COSINE (hashing vectors:
    0.32 at most here), but memory holds every word asked about; a question about its
    asker with a word memory never told keeps its score, and words forgotten are no
    longer held."""
    from synapse_integrations import HashingEmbedder, Synapse

    with Synapse(tmp_path / "m", embedder=HashingEmbedder()) as mem:
        moved = mem.add_turn("I moved to Lisbon last year.", speaker="user")
        ids = mem.add_turns([
            {"text": "Adopted two cats there.", "speaker": "user"},
            {"text": "Did I adopt cats after moving?", "speaker": "user"},  # every word held
            {"text": "Should I play the cello?", "speaker": "user"},  # "cello", "play": new
        ])
        cats = ids[0]
        about = [mem.get(i)["metadata"].get("asks_about") for i in ids[1:]]
        assert about == [cats, None]  # the nearest statement, from the same batch
        again = mem.add_turn("Have I adopted more cats since I moved?", speaker="user")
        assert mem.get(again)["metadata"]["asks_about"] in (cats, moved)
        mem.forget([cats])  # "cat" and "adopt" leave memory's words
        later = mem.add_turn("Did I adopt any cats in Lisbon?", speaker="user")
        assert "asks_about" not in mem.get(later)["metadata"]


def test_a_question_that_tells_nothing_of_its_asker_is_marked(tmp_path):
    """A question about others or the world ("Does Ana play the cello?") tells memory
    nothing, so it is marked even with words memory never told (the nearest statement
    becomes its ``asks_about``); the same question in the first person keeps its score."""
    from synapse_integrations import HashingEmbedder, Synapse

    with Synapse(tmp_path / "m", embedder=HashingEmbedder()) as mem:
        moved = mem.add_turn("Ana moved to Lisbon last year.", speaker="user")
        ids = mem.add_turns([
            {"text": "Does Ana play the cello?", "speaker": "user"},
            {"text": "Could my cello teacher visit Ana?", "speaker": "user"},
        ])
        about = [mem.get(i)["metadata"].get("asks_about") for i in ids]
        assert about == [moved, None]

@pytest.mark.parametrize("query,about", [
    ("What did I ask you about Lisbon?", True),
    ("Which questions did Ana have about the move?", True),
    ("I was wondering where my sister lives", True),
    ("Where does my sister live?", False),
    ("What did Ana say about Lisbon?", False),
])
def test_a_query_about_asking_is_told_apart(query, about):
    assert about_asking(query) is about


def test_question_weight_is_checked():
    with pytest.raises(ConfigError, match="question_weight"):
        SynapseConfig(question_weight=1.5)


T0 = datetime(2024, 3, 1, 18, 0, tzinfo=timezone.utc)
#: the agent loop of issue 47: a fact, then the user's question about it and the
#: assistant's acknowledgement, recorded as the middleware records a chat
LOOP = [("user", "My sister Ana moved to Lisbon last year."),
        ("assistant", "That's a big move! How is she finding it?"),
        ("user", "Where does my sister live?"),
        ("assistant", "Let me check my notes.")]


@pytest.mark.model
def test_a_stored_question_ranks_below_the_statement_that_answers_it(tmp_path):
    from synapse_integrations import Synapse

    with Synapse(tmp_path / "m") as mem:
        ids = mem.add_turns([{"text": t, "speaker": s, "metadata": {"role": s},
                              "timestamp": T0 + timedelta(minutes=i)}
                             for i, (s, t) in enumerate(LOOP)])
        fact, question = ids[0], ids[2]
        assert mem.get(question)["metadata"]["asks_about"] == fact  # memory held its answer
        ask = "Where does my sister Ana live?"
        off = mem.retrieve(ask, k=4, config=mem.config.replace(question_weight=1.0))
        assert [it.id for it in off.items][0] == question  # the failure, unchanged
        res = mem.retrieve(ask, k=4)
        order = [it.id for it in res.items]
        assert order[0] == fact, [it.text for it in res.items]
        held = next(it for it in res.items if it.id == question)
        assert held.components.asked < 0 and sum(held.components.terms().values()) == \
            pytest.approx(held.score)
        assert res.accepted  # the statement is evidence enough for the gate
        # asked about the asking, the question is what the query wants
        about = mem.retrieve("What did I ask you about my sister?", k=4)
        assert [it.id for it in about.items][0] == question
        assert all(it.components.asked == 0 for it in about.items)

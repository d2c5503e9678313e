"""mnemos' affective routing end to end: each turn tagged at ingestion with
``affect = [valence, arousal, complexity]`` (offline lexicon rules checked by hand, or any
chat model), stored on the node, persisted, and used by the mnemos model's
``0.7 sim + 0.3 (1 - d_state)`` ranking."""

from __future__ import annotations

import math

import pytest

from synapse_integrations import InvalidInputError, InvalidTypeError, Synapse, SynapseConfig
from synapse_integrations.core.models.affect import (
    PIECE_WORDS,
    LexiconAffectTagger,
    LLMAffectTagger,
    affect_tag,
    as_tagger,
    vader_pieces,
)


def _compound(text):
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer().polarity_scores(text)["compound"]


def test_lexicon_rules_on_hand_checked_sentences():
    t = LexiconAffectTagger()
    # 6 words: URGENT the build is broken help; one "!"; a word in capitals; urgency words;
    # markers ":" and ","; mean word length 26/6
    s = "URGENT: the build is broken, help!"
    c = _compound(s)
    v, a, x = t.tag(s)
    assert v == pytest.approx(c)  # VADER reads "help" as positive: c = +0.35 here
    assert a == pytest.approx(min(1.0, 0.5 * abs(c) + 0.2 * 1 / 2 + 0.1 + 0.2))
    assert x == pytest.approx(0.4 * 6 / 30 + 0.3 * (26 / 6 - 4) / 3 + 0.3 * 2 / 3)
    # calm, short, plain: no "!", no capitals ("We" is not all capitals), no urgency word
    s = "We had tea in the garden."
    v, a, x = t.tag(s)
    assert a == pytest.approx(0.5 * abs(_compound(s)))
    assert x == pytest.approx(0.4 * 6 / 30)  # mean word length 19/6 < 4, no markers
    # the sign of valence on plainly positive / negative sentences
    assert t.tag("I love this wonderful, happy day")[0] > 0.5
    assert t.tag("This is a horrible, awful, disgusting mess")[0] < -0.5
    # long and subordinate-heavy: complexity saturates the length and marker terms
    long = ("Although the migration, which we planned because the schema changed, "
            "mostly worked; however, the replication lag (unexpectedly) grew, therefore "
            "we paused it while investigating whether the indexes were consistent")
    assert t.tag(long)[2] >= 0.4 + 0.3 - 1e-9


def test_vader_pieces_by_hand():
    # at most `limit` words: the text itself, untouched (spacing and newlines kept)
    assert vader_pieces("Fine.\n  Really fine!", 3) == ["Fine.\n  Really fine!"]
    # sentences packed in order while they fit; a sentence never split when it fits alone
    text = "One two. Three four five. Six! Seven eight nine ten eleven twelve"
    assert vader_pieces(text, 5) == ["One two. Three four five.", "Six!",
                                     "Seven eight nine ten eleven", "twelve"]
    # line breaks end a sentence too; every word kept once, in order
    text = "first line here\nsecond line here\nthird"
    assert vader_pieces(text, 4) == ["first line here", "second line here third"]
    for limit in (1, 2, 3, 7):
        pieces = vader_pieces(text * 3, limit)
        assert all(len(p.split()) <= limit for p in pieces)
        assert " ".join(pieces).split() == (text * 3).split()


def test_long_text_valence_is_the_word_weighted_mean_of_its_pieces():
    whole = LexiconAffectTagger(piece_words=10**6)
    t = LexiconAffectTagger(piece_words=6)
    # pieces: "I love this wonderful sunny day." (6 words), "The meeting was awful." (4)
    text = "I love this wonderful sunny day. The meeting was awful."
    a, b = _compound("I love this wonderful sunny day."), _compound("The meeting was awful.")
    assert a > 0.5 and b < -0.4
    assert t.compound(text) == pytest.approx((6 * a + 4 * b) / 10)
    v, arousal, _ = t.tag(text)
    assert v == pytest.approx((6 * a + 4 * b) / 10)
    assert arousal == pytest.approx(0.5 * abs(v))  # no "!", capitals or urgency word
    # a text within the limit is scored whole, exactly as VADER scores it
    assert whole.compound(text) == pytest.approx(_compound(text))
    assert LexiconAffectTagger().compound(text) == pytest.approx(_compound(text))
    # the default: 64 words
    assert PIECE_WORDS == 64 and LexiconAffectTagger().piece_words == 64


def test_vader_reads_no_piece_longer_than_the_limit():
    # what bounds the cost: VADER is never handed more than piece_words words at once
    t = LexiconAffectTagger(piece_words=16)
    seen = []
    inner = t._vader.polarity_scores
    t._vader.polarity_scores = lambda text: seen.append(text) or inner(text)
    long = "This is great, I am so happy with the result. " * 40 + "word " * 50
    t.tag(long)
    assert seen and max(len(p.split()) for p in seen) <= 16
    assert sum(len(p.split()) for p in seen) == len(long.split())


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64", None])
def test_piece_words_must_be_a_positive_int(bad):
    with pytest.raises(InvalidInputError, match="piece_words"):
        LexiconAffectTagger(piece_words=bad)


def test_as_tagger_and_affect_tag():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    assert as_tagger(False) is None
    assert isinstance(as_tagger(None), LexiconAffectTagger)
    llm = as_tagger(FakeListChatModel(responses=["0.5, 0.2, 0.9"]))
    assert isinstance(llm, LLMAffectTagger)
    assert affect_tag(llm, "anything") == [0.5, 0.2, 0.9]
    with pytest.raises(InvalidTypeError, match="affect_tagger"):
        as_tagger(42)

    class Broken:
        def tag(self, text):
            return (math.nan, 0.0, 0.0)

    with pytest.raises(ValueError, match="three finite numbers"):
        affect_tag(Broken(), "x")


def test_turns_are_tagged_at_ingestion_and_persisted(tmp_path, embedder):
    text = "URGENT: the build is broken, help!"
    mem = Synapse(tmp_path / "m", embedder=embedder)
    i = mem.add_turn(text)
    assert mem.get(i)["affect"] == pytest.approx(list(LexiconAffectTagger().tag(text)))
    mem.close()
    again = Synapse.load(tmp_path / "m", embedder=embedder)
    try:
        assert again.get(i)["affect"] == pytest.approx(list(LexiconAffectTagger().tag(text)))
    finally:
        again.close()
    off = Synapse(tmp_path / "n", embedder=embedder, affect_tagger=False)
    try:
        assert "affect" not in off.get(off.add_turn(text))
    finally:
        off.close()


def test_chat_model_tags_at_ingestion(tmp_path, embedder):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    mem = Synapse(tmp_path / "m", embedder=embedder,
                  affect_tagger=FakeListChatModel(responses=["-0.9, 1.4, 0.3"]))
    try:
        assert mem.get(mem.add_turn("whatever"))["affect"] == [-0.9, 1.0, 0.3]  # clamped
    finally:
        mem.close()


class StateTagger:
    """A tagger for the paper's 5.2 setting: three cognitive states by keyword."""

    STATES = {"crisis": (-0.8, 0.9, 0.3), "design": (0.1, 0.2, 0.9), "calm": (0.8, 0.1, 0.1)}

    def tag(self, text):
        return next((s for k, s in self.STATES.items() if k in text), (0.0, 0.5, 0.5))


def test_mnemos_routes_by_the_stored_state(tmp_path, embedder):
    """The paper's 5.2 experiment: 9 chunks in three states, a query in each state gets
    its state's 3 chunks in the top 3 (the texts alike, so the state term decides)."""
    mem = Synapse(tmp_path / "m", embedder=embedder, affect_tagger=StateTagger(),
                  config=SynapseConfig(model="mnemos"))
    try:
        ids = {}
        for state in StateTagger.STATES:
            ids[state] = mem.add_turns([f"Note {k} about the server ({state})." for k in range(3)])
        mem.consolidate()
        for state in StateTagger.STATES:
            res = mem.retrieve(f"What about the server? ({state})", k=3)
            assert {it.id for it in res.items} == set(ids[state]), state
    finally:
        mem.close()

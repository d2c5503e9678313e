"""The incremental BM25 index gives bm25s's scores (the oracle), after any adds and removes."""

from __future__ import annotations

import random

import numpy as np
import pytest

bm25s = pytest.importorskip("bm25s")

from synapse_integrations.core.index.bm25 import BM25Index  # noqa: E402
from synapse_integrations.core.text.tokens import terms, tokenize  # noqa: E402

# inflected forms ("skiing", "skis", "ships", "shipped") share a stem with other words
WORDS = ("dana ski skiing skis trip whistler snow cousin vet school cello lisbon porto order "
         "code heron57 garden gardens tomato river bridge kestrel project ships shipped friday "
         "the of").split()


def _oracle(texts: dict[str, str], query: str, split=terms) -> dict[str, float]:
    """bm25s's scores over the index's terms (Snowball stems of the tokens, or with
    ``split=tokenize`` the tokens as written), each distinct query term counted once."""
    ids = list(texts)
    model = bm25s.BM25()
    model.index([split(texts[i]) or ["\x00empty"] for i in ids], show_progress=False)
    tokens = [t for t in dict.fromkeys(split(query)) if t in model.vocab_dict]  # once each
    if not tokens:
        return {i: 0.0 for i in ids}
    return dict(zip(ids, np.asarray(model.get_scores(tokens), dtype=np.float64)))


def _corpus(rng: random.Random, n: int) -> dict[str, str]:
    return {f"d{k}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))
            for k in range(n)}


@pytest.mark.parametrize("stemming", [True, False])
@pytest.mark.parametrize("seed", range(8))
def test_scores_match_bm25s_after_adds_and_removes(seed: int, stemming: bool) -> None:
    rng = random.Random(seed)
    texts = _corpus(rng, 60)
    idx = BM25Index(stemming=stemming)
    split = terms if stemming else tokenize
    live: dict[str, str] = {}
    for step in range(5):  # grow, shrink, re-add, replace
        for doc_id, text in list(texts.items())[step * 12:(step + 1) * 12]:
            idx.add(doc_id, text)
            live[doc_id] = text
        gone = rng.sample(sorted(live), 4)
        idx.remove(gone)
        for g in gone:
            live.pop(g)
        replaced = rng.choice(sorted(live))
        live[replaced] = " ".join(rng.choice(WORDS) for _ in range(5))
        idx.add(replaced, live[replaced])
        index = {d: k for k, d in enumerate(sorted(live))}
        for _ in range(5):
            query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
            expect = _oracle(live, query, split)
            got = idx.scores_for(query, index, len(index))
            np.testing.assert_allclose(got, [expect[d] for d in sorted(live)], rtol=2e-6, atol=1e-7)
    assert idx.indexes(live) and len(idx) == len(live)


def test_query_ranks_like_the_scores_and_keeps_only_matches() -> None:
    idx = BM25Index()
    idx.set({"a": "dana went skiing", "b": "skiing skiing in whistler", "c": "tea"})
    ids, scores = idx.query("skiing whistler", 5)
    assert ids == ["b", "a"] and scores[0] > scores[1] > 0
    assert idx.query("absent words", 5)[0] == []
    assert idx.query("skiing", 0)[0] == []


def test_positions_follow_a_growing_index_and_a_new_one() -> None:
    idx = BM25Index()
    idx.set({"a": "river bridge", "b": "garden"})
    index = {"a": 0}
    assert idx.scores_for("garden river", index, 1)[0] > 0  # "b" is not in the view yet
    index["b"] = 1  # the same view object grew
    s = idx.scores_for("garden river", index, 2)
    assert s[0] > 0 and s[1] > 0
    other = {"b": 0, "a": 1}
    t = idx.scores_for("garden river", other, 2)
    assert t[0] == pytest.approx(s[1]) and t[1] == pytest.approx(s[0])


def test_positions_asked_again_follow_adds_removals_and_the_views_size() -> None:
    """A query asks for the slot positions several times; the answer is kept, and every
    change it depends on is seen: a document added or removed (same index object, same
    size), the view's size, a grown index. Callers cannot write into the kept answer."""
    idx = BM25Index()
    idx.set({"a": "river bridge", "b": "garden"})
    index = {"a": 0, "b": 1, "c": 2}
    assert idx.scores_for("garden river", index, 3)[2] == 0.0  # "c" not indexed yet
    idx.add("c", "garden river walk")
    assert idx.scores_for("garden river", index, 3)[2] > 0
    assert idx.holders("walk", index, 3, np.ones(3, dtype=bool))[0].tolist() == [2]
    idx.remove(["a"])
    s = idx.scores_for("garden river", index, 3)
    assert s[0] == 0.0 and s[1] > 0 and s[2] > 0
    assert idx.scores_for("garden river", index, 2).tolist() == s[:2].tolist()  # n shrank
    index["d"] = 3
    idx.add("d", "river")
    assert idx.scores_for("river", index, 4)[3] > 0
    kept = idx._slot_positions(index, 4)  # the kept answer itself (test access)
    with pytest.raises(ValueError):
        kept[0] = 5


def test_many_removals_compact_without_changing_scores() -> None:
    rng = random.Random(3)
    texts = _corpus(rng, 200)
    idx = BM25Index()
    idx.set(texts)
    doomed = sorted(texts)[:150]
    idx.remove(doomed)
    live = {k: v for k, v in texts.items() if k not in doomed}
    index = {d: k for k, d in enumerate(sorted(live))}
    expect = _oracle(live, "dana ski garden heron")
    np.testing.assert_allclose(idx.scores_for("dana ski garden heron", index, len(index)),
                               [expect[d] for d in sorted(live)], rtol=2e-6, atol=1e-7)


def test_inflections_are_one_term_and_identifiers_stay_exact() -> None:
    idx = BM25Index()
    idx.set({"a": "Rachel moved to Chicago", "b": "code heron57 and heron58", "c": "tea"})
    index = {"a": 0, "b": 1, "c": 2}
    assert idx.query("where did Rachel move?", 5)[0] == ["a"]
    assert idx.scores_for("moving", index, 3)[0] == pytest.approx(idx.scores_for("moved", index, 3)[0])
    assert idx.has("moves") and idx.idf("moving") == idx.idf("move")
    assert idx.query("heron5", 5)[0] == []  # codes are not stemmed or cut
    # a query saying one stem twice ("move", "moved") counts it once in the shares
    cov, used, _ = idx.coverage(["move", "moved", "chicago"], index, 3, np.ones(3, dtype=bool))
    assert used == ["move", "chicago"] and cov[0] == pytest.approx(1.0)
    plain = BM25Index(stemming=False)
    plain.set({"a": "Rachel moved to Chicago"})
    assert not plain.has("move") and plain.query("where did Rachel move?", 5)[0] == ["a"]


def test_only_a_token_as_written_singles_a_document_out() -> None:
    idx = BM25Index()
    idx.set({"a": "I've lived in Portland for six years", "b": "order QM5521 arrived",
             "c": "order QM5522 arrived", "d": "we live near the park now"})
    index = {"a": 0, "b": 1, "c": 2, "d": 3}
    everyone = np.ones(4, dtype=bool)
    # "live" is one stem with "lived": held by a and d, so no document alone holds it
    assert not idx.exclusive_share("Where does Sam live?", index, 4, everyone).any()
    # among a and b only, "a" holds the stem but not the word: not singled out
    only_a = np.array([True, True, False, False])
    assert not idx.exclusive_share("Where does Sam live?", index, 4, only_a).any()
    # the written word, or a code, does single its document out
    assert idx.exclusive_share("Who has lived in Portland?", index, 4, only_a)[0] > 0
    assert idx.exclusive_share("what about order QM5521?", index, 4, everyone)[1] > 0.5


def test_a_hyphenated_compound_meets_the_same_word_written_whole() -> None:
    idx = BM25Index()
    idx.set({"a": "I've been running farther to de-stress", "b": "we played nonstop",
             "c": "order QM-5521-TK arrived", "d": "order QM-5522-TK arrived",
             "e": "ice cream on the pier"})
    index = {k: i for i, k in enumerate("abcde")}
    assert idx.query("What does Melanie do to destress?", 5)[0] == ["a"]
    assert idx.query("the game they played non-stop", 5)[0][0] == "b"
    # the whole code is one more term only its own turn holds: its near-duplicate ranks below
    s = idx.scores_for("What did I buy with order QM-5521-TK?", index, 5)
    assert s[2] > s[3] > 0
    # both parts stay terms: "ice-cream" still finds "ice cream"
    assert idx.query("vegan ice-cream", 5)[0] == ["e"]
    # words as written (no stemming) are left as they were
    plain = BM25Index(stemming=False)
    plain.set({"a": "to de-stress"})
    assert not plain.has("destress")


def test_irregular_verb_forms_meet_their_lemma_and_other_readings_stay() -> None:
    idx = BM25Index()
    idx.set({"a": "I chose to write about this because it's personal", "b": "she wrote a poem",
             "c": "he taught vegan ice cream recipes", "d": "a felt hat",
             "e": "my friend Rose sent roses", "f": "prices rise every year"})
    index = {k: i for i, k in enumerate("abcdef")}
    # "written" is "write" (Snowball alone leaves "written"): both turns that write are found
    assert set(idx.query("How many screenplays has Joanna written?", 5)[0]) == {"a", "b"}
    assert idx.query("Who would teach me recipes?", 5)[0][0] == "c"
    # a word that reads as something else too keeps its own form: "felt" the cloth is not
    # "feel", "Rose" the name is not "rise"
    assert idx.query("How did you feel?", 5)[0] == []
    assert idx.scores_for("Rose", index, 6)[5] == 0.0
    plain = BM25Index(stemming=False)
    plain.set({"a": "she wrote a poem"})
    assert plain.query("write", 5)[0] == []


def test_british_and_american_spellings_are_one_term() -> None:
    """A user who writes "favourite colour" finds the turn that said "favorite color", and
    the other way round; words that are no spelling variant are left alone."""
    idx = BM25Index()
    idx.set({"a": "My favorite color is teal", "b": "I organised the travelling library",
             "c": "my favourite mug", "d": "a grey cat in the colourful garden"})
    assert idx.query("What is my favourite colour?", 5)[0][0] == "a"
    assert set(idx.query("Who organized the traveling library?", 5)[0]) == {"b"}
    assert set(idx.query("favorite", 5)[0]) == {"a", "c"}
    assert idx.query("gray", 5)[0] == ["d"]
    # words as written (no stemming): spellings stay apart
    plain = BM25Index(stemming=False)
    plain.set({"a": "My favorite color is teal"})
    assert plain.query("favourite colour", 5)[0] == []


def test_a_query_term_counts_once_however_often_it_is_said() -> None:
    idx = BM25Index()
    idx.set({"a": "my coworker is going to study photography", "b": "a ski trip with Dana",
             "c": "quiet evening"})
    index = {"a": 0, "b": 1, "c": 2}
    # "went" and "going" are one term ("go"): said twice, it weighs as much as once
    np.testing.assert_allclose(idx.scores_for("went going", index, 3),
                               idx.scores_for("go", index, 3))
    np.testing.assert_allclose(idx.scores_for("ski ski ski trip", index, 3),
                               idx.scores_for("ski trip", index, 3))

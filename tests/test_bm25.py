"""The incremental BM25 index gives bm25s's scores (the oracle), after any adds and removes."""

from __future__ import annotations

import random

import numpy as np
import pytest

bm25s = pytest.importorskip("bm25s")

from synapse_integrations.core.bm25 import BM25Index  # noqa: E402
from synapse_integrations.core.tokens import tokenize  # noqa: E402

WORDS = ("dana ski trip whistler snow cousin vet school cello lisbon porto order code heron "
         "garden tomato river bridge kestrel project shipped friday the of").split()


def _oracle(texts: dict[str, str], query: str) -> dict[str, float]:
    ids = list(texts)
    model = bm25s.BM25()
    model.index([tokenize(texts[i]) or ["\x00empty"] for i in ids], show_progress=False)
    tokens = [t for t in tokenize(query) if t in model.vocab_dict]
    if not tokens:
        return {i: 0.0 for i in ids}
    return dict(zip(ids, np.asarray(model.get_scores(tokens), dtype=np.float64)))


def _corpus(rng: random.Random, n: int) -> dict[str, str]:
    return {f"d{k}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))
            for k in range(n)}


@pytest.mark.parametrize("seed", range(8))
def test_scores_match_bm25s_after_adds_and_removes(seed: int) -> None:
    rng = random.Random(seed)
    texts = _corpus(rng, 60)
    idx = BM25Index()
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
            expect = _oracle(live, query)
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

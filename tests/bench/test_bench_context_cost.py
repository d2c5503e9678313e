"""What a model is handed (bench/context_cost.py): tokens of the top k and recall within a
token budget, against hand-computed values; the packaged MiniLM tokenizer counts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from synapse_integrations.bench.context_cost import (
    TokenCounter,
    context_section,
    context_tokens,
    within_budget,
)
from synapse_integrations.errors import InvalidInputError

LENGTHS = {"a": 400, "b": 700, "c": 100, "d": 50}


def test_tokens_of_the_top_k():
    assert context_tokens(["a", "b", "c"], LENGTHS, 1) == 400
    assert context_tokens(["a", "b", "c"], LENGTHS, 3) == 1200
    assert context_tokens(["a", "zz"], LENGTHS, 2) == 400  # an unknown memory counts 0
    with pytest.raises(InvalidInputError, match="k"):
        context_tokens(["a"], LENGTHS, 0)


def test_the_context_is_the_longest_prefix_that_fits():
    assert within_budget(["a", "b", "c"], LENGTHS, 1000) == ["a"]   # 400 + 700 > 1000
    assert within_budget(["c", "a", "d"], LENGTHS, 550) == ["c", "a", "d"]
    assert within_budget(["b", "c"], LENGTHS, 600) == []  # the first does not fit
    with pytest.raises(InvalidInputError, match="budget"):
        within_budget(["a"], LENGTHS, 0)


def test_the_section_averages_per_category_and_pool():
    recs = [SimpleNamespace(category="1", ranked=["a", "b", "c"], evidence=("c",)),
            SimpleNamespace(category="1", ranked=["c", "a", "b"], evidence=("c", "b")),
            SimpleNamespace(category="2", ranked=["d"], evidence=())]  # no evidence: tokens only
    out = context_section(recs, lambda r: LENGTHS, ("1", "2"), {"all": ("1", "2")}, ks=(2,),
                          budgets=(500, 1200))
    assert out["context_tokens@2"] == {"1": (1100 + 500) / 2, "2": 50.0,
                                       "all": (1100 + 500 + 50) / 3}
    # 500 tokens: [a] holds none of c; [c, a] holds c of (c, b). 1200: a b c all; c a b all
    assert out["tokens_recall@500"] == {"1": 0.25, "2": None, "all": 0.25}
    assert out["tokens_recall@1200"] == {"1": 1.0, "2": None, "all": 1.0}


def test_the_packaged_tokenizer_counts_word_pieces():
    counter = TokenCounter()
    short, long_ = counter.counts(["hello world", "Sam: Ha, goggle tan. I went skiing."])
    assert short == 2 and long_ > 8
    assert counter.lengths({"x": "hello world"}) == {"x": 2}

"""Hand-computed checks of the retrieval options our defaults add to the paper's
(fan exponent, lexical term, BM25 score array, stopwords) and of the two presets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from synapse_integrations import SynapseConfig
from synapse_integrations.config import PAPER_DEFAULTS
from synapse_integrations.core.kernels.dynamics import propagation_matrix
from synapse_integrations.core.kernels.scoring import hybrid_score
from synapse_integrations.core.index.bm25 import BM25Index
from synapse_integrations.core.text.tokens import tokenize
from synapse_integrations.errors import ConfigError, InvalidInputError


def test_fan_exponent_divides_by_a_power_of_the_out_degree():
    # node 0 has four out-edges of weight 0.8; node 1 one edge of weight 0.5
    src, dst = np.array([0, 0, 0, 0, 1]), np.array([1, 2, 3, 4, 2])
    w = np.array([0.8, 0.8, 0.8, 0.8, 0.5])
    paper = propagation_matrix(src, dst, w, 5).toarray()
    soft = propagation_matrix(src, dst, w, 5, fan_exponent=0.5).toarray()
    none = propagation_matrix(src, dst, w, 5, fan_exponent=0.0).toarray()
    assert paper[1, 0] == pytest.approx(0.8 / 4)        # 0.2
    assert soft[1, 0] == pytest.approx(0.8 / 2)         # sqrt(4) = 2 -> 0.4
    assert none[1, 0] == pytest.approx(0.8)
    assert paper[2, 1] == soft[2, 1] == none[2, 1] == pytest.approx(0.5)  # fan of 1 is 1
    off = propagation_matrix(src, dst, w, 5, use_fan_effect=False, fan_exponent=0.5).toarray()
    assert off[1, 0] == pytest.approx(0.8)
    with pytest.raises(InvalidInputError):
        propagation_matrix(src, dst, w, 5, fan_exponent=-1.0)
    with pytest.raises(InvalidInputError):
        propagation_matrix(src, dst, w, 5, fan_exponent=math.nan)


def test_fan_in_exponent_divides_by_a_power_of_the_in_degree():
    # node 2 has in-edges from 0 and 1 and 3; node 1 only from 0
    src, dst = np.array([0, 0, 1, 3]), np.array([1, 2, 2, 2])
    w = np.array([0.8, 0.8, 0.5, 0.9])
    P = propagation_matrix(src, dst, w, 4, fan_exponent=1.0, fan_in_exponent=1.0).toarray()
    assert P[1, 0] == pytest.approx(0.8 / 2 / 1)      # out(0) = 2, in(1) = 1
    assert P[2, 0] == pytest.approx(0.8 / 2 / 3)      # in(2) = 3
    assert P[2, 1] == pytest.approx(0.5 / 1 / 3)
    assert P[2, 3] == pytest.approx(0.9 / 1 / 3)
    half = propagation_matrix(src, dst, w, 4, fan_exponent=0.0, fan_in_exponent=0.5).toarray()
    assert half[2, 3] == pytest.approx(0.9 / math.sqrt(3))
    assert half[1, 0] == pytest.approx(0.8)
    off = propagation_matrix(src, dst, w, 4, use_fan_effect=False, fan_in_exponent=1.0).toarray()
    assert off[2, 3] == pytest.approx(0.9)            # the switch turns both divisions off
    with pytest.raises(InvalidInputError, match="fan_in_exponent"):
        propagation_matrix(src, dst, w, 4, fan_in_exponent=-0.5)
    with pytest.raises(ConfigError, match="fan_in_exponent"):
        SynapseConfig(fan_in_exponent=math.inf)


def test_hybrid_score_lexical_term():
    sim, act, pr = np.array([0.4, 0.6]), np.array([0.5, 0.0]), np.array([1.0, 0.5])
    lex = np.array([1.0, 0.25])
    out = hybrid_score(sim, act, pr, lexical=lex, weight_similarity=0.5, weight_activation=0.3,
                       weight_pagerank=0.1, weight_lexical=0.3)
    # 0.5*0.4 + 0.3*0.5 + 0.1*1.0 + 0.3*1.0 = 0.75 ; 0.5*0.6 + 0 + 0.05 + 0.075 = 0.425
    assert out == pytest.approx([0.75, 0.425])
    no_lex = hybrid_score(sim, act, pr, weight_similarity=0.5, weight_activation=0.3,
                          weight_pagerank=0.1)
    assert no_lex == pytest.approx([0.45, 0.35])
    with pytest.raises(InvalidInputError):
        hybrid_score(sim, act, pr, lexical=np.ones(3), weight_similarity=1, weight_activation=0,
                     weight_pagerank=0, weight_lexical=1)


def test_bm25_scores_for_places_scores_by_position_and_follows_changes():
    idx = BM25Index()
    idx.set({"a": "Kendall went skiing in Whistler", "b": "a quiet evening at home",
             "c": "skiing again next winter"})
    index = {"c": 0, "b": 1, "a": 2, "z": 3}
    s = idx.scores_for("Whistler skiing", index, 4)
    assert s[1] == 0.0 and s[3] == 0.0          # no shared word; not indexed
    assert s[2] > s[0] > 0                       # two matching words beat one
    ids, top = idx.query("Whistler skiing", 3)
    assert ids == ["a", "c"] and top == pytest.approx([s[2], s[0]])
    idx.remove(["a"])                            # the position map is rebuilt after a change
    s2 = idx.scores_for("Whistler skiing", index, 4)
    assert s2[2] == 0.0 and s2[0] > 0


def test_stopwords_do_not_match():
    assert tokenize("What is the name of Sam's dog?") == ["name", "sam", "dog"]
    idx = BM25Index()
    idx.set({"pet": "Sam adopted a beagle puppy called Biscuit.",
             "music": "Sam is learning to play the cello."})
    ids, _ = idx.query("What is the name of the dog that Sam adopted?", 2)
    assert ids[0] == "pet"
    assert idx.query("what is the", 5)[0] == []  # only function words: no match at all


def test_paper_preset_differs_only_in_the_listed_fields():
    paper, ours = SynapseConfig.paper(), SynapseConfig()
    differ = {k for k, v in paper.to_dict().items() if getattr(ours, k) != v}
    assert differ == set(PAPER_DEFAULTS)
    assert (paper.iterations, paper.fan_exponent, paper.inhibition_beta, paper.weight_lexical,
            paper.weight_pagerank, paper.gate_signal, paper.gate_tau,
            paper.abstraction_scope) == \
        (3, 1.0, 0.15, 0.0, 0.2, "activation", 0.12, "window")
    # the abstraction scope shapes the graph: the two presets build different graphs
    assert paper.graph_signature() != ours.graph_signature()
    # (and sleep, which the SYNAPSE paper does not have: off in its preset)
    assert paper.replace(abstraction_scope="mentions", sleep_auto=True).graph_signature() == \
        ours.graph_signature()
    with pytest.raises(ConfigError, match="abstraction_scope"):
        SynapseConfig(abstraction_scope="session")
    with pytest.raises(ConfigError):
        SynapseConfig(gate_signal="vibes")
    with pytest.raises(ConfigError):
        SynapseConfig(fan_exponent=-0.5)


def test_retrieve_by_vector_rejects_a_bad_query_vector(tmp_path):
    from synapse_integrations import Synapse

    class Tiny:
        def embed_documents(self, texts):
            return [[1.0, 0.0, 0.0] if "ski" in t else [0.0, 1.0, 0.0] for t in texts]

        def embed_query(self, text):
            return self.embed_documents([text])[0]

    with Synapse(tmp_path / "m", embedder=Tiny(), config=SynapseConfig(embedding_dim=3)) as mem:
        mem.add_turns(["we went skiing", "a quiet evening"])
        assert mem.retrieve_by_vector("ski", np.array([1.0, 0.0, 0.0])).episodes()[0].text == \
            "we went skiing"
        for bad in (np.zeros(4), np.array([np.nan, 0.0, 0.0])):
            with pytest.raises(InvalidInputError):
                mem.retrieve_by_vector("ski", bad)

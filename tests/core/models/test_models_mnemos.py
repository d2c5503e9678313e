"""mnemos (seed paper 004): the BFS against the paper's 4-node chain, the fast BFS against
the reference, the cosine graph, affective routing and its taggers, and the model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from synapse_integrations.config import SynapseConfig
from synapse_integrations.core.graph.graph import Compiled
from synapse_integrations.core.models import get_model
from synapse_integrations.core.models._neighbors import top_k_neighbors
from synapse_integrations.core.models.affect import (
    LexiconAffectTagger,
    LLMAffectTagger,
    affective_score,
    state_distance,
)
from synapse_integrations.core.models.base import Query
from synapse_integrations.core.models.mnemos import (
    MnemosModel,
    bfs_energy,
    bfs_energy_reference,
    cosine_graph,
)
from synapse_integrations.errors import ConfigError, InvalidInputError, InvalidTypeError

# The paper's chain (5.3): Docker - Kubernetes - Nginx - Load Balancer, edge weight 0.8.
CHAIN = (np.array([0, 1, 3, 5, 6]), np.array([1, 0, 2, 1, 3, 2]), np.full(6, 0.8))


def test_paper_chain_at_the_default_decay():
    energy, parent = bfs_energy(*CHAIN, 0, decay=0.2, max_hops=3)
    f = 0.8 * 0.8  # (1 - delta) * w
    # hop 1: K gets f; hop 2: K sends f*f to D and N; hop 3: N sends f^3 to K and L;
    # L (third hop) sends nothing back
    np.testing.assert_allclose(energy, [1 + f**2, f + f**3, f**2, f**3], atol=1e-12)
    np.testing.assert_allclose(energy.round(2), [1.41, 0.90, 0.41, 0.26])  # the paper's numbers
    assert parent.tolist() == [-1, 0, 1, 2]
    # the paper says all four nodes are returned at delta 0.2, but its own 0.26 is below the
    # 0.3 threshold: three are (docs/models.md)
    assert np.flatnonzero(energy >= 0.3).tolist() == [0, 1, 2]


def test_paper_chain_without_decay_needs_the_three_hop_limit():
    energy, _ = bfs_energy(*CHAIN, 0, decay=0.0, max_hops=3)
    np.testing.assert_allclose(energy.round(2), [1.64, 1.31, 0.64, 0.51])  # the paper's numbers
    deeper, _ = bfs_energy(*CHAIN, 0, decay=0.0, max_hops=4)
    assert deeper[2] > 1.0  # a fourth hop would send 0.41 back to Nginx: not the paper


def test_paper_chain_high_decay_returns_only_the_seed():
    energy, _ = bfs_energy(*CHAIN, 0, decay=0.9, max_hops=3)
    assert np.flatnonzero(energy >= 0.3).tolist() == [0]


def test_zero_hops_and_isolated_seed():
    energy, parent = bfs_energy(*CHAIN, 2, decay=0.2, max_hops=0)
    assert energy.tolist() == [0, 0, 1.0, 0] and parent.tolist() == [-1] * 4
    energy, _ = bfs_energy(np.array([0, 0, 0]), np.array([], dtype=int), np.array([]), 1)
    assert energy.tolist() == [0.0, 1.0]


def test_new_node_arrives_with_the_strongest_transfer():
    # 0 - 1 (w 0.5), 0 - 2 (w 0.9), 1 - 3 (w 1.0), 2 - 3 (w 0.5): 3 is reached at hop 2 from
    # 1 (0.4 * 0.8 * 1.0 = 0.32) and from 2 (0.72 * 0.8 * 0.5 = 0.288): it carries 0.32 on
    adj = {0: [(1, 0.5), (2, 0.9)], 1: [(0, 0.5), (3, 1.0)], 2: [(0, 0.9), (3, 0.5)],
           3: [(1, 1.0), (2, 0.5), (4, 1.0)], 4: [(3, 1.0)]}
    indptr, indices, w = csr(adj, 5)
    energy, parent = bfs_energy(indptr, indices, w, 0, decay=0.2, max_hops=3)
    assert parent.tolist() == [-1, 0, 0, 1, 3]
    np.testing.assert_allclose(energy[4], 0.32 * 0.8)
    np.testing.assert_allclose(energy[3], 0.32 + 0.288)
    ref_e, ref_p = bfs_energy_reference(adj, 5, 0, decay=0.2, max_hops=3)
    np.testing.assert_allclose(energy, ref_e)
    np.testing.assert_array_equal(parent, ref_p)


def csr(adj: dict[int, list[tuple[int, float]]], m: int):
    indptr, indices, w = [0], [], []
    for i in range(m):
        for j, x in sorted(adj.get(i, [])):
            indices.append(j)
            w.append(x)
        indptr.append(len(indices))
    return np.array(indptr), np.array(indices, dtype=np.int64), np.array(w)


@pytest.mark.parametrize("seed", range(4))
def test_fast_bfs_matches_reference_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    m = 30
    adj: dict[int, list[tuple[int, float]]] = {}
    for a, b in rng.integers(0, m, (60, 2)):
        if a != b and all(j != b for j, _ in adj.get(int(a), [])):
            w = float(rng.uniform(0.6, 1.0))
            adj.setdefault(int(a), []).append((int(b), w))
            adj.setdefault(int(b), []).append((int(a), w))
    indptr, indices, w = csr(adj, m)
    for decay, hops in ((0.2, 3), (0.0, 5), (0.5, 2)):
        e, p = bfs_energy(indptr, indices, w, 0, decay=decay, max_hops=hops)
        re, rp = bfs_energy_reference(adj, m, 0, decay=decay, max_hops=hops)
        np.testing.assert_allclose(e, re, atol=1e-12)
        np.testing.assert_array_equal(p, rp)


def test_bfs_input_errors():
    with pytest.raises(InvalidInputError, match="seed"):
        bfs_energy(*CHAIN, 9)
    with pytest.raises(InvalidInputError, match="decay"):
        bfs_energy(*CHAIN, 0, decay=1.5)


def test_cosine_graph_is_symmetric_thresholded_and_capped():
    a = math.acos(0.8)
    emb = np.array([[math.cos(t), math.sin(t)] for t in (0, a, 2 * a, 3 * a)], dtype=np.float32)
    idx, sim = top_k_neighbors(emb, k=3)
    indptr, indices, w = cosine_graph(idx, sim, threshold=0.6)
    assert indptr.tolist() == [0, 1, 3, 5, 6] and indices.tolist() == [1, 0, 2, 1, 3, 2]
    np.testing.assert_allclose(w, 0.8, atol=1e-6)
    # a table one wide keeps each node's strongest link, plus the links pointing at it:
    # at 0, 20 and 50 degrees, 0 and 2 both pick 1, and 1 picks 0
    t = math.pi / 180
    emb3 = np.array([[math.cos(x * t), math.sin(x * t)] for x in (0, 20, 50)], dtype=np.float32)
    idx1, sim1 = top_k_neighbors(emb3, k=1)
    indptr, indices, _ = cosine_graph(idx1, sim1, threshold=0.6)
    assert indptr.tolist() == [0, 1, 3, 4] and indices.tolist() == [1, 0, 2, 1]


# --------------------------------------------------------------------------------------------
# affective routing
# --------------------------------------------------------------------------------------------
def test_state_distance_normalisation():
    d = state_distance(np.array([[1, 1, 1], [-1, 0, 0], [0, 0.5, 0.5], [0, 0, 0]]),
                       (-1.0, 0.0, 0.0))
    np.testing.assert_allclose(d, [1.0, 0.0, math.sqrt(1.5) / math.sqrt(6), 1 / math.sqrt(6)])


def test_affective_score_formula():
    s = affective_score(np.array([0.9, -0.4, 1.2]), np.array([[1, 1, 1], [-1, 0, 0], [0, 0, 0]]),
                        (-1.0, 0.0, 0.0))
    # sim clipped to [0, 1]; 0.3 * (1 - d)
    np.testing.assert_allclose(s, [0.63, 0.3, 0.7 + 0.3 * (1 - 1 / math.sqrt(6))])


def test_state_congruent_retrieval_as_in_the_paper():
    # 5.2: nine chunks in three states, equally similar to the query: the query's state
    # picks its own three
    states = {"crisis": (-0.8, 0.9, 0.4), "design": (0.2, 0.2, 0.9), "calm": (0.7, 0.1, 0.1)}
    chunk_states = np.array([s for s in states.values() for _ in range(3)])
    sim = np.full(9, 0.5) + np.random.default_rng(0).uniform(-0.02, 0.02, 9)
    for k, name in enumerate(states):
        top = np.argsort(-affective_score(sim, chunk_states, states[name]))[:3]
        assert sorted(top.tolist()) == [3 * k, 3 * k + 1, 3 * k + 2]


def test_lexicon_tagger_rules_hand_computed():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    text = "The build is BROKEN again! Help!"
    c = SentimentIntensityAnalyzer().polarity_scores(text)["compound"]
    v, a, x = LexiconAffectTagger().tag(text)
    assert v == pytest.approx(c)
    # |c|/2, two '!' (0.2), a word in capitals (0.1), urgency words broken/help (0.2)
    assert a == pytest.approx(min(1.0, 0.5 * abs(c) + 0.2 + 0.1 + 0.2))
    # 6 words: 0.4 * 6/30; mean length 25/6: 0.3 * (25/6 - 4)/3; no clause markers
    assert x == pytest.approx(0.4 * 6 / 30 + 0.3 * (25 / 6 - 4) / 3)
    assert LexiconAffectTagger().tag("  ...  ") == (0.0, 0.0, 0.0)
    with pytest.raises(InvalidTypeError):
        LexiconAffectTagger().tag(None)  # type: ignore[arg-type]


def test_lexicon_tagger_separates_crisis_design_and_calm():
    t = LexiconAffectTagger()
    crisis = t.tag("Production is down, everything is failing, this is a disaster!!")
    design = t.tag("We should design the schema so that, because writes are rare, reads can "
                   "be denormalised; however, migrations need care.")
    calm = t.tag("Thanks, that was a lovely relaxing weekend.")
    assert crisis[0] < 0 < calm[0]  # valence
    assert crisis[1] > max(design[1], calm[1])  # arousal
    assert design[2] > max(crisis[2], calm[2])  # complexity


class Boom:
    def invoke(self, messages):
        raise RuntimeError("no network")


def test_llm_tagger_parses_clamps_and_falls_back():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    fallback = StubTagger({"x": (0.1, 0.2, 0.3)})
    llm = LLMAffectTagger(FakeListChatModel(responses=["valence -1.5, arousal 0.7, complexity 0.2",
                                                       "I cannot rate that."]), fallback=fallback)
    assert llm.tag("x") == (-1.0, 0.7, 0.2)
    assert llm.tag("x") == (0.1, 0.2, 0.3) and llm.fallbacks == 1
    broken = LLMAffectTagger(Boom(), fallback=fallback)
    assert broken.tag("x") == (0.1, 0.2, 0.3) and broken.fallbacks == 1
    with pytest.raises(InvalidTypeError):
        LLMAffectTagger(object())


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------
class StubTagger:
    def __init__(self, table: dict[str, tuple[float, float, float]]) -> None:
        self.table = table
        self.calls = 0

    def tag(self, text: str) -> tuple[float, float, float]:
        self.calls += 1
        return self.table.get(text, (0.0, 0.5, 0.5))


def chain_view() -> Compiled:
    """The paper's chain as episodes in 2-D (consecutive cosines 0.8, others < 0.6), plus
    a concept close to the first episode."""
    a = math.acos(0.8)
    angles = (0, a, 2 * a, 3 * a, 0.05)
    emb = np.array([[math.cos(t), math.sin(t)] for t in angles], dtype=np.float32)
    texts = ["docker", "kubernetes", "nginx", "load balancer", "Docker"]
    return Compiled.from_arrays(["d", "k", "n", "l", "c"], emb, src=[], dst=[], weight=[],
                                is_episode=[True] * 4 + [False], attrs={"text": texts})


def chain_query(v: Compiled, text: str = "q") -> Query:
    q = np.array([math.cos(-0.1), math.sin(-0.1)])
    sim = v.embeddings.astype(np.float64) @ q
    return Query(text, q, sim, np.array([0, 4]))


def test_model_reproduces_the_chain_and_returns_nodes_above_threshold():
    v = chain_view()
    out = MnemosModel(StubTagger({})).activate(v, chain_query(v), SynapseConfig(
        model_params={"mnemos": {"affective": False}}))
    np.testing.assert_allclose(out.activation, [1.41, 0.90, 0.41, 0.26, 0.0], atol=0.005)
    assert out.reached.tolist() == [0, 1, 2]
    assert out.parents.tolist() == [-1, 0, 1, 2, -1]
    np.testing.assert_array_equal(out.score, out.activation)  # sorted by energy


def test_model_affective_score_uses_the_query_state():
    v = chain_view()
    tagger = StubTagger({"docker": (0.0, 0.5, 0.5), "nginx": (-0.8, 0.9, 0.4),
                         "server down!": (-0.8, 0.9, 0.4)})
    model = MnemosModel(tagger)
    out = model.activate(v, chain_query(v, "server down!"), SynapseConfig())
    states = np.array([tagger.table.get(t, (0.0, 0.5, 0.5)) for t in
                       ["docker", "kubernetes", "nginx", "load balancer", "Docker"]])
    expected = affective_score(chain_query(v).sim, states, (-0.8, 0.9, 0.4))
    np.testing.assert_allclose(out.score, expected)
    calls = tagger.calls
    model.activate(v, chain_query(v, "server down!"), SynapseConfig())
    assert tagger.calls == calls  # node and query tags are cached per text


def test_model_prefers_tags_stored_at_ingestion():
    v = chain_view()
    stored = Compiled.from_arrays(v.ids, v.embeddings, src=[], dst=[], weight=[],
                                  is_episode=v.is_episode, attrs={
                                      "text": ["docker", "kubernetes", "nginx", "lb", "Docker"],
                                      "affect": [[-0.5, 0.8, 0.2], None, [2, -1, 0.5], ["x"] * 3,
                                                 [0.1, 0.2, float("nan")]]})
    tagger = StubTagger({})
    states = MnemosModel(tagger).states(stored)
    np.testing.assert_allclose(states, [[-0.5, 0.8, 0.2], [0, 0.5, 0.5], [1.0, 0.0, 0.5],
                                        [0, 0.5, 0.5], [0, 0.5, 0.5]])  # clamped; else tagged
    assert tagger.calls == 3


def test_model_options_and_errors():
    v = chain_view()
    m = MnemosModel(StubTagger({}))
    off = m.activate(v, chain_query(v), SynapseConfig(use_graph=False))
    assert off.activation.tolist() == [1.0, 0, 0, 0, 0]
    assert m.activate(v, chain_query(v), SynapseConfig(
        model_params={"mnemos": {"rank": "hybrid"}})).score is None
    sparse = m.activate(v, chain_query(v), SynapseConfig(model_params={"mnemos": {"threshold": 0.9}}))
    assert sparse.activation.tolist() == [1.0, 0, 0, 0, 0]  # no link reaches 0.9
    with pytest.raises(ConfigError, match="decay"):
        m.activate(v, chain_query(v), SynapseConfig(model_params={"mnemos": {"decay": 2}}))
    with pytest.raises(InvalidTypeError):
        MnemosModel(tagger=object())  # type: ignore[arg-type]


def test_model_with_an_llm_tagger():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    v = chain_view()
    chat = FakeListChatModel(responses=["0, 0.5, 0.5"] * 5 + ["-0.9, 1, 0"])
    out = MnemosModel(LLMAffectTagger(chat)).activate(v, chain_query(v, "help"), SynapseConfig())
    assert out.score.shape == (5,) and np.isfinite(out.score).all()


def test_registered_with_the_lexicon_tagger():
    model = get_model("mnemos")
    assert isinstance(model, MnemosModel) and isinstance(model.tagger, LexiconAffectTagger)

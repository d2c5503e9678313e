"""Every seed model behind the one interface: registered, runnable on the engine's own
compiled graph, deterministic, light to import; and the modules' docstring examples run."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys

import numpy as np
import pytest

from synapse_integrations.config import SynapseConfig
from synapse_integrations.core.graph.graph import MemoryGraph
from synapse_integrations.core.models import RetrievalModel, get_model, model_names
from synapse_integrations.core.models.base import Activation, Query

SEED_MODELS = ("evermind", "synaptic", "mnemos", "ppr")
MODULES = ("_params", "_neighbors", "evermind", "synaptic", "mnemos", "ppr")


def test_all_seed_models_are_registered():
    assert set(SEED_MODELS) | {"synapse"} <= set(model_names())
    for name in SEED_MODELS:
        model = get_model(name)
        assert isinstance(model, RetrievalModel) and model.name == name
        assert get_model(name) is not model  # a fresh instance per call


def memory_graph(n_turns: int = 60, dim: int = 16) -> MemoryGraph:
    """A small graph built through MemoryGraph's own mutators, as the engine builds it:
    episodes in sessions with temporal edges, and topic concepts linked both ways."""
    rng = np.random.default_rng(11)
    g = MemoryGraph(dim)
    topics = rng.standard_normal((6, dim))
    for t in range(6):
        v = topics[t] / np.linalg.norm(topics[t])
        g.add_node(f"c{t}", v, kind="concept", text=f"topic {t}", name=f"topic {t}")
    for k in range(n_turns):
        t = k % 6
        v = topics[t] + 0.4 * rng.standard_normal(dim)
        g.add_node(f"e{k}", v / np.linalg.norm(v), kind="episode",
                   text=f"turn {k} about topic {t}{'!' * (k % 3)}", speaker="Ann",
                   ts=1.7e9 + (k // 10) * 86400.0 + k * 60.0, ingest_ts=1.7e9 + k)
        if k:
            g.add_edge(f"e{k - 1}", f"e{k}", kind="temporal", weight=0.9)
        g.add_edge(f"e{k}", f"c{t}", kind="abstraction", weight=0.8)
        g.add_edge(f"c{t}", f"e{k}", kind="abstraction", weight=0.8)
    return g


def make_query(view, seed: int = 0) -> Query:
    rng = np.random.default_rng(seed)
    q = view.embeddings[rng.integers(view.n)].astype(np.float64)
    q = q + 0.2 * rng.standard_normal(q.size)
    q /= np.linalg.norm(q)
    sim = np.clip(view.embeddings @ q, -1.0, 1.0)
    return Query("what about that topic?", q, sim, np.sort(np.argsort(-sim)[:8]))


@pytest.mark.parametrize("name", SEED_MODELS)
def test_models_run_on_the_engines_compiled_graph(name):
    g = memory_graph()
    view = g.compiled()
    model = get_model(name)
    cfg = SynapseConfig(model_params={"synaptic": {"v_th": 0.03}})
    for seed in range(3):
        query = make_query(view, seed)
        out = model.activate(view, query, cfg)
        assert isinstance(out, Activation)
        assert out.activation.shape == (view.n,) and (out.activation >= 0).all()
        assert np.isfinite(out.activation).all() and out.activation.any()
        if out.parents is not None:
            assert out.parents.shape == (view.n,)
            assert ((out.parents >= -1) & (out.parents < view.n)).all()
        if out.reached is not None:
            assert ((out.reached >= 0) & (out.reached < view.n)).all()
        if out.score is not None:
            assert out.score.shape == (view.n,) and np.isfinite(out.score).all()
        again = get_model(name).activate(view, query, cfg)  # deterministic, fresh instance
        np.testing.assert_array_equal(again.activation, out.activation)


@pytest.mark.parametrize("name", ("evermind", "mnemos"))
def test_graph_over_episodes_follows_the_memory_as_it_grows(name):
    # the derived k-NN table is updated, not rebuilt, when a turn is added
    g = memory_graph()
    model = get_model(name)
    model.activate(g.compiled(), make_query(g.compiled()), SynapseConfig())
    g.add_node("e-new", g.vectors["e5"], kind="episode", text="again", ts=1.8e9)
    view = g.compiled()
    out = model.activate(view, make_query(view), SynapseConfig())
    assert model.neighbors.last_build["how"] == "update"
    fresh = get_model(name).activate(view, make_query(view), SynapseConfig())
    np.testing.assert_allclose(out.activation, fresh.activation, atol=1e-6)


def test_importing_the_models_loads_no_optional_library():
    code = ("import sys, json; import synapse_integrations.core.models as m; "
            "print(json.dumps(sorted(k for k in sys.modules if k.split('.')[0] in "
            "('vaderSentiment', 'dtaidistance', 'langchain_core', 'langchain'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module):
    mod = importlib.import_module(f"synapse_integrations.core.models.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0

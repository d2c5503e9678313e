"""Every registered retrieval model keeps the :class:`RetrievalModel` contract.

The models are the registry's at collection time (``model_names()``), so a model the
package registers later is covered with no edit here. Each one runs on a small real
memory (a dozen turns by two speakers over four days, consolidated so that concepts
exist), with the query and anchors built the engine's way
(:meth:`Synapse.inspect_retrieval`: ``steps.query`` is the triggers' stage of
``Retriever.run``, ``steps.activate`` the model's, on the memory's own model instance,
built with the options the engine hands it). Checked:

* the :class:`Activation`: ``activation`` one finite, non-negative float per node of the
  view; ``parents`` (when given) integers, each -1 or a node index, and no path of
  parents loops (and, separately, -1 for the anchors: known deviations are marked); ``reached`` distinct node indices; ``score`` one finite value
  per node; ``spikes`` one finite, non-negative value per node with a finite
  ``spike_time`` (and no ``spike_time`` without spikes);
* the model changes neither the view (its arrays, ids, index, learned weights, node
  attributes) nor the query's arrays, nor the graph behind the view;
* the same query twice, and on a new instance of the model, gives identical arrays;
* end to end, ``mem.retrieve(question, config=mem.config.replace(model=name))`` returns at
  most ``k`` distinct, known memories, ranked by finite scores, best first.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import numpy as np
import pytest

from synapse_integrations import HashingEmbedder, Synapse, SynapseConfig
from synapse_integrations.core.models import (
    Activation,
    Query,
    RetrievalModel,
    get_model,
    model_names,
)

MODELS = model_names()  # at collection time: a model registered later is covered too
DAY = 86400.0
T0 = 1_700_000_000.0  # 2023-11-14
TURNS = [
    ("Ana", "I started learning the cello last week, my teacher is Marta."),
    ("Ben", "Nice! I went hiking in the Alps with my brother Tom."),
    ("Ana", "Marta says my cello bowing is improving, I practice the cello every evening."),
    ("Ben", "Tom and I are planning a ski trip to Zermatt in February."),
    ("Ana", "I adopted a grey cat called Pixel yesterday."),
    ("Ben", "Pixel the grey cat is a great name. My dog Rex hates cats though."),
    ("Ana", "The cello concert is on Saturday at the city hall."),
    ("Ben", "Great, I will come to the cello concert at the city hall on Saturday with Tom."),
    ("Ana", "Pixel knocked my coffee onto the sheet music, I was furious."),
    ("Ben", "Rex ate my hiking boots, I had to buy new hiking boots."),
    ("Ana", "The cello concert at the city hall went well, Marta was proud of me."),
    ("Ben", "The ski trip to Zermatt is booked, Tom and I leave in February."),
]  # near-repeats (cosine >= 0.6 under HashingEmbedder) so that the k-NN models spread
LAST = T0 + DAY * ((len(TURNS) - 1) // 3) + 60.0 * (len(TURNS) - 1)
QUESTIONS = ["When is the cello concert at the city hall?", "What did Rex the dog eat?",
             "Where are Ben and Tom going on their ski trip?"]
#: when a question is asked (Query.time / retrieve(at=...)): not given, or a day after
TIMES = {"no-time": None, "a-day-later": LAST + DAY}
#: node attributes read (and compared) before each model runs, besides those it reads itself
ATTRIBUTES = ("kind", "text", "speaker", "ts", "ingest_ts", "seq", "name", "ctype", "affect",
              "spikes", "metadata", "attributes", "archived")


def _memory() -> Synapse:
    mem = Synapse(embedder=HashingEmbedder(), config=SynapseConfig(consolidation_interval=4))
    mem.add_turns([{"text": text, "speaker": speaker, "timestamp": T0 + DAY * (i // 3) + 60.0 * i}
                   for i, (speaker, text) in enumerate(TURNS)])
    mem.consolidate()
    return mem


@pytest.fixture(scope="module")
def memory() -> Iterator[Synapse]:
    """Only read (inspect_retrieval): never retrieved from, so no model records spikes in it."""
    mem = _memory()
    assert mem.stats()["concepts"] > 0, f"no concepts after consolidation: {mem.stats()}"
    yield mem
    mem.close()


@pytest.fixture(scope="module")
def retrieving_memory() -> Iterator[Synapse]:
    mem = _memory()
    yield mem
    mem.close()


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _arrays(obj: Any) -> dict[str, np.ndarray]:
    """Copies of the numpy array attributes of ``obj`` (a view or a query)."""
    fields = vars(obj) if hasattr(obj, "__dict__") else {}
    if dataclasses.is_dataclass(obj):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return {k: np.array(v, copy=True) for k, v in fields.items() if isinstance(v, np.ndarray)}


def _view_snapshot(view: Any) -> dict[str, Any]:
    attrs = {name: copy.deepcopy(view.node_values(name)) for name in ATTRIBUTES}
    return {"arrays": _arrays(view), "ids": list(view.ids), "index": dict(view.index),
            "n": view.n, "learned": copy.deepcopy({g: dict(w) for g, w in view.learned.items()}),
            "attrs": attrs}


def _assert_view_unchanged(name: str, view: Any, before: dict[str, Any]) -> None:
    after = _arrays(view)
    assert set(after) == set(before["arrays"]), \
        f"{name}: the view's array attributes changed: {sorted(before['arrays'])} -> {sorted(after)}"
    for key, old in before["arrays"].items():
        new = after[key]
        assert new.shape == old.shape and new.dtype == old.dtype and np.array_equal(
            new, old, equal_nan=new.dtype.kind in "fc"), f"{name}: activate changed view.{key}"
    assert view.n == before["n"], f"{name}: activate changed the view's node count"
    assert list(view.ids) == before["ids"], f"{name}: activate changed view.ids"
    assert dict(view.index) == before["index"], f"{name}: activate changed view.index"
    learned = {g: dict(w) for g, w in view.learned.items()}
    assert learned == before["learned"], f"{name}: activate changed view.learned"
    for attr, old in before["attrs"].items():
        assert view.node_values(attr) == old, f"{name}: activate changed node attribute {attr!r}"
    # every attribute the model read, as cached on the view, is still the graph's
    for attr, default, values in view.cached_attributes():
        fresh = view.node_attr(attr, default) if view.node_attr is not None else values
        assert values == fresh, f"{name}: the view's cached node attribute {attr!r} no longer " \
                                f"matches the graph (changed in place)"


def _assert_query_unchanged(name: str, query: Query, before: dict[str, np.ndarray],
                            text: str) -> None:
    assert query.text == text, f"{name}: activate changed the query's text"
    after = _arrays(query)
    for key, old in before.items():
        new = after.get(key)
        assert new is not None and new.shape == old.shape and np.array_equal(new, old), \
            f"{name}: activate changed query.{key}"


def _assert_activation(name: str, act: Any, n: int, query: Query) -> None:
    assert isinstance(act, Activation), f"{name}: activate returned {type(act).__name__}, not Activation"
    a = act.activation
    assert isinstance(a, np.ndarray), f"{name}: activation is a {type(a).__name__}, not an array"
    assert a.shape == (n,), f"{name}: activation has shape {a.shape}, the view has {n} nodes"
    assert np.issubdtype(a.dtype, np.floating), f"{name}: activation dtype {a.dtype} is not float"
    assert np.isfinite(a).all(), f"{name}: activation not finite at {np.flatnonzero(~np.isfinite(a))}"
    assert (a >= 0).all(), f"{name}: negative activation at {np.flatnonzero(a < 0)}: {a[a < 0]}"

    if act.parents is not None:
        p = np.asarray(act.parents)
        assert p.shape == (n,), f"{name}: parents has shape {p.shape}, expected {(n,)}"
        assert np.issubdtype(p.dtype, np.integer), f"{name}: parents dtype {p.dtype} is not integer"
        bad = np.flatnonzero((p < -1) | (p >= n))
        assert bad.size == 0, f"{name}: parents out of range at nodes {bad}: {p[bad]}"
        own = np.flatnonzero(p == np.arange(n))
        assert own.size == 0, f"{name}: nodes {own} are their own parent"
        for start in range(n):  # a path of parents ends at -1 within n steps
            seen, i = set(), start
            while i != -1:
                assert i not in seen, f"{name}: the parents from node {start} loop: {sorted(seen)}"
                seen.add(i)
                i = int(p[i])

    if act.reached is not None:
        r = np.asarray(act.reached)
        assert r.ndim == 1, f"{name}: reached has shape {r.shape}, expected 1-D"
        assert r.size == 0 or np.issubdtype(r.dtype, np.integer), \
            f"{name}: reached dtype {r.dtype} is not integer"
        bad = r[(r < 0) | (r >= n)]
        assert bad.size == 0, f"{name}: reached holds indices outside the view: {bad}"
        assert np.unique(r).size == r.size, f"{name}: reached repeats indices: {r}"

    if act.score is not None:
        s = np.asarray(act.score)
        assert s.shape == (n,), f"{name}: score has shape {s.shape}, expected {(n,)}"
        assert np.issubdtype(s.dtype, np.number) and not np.iscomplexobj(s), \
            f"{name}: score dtype {s.dtype} is not real"
        assert np.isfinite(s).all(), f"{name}: score not finite at {np.flatnonzero(~np.isfinite(s))}"

    if act.spikes is not None:
        sp = np.asarray(act.spikes)
        assert sp.shape == (n,), f"{name}: spikes has shape {sp.shape}, expected {(n,)}"
        assert np.issubdtype(sp.dtype, np.number), f"{name}: spikes dtype {sp.dtype} is not numeric"
        assert np.isfinite(sp).all(), f"{name}: spikes not finite at {np.flatnonzero(~np.isfinite(sp))}"
        assert (sp >= 0).all(), f"{name}: negative spikes at {np.flatnonzero(sp < 0)}"
        t = act.spike_time
        assert isinstance(t, (int, float, np.integer, np.floating)) and not isinstance(t, bool) \
            and math.isfinite(float(t)), f"{name}: spikes given with spike_time {t!r}"
    else:
        assert act.spike_time is None, f"{name}: spike_time {act.spike_time!r} without spikes"


def _assert_same(name: str, first: Activation, second: Activation, what: str) -> None:
    for f in dataclasses.fields(Activation):
        a, b = getattr(first, f.name), getattr(second, f.name)
        if a is None or b is None:
            assert a is None and b is None, f"{name}: {f.name} is {a!r} then {b!r} ({what})"
        elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            a, b = np.asarray(a), np.asarray(b)
            assert a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), \
                f"{name}: {f.name} differs ({what}); first differences at " \
                f"{np.flatnonzero(a != b)[:10] if a.shape == b.shape else (a.shape, b.shape)}"
        else:
            assert a == b, f"{name}: {f.name} is {a!r} then {b!r} ({what})"


# --------------------------------------------------------------------------------------------
# the model's stage
# --------------------------------------------------------------------------------------------
def test_every_model_is_registered_and_builds() -> None:
    assert "synapse" in MODELS, MODELS
    for name in MODELS:
        model = get_model(name)
        assert isinstance(model, RetrievalModel), f"{name}: {type(model).__name__} lacks name/activate"
        assert isinstance(model.name, str) and model.name, f"{name}: model.name is {model.name!r}"


@pytest.mark.parametrize("when", list(TIMES))
@pytest.mark.parametrize("name", MODELS)
def test_activation_keeps_the_contract(memory: Synapse, name: str, when: str) -> None:
    cfg = memory.config.replace(model=name)
    embed = HashingEmbedder()
    stats = memory.stats()
    with memory.inspect_retrieval() as steps:
        view = steps.view
        assert view.n > len(TURNS), f"expected episodes and concepts in the view, got n={view.n}"
        # a second instance, built as the engine builds its own (Retriever.model): with the
        # options the engine hands that model (mnemos' tagger), no state carried over
        fresh = get_model(name, **steps.retriever.options.get(name, {}))
        for question in QUESTIONS:
            query = dataclasses.replace(steps.query(question, embed.embed_query(question), cfg),
                                        time=TIMES[when])
            assert query.anchors.size, f"no anchors for {question!r}: the fixture is too small"
            q_before = _arrays(query)
            v_before = _view_snapshot(view)
            what = f"{question!r}, time={query.time}"

            first = steps.activate(query, cfg)
            _assert_activation(f"{name} ({what})", first, view.n, query)
            _assert_view_unchanged(f"{name} ({what})", view, v_before)
            _assert_query_unchanged(f"{name} ({what})", query, q_before, question)

            second = steps.activate(query, cfg)
            _assert_same(name, first, second, f"the same query twice: {what}")
            third = fresh.activate(view, query, cfg)
            _assert_same(name, first, third, f"a new instance of the model: {what}")
            _assert_view_unchanged(f"{name} ({what})", view, v_before)
            _assert_query_unchanged(f"{name} ({what})", query, q_before, question)
            assert steps.view is view
    assert memory.stats() == stats, f"{name}: activating changed the memory: {stats} -> {memory.stats()}"


#: models that give some of the query's anchors a parent, against ``Activation.parents``'
#: "-1 for anchors" (so an anchor returned by retrieve shows a path through another node,
#: not just ``[id]``): evermind and mnemos seed from their own picks (the ``init_k`` best
#: episode cosines; the one closest episode) and treat the engine's anchors as ordinary
#: nodes; synapse starts an anchor at ``alpha * max(cos, 0)``, so an anchor with a cosine
#: <= 0 (a BM25 anchor) is "first reached" by spreading. Strict: the mark must go once the
#: model (or the documented contract) changes.
# --------------------------------------------------------------------------------------------
# end to end
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_retrieve_with_each_model_ranks_distinct_memories(retrieving_memory: Synapse,
                                                          name: str) -> None:
    mem = retrieving_memory
    cfg = mem.config.replace(model=name)
    k = 6
    for question in QUESTIONS:
        for when, at in TIMES.items():
            res = mem.retrieve(question, k=k, config=cfg, at=at)
            what = f"{name}: retrieve({question!r}, at={when})"
            items = res.items
            assert items, f"{what} returned nothing"
            assert len(items) <= k, f"{what} returned {len(items)} items for k={k}"
            ids = [it.id for it in items]
            assert len(set(ids)) == len(ids), f"{what} repeats ids: {ids}"
            scores = [it.score for it in items]
            assert all(isinstance(s, float) and math.isfinite(s) for s in scores), \
                f"{what} scores not finite floats: {scores}"
            assert all(a >= b for a, b in pairwise(scores)), f"{what} not sorted by score: {scores}"
            for it in items:
                assert mem.contains(it.id), f"{what} returned unknown id {it.id!r}"
                assert it.kind in ("episode", "concept"), f"{what}: {it.id} has kind {it.kind!r}"
                assert not it.path or it.path[-1] == it.id, \
                    f"{what}: {it.id}'s path {it.path} does not end at it"
                assert all(mem.contains(p) for p in it.path), f"{what}: unknown ids in {it.path}"
            assert math.isfinite(res.confidence), f"{what}: confidence {res.confidence!r}"

"""The shared nearest-neighbour tables: fast vs reference, and an update vs a rebuild."""

from __future__ import annotations

import numpy as np
import pytest

from synapse_integrations.core.graph.graph import Compiled
from synapse_integrations.core.models._neighbors import (
    NeighborIndex,
    neighbor_table,
    top_k_neighbors,
    top_k_neighbors_reference,
    update_top_k,
)
from synapse_integrations.errors import InvalidInputError


def unit_rows(m: int, d: int = 8, seed: int = 0) -> np.ndarray:
    e = np.random.default_rng(seed).standard_normal((m, d)).astype(np.float32)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def test_hand_computed_table():
    # three unit vectors at 0, 37 and 90 degrees: cos(37) = 0.8, cos(53) = 0.6, cos(90) = 0
    emb = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    idx, sim = top_k_neighbors(emb, k=2)
    assert idx.tolist() == [[1, 2], [0, 2], [1, 0]]
    np.testing.assert_allclose(sim, [[0.8, 0.0], [0.8, 0.6], [0.6, 0.0]], atol=1e-6)


@pytest.mark.parametrize("k", [1, 3, 7])
@pytest.mark.parametrize("block_rows", [1, 7, 100])
def test_fast_matches_reference(k, block_rows):
    emb = unit_rows(60)
    idx, sim = top_k_neighbors(emb, k=k, block_bytes=4 * 60 * block_rows)
    ridx, rsim = top_k_neighbors_reference(emb, k=k)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_allclose(sim, rsim, atol=1e-6)
    assert not (idx == np.arange(60)[:, None]).any()  # never its own neighbour


def test_ties_go_to_the_lower_index():
    emb = np.repeat(unit_rows(8), 3, axis=0)  # every vector three times: exact ties
    idx, _ = top_k_neighbors(emb, k=4, block_bytes=4 * 24 * 5)
    ridx, _ = top_k_neighbors_reference(emb, k=4)
    np.testing.assert_array_equal(idx, ridx)
    assert idx[0, :2].tolist() == [1, 2]  # its two copies first, lower index first


def test_padding_when_fewer_nodes_than_k():
    idx, sim = top_k_neighbors(unit_rows(3), k=5)
    assert (idx[:, 2:] == -1).all() and np.isneginf(sim[:, 2:]).all()
    idx, sim = top_k_neighbors(unit_rows(1), k=2)
    assert idx.tolist() == [[-1, -1]]


def test_bad_input():
    with pytest.raises(InvalidInputError, match="k must be"):
        top_k_neighbors(unit_rows(4), k=0)
    with pytest.raises(InvalidInputError, match="2-D"):
        top_k_neighbors(np.ones(4), k=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_update_equals_a_rebuild(seed):
    rng = np.random.default_rng(seed)
    old = unit_rows(80, seed=seed)
    oi, os_ = top_k_neighbors(old, k=4)
    keep = np.ones(80, dtype=bool)
    keep[rng.choice(80, 6, replace=False)] = False  # removed: some rows lose a neighbour
    added = unit_rows(5, seed=seed + 10)
    new = np.concatenate([old[keep], added])
    new_of_old = np.full(80, -1)
    new_of_old[keep] = np.arange(keep.sum())
    ui, us = update_top_k(new, oi, os_, new_of_old=new_of_old, k=4)
    fi, fs = top_k_neighbors(new, k=4)
    np.testing.assert_array_equal(ui, fi)
    np.testing.assert_allclose(us, fs, atol=1e-6)


def test_update_when_kept_nodes_are_reordered_and_table_was_padded():
    old = unit_rows(3, seed=4)
    oi, os_ = top_k_neighbors(old, k=5)  # padded rows
    new = np.concatenate([old[[2, 0, 1]], unit_rows(4, seed=5)])
    ui, us = update_top_k(new, oi, os_, new_of_old=np.array([1, 2, 0]), k=5)
    fi, fs = top_k_neighbors(new, k=5)
    np.testing.assert_array_equal(ui, fi)
    np.testing.assert_allclose(us, fs, atol=1e-6)


def view_of(emb: np.ndarray, ids: list[str], episodes: np.ndarray | None = None) -> Compiled:
    ep = np.ones(len(ids), dtype=bool) if episodes is None else episodes
    return Compiled.from_arrays(ids, emb, src=[], dst=[], weight=[], is_episode=ep)


def test_index_updates_across_views_and_detects_changed_vectors():
    emb = unit_rows(50, seed=7)
    ids = [f"n{k}" for k in range(50)]
    index = NeighborIndex()
    t1 = index.table(view_of(emb[:40], ids[:40]), subset="episodes", k=3)
    assert index.last_build["how"] == "full" and t1.index.shape == (40, 3)
    # a turn more, one removed, one re-embedded (same id, new vector)
    emb2 = emb[:41].copy()
    emb2[5] = emb[45]
    keep = [k for k in range(41) if k != 12]
    grown = view_of(emb2[keep], [ids[k] for k in keep])
    t2 = index.table(grown, subset="episodes", k=3)
    assert index.last_build["how"] == "update"
    fi, fs = top_k_neighbors(emb2[keep], k=3)
    np.testing.assert_array_equal(t2.index, fi)
    np.testing.assert_allclose(t2.sim, fs, atol=1e-6)


def test_episode_subset_maps_back_to_view_rows():
    emb = unit_rows(10, seed=3)
    ep = np.array([True, False] * 5)
    view = view_of(emb, [f"n{k}" for k in range(10)], ep)
    table = neighbor_table(view, subset="episodes", k=2)
    assert table.rows.tolist() == [0, 2, 4, 6, 8]
    fi, _ = top_k_neighbors(emb[ep], k=2)
    np.testing.assert_array_equal(table.index, fi)
    assert neighbor_table(view, subset="episodes", k=2) is table  # cached on the view
    with pytest.raises(InvalidInputError, match="subset"):
        neighbor_table(view, subset="concepts", k=2)  # type: ignore[arg-type]

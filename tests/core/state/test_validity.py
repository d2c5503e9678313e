"""Validity kernels (core/state/validity.py) against hand-computed values."""

import numpy as np

from synapse_integrations.core.state.validity import (
    chain,
    existed,
    fact_interval,
    fact_intervals,
    interval,
    replaced,
    splice,
)


def _chain3():
    return {"a": {"ts": 1.0, "superseded_by": "b", "superseded_at": 2.0},
            "b": {"ts": 2.0, "supersedes": "a", "superseded_by": "c", "superseded_at": 3.0},
            "c": {"ts": 3.0, "supersedes": "b"}}


def test_an_episode_holds_from_its_time_until_its_replacement_started():
    nodes = _chain3()
    assert interval(nodes["a"]) == (1.0, 2.0)
    assert interval(nodes["c"]) == (3.0, None)
    assert interval({"ts": 1.0, "superseded_at": 9.0}) == (1.0, None)  # no link: no end


def test_existed_and_replaced_read_the_interval_at_a_moment():
    a = _chain3()["a"]
    assert not existed(a, 0.5) and existed(a, 1.0) and existed({"text": "no time"}, 0.0)
    assert not replaced(a, 1.9) and replaced(a, 2.0) and replaced(a)
    assert not replaced(_chain3()["c"])
    assert replaced({"superseded_by": "x"}, 0.0)  # replaced at an unknown time: always


def test_chain_walks_both_ways_from_any_version_and_stops_at_a_loop_or_a_gap():
    nodes = _chain3()
    for start in "abc":
        assert chain(nodes.get, start) == ["a", "b", "c"]
    loop = {"a": {"superseded_by": "b", "supersedes": "b"}, "b": {"superseded_by": "a", "supersedes": "a"}}
    assert sorted(chain(loop.get, "a")) == ["a", "b"]
    gap = {"b": {"supersedes": "gone", "superseded_by": "c"}, "c": {"supersedes": "b"}}
    assert chain(gap.get, "c") == ["b", "c"]


def test_splice_closes_the_chain_over_forgotten_versions():
    nodes = _chain3()
    assert splice(nodes.get, {"a"}) == {"b": {"supersedes": None}}
    assert splice(nodes.get, {"b"}) == {"a": {"superseded_by": "c", "superseded_at": 3.0},
                                        "c": {"supersedes": "a"}}
    assert splice(nodes.get, {"b", "c"}) == {"a": {"superseded_by": None, "superseded_at": None}}
    assert splice(nodes.get, {"a", "b", "c"}) == {}
    assert splice(nodes.get, {"nope"}) == {}


def test_a_fact_holds_from_its_first_source_until_its_last_source_was_replaced():
    open_src = {"ts": 5.0}
    done = {"ts": 2.0, "superseded_by": "x", "superseded_at": 4.0}
    assert fact_interval([open_src, done]) == (2.0, None)
    assert fact_interval([done, {"ts": 3.0, "superseded_by": "y", "superseded_at": 7.0}]) == (2.0, 7.0)
    assert fact_interval([]) == (None, None)


def test_fact_intervals_over_a_view_matches_the_per_fact_rule():
    nan = np.nan
    start = np.array([1.0, 5.0, nan, 2.0, nan])
    end = np.array([4.0, nan, nan, 6.0, nan])
    # node 2 is a fact drawn from 0 and 1 (one open); node 4 from 0 and 3 (both ended)
    s, e = fact_intervals(start, end, np.array([2, 2, 4, 4]), np.array([0, 1, 0, 3]))
    assert s[2] == 1.0 and np.isnan(e[2])
    assert s[4] == 1.0 and e[4] == 6.0
    assert s[:2].tolist() == [1.0, 5.0] and e[0] == 4.0  # episodes keep their own

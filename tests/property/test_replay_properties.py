"""Replay pinned against plain reference simulations on arbitrary short traces (hypothesis).

Whatever the trace and sizes: LRU, MIN, INFINITE and STATIC equal the
textbook models of tests/support/replay.py at every size, CLOCK equals the
paper's single-ring CLOCK, CLOCK-SETS and RANDOM equal the crawler's caches
asked one request at a time (and CLOCK-SETS, up to one 32-entry set, the
single ring too), and the orderings the
paper relies on hold: MIN below every policy that inserts on every miss,
INFINITE below MIN, and the stack algorithms never worse with more room.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.replay import (
    clock_ring_misses,
    infinite_misses,
    lru_distances,
    lru_misses,
    min_misses,
    single_call_misses,
    static_misses,
)
from tests.support.strategies import fingerprint_traces

from crawler.cache.min import next_use as cache_next_use
from crawler.replay import _jit, stack
from crawler.replay.simulate import ReplayOptions, replay
from crawler.replay.traces import Stream

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def traces(max_len: int = 160) -> st.SearchStrategy[list[int]]:
    return fingerprint_traces(max_len, max_distinct=50)


size_lists = st.lists(st.integers(1, 70), min_size=1, max_size=6, unique=True).map(lambda s: tuple(sorted(s)))


def as_array(trace: list[int]) -> np.ndarray:
    return np.array(trace, dtype=np.uint64)


@SETTINGS
@given(traces())
def test_stack_distances_and_next_use(trace):
    fps = as_array(trace)
    nu = stack.next_use(fps)
    assert np.array_equal(nu, cache_next_use(fps))
    expected = [stack.COLD if d is None else d for d in lru_distances(trace)]
    assert stack.lru_depths(nu, "numpy").tolist() == expected
    if _jit.AVAILABLE:
        assert stack.lru_depths(nu, "numba").tolist() == expected
    if trace:
        order, _ = stack.grouped_order(fps, position_bits=62)      # forced collisions
        assert np.array_equal(order, np.argsort(stack.fmix64_array(fps), kind="stable"))


@SETTINGS
@given(traces(), size_lists)
def test_replay_equals_the_models_at_every_size(trace, sizes):
    result = replay([Stream("s", None, (), as_array(trace), None)], ReplayOptions(traces=("full",), sizes=sizes))
    got = {policy: result.tallies[("full", policy)].misses.tolist() for policy in
           ("clock", "clock-sets", "lru", "random", "static", "min", "infinite")}
    assert got["lru"] == [lru_misses(trace, k) for k in sizes]
    assert got["min"] == [min_misses(trace, k) for k in sizes]
    assert got["infinite"] == [infinite_misses(trace)] * len(sizes)
    assert got["static"] == [static_misses(trace, k) for k in sizes]
    assert got["clock"] == [clock_ring_misses(trace, k) for k in sizes]
    assert got["clock-sets"] == [single_call_misses("clock-sets", trace, k) for k in sizes]
    assert got["random"] == [single_call_misses("random", trace, k, seed=0) for k in sizes]
    for k, misses in zip(sizes, got["clock-sets"]):
        if k <= 32:
            assert misses == clock_ring_misses(trace, k)
    for i in range(len(sizes)):
        floor = got["min"][i]
        assert got["infinite"][i] <= floor <= min(got["clock"][i], got["clock-sets"][i], got["lru"][i],
                                                  got["random"][i])
    for policy in ("lru", "min", "static", "infinite"):
        assert got[policy] == sorted(got[policy], reverse=True), policy


@SETTINGS
@given(st.lists(traces(max_len=80), min_size=1, max_size=4), size_lists,
       st.integers(1, 50))
def test_streams_sum_and_windows_add_up(streams, sizes, window):
    result = replay([Stream(f"s{i}", None, (), as_array(t), None) for i, t in enumerate(streams)],
                    ReplayOptions(traces=("full",), sizes=sizes, window=window))
    assert result.stats["full"].requests == sum(map(len, streams))
    assert int(result.stats["full"].window_requests.sum()) == sum(map(len, streams))
    for policy in ("lru", "min"):
        tally = result.tallies[("full", policy)]
        model = lru_misses if policy == "lru" else min_misses
        assert tally.misses.tolist() == [sum(model(t, k) for t in streams) for k in sizes]
        assert tally.windows.sum(axis=1).tolist() == tally.misses.tolist()

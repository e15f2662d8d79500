"""Properties of the streaming replay: the bounded LRU stack, chunked, gives the in-memory stack's misses
at every size; streamed CLOCK and SIEVE give the online caches' misses; the compiled SIEVE is the
pure-Python one request for request. Small traces, tiny chunks (so chunk boundaries fall everywhere)
and small largest sizes (so the stack evicts and renumbers its stamps many times per trace)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.replay import lru_distances

from crawler._native import NATIVE
from crawler.cache import make_cache
from crawler.cache.sieve import PySieveKernel
from crawler.replay import ReplayOptions, load_streams, replay
from crawler.replay.chunks import open_sources
from crawler.replay.streaming import PyLruStack, lru_stack, misses_from_histogram, replay_streaming

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])
traces = st.lists(st.integers(0, 40), min_size=1, max_size=300)
size_sets = st.lists(st.integers(1, 64), min_size=1, max_size=6, unique=True).map(sorted)


def _feed(stack, trace: np.ndarray, cuts: list[int]) -> np.ndarray:
    depths = np.zeros(len(trace), dtype=np.uint32)
    start = 0
    for step in cuts * (len(trace) + 1):
        if start >= len(trace):
            break
        stack.depths(trace[start:start + step], depths[start:start + step])
        start += step
    return depths


@SETTINGS
@given(trace=traces, capacity=st.integers(1, 64), spare=st.integers(1, 70),
       cuts=st.lists(st.integers(1, 7), min_size=1, max_size=4))
def test_bounded_stack_depths_are_the_lru_stack_distances_up_to_capacity(trace, capacity, spare, cuts):
    fps = np.array(trace, dtype=np.uint64)
    expected = [d if d is not None and d <= capacity else 0 for d in lru_distances(trace)]
    for stack in (lru_stack(capacity, capacity + spare), PyLruStack(capacity)):
        assert _feed(stack, fps, cuts).tolist() == expected
        assert stack.size == min(capacity, len(set(trace)))


@SETTINGS
@given(trace=traces, sizes=size_sets, chunk=st.integers(1, 9))
def test_histogram_misses_equal_the_in_memory_lru_at_every_size(trace, sizes, chunk):
    fps = np.array(trace, dtype=np.uint64)
    capacity = sizes[-1]
    stack = lru_stack(capacity, capacity + 1)          # the smallest window: renumbered every few requests
    hist = np.zeros(capacity + 1, dtype=np.int64)
    for start in range(0, len(fps), chunk):
        stack.histogram(fps[start:start + chunk], hist)
    distances = lru_distances(trace)
    expected = [sum(d is None or d > k for d in distances) for k in sizes]
    assert misses_from_histogram(hist, np.array(sizes)).tolist() == expected


@pytest.fixture
def npy(tmp_path):
    path = tmp_path / "trace.npy"

    def write(trace: list[int]) -> str:
        np.save(path, np.array(trace, dtype=np.uint64))
        return str(path)
    return write


@SETTINGS
@given(trace=traces, sizes=size_sets, chunk=st.integers(1, 9), window=st.sampled_from([None, 1, 7, 50]))
def test_streamed_lru_clock_sieve_equal_the_in_memory_replay(npy, trace, sizes, chunk, window):
    path = npy(trace)
    options = ReplayOptions(traces=("full",), policies=("lru", "clock", "sieve"), sizes=tuple(sizes),
                            window=window)
    streamed = replay_streaming(open_sources([path]), options, chunk_requests=chunk)
    in_memory = replay(load_streams([path]), options)
    for policy in options.policies:
        a, b = streamed.tallies[("full", policy)], in_memory.tallies[("full", policy)]
        assert a.misses.tolist() == b.misses.tolist(), policy
        if window is not None:
            assert a.windows is not None and b.windows is not None
            assert a.windows.tolist() == b.windows.tolist(), policy
    for policy in ("clock", "sieve"):       # and each size equals the online cache, one request at a time
        for i, size in enumerate(sizes):
            cache = make_cache(policy, size)
            for fp in trace:
                cache.check_and_add(fp)
            assert streamed.tallies[("full", policy)].misses[i] == cache.misses


@pytest.mark.skipif(NATIVE is None, reason="the compiled kernels are not built")
@SETTINGS
@given(trace=st.lists(st.integers(0, 60), max_size=400), capacity=st.integers(1, 40),
       cuts=st.lists(st.integers(1, 50), min_size=1, max_size=3))
def test_compiled_sieve_is_the_python_sieve_request_for_request(trace, capacity, cuts):
    compiled, python = NATIVE.SieveKernel(capacity), PySieveKernel(capacity)
    fps = np.array(trace, dtype=np.uint64)
    start = 0
    for step in cuts * (len(trace) + 1):
        if start >= len(trace):
            break
        part = fps[start:start + step]
        assert compiled.check_and_add_many(part).tolist() == python.check_and_add_many(part).tolist()
        start += step
        assert compiled.keys() == python.keys() and compiled.visited() == python.visited()
    assert (compiled.hits, compiled.misses, compiled.size) == (python.hits, python.misses, python.size)

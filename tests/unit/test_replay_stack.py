"""crawler.replay.stack: the one-pass algorithms, each against a plain reference."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.replay import locality_trace, lru_distances, random_trace

from crawler.cache import make_cache
from crawler.cache._mix import MASK64, fastrange, fmix64
from crawler.cache.min import next_use as cache_next_use
from crawler.cache.static import top_k
from crawler.replay import _jit, stack

TRACES = [
    np.array([], dtype=np.uint64),
    np.array([7], dtype=np.uint64),
    np.array([0, 0, 0], dtype=np.uint64),
    np.array([1, 2, 3, 1, 2, 4, 1, 2, 3, 4], dtype=np.uint64),
    np.array([MASK64, 0, MASK64, 1, 0], dtype=np.uint64),
    random_trace(3000, 1, 40),
    random_trace(3000, 2, 2500),
    locality_trace(4000, 3),
]
IDS = ["empty", "one", "zeros", "cyclic", "extremes", "random-small", "random-wide", "locality"]


@pytest.mark.parametrize("trace", TRACES, ids=IDS)
def test_next_use_is_the_caches_next_use(trace):
    assert np.array_equal(stack.next_use(trace), cache_next_use(trace))


@pytest.mark.parametrize("trace", TRACES[3:], ids=IDS[3:])
def test_grouping_survives_forced_collisions(trace):
    # With 60 position bits only 4 bits of each mixed fingerprint stay in the key,
    # so nearly every group collides and the exact regrouping does the work.
    order, grouped = stack.grouped_order(trace, position_bits=60)
    expected = np.argsort(stack.fmix64_array(trace), kind="stable")
    assert np.array_equal(order, expected)
    assert np.array_equal(grouped, stack.fmix64_array(trace)[expected])


def test_grouping_rejects_too_few_position_bits():
    with pytest.raises(ValueError, match="position_bits"):
        stack.grouped_order(np.arange(10, dtype=np.uint64), position_bits=3)


def test_fmix64_and_fastrange_match_the_cache_functions():
    values = [0, 1, 2, 12345, MASK64, MASK64 - 1, 1 << 63, 0x9E3779B97F4A7C15]
    mixed = stack.fmix64_array(np.array(values, dtype=np.uint64))
    assert mixed.tolist() == [fmix64(v) for v in values]
    for n in (1, 3, 32, 1 << 20, (1 << 32) - 1):
        assert stack.fastrange_array(mixed, n).tolist() == [fastrange(int(m), n) for m in mixed]


def reference_depths(trace: np.ndarray) -> np.ndarray:
    return np.array([stack.COLD if d is None else d for d in lru_distances(trace.tolist())], dtype=np.int64)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
@pytest.mark.parametrize("trace", TRACES, ids=IDS)
def test_lru_depths_are_mattsons_stack_distances(trace, engine):
    if engine == "numba" and not _jit.AVAILABLE:
        pytest.skip("numba is not installed")
    got = stack.lru_depths(stack.next_use(trace), engine)
    assert np.array_equal(got, reference_depths(trace))


def test_numpy_and_compiled_lru_agree_on_a_long_trace():
    trace = locality_trace(60_000, 11, universe=20_000)
    nu = stack.next_use(trace)
    numpy_depths = stack.lru_depths_numpy(nu)
    plain = np.empty(len(trace), dtype=np.int64)
    _jit._lru_depths_fenwick(nu[:5000], plain[:5000], stack.COLD)    # the kernel's source as plain Python
    assert np.array_equal(plain[:5000], stack.lru_depths_numpy(nu[:5000]))
    if _jit.AVAILABLE:
        assert np.array_equal(stack.lru_depths(nu, "numba"), numpy_depths)


def test_unknown_engine():
    with pytest.raises(ValueError, match="unknown engine"):
        stack.lru_depths(np.zeros(0, dtype=np.int64), "fortran")


@pytest.mark.parametrize("trace", TRACES[1:], ids=IDS[1:])
def test_lru_misses_by_size_equal_the_lru_cache(trace):
    sizes = np.array([1, 2, 3, 5, 32, 33, 100, 1000, 4096])
    misses, _ = stack.misses_by_size(stack.lru_depths(stack.next_use(trace)), sizes)
    for size, got in zip(sizes, misses):
        cache = make_cache("lru", int(size))
        cache.check_and_add_many(trace)
        assert got == cache.misses, size


@pytest.mark.parametrize("trace", TRACES[1:], ids=IDS[1:])
def test_frequency_ranks_follow_top_k_and_the_static_cache(trace):
    ranks = stack.frequency_ranks(trace)
    distinct = len(np.unique(trace))
    order = top_k(trace, distinct)
    for k in (1, 2, 5, 40, distinct):
        cache = make_cache("static", k, preload=top_k(trace, k))
        assert np.array_equal(cache.check_and_add_many(trace), ranks < k), k
    position = {int(fp): r for r, fp in enumerate(order)}
    assert ranks.tolist() == [position[int(fp)] for fp in trace]


@pytest.mark.parametrize("trace", TRACES[1:], ids=IDS[1:])
def test_min_hits_are_the_min_caches(trace):
    nu = stack.next_use(trace)
    for k in (1, 3, 32, 200):
        cache = make_cache("min", k, trace=trace)
        assert np.array_equal(stack.min_hits(nu, k), cache.check_and_add_many(trace)), k


@pytest.mark.parametrize("trace", TRACES[1:], ids=IDS[1:])
def test_min_saturation_leaves_only_cold_misses(trace):
    nu = stack.next_use(trace)
    saturation = stack.min_saturation(nu)
    cold = int(stack.cold_requests(nu).sum())
    assert cold == len(np.unique(trace))
    assert int((~stack.min_hits(nu, saturation)).sum()) == cold
    assert saturation <= cold + 1


def test_clock_sets_never_evicts_is_exact_when_it_says_so():
    fired = 0
    for seed in range(60):
        trace = random_trace(int(200 + 20 * seed), seed, distinct=int(5 + 7 * seed))
        mixed = stack.distinct_mixed(stack.grouped_order(trace)[1])
        assert len(mixed) == len(np.unique(trace))
        for capacity in (1, 31, 32, 33, 64, 100, 256, 1000, 4096):
            if stack.clock_sets_never_evicts(mixed, capacity):
                fired += 1
                cache = make_cache("clock-sets", capacity)
                cache.check_and_add_many(trace)
                assert cache.misses == len(mixed), (seed, capacity)
            elif capacity >= len(mixed):
                # Some set is asked for more than its ways: the cache must evict at least once.
                cache = make_cache("clock-sets", capacity)
                cache.check_and_add_many(np.unique(trace))
                assert cache.size < len(mixed)
    assert fired > 100


def test_misses_by_size_and_windows():
    depths = np.array([stack.COLD, 1, 2, 3, 5, stack.COLD, 1, 8], dtype=np.int64)
    sizes = np.array([1, 2, 4, 8])
    totals, windows = stack.misses_by_size(depths, sizes, window=3)
    assert totals.tolist() == [sum(int(d) > s for d in depths) for s in sizes]
    assert windows.shape == (4, 3)
    for i, s in enumerate(sizes):
        per = [sum(int(d) > s for d in depths[w * 3:(w + 1) * 3]) for w in range(3)]
        assert windows[i].tolist() == per
    hits = np.array([True, False, False, True, False])
    assert stack.window_misses(hits, 2).tolist() == [1, 1, 1]


def test_static_and_infinite_depths():
    trace = np.array([4, 4, 9, 4, 9, 1], dtype=np.uint64)
    assert stack.static_depths(trace).tolist() == [1, 1, 2, 1, 2, 3]
    assert stack.infinite_depths(stack.next_use(trace)).tolist() == [stack.COLD, 1, stack.COLD, 1, 1, stack.COLD]

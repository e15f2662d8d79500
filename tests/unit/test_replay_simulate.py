"""crawler.replay.simulate: every policy's misses at every size equal a plain reference simulation."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.replay import (
    clock_ring_misses,
    infinite_misses,
    locality_trace,
    lru_misses,
    min_misses,
    random_trace,
    single_call_misses,
    static_misses,
)

from crawler.cache import PAPER_POLICIES, POLICY_NAMES, make_cache
from crawler.replay import _jit
from crawler.replay.results import result_rows
from crawler.replay.simulate import ReplayOptions, replay
from crawler.replay.traces import Stream

SIZES = (1, 2, 3, 4, 8, 16, 31, 32, 33, 64, 100, 128, 256, 512, 1024, 2048, 4096, 8192)
CASES = {
    "random-narrow": random_trace(3000, 1, 300),
    "random-wide": random_trace(3000, 2, 2500),
    "locality": locality_trace(5000, 3),
    "locality-large-universe": locality_trace(5000, 4, universe=50_000),
}


def stream(fps: np.ndarray, name: str = "s") -> Stream:
    return Stream(name, None, (), np.ascontiguousarray(fps, dtype=np.uint64), None)


def reference(policy: str, trace: list[int], size: int) -> int:
    if policy == "lru":
        return lru_misses(trace, size)
    if policy == "min":
        return min_misses(trace, size)
    if policy == "infinite":
        return infinite_misses(trace)
    if policy == "static":
        return static_misses(trace, size)
    if policy == "clock":
        return clock_ring_misses(trace, size)
    if policy == "clock-sets":
        return single_call_misses("clock-sets", trace, size)
    if policy == "random":
        return single_call_misses("random", trace, size, seed=0)
    return single_call_misses(policy, trace, size)     # the later policies: their own online classes


@pytest.fixture(scope="module")
def replays():
    options = ReplayOptions(traces=("full",), sizes=SIZES, policies=POLICY_NAMES)
    return {name: replay([stream(fps)], options) for name, fps in CASES.items()}


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("case", list(CASES))
def test_every_size_equals_the_reference(replays, case, policy):
    result = replays[case]
    trace = CASES[case].tolist()
    got = result.tallies[("full", policy)].misses.tolist()
    assert got == [reference(policy, trace, size) for size in SIZES]
    assert result.stats["full"].requests == len(trace)
    assert result.stats["full"].distinct == infinite_misses(trace)


@pytest.mark.parametrize("case", list(CASES))
def test_clock_sets_up_to_one_set_is_the_papers_global_clock(replays, case):
    trace = CASES[case].tolist()
    misses = replays[case].tallies[("full", "clock-sets")].misses
    for i, size in enumerate(SIZES):
        if size <= 32:
            assert misses[i] == clock_ring_misses(trace, size)


@pytest.mark.parametrize("case", list(CASES))
def test_min_is_below_every_evicting_policy(replays, case):
    tallies = replays[case].tallies
    floor = tallies[("full", "min")].misses
    for policy in ("clock", "clock-sets", "lru", "random"):
        assert np.all(floor <= tallies[("full", policy)].misses), policy
    assert np.all(tallies[("full", "infinite")].misses <= floor)


def test_streams_are_separate_caches_and_summed():
    a, b = locality_trace(3000, 5), locality_trace(2000, 6)
    options = ReplayOptions(traces=("full",), sizes=(1, 16, 256, 4096), policies=POLICY_NAMES)
    result = replay([stream(a, "a"), stream(b, "b")], options)
    for policy in POLICY_NAMES:
        expected = [reference(policy, a.tolist(), k) + reference(policy, b.tolist(), k) for k in options.sizes]
        assert result.tallies[("full", policy)].misses.tolist() == expected, policy
    assert result.stats["full"].requests == 5000
    assert [s["stream"] for s in result.stats["full"].streams] == ["a", "b"]


def test_over_time_windows_add_up_and_match_per_request_answers():
    a, b = locality_trace(2500, 7), locality_trace(1300, 8)
    options = ReplayOptions(traces=("full",), sizes=(1, 8, 64, 1024, 8192), window=500, policies=POLICY_NAMES)
    result = replay([stream(a), stream(b)], options)
    assert result.stats["full"].window_requests.tolist() == [1000, 1000, 800, 500, 500]
    for policy in POLICY_NAMES:
        tally = result.tallies[("full", policy)]
        assert tally.windows.shape == (5, 5)
        assert np.array_equal(tally.windows.sum(axis=1), tally.misses), policy
    # CLOCK and LRU window by window against the cache asked one request at a time.
    for policy in ("clock", "clock-sets", "lru"):
        for i, size in enumerate(options.sizes):
            expected = np.zeros(5, dtype=np.int64)
            for fps in (a, b):
                cache = make_cache(policy, size)
                misses = np.array([not cache.check_and_add(int(fp)) for fp in fps])
                expected[:-(-len(fps) // 500)] += np.add.reduceat(misses, np.arange(0, len(fps), 500))
            assert result.tallies[("full", policy)].windows[i].tolist() == expected.tolist(), (policy, size)


def test_worker_processes_give_the_same_answers():
    fps = [locality_trace(4000, 9), random_trace(3000, 10, 800)]
    base = ReplayOptions(traces=("full",), sizes=(1, 4, 64, 1024), window=700)
    one = replay([stream(f) for f in fps], base)
    two = replay([stream(f) for f in fps], ReplayOptions(**{**base.__dict__, "jobs": 2}), min_requests_for_jobs=0)
    for key, tally in one.tallies.items():
        assert np.array_equal(tally.misses, two.tallies[key].misses), key
        assert np.array_equal(tally.windows, two.tallies[key].windows), key


@pytest.mark.skipif(not _jit.AVAILABLE, reason="numba is not installed")
def test_numpy_and_numba_lru_engines_agree():
    fps = locality_trace(6000, 12)
    results = [replay([stream(fps)], ReplayOptions(traces=("full",), policies=("lru",), engine=e))
               for e in ("numpy", "numba")]
    assert results[0].lru_engine == "numpy" and results[1].lru_engine == "numba"
    assert np.array_equal(results[0].tallies[("full", "lru")].misses, results[1].tallies[("full", "lru")].misses)


def test_random_seed_is_the_caches_seed():
    fps = random_trace(3000, 13, 500).tolist()
    result = replay([stream(np.array(fps, dtype=np.uint64))],
                    ReplayOptions(traces=("full",), policies=("random",), sizes=(50, 200), seed=7))
    assert result.tallies[("full", "random")].misses.tolist() == [
        single_call_misses("random", fps, k, seed=7) for k in (50, 200)]


def test_rows_and_relative_to_min():
    fps = locality_trace(3000, 14)
    result = replay([stream(fps)], ReplayOptions(traces=("full", "cross"), sizes=(1, 64, 4096)))
    rows = result_rows(result, threads=4)
    assert len(rows) == 2 * len(PAPER_POLICIES) * 3        # the default: the paper's policies
    by_key = {(r.trace, r.policy, r.size): r for r in rows}
    for r in rows:
        if r.trace == "cross":                  # a plain array has no cross-host records
            assert r.requests == 0 and r.miss_rate is None and r.relative_to_min is None
            continue
        floor = by_key[("full", "min", r.size)]
        assert r.miss_rate == pytest.approx(r.misses / 3000)
        assert r.relative_to_min == pytest.approx(r.misses / floor.misses)
        assert r.entries_per_thread == r.size / 4
    assert by_key[("full", "min", 64)].relative_to_min == 1.0
    without_min = result_rows(replay([stream(fps)], ReplayOptions(traces=("full",), policies=("lru",), sizes=(8,))))
    assert without_min[0].relative_to_min is None and without_min[0].entries_per_thread is None


@pytest.mark.parametrize("options, message", [
    (ReplayOptions(policies=("lfu",)), "unknown cache policy"),
    (ReplayOptions(sizes=(4, 2)), "ascending"),
    (ReplayOptions(sizes=()), "ascending"),
    (ReplayOptions(traces=("local",)), "unknown trace"),
    (ReplayOptions(window=0), "window"),
    (ReplayOptions(engine="gpu"), "unknown engine"),
])
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        replay([stream(np.arange(10, dtype=np.uint64))], options)

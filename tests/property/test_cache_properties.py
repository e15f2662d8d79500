"""Each cache policy pinned against a tiny reference model (hypothesis).

The models are written for clarity, not speed: a list ring for CLOCK (and
one per set for CLOCK-SETS), an OrderedDict for LRU, sets for STATIC and
INFINITE, and a Belady simulation that scans for the farthest next use. The
CLOCK, CLOCK-SETS, LRU, RANDOM and INFINITE properties run on the cache
make_cache builds and, when that one is compiled, on the pure-Python twin too (tests/unit/test_cache.py compares the
compiled and pure STATIC and MIN directly).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.support.mixing import fmix64
from tests.support.strategies import fingerprint_traces

from crawler._native import NATIVE
from crawler.cache import make_cache
from crawler.cache._mix import MASK64, SplitMix64
from crawler.cache.clock import PyClockKernel
from crawler.cache.clock_sets import WAYS, PyClockSetsKernel
from crawler.cache.hashset import PySetKernel
from crawler.cache.lru import PyLruKernel
from crawler.cache.random_policy import PyRandomKernel

EXAMPLES = 150
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- inputs: short request sequences over a small pool of fingerprints ---------

def traces(max_len: int = 120) -> st.SearchStrategy[list[int]]:
    return fingerprint_traces(max_len, max_distinct=45)


@st.composite
def batch_splits(draw, trace):
    cuts = sorted(draw(st.lists(st.integers(0, len(trace)), max_size=6)))
    edges = [0, *cuts, len(trace)]
    return [trace[a:b] for a, b in zip(edges, edges[1:])]


capacities = st.integers(1, 2 * WAYS + 3)  # one set, and several sets of CLOCK-SETS
BIG_EXAMPLES = 30                           # long traces: few examples, most of them small sizes
MAX_SIZE_LOG2 = 16


# --- reference models ---------------------------------------------------------

class ClockRing:
    """The paper's CLOCK on one ring; new entries unmarked; the hand moves one past the slot it filled."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.keys, self.marks, self.hand = capacity, [], [], 0
        self.slot: dict[int, int] = {}   # where each key is: only so that 2**16-entry rings run in time

    def access(self, fp: int) -> bool:
        if fp in self.slot:
            self.marks[self.slot[fp]] = True
            return True
        if len(self.keys) < self.capacity:
            self.slot[fp] = len(self.keys)
            self.keys.append(fp)
            self.marks.append(False)
            return False
        while self.marks[self.hand]:
            self.marks[self.hand] = False
            self.hand = (self.hand + 1) % self.capacity
        del self.slot[self.keys[self.hand]]
        self.keys[self.hand], self.marks[self.hand], self.slot[fp] = fp, False, self.hand
        self.hand = (self.hand + 1) % self.capacity
        return False


def clock_model(trace: list[int], capacity: int) -> list[bool]:
    """The paper's CLOCK: one ring over the whole capacity."""
    ring = ClockRing(capacity)
    return [ring.access(fp) for fp in trace]


def clock_sets_model(trace: list[int], capacity: int) -> list[bool]:
    """CLOCK in sets of at most WAYS entries: set = floor(fmix64(fp) * nsets / 2**64)."""
    nsets = -(-capacity // WAYS)
    base, extra = divmod(capacity, nsets)
    rings = [ClockRing(base + (b < extra)) for b in range(nsets)]
    return [rings[(fmix64(fp) * nsets) >> 64].access(fp) for fp in trace]


def lru_model(trace: list[int], capacity: int) -> list[bool]:
    entries: OrderedDict[int, None] = OrderedDict()
    hits = []
    for fp in trace:
        hits.append(fp in entries)
        if fp in entries:
            entries.move_to_end(fp)
            continue
        if len(entries) == capacity:
            entries.popitem(last=False)
        entries[fp] = None
    return hits


def random_model(trace: list[int], capacity: int, seed: int) -> list[bool]:
    keys: list[int] = []
    rng = SplitMix64(seed)
    hits = []
    for fp in trace:
        hits.append(fp in keys)
        if fp in keys:
            continue
        if len(keys) < capacity:
            keys.append(fp)
        else:
            keys[(rng.next() * capacity) >> 64] = fp
    return hits


def belady_misses(trace: list[int], capacity: int) -> int:
    cached: set[int] = set()
    misses = 0
    for t, fp in enumerate(trace):
        if fp in cached:
            continue
        misses += 1
        if len(cached) == capacity:
            def next_request(key: int, t: int = t) -> int:
                rest = trace[t + 1:]
                return rest.index(key) if key in rest else len(trace)
            cached.remove(max(cached, key=next_request))
        cached.add(fp)
    return misses


# --- kernels under test: what make_cache gives, and the pure-Python twins -----

def online_caches(policy: str, capacity: int, seed: int = 0):
    """The cache make_cache builds, and the pure-Python kernel when it differs."""
    made = make_cache(policy, capacity, **({"seed": seed} if policy == "random" else {}))
    pure = {
        "clock": lambda: PyClockKernel(capacity),
        "clock-sets": lambda: PyClockSetsKernel(capacity, WAYS),
        "lru": lambda: PyLruKernel(capacity),
        "random": lambda: PyRandomKernel(capacity, seed),
        "infinite": lambda: PySetKernel(capacity, True),
    }[policy]()
    return [made, pure] if made.compiled else [made]


def run_batches(cache, batches) -> list[bool]:
    out: list[bool] = []
    for batch in batches:
        out += cache.check_and_add_many(np.array(batch, dtype=np.uint64)).tolist()
    return out


# --- properties -----------------------------------------------------------------

@SETTINGS
@given(data=st.data(), trace=traces(), capacity=capacities)
def test_clock_is_the_papers_ring(data, trace, capacity):
    expected = clock_model(trace, capacity)
    batches = data.draw(batch_splits(trace))
    for cache in online_caches("clock", capacity):
        assert [cache.check_and_add(fp) for fp in trace] == expected
        assert cache.size == len(set(cache.keys())) <= capacity
    for cache in online_caches("clock", capacity):
        assert run_batches(cache, batches) == expected


def long_trace(capacity: int, seed: int, spread: float, cuts: int) -> tuple[int, np.ndarray, list[int]]:
    """(capacity, a trace of a few times the capacity with locality, batch edges): `spread` distinct
    fingerprints per entry of capacity, half the requests a repeat of a recent one."""
    rng = np.random.default_rng(seed)
    n = 4 * capacity + 200
    ids = rng.integers(0, max(2, int(spread * capacity) + 1), size=n, dtype=np.uint64)
    back = rng.integers(1, 2 * capacity + 2, size=n)
    idx = np.arange(n)
    src = np.where((rng.random(n) < 0.5) & (idx >= back), idx - back, idx)
    with np.errstate(over="ignore"):
        trace = ids[src] * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
    return capacity, trace, [0, *np.sort(rng.integers(0, n, size=cuts)).tolist(), n]


@st.composite
def long_traces(draw):
    """long_trace with a capacity from 1 to 2**16, log-uniform."""
    capacity = draw(st.integers(0, MAX_SIZE_LOG2).flatmap(lambda e: st.integers(1 << max(e - 1, 0), 1 << e)))
    return long_trace(capacity, draw(st.integers(0, 2**32 - 1)), draw(st.sampled_from([1.1, 1.5, 3.0])),
                      draw(st.integers(0, 5)))


@settings(max_examples=BIG_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=long_traces())
@example(case=long_trace(1 << MAX_SIZE_LOG2, seed=1, spread=1.5, cuts=3))
def test_clock_is_the_papers_ring_up_to_2_16(case):
    capacity, trace, edges = case
    expected = clock_model(trace.tolist(), capacity)
    for cache in online_caches("clock", capacity):
        assert [cache.check_and_add(fp) for fp in trace.tolist()] == expected
    for cache in online_caches("clock", capacity):
        assert run_batches(cache, [trace[a:b] for a, b in zip(edges, edges[1:])]) == expected


@SETTINGS
@given(trace=traces(), capacity=capacities)
def test_clock_sets_matches_model(trace, capacity):
    expected = clock_sets_model(trace, capacity)
    for cache in online_caches("clock-sets", capacity):
        assert [cache.check_and_add(fp) for fp in trace] == expected
        assert cache.size == len(set(cache.keys())) <= capacity


@SETTINGS
@given(trace=traces(), capacity=st.integers(1, WAYS))
def test_clock_sets_with_one_set_is_the_papers_ring(trace, capacity):
    ring = ClockRing(capacity)
    assert make_cache("clock-sets", capacity).check_and_add_many(np.array(trace, dtype=np.uint64)).tolist() == \
        [ring.access(fp) for fp in trace]


@SETTINGS
@given(trace=traces(), capacity=capacities)
def test_lru_matches_model(trace, capacity):
    expected = lru_model(trace, capacity)
    for cache in online_caches("lru", capacity):
        assert [cache.check_and_add(fp) for fp in trace] == expected


@SETTINGS
@given(trace=traces(), capacity=capacities, seed=st.integers(0, MASK64))
def test_random_reproducible_bounded_and_matches_model(trace, capacity, seed):
    expected = random_model(trace, capacity, seed)
    for cache in online_caches("random", capacity, seed) + online_caches("random", capacity, seed):
        hits = []
        for fp in trace:
            hits.append(cache.check_and_add(fp))
            assert cache.size <= capacity
        assert hits == expected


@SETTINGS
@given(trace=traces(), preload=st.lists(st.integers(0, 40), max_size=20))
def test_static_matches_model(trace, preload):
    capacity = max(1, len(set(preload)))
    cache = make_cache("static", capacity, preload=np.array(preload, dtype=np.uint64))
    assert [cache.check_and_add(fp) for fp in trace] == [fp in set(preload) for fp in trace]
    assert cache.size == len(set(preload))


@SETTINGS
@given(trace=traces(), capacity=capacities)
def test_infinite_matches_model(trace, capacity):
    for cache in online_caches("infinite", capacity):
        seen: set[int] = set()
        for fp in trace:
            assert cache.check_and_add(fp) == (fp in seen)
            seen.add(fp)
        assert cache.size == len(seen)


@SETTINGS
@given(trace=traces(max_len=80), capacity=st.integers(1, 12), seed=st.integers(0, 1000))
def test_min_equals_belady_and_bounds_the_others(trace, capacity, seed):
    arr = np.array(trace, dtype=np.uint64)
    min_misses = int((~make_cache("min", capacity, trace=arr).check_and_add_many(arr)).sum())
    assert min_misses == belady_misses(trace, capacity)
    assert min_misses >= len(set(trace))  # INFINITE's misses: the compulsory ones
    for policy, options in (("clock", {}), ("clock-sets", {}), ("lru", {}), ("random", {"seed": seed})):
        other = make_cache(policy, capacity, **options)
        other.check_and_add_many(arr)
        assert min_misses <= other.misses, policy


@SETTINGS
@given(data=st.data(), trace=traces(), capacity=capacities, seed=st.integers(0, 1000))
def test_batches_equal_sequential_calls(data, trace, capacity, seed):
    batches = data.draw(batch_splits(trace))
    arr = np.array(trace, dtype=np.uint64)
    options = {"random": {"seed": seed}, "static": {"preload": arr[: capacity]}, "min": {"trace": arr}}
    for policy in ("clock", "clock-sets", "lru", "random", "static", "min", "infinite"):
        one = make_cache(policy, capacity, **options.get(policy, {}))
        many = make_cache(policy, capacity, **options.get(policy, {}))
        sequential = [one.check_and_add(fp) for fp in trace]
        assert run_batches(many, batches) == sequential, policy
        assert (one.hits, one.misses, one.size) == (many.hits, many.misses, many.size)


@pytest.mark.skipif(NATIVE is None, reason="compiled kernel not built")
@SETTINGS
@given(data=st.data(), trace=traces(), capacity=capacities)
def test_pure_kernels_batch_equal_sequential(data, trace, capacity):
    batches = data.draw(batch_splits(trace))
    for make in (lambda: PyClockKernel(capacity), lambda: PyClockSetsKernel(capacity, WAYS),
                 lambda: PyLruKernel(capacity), lambda: PyRandomKernel(capacity, 3),
                 lambda: PySetKernel(capacity, True)):
        one, many = make(), make()
        assert run_batches(many, batches) == [one.check_and_add(fp) for fp in trace]

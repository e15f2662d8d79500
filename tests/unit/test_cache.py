"""Unit tests of crawler.cache: the interface, each policy's rules, memory, and
that the compiled kernels and the pure-Python fallbacks give identical results."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest
from tests.support.fixtures import REPO

import crawler.cache as cache_pkg
from crawler._native import NATIVE, PURE_PYTHON_ENV
from crawler.cache import (
    COMPILED,
    ONLINE_POLICIES,
    PAPER_POLICIES,
    POLICIES,
    Cache,
    cache_from_config,
    make_cache,
)
from crawler.cache._mix import MASK64, SplitMix64, fastrange, fmix64
from crawler.cache.clock import PyClockKernel
from crawler.cache.clock_sets import WAYS, PyClockSetsKernel
from crawler.cache.hashset import PySetKernel
from crawler.cache.lru import PyLruKernel
from crawler.cache.min import belady_hits, belady_hits_py, next_use
from crawler.cache.random_policy import PyRandomKernel
from crawler.cache.static import top_k

MAX_CLOCK_SETS_BYTES_PER_ENTRY = 9.0
MAX_CLOCK_BYTES_PER_ENTRY = 24.5     # key, mark bit and a position index at load >= 1/4
BIG_CAPACITY = 1 << 18
needs_compiled = pytest.mark.skipif(NATIVE is None, reason="compiled kernel not built")


def locality_stream(n: int, seed: int, universe: int = 5000) -> np.ndarray:
    """Requests with repeats near each other and a skewed popularity, as uint64."""
    rng = np.random.default_rng(seed)
    ids = (np.exp(rng.random(n) * np.log(universe))).astype(np.uint64)
    back = rng.integers(1, 40, size=n)
    copy = rng.random(n) < 0.4
    idx = np.arange(n)
    src = np.where(copy & (idx >= back), idx - back, idx)
    for _ in range(64):
        nxt = src[src]
        if np.array_equal(nxt, src):
            break
        src = nxt
    ids = ids[src]
    with np.errstate(over="ignore"):
        return ids * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)


def build(policy: str, capacity: int, trace: np.ndarray | None = None) -> Cache:
    if policy == "min":
        return make_cache("min", capacity, trace=trace)
    if policy == "static":
        return make_cache("static", capacity, preload=top_k(trace, capacity) if trace is not None else None)
    return make_cache(policy, capacity)


# --- registry and make_cache --------------------------------------------------

def test_registry_names_and_online_policies():
    assert set(POLICIES) == {"clock", "clock-sets", "lru", "random", "static", "min", "infinite",
                             "sieve", "s3fifo", "arc", "2q", "wtinylfu"}
    assert ONLINE_POLICIES == ("clock", "clock-sets", "lru", "random", "static", "sieve", "s3fifo", "arc", "2q",
                               "wtinylfu")
    assert cache_pkg.DEFAULT_POLICY == "clock-sets"
    for name, cls in POLICIES.items():
        assert issubclass(cls, Cache) and cls.name == name


def test_unknown_policy_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown cache policy 'lfu'.*clock.*lru.*random.*static.*min.*infinite"):
        make_cache("lfu", 10)


@pytest.mark.parametrize("capacity", [0, -1, 1.5, "10", True, None])
def test_bad_capacity_is_rejected(capacity):
    with pytest.raises(ValueError, match="capacity"):
        make_cache("clock", capacity)


def test_numpy_integer_capacity_is_accepted():
    assert make_cache("lru", np.int64(7)).capacity == 7


def test_options_are_checked_per_policy():
    with pytest.raises(ValueError, match="'clock' does not take option.*seed.*none"):
        make_cache("clock", 10, seed=1)
    with pytest.raises(ValueError, match="'random' does not take option.*preload.*seed"):
        make_cache("random", 10, preload=[1])
    with pytest.raises(ValueError, match="seed"):
        make_cache("random", 10, seed=-1)
    with pytest.raises(ValueError, match="trace"):
        make_cache("min", 10)


def test_cache_from_config_passes_each_policy_its_options(tmp_path):
    np.save(tmp_path / "pre.npy", np.array([5, 6], dtype=np.uint64))
    random_cache = cache_from_config(SimpleNamespace(policy="random", size=4, seed=3, preload_file=None))
    assert random_cache.name == "random" and random_cache.capacity == 4
    clock = cache_from_config(SimpleNamespace(policy="clock", size=8, seed=3, preload_file=None))
    assert clock.name == "clock"
    static = cache_from_config(SimpleNamespace(policy="static", size=4, seed=0,
                                               preload_file=str(tmp_path / "pre.npy")))
    assert static.check_and_add(5) and not static.check_and_add(7)


# --- the interface, for every policy ------------------------------------------

ALL_POLICIES = sorted(POLICIES)


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_interface_counts_and_stats(policy):
    trace = np.array([1, 2, 1, 3, 2, 0, MASK64, 0, MASK64, 1], dtype=np.uint64)
    cache = build(policy, 3, trace)
    answers = [cache.check_and_add(int(fp)) for fp in trace]
    assert all(type(a) is bool for a in answers)
    assert cache.hits == sum(answers) and cache.misses == len(trace) - sum(answers)
    stats = cache.stats()
    assert stats["policy"] == policy and stats["capacity"] == 3
    assert stats["lookups"] == len(trace)
    assert stats["hit_rate"] == pytest.approx(cache.hits / len(trace))
    assert stats["memory_bytes"] > 0 and stats["bytes_per_entry"] == pytest.approx(stats["memory_bytes"] / 3)
    assert stats["size"] == cache.size
    cache.close()


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_batch_returns_bool_array_in_order(policy):
    trace = np.array([7, 7, 8, 7, 9, 8], dtype=np.uint64)
    cache = build(policy, 4, trace)
    got = cache.check_and_add_many(trace)
    assert got.dtype == np.bool_ and got.shape == (6,)
    if policy == "static":  # preloaded with the whole trace, never inserts
        assert got.all()
    else:
        assert got.tolist() == [False, True, False, True, False, True]
    assert cache.check_and_add_many(np.empty(0, dtype=np.uint64)).shape == (0,)


@pytest.mark.parametrize("policy", ["clock", "clock-sets", "lru", "random", "infinite", "static"])
def test_fingerprint_edge_values_and_types(policy):
    cache = build(policy, 4, np.array([0, MASK64], dtype=np.uint64))
    if policy != "static":
        assert cache.check_and_add(0) is False and cache.check_and_add(0) is True
        assert cache.check_and_add(np.uint64(MASK64)) is False and cache.check_and_add(MASK64) is True
    else:
        assert cache.check_and_add(0) and cache.check_and_add(np.uint64(MASK64))
    with pytest.raises(OverflowError):
        cache.check_and_add(-1)
    with pytest.raises(OverflowError):
        cache.check_and_add(1 << 64)
    with pytest.raises(TypeError):
        cache.check_and_add(1.0)
    # other array types are converted like numpy.ascontiguousarray(x, dtype=uint64)
    assert cache.check_and_add_many([0, MASK64]).tolist() == [True, True]
    assert cache.check_and_add_many(np.array([0, 0], dtype=np.int64)).tolist() == [True, True]
    assert cache.check_and_add_many(np.array([0, MASK64, 5], dtype=np.uint64)[::2]).tolist()[0]
    with pytest.raises(ValueError):
        cache.check_and_add_many(np.zeros((2, 2), dtype=np.uint64))


# --- CLOCK --------------------------------------------------------------------

def textbook_clock(trace, capacity):
    """The paper's CLOCK on one ring, new entries unmarked: the hit sequence."""
    keys, marks, where, hand, hits = [], [], {}, 0, []
    for fp in trace:
        if fp in where:
            marks[where[fp]] = 1
            hits.append(True)
            continue
        hits.append(False)
        if len(keys) < capacity:
            where[fp] = len(keys)
            keys.append(fp)
            marks.append(0)
            continue
        while marks[hand]:
            marks[hand] = 0
            hand = (hand + 1) % capacity
        del where[keys[hand]]
        keys[hand], marks[hand], where[fp] = fp, 0, hand
        hand = (hand + 1) % capacity
    return hits


def ring_state(cache):
    """(keys, marks, hand) of the one ring: `clock`'s, or `clock-sets`' only set."""
    return cache.ring_state() if cache.name == "clock" else cache.set_state(0)


@pytest.mark.parametrize("policy", ["clock", "clock-sets"])
def test_clock_worked_example(policy):
    cache = make_cache(policy, 3)
    # 1 2 3 fill the ring; 1 hit marks it; 4: hand at 1 (marked) -> clear, 2 unmarked -> evict 2.
    assert cache.check_and_add_many(np.array([1, 2, 3, 1, 4], dtype=np.uint64)).tolist() == \
        [False, False, False, True, False]
    keys, marks, hand = ring_state(cache)
    assert keys == [1, 4, 3] and marks == [False, False, False] and hand == 2
    assert cache.check_and_add(2) is False        # 2 was evicted; hand at 3 -> evict 3
    assert ring_state(cache) == ([1, 4, 2], [False, False, False], 0)
    assert [cache.check_and_add(fp) for fp in (1, 4, 3)] == [True, True, False]


@pytest.mark.parametrize("policy", ["clock", "clock-sets"])
def test_clock_new_entries_start_unmarked(policy):
    cache = make_cache(policy, 5)
    cache.check_and_add(10)
    assert ring_state(cache)[1] == [False]
    cache.check_and_add(10)
    assert ring_state(cache)[1] == [True]


@pytest.mark.parametrize("capacity", [1, 2, 7, WAYS, WAYS + 1, 63, 64, 65, 1000])
def test_clock_is_the_global_ring(capacity):
    trace = locality_stream(3000 + 6 * capacity, seed=capacity, universe=3 * capacity + 5)
    expected = textbook_clock(trace.tolist(), capacity)
    assert make_cache("clock", capacity).check_and_add_many(trace).tolist() == expected
    assert PyClockKernel(capacity).check_and_add_many(trace).tolist() == expected


@pytest.mark.parametrize("capacity", [1, 2, 7, WAYS])
def test_clock_sets_up_to_one_set_is_the_global_ring(capacity):
    trace = locality_stream(3000, seed=capacity, universe=3 * capacity + 5)
    assert make_cache("clock-sets", capacity).check_and_add_many(trace).tolist() == \
        textbook_clock(trace.tolist(), capacity)


def test_clock_sets_partition_the_capacity():
    for capacity in (33, 100, 1000, BIG_CAPACITY + 3):
        cache = make_cache("clock-sets", capacity)
        base, extra = divmod(capacity, cache.nsets)
        assert cache.nsets == -(-capacity // WAYS) and base + (extra > 0) <= WAYS


@pytest.mark.parametrize("policy", ["clock", "clock-sets"])
def test_clock_fills_and_never_exceeds_capacity(policy):
    cache = make_cache(policy, 1000)
    cache.check_and_add_many(np.arange(50_000, dtype=np.uint64))
    assert cache.size == 1000 and len(cache.keys()) == 1000 and len(set(cache.keys())) == 1000


@pytest.mark.parametrize("policy,most", [("clock-sets", MAX_CLOCK_SETS_BYTES_PER_ENTRY),
                                         ("clock", MAX_CLOCK_BYTES_PER_ENTRY)])
def test_clock_memory_per_entry_at_2_18(policy, most):
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = make_cache(policy, BIG_CAPACITY)
        traced = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    if cache.compiled:
        assert cache.stats()["bytes_per_entry"] <= most
        assert traced / BIG_CAPACITY <= most
        assert abs(traced - cache.memory_bytes()) < 1024  # self-reported memory is honest


# --- LRU, RANDOM, STATIC, INFINITE, MIN ---------------------------------------

def test_lru_evicts_least_recently_used():
    cache = make_cache("lru", 3)
    cache.check_and_add_many(np.array([1, 2, 3, 1, 4], dtype=np.uint64))
    assert cache.keys() == [3, 1, 4]
    assert cache.check_and_add(2) is False and cache.keys() == [1, 4, 2]


def test_random_is_reproducible_per_seed_and_bounded():
    trace = locality_stream(20_000, seed=3)
    runs = [make_cache("random", 300, seed=seed).check_and_add_many(trace) for seed in (7, 7, 8)]
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])
    cache = make_cache("random", 300, seed=7)
    cache.check_and_add_many(trace)
    assert cache.size == 300 and len(set(cache.keys())) == 300


def test_random_victims_follow_splitmix64():
    cache = make_cache("random", 4, seed=11)
    cache.check_and_add_many(np.array([10, 11, 12, 13], dtype=np.uint64))
    victim = fastrange(SplitMix64(11).next(), 4)
    cache.check_and_add(14)
    assert cache.keys()[victim] == 14


def test_static_holds_preload_only(tmp_path):
    cache = make_cache("static", 3, preload=np.array([5, 6, 6], dtype=np.uint64))
    assert cache.size == 2
    assert cache.check_and_add_many(np.array([5, 7, 7, 6], dtype=np.uint64)).tolist() == [True, False, False, True]
    assert cache.size == 2 and sorted(cache.keys()) == [5, 6]
    with pytest.raises(ValueError, match="more than the capacity"):
        make_cache("static", 1, preload=[1, 2])
    np.save(tmp_path / "top.npy", np.array([9], dtype=np.uint64))
    assert make_cache("static", 1, preload=tmp_path / "top.npy").check_and_add(9)
    with pytest.raises(ValueError, match="cannot read preload file"):
        make_cache("static", 1, preload=tmp_path / "missing.npy")
    assert make_cache("static", 4).check_and_add(5) is False  # no preload: empty


def test_top_k_orders_by_count_then_value():
    trace = np.array([3, 1, 3, 2, 2, 3, 9], dtype=np.uint64)
    assert top_k(trace, 2).tolist() == [3, 2]
    assert top_k(trace, 10).tolist() == [3, 2, 1, 9]


def test_infinite_never_evicts():
    cache = make_cache("infinite", 1)
    cache.check_and_add_many(np.arange(1000, dtype=np.uint64))
    assert cache.size == 1000 and cache.check_and_add_many(np.arange(1000, dtype=np.uint64)).all()


def test_min_must_be_asked_its_trace_in_order():
    trace = np.array([1, 2, 3, 1, 2, 4, 1], dtype=np.uint64)
    cache = make_cache("min", 2, trace=trace)
    assert cache.check_and_add(1) is False
    with pytest.raises(ValueError, match="request 1 is 3, the trace says 2"):
        cache.check_and_add(3)
    assert cache.check_and_add_many(trace[1:4]).tolist() == [False, False, True]
    with pytest.raises(ValueError, match="request 5 is 9"):
        cache.check_and_add_many(np.array([2, 9], dtype=np.uint64))
    assert cache.check_and_add_many(trace[4:]).tolist() == [False, False, True]
    assert cache.size == 2
    with pytest.raises(ValueError, match="past the end"):
        cache.check_and_add(1)


def test_min_evicts_farthest_next_use():
    # capacity 2, after 1 2: request 3 must evict 2 (next used at 5) not 1 (used at 3)
    trace = np.array([1, 2, 3, 1, 3, 2], dtype=np.uint64)
    assert make_cache("min", 2, trace=trace).check_and_add_many(trace).tolist() == \
        [False, False, False, True, True, False]


def test_next_use():
    assert next_use(np.array([5, 6, 5, 5, 6], dtype=np.uint64)).tolist() == [2, 4, 3, 5, 5]


# --- compiled kernels == pure-Python fallbacks --------------------------------

def kernel_pairs():
    if NATIVE is None:
        return []
    return [
        ("clock", NATIVE.ClockKernel, PyClockKernel),
        ("clock-sets", lambda cap: NATIVE.ClockSetsKernel(cap, WAYS), lambda cap: PyClockSetsKernel(cap, WAYS)),
        ("clock-sets-8way", lambda cap: NATIVE.ClockSetsKernel(cap, 8), lambda cap: PyClockSetsKernel(cap, 8)),
        ("lru", NATIVE.LruKernel, PyLruKernel),
        ("random", lambda cap: NATIVE.RandomKernel(cap, 99), lambda cap: PyRandomKernel(cap, 99)),
        ("infinite", lambda cap: NATIVE.SetKernel(cap, True), lambda cap: PySetKernel(cap, True)),
    ]


@needs_compiled
@pytest.mark.parametrize("name,compiled,pure", kernel_pairs(), ids=[p[0] for p in kernel_pairs()])
@pytest.mark.parametrize("capacity", [1, 5, 32, 33, 257, 4000])
def test_compiled_and_pure_kernels_agree(name, compiled, pure, capacity):
    trace = locality_stream(12_000, seed=capacity)
    fast, slow = compiled(capacity), pure(capacity)
    half = len(trace) // 2
    fast_hits = np.concatenate([fast.check_and_add_many(trace[:half]),
                                [fast.check_and_add(fp) for fp in trace[half:].tolist()]])
    slow_hits = np.concatenate([[slow.check_and_add(fp) for fp in trace[:half].tolist()],
                                slow.check_and_add_many(trace[half:])])
    assert np.array_equal(fast_hits, slow_hits)
    assert (fast.hits, fast.misses, fast.size) == (slow.hits, slow.misses, slow.size)
    if name == "infinite":
        assert sorted(fast.keys()) == sorted(slow.keys())
    else:
        assert fast.keys() == slow.keys()
    if name == "clock":
        assert fast.ring_state() == slow.ring_state()
    if name.startswith("clock-sets"):
        assert all(fast.set_state(b) == slow.set_state(b) for b in range(fast.nsets))


@needs_compiled
def test_compiled_and_pure_static_and_min_agree():
    trace = locality_stream(20_000, seed=5)
    frozen, pure = NATIVE.SetKernel(100, False), PySetKernel(100, False)
    for kernel in (frozen, pure):
        kernel.add_many(top_k(trace, 100))
    assert np.array_equal(frozen.check_and_add_many(trace), pure.check_and_add_many(trace))
    for capacity in (1, 3, 100, 5000):
        assert np.array_equal(belady_hits(trace, capacity), belady_hits_py(next_use(trace), capacity))


def test_pure_python_fallback_end_to_end():
    """With CRAWLER_CACHE_PURE_PYTHON=1 the package runs without the compiled
    module and gives the same answers as this process (compiled if built)."""
    trace = locality_stream(3000, seed=9)
    script = (
        "import sys, numpy as np\n"
        "from crawler.cache import COMPILED, make_cache\n"
        "from crawler.cache.static import top_k\n"
        "t = np.frombuffer(sys.stdin.buffer.read(), dtype=np.uint64)\n"
        "opts = {'random': {'seed': 4}, 'static': {'preload': top_k(t, 50)}, 'min': {'trace': t}}\n"
        "print(COMPILED)\n"
        "for p in ('clock', 'clock-sets', 'lru', 'random', 'static', 'min', 'infinite'):\n"
        "    c = make_cache(p, 50, **opts.get(p, {}))\n"
        "    print(p, c.compiled, np.packbits(c.check_and_add_many(t)).tobytes().hex())\n"
    )
    env = {**os.environ, PURE_PYTHON_ENV: "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", script], input=trace.tobytes(), env=env,
                         capture_output=True, check=True, timeout=60).stdout.decode().split("\n")
    assert out[0] == "False"
    for line in out[1:8]:
        policy, compiled, bits = line.split()
        assert compiled == "False"
        opts = {"random": {"seed": 4}, "static": {"preload": top_k(trace, 50)}, "min": {"trace": trace}}
        here = make_cache(policy, 50, **opts.get(policy, {})).check_and_add_many(trace)
        assert np.packbits(here).tobytes().hex() == bits, policy


def test_compiled_flag_matches_kernel():
    assert COMPILED == (NATIVE is not None)
    for name in PAPER_POLICIES:                  # the later policies are pure Python only
        assert POLICIES[name].compiled == COMPILED


def test_fmix64_is_a_bijection_sample():
    values = [0, 1, 2, MASK64, 1 << 63] + list(range(100, 200))
    assert len({fmix64(v) for v in values}) == len(values) and fmix64(0) == 0

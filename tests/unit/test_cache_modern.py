"""Unit tests of the modern policies (sieve, s3fifo, arc, 2q, wtinylfu): the registry, make_cache's
errors, stats(), the segment sizes at small capacities, one hand-worked example of each paper's
rule, and memory per entry (self-reported and measured with tracemalloc)."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from crawler.cache import COMPILED, ONLINE_POLICIES, POLICIES, Cache, make_cache
from crawler.cache._mix import MASK64
from crawler.cache.s3fifo import segment_sizes
from crawler.cache.twoq import queue_sizes
from crawler.cache.wtinylfu import CountMinSketch, region_sizes

MODERN = ("sieve", "s3fifo", "arc", "2q", "wtinylfu")
COMPILED_MODERN = ("sieve",)   # with a C kernel (crawler/_native/cache_sieve.c); the others are pure Python
CLASSES = {"sieve": "SieveCache", "s3fifo": "S3FifoCache", "arc": "ArcCache", "2q": "TwoQCache",
           "wtinylfu": "WTinyLfuCache"}


# --- registry and make_cache --------------------------------------------------

def test_registered_by_name_and_usable_online():
    for name in MODERN:
        cls = POLICIES[name]
        assert issubclass(cls, Cache) and cls.name == name and cls.__name__ == CLASSES[name]
        assert name in ONLINE_POLICIES
        assert cls.options == () and cls.compiled is (COMPILED and name in COMPILED_MODERN)


@pytest.mark.parametrize("policy", MODERN)
def test_make_cache_errors_name_the_problem(policy):
    with pytest.raises(ValueError, match=f"'{policy}' does not take option.*seed.*none"):
        make_cache(policy, 10, seed=1)
    for bad in (0, -1, 2.5, "10", True, None):
        with pytest.raises(ValueError, match="capacity"):
            make_cache(policy, bad)
    with pytest.raises(ValueError, match=f"unknown cache policy 'SIEVE'.*{policy}"):
        make_cache("SIEVE", 10)


@pytest.mark.parametrize("policy", MODERN)
def test_fingerprints_are_checked_like_the_compiled_kernels(policy):
    cache = make_cache(policy, 4)
    assert cache.check_and_add(MASK64) is False and cache.check_and_add(np.uint64(MASK64)) is True
    assert cache.check_and_add(0) is False and cache.check_and_add(0) is True
    with pytest.raises(OverflowError):
        cache.check_and_add(-1)
    with pytest.raises(OverflowError):
        cache.check_and_add(1 << 64)
    with pytest.raises(TypeError):
        cache.check_and_add("x")


@pytest.mark.parametrize("policy", MODERN)
def test_stats_counts_and_batches(policy):
    trace = [1, 2, 1, 3, 2, 0, MASK64, 0, MASK64, 1]
    cache = make_cache(policy, 3)
    answers = cache.check_and_add_many(trace)  # any array-like
    assert answers.dtype == np.bool_ and answers.shape == (10,)
    stats = cache.stats()
    assert stats["policy"] == policy and stats["capacity"] == 3 and stats["compiled"] is POLICIES[policy].compiled
    assert stats["hits"] == int(answers.sum()) and stats["misses"] == 10 - int(answers.sum())
    assert stats["lookups"] == 10 and stats["size"] == cache.size == len(cache.keys()) <= 3
    assert stats["hit_rate"] == pytest.approx(stats["hits"] / 10)
    assert stats["memory_bytes"] == cache.memory_bytes() > cache.buffer_bytes > 0
    assert stats["bytes_per_entry"] == pytest.approx(stats["memory_bytes"] / 3)
    assert repr(cache).startswith(f"<{CLASSES[policy]} {policy} size=")
    cache.close()


@pytest.mark.parametrize("policy", MODERN)
def test_capacity_one_holds_the_last_key(policy):
    cache = make_cache(policy, 1)
    assert cache.check_and_add_many([5, 5, 6, 5, 6, 6]).tolist() == [False, True, False, False, False, True]
    assert cache.keys() == [6] and cache.size == 1


# --- segment sizes: every capacity from 1 is well defined -----------------------

def test_s3fifo_sizes_round_small_up():
    assert segment_sizes(1) == (1, 0, 0)     # FIFO of one: no main, no ghost
    assert segment_sizes(2) == (1, 1, 1)
    assert segment_sizes(10) == (1, 9, 9)
    assert segment_sizes(11) == (2, 9, 9)    # "len(small) >= 0.1 C" first holds at ceil(C/10)
    assert segment_sizes(100) == (10, 90, 90)
    for c in range(1, 300):
        small, main, ghost = segment_sizes(c)
        assert small >= 0.1 * c > small - 1 and small + main == c and ghost == main


def test_twoq_sizes_round_down():
    assert queue_sizes(1) == (0, 0)
    assert queue_sizes(2) == (0, 1)
    assert queue_sizes(4) == (1, 2)
    assert queue_sizes(7) == (1, 3)
    assert queue_sizes(100) == (25, 50)


def test_wtinylfu_sizes_and_sketch_width():
    assert region_sizes(1) == (1, 0, 0)     # LRU of one: the window is the cache
    assert region_sizes(2) == (1, 1, 0)
    assert region_sizes(100) == (1, 20, 79)
    assert region_sizes(101) == (2, 20, 79)
    assert region_sizes(100_000) == (1000, 19_800, 79_200)
    assert [CountMinSketch(c).width for c in (1, 2, 3, 100, 128, 129)] == [1, 2, 4, 128, 128, 256]


# --- each paper's rule on a hand-worked example -------------------------------------

def test_sieve_hand_skips_visited_and_keeps_its_place():
    cache = make_cache("sieve", 3)
    cache.check_and_add_many([1, 2, 3, 1])        # 1 visited
    assert cache.check_and_add(4) is False        # the hand clears 1 and evicts 2
    assert cache.keys() == [1, 3, 4] and cache.visited() == [False, False, False]
    assert cache.check_and_add(5) is False        # the hand stayed at 3: evicts it, not 1
    assert cache.keys() == [1, 4, 5]


def test_s3fifo_one_hit_wonders_go_to_the_ghost_and_return_to_main():
    cache = make_cache("s3fifo", 10)
    cache.check_and_add_many(list(range(10)) + [1, 1])  # 1 hit twice while in small
    cache.check_and_add(10)                             # evicts from small: 0 to the ghost
    assert cache.queues() == ([1, *range(2, 11)], [], [0])
    cache.check_and_add(11)                             # 1 (freq 2) moves to main, 2 to the ghost
    assert cache.queues() == ([*range(3, 12)], [1], [0, 2])
    assert cache.check_and_add(0) is False              # a ghost hit: into main
    small, main, ghost = cache.queues()
    assert main == [1, 0] and ghost == [2, 3] and 3 not in small  # 3 made room, then 0 left the ghost


def test_arc_ghost_hits_move_p():
    cache = make_cache("arc", 2)
    cache.check_and_add_many([1, 2, 3])   # |T1| = c: T1's LRU leaves with no ghost (case IV A)
    assert cache.lists() == ([2, 3], [], [], [], 0.0)
    cache = make_cache("arc", 2)
    cache.check_and_add_many([1, 2, 1, 3])  # 1 to T2; 3 replaces T1's LRU, 2, which goes to B1
    assert cache.lists() == ([3], [1], [2], [], 0.0)
    assert cache.check_and_add(2) is False  # a B1 hit: p grows to 1, so REPLACE takes T2's LRU
    assert cache.lists() == ([3], [2], [], [1], 1.0)
    assert cache.check_and_add(1) is False  # a B2 hit: p shrinks to 0, T1's LRU goes to B1
    assert cache.lists() == ([], [2, 1], [3], [], 0.0)


def test_twoq_a1in_hits_move_nothing_and_a1out_feeds_am():
    cache = make_cache("2q", 4)           # Kin 1, Kout 2
    cache.check_and_add_many([1, 2, 3, 4, 1])
    assert cache.queues() == ([1, 2, 3, 4], [], [])
    cache.check_and_add_many([5, 6])      # A1in over Kin: 1, then 2 go to A1out
    assert cache.queues() == ([3, 4, 5, 6], [1, 2], [])
    assert cache.check_and_add(1) is False
    assert cache.queues() == ([4, 5, 6], [2, 3], [1])


def test_wtinylfu_rejects_a_cold_candidate_for_a_hot_victim():
    cache = make_cache("wtinylfu", 3)     # window 1, probation 1, protected 1: main holds 2
    cache.check_and_add_many([2, 2, 2, 1, 3])
    assert cache.regions() == ([3], [2, 1], [])
    cache.check_and_add(4)                # candidate 3 (seen once) vs victim 2 (3 times): rejected
    assert cache.regions() == ([4], [2, 1], [])
    cache.check_and_add_many([4, 4, 5])   # candidate 4 (3 times) vs victim 2 (3 times): a tie rejects
    assert cache.regions() == ([5], [2, 1], [])
    cache.check_and_add_many([5, 5, 5, 6])  # candidate 5 (4 times) beats victim 2
    assert cache.regions() == ([6], [1, 5], [])
    assert [cache.sketch.estimate(k) for k in (1, 2, 3, 4, 5, 6)] == [1, 3, 1, 3, 4, 1]


def test_wtinylfu_sketch_halves_after_ten_times_capacity():
    sketch = CountMinSketch(4)
    for _ in range(7):
        sketch.increment(9)
    assert sketch.estimate(9) == 7 and sketch.estimate(8) in (0, 7)
    for _ in range(33):
        sketch.increment(8)
    assert sketch.additions == 20 and sketch.estimate(9) == 3  # halved at the 40th increment
    assert sketch.estimate(8) == 15 // 2                        # saturated at 15, then halved


# --- memory ----------------------------------------------------------------------------

@pytest.mark.parametrize("policy", MODERN)
def test_memory_per_entry_is_reported_honestly(policy):
    capacity = 5000
    fill = np.random.default_rng(1).integers(0, 1 << 63, size=3 * capacity, dtype=np.uint64)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = make_cache(policy, capacity)
        cache.check_and_add_many(fill)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.size == capacity
    assert traced == pytest.approx(cache.memory_bytes(), rel=0.05)
    assert cache.memory_bytes() / capacity < 400  # pure Python: 150-360 B at 10^5 (docs/caches.md)

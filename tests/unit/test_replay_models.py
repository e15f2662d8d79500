"""The plain reference simulations of replay (tests/support/replay.py), pinned on hand-worked examples."""

from __future__ import annotations

import numpy as np
from tests.support.replay import (
    clock_ring_misses,
    infinite_misses,
    locality_trace,
    lru_distances,
    lru_misses,
    min_misses,
    single_call_misses,
    static_misses,
)

# --- the references on hand-worked examples --------------------------------------

ABC = [1, 2, 3, 1, 2, 4, 1, 2, 3, 4]


def test_lru_reference():
    assert lru_distances([1, 2, 1, 1, 3, 2]) == [None, None, 2, 1, None, 3]
    assert lru_misses(ABC, 2) == 10          # cyclic pattern larger than the cache
    assert lru_misses(ABC, 3) == 6           # 4 evicts 3, 3 evicts 4, 4 evicts 1
    assert lru_misses(ABC, 4) == 4


def test_min_reference():
    # Belady on 1 2 3 1 2 4 1 2 3 4 with 3 entries: cold 1 2 3, then 4 evicts 3 and 3 evicts 1 or 2.
    assert min_misses(ABC, 3) == 5
    assert min_misses(ABC, 1) == 10
    assert min_misses(ABC, 4) == 4


def test_static_and_infinite_reference():
    assert infinite_misses(ABC) == 4
    assert static_misses(ABC, 2) == 4        # holds 1 and 2 (3 times each)
    assert static_misses([5, 5, 3, 3, 9], 1) == 3  # a tie goes to the smaller fingerprint


def test_clock_reference_matches_the_caches():
    trace = [int(x) for x in locality_trace(3000, 1)]
    for capacity in (1, 2, 7, 32):
        assert clock_ring_misses(trace, capacity) == single_call_misses("clock-sets", trace, capacity)
    for capacity in (1, 2, 7, 32, 33, 100, 1000):
        assert clock_ring_misses(trace, capacity) == single_call_misses("clock", trace, capacity)


def test_generators_are_repeatable():
    assert np.array_equal(locality_trace(500, 3), locality_trace(500, 3))
    assert len(np.unique(locality_trace(5000, 3))) < 3000      # it really repeats

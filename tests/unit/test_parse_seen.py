"""The content-seen set (crawler/parse/seen.py): bounded, flat in memory, forgets but never invents.

tests/property/test_parse_seen_properties.py checks the answers against a
plain Python set; these pin capacity, memory and the off switch.
"""

from __future__ import annotations

import tracemalloc

import pytest

from crawler._native import NATIVE
from crawler.cache.clock_sets import WAYS
from crawler.config import Config
from crawler.parse import ContentSeen

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15          # spreads consecutive integers over 64 bits
# The pure-Python twin is bounded too, but its lists grow up to capacity: the memory figures are the kernel's.
compiled_only = pytest.mark.skipif(NATIVE is None, reason="the compiled kernel is not built "
                                                          "(CRAWLER_CACHE_PURE_PYTHON or no compiler)")


def distinct(n: int, start: int = 0) -> list[int]:
    return [(i * GOLDEN) & MASK64 for i in range(start, start + n)]


def test_capacity_is_respected_after_ten_times_capacity():
    capacity = 1 << 10
    seen = ContentSeen(capacity)
    for fp in distinct(10 * capacity):
        assert not seen.check_and_add(fp)
    assert seen.size == capacity


@compiled_only
def test_memory_is_flat_after_ten_times_capacity():
    capacity = 1 << 14
    seen = ContentSeen(capacity)
    before = seen.memory_bytes()
    tracemalloc.start()
    try:
        traced = tracemalloc.get_traced_memory()[0]
        for fp in distinct(10 * capacity):
            seen.check_and_add(fp)
        grown = tracemalloc.get_traced_memory()[0] - traced
    finally:
        tracemalloc.stop()
    assert seen.size == capacity
    assert seen.memory_bytes() == before
    assert grown < 4096                                   # nothing allocated per insert
    assert before / capacity < 8.5                        # 8 bytes of key, a few bits of CLOCK-SETS state


@compiled_only
def test_the_memory_figure_is_what_is_allocated():
    tracemalloc.start()
    try:
        traced = tracemalloc.get_traced_memory()[0]
        seen = ContentSeen(1 << 16)
        allocated = tracemalloc.get_traced_memory()[0] - traced
    finally:
        tracemalloc.stop()
    assert abs(allocated - seen.memory_bytes()) < 1024


def test_a_duplicate_is_seen_and_counted():
    seen = ContentSeen(100)
    assert not seen.check_and_add(7)
    assert seen.check_and_add(7) and seen.check_and_add(7)
    assert not seen.check_and_add(0)                      # 0 is an ordinary fingerprint, not "empty"
    assert seen.check_and_add(0)
    assert (seen.size, seen.hits) == (2, 3)
    stats = seen.stats()
    assert stats["capacity"] == 100 and stats["misses"] == 2 and stats["policy"] == "clock-sets"


def test_a_body_that_comes_back_outlives_one_seen_once():
    """CLOCK marks a repeat: the same page under many URLs stays while single bodies are forgotten."""
    seen = ContentSeen(WAYS)                              # one set: the global CLOCK
    repeated, once = distinct(2, start=10**6)
    seen.check_and_add(repeated)
    seen.check_and_add(once)
    assert seen.check_and_add(repeated)                   # marked
    for fp in distinct(WAYS - 1):                         # fill the other ways, then one eviction
        seen.check_and_add(fp)
    assert seen.check_and_add(repeated)
    assert not seen.check_and_add(once)                   # forgotten: a redundant parse, nothing lost


def test_size_zero_turns_the_test_off():
    seen = ContentSeen(0)
    assert not seen.enabled
    assert not any(seen.check_and_add(fp) for fp in [1, 1, 2, 1])
    assert (seen.size, seen.capacity, seen.hits) == (0, 0, 0)
    assert seen.stats()["policy"] == "off"


def test_a_negative_size_is_refused():
    with pytest.raises(ValueError, match="content-seen capacity"):
        ContentSeen(-1)


@compiled_only
def test_the_default_comes_from_the_schema():
    default = Config().parse.content_seen_size
    assert default >= 1 << 20
    assert ContentSeen(default).memory_bytes() / default < 8.5

"""W-TinyLFU (Einziger, Friedman & Manes, ACM ToS 2017; the policy of Caffeine).

Why: in a long stream, how often a key was asked recently predicts its next
request better than recency alone, but keeping exact counts of every key
costs more memory than the cache. TinyLFU keeps approximate counts in a
count-min sketch of a few bytes per entry and lets a key into the main
cache only if it looks more popular than the key it would push out; a small
LRU window in front lets bursts of new keys hit before they face that test.

The structure, for capacity C:
- window: an LRU list of ceil(C / 100) entries (1% of the capacity, at
  least 1). Every miss inserts the key at the window's most recent end.
- main: a segmented LRU of the other C - window entries: protected =
  floor(80% of main), probation = the rest. A hit in probation moves the key
  to protected's most recent end; if protected is then over its size, its
  least recent key is moved back to probation's most recent end. A hit in
  the window or in protected moves the key to its list's most recent end.
- admission: when the window is over its size, its least recent key, the
  candidate, leaves the window. If main has room the candidate enters
  probation. Otherwise it competes with probation's least recent key, the
  victim: the candidate replaces the victim if the sketch estimates it
  strictly more frequent, else the candidate is evicted. (With C = 1 main
  has size 0 and the candidate is always evicted: the cache is LRU of one.)
- the sketch: a count-min sketch of 4 rows of `width` 4-bit counters
  (saturating at 15, stored one per byte), width = C rounded up to a power of
  two. Every request increments the key's counter in each row; the estimate
  is the smallest of the four. After 10 * C increments ("the sample"), every
  counter and the increment count are halved, so old popularity fades.
  Row i's counter of a key is at the top log2(width) bits of
  fmix64(fp) * ROW_MULTIPLIERS[i] mod 2**64: a fixed mixer, so a run is
  reproducible and the same with every Python.
- not included: the doorkeeper (a Bloom filter in front of the sketch that
  saves memory on one-time keys; Caffeine omits it too) and Caffeine's
  random admission of warm candidates (a defence against hash flooding,
  which fingerprints of URLs chosen by crawled pages do not need here);
  the window and main sizes are fixed, not Caffeine's hill-climbing ones.

Belady's MIN bounds it: every miss puts the key in the window, so the key
is always resident after its request, and the admission test only chooses
which of two resident keys to evict (the candidate or the victim). The
original TinyLFU without a window can refuse the requested key itself, and
MIN (which always inserts) is not a floor for that kind of policy.

Layout (pure Python): three OrderedDicts of fingerprints (least recent
first) and a bytearray of 4 * width counters.
"""

from __future__ import annotations

import sys
from collections import OrderedDict

import numpy as np

from crawler.cache._mix import _FMIX_C1, _FMIX_C2, MASK64, PyKernel
from crawler.cache.base import Cache

WINDOW_PERCENT = 1       # of the capacity, rounded up
PROTECTED_PERCENT = 80   # of the main region, rounded down; probation holds the rest
SKETCH_ROWS = 4
COUNTER_MAX = 15         # 4-bit counters
SAMPLE_PER_ENTRY = 10    # the counters are halved after 10 * capacity increments
ROW_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93)
_M0, _M1, _M2, _M3 = ROW_MULTIPLIERS


def region_sizes(capacity: int) -> tuple[int, int, int]:
    """(window, probation, protected) entries for a capacity."""
    window = -(-capacity * WINDOW_PERCENT // 100)
    main = capacity - window
    protected = main * PROTECTED_PERCENT // 100
    return window, main - protected, protected


class CountMinSketch:
    """4 rows of saturating 4-bit counters, halved after every `sample` increments."""

    __slots__ = ("_table", "_width", "_shift", "_sample", "_additions")

    def __init__(self, capacity: int) -> None:
        self._width = 1 << (capacity - 1).bit_length()  # capacity rounded up to a power of two
        self._shift = 64 - (self._width.bit_length() - 1)
        self._table = bytearray(SKETCH_ROWS * self._width)  # row after row
        self._sample = SAMPLE_PER_ENTRY * capacity
        self._additions = 0

    def _slots(self, fp: int) -> tuple[int, int, int, int]:
        """fp's counter in each row, as indexes into the table (hot path: _mix.fmix64 inlined, rows unrolled)."""
        fp ^= fp >> 33
        fp = (fp * _FMIX_C1) & MASK64
        fp ^= fp >> 33
        fp = (fp * _FMIX_C2) & MASK64
        h = fp ^ (fp >> 33)
        shift, width = self._shift, self._width
        return (((h * _M0) & MASK64) >> shift, width + (((h * _M1) & MASK64) >> shift),
                2 * width + (((h * _M2) & MASK64) >> shift), 3 * width + (((h * _M3) & MASK64) >> shift))

    def increment(self, fp: int) -> None:
        """Counts one request of fp; halves everything when the sample is complete."""
        table = self._table
        for i in self._slots(fp):
            if table[i] < COUNTER_MAX:
                table[i] += 1
        self._additions += 1
        if self._additions >= self._sample:
            counters = np.frombuffer(table, dtype=np.uint8)
            counters >>= 1
            self._additions //= 2

    def estimate(self, fp: int) -> int:
        """The smallest of fp's four counters."""
        table = self._table
        a, b, c, d = self._slots(fp)
        return min(table[a], table[b], table[c], table[d])

    width = property(lambda self: self._width, doc="Counters per row.")
    additions = property(lambda self: self._additions, doc="Increments since the last halving (halved with it).")
    nbytes = property(lambda self: len(self._table), doc="Bytes of the counters.")


class WTinyLfuCache(PyKernel, Cache):
    """W-TinyLFU replacement; see the module docstring."""

    __slots__ = ("_window", "_probation", "_protected", "_sketch", "_window_size", "_main_size",
                 "_protected_size", "_capacity", "_hits", "_misses")
    name = "wtinylfu"

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._hits = self._misses = 0
        self._window_size, probation, self._protected_size = region_sizes(capacity)
        self._main_size = probation + self._protected_size
        self._window: OrderedDict[int, None] = OrderedDict()  # first = least recent
        self._probation: OrderedDict[int, None] = OrderedDict()
        self._protected: OrderedDict[int, None] = OrderedDict()
        self._sketch = CountMinSketch(capacity)

    def _access(self, fp: int) -> bool:
        self._sketch.increment(fp)
        window, probation, protected = self._window, self._probation, self._protected
        if fp in window:
            window.move_to_end(fp)
        elif fp in protected:
            protected.move_to_end(fp)
        elif fp in probation:
            del probation[fp]
            protected[fp] = None
            if len(protected) > self._protected_size:
                probation[protected.popitem(last=False)[0]] = None
        else:
            self._misses += 1
            window[fp] = None
            if len(window) > self._window_size:
                self._admit(window.popitem(last=False)[0])
            return False
        self._hits += 1
        return True

    def _admit(self, candidate: int) -> None:
        """The window's victim enters probation if main has room or it beats probation's victim."""
        probation = self._probation
        if len(probation) + len(self._protected) < self._main_size:
            probation[candidate] = None
        elif probation:
            victim = next(iter(probation))
            if self._sketch.estimate(candidate) > self._sketch.estimate(victim):
                del probation[victim]
                probation[candidate] = None

    def keys(self) -> list[int]:
        """Resident fingerprints: window, probation, protected, each least recent first."""
        return [*self._window, *self._probation, *self._protected]

    def regions(self) -> tuple[list[int], list[int], list[int]]:
        """(window, probation, protected), each least recent first."""
        return list(self._window), list(self._probation), list(self._protected)

    @property
    def sketch(self) -> CountMinSketch:
        """The admission filter's frequency sketch."""
        return self._sketch

    @property
    def size(self) -> int:
        """Entries held now."""
        return len(self._window) + len(self._probation) + len(self._protected)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the three lists, their fingerprint int objects and the sketch's counters."""
        lists = (self._window, self._probation, self._protected)
        return (sum(map(sys.getsizeof, lists)) + sum(sys.getsizeof(fp) for lst in lists for fp in lst)
                + sys.getsizeof(self._sketch._table))

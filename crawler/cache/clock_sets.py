"""CLOCK-SETS: the paper's CLOCK run in sets of 32 entries chosen by hash (policy `clock-sets`).

The algorithm (Broder, Najork & Wiener, after the OS page-replacement CLOCK):
every entry has a mark bit; a hit sets it. While the cache is not full a
miss simply inserts. A miss on a full cache moves the hand round the ring,
clearing marks, to the first unmarked entry, evicts it, puts the new
fingerprint in its place and advances the hand one past it. A new entry
starts UNMARKED: it has to be hit once to survive the next pass of the hand.
This is fixed (CLOCK_INITIAL_MARK in crawler/_native/cache_clock_sets.c, _INITIAL_MARK here)
and pinned by tests. The exact single-ring CLOCK is the policy `clock` (clock.py).

Sets. The capacity is split into nsets = ceil(capacity / 32) sets of 32 (or
31) entries, and a fingerprint belongs to set fastrange(fmix64(fp), nsets);
each set is one CLOCK ring exactly as above ("full" meaning the set is full).
This is set-associative CLOCK, as CPU caches do it. With capacity <= 32 there
is one set, the global CLOCK itself. With more, eviction is decided among
the 32 entries of the request's set instead of the whole cache; on
crawler-like streams that costs about 0.1 percentage point of miss rate
against the single ring of `clock` (docs/caches.md), and it is what makes 8
bytes per entry possible: the set of a key is its hash, so no index from key
to ring position is needed (`clock` keeps one: 16 bytes per entry at 2**18),
and there is nothing to shift or tombstone.

Layout: keys uint64[capacity] (set after set, each set in ring order; the
occupied ways of a set are 0 .. fill-1, so no value means "empty" and the
real fingerprint 0 is an ordinary key), and per set a uint32 of mark bits,
a uint8 hand and a uint8 fill count: 8 + 6/32 = 8.19 bytes per entry. A
lookup scans at most 32 keys, four adjacent cache lines.

`PyClockSetsKernel` is the pure-Python twin of the compiled `ClockSetsKernel`
(crawler/_native/cache_clock_sets.c): the same sets, rings and hands, so the same results.
"""

from __future__ import annotations

import sys

from crawler._native import NATIVE
from crawler.cache._mix import PyKernel, fastrange, fmix64
from crawler.cache.base import Cache

# Entries per set (the associativity); at most 32, the bits of a set's mark word.
WAYS = 32
MAX_WAYS = 32
_INITIAL_MARK = 0  # a new entry starts unmarked (same constant in cache_clock_sets.c)


class PyClockSetsKernel(PyKernel):
    """Pure-Python set-associative CLOCK kernel, set for set the same as the compiled ClockSetsKernel."""

    __slots__ = ("_keys", "_marks", "_hands", "_nsets", "_base", "_extra", "_ways",
                 "_capacity", "_size", "_hits", "_misses")

    def __init__(self, capacity: int, ways: int) -> None:
        if not (1 <= capacity < (1 << 40) and 1 <= ways <= MAX_WAYS):
            raise ValueError("ClockSetsKernel needs 1 <= capacity < 2**40 and 1 <= ways <= 32")
        self._nsets = -(-capacity // ways)
        self._base, self._extra = divmod(capacity, self._nsets)
        self._keys: list[list[int]] = [[] for _ in range(self._nsets)]  # per set, ring order
        self._marks: list[list[int]] = [[] for _ in range(self._nsets)]
        self._hands = [0] * self._nsets
        self._ways = ways
        self._capacity = capacity
        self._size = self._hits = self._misses = 0

    def _access(self, fp: int) -> bool:
        b = fastrange(fmix64(fp), self._nsets)
        keys, marks = self._keys[b], self._marks[b]
        for i, key in enumerate(keys):
            if key == fp:
                marks[i] = 1
                self._hits += 1
                return True
        self._misses += 1
        ways = self._base + (b < self._extra)
        if len(keys) < ways:  # the set is not full: a miss simply inserts
            keys.append(fp)
            marks.append(_INITIAL_MARK)
            self._size += 1
            return False
        hand = self._hands[b]
        while marks[hand]:  # move the hand, clearing marks, to the first unmarked way
            marks[hand] = 0
            hand = hand + 1 if hand + 1 < ways else 0
        keys[hand] = fp
        marks[hand] = _INITIAL_MARK
        self._hands[b] = hand + 1 if hand + 1 < ways else 0
        return False

    def keys(self) -> list[int]:
        """Resident fingerprints, set by set in ring order."""
        return [key for keys in self._keys for key in keys]

    def set_state(self, b: int) -> tuple[list[int], list[bool], int]:
        """(keys in ring order, marks, hand) of set b."""
        if not 0 <= b < self._nsets:
            raise IndexError("no such set")
        return list(self._keys[b]), [bool(m) for m in self._marks[b]], self._hands[b]

    size = property(lambda self: self._size, doc="Entries held now.")
    nsets = property(lambda self: self._nsets, doc="Number of sets (CLOCK rings).")
    ways = property(lambda self: self._ways, doc="Most entries per set.")

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the per-set lists and the int objects in them."""
        total = sys.getsizeof(self._keys) + sys.getsizeof(self._marks) + sys.getsizeof(self._hands)
        for keys, marks in zip(self._keys, self._marks):
            total += sys.getsizeof(keys) + sys.getsizeof(marks) + sum(map(sys.getsizeof, keys))
        return total


_Kernel = NATIVE.ClockSetsKernel if NATIVE is not None else PyClockSetsKernel


class ClockSetsCache(_Kernel, Cache):  # type: ignore[misc, valid-type]
    """Set-associative CLOCK; see the module docstring."""

    __slots__ = ()
    name = "clock-sets"
    compiled = _Kernel is not PyClockSetsKernel

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, WAYS)

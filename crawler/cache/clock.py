"""CLOCK: the paper's algorithm exactly, one ring over the whole capacity (policy `clock`).

The algorithm (Broder, Najork & Wiener, after the OS page-replacement CLOCK):
the cache is a ring of `capacity` slots, each holding a key and a mark bit,
and a hand. A hit sets the key's mark. While the cache is not full a miss
takes the next free slot (slots fill from 0 up; the hand stays at 0). A miss
on a full cache moves the hand round the ring, clearing marks, to the first
unmarked slot; that slot takes the new key and the hand moves one past it,
so the new key is the last one the hand reaches again. A new entry starts
UNMARKED: it has to be hit once to survive the next pass of the hand. Both
choices are fixed (RING_INITIAL_MARK in crawler/_native/cache_clock.c,
_INITIAL_MARK here) and pinned by tests against a plain list ring.

Layout (compiled, crawler/_native/cache_clock.c): keys uint64[capacity] in
ring order, marks one bit per slot, and a position index from fingerprint
to slot (open addressing, uint32, load <= 1/2, backward-shift deletion, as
LRU and RANDOM use): 16-24 bytes per entry. The set-associative variant,
`clock-sets` (clock_sets.py), needs no index and takes 8.2; docs/caches.md
compares the two.

`PyClockKernel` is the pure-Python twin of the compiled `ClockKernel`: the
same slots, marks and hand, so the same results.
"""

from __future__ import annotations

import sys

from crawler._native import NATIVE
from crawler.cache._mix import PyKernel
from crawler.cache.base import Cache

_INITIAL_MARK = 0  # a new entry starts unmarked (same constant in cache_clock.c)


class PyClockKernel(PyKernel):
    """Pure-Python single-ring CLOCK kernel, slot for slot the same as the compiled ClockKernel."""

    __slots__ = ("_keys", "_marks", "_where", "_hand", "_capacity", "_hits", "_misses")

    def __init__(self, capacity: int) -> None:
        if not 1 <= capacity < (1 << 31):
            raise ValueError("ClockKernel needs 1 <= capacity < 2**31")
        self._keys: list[int] = []          # ring order
        self._marks = bytearray(capacity)
        self._where: dict[int, int] = {}    # fingerprint -> slot
        self._hand = 0
        self._capacity = capacity
        self._hits = self._misses = 0

    def _access(self, fp: int) -> bool:
        where = self._where
        slot = where.get(fp)
        if slot is not None:
            self._marks[slot] = 1
            self._hits += 1
            return True
        self._misses += 1
        keys, marks = self._keys, self._marks
        if len(keys) < self._capacity:  # not full: a miss takes the next free slot
            where[fp] = len(keys)
            marks[len(keys)] = _INITIAL_MARK
            keys.append(fp)
            return False
        hand, last = self._hand, self._capacity - 1
        while marks[hand]:  # move the hand, clearing marks, to the first unmarked slot
            marks[hand] = 0
            hand = hand + 1 if hand < last else 0
        del where[keys[hand]]
        keys[hand] = fp
        marks[hand] = _INITIAL_MARK
        where[fp] = hand
        self._hand = hand + 1 if hand < last else 0
        return False

    def keys(self) -> list[int]:
        """Resident fingerprints in slot order."""
        return list(self._keys)

    def ring_state(self) -> tuple[list[int], list[bool], int]:
        """(keys in slot order, marks, hand)."""
        return list(self._keys), [bool(m) for m in self._marks[:len(self._keys)]], self._hand

    size = property(lambda self: len(self._keys), doc="Entries held now.")

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the key list, the marks, the position dict and their int objects."""
        return (sys.getsizeof(self._keys) + sys.getsizeof(self._marks) + sys.getsizeof(self._where)
                + sum(map(sys.getsizeof, self._keys)) + sum(map(sys.getsizeof, self._where.values())))


_Kernel = NATIVE.ClockKernel if NATIVE is not None else PyClockKernel


class ClockCache(_Kernel, Cache):  # type: ignore[misc, valid-type]
    """The paper's CLOCK on one ring; see the module docstring."""

    __slots__ = ()
    name = "clock"
    compiled = _Kernel is not PyClockKernel

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)

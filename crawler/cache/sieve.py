"""SIEVE (Zhang et al., NSDI '24): a FIFO queue with a visited bit and a moving hand.

The algorithm: new entries go to the head of one FIFO queue, unvisited. A
hit only sets the entry's visited bit; nothing moves, which is why SIEVE is
as cheap as FIFO on hits. To evict, the hand (starting at the tail, the
oldest entry, when it has no position yet) walks toward the head, clearing
visited bits, to the first unvisited entry; that entry is evicted and the
hand stays at the entry just newer than it (or, when the victim was the
head, has no position and restarts from the tail next time). Unlike CLOCK,
survivors are not moved to the head, so new entries, which sit between the
head and the hand, are evicted quickly unless hit: "lazy promotion, quick
demotion" is what makes SIEVE beat LRU on web traces.

Every miss inserts, so Belady's MIN of the same capacity bounds its misses.

Compiled layout (SieveKernel, crawler/_native/cache_sieve.c): a slot per
entry holding its key (uint64), its two queue links (int32) and its visited
byte, in parallel arrays, and a position index from fingerprint to slot
(open addressing, uint32, load <= 1/2, as CLOCK and LRU use): 25-33 bytes
per entry. The evicted entry's slot is reused by the new key, so the arrays
never grow past `capacity`.

`PySieveKernel` is the pure-Python twin and the reference: the same slots,
links and hand in lists and a dict, so the same results request for request
(tests compare the two).
"""

from __future__ import annotations

import sys

from crawler._native import NATIVE
from crawler.cache._mix import PyKernel
from crawler.cache.base import Cache

_NONE = -1  # no slot: the end of the queue, or a hand with no position
_SMALL_INT_MAX = 256  # CPython shares the int objects up to this value: they cost no memory per entry


class PySieveKernel(PyKernel):
    """Pure-Python SIEVE kernel, request for request the same as the compiled SieveKernel."""

    __slots__ = ("_where", "_key", "_newer", "_older", "_visited", "_head", "_tail", "_hand",
                 "_capacity", "_hits", "_misses")

    def __init__(self, capacity: int) -> None:
        if not 1 <= capacity < (1 << 31):
            raise ValueError("SieveKernel needs 1 <= capacity < 2**31")
        self._capacity = capacity
        self._hits = self._misses = 0
        self._where: dict[int, int] = {}  # fingerprint -> slot
        self._key: list[int] = []         # slot -> fingerprint
        self._newer: list[int] = []       # slot -> next slot toward the head, or _NONE
        self._older: list[int] = []       # slot -> next slot toward the tail, or _NONE
        self._visited = bytearray(capacity)
        self._head = self._tail = self._hand = _NONE

    def _access(self, fp: int) -> bool:
        slot = self._where.get(fp)
        if slot is not None:
            self._visited[slot] = 1
            self._hits += 1
            return True
        self._misses += 1
        if len(self._where) < self._capacity:
            slot = len(self._key)
            self._key.append(fp)
            self._newer.append(_NONE)
            self._older.append(_NONE)
        else:
            slot = self._evict()
            self._key[slot] = fp
        self._where[fp] = slot
        self._visited[slot] = 0
        self._push_head(slot)
        return False

    def _evict(self) -> int:
        """Moves the hand to the first unvisited entry, unlinks it and returns its slot."""
        visited, newer = self._visited, self._newer
        slot = self._hand if self._hand != _NONE else self._tail
        while visited[slot]:
            visited[slot] = 0
            slot = newer[slot]
            if slot == _NONE:
                slot = self._tail
        self._hand = newer[slot]
        self._unlink(slot)
        del self._where[self._key[slot]]
        return slot

    def _unlink(self, slot: int) -> None:
        newer, older = self._newer[slot], self._older[slot]
        if newer == _NONE:
            self._head = older
        else:
            self._older[newer] = older
        if older == _NONE:
            self._tail = newer
        else:
            self._newer[older] = newer

    def _push_head(self, slot: int) -> None:
        self._older[slot] = self._head
        self._newer[slot] = _NONE
        if self._head == _NONE:
            self._tail = slot
        else:
            self._newer[self._head] = slot
        self._head = slot

    def keys(self) -> list[int]:
        """Resident fingerprints, tail (oldest) to head (newest)."""
        out, slot = [], self._tail
        while slot != _NONE:
            out.append(self._key[slot])
            slot = self._newer[slot]
        return out

    def visited(self) -> list[bool]:
        """The visited bits in the order of keys()."""
        return [bool(self._visited[self._where[fp]]) for fp in self.keys()]

    @property
    def size(self) -> int:
        """Entries held now."""
        return len(self._where)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the dict, the slot lists, the visited bits, the keys and the slot numbers.

        The links hold the same int objects as the dict's values, so those are counted once."""
        lists = (self._key, self._newer, self._older)
        total = sys.getsizeof(self._where) + sys.getsizeof(self._visited) + sum(map(sys.getsizeof, lists))
        return (total + sum(map(sys.getsizeof, self._key))
                + sum(sys.getsizeof(v) for v in self._where.values() if v > _SMALL_INT_MAX))


_Kernel = NATIVE.SieveKernel if NATIVE is not None and hasattr(NATIVE, "SieveKernel") else PySieveKernel


class SieveCache(_Kernel, Cache):  # type: ignore[misc, valid-type]
    """SIEVE replacement; see the module docstring."""

    __slots__ = ()
    name = "sieve"
    compiled = _Kernel is not PySieveKernel

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)

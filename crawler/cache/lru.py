"""LRU: evict the entry used least recently (exact, not approximated).

Compiled layout (LruKernel, crawler/_native/cache_lru.c): `capacity` 16-byte entries (the
uint64 key and uint32 prev/next links of a circular doubly linked list:
head = most recent, its predecessor = least recent; one record so a hit
touches one cache line for the entry) and a position index (open addressing,
load <= 1/2, uint32 positions, backward-shift deletion): 24-32 bytes per
entry. On a miss in a full cache the least recent entry takes the new key,
and because the list is circular, making the tail the head is one move of
the head pointer.

`PyLruKernel` is the pure-Python twin on an OrderedDict; LRU is fully
determined by the request sequence, so both give identical hits.
"""

from __future__ import annotations

import sys
from collections import OrderedDict

from crawler._native import NATIVE
from crawler.cache._mix import PyKernel
from crawler.cache.base import Cache


class PyLruKernel(PyKernel):
    """Pure-Python LRU kernel on an OrderedDict (least recent first)."""

    __slots__ = ("_entries", "_capacity", "_hits", "_misses")

    def __init__(self, capacity: int) -> None:
        if not 1 <= capacity < (1 << 31):
            raise ValueError("LruKernel needs 1 <= capacity < 2**31")
        self._entries: OrderedDict[int, None] = OrderedDict()
        self._capacity = capacity
        self._hits = self._misses = 0

    def _access(self, fp: int) -> bool:
        entries = self._entries
        if fp in entries:
            entries.move_to_end(fp)
            self._hits += 1
            return True
        self._misses += 1
        if len(entries) >= self._capacity:
            entries.popitem(last=False)
        entries[fp] = None
        return False

    def keys(self) -> list[int]:
        """Resident fingerprints, least recently used first."""
        return list(self._entries)

    size = property(lambda self: len(self._entries), doc="Entries held now.")

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the OrderedDict and its int keys."""
        return sys.getsizeof(self._entries) + sum(map(sys.getsizeof, self._entries))


_Kernel = NATIVE.LruKernel if NATIVE is not None else PyLruKernel


class LruCache(_Kernel, Cache):  # type: ignore[misc, valid-type]
    """Exact least-recently-used replacement."""

    __slots__ = ()
    name = "lru"
    compiled = _Kernel is not PyLruKernel

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)

"""The hash-set kernel behind INFINITE (inserts every miss) and STATIC (frozen).

Compiled layout (SetKernel, crawler/_native/cache_set.c): open addressing with linear probing,
a power-of-two table of uint64 at load <= 1/2 (16-32 bytes per entry), slot
value 0 meaning empty and the real fingerprint 0 kept in a flag; it doubles
when half full. `PySetKernel` is the pure-Python twin on a built-in set.
"""

from __future__ import annotations

import sys

import numpy as np

from crawler._native import NATIVE
from crawler.cache._mix import PyKernel, as_fingerprint_array


class PySetKernel(PyKernel):
    """Pure-Python set kernel: `insert` says whether a miss adds the fingerprint."""

    __slots__ = ("_set", "_insert", "_capacity", "_hits", "_misses")

    def __init__(self, capacity: int, insert: bool) -> None:
        self._set: set[int] = set()
        self._insert = bool(insert)
        self._capacity = capacity
        self._hits = self._misses = 0

    def _access(self, fp: int) -> bool:
        if fp in self._set:
            self._hits += 1
            return True
        self._misses += 1
        if self._insert:
            self._set.add(fp)
        return False

    def add_many(self, fps: np.ndarray) -> None:
        """Add fingerprints without counting them (the static preload)."""
        self._set.update(as_fingerprint_array(fps).tolist())

    def keys(self) -> list[int]:
        """Resident fingerprints (in no particular order)."""
        return list(self._set)

    size = property(lambda self: len(self._set), doc="Fingerprints held now.")

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the set and its int objects."""
        return sys.getsizeof(self._set) + sum(map(sys.getsizeof, self._set))


SetKernel = NATIVE.SetKernel if NATIVE is not None else PySetKernel

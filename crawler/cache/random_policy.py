"""RANDOM: on a miss in a full cache, evict an entry chosen uniformly at random.

Reproducible: the victim's position is fastrange(splitmix64(), capacity) over
a key array in insertion-slot order, and the new key takes the victim's
position. The generator is seeded by the `seed` option (default 0), so a
seed gives the same hits with the compiled kernel and the pure-Python one.

Compiled layout (RandomKernel, crawler/_native/cache_random.c): the key array (8 bytes per entry)
and a position index (open addressing, load <= 1/2, uint32), 16-24 bytes per
entry. (The file is not called random.py so that it cannot be mistaken for
the standard library module.)
"""

from __future__ import annotations

import operator
import sys

from crawler._native import NATIVE
from crawler.cache._mix import MASK64, PyKernel, SplitMix64, fastrange
from crawler.cache.base import Cache

DEFAULT_SEED = 0


class PyRandomKernel(PyKernel):
    """Pure-Python RANDOM kernel, victim for victim the same as the compiled RandomKernel."""

    __slots__ = ("_keys", "_where", "_rng", "_capacity", "_hits", "_misses")

    def __init__(self, capacity: int, seed: int = DEFAULT_SEED) -> None:
        if not 1 <= capacity < (1 << 31):
            raise ValueError("RandomKernel needs 1 <= capacity < 2**31")
        seed = operator.index(seed)
        if not 0 <= seed <= MASK64:
            raise OverflowError("seed must be in [0, 2**64)")
        self._keys: list[int] = []
        self._where: dict[int, int] = {}
        self._rng = SplitMix64(seed)
        self._capacity = capacity
        self._hits = self._misses = 0

    def _access(self, fp: int) -> bool:
        where = self._where
        if fp in where:
            self._hits += 1
            return True
        self._misses += 1
        keys = self._keys
        if len(keys) < self._capacity:
            where[fp] = len(keys)
            keys.append(fp)
            return False
        p = fastrange(self._rng.next(), self._capacity)
        del where[keys[p]]
        keys[p] = fp
        where[fp] = p
        return False

    def keys(self) -> list[int]:
        """Resident fingerprints by position."""
        return list(self._keys)

    size = property(lambda self: len(self._keys), doc="Entries held now.")

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the key list, the position dict and their int objects."""
        return (sys.getsizeof(self._keys) + sys.getsizeof(self._where)
                + sum(map(sys.getsizeof, self._keys)) + sum(map(sys.getsizeof, self._where.values())))


_Kernel = NATIVE.RandomKernel if NATIVE is not None else PyRandomKernel


class RandomCache(_Kernel, Cache):  # type: ignore[misc, valid-type]
    """Random replacement, reproducible per seed."""

    __slots__ = ()
    name = "random"
    options = ("seed",)
    compiled = _Kernel is not PyRandomKernel

    def __init__(self, capacity: int, seed: int = DEFAULT_SEED) -> None:
        seed = operator.index(seed)
        if not 0 <= seed <= MASK64:
            raise ValueError(f"random cache: seed must be an integer in [0, 2**64), got {seed}")
        super().__init__(capacity, seed)

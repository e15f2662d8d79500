"""2Q (Johnson & Shasha, VLDB '94), the full version: A1in, A1out and Am.

Why: a key asked once should not push out keys asked often, as it does in
LRU. 2Q admits a new key to a small FIFO, A1in; when A1in overflows, its
oldest key leaves the cache but its fingerprint is remembered in a second
FIFO, A1out, which holds no data. Only a key asked again while remembered
there is taken into the main LRU list, Am. A hit inside A1in does nothing
(a burst of requests to a new key is one "correlated reference", not
evidence of popularity).

The algorithm, as the paper's pseudocode of the full version:
- x in Am: a hit; move x to Am's head (most recent).
- x in A1in: a hit; nothing moves.
- x in A1out: a miss; reclaim a slot, put x at Am's head.
- otherwise: a miss; reclaim a slot, put x at A1in's head.
- reclaim: if A1in and Am hold fewer than `capacity` keys, use a free slot;
  else if |A1in| > Kin, page out A1in's tail to A1out's head (and drop
  A1out's tail if |A1out| > Kout); else page out Am's tail (not remembered:
  it has not been used for a while).

Sizes, as the paper recommends: Kin = 25% and Kout = 50% of the capacity,
rounded down: Kin = floor(C / 4), Kout = floor(C / 2). So with C = 1
(Kin = Kout = 0) every miss pages A1in's one key out and A1out remembers
nothing: the policy is FIFO of one entry; with C = 2, Kin = 0 and Kout = 1.

Where the pseudocode is silent: a key taken from A1out into Am is removed
from A1out first (A1out remembers keys that are not resident), before the
slot is reclaimed.

Every miss inserts, so Belady's MIN of the same capacity bounds its misses.

Layout (pure Python): three OrderedDicts of fingerprints, oldest first. The
module is called twoq because a Python module name cannot start with a digit;
the policy's name in config is `2q`.
"""

from __future__ import annotations

import sys
from collections import OrderedDict

from crawler.cache._mix import PyKernel
from crawler.cache.base import Cache

KIN_PERCENT = 25   # A1in's size, of the capacity, rounded down
KOUT_PERCENT = 50  # A1out's size (fingerprints), of the capacity, rounded down


def queue_sizes(capacity: int) -> tuple[int, int]:
    """(Kin, Kout) for a capacity."""
    return capacity * KIN_PERCENT // 100, capacity * KOUT_PERCENT // 100


class TwoQCache(PyKernel, Cache):
    """2Q replacement (full version); see the module docstring."""

    __slots__ = ("_a1in", "_a1out", "_am", "_kin", "_kout", "_capacity", "_hits", "_misses")
    name = "2q"

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._hits = self._misses = 0
        self._kin, self._kout = queue_sizes(capacity)
        self._a1in: OrderedDict[int, None] = OrderedDict()   # first = tail (oldest)
        self._a1out: OrderedDict[int, None] = OrderedDict()  # fingerprints only
        self._am: OrderedDict[int, None] = OrderedDict()     # first = least recently used

    def _access(self, fp: int) -> bool:
        am = self._am
        if fp in am:
            am.move_to_end(fp)
            self._hits += 1
            return True
        if fp in self._a1in:
            self._hits += 1
            return True
        self._misses += 1
        if fp in self._a1out:
            del self._a1out[fp]
            self._reclaim()
            am[fp] = None
        else:
            self._reclaim()
            self._a1in[fp] = None
        return False

    def _reclaim(self) -> None:
        a1in = self._a1in
        if len(a1in) + len(self._am) < self._capacity:
            return
        if len(a1in) > self._kin:
            self._a1out[a1in.popitem(last=False)[0]] = None
            if len(self._a1out) > self._kout:
                self._a1out.popitem(last=False)
        else:
            self._am.popitem(last=False)

    def keys(self) -> list[int]:
        """Resident fingerprints: A1in then Am, each oldest first."""
        return [*self._a1in, *self._am]

    def queues(self) -> tuple[list[int], list[int], list[int]]:
        """(A1in, A1out, Am), each oldest first."""
        return list(self._a1in), list(self._a1out), list(self._am)

    @property
    def size(self) -> int:
        """Entries held now (A1in and Am; A1out holds no data)."""
        return len(self._a1in) + len(self._am)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the three queues and their fingerprint int objects."""
        queues = (self._a1in, self._a1out, self._am)
        return sum(map(sys.getsizeof, queues)) + sum(sys.getsizeof(fp) for q in queues for fp in q)

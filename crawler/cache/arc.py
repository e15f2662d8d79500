"""ARC (Megiddo & Modha, FAST '03): adaptive replacement between recency and frequency.

Why: LRU is fooled by scans and one-time keys, LFU by keys that were popular
once. ARC keeps two LRU lists of resident keys, T1 (seen once recently) and
T2 (seen at least twice), and two ghost lists of fingerprints they evicted,
B1 and B2. A miss that hits a ghost list says which side was cut too short,
and moves the target size p of T1 accordingly, so the split adapts to the
stream with no tuning.

The algorithm is the paper's Figure 4, exactly (c = capacity, p starts at 0):
- x in T1 or T2: a hit; move x to the MRU end of T2.
- x in B1: p = min(c, p + max(|B2| / |B1|, 1)); REPLACE(x, p); move x to T2's MRU.
- x in B2: p = max(0, p - max(|B1| / |B2|, 1)); REPLACE(x, p); move x to T2's MRU.
- otherwise: if |T1| + |B1| == c: if |T1| < c, drop B1's LRU and REPLACE(x, p),
  else drop T1's LRU (it leaves the cache with no ghost); else if
  |T1| + |T2| + |B1| + |B2| >= c: drop B2's LRU if that total is 2c, then
  REPLACE(x, p). Put x at the MRU end of T1.
- REPLACE(x, p): if T1 is not empty and (|T1| > p, or x in B2 and |T1| == p),
  move T1's LRU to B1's MRU end, else move T2's LRU to B2's MRU end.
p is a real number, as in the paper (a float here, updated by the same
expressions in the model the tests compare with).

Every miss inserts, so Belady's MIN of the same capacity bounds its misses.
Well-defined from capacity 1: the paper's invariants (|T1| + |B1| <= c,
|T1| + |T2| + |B1| + |B2| <= 2c, and T1, T2 fill the cache before a ghost exists)
keep REPLACE from ever finding its list empty.

Layout (pure Python): four OrderedDicts of fingerprints, LRU first. The
ghost lists hold fingerprints only, up to c of them in all.
"""

from __future__ import annotations

import sys
from collections import OrderedDict

from crawler.cache._mix import PyKernel
from crawler.cache.base import Cache


class ArcCache(PyKernel, Cache):
    """Adaptive Replacement Cache; see the module docstring."""

    __slots__ = ("_t1", "_t2", "_b1", "_b2", "_p", "_capacity", "_hits", "_misses")
    name = "arc"

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._hits = self._misses = 0
        self._p = 0.0  # target size of T1
        self._t1: OrderedDict[int, None] = OrderedDict()  # first = LRU
        self._t2: OrderedDict[int, None] = OrderedDict()
        self._b1: OrderedDict[int, None] = OrderedDict()
        self._b2: OrderedDict[int, None] = OrderedDict()

    def _access(self, fp: int) -> bool:
        t1, t2, b1, b2, c = self._t1, self._t2, self._b1, self._b2, self._capacity
        if fp in t2:  # case I
            t2.move_to_end(fp)
            self._hits += 1
            return True
        if fp in t1:  # case I
            del t1[fp]
            t2[fp] = None
            self._hits += 1
            return True
        self._misses += 1
        if fp in b1:  # case II
            self._p = min(float(c), self._p + max(len(b2) / len(b1), 1.0))
            self._replace(in_b2=False)
            del b1[fp]
            t2[fp] = None
        elif fp in b2:  # case III
            self._p = max(0.0, self._p - max(len(b1) / len(b2), 1.0))
            self._replace(in_b2=True)
            del b2[fp]
            t2[fp] = None
        else:  # case IV
            l1 = len(t1) + len(b1)
            if l1 == c:
                if len(t1) < c:
                    b1.popitem(last=False)
                    self._replace(in_b2=False)
                else:
                    t1.popitem(last=False)
            else:
                total = l1 + len(t2) + len(b2)
                if total >= c:
                    if total == 2 * c:
                        b2.popitem(last=False)
                    self._replace(in_b2=False)
            t1[fp] = None
        return False

    def _replace(self, in_b2: bool) -> None:
        t1 = self._t1
        if t1 and (len(t1) > self._p or (in_b2 and len(t1) == self._p)):
            self._b1[t1.popitem(last=False)[0]] = None
        else:
            self._b2[self._t2.popitem(last=False)[0]] = None

    def keys(self) -> list[int]:
        """Resident fingerprints: T1 then T2, each LRU first."""
        return [*self._t1, *self._t2]

    def lists(self) -> tuple[list[int], list[int], list[int], list[int], float]:
        """(T1, T2, B1, B2, p), each list LRU first."""
        return list(self._t1), list(self._t2), list(self._b1), list(self._b2), self._p

    @property
    def size(self) -> int:
        """Entries held now (T1 and T2; the ghost lists hold no data)."""
        return len(self._t1) + len(self._t2)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the four lists and their fingerprint int objects."""
        lists = (self._t1, self._t2, self._b1, self._b2)
        return sum(map(sys.getsizeof, lists)) + sum(sys.getsizeof(fp) for lst in lists for fp in lst)

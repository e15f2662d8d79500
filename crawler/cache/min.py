"""MIN (offline only): Belady's clairvoyant policy, the floor for any cache of its size.

On a miss in a full cache MIN evicts the entry whose next request lies
farthest in the future (or never comes); every miss inserts, as with the
other policies. It needs the future, so it is built with the whole request
sequence (`trace`) and must then be asked exactly that sequence, in order;
asking anything else raises ValueError.

All the work is done at construction: `next_use` finds, for every request,
when its fingerprint is asked next (one stable argsort), and `belady`
simulates the cache with a max-heap of next-request times (compiled in
crawler/_native/belady.c, pure Python in `belady_hits_py`; same hit sequence). A
resident entry is known by the time of its next request, so "is it cached?"
at time t is one flag, and stale heap values (times already passed) always
sit below live ones and are never popped.
"""

from __future__ import annotations

import heapq

import numpy as np

from crawler._native import NATIVE
from crawler.cache._mix import as_fingerprint, as_fingerprint_array
from crawler.cache.base import Cache


def next_use(trace: np.ndarray) -> np.ndarray:
    """For each request, the index of the next request of the same fingerprint, or len(trace)."""
    n = len(trace)
    order = np.argsort(trace, kind="stable")
    ordered = trace[order]
    same = ordered[1:] == ordered[:-1]
    result = np.full(n, n, dtype=np.int64)
    result[order[:-1][same]] = order[1:][same]
    return result


def belady_hits_py(next_uses: np.ndarray, capacity: int) -> np.ndarray:
    """MIN's hit sequence in pure Python (the twin of the compiled belady)."""
    n = len(next_uses)
    hits = np.zeros(n, dtype=bool)
    resident = bytearray(n)
    heap: list[int] = []  # negated next-request times: a max-heap
    live = 0
    heap_max = 2 * min(capacity, n) + 2
    for t, nu in enumerate(next_uses.tolist()):
        value = nu if nu < n else n + t  # "never again": distinct values beyond n
        if resident[t]:
            hits[t] = True
            resident[t] = 0
        else:
            if live == capacity:
                victim = -heapq.heappop(heap)
                if victim < n:
                    resident[victim] = 0
                live -= 1
            live += 1
        if nu < n:
            resident[nu] = 1
        if len(heap) >= heap_max:
            heap = [v for v in heap if -v > t]
            heapq.heapify(heap)
        heapq.heappush(heap, -value)
    return hits


def belady_hits(trace: np.ndarray, capacity: int) -> np.ndarray:
    """MIN's hit (True) or miss (False) for each request of the trace."""
    uses = next_use(as_fingerprint_array(trace))
    if NATIVE is None:
        return belady_hits_py(uses, capacity)
    out = np.zeros(len(uses), dtype=bool)
    NATIVE.belady(uses, capacity, out)
    return out


class MinCache(Cache):
    """Belady's MIN over a known trace; answers must be asked in trace order."""

    __slots__ = ("_trace", "_hit", "_t", "_capacity", "_hits", "_misses")
    name = "min"
    options = ("trace",)
    compiled = NATIVE is not None

    def __init__(self, capacity: int, trace: object = None) -> None:
        if trace is None:
            raise ValueError("min cache: option 'trace' (the whole request sequence) is required")
        self._trace = np.array(as_fingerprint_array(trace), copy=True)
        self._capacity = capacity
        self._hit = belady_hits(self._trace, capacity)
        self._t = self._hits = self._misses = 0

    def _mismatch(self, t: int, got: object) -> ValueError:
        if t >= len(self._trace):
            return ValueError(f"min cache: request {t} is past the end of the trace ({len(self._trace)} requests)")
        return ValueError(f"min cache: request {t} is {got}, the trace says {int(self._trace[t])}; "
                          "a min cache must be asked its trace in order")

    def check_and_add(self, fp: int) -> bool:
        """MIN's answer for the next request of the trace, which must be fp."""
        fp = as_fingerprint(fp)
        t = self._t
        if t >= len(self._trace) or int(self._trace[t]) != fp:
            raise self._mismatch(t, fp)
        self._t = t + 1
        if self._hit[t]:
            self._hits += 1
            return True
        self._misses += 1
        return False

    def check_and_add_many(self, fps: np.ndarray) -> np.ndarray:
        """MIN's answers for the next len(fps) requests of the trace, which must be fps."""
        arr = as_fingerprint_array(fps)
        t, m = self._t, len(arr)
        expected = self._trace[t:t + m]
        if len(expected) != m or not np.array_equal(expected, arr):
            differ = np.flatnonzero(expected != arr[:len(expected)])
            bad = int(differ[0]) if len(differ) else len(expected)
            raise self._mismatch(t + bad, int(arr[bad]))
        result = self._hit[t:t + m].copy()
        hits = int(result.sum())
        self._hits += hits
        self._misses += m - hits
        self._t = t + m
        return result

    capacity = property(lambda self: self._capacity, doc="Most entries held.")
    hits = property(lambda self: self._hits, doc="Requests that found their fingerprint.")
    misses = property(lambda self: self._misses, doc="Requests that did not.")

    @property
    def size(self) -> int:
        """Entries held now: every miss inserts until the cache is full."""
        return min(self._capacity, self._misses)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the stored trace and the precomputed answers."""
        return self._trace.nbytes + self._hit.nbytes

"""S3-FIFO (Yang et al., SOSP '23): a small FIFO, a main FIFO and a ghost FIFO.

Why three queues: most keys in web-like streams are asked once ("one-hit
wonders"). S3-FIFO lets a new key prove itself in a small FIFO before it may
take room in the main one, and remembers the keys it threw out of the small
FIFO (their fingerprints only, in a ghost FIFO) so that a key that comes back
soon goes straight to the main FIFO.

The algorithm, as the paper's Algorithm 1:
- every resident key has a 2-bit frequency: a hit sets freq = min(freq+1, 3);
  a new key starts at 0;
- a miss evicts while the cache (small + main) is full, then inserts the key
  at the head of main if its fingerprint is in the ghost, else at the head
  of small;
- evict: if len(small) >= 10% of the capacity, evict from small, else from
  main;
- evict from small: take the tail; if freq > 1 move it to the head of main
  (and if main is then full, evict from main), otherwise put its fingerprint
  in the ghost, which ends this eviction; repeat until one key has left;
- evict from main: take the tail; if freq > 0 reinsert it at the head with
  freq - 1, otherwise it leaves the cache.

The threshold for small -> main is freq > 1, i.e. hit at least twice while in
small. That is what Algorithm 1 says (`if t.freq > 1`) and what the authors'
simulator runs by default (libCacheSim's move-to-main threshold 2). The
prose of the paper says "accessed at least once" (freq > 0), which is a
different policy; we follow the pseudocode and the artefact.

Sizes, for every capacity C >= 1: small = ceil(C / 10) (the smallest size
for which "len(small) >= 0.1 C" holds, so no other rounding is involved),
main = C - small = floor(0.9 C), ghost = main entries. "Main is full" means
len(main) >= main's size, the same sense as "the cache is full". With C = 1
the small FIFO takes the one entry and main and ghost have size 0: the
policy is FIFO (a key moved to main is evicted from it at once).

Where Algorithm 1 is silent: a ghost hit removes the fingerprint from the
ghost (a ghost entry stands for a key that is not resident; the authors'
simulator does the same), and a key keeps its frequency when it moves from
small to main (as Algorithm 1 does; the simulator's newer versions reset it).

Every miss inserts, so Belady's MIN of the same capacity bounds its misses.

Layout (pure Python): two deques of fingerprints for small and main, a dict
fingerprint -> frequency * 2 + (1 if in main) for the resident keys, and an
OrderedDict for the ghost (fingerprints only: it holds no data).
"""

from __future__ import annotations

import sys
from collections import OrderedDict, deque

from crawler.cache._mix import PyKernel
from crawler.cache.base import Cache

SMALL_PERCENT = 10   # of the capacity, rounded up
MAX_FREQ = 3         # a 2-bit counter
MOVE_TO_MAIN_FREQ = 2  # freq > 1: Algorithm 1's threshold for small -> main
_IN_MAIN = 1         # low bit of a resident key's state; the frequency is in the bits above


def segment_sizes(capacity: int) -> tuple[int, int, int]:
    """(small, main, ghost) entries for a capacity: ceil(10%), the rest, and main's size."""
    small = -(-capacity * SMALL_PERCENT // 100)
    main = capacity - small
    return small, main, main


class S3FifoCache(PyKernel, Cache):
    """S3-FIFO replacement; see the module docstring."""

    __slots__ = ("_small", "_main", "_ghost", "_state", "_small_size", "_main_size", "_ghost_size",
                 "_capacity", "_hits", "_misses")
    name = "s3fifo"

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._hits = self._misses = 0
        self._small_size, self._main_size, self._ghost_size = segment_sizes(capacity)
        self._small: deque[int] = deque()  # left = tail (oldest)
        self._main: deque[int] = deque()
        self._ghost: OrderedDict[int, None] = OrderedDict()  # first = oldest
        self._state: dict[int, int] = {}  # resident fingerprint -> freq << 1 | in-main bit

    def _access(self, fp: int) -> bool:
        state = self._state
        s = state.get(fp)
        if s is not None:
            if s < MAX_FREQ << 1:
                state[fp] = s + 2
            self._hits += 1
            return True
        self._misses += 1
        while len(state) >= self._capacity:
            if len(self._small) >= self._small_size:
                self._evict_small()
            else:
                self._evict_main()
        if fp in self._ghost:
            del self._ghost[fp]
            self._main.append(fp)
            state[fp] = _IN_MAIN
        else:
            self._small.append(fp)
            state[fp] = 0
        return False

    def _evict_small(self) -> None:
        small, state = self._small, self._state
        while small:
            t = small.popleft()
            if state[t] >= MOVE_TO_MAIN_FREQ << 1:
                self._main.append(t)
                state[t] |= _IN_MAIN
                if len(self._main) >= self._main_size:
                    self._evict_main()
            else:
                del state[t]
                if self._ghost_size:
                    self._ghost[t] = None
                    if len(self._ghost) > self._ghost_size:
                        self._ghost.popitem(last=False)
                return

    def _evict_main(self) -> None:
        main, state = self._main, self._state
        while main:
            t = main.popleft()
            s = state[t]
            if s >= 2:
                main.append(t)
                state[t] = s - 2
            else:
                del state[t]
                return

    def keys(self) -> list[int]:
        """Resident fingerprints: small tail to head, then main tail to head."""
        return [*self._small, *self._main]

    def queues(self) -> tuple[list[int], list[int], list[int]]:
        """(small, main, ghost), each tail (oldest) first."""
        return list(self._small), list(self._main), list(self._ghost)

    @property
    def size(self) -> int:
        """Entries held now (small + main; the ghost holds no data)."""
        return len(self._state)

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the queues, the state dict, the ghost and the fingerprint int objects."""
        containers = (self._small, self._main, self._ghost, self._state)
        return (sum(map(sys.getsizeof, containers)) + sum(map(sys.getsizeof, self._state))
                + sum(map(sys.getsizeof, self._ghost)))

"""The content-seen set: body fingerprints of pages already read, in bounded memory.

The problem. The content-seen test (Mercator, DESIGN 2.8) asks of every HTML
body "was this exact body read before, at another URL?"; if so the page is
a mirror and its links are not followed again. A plain Python set of the
fingerprints grows by about 68 bytes per page for the whole crawl, so a long
crawl's node ends up holding its whole history in RAM.

The choice. A bounded set must be wrong sometimes, and the two ways of being
wrong do not cost the same:
- a false "seen" (a Bloom filter's kind of error) drops the links of a page
  that is not a duplicate: pages reachable only through it are never
  fetched. That is a lost page, which the crawler does not accept;
- a false "not seen" (a forgotten fingerprint) costs one redundant parse,
  and its links go on to the splitter and the DUE, which drop every URL
  already seen, so no URL is fetched twice. Only URLs that exist solely
  inside the mirror are new; each is fetched once and its body meets this
  test again. That is what the crawl did before this test existed, and what
  a restart does anyway (the set is not checkpointed).

So this set may only forget, never invent: it is the URL caches' CLOCK-SETS
(`crawler.cache.clock_sets`, compiled), which stores the 64-bit keys themselves,
so a "seen" answer is always for a fingerprint inserted before (short of
two bodies with the same 64-bit fingerprint, which no structure here can
tell apart). A repeat marks its entry, so bodies that keep coming back (the
same page under many URLs) outlive the ones seen once. Memory is fixed at
construction: 8.2 bytes per entry of capacity (docs/caches.md), whatever
the crawl's length. CLOCK-SETS runs in sets of 32 entries picked by hash, so it
starts forgetting a little before it is full: docs/parsing.md has the
measured figures.

`parse.content_seen_size` is the capacity; 0 turns the test off (every
page's links are followed).
"""

from __future__ import annotations

import sys
from typing import Any

from crawler.cache import make_cache

POLICY = "clock-sets"   # stores exact keys, only forgets (see above); a hit marks the entry


class ContentSeen:
    """At most `capacity` body fingerprints; a lookup may miss one it forgot, never invent one."""

    __slots__ = ("_cache", "_capacity")

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"content-seen capacity must be >= 0 entries, got {capacity}")
        self._capacity = capacity
        self._cache = make_cache(POLICY, capacity) if capacity else None

    def check_and_add(self, fp: int) -> bool:
        """True when fp was added before and is still held (a duplicate body); else add it."""
        return self._cache is not None and self._cache.check_and_add(fp)

    @property
    def enabled(self) -> bool:
        """False when the capacity is 0: nothing is held and every body counts as new."""
        return self._cache is not None

    @property
    def capacity(self) -> int:
        """Most fingerprints held (`parse.content_seen_size`)."""
        return self._capacity

    @property
    def size(self) -> int:
        """Fingerprints held now."""
        return self._cache.size if self._cache is not None else 0

    @property
    def hits(self) -> int:
        """Lookups that found their fingerprint: duplicate bodies recognised."""
        return self._cache.hits if self._cache is not None else 0

    def memory_bytes(self) -> int:
        """Everything held in memory; fixed at construction."""
        own = sys.getsizeof(self)
        return own + self._cache.memory_bytes() if self._cache is not None else own

    def stats(self) -> dict[str, Any]:
        """Capacity, entries, hits, misses and memory, for metrics and benches."""
        if self._cache is None:
            return {"policy": "off", "capacity": 0, "size": 0, "hits": 0, "misses": 0,
                    "memory_bytes": self.memory_bytes()}
        s = self._cache.stats()
        return {k: s[k] for k in ("policy", "capacity", "size", "hits", "misses", "memory_bytes", "bytes_per_entry")}

    def close(self) -> None:
        """Nothing to release: memory goes with the object."""

    def __repr__(self) -> str:
        return f"<ContentSeen size={self.size}/{self.capacity}>"

"""INFINITE (offline only): a cache that never evicts.

Its misses are the distinct fingerprints of the trace, the floor under every
policy's miss count. `capacity` is accepted for a uniform interface and
reported, but never enforced: `size` grows with the distinct fingerprints.
"""

from __future__ import annotations

from crawler.cache.base import Cache
from crawler.cache.hashset import PySetKernel, SetKernel


class InfiniteCache(SetKernel, Cache):  # type: ignore[misc, valid-type]
    """Remembers every fingerprint it has seen."""

    __slots__ = ()
    name = "infinite"
    compiled = SetKernel is not PySetKernel

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, True)

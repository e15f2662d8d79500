"""64-bit URL and host fingerprints (DESIGN 2.1).

Both are the first 64-bit half of MurmurHash3 x64/128 (seed 0), unsigned, of the
UTF-8 bytes: `mmh3.hash64(s.encode(), signed=False)[0]`. That is the whole
definition, and it is a contract: the caches, the DUE's files, the splitter's
stream logs and the replay tool all key on it, so changing it invalidates
every stored crawl. (mmh3 hashes a `str` as its UTF-8 bytes, so we pass the
`str` and skip the `encode` copy; the value is the same.)
"""

from __future__ import annotations

import mmh3
import numpy as np

FINGERPRINT_SEED = 0  # part of the contract above


def fingerprint(url: str) -> int:
    """64-bit unsigned fingerprint of a canonical URL."""
    return mmh3.hash64(url, FINGERPRINT_SEED, signed=False)[0]


def fingerprints(urls: list[str]) -> np.ndarray:
    """`fingerprint` of each URL, as a uint64 array (a page's links at once).

    Hot path (per page): one list comprehension with a local-bound hash, then
    one array conversion; faster than `np.fromiter` over a generator.
    """
    hash64 = mmh3.hash64
    return np.array([hash64(u, FINGERPRINT_SEED, signed=False)[0] for u in urls], dtype=np.uint64)


def host_fingerprint(host: str) -> int:
    """64-bit unsigned fingerprint of a canonical host name (partitioning: owner = fp % N)."""
    return mmh3.hash64(host, FINGERPRINT_SEED, signed=False)[0]

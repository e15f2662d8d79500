"""STATIC: a fixed set of fingerprints chosen in advance; never evicts, never inserts.

The paper's STATIC cache holds the k most popular URLs of an earlier trace
(`top_k` computes them). It ignores locality, which is why it does much
worse than CLOCK or LRU of the same size; it is here as the baseline that
shows how much of the hit rate comes from locality. Option `preload`: the
fingerprints (array-like of uint64, or the path of a .npy file of them); at
most `capacity` distinct ones. Without it the cache is empty and misses
everything.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from crawler.cache._mix import as_fingerprint_array
from crawler.cache.base import Cache
from crawler.cache.hashset import PySetKernel, SetKernel


def top_k(trace: np.ndarray, k: int) -> np.ndarray:
    """The k most frequent fingerprints of a trace, most frequent first (ties: smaller first)."""
    values, counts = np.unique(as_fingerprint_array(trace), return_counts=True)
    order = np.lexsort((values, -counts))
    return values[order[:k]]


def load_preload(preload: object) -> np.ndarray:
    """Fingerprints from an array-like or a .npy file path."""
    if preload is None:
        return np.empty(0, dtype=np.uint64)
    if isinstance(preload, (str, os.PathLike)):
        path = Path(preload)
        try:
            data = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ValueError(f"static cache: cannot read preload file {path}: {exc}") from exc
        return as_fingerprint_array(data.reshape(-1))
    return as_fingerprint_array(preload)


class StaticCache(SetKernel, Cache):  # type: ignore[misc, valid-type]
    """Holds the preloaded fingerprints and nothing else."""

    __slots__ = ()
    name = "static"
    options = ("preload",)
    compiled = SetKernel is not PySetKernel

    def __init__(self, capacity: int, preload: object = None) -> None:
        super().__init__(capacity, False)
        fps = np.unique(load_preload(preload))
        if len(fps) > capacity:
            raise ValueError(f"static cache: preload has {len(fps)} distinct fingerprints, "
                             f"more than the capacity {capacity}")
        self.add_many(fps)

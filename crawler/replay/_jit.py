"""Optional compiled twin of stack.lru_depths (numba), for long traces.

The pure numpy wavelet pass in stack.py is the reference and always works;
when numba is installed this sequential Fenwick-tree version gives the same
depths (tests compare them request for request) about an order of magnitude
faster. Setting CRAWLER_REPLAY_PURE_NUMPY=1 before the first import turns
it off. numba is an optional dependency (the `jit` extra: pip install -e .[jit]).
"""

from __future__ import annotations

import os

import numpy as np

PURE_NUMPY_ENV = "CRAWLER_REPLAY_PURE_NUMPY"


def _load_njit():
    if os.environ.get(PURE_NUMPY_ENV, "") not in ("", "0"):
        return None
    try:
        from numba import njit
    except ImportError:
        return None
    return njit


_njit = _load_njit()
AVAILABLE: bool = _njit is not None


def _lru_depths_fenwick(next_uses: np.ndarray, depths: np.ndarray, cold: int) -> None:
    """Stack distance per request (Bennett & Kruskal): a Fenwick tree over
    positions marks each fingerprint's latest request; the distance of a
    repeat is the number of marks after its previous request, plus one."""
    n = next_uses.shape[0]
    tree = np.zeros(n + 1, dtype=np.int32)
    prev = np.full(n, -1, dtype=np.int64)
    marks = 0
    for t in range(n):
        p = prev[t]
        if p < 0:
            depths[t] = cold
        else:
            below = 0                      # marks at positions <= p
            i = p + 1
            while i > 0:
                below += tree[i]
                i -= i & -i
            depths[t] = marks - below + 1
            i = p + 1                      # unmark p
            while i <= n:
                tree[i] -= 1
                i += i & -i
            marks -= 1
        i = t + 1                          # mark t
        while i <= n:
            tree[i] += 1
            i += i & -i
        marks += 1
        nu = next_uses[t]
        if nu < n:
            prev[nu] = t


_lru_kernel = _njit(cache=True, nogil=True)(_lru_depths_fenwick) if _njit is not None else None


def lru_depths(next_uses: np.ndarray, cold: int) -> np.ndarray:
    """The compiled stack distances (requires AVAILABLE)."""
    if _lru_kernel is None:
        raise RuntimeError("numba is not available")
    depths = np.empty(len(next_uses), dtype=np.int64)
    _lru_kernel(np.ascontiguousarray(next_uses, dtype=np.int64), depths, cold)
    return depths

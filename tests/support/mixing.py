"""The hash the cache models use, written out again here so the models do not trust the code under test."""

from __future__ import annotations

MASK64 = (1 << 64) - 1


def fmix64(k: int) -> int:
    """MurmurHash3's 64-bit finalizer."""
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & MASK64
    return k ^ (k >> 33)

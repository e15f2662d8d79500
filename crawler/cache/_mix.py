"""The integer functions every cache kernel shares, in pure Python.

They are the reference for the compiled kernels (crawler/_native/), which uses the
same constants: a fingerprint is mixed by `fmix64` before it is placed in a
table (so even non-random test keys spread evenly), `fastrange` maps a 64-bit
value onto n slots monotonically, and `SplitMix64` is the random policy's
generator, so a seed gives the same victims with or without the compiled
kernel.
"""

from __future__ import annotations

import operator

import numpy as np

MASK64 = (1 << 64) - 1
_FMIX_C1 = 0xFF51AFD7ED558CCD
_FMIX_C2 = 0xC4CEB9FE1A85EC53
_SPLITMIX_GAMMA = 0x9E3779B97F4A7C15
_SPLITMIX_M1 = 0xBF58476D1CE4E5B9
_SPLITMIX_M2 = 0x94D049BB133111EB
_FMIX_SHIFT = 33


def fmix64(k: int) -> int:
    """MurmurHash3's 64-bit finalizer: a bijection of [0, 2**64), fmix64(0) == 0."""
    k ^= k >> _FMIX_SHIFT
    k = (k * _FMIX_C1) & MASK64
    k ^= k >> _FMIX_SHIFT
    k = (k * _FMIX_C2) & MASK64
    return k ^ (k >> _FMIX_SHIFT)


def fastrange(x: int, n: int) -> int:
    """floor(x * n / 2**64): maps [0, 2**64) onto [0, n), monotone in x."""
    return (x * n) >> 64


class SplitMix64:
    """The splitmix64 generator (Steele, Lea & Flood 2014), seeded by its state."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        self.state = operator.index(seed) & MASK64

    def next(self) -> int:
        """The next 64-bit output."""
        self.state = z = (self.state + _SPLITMIX_GAMMA) & MASK64
        z = ((z ^ (z >> 30)) * _SPLITMIX_M1) & MASK64
        z = ((z ^ (z >> 27)) * _SPLITMIX_M2) & MASK64
        return z ^ (z >> 31)


def as_fingerprint(fp: object) -> int:
    """A fingerprint as a Python int in [0, 2**64); raises like the compiled kernel."""
    value = fp if type(fp) is int else operator.index(fp)  # type: ignore[arg-type]
    if value < 0:
        raise OverflowError("can't convert negative int to unsigned")
    if value > MASK64:
        raise OverflowError("int too big to convert")
    return value


def as_fingerprint_array(fps: object) -> np.ndarray:
    """A C-contiguous 1-d uint64 array of fingerprints (converted like the kernel does)."""
    if isinstance(fps, np.ndarray) and fps.dtype == np.uint64 and fps.ndim == 1 \
            and fps.flags.c_contiguous and fps.dtype.isnative:
        return fps
    arr = np.ascontiguousarray(fps, dtype=np.uint64)
    if arr.ndim != 1:
        raise ValueError("fingerprints must be a 1-d array of uint64")
    return arr


class PyKernel:
    """The public calls every pure-Python kernel shares around its own `_access(fp) -> bool`.

    Subclasses keep `_capacity`, `_hits` and `_misses` and define `_access`,
    `size` and `keys()`; batches are the single call in order, by definition.
    """

    _capacity: int
    _hits: int
    _misses: int

    def _access(self, fp: int) -> bool:  # pragma: no cover - always overridden
        raise NotImplementedError

    def check_and_add(self, fp: int) -> bool:
        """True if fp is cached (a hit); a miss inserts fp."""
        return self._access(as_fingerprint(fp))

    def check_and_add_many(self, fps: np.ndarray) -> np.ndarray:
        """check_and_add on each element, in order."""
        access = self._access
        return np.array([access(fp) for fp in as_fingerprint_array(fps).tolist()], dtype=bool)

    capacity = property(lambda self: self._capacity, doc="Most entries held.")
    hits = property(lambda self: self._hits, doc="Requests that found their fingerprint.")
    misses = property(lambda self: self._misses, doc="Requests that did not.")

"""Fingerprints, URLs and batches for the DUE tests (unit and property), in one place.

Small integers stand for URLs: `fp_of` spreads them over the 64-bit fingerprint
space (both ends included), `url_of` names them, `batch` builds the
(fingerprints, URLs) pair that `DUE.submit` takes.
"""

from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN_64 = 0x9E3779B97F4A7C15     # Fibonacci hashing's multiplier: consecutive ints land far apart
URL_HOSTS = 3                      # URLs are spread over this many hosts


def fp_of(i: int) -> int:
    """Spread small ints over the 64-bit space (and hit both ends)."""
    if i == 0:
        return 0
    if i == 1:
        return MASK64
    return (i * GOLDEN_64) & MASK64


def url_of(i: int) -> str:
    return f"http://h{i % URL_HOSTS}.test/page/{i}"


def batch(ids: list[int]) -> tuple[np.ndarray, list[str]]:
    return np.array([fp_of(i) for i in ids], dtype=np.uint64), [url_of(i) for i in ids]

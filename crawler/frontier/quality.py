"""Page quality for the quality-aware policies: in-links seen so far, or an oracle file.

`InlinkScorer` counts every link the node routes (before duplicate
elimination, so the thousandth link to a page counts as much as the first)
in a fixed array of counters indexed by the URL fingerprint's low bits: RAM
is the array, whatever the number of URLs, at the price of rare collisions
adding another URL's count (a count-min sketch of depth 1). The quality of a
URL is its count when it enters the frontier.

`OracleScorer` reads a file of `URL<TAB>quality` lines (UTF-8, `#` comments),
for experiments where the true quality of every page is known (the test
web's Zipf quality); URLs not in the file have quality 0.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from crawler.urls import canonicalize

COUNTER_DTYPE = np.uint32


class InlinkScorer:
    """In-links seen so far, per URL fingerprint, in 2**bits counters."""

    def __init__(self, bits: int = 22) -> None:
        self._mask = np.uint64((1 << bits) - 1)
        self._counts = np.zeros(1 << bits, dtype=COUNTER_DTYPE)

    def count(self, fps: np.ndarray) -> None:
        """Count one in-link for each fingerprint (repeats count again)."""
        if len(fps):
            np.add.at(self._counts, fps & self._mask, 1)

    def qualities(self, fps: np.ndarray) -> list[float]:
        return self._counts[fps & self._mask].astype(np.float64).tolist()

    @property
    def nbytes(self) -> int:
        return self._counts.nbytes


def read_quality_file(path: str | Path) -> dict[str, float]:
    """A file of `URL<TAB>quality` lines (UTF-8, `#` comments) as {canonical URL: quality};
    raises ValueError naming the line of a bad entry."""
    out: dict[str, float] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            url, sep, value = line.rpartition("\t")
            try:
                quality = float(value)
            except ValueError:
                quality = -1.0
            if not sep or not url or not quality >= 0 or not math.isfinite(quality):
                raise ValueError(f"{path}:{number}: expected 'URL<TAB>quality >= 0', got {line[:200]!r}")
            canonical = canonicalize(url)
            if canonical is None:
                raise ValueError(f"{path}:{number}: {url[:200]!r} is not a crawlable URL")
            out[canonical] = quality
    return out


class OracleScorer:
    """Known qualities from a file; links are not counted."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._quality = read_quality_file(self.path)
    def count(self, fps: np.ndarray) -> None:
        return None

    def quality_of(self, url: str) -> float:
        return self._quality.get(url, 0.0)

    def __len__(self) -> int:
        return len(self._quality)

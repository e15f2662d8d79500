"""In-memory DUE: a Python set of fingerprints (the stand-in and the reference model)."""

from __future__ import annotations

import numpy as np

from crawler.due.base import DUE


class MemoryDUE(DUE):
    """Exact and immediate; costs about 60-70 bytes of RAM per URL seen."""

    def __init__(self) -> None:
        self._seen: set[int] = set()
        self.checks = 0
        self.new = 0

    def submit(self, fps: np.ndarray, urls: list[str]) -> list[str]:
        seen = self._seen
        fresh = []
        for fp, url in zip(fps.tolist(), urls):
            if fp not in seen:
                seen.add(fp)
                fresh.append(url)
        self.checks += len(urls)
        self.new += len(fresh)
        return fresh

    def flush(self) -> list[str]:
        return []

    @property
    def pending(self) -> int:
        return 0

    def stats(self) -> dict:
        return {"checks": self.checks, "new": self.new, "seen": len(self._seen), "pending": 0}

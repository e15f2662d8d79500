"""The interface every duplicate URL eliminator implements."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class DUE(ABC):
    """Answers "seen before?" for batches of URL fingerprints."""

    @abstractmethod
    def submit(self, fps: np.ndarray, urls: list[str]) -> list[str]:
        """Offer URLs; returns those now known to be new (possibly from earlier calls)."""

    @abstractmethod
    def flush(self) -> list[str]:
        """Decide all pending URLs now; returns the new ones."""

    def start_merge(self) -> bool:
        """Begin deciding everything pending without blocking the caller; the new URLs come out
        of a later `submit` or `poll`. Returns whether a merge was started. The node asks while
        its fetches are in flight: a merge on the event loop would stall them, and the stall
        would count in their fetch times (and so in the hosts' politeness delays). A DUE that
        decides at once has nothing to start."""
        return False

    def peek(self, start: int) -> list[str]:
        """Hand out now the new URLs among those the last submit left undecided from buffer position
        `start` on (see DiskDUE.peek). A DUE that decides at once has nothing left to peek."""
        return []

    @property
    def buffered(self) -> int:
        """URLs accepted and not yet taken by a merge."""
        return 0

    def poll(self) -> list[str]:
        """New URLs decided since the last call, without waiting."""
        return []

    @property
    def merging(self) -> bool:
        """A merge started by `start_merge` (or by a full buffer) is still running."""
        return False

    @property
    @abstractmethod
    def pending(self) -> int:
        """URLs accepted but not yet decided."""

    @abstractmethod
    def stats(self) -> dict:
        """Counters for metrics and the summary."""

    def close(self) -> None:  # noqa: B027 - optional on purpose: a DUE holding no files has nothing to release
        """Release files and memory."""

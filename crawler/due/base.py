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

    @property
    @abstractmethod
    def pending(self) -> int:
        """URLs accepted but not yet decided."""

    @abstractmethod
    def stats(self) -> dict:
        """Counters for metrics and the summary."""

    def close(self) -> None:
        """Release files and memory."""

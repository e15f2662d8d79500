"""Release markers: where a committed merge's new URLs are, until the caller surely has them.

A merge that commits writes `release/mNNNNNNNN.pos`: the sorted entry
positions (int64) of its new URLs in its journal segments. While the marker
and the segments exist, a restart reads those URLs back and hands them out
again. The marker is deleted first when the merge is released (the caller has
the URLs), so recovery never finds a marker without its segments by design.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from crawler.fsutil import atomic_file, fsync_dir

POSITION_DTYPE = np.dtype("<i8")


class ReleaseMarkers:
    """The release markers of one DUE directory."""

    def __init__(self, directory: Path, durable: bool) -> None:
        self.directory = directory
        self.directory.mkdir(exist_ok=True)
        self._durable = durable

    def path(self, merge: int) -> Path:
        return self.directory / f"m{merge:08d}.pos"

    def write(self, merge: int, positions: np.ndarray, atomic: bool = False) -> None:
        """A merge's marker. `atomic` for a rewrite: a crash must leave the old marker or the new one."""
        if atomic:
            with atomic_file(self.path(merge), "wb", durable=self._durable) as f:
                positions.tofile(f)
            return
        with open(self.path(merge), "wb") as f:
            positions.tofile(f)
            if self._durable:
                f.flush()
                os.fsync(f.fileno())
        if self._durable:
            fsync_dir(self.directory)

    def read(self, merge: int) -> np.ndarray:
        return np.fromfile(self.path(merge), dtype=POSITION_DTYPE)

    def remove(self, merge: int) -> None:
        """Delete a merge's marker (gone already is fine)."""
        self.path(merge).unlink(missing_ok=True)

    def keep_only(self, merges: list[int]) -> None:
        """Delete every file but the markers of `merges` (markers of released merges, temporaries)."""
        keep = {self.path(merge).name for merge in merges}
        for path in self.directory.iterdir():
            if path.name not in keep:
                path.unlink()

"""STATIC over traces longer than RAM: each stream's most frequent fingerprints found out of core, then
every size in one pass.

Why. STATIC is pre-loaded with the k fingerprints its stream asks most
often (the paper's rule: loading not charged), so it needs the whole
stream's frequencies before its first request. The in-memory replay ranks
them with one sort of the whole trace. Here only the ranks below the largest
size matter: a fingerprint ranked past it misses at every size.

How, for one stream's `full` or `cross` trace (`build_static_table`), with
`keep` = the largest size:
1. Split, as MIN's build does (min_streaming): each request's (fingerprint,
   position) into a bucket file by a hash of the fingerprint, so all the
   requests of a fingerprint land in one bucket.
2. Count each bucket's fingerprints (np.unique, a bounded number of
   requests at a time) and keep its first `keep` in STATIC's order (most
   frequent first, ties by the smaller value, as crawler.cache.static.top_k).
   A fingerprint among the stream's first `keep` is among its bucket's, so
   merging the buckets' tops, `keep` at a time, gives the stream's.
3. The table, sorted by fingerprint with each one's rank, is saved as two
   .npy files beside the next uses, memory-mapped by each simulation (the
   groups of --jobs share it through the page cache).
Then `StaticRun` looks every request up (searchsorted): rank r misses at the
sizes <= r, as the in-memory depth r + 1 does; misses per size and window
come from a histogram, as in LRU's pass.

Memory: a bucket's distinct fingerprints with their counts while it is
counted (about 40 B each), and the top `keep` (16 B each, three times that
while merging): 1.5 GiB at keep = 2^25, whatever the trace's length. Disk:
16 bytes per request while splitting, 16 per kept fingerprint after.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from crawler.replay.chunks import StreamSource
from crawler.replay.min_streaming import BUCKET_RECORD, BUCKET_REQUESTS, bucket_count, split_to_buckets

if TYPE_CHECKING:
    from crawler.replay.streaming import _Windows

COUNT_REQUESTS = 1 << 24
"""Requests of a bucket counted at a time (a bucket a heavy fingerprint made large is read in parts)."""
STATIC_COST_S_PER_REQUEST = 4e-7
"""Rough seconds per request to build a stream's table (for the progress bar only)."""


@dataclass(frozen=True)
class StaticTable:
    """A stream's first `keep` fingerprints in STATIC's order: sorted by value (`fps_path`) with each
    one's 0-based rank (`ranks_path`), .npy files."""

    fps_path: Path
    ranks_path: Path
    keep: int


def _top(values: np.ndarray, counts: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """The first `keep` of (values, counts) in STATIC's order: most frequent first, ties by smaller value."""
    order = np.lexsort((values, -counts))[:keep]
    return values[order], counts[order]


def _count_bucket(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A bucket's distinct fingerprints and how often each is asked, read COUNT_REQUESTS at a time."""
    values = np.empty(0, dtype=np.uint64)
    counts = np.empty(0, dtype=np.int64)
    with open(path, "rb") as fh:
        while True:
            data = fh.read(COUNT_REQUESTS * BUCKET_RECORD.itemsize)
            if not data:
                break
            fps = np.frombuffer(data, dtype=BUCKET_RECORD)["fp"]
            part, part_counts = np.unique(fps, return_counts=True)
            if not len(values):
                values, counts = part, part_counts.astype(np.int64)
                continue
            values, inverse = np.unique(np.concatenate((values, part)), return_inverse=True)
            counts = np.bincount(inverse, weights=np.concatenate((counts, part_counts)),
                                 minlength=len(values)).astype(np.int64)
    return values, counts


def build_static_table(source: StreamSource, trace: str, directory: Path, chunk_requests: int, keep: int,
                       bucket_requests: int = BUCKET_REQUESTS, progress=None) -> StaticTable:
    """The first `keep` fingerprints of `source`'s `trace` in STATIC's order, as a table in `directory`
    (see the module doc); the bucket files it writes meanwhile are removed."""
    work = Path(tempfile.mkdtemp(prefix="static-buckets-", dir=directory))
    try:
        buckets = bucket_count(source.requests, bucket_requests)
        paths, _ = split_to_buckets(source, trace, work, buckets, chunk_requests, progress)
        top_values = np.empty(0, dtype=np.uint64)
        top_counts = np.empty(0, dtype=np.int64)
        for path in paths:
            values, counts = _top(*_count_bucket(path), keep)
            path.unlink()
            top_values, top_counts = _top(np.concatenate((top_values, values)),
                                          np.concatenate((top_counts, counts)), keep)
            if progress is not None:
                progress.advance(STATIC_COST_S_PER_REQUEST / 2 * source.requests / len(paths),
                                 f"{source.name}: STATIC's ranks")
        by_value = np.argsort(top_values, kind="stable")
        stem = tempfile.mkdtemp(prefix="static-table-", dir=directory)
        table = StaticTable(Path(stem) / "fps.npy", Path(stem) / "ranks.npy", keep)
        np.save(table.fps_path, top_values[by_value])
        np.save(table.ranks_path, by_value.astype(np.int64))     # position in the top = rank
        return table
    finally:
        shutil.rmtree(work, ignore_errors=True)


class StaticRun:
    """STATIC at every size of one stream's trace, one pass over the stream with its table."""

    def __init__(self, sizes: np.ndarray, table: StaticTable, windows: _Windows | None = None) -> None:
        self.sizes = sizes
        self.fps = np.load(table.fps_path, mmap_mode="r")
        self.ranks = np.load(table.ranks_path, mmap_mode="r")
        self.beyond = table.keep + 1           # the depth of a fingerprint not in the table: misses everywhere
        self.hist = np.zeros(len(sizes) + 1, dtype=np.int64)
        self.windows = windows                  # misses per size and window, or None

    def feed(self, fps: np.ndarray, offset: int) -> None:
        depths = np.full(len(fps), self.beyond, dtype=np.int64)
        if len(self.fps):
            # Looked up in sorted order: each search starts where the last one ended (numpy narrows
            # the range for ascending keys), 7-8x faster than random probes into a table of 10^7.
            order = np.argsort(fps)
            at = np.empty(len(fps), dtype=np.intp)
            at[order] = np.searchsorted(self.fps, fps[order])
            np.minimum(at, len(self.fps) - 1, out=at)
            found = self.fps[at] == fps
            depths[found] = self.ranks[at[found]] + 1
        # bucket = the number of sizes below the depth = the sizes at which the request misses
        bucket = np.searchsorted(self.sizes, depths, side="left")
        self.hist += np.bincount(bucket, minlength=len(self.hist))
        if self.windows is not None:
            self.windows.add_buckets(offset, len(fps), bucket.astype(np.int64))

    def misses(self) -> np.ndarray:
        return np.cumsum(self.hist[::-1])[::-1][1:].astype(np.int64)

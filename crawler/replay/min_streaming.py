"""MIN over traces longer than RAM: next-use times built out of core, then MIN fed chunk by chunk.

Why. MIN (Belady) evicts the entry asked again farthest in the future, so
it needs every request's next use. The in-memory replay finds them with one
sort of the whole trace and simulates with a byte per request: about 70
bytes per request in all, so 6 x 10^7 requests in 4 GiB. Here memory is the
simulated caches plus fixed buffers, whatever the trace's length; the price
is disk: 24 bytes per request while the next uses are built, 8 while MIN
runs.

How, for one stream's `full` or `cross` trace (`build_next_use`):
1. Split. The trace is read once, chunk by chunk, and each request's
   (fingerprint, position) goes to one of B bucket files by a hash of the
   fingerprint (B = requests / BUCKET_REQUESTS, rounded up), so a
   fingerprint's requests all land in one bucket, in trace order.
2. Next uses per bucket. Each bucket is read from its end to its start; a
   table (NextUseKernel, crawler/_native/next_use.c) maps each fingerprint to
   its earliest position seen so far, which is the next use of the request
   before it. Memory is the bucket's distinct fingerprints (32 B each at
   most), so a fingerprint asked a million times costs one entry. The bucket
   is rewritten as (position, next use), still in trace order.
3. Merge. The buckets are merged by position, a window of positions at a
   time (each bucket is sorted by position, so each is read once, in
   order), into one raw int64 file of next uses in trace order.
Then each MIN cache (`MinRun` in streaming.py) reads that file in step with
the stream's chunks and feeds a BeladyKernel (crawler/_native/belady.c): the
same policy as the in-memory belady(), with a set of the resident entries'
next request times (O(capacity)) where belady() has a byte per request.

The next uses are the in-memory replay's (stack.next_use: the trace's length
when never again), so the miss counts are the same; tests pin both. Each
kernel has a pure-Python twin here (PyBelady, PyNextUse) for builds without
the extension.
"""

from __future__ import annotations

import heapq
import os
import resource
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crawler._native import NATIVE
from crawler.replay.chunks import StreamSource

BUCKET_REQUESTS = 1 << 24
"""Requests per bucket file on average: its table holds at most this many fingerprints (512 MiB at most)."""
MERGE_BLOCK = 1 << 16
"""Records read from each bucket at a time while merging (1 MiB each)."""
NEXT_USE_COST_S_PER_REQUEST = 4e-7
"""Rough seconds per request to build a stream's next uses (for the progress bar only)."""
BUCKET_RECORD = np.dtype([("fp", "<u8"), ("pos", "<i8")])
"""A request in a bucket file: its fingerprint and its position in the trace."""
_NEXT_RECORD = np.dtype([("pos", "<i8"), ("next", "<i8")])
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


class PyBelady:
    """Pure-Python twin of the compiled BeladyKernel (same hit sequence; used only when it is not built)."""

    def __init__(self, capacity: int, never: int) -> None:
        if capacity < 1 or never < 1:
            raise ValueError("BeladyKernel needs capacity >= 1 and 1 <= never < 2**61")
        self.capacity = capacity
        self.never = never
        self.requests = 0
        self.misses = 0
        self._heap: list[int] = []          # negated next-request times: a max-heap
        self._resident: set[int] = set()    # next request times of the resident entries
        self._live = 0
        self._heap_max = 2 * min(capacity, never) + 2

    @property
    def size(self) -> int:
        return self._live

    def hits(self, next_use: np.ndarray, out: np.ndarray) -> None:
        never = self.never
        if self.requests + len(next_use) > never:
            raise ValueError(f"BeladyKernel fed {self.requests + len(next_use)} requests, more than never = {never}")
        for k, nu in enumerate(next_use.tolist()):
            t = self.requests + k
            if t in self._resident:
                self._resident.discard(t)
                out[k] = 1
            else:
                out[k] = 0
                self.misses += 1
                if self._live == self.capacity:
                    victim = -heapq.heappop(self._heap)
                    self._resident.discard(victim)
                    self._live -= 1
                self._live += 1
            if nu < never:
                self._resident.add(nu)
            if len(self._heap) >= self._heap_max:
                self._heap = [v for v in self._heap if -v > t]
                heapq.heapify(self._heap)
            heapq.heappush(self._heap, -(nu if nu < never else never + t))
        self.requests += len(next_use)


class PyNextUse:
    """Pure-Python twin of the compiled NextUseKernel."""

    def __init__(self, never: int) -> None:
        self.never = never
        self._earliest: dict[int, int] = {}

    @property
    def size(self) -> int:
        return len(self._earliest)

    def back(self, fps: np.ndarray, positions: np.ndarray, out: np.ndarray) -> None:
        earliest = self._earliest
        for k in range(len(fps) - 1, -1, -1):
            fp = int(fps[k])
            out[k] = earliest.get(fp, self.never)
            earliest[fp] = int(positions[k])


def belady_kernel(capacity: int, never: int):
    """MIN over a trace of `never` requests fed in order: the compiled BeladyKernel, or its twin."""
    if NATIVE is not None and hasattr(NATIVE, "BeladyKernel"):
        return NATIVE.BeladyKernel(capacity, never)
    return PyBelady(capacity, never)


def next_use_kernel(never: int):
    if NATIVE is not None and hasattr(NATIVE, "NextUseKernel"):
        return NATIVE.NextUseKernel(never)
    return PyNextUse(never)


@dataclass(frozen=True)
class NextUseFile:
    """A stream's next uses on disk: `requests` int64 in trace order (raw, no header), and what the merge
    counted on the way: the distinct fingerprints (one request each is never asked again) and, with a
    window, the first requests of a fingerprint per window (INFINITE's misses)."""

    path: Path
    requests: int
    distinct: int = 0
    cold_windows: np.ndarray | None = None


def bucket_count(requests: int, bucket_requests: int = BUCKET_REQUESTS) -> int:
    return max(1, -(-requests // bucket_requests))


def _buckets_of(fps: np.ndarray, buckets: int) -> np.ndarray:
    """Which bucket each fingerprint goes to: a multiplicative hash's high bits, reduced to `buckets`."""
    mixed = (fps * _HASH_MULTIPLIER) >> np.uint64(32)
    return (mixed % np.uint64(buckets)).astype(np.intp)


def _allow_open_files(needed: int) -> None:
    """Raises the soft limit on open files to `needed` plus a margin when the hard limit allows it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + 64
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise ValueError(f"MIN's out-of-core build needs {needed} open bucket files, more than the limit "
                             f"on open files ({hard}); raise it (ulimit -n) or the bucket size")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def split_to_buckets(source: StreamSource, trace: str, directory: Path, buckets: int, chunk_requests: int,
                     progress=None) -> tuple[list[Path], int]:
    """Step 1: every request's (fingerprint, position) into its bucket's file (BUCKET_RECORD), all the
    requests of a fingerprint in one bucket, in trace order; returns the files and the trace's length.
    STATIC's ranking (static_streaming) splits the same way."""
    paths = [directory / f"bucket-{b:05d}.rec" for b in range(buckets)]
    _allow_open_files(buckets)
    files = [open(p, "wb") for p in paths]
    offset = 0
    try:
        for chunk in source.chunks(chunk_requests):
            part = chunk.trace(trace)
            if len(part):
                which = _buckets_of(part, buckets)
                order = np.argsort(which, kind="stable")
                records = np.empty(len(part), dtype=BUCKET_RECORD)
                records["fp"] = part[order]
                records["pos"] = order + offset
                counts = np.bincount(which, minlength=buckets)
                ends = np.cumsum(counts)
                for b in np.flatnonzero(counts).tolist():      # only the buckets this chunk touches
                    files[b].write(records[ends[b] - counts[b]:ends[b]].tobytes())
                offset += len(part)
            if progress is not None:
                progress.advance(NEXT_USE_COST_S_PER_REQUEST / 2 * len(chunk.fps), f"{source.name}: MIN's next uses")
    finally:
        for f in files:
            f.close()
    return paths, offset


def _next_uses_of_bucket(path: Path, never: int, chunk_requests: int) -> Path:
    """Step 2: the bucket's (position, next use) in trace order, read from its end (see the module doc)."""
    count = path.stat().st_size // BUCKET_RECORD.itemsize
    target = path.with_suffix(".next")
    kernel = next_use_kernel(never)
    with open(path, "rb") as src, open(target, "wb") as dst:
        dst.truncate(count * _NEXT_RECORD.itemsize)
        end = count
        while end > 0:
            start = max(0, end - chunk_requests)
            src.seek(start * BUCKET_RECORD.itemsize)
            records = np.frombuffer(src.read((end - start) * BUCKET_RECORD.itemsize), dtype=BUCKET_RECORD)
            fps = np.ascontiguousarray(records["fp"])
            positions = np.ascontiguousarray(records["pos"])
            out = np.empty(len(records), dtype=_NEXT_RECORD)
            nexts = np.empty(len(records), dtype=np.int64)
            kernel.back(fps, positions, nexts)
            out["pos"] = positions
            out["next"] = nexts
            dst.seek(start * _NEXT_RECORD.itemsize)
            dst.write(out.tobytes())
            end = start
    path.unlink()
    return target


class _BucketReader:
    """A bucket's (position, next use) records in order, handed out by position."""

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "rb")
        self._buf = np.empty(0, dtype=_NEXT_RECORD)

    def below(self, limit: int) -> np.ndarray:
        """The next records whose position is below `limit`."""
        taken = []
        while True:
            if not len(self._buf):
                data = self._fh.read(MERGE_BLOCK * _NEXT_RECORD.itemsize)
                if not data:
                    break
                self._buf = np.frombuffer(data, dtype=_NEXT_RECORD)
            k = int(np.searchsorted(self._buf["pos"], limit))
            taken.append(self._buf[:k])
            self._buf = self._buf[k:]
            if len(self._buf):
                break
        return np.concatenate(taken) if len(taken) > 1 else (taken[0] if taken else self._buf[:0])

    def close(self) -> None:
        self._fh.close()


def _merge(parts: list[Path], target: Path, requests: int, chunk_requests: int, progress=None,
           name: str = "", window_size: int | None = None) -> tuple[int, np.ndarray | None]:
    """Step 3: the buckets' next uses into one int64 file in trace order. Returns the distinct
    fingerprints (requests never asked again: one per fingerprint) and, with `window_size`, the first
    requests per window: a window's requests less those that are an earlier request's next use."""
    _allow_open_files(len(parts))
    readers = [_BucketReader(p) for p in parts]
    distinct = 0
    size = window_size or 1
    windows = -(-requests // size) if window_size else 0
    reused = np.zeros(windows, dtype=np.int64)
    try:
        with open(target, "wb") as out:
            for start in range(0, requests, chunk_requests):
                stop = min(requests, start + chunk_requests)
                window = np.empty(stop - start, dtype=np.int64)
                filled = 0
                for reader in readers:
                    records = reader.below(stop)
                    window[records["pos"] - start] = records["next"]
                    filled += len(records)
                if filled != stop - start:
                    raise RuntimeError(f"MIN's next-use merge found {filled} of {stop - start} positions "
                                       f"{start}..{stop - 1}: a bucket file is damaged")
                again = window[window < requests]
                distinct += len(window) - len(again)
                if windows:
                    reused += np.bincount(again // size, minlength=windows)[:windows]
                out.write(window.tobytes())
                if progress is not None:
                    progress.advance(NEXT_USE_COST_S_PER_REQUEST / 4 * (stop - start), f"{name}: MIN's next uses")
    finally:
        for reader in readers:
            reader.close()
    for p in parts:
        p.unlink()
    if not windows:
        return distinct, None
    lengths = np.full(windows, size, dtype=np.int64)
    lengths[-1] = requests - size * (windows - 1)
    return distinct, lengths - reused


def build_next_use(source: StreamSource, trace: str, directory: Path, chunk_requests: int,
                   bucket_requests: int = BUCKET_REQUESTS, progress=None, window: int | None = None) -> NextUseFile:
    """The next uses of `source`'s `trace` (full or cross) in a raw int64 file in `directory`, built out
    of core (see the module doc), with its distinct count and (per `window` requests) first requests;
    the bucket files it writes meanwhile are removed."""
    work = Path(tempfile.mkdtemp(prefix="min-buckets-", dir=directory))
    try:
        buckets = bucket_count(source.requests, bucket_requests)
        paths, requests = split_to_buckets(source, trace, work, buckets, chunk_requests, progress)
        parts = []
        for path in paths:
            parts.append(_next_uses_of_bucket(path, requests, chunk_requests))
            if progress is not None:
                progress.advance(NEXT_USE_COST_S_PER_REQUEST / 4 * requests / len(paths),
                                 f"{source.name}: MIN's next uses")
        fd, name = tempfile.mkstemp(prefix="next-use-", suffix=".i64", dir=directory)
        os.close(fd)
        distinct, cold = _merge(parts, Path(name), requests, chunk_requests, progress, source.name, window)
        return NextUseFile(Path(name), requests, distinct, cold)
    finally:
        shutil.rmtree(work, ignore_errors=True)


class NextUseReader:
    """A NextUseFile read in step with its stream's chunks; every MIN cache of the stream asks for the
    same chunk in turn, so the last one read is kept."""

    def __init__(self, file: NextUseFile) -> None:
        self.file = file
        self._fh = open(file.path, "rb")
        self._at = 0
        self._last: tuple[int, np.ndarray] | None = None

    def read(self, offset: int, length: int) -> np.ndarray:
        if self._last is not None and self._last[0] == offset and len(self._last[1]) == length:
            return self._last[1]
        if offset != self._at:
            self._fh.seek(offset * 8)
        data = self._fh.read(length * 8)
        if len(data) != length * 8:
            raise RuntimeError(f"{self.file.path}: next uses end at {offset + len(data) // 8} of "
                               f"{self.file.requests} requests")
        self._at = offset + length
        self._last = (offset, np.frombuffer(data, dtype=np.int64))
        return self._last[1]

    def close(self) -> None:
        self._fh.close()


class MinRun:
    """MIN at one size over one stream's trace, fed its chunks with their offsets (streaming.py)."""

    def __init__(self, size: int, reader: NextUseReader, windows=None) -> None:
        self.reader = reader
        self.kernel = belady_kernel(size, max(1, reader.file.requests))
        self.windows = windows

    def feed(self, fps: np.ndarray, offset: int) -> None:
        next_use = self.reader.read(offset, len(fps))
        hits = np.empty(len(fps), dtype=np.uint8)
        self.kernel.hits(next_use, hits)
        if self.windows is not None:
            self.windows.add_misses(offset, len(fps), np.flatnonzero(hits == 0))

    def misses(self) -> np.ndarray:
        return np.array([self.kernel.misses], dtype=np.int64)

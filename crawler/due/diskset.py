"""The DUE's seen-set on disk: sorted 8-byte fingerprints, bucketed by prefix.

Layout (IRLbot's DRUM bucketing over Mercator's sorted file). The 64-bit
fingerprint space is cut into `buckets` (a power of two) by its top bits;
bucket b holds the fingerprints whose top log2(buckets) bits are b, so a
bucket's files are a contiguous slice of the one sorted file Mercator kept.
Each bucket has up to two files of raw little-endian uint64, both sorted:

    b00ff.g0000002a.base    the bulk of the bucket
    b00ff.g00000031.delta   fingerprints added since the base was written

A merge (one sequential pass per touched bucket, buckets in order) checks a
sorted batch of fingerprints against base and delta, and writes what is new:
into a new delta, or, for the buckets that are folded this time, into a new
base (old base + delta + new, merged in bounded-size windows). Files are
immutable and named by the merge that wrote them (`g` = merge number); the
set switches to them only when the DUE commits its manifest, so a merge is
atomic as a whole and a crash leaves at most unreferenced files, which
`sweep` removes.

Why a delta. Rewriting every bucket on every merge (classic Mercator,
`delta_ratio=0`) costs a write of the whole set per merge: quadratic in the
number of URLs seen. With a delta per bucket a merge writes only the small
deltas and folds a bounded number of buckets (those whose delta has grown to
`delta_ratio` of their base, most overdue first), so a merge writes about
set/8 instead of the set (default ratio 1/8) and still reads each touched
base once, sequentially. Memory is bounded by the merge's batch plus one
window (`window_entries`) of one bucket, however large the set grows.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FP_DTYPE = np.dtype("<u8")
FP_BYTES = 8
FP_BITS = 64
MAX_BUCKETS = 1 << 16              # bucket numbers are four hex digits in file names
DEFAULT_WINDOW_ENTRIES = 1 << 22   # 32 MiB of a bucket in memory at once
FSYNC_THREADS = 16                 # parallel fsyncs share the file system's journal commits
BASE, DELTA = "base", "delta"


class CorruptSetError(RuntimeError):
    """A bucket file does not match the manifest."""


def file_name(bucket: int, gen: int, kind: str) -> str:
    """Name of a bucket file written by merge `gen`."""
    return f"b{bucket:04x}.g{gen:08x}.{kind}"


@dataclass
class BucketTable:
    """Per bucket: generation and fingerprint count of its base and delta (0 = no file)."""
    base_gen: np.ndarray
    base_n: np.ndarray
    delta_gen: np.ndarray
    delta_n: np.ndarray

    @classmethod
    def empty(cls, buckets: int) -> BucketTable:
        return cls(*(np.zeros(buckets, dtype=np.int64) for _ in range(4)))

    @classmethod
    def from_json(cls, data: dict) -> BucketTable:
        return cls(*(np.asarray(data[k], dtype=np.int64) for k in ("base_gen", "base_n", "delta_gen", "delta_n")))

    def to_json(self) -> dict:
        return {k: getattr(self, k).tolist() for k in ("base_gen", "base_n", "delta_gen", "delta_n")}

    def copy(self) -> BucketTable:
        return BucketTable(self.base_gen.copy(), self.base_n.copy(), self.delta_gen.copy(), self.delta_n.copy())

    def files(self) -> set[str]:
        """Names of the files this table refers to."""
        names = {file_name(int(b), int(g), BASE) for b, g in enumerate(self.base_gen.tolist()) if g}
        names |= {file_name(int(b), int(g), DELTA) for b, g in enumerate(self.delta_gen.tolist()) if g}
        return names


@dataclass
class MergePlan:
    """What one merge found and wrote, before the DUE commits it."""
    gen: int
    new_mask: np.ndarray                      # per input fingerprint: not in the set before
    table: BucketTable                        # the table after this merge
    written: list[Path] = field(default_factory=list)
    obsolete: list[Path] = field(default_factory=list)
    touched: int = 0                          # buckets that had input fingerprints
    folded: int = 0                           # buckets whose base was rewritten
    bytes_written: int = 0


class DiskSet:
    """A set of uint64 fingerprints in bucketed sorted files, grown by merges."""

    def __init__(self, directory: Path, buckets: int, delta_ratio: float,
                 window_entries: int = DEFAULT_WINDOW_ENTRIES, durable: bool = True) -> None:
        if buckets < 1 or buckets > MAX_BUCKETS or buckets & (buckets - 1):
            raise ValueError(f"due buckets must be a power of two between 1 and {MAX_BUCKETS}, got {buckets}")
        if not 0 <= delta_ratio:
            raise ValueError(f"due delta_ratio must be >= 0, got {delta_ratio}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.buckets = buckets
        self.shift = FP_BITS - buckets.bit_length() + 1
        self.delta_ratio = delta_ratio
        self.window_entries = max(1, int(window_entries))
        self.durable = durable
        self.table = BucketTable.empty(buckets)
        self._pool: ThreadPoolExecutor | None = None

    # --- state -------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Fingerprints in the set."""
        return int(self.table.base_n.sum() + self.table.delta_n.sum())

    @property
    def bytes(self) -> int:
        """Bytes of fingerprint data in the bucket files (8 per fingerprint)."""
        return self.count * FP_BYTES

    def load(self, table: BucketTable) -> None:
        """Adopt a table read from the manifest, checking that its files are there and whole."""
        if len(table.base_n) != self.buckets:
            raise CorruptSetError(f"manifest has {len(table.base_n)} buckets, expected {self.buckets}")
        for kind, gens, counts in ((BASE, table.base_gen, table.base_n), (DELTA, table.delta_gen, table.delta_n)):
            for b in np.flatnonzero(gens).tolist():
                path = self.directory / file_name(b, int(gens[b]), kind)
                want = int(counts[b]) * FP_BYTES
                try:
                    size = path.stat().st_size
                except FileNotFoundError:
                    raise CorruptSetError(f"{path} is missing (the manifest refers to it)") from None
                if size != want:
                    raise CorruptSetError(f"{path} has {size} bytes, the manifest says {want}")
        self.table = table

    def sweep(self) -> list[str]:
        """Delete files the table does not refer to (left by a merge that never committed)."""
        keep = self.table.files()
        removed = []
        for path in self.directory.iterdir():
            if path.name not in keep:
                path.unlink()
                removed.append(path.name)
        return removed

    def bucket_of(self, fps: np.ndarray) -> np.ndarray:
        """Bucket number of each fingerprint."""
        if self.buckets == 1:
            return np.zeros(len(fps), dtype=np.int64)
        return (fps >> np.uint64(self.shift)).astype(np.int64)

    def contains(self, fps: np.ndarray) -> np.ndarray:
        """Membership of arbitrary fingerprints (tests and tools; not the merge path)."""
        fps = np.asarray(fps, dtype=np.uint64)
        order = np.argsort(fps, kind="stable")
        keys = fps[order]
        found = np.zeros(len(keys), dtype=bool)
        bounds = self._bounds(keys)
        for b in np.flatnonzero(np.diff(bounds)).tolist():
            lo, hi = int(bounds[b]), int(bounds[b + 1])
            found[lo:hi] = self._present(b, keys[lo:hi], self._delta(b))
        out = np.empty(len(fps), dtype=bool)
        out[order] = found
        return out

    # --- merge -------------------------------------------------------------------

    def merge(self, keys: np.ndarray, gen: int, fold_budget: int | None = None) -> MergePlan:
        """Check sorted unique `keys` against the set and write what is new.

        Returns the plan; nothing is visible until `adopt(plan)`, which the DUE
        calls after its manifest (naming `plan.table`) is durable. Written
        files are fsynced before this returns. `fold_budget` caps how many
        buckets are folded (None: the default share, buckets * delta_ratio).
        """
        table = self.table.copy()
        plan = MergePlan(gen, np.zeros(len(keys), dtype=bool), table)
        bounds = self._bounds(keys)
        touched = np.flatnonzero(np.diff(bounds))
        plan.touched = len(touched)
        # Pass 1: what is new, bucket by bucket (each base read once, in windows);
        # only the new fingerprints are kept, so memory stays one batch + one window.
        new_parts: dict[int, np.ndarray] = {}
        for b in touched.tolist():
            lo, hi = int(bounds[b]), int(bounds[b + 1])
            kb = keys[lo:hi]
            delta = self._delta(b)
            fresh = ~self._present(b, kb, delta)
            plan.new_mask[lo:hi] = fresh
            if fresh.any():
                new_parts[b] = kb[fresh]
        # Pass 2: write new deltas, or fold the most overdue buckets into new bases.
        folds = self._choose_folds(new_parts, fold_budget)
        try:
            for b in sorted(set(new_parts) | folds):
                adds = _merge_sorted(self._delta(b), new_parts.get(b, _EMPTY))   # deltas are small: read again
                if b in folds:
                    self._write_base(plan, b, adds)
                else:
                    self._write_delta(plan, b, adds)
            self._fsync(plan.written)
        except BaseException:
            self.discard(plan)
            raise
        return plan

    def adopt(self, plan: MergePlan) -> None:
        """Switch to the merged files (after the manifest commit) and delete the old ones."""
        self.table = plan.table
        for path in plan.obsolete:
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def discard(self, plan: MergePlan) -> None:
        """Delete the files of a merge that will not be committed."""
        for path in plan.written:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        plan.written.clear()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # --- internals ---------------------------------------------------------------

    def _bounds(self, keys: np.ndarray) -> np.ndarray:
        """Index in sorted `keys` where each bucket starts, plus len(keys) at the end."""
        starts = np.arange(self.buckets, dtype=np.uint64) << np.uint64(self.shift) if self.buckets > 1 \
            else np.zeros(1, dtype=np.uint64)
        bounds = np.empty(self.buckets + 1, dtype=np.int64)
        bounds[:-1] = np.searchsorted(keys, starts)
        bounds[-1] = len(keys)
        return bounds

    def _path(self, b: int, gen: int, kind: str) -> Path:
        return self.directory / file_name(b, gen, kind)

    def _delta(self, b: int) -> np.ndarray:
        gen = int(self.table.delta_gen[b])
        if not gen:
            return _EMPTY
        data = np.fromfile(self._path(b, gen, DELTA), dtype=FP_DTYPE)
        if len(data) != self.table.delta_n[b]:
            raise CorruptSetError(f"{self._path(b, gen, DELTA)} holds {len(data)} fingerprints, "
                                  f"the manifest says {int(self.table.delta_n[b])}")
        return data.astype(np.uint64, copy=False)

    def _present(self, b: int, kb: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Which sorted keys of bucket b are in its delta or its base."""
        present = _isin_sorted(kb, delta)
        count = int(self.table.base_n[b])
        if count:
            rest = np.flatnonzero(~present)
            if len(rest):
                present[rest] = self._in_base(b, count, kb[rest])
        return present

    def _in_base(self, b: int, count: int, keys: np.ndarray) -> np.ndarray:
        """Membership of sorted keys in bucket b's base, one mapped window at a time."""
        path = self._path(b, int(self.table.base_gen[b]), BASE)
        found = np.zeros(len(keys), dtype=bool)
        k0 = 0
        for start in range(0, count, self.window_entries):
            n = min(self.window_entries, count - start)
            window = np.memmap(path, dtype=FP_DTYPE, mode="r", offset=start * FP_BYTES, shape=(n,))
            k1 = len(keys) if start + n >= count else int(np.searchsorted(keys, window[-1], side="right"))
            if k1 > k0:
                found[k0:k1] = _isin_sorted(keys[k0:k1], window)
            del window
            k0 = k1
            if k0 >= len(keys):
                break
        return found

    def _choose_folds(self, new_parts: dict[int, np.ndarray], fold_budget: int | None) -> set[int]:
        """Buckets to fold this merge: all with data when delta_ratio is 0, else the most overdue."""
        t = self.table
        pending = t.delta_n.copy()
        for b, part in new_parts.items():
            pending[b] += len(part)
        if self.delta_ratio == 0:
            return set(np.flatnonzero(pending).tolist())
        due = np.flatnonzero((pending > 0) & (pending >= self.delta_ratio * t.base_n))
        if not len(due):
            return set()
        budget = fold_budget if fold_budget is not None else max(1, math.ceil(self.buckets * self.delta_ratio))
        if len(due) > budget:
            overdue = pending[due] / (t.base_n[due] + 1.0)
            due = due[np.argsort(-overdue, kind="stable")[:budget]]
        return set(due.tolist())

    def _write_base(self, plan: MergePlan, b: int, adds: np.ndarray) -> None:
        """New base for bucket b: old base merged with `adds` (sorted, disjoint), in windows."""
        t = plan.table
        old_gen, old_n = int(t.base_gen[b]), int(t.base_n[b])
        dst = self._path(b, plan.gen, BASE)
        plan.written.append(dst)
        with open(dst, "wb") as out:
            if old_n:
                src = self._path(b, old_gen, BASE)
                a0 = 0
                with open(src, "rb") as f:
                    for start in range(0, old_n, self.window_entries):
                        n = min(self.window_entries, old_n - start)
                        chunk = np.fromfile(f, dtype=FP_DTYPE, count=n)
                        if len(chunk) != n:
                            raise CorruptSetError(f"{src} is shorter than the manifest says")
                        a1 = len(adds) if start + n >= old_n else int(np.searchsorted(adds, chunk[-1], side="right"))
                        _merge_sorted(chunk, adds[a0:a1]).astype(FP_DTYPE, copy=False).tofile(out)
                        a0 = a1
                plan.obsolete.append(src)
            else:
                adds.astype(FP_DTYPE, copy=False).tofile(out)
        if t.delta_gen[b]:
            plan.obsolete.append(self._path(b, int(t.delta_gen[b]), DELTA))
        t.base_gen[b], t.base_n[b] = plan.gen, old_n + len(adds)
        t.delta_gen[b], t.delta_n[b] = 0, 0
        plan.folded += 1
        plan.bytes_written += (old_n + len(adds)) * FP_BYTES

    def _write_delta(self, plan: MergePlan, b: int, delta: np.ndarray) -> None:
        t = plan.table
        dst = self._path(b, plan.gen, DELTA)
        plan.written.append(dst)
        delta.astype(FP_DTYPE, copy=False).tofile(dst)
        if t.delta_gen[b]:
            plan.obsolete.append(self._path(b, int(t.delta_gen[b]), DELTA))
        t.delta_gen[b], t.delta_n[b] = plan.gen, len(delta)
        plan.bytes_written += len(delta) * FP_BYTES

    def _fsync(self, paths: list[Path]) -> None:
        """fsync the files in parallel (one shared journal commit), then the directory."""
        if not paths or not self.durable:
            return
        if len(paths) == 1:
            _fsync_path(paths[0])
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=FSYNC_THREADS, thread_name_prefix="due-fsync")
            list(self._pool.map(_fsync_path, paths))
        fsync_dir(self.directory)


_EMPTY = np.empty(0, dtype=np.uint64)


def _isin_sorted(keys: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Membership of each key in a sorted array (both uint64)."""
    if len(sorted_set) == 0 or len(keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    pos = np.searchsorted(sorted_set, keys)
    np.minimum(pos, len(sorted_set) - 1, out=pos)
    return sorted_set[pos] == keys


def _merge_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Union of two sorted arrays with no common element, sorted."""
    if len(b) == 0:
        return a
    if len(a) == 0:
        return b
    return np.insert(a, np.searchsorted(a, b), b)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries (new, renamed, deleted files) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

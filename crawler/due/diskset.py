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

The passes over the buckets (which keys are new; writing the new deltas and
bases) are one call each of the merge kernels (`merge_pass`: compiled, GIL
released; or their numpy twins); this module decides what is written where
and keeps the table.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crawler.config.schema import DueConfig
from crawler.due import merge_pass
from crawler.fsutil import fsync_dir

FP_DTYPE = np.dtype("<u8")
FP_BYTES = 8
FP_BITS = 64
MAX_BUCKETS = 1 << 16              # bucket numbers are four hex digits in file names
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
    written: list[str] = field(default_factory=list)
    obsolete: list[str] = field(default_factory=list)
    touched: int = 0                          # buckets that had input fingerprints
    folded: int = 0                           # buckets whose base was rewritten
    bytes_written: int = 0


class DiskSet:
    """A set of uint64 fingerprints in bucketed sorted files, grown by merges."""

    def __init__(self, directory: Path, buckets: int, delta_ratio: float,
                 window_entries: int = DueConfig.window_entries, durable: bool = True) -> None:
        if buckets < 1 or buckets > MAX_BUCKETS or buckets & (buckets - 1):
            raise ValueError(f"due buckets must be a power of two between 1 and {MAX_BUCKETS}, got {buckets}")
        if not 0 <= delta_ratio:
            raise ValueError(f"due delta_ratio must be >= 0, got {delta_ratio}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._dir_name = str(self.directory)
        self.buckets = buckets
        self.shift = FP_BITS - buckets.bit_length() + 1
        self.delta_ratio = delta_ratio
        self.window_entries = max(1, int(window_entries))
        self.durable = durable
        self.table = BucketTable.empty(buckets)
        # A lookup from another thread (`contains`, the DUE's peek) and a merge's adopt (the merge thread:
        # switch the table, delete the replaced files) exclude each other: a lookup reads whole table,
        # whole files.
        self._adopting = threading.Lock()
        self._paths_of: tuple[BucketTable, tuple] | None = None    # (table, its _file_paths)

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
        """Membership of arbitrary fingerprints (the DUE's peek, tests and tools; not the merge path).

        Any thread: a merge's adopt waits for it. Each key costs a few cache lines of a mapped bucket
        file (the pages a binary search touches), not a pass over the bucket.
        """
        fps = np.asarray(fps, dtype=np.uint64)
        keys = np.unique(fps)
        with self._adopting:
            new_mask = self._find_new(keys, self._bounds(keys), self.table)[0]
        return ~new_mask[np.searchsorted(keys, fps)]

    # --- merge -------------------------------------------------------------------

    def merge(self, keys: np.ndarray, gen: int, fold_budget: int | None = None) -> MergePlan:
        """Check sorted unique `keys` against the set and write what is new.

        Returns the plan; nothing is visible until `adopt(plan)`, which the DUE
        calls after its manifest (naming `plan.table`) is durable. Written
        files are fsynced before this returns. `fold_budget` caps how many
        buckets are folded (None: the default share, buckets * delta_ratio).
        """
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        table = self.table.copy()
        bounds = self._bounds(keys)
        # Pass 1: what is new, bucket by bucket (each base read once, in windows).
        new_mask, new_counts, paths = self._find_new(keys, bounds, table)
        plan = MergePlan(gen, new_mask, table, touched=int(np.count_nonzero(np.diff(bounds))))
        # Pass 2: write new deltas, or fold the most overdue buckets into new bases.
        folds = self._choose_folds(new_counts, fold_budget)
        write = sorted(set(np.flatnonzero(new_counts).tolist()) | folds)
        fold_flags = np.array([b in folds for b in write], dtype=np.uint8)
        out_paths = []
        for b, fold in zip(write, fold_flags.tolist()):
            adds = int(table.delta_n[b] + new_counts[b])
            out_paths.append(os.fsencode(self._record_write(plan, b, adds, BASE if fold else DELTA)))
        try:
            bad = merge_pass.write_buckets(keys, new_mask, bounds, *paths, np.array(write, dtype=np.int64),
                                            out_paths, fold_flags, self.window_entries)
            if bad is not None:
                raise CorruptSetError(_size_message(*bad))
            self._fsync(plan.written)
        except BaseException:
            self.discard(plan)
            raise
        return plan

    def adopt(self, plan: MergePlan) -> None:
        """Switch to the merged files (after the manifest commit) and delete the old ones."""
        with self._adopting:
            self.table = plan.table
            merge_pass.remove_files([os.fsencode(p) for p in plan.obsolete])

    def discard(self, plan: MergePlan) -> None:
        """Delete the files of a merge that will not be committed."""
        merge_pass.remove_files([os.fsencode(p) for p in plan.written])
        plan.written.clear()

    def close(self) -> None:
        """Nothing to release (files are opened per pass); kept for the component shape."""

    # --- internals ---------------------------------------------------------------

    def _bounds(self, keys: np.ndarray) -> np.ndarray:
        """Index in sorted `keys` where each bucket starts, plus len(keys) at the end."""
        starts = np.arange(self.buckets, dtype=np.uint64) << np.uint64(self.shift) if self.buckets > 1 \
            else np.zeros(1, dtype=np.uint64)
        bounds = np.empty(self.buckets + 1, dtype=np.int64)
        bounds[:-1] = np.searchsorted(keys, starts)
        bounds[-1] = len(keys)
        return bounds

    def _path(self, b: int, gen: int, kind: str) -> str:
        # A str, not a Path: a merge names ~2 files per bucket, and pathlib cost ~3 ms per merge.
        return os.path.join(self._dir_name, file_name(b, gen, kind))

    def _file_paths(self, table: BucketTable) -> tuple[list, np.ndarray, list, np.ndarray]:
        """Per bucket: base path (bytes or None), base count, delta path, delta count.

        Cached for the current table: a lookup (`contains`, a page's links at a time) would otherwise
        spend most of its time naming every bucket's files."""
        cached = self._paths_of
        if cached is not None and cached[0] is table:
            return cached[1]
        paths = self._make_file_paths(table)
        if table is self.table:
            self._paths_of = (table, paths)
        return paths

    def _make_file_paths(self, table: BucketTable) -> tuple[list, np.ndarray, list, np.ndarray]:
        def paths(gens: np.ndarray, kind: str) -> list[bytes | None]:
            return [os.fsencode(self._path(b, g, kind)) if g else None for b, g in enumerate(gens.tolist())]
        return (paths(table.base_gen, BASE), table.base_n.astype(np.int64),       # copies: the plan's
                paths(table.delta_gen, DELTA), table.delta_n.astype(np.int64))     # table changes next

    def _find_new(self, keys: np.ndarray, bounds: np.ndarray, table: BucketTable):
        """(new_mask, new_counts, file paths) of sorted unique keys: one pass of the kernel."""
        paths = self._file_paths(table)
        new_mask = np.zeros(len(keys), dtype=bool)
        new_counts = np.zeros(self.buckets, dtype=np.int64)
        bad = merge_pass.find_new(np.ascontiguousarray(keys, dtype=np.uint64), bounds, *paths,
                                   self.window_entries, new_mask, new_counts)
        if bad is not None:
            raise CorruptSetError(_size_message(*bad))
        return new_mask, new_counts, paths

    def _choose_folds(self, new_counts: np.ndarray, fold_budget: int | None) -> set[int]:
        """Buckets to fold this merge: all with data when delta_ratio is 0, else the most overdue."""
        t = self.table
        pending = t.delta_n + new_counts
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

    def _record_write(self, plan: MergePlan, b: int, adds: int, kind: str) -> str:
        """Enter in the plan the file this merge writes for bucket b (`adds` = its delta + new keys)."""
        t = plan.table
        dst = self._path(b, plan.gen, kind)
        plan.written.append(dst)
        if t.delta_gen[b]:
            plan.obsolete.append(self._path(b, int(t.delta_gen[b]), DELTA))
        if kind == BASE:
            old_n = int(t.base_n[b])
            if old_n:
                plan.obsolete.append(self._path(b, int(t.base_gen[b]), BASE))
            t.base_gen[b], t.base_n[b] = plan.gen, old_n + adds
            t.delta_gen[b], t.delta_n[b] = 0, 0
            plan.folded += 1
            plan.bytes_written += (old_n + adds) * FP_BYTES
        else:
            t.delta_gen[b], t.delta_n[b] = plan.gen, adds
            plan.bytes_written += adds * FP_BYTES
        return dst

    def _fsync(self, paths: list[str]) -> None:
        """fsync the files in parallel (one shared journal commit), then the directory."""
        if not paths or not self.durable:
            return
        merge_pass.fsync_files([os.fsencode(p) for p in paths], FSYNC_THREADS)
        fsync_dir(self.directory)


def _size_message(path: bytes, size: int, want: int) -> str:
    return f"{os.fsdecode(path)} has {size} bytes, the manifest says {want}"



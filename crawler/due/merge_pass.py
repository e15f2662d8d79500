"""The DUE's merge passes: sort the buffer, find what is new, write bucket files, pick URLs.

Why. A merge runs in a background thread while the node keeps calling
`submit` (docs/due.md). Written as numpy calls per bucket, a merge took the
GIL from the caller some twenty times per bucket, and `submit` ran twice as
long in wall time while a merge was under way. The compiled kernels (in
crawler/_native/due_merge.c and due_files.c) do each pass of a
merge in one call with the GIL released, so the merge runs on the other core
and holds the GIL only for a few short steps.

    sort_unique(fps) -> (keys, first)
        the distinct fingerprints of the buffer, sorted, and the earliest
        buffer position of each (the URL that is kept when a buffer repeats one).
    find_new(keys, bounds, base_paths, base_counts, delta_paths, delta_counts,
             window_entries, new_mask, new_counts) -> None | (path, size, expected)
        bucket b's keys are keys[bounds[b]:bounds[b + 1]]; sets new_mask[i]
        for the keys in neither the bucket's delta nor its base (read
        `window_entries` fingerprints at a time) and new_counts[b].
    write_buckets(keys, new_mask, bounds, base_paths, base_counts, delta_paths,
                  delta_counts, buckets, out_paths, folds, window_entries) -> None | (path, size, expected)
        for each buckets[i]: its delta merged with its new keys, written to
        out_paths[i]; when folds[i], merged into its base as well (a new base).
    fsync_files(paths, threads)
        fsync every file, `threads` at a time, so the file system commits
        them together (compiled: without a Python thread pool and its GIL
        traffic).
    remove_files(paths)
        unlink each file, skipping those already gone.
    pick(urls, positions) -> list
        [urls[p] for p in positions].

Paths are bytes (`os.fsencode`), None where a bucket has no such file. A
bucket file whose size is not 8 bytes per fingerprint of its count ends the
pass, which returns (path, size, expected size): `diskset` raises
CorruptSetError. `write_buckets` does not fsync: `diskset` calls
`fsync_files` for all of them at once.

The `py_` functions are the numpy twins (no compiler, or
CRAWLER_CACHE_PURE_PYTHON=1): same arrays, same file bytes
(tests/unit/test_due_merge_pass.py).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from crawler._native import native_or

FP_DTYPE = np.dtype("<u8")
FP_BYTES = 8
_EMPTY = np.empty(0, dtype=np.uint64)

SizeError = tuple[bytes, int, int]      # (path, size in bytes, expected size)


class _WrongSize(Exception):
    """A bucket file of the wrong size (the twins' way out of a pass)."""

    def __init__(self, path: bytes, size: int, want: int) -> None:
        super().__init__(path)
        self.report = (path, size, want)


# --- pure-Python / numpy twins ------------------------------------------------------

def py_sort_unique(fps: np.ndarray, keys: np.ndarray, first: np.ndarray) -> int:
    """Twin of due_sort_unique: fills keys[:u], first[:u]; returns u."""
    n = len(fps)
    if n == 0:
        return 0
    order = np.argsort(fps, kind="stable")          # stable: a run of equal keys starts at the earliest
    ordered = fps[order]
    head = np.empty(n, dtype=bool)
    head[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=head[1:])
    u = int(np.count_nonzero(head))
    keys[:u] = ordered[head]
    first[:u] = order[head]
    return u


def _open_checked(path: bytes, count: int):
    f = open(path, "rb")
    size = os.fstat(f.fileno()).st_size
    if size != count * FP_BYTES:
        f.close()
        raise _WrongSize(path, size, count * FP_BYTES)
    return f


def _read_delta(path: bytes | None, count: int) -> np.ndarray:
    if path is None or count <= 0:
        return _EMPTY
    with _open_checked(path, count) as f:
        data = np.fromfile(f, dtype=FP_DTYPE, count=count)
    if len(data) != count:
        raise OSError(f"{os.fsdecode(path)}: short read")
    return data.astype(np.uint64, copy=False)


def _isin_sorted(keys: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Membership of each key in a sorted array (both uint64)."""
    if len(sorted_set) == 0 or len(keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    pos = np.searchsorted(sorted_set, keys)
    np.minimum(pos, len(sorted_set) - 1, out=pos)
    return sorted_set[pos] == keys


def _in_base(path: bytes, count: int, keys: np.ndarray, window_entries: int) -> np.ndarray:
    """Membership of sorted keys in a base file, one mapped window at a time."""
    _open_checked(path, count).close()
    found = np.zeros(len(keys), dtype=bool)
    k0 = 0
    for start in range(0, count, window_entries):
        n = min(window_entries, count - start)
        window = np.memmap(path, dtype=FP_DTYPE, mode="r", offset=start * FP_BYTES, shape=(n,))
        k1 = len(keys) if start + n >= count else int(np.searchsorted(keys, window[-1], side="right"))
        if k1 > k0:
            found[k0:k1] = _isin_sorted(keys[k0:k1], window)
        del window
        k0 = k1
        if k0 >= len(keys):
            break
    return found


def py_find_new(keys: np.ndarray, bounds: np.ndarray, base_paths: list[bytes | None], base_counts: np.ndarray,
                delta_paths: list[bytes | None], delta_counts: np.ndarray, window_entries: int,
                new_mask: np.ndarray, new_counts: np.ndarray) -> SizeError | None:
    """Twin of due_find_new."""
    try:
        for b in range(len(bounds) - 1):
            lo, hi = int(bounds[b]), int(bounds[b + 1])
            new_counts[b] = 0
            if hi <= lo:
                continue
            kb = keys[lo:hi]
            present = _isin_sorted(kb, _read_delta(delta_paths[b], int(delta_counts[b])))
            count = int(base_counts[b])
            base = base_paths[b]
            if base is not None and count > 0:
                rest = np.flatnonzero(~present)
                if len(rest):
                    present[rest] = _in_base(base, count, kb[rest], window_entries)
            new_mask[lo:hi] = ~present
            new_counts[b] = len(kb) - int(np.count_nonzero(present))
    except _WrongSize as exc:
        return exc.report
    return None


def _merge_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Union of two sorted arrays with no common element, sorted."""
    if len(b) == 0:
        return a
    if len(a) == 0:
        return b
    return np.insert(a, np.searchsorted(a, b), b)


def py_write_buckets(keys: np.ndarray, new_mask: np.ndarray, bounds: np.ndarray,
                     base_paths: list[bytes | None], base_counts: np.ndarray,
                     delta_paths: list[bytes | None], delta_counts: np.ndarray,
                     buckets: np.ndarray, out_paths: list[bytes], folds: np.ndarray,
                     window_entries: int) -> SizeError | None:
    """Twin of due_write_buckets."""
    try:
        for i, b in enumerate(np.asarray(buckets).tolist()):
            lo, hi = int(bounds[b]), int(bounds[b + 1])
            fresh = keys[lo:hi][new_mask[lo:hi].astype(bool, copy=False)]
            adds = _merge_sorted(_read_delta(delta_paths[b], int(delta_counts[b])), fresh)
            with open(out_paths[i], "wb") as out:
                count = int(base_counts[b])
                if folds[i] and base_paths[b] is not None and count > 0:
                    _fold(out, base_paths[b], count, adds, window_entries)
                else:
                    adds.astype(FP_DTYPE, copy=False).tofile(out)
    except _WrongSize as exc:
        return exc.report
    return None


def _fold(out, path: bytes, count: int, adds: np.ndarray, window_entries: int) -> None:
    """Writes base (read in windows) merged with the sorted, disjoint `adds`."""
    a0 = 0
    with _open_checked(path, count) as f:
        for start in range(0, count, window_entries):
            n = min(window_entries, count - start)
            chunk = np.fromfile(f, dtype=FP_DTYPE, count=n)
            if len(chunk) != n:
                raise OSError(f"{os.fsdecode(path)}: short read")
            a1 = len(adds) if start + n >= count else int(np.searchsorted(adds, chunk[-1], side="right"))
            _merge_sorted(chunk.astype(np.uint64, copy=False), adds[a0:a1]).astype(FP_DTYPE, copy=False).tofile(out)
            a0 = a1


def py_fsync_files(paths: list[bytes], threads: int) -> None:
    """Twin of due_fsync_files."""
    if not paths:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(paths)))) as pool:
        list(pool.map(_fsync_path, paths))


def _fsync_path(path: bytes) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def py_remove_files(paths: list[bytes | None]) -> None:
    """Twin of due_remove_files."""
    for path in paths:
        if path is not None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def py_pick(urls: list[str], positions: np.ndarray) -> list[str]:
    """Twin of due_pick."""
    return [urls[p] for p in np.asarray(positions).tolist()]


# --- the kernels in use ------------------------------------------------------------------

sort_unique_into = native_or("due_sort_unique", py_sort_unique)
find_new = native_or("due_find_new", py_find_new)
write_buckets = native_or("due_write_buckets", py_write_buckets)
fsync_files = native_or("due_fsync_files", py_fsync_files)
remove_files = native_or("due_remove_files", py_remove_files)
pick = native_or("due_pick", py_pick)
COMPILED: bool = find_new is not py_find_new


def sort_unique(fps: np.ndarray, kernel=None) -> tuple[np.ndarray, np.ndarray]:
    """(keys, first): the distinct fingerprints sorted, and each one's earliest position in `fps`."""
    fps = np.ascontiguousarray(fps, dtype=np.uint64)
    keys = np.empty(len(fps), dtype=np.uint64)
    first = np.empty(len(fps), dtype=np.int64)
    u = (kernel or sort_unique_into)(fps, keys, first)
    return keys[:u], first[:u]

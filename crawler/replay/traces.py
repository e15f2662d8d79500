"""Replay's inputs: the splitter's stream logs and plain .npy arrays of fingerprints.

A *stream* is the sequence of fingerprints one cache saw. The paper
simulates one cache per crawling node, so each node's log is its own stream:
the files `splitter-<node>-<seq>.log` of one node in one directory are
concatenated in sequence order (ties, if two runs reused a number, by the
start time in their headers). A plain .npy array of uint64 fingerprints (a
trace from elsewhere) is a stream of its own with no flags, so it belongs
to the `full` trace only. An .npy array with the log's record dtype
(fp u8, dest u2, flags u2, and optionally worker u2) counts as a log stream
without a node id.

A version-2 log names the worker whose page held each URL; `by_worker`
splits a stream into one stream per worker, for replay's one cache per
worker (`--per-worker`). Version-1 logs and plain arrays have no workers.

The two traces of DESIGN 2.3: `full` is every record, `cross` the records
flagged cross-host (bound for a peer), which is what the splitter cache sees
with the default `cache_scope: cross`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crawler.splitter.streamlog import FLAG_CACHE_HIT, FLAG_CROSS, MAGIC, NO_WORKER, read_header, read_records

TRACES: tuple[str, ...] = ("full", "cross")
LOG_GLOB = "splitter-*.log"
NPY_MAGIC = b"\x93NUMPY"


class InputError(ValueError):
    """An input that replay cannot read; the message names the file and what is wrong."""


@dataclass
class Stream:
    """One cache's request sequence (one node's log, or one .npy file)."""

    name: str
    """Label in reports: `node-<id>` for logs, the file name for arrays."""
    node: int | None
    """Node id from the log header (None for a plain array)."""
    files: tuple[Path, ...]
    """The files read, in order."""
    fps: np.ndarray
    """Every fingerprint, in order (uint64, C-contiguous)."""
    flags: np.ndarray | None
    """The log's per-record flags (uint16), or None for a plain array."""
    node_count: int | None = None
    """Nodes in the crawl, from the log header."""
    workers: np.ndarray | None = None
    """The worker of each record (uint16, NO_WORKER for none), or None (version-1 logs, plain arrays)."""
    worker: int | None = None
    """The one worker of a stream made by `by_worker`, else None."""

    def by_worker(self) -> list[Stream]:
        """One stream per worker, in worker order, each its records in their order (the caches of
        one node's workers); a stream without workers raises ValueError."""
        if self.workers is None:
            raise ValueError(f"{self.name}: no worker per record (a version-1 log or a plain array)")
        order = np.argsort(self.workers, kind="stable")
        ids, starts = np.unique(self.workers[order], return_index=True)
        out = []
        for w, idx in zip(ids.tolist(), np.split(order, starts[1:])):
            label = "no worker" if w == NO_WORKER else f"worker {w}"
            flags = None if self.flags is None else np.ascontiguousarray(self.flags[idx])
            out.append(Stream(f"{self.name} {label}", self.node, self.files, np.ascontiguousarray(self.fps[idx]),
                              flags, self.node_count, np.full(len(idx), w, dtype=np.uint16), w))
        return out

    def has_flags(self) -> bool:
        return self.flags is not None

    def trace(self, kind: str) -> np.ndarray:
        """The fingerprints of the `full` or `cross` trace (empty cross for plain arrays)."""
        if kind == "full":
            return self.fps
        if kind == "cross":
            if self.flags is None:
                return np.empty(0, dtype=np.uint64)
            return np.ascontiguousarray(self.fps[(self.flags & FLAG_CROSS) != 0])
        raise ValueError(f"unknown trace {kind!r}; known traces: {', '.join(TRACES)}")

    def logged_cache_hits(self, kind: str) -> int | None:
        """Records the online splitter cache answered with a hit, in this trace (logs only)."""
        if self.flags is None:
            return None
        hit = (self.flags & FLAG_CACHE_HIT) != 0
        if kind == "cross":
            hit &= (self.flags & FLAG_CROSS) != 0
        return int(hit.sum())


def _kind(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if head == MAGIC:
        return "log"
    if head[:6] == NPY_MAGIC:
        return "npy"
    raise InputError(f"{path}: neither a splitter stream log (magic {MAGIC!r}) nor a .npy array")


def find_inputs(paths: list[str | os.PathLike]) -> tuple[list[Path], list[Path]]:
    """(log files, .npy files) named by `paths`. A directory is searched
    recursively for splitter-*.log files, or for *.npy files when it has no logs."""
    logs: list[Path] = []
    arrays: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            # Logs if there are any (a crawl's data directory may hold other
            # arrays, e.g. a static preload), else the .npy traces.
            found_logs = sorted(path.rglob(LOG_GLOB))
            found_arrays = [] if found_logs else sorted(path.rglob("*.npy"))
            if not found_logs and not found_arrays:
                raise InputError(f"{path}: no splitter-*.log or .npy files in this directory")
            logs += found_logs
            arrays += found_arrays
        elif path.is_file():
            (logs if _kind(path) == "log" else arrays).append(path)
        else:
            raise InputError(f"{path}: no such file or directory")
    return list(dict.fromkeys(logs)), list(dict.fromkeys(arrays))


def _sequence(path: Path) -> int:
    tail = path.stem.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _log_streams(files: list[Path]) -> list[Stream]:
    groups: dict[tuple[Path, int], list[tuple[int, float, Path]]] = {}
    counts: dict[tuple[Path, int], int] = {}
    for path in files:
        try:
            header = read_header(path)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
        key = (path.parent.resolve(), header.node_id)
        groups.setdefault(key, []).append((_sequence(path), header.start_time, path))
        counts[key] = header.node_count
    node_dirs: dict[int, int] = {}
    for _, node in groups:
        node_dirs[node] = node_dirs.get(node, 0) + 1
    streams = []
    for key in sorted(groups, key=lambda k: (k[1], str(k[0]))):
        directory, node = key
        ordered = [p for _, _, p in sorted(groups[key])]
        records = [read_records(p) for p in ordered]
        fps = np.concatenate([r["fp"] for r in records]) if records else np.empty(0, dtype=np.uint64)
        flags = np.concatenate([r["flags"] for r in records]) if records else np.empty(0, dtype=np.uint16)
        # A node whose logs mix versions (an upgrade mid-crawl) has workers for part of its stream only.
        with_workers = bool(records) and all("worker" in (r.dtype.names or ()) for r in records)
        workers = np.concatenate([r["worker"] for r in records]) if with_workers else None
        name = f"node-{node}" if node_dirs[node] == 1 else f"node-{node} ({directory})"
        streams.append(Stream(name, node, tuple(ordered), np.ascontiguousarray(fps, dtype=np.uint64),
                              np.ascontiguousarray(flags), counts[key], workers))
    return streams


def _array_stream(path: Path) -> Stream:
    try:
        data = np.load(path, allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the .npy array: {exc}") from exc
    if data.dtype.names is not None:
        needed = ("fp", "dest", "flags")
        if set(needed) - set(data.dtype.names):
            raise InputError(f"{path}: a structured array needs the fields {', '.join(needed)}")
        workers = (np.ascontiguousarray(data["worker"].reshape(-1), dtype=np.uint16)
                   if "worker" in data.dtype.names else None)
        return Stream(path.name, None, (path,), np.ascontiguousarray(data["fp"].reshape(-1), dtype=np.uint64),
                      np.ascontiguousarray(data["flags"].reshape(-1), dtype=np.uint16), None, workers)
    if data.dtype.kind not in "ui" or data.ndim != 1:
        raise InputError(f"{path}: expected a 1-d array of uint64 fingerprints, got {data.dtype} "
                         f"with shape {data.shape}")
    if data.dtype.kind == "i" and len(data) and int(data.min()) < 0:
        raise InputError(f"{path}: fingerprints must not be negative (save them as uint64)")
    return Stream(path.name, None, (path,), np.ascontiguousarray(data, dtype=np.uint64), None)


def per_worker_streams(streams: list[Stream]) -> list[Stream]:
    """Every stream split by worker (`Stream.by_worker`): one cache per worker instead of per node.
    Raises InputError naming a stream without workers."""
    try:
        return [part for stream in streams for part in stream.by_worker()]
    except ValueError as exc:
        raise InputError(f"{exc}: --per-worker needs version-2 splitter logs") from None


def load_streams(paths: list[str | os.PathLike]) -> list[Stream]:
    """Every stream named by `paths` (files or directories): node logs first, by node id."""
    logs, arrays = find_inputs(paths)
    streams = _log_streams(logs) + [_array_stream(p) for p in arrays]
    if not streams:
        raise InputError("no input files")
    return streams

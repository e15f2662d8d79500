"""Replay's inputs read a chunk at a time, so a trace may be longer than RAM.

The streaming replay (streaming.py) reads the same inputs as traces.py - the
splitter's stream logs, .npy arrays of uint64 fingerprints or of the log's
records - plus raw little-endian uint64 files (`*.u64`, no header), and
groups them into the same streams (one per node's logs, in sequence order;
one per array file). But nothing here holds a stream: a `StreamSource` says
which files, where their records start and how many there are (from the
file sizes and headers alone), and `chunks()` reads them in order into one
reused buffer of `chunk_requests` records.

Why reads and not a memory map: the pages of a mapped file count in the
process's resident set while they stay cached, so mapping an 8 GB trace
shows as 8 GB of RSS (and can push out other work); a read into a reused
buffer keeps the resident memory at one chunk.

Records. A log's record size comes from its header (the v1 record is 12
bytes: fp u8 at 0, dest u2 at 8, flags u2 at 10); later versions may append
fields, so the record dtype is built with those offsets and the header's
size as itemsize, and the extra bytes are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crawler.replay.traces import InputError, _sequence, find_inputs
from crawler.splitter.streamlog import FLAG_CROSS, HEADER_SIZE, read_header
from crawler.splitter.streamlog import record_dtype as log_record

RAW_SUFFIX = ".u64"
DEFAULT_CHUNK_REQUESTS = 1 << 22        # 32 MiB of fingerprints a chunk
_FIELDS_BYTES = 12                      # fp, dest, flags: every version's record starts with them


def record_dtype(record_size: int) -> np.dtype:
    """The log's record (fp, dest, flags at their v1 offsets) in records of `record_size` bytes."""
    if record_size < _FIELDS_BYTES:
        raise ValueError(f"record size {record_size} is below the {_FIELDS_BYTES} bytes of fp, dest and flags")
    return np.dtype({"names": ["fp", "dest", "flags"], "formats": ["<u8", "<u2", "<u2"],
                     "offsets": [0, 8, 10], "itemsize": record_size})


@dataclass(frozen=True)
class SourceFile:
    """Where one file's records are: `count` records of `dtype` from byte `offset`."""

    path: Path
    offset: int
    dtype: np.dtype
    count: int


@dataclass(frozen=True)
class Chunk:
    """Consecutive records of one stream: their fingerprints and, for logs, their flags."""

    fps: np.ndarray
    """uint64, C-contiguous; valid until the next chunk is read."""
    flags: np.ndarray | None

    def trace(self, kind: str) -> np.ndarray:
        """The chunk's part of the `full` or `cross` trace (see traces.Stream.trace)."""
        if kind == "full":
            return self.fps
        if self.flags is None:
            return self.fps[:0]
        return np.ascontiguousarray(self.fps[(self.flags & FLAG_CROSS) != 0])


@dataclass(frozen=True)
class StreamSource:
    """One cache's request sequence on disk (traces.Stream's counterpart without the arrays)."""

    name: str
    node: int | None
    files: tuple[SourceFile, ...]
    node_count: int | None = None

    @property
    def requests(self) -> int:
        return sum(f.count for f in self.files)

    def has_flags(self) -> bool:
        return all(f.dtype.names is not None for f in self.files) and bool(self.files)

    def chunks(self, chunk_requests: int = DEFAULT_CHUNK_REQUESTS) -> Iterator[Chunk]:
        """The stream's records in order, `chunk_requests` at a time (a file's last chunk may be shorter).
        One buffer per record size is reused: a chunk is valid until the next one is read."""
        if chunk_requests < 1:
            raise ValueError("chunk_requests must be at least 1")
        buffers: dict[int, bytearray] = {}
        for source in self.files:
            itemsize = source.dtype.itemsize
            buf = buffers.setdefault(itemsize, bytearray(chunk_requests * itemsize))
            try:
                fh = open(source.path, "rb")
            except OSError as exc:
                raise InputError(f"{source.path}: cannot read: {exc.strerror or exc}") from exc
            with fh:
                fh.seek(source.offset)
                left = source.count
                while left > 0:
                    take = min(left, chunk_requests)
                    view = memoryview(buf)[:take * itemsize]
                    got = fh.readinto(view)
                    if got != take * itemsize:
                        raise InputError(f"{source.path}: shorter than its header said (read {got} of "
                                         f"{take * itemsize} bytes); was it truncated while replaying?")
                    records = np.frombuffer(buf, dtype=source.dtype, count=take)
                    if source.dtype.names is None:
                        if source.dtype.kind == "i" and (records < 0).any():
                            raise InputError(f"{source.path}: fingerprints must not be negative (save them as "
                                             f"uint64)")
                        yield Chunk(records.astype(np.uint64, copy=False), None)
                    else:
                        yield Chunk(np.ascontiguousarray(records["fp"], dtype=np.uint64),
                                    np.ascontiguousarray(records["flags"]))
                    left -= take


def _log_file(path: Path) -> tuple[SourceFile, int, int, float]:
    """(the file's records, node id, node count, start time) from its header."""
    try:
        header = read_header(path)
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    header_size = HEADER_SIZE
    try:
        dtype = record_dtype(log_record(header.version).itemsize)      # fp, dest, flags of any version's record
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from exc
    count = (os.path.getsize(path) - header_size) // dtype.itemsize    # a torn last record is ignored
    return SourceFile(path, header_size, dtype, max(0, count)), header.node_id, header.node_count, header.start_time


def _log_sources(paths: list[Path]) -> list[StreamSource]:
    """One source per (directory, node), files in sequence order (ties by start time), as traces.py groups."""
    groups: dict[tuple[Path, int], list[tuple[int, float, SourceFile]]] = {}
    nodes: dict[tuple[Path, int], int] = {}
    for path in paths:
        source, node, node_count, start = _log_file(path)
        key = (path.parent.resolve(), node)
        groups.setdefault(key, []).append((_sequence(path), start, source))
        nodes[key] = node_count
    dirs_per_node: dict[int, int] = {}
    for _, node in groups:
        dirs_per_node[node] = dirs_per_node.get(node, 0) + 1
    out = []
    for key in sorted(groups, key=lambda k: (k[1], str(k[0]))):
        directory, node = key
        files = tuple(s for _, _, s in sorted(groups[key], key=lambda g: (g[0], g[1])))
        name = f"node-{node}" if dirs_per_node[node] == 1 else f"node-{node} ({directory})"
        out.append(StreamSource(name, node, files, nodes[key]))
    return out


def _npy_source(path: Path) -> StreamSource:
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(fh)
            offset = fh.tell()
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the .npy header: {exc}") from exc
    if dtype.names is not None:
        if {"fp", "flags"} - set(dtype.names):
            raise InputError(f"{path}: a structured array needs the fields fp and flags")
    elif dtype.kind not in "ui" or dtype.itemsize != 8 or len(shape) != 1:
        raise InputError(f"{path}: expected a 1-d array of 64-bit fingerprints, got {dtype} with shape {shape}")
    if fortran and len(shape) > 1:
        raise InputError(f"{path}: a Fortran-ordered array cannot be streamed")
    count = int(np.prod(shape)) if shape else 1
    return StreamSource(path.name, None, (SourceFile(path, offset, dtype, count),))


def _raw_source(path: Path) -> StreamSource:
    size = os.path.getsize(path)
    if size % 8:
        raise InputError(f"{path}: a raw {RAW_SUFFIX} file must hold whole uint64 values ({size} bytes)")
    return StreamSource(path.name, None, (SourceFile(path, 0, np.dtype("<u8"), size // 8),))


def open_sources(paths: list[str | os.PathLike]) -> list[StreamSource]:
    """The streams named by `paths` (as traces.load_streams, plus raw *.u64 files), without reading them."""
    raw = [Path(p) for p in paths if Path(p).suffix == RAW_SUFFIX and Path(p).is_file()]
    rest = [p for p in paths if Path(p) not in raw]
    logs, arrays = find_inputs(rest) if rest else ([], [])
    sources = _log_sources(logs) + [_npy_source(p) for p in arrays] + [_raw_source(p) for p in raw]
    if not sources:
        raise InputError("no input files")
    return sources


def total_requests(paths: list[str | os.PathLike]) -> int:
    """Requests in every stream named by `paths`, from file sizes and headers (nothing is loaded)."""
    return sum(s.requests for s in open_sources(paths))

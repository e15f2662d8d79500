"""The splitter's binary stream log: every URL entering the splitter, for replay.

File layout (little-endian), documented in docs/replay.md for outside tools:

    header, 64 bytes:
      magic        8s   b"CRWLSPLT"
      version      u2   2 (1: the older 12-byte records, still read)
      header_size  u2   64
      record_size  u2   16 (12 in version 1)
      node_id      u2
      node_count   u2
      flags        u2   reserved, 0
      start_time   f8   Unix time the file was opened
      (zero padding to 64 bytes)
    records, 16 bytes each, until the end of the file:
      fp           u8   URL fingerprint (crawler.urls.fingerprint)
      dest         u2   node that owns the URL's host
      flags        u2   bit 0: cross (dest != node_id); bit 1: splitter-cache hit
      worker       u2   the node's worker (asyncio task) whose page held the URL,
                        NO_WORKER (0xFFFF) when no worker's page did
      reserved     u2   0
    Version 1 records are the first three fields alone (12 bytes): a crawl's
    older logs stay readable, their worker unknown (`read_records` gives
    them with `record_dtype(1)`; replay treats them as without workers).

The worker field lets replay ask the paper's open question, one cache per
crawling thread or one for the node: `crawler replay --per-worker` splits a
node's stream by it.

A file is rotated when it passes `splitter.log.rotate_bytes`; names are
`splitter-<node>-<seq>.log` in start order. `read_records` maps a whole file
with one `numpy.fromfile`, so a replay reads at disk speed.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from crawler.fsutil import close_durably

MAGIC = b"CRWLSPLT"
VERSION = 2
HEADER_SIZE = 64
RECORD_V1 = np.dtype([("fp", "<u8"), ("dest", "<u2"), ("flags", "<u2")])
RECORD = np.dtype([("fp", "<u8"), ("dest", "<u2"), ("flags", "<u2"), ("worker", "<u2"), ("reserved", "<u2")])
RECORDS_BY_VERSION = {1: RECORD_V1, 2: RECORD}
NO_WORKER = 0xFFFF      # the worker field of a URL no worker's page held (seeds, a peer's, synthetic)
FLAG_CROSS = 1
FLAG_CACHE_HIT = 2
_HEADER = struct.Struct("<8sHHHHHHd")


@dataclass(frozen=True)
class LogHeader:
    version: int
    node_id: int
    node_count: int
    start_time: float


def read_header(path: str | os.PathLike) -> LogHeader:
    with open(path, "rb") as fh:
        raw = fh.read(HEADER_SIZE)
    if len(raw) < HEADER_SIZE or raw[:8] != MAGIC:
        raise ValueError(f"{path}: not a splitter stream log (bad magic)")
    magic, version, header_size, record_size, node, nodes, _flags, start = _HEADER.unpack_from(raw)
    known = RECORDS_BY_VERSION.get(version)
    if known is None or header_size != HEADER_SIZE or record_size != known.itemsize:
        raise ValueError(f"{path}: unsupported stream log version {version} (record size {record_size})")
    return LogHeader(version, node, nodes, start)


def record_dtype(version: int) -> np.dtype:
    """The record layout of a log of this header version (for tools that map the files themselves)."""
    try:
        return RECORDS_BY_VERSION[version]
    except KeyError:
        raise ValueError(f"unsupported stream log version {version}; known: "
                         f"{', '.join(map(str, RECORDS_BY_VERSION))}") from None


def read_records(path: str | os.PathLike) -> np.ndarray:
    """All whole records of one file, in its version's layout (`record_dtype(header.version)`;
    a torn last record from a crash is ignored)."""
    dtype = record_dtype(read_header(path).version)
    size = os.path.getsize(path) - HEADER_SIZE
    count = size // dtype.itemsize
    return np.fromfile(path, dtype=dtype, count=count, offset=HEADER_SIZE)


class StreamLog:
    """Appends records in page-sized chunks; one write per page, no per-URL objects."""

    def __init__(self, directory: str | os.PathLike, node_id: int, node_count: int, rotate_bytes: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.node_id = node_id
        self.node_count = node_count
        self.rotate_bytes = rotate_bytes
        existing = sorted(self.dir.glob(f"splitter-{node_id}-*.log"))
        self._seq = int(existing[-1].stem.rsplit("-", 1)[1]) + 1 if existing else 0
        self._file: BinaryIO | None = None
        self.records = 0
        self.files: list[Path] = []

    def _open(self) -> BinaryIO:
        self.close()
        path = self.dir / f"splitter-{self.node_id}-{self._seq:05d}.log"
        self._seq += 1
        f = self._file = open(path, "wb", buffering=1 << 20)
        header = _HEADER.pack(MAGIC, VERSION, HEADER_SIZE, RECORD.itemsize, self.node_id, self.node_count, 0,
                              time.time())
        f.write(header.ljust(HEADER_SIZE, b"\0"))
        self.files.append(path)
        return f

    def append(self, fps: np.ndarray, dest: np.ndarray, flags: np.ndarray,
               worker: int | np.ndarray = NO_WORKER) -> None:
        """One page's records; `worker` is the worker whose page it was (one for all, or one per URL)."""
        f = self._file
        if f is None or f.tell() >= self.rotate_bytes:
            f = self._open()
        rec = np.zeros(len(fps), dtype=RECORD)
        rec["fp"] = fps
        rec["dest"] = dest
        rec["flags"] = flags
        rec["worker"] = worker
        f.write(rec.tobytes())
        self.records += len(fps)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            close_durably(self._file)
            self._file = None

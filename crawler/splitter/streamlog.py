"""The splitter's binary stream log: every URL entering the splitter, for replay.

File layout (little-endian), documented in docs/replay.md for outside tools:

    header, 64 bytes:
      magic        8s   b"CRWLSPLT"
      version      u2   1
      header_size  u2   64
      record_size  u2   12
      node_id      u2
      node_count   u2
      flags        u2   reserved, 0
      start_time   f8   Unix time the file was opened
      (zero padding to 64 bytes)
    records, 12 bytes each, until the end of the file:
      fp           u8   URL fingerprint (crawler.urls.fingerprint)
      dest         u2   node that owns the URL's host
      flags        u2   bit 0: cross (dest != node_id); bit 1: splitter-cache hit

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
VERSION = 1
HEADER_SIZE = 64
RECORD = np.dtype([("fp", "<u8"), ("dest", "<u2"), ("flags", "<u2")])
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
    if version != VERSION or header_size != HEADER_SIZE or record_size != RECORD.itemsize:
        raise ValueError(f"{path}: unsupported stream log version {version} (record size {record_size})")
    return LogHeader(version, node, nodes, start)


def read_records(path: str | os.PathLike) -> np.ndarray:
    """All whole records of one file (a torn last record from a crash is ignored)."""
    read_header(path)
    size = os.path.getsize(path) - HEADER_SIZE
    count = size // RECORD.itemsize
    return np.fromfile(path, dtype=RECORD, count=count, offset=HEADER_SIZE)


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

    def append(self, fps: np.ndarray, dest: np.ndarray, flags: np.ndarray) -> None:
        f = self._file
        if f is None or f.tell() >= self.rotate_bytes:
            f = self._open()
        rec = np.empty(len(fps), dtype=RECORD)
        rec["fp"] = fps
        rec["dest"] = dest
        rec["flags"] = flags
        f.write(rec.tobytes())
        self.records += len(fps)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            close_durably(self._file)
            self._file = None

"""Append-only segment files holding the parts of host queues that do not fit in RAM.

A spilled run of one host's queue is a *chunk*: one record in the current
segment file, found again by its `ChunkRef` (segment, offset, length) and
summarised by it (count, best and summed quality, first sequence number) so
the scheduling policies can rank a host without reading its chunks back.

    record = header (magic, count, payload bytes, crc32 of payload)
             payload: "seq<TAB>quality<TAB>url\n" per URL, UTF-8

Segments are never rewritten. A segment is deleted when no host queue holds
a chunk in it any more and the latest checkpoint does not name it either
(`pin`): after a crash, recovery reads the checkpoint's chunks, so those
segments must outlive every chunk consumed since (while a new checkpoint is
being written, the old one's and the new one's segments are both pinned). Reads are one `pread` of
a few tens of KB, synchronous on the event loop (cheaper than a thread hop,
and usually served from the page cache since the chunk was written recently
or read ahead).
"""

from __future__ import annotations

import logging
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from crawler.frontier.journal import numbered_files
from crawler.fsutil import close_durably, short_write_error

log = logging.getLogger(__name__)

RECORD_HEAD = struct.Struct("<IIII")       # magic, count, payload bytes, crc32
RECORD_MAGIC = 0x4B4E4843                  # "CHNK"
SEGMENT_NAME = re.compile(r"^seg-(\d{10})\.dat$")
DEFAULT_SEGMENT_BYTES = 64 << 20

Entry = tuple[int, float, str]             # (sequence number, quality, URL)


class ChunkError(Exception):
    """A chunk could not be read back intact (truncated file, bad CRC)."""


@dataclass(slots=True)
class ChunkRef:
    seg: int
    offset: int
    length: int
    count: int
    qmax: float
    qsum: float
    first_seq: int          # the oldest sequence number in the chunk (bfs ranks hosts by it)

    def as_list(self) -> list:
        return [self.seg, self.offset, self.length, self.count, self.qmax, self.qsum, self.first_seq]

    @classmethod
    def from_list(cls, row: list) -> ChunkRef:
        seg, offset, length, count, qmax, qsum, first_seq = row
        return cls(int(seg), int(offset), int(length), int(count), float(qmax), float(qsum), int(first_seq))


def segment_path(directory: Path, number: int) -> Path:
    return directory / f"seg-{number:010d}.dat"


def existing_segments(directory: Path) -> dict[int, Path]:
    return numbered_files(directory, SEGMENT_NAME)


def encode_chunk(entries: list[Entry]) -> bytes:
    """One chunk record: header and payload (see the module docstring)."""
    payload = "".join(f"{seq}\t{q!r}\t{url}\n" for seq, q, url in entries).encode("utf-8", "surrogatepass")
    return RECORD_HEAD.pack(RECORD_MAGIC, len(entries), len(payload), zlib.crc32(payload)) + payload


def chunk_ref(entries: list[Entry], seg: int, offset: int, length: int) -> ChunkRef:
    """The reference of `entries` written as one record at `offset` of segment `seg`."""
    qs = [q for _, q, _ in entries]
    return ChunkRef(seg, offset, length, len(entries), max(qs), sum(qs), min(seq for seq, _, _ in entries))


class ChunkFile:
    """A segment written whole by someone other than the store (a checkpoint's writer thread, with
    a number from `SegmentStore.reserve`): created on the first chunk; `close` fsyncs it. A
    restore reads its chunks like any other segment's."""

    def __init__(self, directory: Path, number: int) -> None:
        self.path = segment_path(directory, number)
        self.number = number
        self._file: BinaryIO | None = None
        self._size = 0

    def write(self, entries: list[Entry]) -> ChunkRef:
        """Append one chunk; returns where it is."""
        if self._file is None:
            self._file = open(self.path, "wb")
        record = encode_chunk(entries)
        self._file.write(record)
        offset, self._size = self._size, self._size + len(record)
        return chunk_ref(entries, self.number, offset, len(record))

    def close(self) -> None:
        """Flush and fsync (the caller fsyncs the directory before naming the file anywhere)."""
        if self._file is not None:
            close_durably(self._file)
            self._file = None

    def discard(self) -> None:
        """Close and delete it (the checkpoint that would have named it failed)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self.path.unlink(missing_ok=True)


class SegmentStore:
    """Writes chunks to the current segment, reads them back, deletes segments nobody needs."""

    def __init__(self, directory: Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 referenced: dict[int, tuple[int, int]] | None = None) -> None:
        """`referenced`: (live chunks, their bytes) per segment named by the checkpoint being
        restored; every other segment file is left over from after that checkpoint and is deleted."""
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._segment_bytes = segment_bytes
        referenced = referenced or {}
        self._live: dict[int, int] = {seg: count for seg, (count, _) in referenced.items()}
        self._live_bytes: dict[int, int] = {seg: size for seg, (_, size) in referenced.items()}
        self._sizes: dict[int, int] = {}            # sealed segments' sizes
        self._pinned: set[int] = set(self._live)
        self._fds: dict[int, int] = {}
        self._dirty: set[int] = set()
        found = existing_segments(directory)
        for number, path in found.items():
            if number not in self._live:
                path.unlink()
        missing = set(self._live) - set(found)
        if missing:
            raise ChunkError(f"{directory}: the checkpoint names segments that are missing: {sorted(missing)}")
        self._sizes = {seg: found[seg].stat().st_size for seg in self._live}
        self._current = max(found, default=0) + 1
        self._current_size = 0
        self.bytes_written = 0
        self.bytes_read = 0
        self.chunks_written = 0
        self.chunks_read = 0
        self.chunks_relocated = 0

    # --- writing ------------------------------------------------------------
    def write(self, entries: list[Entry]) -> ChunkRef:
        """Append one chunk (a run of one host's queue, in order); returns where it is."""
        record = encode_chunk(entries)
        seg, offset = self._append(record)
        self.chunks_written += 1
        return chunk_ref(entries, seg, offset, len(record))

    def _append(self, record: bytes) -> tuple[int, int]:
        """Write one record at the end of the current segment (sealing it first if full)."""
        if self._current_size and self._current_size + len(record) > self._segment_bytes:
            self._seal()
        seg = self._current
        offset = self._current_size
        written = os.pwrite(self._fd(seg, create=True), record, offset)
        if written != len(record):
            raise short_write_error(segment_path(self.directory, seg), written, len(record))
        self._current_size += written
        self._dirty.add(seg)
        self._live[seg] = self._live.get(seg, 0) + 1
        self._live_bytes[seg] = self._live_bytes.get(seg, 0) + written
        self.bytes_written += written
        return seg, offset

    def _seal(self) -> None:
        seg = self._current
        self._sizes[seg] = self._current_size
        self._current += 1
        self._current_size = 0
        if self._live.get(seg, 0) == 0 and seg not in self._pinned:
            self._delete(seg)

    def reserve(self) -> int:
        """A segment number for a `ChunkFile` written elsewhere; the store appends to later ones."""
        if self._current_size or self._current in self._fds:
            self._seal()
        number = self._current
        self._current += 1
        return number

    # --- reading ------------------------------------------------------------
    def read(self, ref: ChunkRef) -> list[Entry]:
        """The chunk's entries; the chunk is consumed (its segment may go once nothing else needs it)."""
        fd = self._fd(ref.seg, create=False)
        record = os.pread(fd, ref.length, ref.offset)
        if len(record) != ref.length:
            raise ChunkError(f"segment {ref.seg}: chunk at {ref.offset} is truncated")
        magic, count, size, crc = RECORD_HEAD.unpack_from(record)
        payload = record[RECORD_HEAD.size:]
        if magic != RECORD_MAGIC or count != ref.count or size != len(payload) or zlib.crc32(payload) != crc:
            raise ChunkError(f"segment {ref.seg}: chunk at {ref.offset} is corrupt")
        entries = []
        for line in payload.decode("utf-8", "surrogatepass").splitlines():
            seq, q, url = line.split("\t", 2)
            entries.append((int(seq), float(q), url))
        self.bytes_read += len(record)
        self.chunks_read += 1
        self.release(ref)
        return entries

    def release(self, ref: ChunkRef) -> None:
        live = self._live.get(ref.seg, 0) - 1
        self._live[ref.seg] = live
        if ref.seg in self._live_bytes:
            self._live_bytes[ref.seg] -= ref.length
        if live <= 0 and ref.seg != self._current and ref.seg not in self._pinned:
            self._delete(ref.seg)

    # --- compaction ---------------------------------------------------------
    def sparse_segments(self, max_live_fraction: float) -> list[int]:
        """Sealed segments whose live chunks fill less than
        `max_live_fraction` of them: a long-queued chunk keeps its whole segment on disk,
        so without moving such chunks disk use would drift far above what is queued."""
        out = []
        for seg, size in self._sizes.items():
            live = self._live_bytes.get(seg)
            if live and size and live < size * max_live_fraction:
                out.append(seg)
        return out

    def dead_bytes(self) -> int:
        """Bytes of sealed segments with live chunks that no live chunk uses (empty segments are
        deleted as soon as no checkpoint names them)."""
        return sum(size - self._live_bytes.get(seg, size) for seg, size in self._sizes.items()
                   if self._live.get(seg, 0) > 0)

    def live_bytes(self) -> int:
        return sum(self._live_bytes.values())

    @property
    def segment_bytes(self) -> int:
        return self._segment_bytes

    def relocate(self, ref: ChunkRef) -> None:
        """Copy a live chunk, byte for byte, to the current segment and point `ref` at the copy."""
        record = os.pread(self._fd(ref.seg, create=False), ref.length, ref.offset)
        if len(record) != ref.length:
            raise ChunkError(f"segment {ref.seg}: chunk at {ref.offset} is truncated")
        seg, offset = self._append(record)
        self.chunks_relocated += 1
        old = ChunkRef(ref.seg, ref.offset, ref.length, ref.count, ref.qmax, ref.qsum, ref.first_seq)
        ref.seg, ref.offset = seg, offset
        self.release(old)

    # --- checkpoints ----------------------------------------------------------
    def pin(self, segments: set[int]) -> None:
        """The new checkpoint names these segments; segments only the old one named may go."""
        old, self._pinned = self._pinned, set(segments)
        for seg in old - self._pinned:
            if self._live.get(seg, 0) <= 0 and seg != self._current:
                self._delete(seg)

    @property
    def pinned(self) -> set[int]:
        return set(self._pinned)

    def dirty_fds(self) -> list[int]:
        """Duplicated descriptors of every segment written since the last call, for the caller to
        fsync (in any thread: a segment deleted meanwhile keeps its data until they are closed)
        and close, before a checkpoint names them."""
        fds = [os.dup(self._fds[seg]) for seg in self._dirty if seg in self._fds]
        self._dirty.clear()
        return fds

    # --- files ------------------------------------------------------------------
    def _fd(self, seg: int, *, create: bool) -> int:
        fd = self._fds.get(seg)
        if fd is None:
            flags = os.O_RDWR | (os.O_CREAT if create else 0)
            fd = os.open(segment_path(self.directory, seg), flags, 0o644)
            self._fds[seg] = fd
        return fd

    def _delete(self, seg: int) -> None:
        fd = self._fds.pop(seg, None)
        if fd is not None:
            os.close(fd)
        self._live.pop(seg, None)
        self._live_bytes.pop(seg, None)
        self._sizes.pop(seg, None)
        self._dirty.discard(seg)
        try:
            segment_path(self.directory, seg).unlink()
        except FileNotFoundError:
            pass

    @property
    def segments(self) -> int:
        return len(existing_segments(self.directory))

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in existing_segments(self.directory).values())

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

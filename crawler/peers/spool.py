"""On-disk spill of batches for a peer that stays down, and the sender's sequence numbers.

One directory per peer (``<spool_dir>/peer-<id>/``) holds:

- ``seg-<n>.spool`` segment files: an 8-byte magic (``MCRPSPL2``: frames of
  peer protocol version 2; ``MCRPSPL1`` files of version 1 are still read, their
  URLs without lineage are valid version-2 batches), then records
  ``u32 frame length | u32 crc32(frame) | frame`` where frame is the encoded
  BATCH frame exactly as it goes on the wire. Segments are append-only; a new
  one starts when the current one reaches `segment_bytes` or when the reader
  has caught up with the writer, so a drained segment can be deleted as soon
  as all its batches are ACKed.
- ``stream.json``: the stream id of this sender->peer stream and the end of
  the leased sequence-number range (see `SeqAllocator`).

Records are read back in sequence-number order (the index is sorted when the
spool is loaded), which keeps the receiver's high-water-mark dedupe sound
even after batches still in memory were dumped at close. Each append is one
write(2) to the page cache: a crash of the process loses nothing written;
a power cut may cut the tail, which the CRC detects (the torn record and
anything after it are dropped with a warning). No fsync per batch (too slow
for the splitter's rate); segments are fsynced when sealed and at close.

Disk I/O here is synchronous on the event loop: appends and reads are one
~60 KB write/pread each, cheaper than handing them to a thread.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import zlib
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from crawler.fsutil import atomic_write, short_write_error
from crawler.peers.frames import BATCH_HEAD, HEADER_BYTES, FrameType, batch_seq, decode_batch

log = logging.getLogger(__name__)

SEGMENT_MAGIC = b"MCRPSPL2"
SEGMENT_MAGICS = (SEGMENT_MAGIC, b"MCRPSPL1")     # what is read: this version's and version 1's
RECORD = struct.Struct(">II")          # frame length, crc32 of the frame
SEGMENT_NAME = re.compile(r"^seg-(\d{10})\.spool$")
STATE_FILE = "stream.json"
SEQ_LEASE = 4096                        # sequence numbers reserved per write of stream.json
STREAM_ID_BYTES = 8


@dataclass(slots=True)
class _Segment:
    number: int
    path: Path
    live: int = 0          # records written and not yet ACKed
    size_bytes: int = 0
    sealed: bool = True


@dataclass(slots=True)
class SpoolStats:
    spilled_total: int = 0     # batches ever written here
    replayed_total: int = 0    # batches read back for sending
    deleted_segments: int = 0
    corrupt_records: int = 0   # torn tails at load, CRC failures at read
    write_errors: int = 0


class Spool:
    """An append-only, in-order, on-disk queue of encoded BATCH frames for one peer."""

    def __init__(self, directory: str | os.PathLike, segment_bytes: int = 64 * 1024 * 1024) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.stats = SpoolStats()
        self._segments: dict[int, _Segment] = {}
        self._index: deque[tuple[int, int, int, int]] = deque()   # unread: (seq, segment, offset, length)
        self._write_seg: _Segment | None = None
        self._write_fd: int | None = None
        self._read_seg: int | None = None
        self._read_fd: int | None = None
        self._next_number = 0
        self._load()

    # --- sizes -------------------------------------------------------------------------

    @property
    def unread(self) -> int:
        """Batches on disk not yet handed out for sending."""
        return len(self._index)

    @property
    def live(self) -> int:
        """Batches on disk not yet ACKed (unread + sent but unacknowledged)."""
        return sum(s.live for s in self._segments.values())

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments.values())

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def max_seq(self) -> int:
        return max((entry[0] for entry in self._index), default=0)

    # --- writing -----------------------------------------------------------------------

    def append(self, frames: list[bytes]) -> list[int]:
        """Append BATCH frames (in sequence order, after everything unread); returns their segment numbers."""
        numbers = []
        for frame in frames:
            seg, offset = self._write(frame)
            self._index.append((batch_seq(frame), seg.number, offset, len(frame)))
            numbers.append(seg.number)
        return numbers

    def prepend(self, frames: list[bytes]) -> None:
        """Write batches older than everything unread into a segment of their own, to be read first, in
        sequence order: a dead connection's unacknowledged batches that lived only in memory (the
        receiver drops a batch numbered below one it processed, so order is not optional). On a
        write error nothing of them stays queued here (they stay in the caller's memory)."""
        if not frames:
            return
        self.seal()
        entries = []
        try:
            for frame in sorted(frames, key=batch_seq):
                seg, offset = self._write(frame)
                entries.append((batch_seq(frame), seg.number, offset, len(frame)))
        except OSError:
            for _, number, _, _ in entries:
                self._segments[number].live -= 1          # written, but not queued: the segment may go
            raise
        finally:
            self.seal()
        self._index.extendleft(reversed(entries))

    def dump(self, frames: list[bytes]) -> None:
        """At close: write batches that only lived in memory into a segment of their own.

        They may be older than records already here; the sorted load puts them
        back in sequence order on the next start.
        """
        if not frames:
            return
        self.seal()
        for frame in sorted(frames, key=batch_seq):
            self._write(frame)
        self.seal()

    def _write(self, frame: bytes) -> tuple[_Segment, int]:
        seg, fd = self._write_seg, self._write_fd
        if seg is None or fd is None or seg.size_bytes >= self.segment_bytes:
            seg, fd = self._open_segment()
        offset = seg.size_bytes + RECORD.size
        try:
            written = os.writev(fd, (RECORD.pack(len(frame), zlib.crc32(frame)), frame))
        except OSError:
            self.stats.write_errors += 1
            raise
        if written != RECORD.size + len(frame):   # disk full mid-record: drop the torn tail
            os.ftruncate(fd, seg.size_bytes)
            self.stats.write_errors += 1
            raise short_write_error(seg.path, written, RECORD.size + len(frame))
        seg.size_bytes += written
        seg.live += 1
        self.stats.spilled_total += 1
        return seg, offset

    def _open_segment(self) -> tuple[_Segment, int]:
        self.seal()
        number = self._next_number
        self._next_number += 1
        path = self.dir / f"seg-{number:010d}.spool"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        os.write(fd, SEGMENT_MAGIC)
        seg = _Segment(number, path, size_bytes=len(SEGMENT_MAGIC), sealed=False)
        self._segments[number] = seg
        self._write_seg, self._write_fd = seg, fd
        return seg, fd

    def seal(self) -> None:
        """Close the segment being written; the next append starts a new one."""
        seg, fd = self._write_seg, self._write_fd
        if seg is None or fd is None:
            return
        self._write_seg = self._write_fd = None
        seg.sealed = True
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._maybe_delete(seg)

    # --- reading -----------------------------------------------------------------------

    def read_next(self) -> tuple[bytes, int] | None:
        """The oldest unread frame and its segment number (for `ack`), or None."""
        while self._index:
            seq, number, offset, length = self._index.popleft()
            frame = self._pread(number, offset, length)
            if not self._index and self._write_seg is not None:
                self.seal()            # caught up: the segment can go once its batches are ACKed
            if frame is not None:
                self.stats.replayed_total += 1
                return frame, number
            self.ack(number)           # unreadable record: counted, never sent
        return None

    def _pread(self, number: int, offset: int, length: int) -> bytes | None:
        fd = self._read_fd
        if self._read_seg != number or fd is None:
            self._close_reader()
            fd = self._read_fd = os.open(self._segments[number].path, os.O_RDONLY)
            self._read_seg = number
        head = os.pread(fd, RECORD.size, offset - RECORD.size)
        frame = os.pread(fd, length, offset)
        if len(head) != RECORD.size or len(frame) != length or RECORD.unpack(head) != (length, zlib.crc32(frame)):
            self.stats.corrupt_records += 1
            log.warning("spool %s: corrupt record at offset %d skipped", self._segments[number].path, offset)
            return None
        return frame

    def _close_reader(self) -> None:
        if self._read_fd is not None:
            os.close(self._read_fd)
        self._read_fd = self._read_seg = None

    def ack(self, number: int) -> None:
        """One batch read from segment `number` was ACKed by the peer."""
        seg = self._segments.get(number)
        if seg is None:
            return
        seg.live -= 1
        self._maybe_delete(seg)

    def _maybe_delete(self, seg: _Segment) -> None:
        if seg.sealed and seg.live <= 0:          # live counts unread records too
            if self._read_seg == seg.number:
                self._close_reader()
            seg.path.unlink(missing_ok=True)
            del self._segments[seg.number]
            self.stats.deleted_segments += 1

    # --- loading -----------------------------------------------------------------------

    def _load(self) -> None:
        entries = []
        for path in sorted(self.dir.iterdir()):
            match = SEGMENT_NAME.match(path.name)
            if not match:
                continue
            number = int(match.group(1))
            self._next_number = max(self._next_number, number + 1)
            seg = _Segment(number, path)
            self._segments[number] = seg
            entries.extend(self._scan(seg))
        entries.sort(key=lambda entry: entry[0])
        seen = set()
        for entry in entries:
            if entry[0] in seen:                 # never written twice; be safe anyway
                self._segments[entry[1]].live -= 1
                continue
            seen.add(entry[0])
            self._index.append(entry)
        for seg in list(self._segments.values()):
            self._maybe_delete(seg)
        if self._index:
            log.info("spool %s: %d batches to replay", self.dir, len(self._index))

    def _scan(self, seg: _Segment) -> list[tuple[int, int, int, int]]:
        """Index a segment's valid records; cut a torn or corrupt tail."""
        entries = []
        with open(seg.path, "r+b") as f:
            data = f.read()
            good = 0
            if data[:len(SEGMENT_MAGIC)] in SEGMENT_MAGICS:
                pos = good = len(SEGMENT_MAGIC)
                while pos + RECORD.size <= len(data):
                    length, crc = RECORD.unpack_from(data, pos)
                    start, end = pos + RECORD.size, pos + RECORD.size + length
                    if (length < HEADER_BYTES + BATCH_HEAD.size or end > len(data)
                            or data[start + HEADER_BYTES - 1] != FrameType.BATCH
                            or zlib.crc32(data[start:end]) != crc):
                        break
                    entries.append((batch_seq(data[start:end]), seg.number, start, length))
                    pos = good = end
            if good != len(data):
                self.stats.corrupt_records += 1
                log.warning("spool %s: %d bytes of torn or corrupt tail dropped", seg.path, len(data) - good)
                f.truncate(good)
        seg.size_bytes = good
        seg.live = len(entries)
        return entries

    def close(self) -> None:
        self.seal()
        self._close_reader()


@dataclass
class SeqAllocator:
    """Sequence numbers of one sender->peer stream that never repeat, even across restarts.

    `stream.json` holds a random stream id (new when the file is new, so a
    wiped spool directory starts a new stream and the receiver resets its
    dedupe state) and the end of the leased range: a restart continues after
    the lease, skipping at most SEQ_LEASE numbers. Gaps are harmless.
    """
    path: Path
    stream_id: int = 0
    _next: int = 1
    _lease_end: int = 1

    @classmethod
    def open(cls, directory: str | os.PathLike, floor: int = 0) -> SeqAllocator:
        Path(directory).mkdir(parents=True, exist_ok=True)
        path = Path(directory) / STATE_FILE
        alloc = cls(path)
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            alloc.stream_id = int(state["stream_id"])
            alloc._next = int(state["lease_end"])
        except FileNotFoundError:
            alloc.stream_id = int.from_bytes(os.urandom(STREAM_ID_BYTES), "big") or 1
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: unreadable stream state ({exc}); "
                             "remove the file to start a new stream") from None
        alloc._next = max(alloc._next, floor + 1)
        alloc._lease_end = alloc._next
        alloc._extend()
        return alloc

    def next(self) -> int:
        if self._next >= self._lease_end:
            self._extend()
        seq = self._next
        self._next += 1
        return seq

    def _extend(self) -> None:
        self._lease_end = self._next + SEQ_LEASE
        atomic_write(self.path, json.dumps({"stream_id": self.stream_id, "lease_end": self._lease_end}))


def spooled_urls(directory: str | os.PathLike) -> list[str]:
    """The URLs of every batch waiting in one peer's spool directory, in sequence order (read by
    `crawler resize`, which hands them to their new owners; the spool itself is left as it is)."""
    spool = Spool(directory)
    urls: list[str] = []
    try:
        while (item := spool.read_next()) is not None:
            urls += decode_batch(item[0][HEADER_BYTES:])[1]
    finally:
        spool.close()
    return urls

"""The DUE's journal: every URL the buffer accepts, on disk before `submit` returns.

Why. The buffer of a Mercator DUE holds URLs that are accepted but not yet
decided (new or seen) until the next merge. If the process dies, they must
not be lost: the crawler has already dropped them everywhere else. So every
buffered URL is appended here before `submit` returns. The journal is only
read after a crash: to rebuild the buffer, and to hand out again the new
URLs of a merge that committed but may not have reached the caller.

Format. A segment file `jNNNNNNNN.log` starts with the 8-byte magic
`DUEJRNL1`, followed by records, one per `submit` that had misses:

    u32 tag | u32 count | u32 blob_bytes | u32 crc32 | count x u64 fps | blob

all little-endian; crc32 covers the fingerprints and the blob. With tag
`LINES` the blob is the URLs joined by "\\n" (canonical URLs contain no raw
newline); with tag `LENGTHS` (the rare fallback) it is count x u32 byte
lengths followed by the concatenated URLs. The active segment is written
through a shared file mapping of a 4 MiB window, preallocated: appending is a
copy into the page cache with no system call, a killed process loses nothing
it wrote, and only the current window (and the next, which a helper thread
reserves and maps ahead of time) counts in the process's RSS. A segment
starts with a window sized from the last one's length (from 64 KiB: a
crawl's early merges rotate segments of a few KB, and reserving, faulting in
and cutting back two 4 MiB windows per merge was ~45% of such a merge's
CPU); windows then grow fourfold up to 4 MiB. After a
crash the segment ends in a torn record or in unused (zero) reserve; the crc
and the tag find the end and recovery truncates the segment there.

Segments. The DUE rotates to a new segment when it freezes the buffer for a
merge, so a merge owns whole segments and deletes them once the URLs it
found new have been handed to the caller. Entry positions (the order of
entries across a merge's segments) identify buffered URLs.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import sys
import zlib
from bisect import bisect_left
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crawler._native import NATIVE

SEGMENT_MAGIC = b"DUEJRNL1"
TAG_LINES = 0x4C4A5544      # b"DUJL": URLs joined by newlines
TAG_LENGTHS = 0x504A5544    # b"DUJP": u32 lengths, then the URLs back to back
RECORD_HEADER = struct.Struct("<IIII")
_HEADER_PACK = RECORD_HEADER.pack
_crc32 = zlib.crc32
FP_DTYPE = np.dtype("<u8")
FP_BYTES = 8
LENGTH_DTYPE = np.dtype("<u4")
READ_CHUNK_BYTES = 8 << 20   # sequential reads of a segment, bounded memory
WINDOW_BYTES = 4 << 20       # the active segment is reserved and mapped this much at a time
NEXT_OVERLAP_BYTES = 1 << 20  # the next window starts this far before the current one ends
SMALL_WINDOW_BYTES = 64 << 10  # the least a segment starts with when the last one was small
URL_ENCODING = "utf-8"
URL_ERRORS = "surrogatepass"  # never fail on a str the caller gave us
_NEWLINE = b"\n"
_NATIVE_LE = sys.byteorder == "little"   # uint64 arrays are already the file's byte order
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)   # Linux only; elsewhere pages fault in as written
# MAP_POPULATE maps a shared file's pages read-only (for dirty tracking), so the
# first write to each page would still fault, on submit's hot path: ~2 ms per
# window. The compiled `due_populate_write` (MADV_POPULATE_WRITE, with the GIL
# released) takes those faults when the mapper thread maps the window. Without
# the extension they stay where they were.
_POPULATE_WRITE = getattr(NATIVE, "due_populate_write", None)


def first_window_bytes(last_segment_bytes: int | None) -> int:
    """The first window of a new segment: twice what the last segment held, as a power
    of two from SMALL_WINDOW_BYTES to WINDOW_BYTES (SMALL_WINDOW_BYTES when it is not
    known: a fast writer's windows reach WINDOW_BYTES within three slides)."""
    if last_segment_bytes is None:
        return min(WINDOW_BYTES, SMALL_WINDOW_BYTES)
    want = max(SMALL_WINDOW_BYTES, 1 << max(0, 2 * last_segment_bytes - 1).bit_length())
    return min(WINDOW_BYTES, want)


def segment_name(seq: int) -> str:
    """File name of segment number `seq`."""
    return f"j{seq:08d}.log"


def segment_seq(name: str) -> int | None:
    """Segment number of a file name, or None if it is not a segment."""
    if len(name) == 13 and name[0] == "j" and name.endswith(".log") and name[1:9].isdigit():
        return int(name[1:9])
    return None


@dataclass
class ScanResult:
    """What recovery learns from one segment."""
    fps: np.ndarray        # the fingerprints of its valid records, in order
    urls: list[str]        # their URLs
    records: int           # valid records
    valid_bytes: int       # length of the valid prefix
    torn_bytes: int        # bytes after it (a torn or corrupt tail)


class Cursor:
    """Where appends go: the window, its offset, the active segment's size, unsynced writes.

    A journal of its own keeps these here; the DUE's journal keeps them in the
    DUE's front (crawler/due/front.py), whose hot path appends records itself."""

    __slots__ = ("window", "window_at", "active_bytes", "dirty")

    def __init__(self) -> None:
        self.window: mmap.mmap | None = None
        self.window_at = 0
        self.active_bytes = 0
        self.dirty = False


def _cursor_field(name: str, doc: str) -> property:
    return property(lambda self: getattr(self._cursor, name),
                    lambda self, value: setattr(self._cursor, name, value), doc=doc)


class Journal:
    """Append-only segments of (fingerprint, URL) records in one directory."""

    window = _cursor_field("window", "the mapped part of the active segment")
    window_at = _cursor_field("window_at", "its file offset")
    active_bytes = _cursor_field("active_bytes", "the active segment's size")
    dirty = _cursor_field("dirty", "written since its last fsync")

    def __init__(self, directory: Path, durable: bool = True, cursor=None) -> None:
        self.directory = Path(directory)
        self.durable = durable        # False: fsync nothing (tests, throwaway crawls)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = None
        self._cursor = cursor if cursor is not None else Cursor()
        self.window = None
        self.failed: OSError | None = None     # why the last open_segment failed, if it did
        self.window_at = 0
        self.active: int = 0          # number of the segment being appended to
        self.active_bytes = 0
        self.dirty = False
        self._syncer: ThreadPoolExecutor | None = None   # the helper thread: fsyncs and deletions
        self._sync: Future | None = None
        self._removal: Future | None = None
        self._mapper: ThreadPoolExecutor | None = None   # maps the next window ahead of time
        self._next: Future | None = None                 # -> (file offset, mmap) of the next window
        self._retired: Future | None = None              # the last closed segment's unmap and cut
        self._segment_syncer: ThreadPoolExecutor | None = None   # fsyncs a merge's segments

    # --- segments ------------------------------------------------------------

    def path(self, seq: int) -> Path:
        return self.directory / segment_name(seq)

    def existing(self) -> list[int]:
        """Numbers of the segment files present, ascending."""
        found = (segment_seq(p.name) for p in self.directory.iterdir())
        return sorted(s for s in found if s is not None)

    def open_segment(self, seq: int) -> None:
        """Start appending to a new, empty segment `seq` (closing the active one)."""
        size = first_window_bytes(self.active_bytes if self.window is not None else None)
        self.close(wait=False)
        fd = os.open(self.path(seq), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _reserve(fd, 0, size)
            # Not populated here: that takes ~8 ms per 4 MiB, and a merge rotates the
            # segment on the caller's thread, so every early merge of a few URLs paid it.
            # The mapper thread populates the window below while appends begin.
            mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, offset=0)
        except OSError as exc:
            os.close(fd)
            self.failed = exc                     # appends raise OSError until a segment opens again
            raise
        except BaseException:
            os.close(fd)
            raise
        self.failed = None
        mm[:len(SEGMENT_MAGIC)] = SEGMENT_MAGIC
        self._fd, self.window, self.window_at = fd, mm, 0
        self.active, self.active_bytes, self.dirty = seq, len(SEGMENT_MAGIC), True
        if _POPULATE_WRITE is not None:
            self._mapper_pool().submit(_POPULATE_WRITE, mm)
        self._prepare_next()

    def remove(self, seqs: list[int]) -> None:
        """Delete segments (those already gone are ignored)."""
        for seq in seqs:
            try:
                os.unlink(self.path(seq))
            except FileNotFoundError:
                pass

    def remove_soon(self, seqs: list[int]) -> None:
        """Delete segments in the helper thread, in order.

        Unlinking a segment of tens of MB waits for the file system's journal
        while a merge fsyncs its files (measured: ~20 ms per release on this
        VM's ext4), which the hot path need not. An error surfaces at the next
        call, `settle` or `shutdown`."""
        self._check_removal()
        if self._syncer is None:
            self._syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="due-journal-fsync")
        self._removal = self._syncer.submit(self.remove, list(seqs))

    def settle(self) -> None:
        """Wait for the file work handed to the helper threads: deletions, the cut of the
        last closed segment and the reserve of the next window (so the files on disk are
        as the DUE left them)."""
        if self._next is not None:
            wait_for_futures([self._next])        # an error here is the slide's to raise
        if self._removal is not None:
            self._removal.result()
            self._removal = None
        self._collect_retired()

    def _check_removal(self) -> None:
        if self._removal is not None and self._removal.done():
            removal, self._removal = self._removal, None
            removal.result()

    def fsync_active(self) -> None:
        """Make the active segment durable."""
        if self.window is not None and self.dirty and self.durable:
            os.fsync(self._fd)             # writes back the pages dirtied through every window
            self.dirty = False

    def fsync_active_soon(self) -> None:
        """Start an fsync of the active segment in a helper thread (the hot path must not wait on the disk).

        The helper works on a duplicate of the file descriptor, so rotating or
        closing the segment meanwhile is safe. At most one runs at a time.
        """
        if self.window is None or not self.dirty or not self.durable:
            return
        if self._sync is not None and not self._sync.done():
            return
        if self._syncer is None:
            self._syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="due-journal-fsync")
        self.dirty = False
        self._sync = self._syncer.submit(_fsync_and_close, os.dup(self._fd))

    def fsync_segments(self, seqs: list[int]) -> None:
        """Make segments durable (a merge does this before it commits)."""
        if not self.durable:
            return
        for seq in seqs:
            if seq == self.active and self.window is not None:
                self.fsync_active()
                continue
            fd = os.open(self.path(seq), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def fsync_segments_soon(self, seqs: list[int]) -> Future | None:
        """Start making closed segments durable in a helper thread; a merge sorts and
        passes over the set meanwhile and waits for the result before it commits.
        (One merge runs at a time, so only one thread ever calls this.)"""
        if not self.durable:
            return None
        if self._segment_syncer is None:
            self._segment_syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="due-journal-merge-fsync")
        return self._segment_syncer.submit(self.fsync_segments, list(seqs))

    def bytes_on_disk(self) -> int:
        total = 0
        for seq in self.existing():
            try:
                total += self.path(seq).stat().st_size
            except FileNotFoundError:
                pass
        return total

    def close(self, wait: bool = True) -> None:
        """Stop appending: unmap the active segment and cut its unused reserve.

        Both run in the mapper thread, after whatever it is doing for this
        segment. `open_segment` does not wait for them (~3 ms that a merge's
        segment rotation need not spend on the caller's thread); an error then
        surfaces at the next `close` or `shutdown`. Records are in the page
        cache already: a crash before the cut leaves a zero tail, which `scan`
        treats as torn."""
        if self._syncer is not None and self._sync is not None and self._sync.done():
            self._sync.result()                   # an fsync error surfaces here
        self._collect_retired(wait=False)
        self._drop_next()
        if self.window is not None:
            self._retired = self._mapper_pool().submit(_retire, self.window, self._fd, self.active_bytes)
            self.window, self._fd = None, None
        if wait:
            self._collect_retired()

    def _collect_retired(self, wait: bool = True) -> None:
        """Take the last closed segment's unmap and cut (waiting for it, or only if it is
        done); its error is raised here."""
        retired = self._retired
        if retired is not None and (wait or retired.done()):
            self._retired = None
            retired.result()

    def _mapper_pool(self) -> ThreadPoolExecutor:
        if self._mapper is None:
            self._mapper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="due-journal-map")
        return self._mapper

    def shutdown(self) -> None:
        """Close, and wait for the background fsync helper to finish."""
        self.close()
        if self._mapper is not None:
            self._mapper.shutdown(wait=True)
            self._mapper = None
        if self._segment_syncer is not None:
            self._segment_syncer.shutdown(wait=True)
            self._segment_syncer = None
        if self._syncer is not None:
            self._syncer.shutdown(wait=True)
            self._syncer = None
            if self._sync is not None:
                self._sync.result()
            self.settle()

    # --- hot path ------------------------------------------------------------

    def append(self, fps: np.ndarray, urls: list[str]) -> None:
        """Append one record (hot path: once per submit with misses; copies into a mapping, no syscall).

        `fps` is a uint64 array and `urls` the same number of strings. The
        segment is a shared file mapping, so when this returns the record is
        in the kernel's page cache: a killed process loses nothing; power loss
        is bounded by the DUE's journal fsync interval.
        """
        count = len(urls)
        try:
            blob = "\n".join(urls).encode()
        except UnicodeEncodeError:                     # lone surrogates: keep them as given
            blob = "\n".join(urls).encode(URL_ENCODING, URL_ERRORS)
        tag = TAG_LINES
        if blob.count(_NEWLINE) != count - 1:          # a URL holds a newline: rare slow path
            tag, blob = TAG_LENGTHS, _length_blob(urls)
        fb = fps.tobytes() if _NATIVE_LE else fps.astype(FP_DTYPE).tobytes()
        head = _HEADER_PACK(tag, count, len(blob), _crc32(blob, _crc32(fb))) + fb
        if self.window is None:                        # the last open_segment failed (disk full)
            exc = self.failed
            raise OSError(exc.errno if exc else errno.EIO,
                          f"DUE journal has no open segment ({exc.strerror if exc else 'closed'})",
                          str(self.directory))
        pos = self.active_bytes - self.window_at      # offset in the mapped window
        size = len(head) + len(blob)
        if pos + size > len(self.window):
            pos = self._slide(size)
        mm = self.window
        mid = pos + len(head)
        mm[pos:mid] = head
        mm[mid:pos + size] = blob
        self.active_bytes += size
        self.dirty = True

    def advance(self, size: int) -> None:
        """Account for a record of `size` bytes written into `window` at the append
        position by the DUE's submit kernel (crawler/due/submit_pass.py)."""
        self.active_bytes += size
        self.dirty = True

    def _slide(self, size: int) -> int:
        """Move to a window that holds the append position and `size` bytes more; returns the offset in it.

        Normally that is the next window, reserved and mapped ahead of time
        by the mapper thread (reserving and faulting in 4 MiB of new page
        cache costs ~2.5 ms, which the hot path need not wait for); else one
        is mapped here. At most the current and the next window are mapped,
        so the pages of the segment already written do not stay in this
        process's RSS.
        """
        ready = self._take_next(size)
        if ready is not None:
            start, mm = ready
        else:
            start = self.active_bytes - self.active_bytes % mmap.ALLOCATIONGRANULARITY
            length = max(WINDOW_BYTES, self.active_bytes - start + size)
            _reserve(self._fd, start, length)
            mm = _map(self._fd, length, start)
        old, self.window, self.window_at = self.window, mm, start
        self._prepare_next(old)
        return self.active_bytes - start

    def _prepare_next(self, old: mmap.mmap | None = None) -> None:
        """Have the mapper thread unmap the `old` window, then reserve and map the
        window after this one (overlapping its last NEXT_OVERLAP_BYTES, where a
        record that does not fit begins)."""
        self._mapper_pool()
        if old is not None:
            self._mapper.submit(old.close)
        length = len(self.window)
        overlap, following = NEXT_OVERLAP_BYTES, WINDOW_BYTES
        if length < WINDOW_BYTES:                  # a segment's small first windows grow
            overlap, following = min(overlap, length // 2), min(WINDOW_BYTES, 4 * length)
        start = self.window_at + length - overlap
        start -= start % mmap.ALLOCATIONGRANULARITY
        if start > self.window_at:
            self._next = self._mapper.submit(_reserve_and_map, self._fd, start, following)

    def _take_next(self, size: int) -> tuple[int, mmap.mmap] | None:
        """The prepared next window if it holds [append position, + size), else None (it is dropped)."""
        if self._next is None:
            return None
        future, self._next = self._next, None
        try:
            start, mm = future.result()
        except OSError:
            return None                           # mapped here instead, which raises the error again
        if start <= self.active_bytes and self.active_bytes + size <= start + len(mm):
            return start, mm
        mm.close()
        return None

    def _drop_next(self) -> None:
        """Have the mapper thread unmap the prepared window (before the file is cut or closed)."""
        if self._next is not None:
            future, self._next = self._next, None
            self._mapper_pool().submit(_close_prepared, future)

    # --- reading -------------------------------------------------------------

    def scan(self, seq: int) -> ScanResult:
        """Read a segment's valid records (checking every crc) for recovery."""
        path = self.path(seq)
        size = path.stat().st_size
        parts: list[np.ndarray] = []
        urls: list[str] = []
        records = 0
        valid = len(SEGMENT_MAGIC) if _has_magic(path) else 0
        for end, tag, count, fps, blob, ok in _records(path, verify=True):
            if not ok:
                break
            parts.append(np.frombuffer(fps, dtype=FP_DTYPE).astype(np.uint64))
            urls.extend(_decode(tag, count, blob))
            records += 1
            valid = end
        fps_all = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
        return ScanResult(fps_all, urls, records, valid, size - valid)

    def truncate(self, seq: int, valid_bytes: int) -> None:
        """Cut a segment back to its valid prefix (after a torn tail)."""
        path = self.path(seq)
        if valid_bytes < len(SEGMENT_MAGIC):
            with open(path, "wb") as f:
                f.write(SEGMENT_MAGIC)
                f.flush()
                os.fsync(f.fileno())
            return
        with open(path, "r+b") as f:
            f.truncate(valid_bytes)
            f.flush()
            os.fsync(f.fileno())

    def read_urls(self, seqs: list[int], positions: np.ndarray) -> list[str]:
        """The URLs at sorted entry `positions` of segments `seqs` taken in order.

        One sequential pass in large chunks (this runs in the merge, not on
        the hot path): per chunk, the records holding a wanted entry are
        found from their headers, their URL blobs decoded and split in one
        call, and the wanted entries picked by index arithmetic.
        """
        want = np.asarray(positions, dtype=np.int64)
        want_list = want.tolist()
        total = len(want_list)
        out: list[str] = []
        if total == 0:
            return out
        i = 0                    # next wanted position (index into want)
        base = 0                 # entry index of the next record
        for seq in seqs:
            with open(self.path(seq), "rb", buffering=0) as f:
                if f.read(len(SEGMENT_MAGIC)) != SEGMENT_MAGIC:
                    raise ValueError(f"{self.path(seq)} is not a journal segment")
                carry = b""
                while i < total:
                    data = carry + f.read(READ_CHUNK_BYTES)
                    if len(data) == len(carry):
                        break                                    # end of segment
                    pos, base, i = self._pick(data, base, want, want_list, i, out)
                    carry = data[pos:]
            if i == total:
                return out
        raise ValueError(f"journal segments {seqs} hold {base} entries; position {want_list[i]} was asked for")

    @staticmethod
    def _pick(data: bytes, base: int, want: np.ndarray, want_list: list[int], i: int,
              out: list[str]) -> tuple[int, int, int]:
        """Picks wanted URLs from the whole records in `data`; returns (bytes used, base, i)."""
        header = RECORD_HEADER
        header_size = header.size
        total = len(want_list)
        nxt = want_list[i] if i < total else -1
        view = memoryview(data)
        blobs: list[memoryview] = []           # selected LINES blobs, decoded together
        rec_base: list[int] = []               # entry index of each selected record
        rec_off: list[int] = []                # its first line in the decoded list
        decoded: list[str] = []
        lines = 0
        i0 = i
        pos = 0
        size = len(data)
        while pos + header_size <= size:
            tag, count, blob_len, _crc = header.unpack_from(data, pos)
            end = pos + header_size + count * FP_BYTES + blob_len
            if end > size:
                break
            if 0 <= nxt < base + count:
                blob = view[end - blob_len:end]
                if tag == TAG_LINES:
                    blobs.append(blob)
                else:                          # flush the LINES run, then this record on its own
                    if blobs:
                        decoded.extend(str(b"\n".join(blobs), URL_ENCODING, URL_ERRORS).split("\n"))
                        blobs = []
                    blob = _decode(tag, count, blob)
                rec_base.append(base)
                rec_off.append(lines)
                lines += count
                if tag != TAG_LINES:
                    decoded.extend(blob)
                i = bisect_left(want_list, base + count, i)
                nxt = want_list[i] if i < total else -1
            base += count
            pos = end
        if blobs:
            decoded.extend(str(b"\n".join(blobs), URL_ENCODING, URL_ERRORS).split("\n"))
        if i > i0:
            if i - i0 == lines:
                out.extend(decoded)
            else:
                w = want[i0:i]
                r = np.searchsorted(np.asarray(rec_base, dtype=np.int64), w, side="right") - 1
                idx = np.asarray(rec_off, dtype=np.int64)[r] + (w - np.asarray(rec_base, dtype=np.int64)[r])
                out.extend([decoded[k] for k in idx.tolist()])
        return pos, base, i


# --- helpers ------------------------------------------------------------------

def _fsync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _close_prepared(future: Future) -> None:
    """Unmap a prepared next window that was not used (in the mapper thread, after it was made)."""
    try:
        future.result()[1].close()
    except OSError:
        pass


def _retire(window: mmap.mmap, fd: int, size: int) -> None:
    """Unmap a closed segment's window, cut the file to its records, close it (mapper thread)."""
    try:
        window.close()
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def _map(fd: int, length: int, offset: int) -> mmap.mmap:
    """A shared writable mapping of the file, its pages faulted in now (MAP_POPULATE):
    one system call per window instead of a page fault every few records."""
    window = mmap.mmap(fd, length, flags=mmap.MAP_SHARED | _POPULATE, offset=offset)
    if _POPULATE_WRITE is not None:
        _POPULATE_WRITE(window)          # False on an older kernel: the pages fault as written
    return window


def _reserve_and_map(fd: int, offset: int, length: int) -> tuple[int, mmap.mmap]:
    """Reserve and map a window (in the mapper thread)."""
    _reserve(fd, offset, length)
    return offset, _map(fd, length, offset)


def _reserve(fd: int, offset: int, length: int) -> None:
    """Allocate file space now, so a full disk fails here and not as a SIGBUS on a mapped page."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):   # file systems without fallocate
            raise
        os.ftruncate(fd, offset + length)


def _length_blob(urls: list[str]) -> bytes:
    encoded = [u.encode(URL_ENCODING, URL_ERRORS) for u in urls]
    lengths = np.fromiter((len(e) for e in encoded), dtype=LENGTH_DTYPE, count=len(encoded))
    return lengths.tobytes() + b"".join(encoded)


def _decode(tag: int, count: int, blob: memoryview) -> list[str]:
    if tag == TAG_LINES:
        return str(blob, URL_ENCODING, URL_ERRORS).split("\n")
    lengths = np.frombuffer(blob, dtype=LENGTH_DTYPE, count=count)
    ends = np.cumsum(lengths, dtype=np.int64) + count * LENGTH_DTYPE.itemsize
    starts = ends - lengths
    return [str(blob[s:e], URL_ENCODING, URL_ERRORS) for s, e in zip(starts.tolist(), ends.tolist())]


def _has_magic(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(len(SEGMENT_MAGIC)) == SEGMENT_MAGIC


def _records(path: Path, verify: bool) -> Iterator[tuple[int, int, int, memoryview, memoryview, bool]]:
    """Yields (end offset, tag, count, fps bytes, blob, valid) per record, reading in chunks.

    Stops after the first invalid record (yielded with valid=False) or at the
    end of the valid data. Without `verify` the crc is not checked (the merge
    reads segments this process wrote and already fsynced).
    """
    header_size = RECORD_HEADER.size
    with open(path, "rb", buffering=0) as f:
        if f.read(len(SEGMENT_MAGIC)) != SEGMENT_MAGIC:
            return
        offset = len(SEGMENT_MAGIC)
        buf = b""
        pos = 0
        eof = False
        while True:
            if len(buf) - pos < header_size:
                if eof:
                    if len(buf) > pos:
                        yield offset, 0, 0, memoryview(b""), memoryview(b""), False
                    return
                buf, pos, eof = _refill(f, buf, pos, header_size)
                continue
            tag, count, blob_len, crc = RECORD_HEADER.unpack_from(buf, pos)
            if tag not in (TAG_LINES, TAG_LENGTHS) or count == 0:
                yield offset, tag, count, memoryview(b""), memoryview(b""), False
                return
            fps_len = count * FP_BYTES
            need = header_size + fps_len + blob_len
            if len(buf) - pos < need:
                if eof:
                    yield offset, tag, count, memoryview(b""), memoryview(b""), False
                    return
                buf, pos, eof = _refill(f, buf, pos, need)
                continue
            view = memoryview(buf)
            start = pos + header_size
            fps = view[start:start + fps_len]
            blob = view[start + fps_len:pos + need]
            ok = not verify or zlib.crc32(blob, zlib.crc32(fps)) == crc
            pos += need
            offset += need
            yield offset, tag, count, fps, blob, ok
            if not ok:
                return


def _refill(f, buf: bytes, pos: int, need: int) -> tuple[bytes, int, bool]:
    """Keep the unread part of `buf` and read at least `need` more bytes if the file has them."""
    rest = buf[pos:]
    want = max(READ_CHUNK_BYTES, need - len(rest))
    chunks = [rest]
    got = 0
    eof = False
    while got < want:
        data = f.read(want - got)
        if not data:
            eof = True
            break
        chunks.append(data)
        got += len(data)
    return b"".join(chunks), 0, eof

"""The DUE's journal: every URL the buffer accepts, on disk before `submit` returns.

Why. The buffer of a Mercator DUE holds URLs that are accepted but not yet
decided (new or seen) until the next merge. If the process dies, they must
not be lost: the crawler has already dropped them everywhere else. So every
buffered URL is appended here before `submit` returns. The journal is only
read after a crash: to rebuild the buffer, and to hand out again the new
URLs of a merge that committed but may not have reached the caller.

Format (journal_format.py): a segment file starts with a magic, then one
record per `submit` that had misses, holding its fingerprints and URLs under
a crc. The active segment is written through a shared file mapping of a
4 MiB window, preallocated: appending is a copy into the page cache with no
system call, a killed process loses nothing it wrote, and only the current
window (and the next, which a helper thread reserves and maps ahead of time)
counts in the process's RSS. A segment starts with a window sized from the
last one's length (from 64 KiB: a crawl's early merges rotate segments of a
few KB, and reserving, faulting in and cutting back two 4 MiB windows per
merge was ~45% of such a merge's CPU); windows then grow fourfold up to
4 MiB. After a crash the segment ends
in a torn record or in unused (zero) reserve, which recovery cuts off.

Segments. The DUE rotates to a new segment when it freezes the buffer for a
merge, so a merge owns whole segments and deletes them once the URLs it
found new have been handed to the caller.
"""

from __future__ import annotations

import errno
import mmap
import os
import sys
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from pathlib import Path

import numpy as np

from crawler._native import NATIVE
from crawler.due.journal_format import (
    FP_DTYPE,
    LENGTH_DTYPE,
    RECORD_HEADER,
    SEGMENT_MAGIC,
    TAG_LENGTHS,
    TAG_LINES,
    URL_ENCODING,
    URL_ERRORS,
    ScanResult,
    read_urls,
    scan_segment,
    segment_name,
    segment_seq,
    truncate_segment,
)
from crawler.fsutil import fsync_and_close

_HEADER_PACK = RECORD_HEADER.pack
_crc32 = zlib.crc32
WINDOW_BYTES = 4 << 20       # the active segment is reserved and mapped this much at a time
NEXT_OVERLAP_BYTES = 1 << 20  # the next window starts this far before the current one ends
SMALL_WINDOW_BYTES = 64 << 10  # the least a segment starts with when the last one was small
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


class SubmitJournal:
    """The DUE's write-ahead journal of submitted URLs: append-only segments of (fingerprint, URL)
    records in one directory."""

    window = _cursor_field("window", "the mapped part of the active segment")
    window_at = _cursor_field("window_at", "its file offset")
    active_bytes = _cursor_field("active_bytes", "the active segment's size")
    dirty = _cursor_field("dirty", "written since its last fsync")

    def __init__(self, directory: Path, durable: bool = True, cursor=None) -> None:
        self.directory = Path(directory)
        self.durable = durable        # False: fsync nothing (tests, throwaway crawls)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fd = -1                 # the active segment's file while `window` is set
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
        self._sync = self._syncer.submit(fsync_and_close, os.dup(self._fd))

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
            self.window, self._fd = None, -1
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
        mapper = self._mapper_pool()
        if old is not None:
            mapper.submit(old.close)
        length = len(self.window)
        overlap, following = NEXT_OVERLAP_BYTES, WINDOW_BYTES
        if length < WINDOW_BYTES:                  # a segment's small first windows grow
            overlap, following = min(overlap, length // 2), min(WINDOW_BYTES, 4 * length)
        start = self.window_at + length - overlap
        start -= start % mmap.ALLOCATIONGRANULARITY
        if start > self.window_at:
            self._next = mapper.submit(_reserve_and_map, self._fd, start, following)

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

    # --- reading (journal_format.py) ------------------------------------------

    def scan(self, seq: int) -> ScanResult:
        """Read a segment's valid records (checking every crc) for recovery."""
        return scan_segment(self.path(seq))

    def truncate(self, seq: int, valid_bytes: int) -> None:
        """Cut a segment back to its valid prefix (after a torn tail)."""
        truncate_segment(self.path(seq), valid_bytes)

    def read_urls(self, seqs: list[int], positions: np.ndarray) -> list[str]:
        """The URLs at sorted entry `positions` of segments `seqs` taken in order (a merge's new URLs)."""
        return read_urls(self.directory, seqs, positions)


# --- helpers ------------------------------------------------------------------

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



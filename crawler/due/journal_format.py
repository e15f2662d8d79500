"""The DUE journal's segment format, and reading segments back (recovery's scan, a merge's URLs).

A segment file `jNNNNNNNN.log` starts with the 8-byte magic `DUEJRNL1`,
followed by records, one per `submit` that had misses:

    u32 tag | u32 count | u32 blob_bytes | u32 crc32 | count x u64 fps | blob

all little-endian; crc32 covers the fingerprints and the blob. With tag
`LINES` the blob is the URLs joined by "\\n" (canonical URLs contain no raw
newline); with tag `LENGTHS` (the rare fallback) it is count x u32 byte
lengths followed by the concatenated URLs. After a crash a segment ends in a
torn record or in unused (zero) reserve; the crc and the tag find the end
and recovery truncates the segment there. Entry positions (the order of
entries across a merge's segments) identify buffered URLs.

Writing is journal.py's (`SubmitJournal`, and the submit kernel's records).
"""

from __future__ import annotations

import os
import struct
import zlib
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

SEGMENT_MAGIC = b"DUEJRNL1"
TAG_LINES = 0x4C4A5544      # b"DUJL": URLs joined by newlines
TAG_LENGTHS = 0x504A5544    # b"DUJP": u32 lengths, then the URLs back to back
RECORD_HEADER = struct.Struct("<IIII")
FP_DTYPE = np.dtype("<u8")
FP_BYTES = 8
LENGTH_DTYPE = np.dtype("<u4")
READ_CHUNK_BYTES = 8 << 20   # sequential reads of a segment, bounded memory
URL_ENCODING = "utf-8"
URL_ERRORS = "surrogatepass"  # never fail on a str the caller gave us


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



def scan_segment(path: Path) -> ScanResult:
    """Read a segment's valid records (checking every crc) for recovery."""
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

def truncate_segment(path: Path, valid_bytes: int) -> None:
    """Cut a segment back to its valid prefix (after a torn tail)."""
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

def read_urls(directory: Path, seqs: list[int], positions: np.ndarray) -> list[str]:
    """The URLs at sorted entry `positions` of segments `seqs` (in `directory`) taken in order.

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
        with open(directory / segment_name(seq), "rb", buffering=0) as f:
            if f.read(len(SEGMENT_MAGIC)) != SEGMENT_MAGIC:
                raise ValueError(f"{directory / segment_name(seq)} is not a journal segment")
            carry = b""
            while i < total:
                data = carry + f.read(READ_CHUNK_BYTES)
                if len(data) == len(carry):
                    break                                    # end of segment
                pos, base, i = _pick(data, base, want, want_list, i, out)
                carry = data[pos:]
        if i == total:
            return out
    raise ValueError(f"journal segments {seqs} hold {base} entries; position {want_list[i]} was asked for")

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
                decoded.extend(_decode(tag, count, blob))
            rec_base.append(base)
            rec_off.append(lines)
            lines += count
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


def _refill(f: BinaryIO, buf: bytes, pos: int, need: int) -> tuple[bytes, int, bool]:
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

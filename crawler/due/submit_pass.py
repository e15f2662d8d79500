"""The DUE's submit pass: front-cache probe, buffer append and journal record in one call.

Why. `DiskDUE.submit` runs once per parsed page (~60 links) and once per
peer batch, so its cost is mostly per call: a cache call, selecting the
misses, a journal record (join, encode, crc, copy) and appending to the
buffer were ~25 us of Python and numpy calls per page. The compiled pass
(`due_submit` in crawler/_native/due_submit.c, which runs the compiled cache
policies' loops directly) does the same work in one C call. `DiskDUE` now
reaches that work through its front (`front.py`), which runs the same C core
(`due_accept`) on state it keeps itself; this function stays for the budget
bench and the tests, and `py_submit` is what the pure-Python front runs.

    submit(cache, fps, urls, buf, n, buf_urls, window, pos) -> (misses, record_bytes)

1. asks `cache` about every fingerprint in `fps` (a hit is a duplicate; a miss
   is inserted, as `check_and_add_many` does);
2. writes the misses' fingerprints into `buf[n:n + misses]` (the caller made
   room) and appends their URL objects to the list `buf_urls`;
3. writes their journal record (`journal_format.py`'s format, tag LINES) into the
   mapped `window` at offset `pos`, and returns its size; or returns -1 as
   `record_bytes`, writing nothing, when the record does not fit in the window,
   a URL holds a newline or a URL cannot be encoded as UTF-8. The caller then
   writes the record with `SubmitJournal.append`, which slides the window and
   handles those cases.

`py_submit` is the pure-Python twin (used when the extension is not built,
or with CRAWLER_CACHE_PURE_PYTHON=1): the same cache calls, the same buffer,
the same bytes; tests/unit/test_due_submit_pass.py checks they agree.
"""

from __future__ import annotations

import zlib

import numpy as np

from crawler._native import native_or
from crawler.due.journal_format import RECORD_HEADER, TAG_LINES, URL_ENCODING

_PACK_INTO = RECORD_HEADER.pack_into
_HEADER_BYTES = RECORD_HEADER.size
_NEWLINE = b"\n"


def py_submit(cache, fps: np.ndarray, urls: list[str], buf: np.ndarray, n: int,
              buf_urls: list[str], window, pos: int) -> tuple[int, int]:
    """Pure-Python twin of the compiled `due_submit` (see the module docstring)."""
    fps = np.ascontiguousarray(fps, dtype=np.uint64)     # as the compiled one converts any array-like
    if len(urls) != len(fps):
        raise ValueError("due_submit got a different number of fingerprints and URLs")
    if n < 0 or n + len(fps) > len(buf):
        raise ValueError("due_submit: the buffer has no room for this batch")
    hit = cache.check_and_add_many(fps)
    miss = (~hit).nonzero()[0]
    m = len(miss)
    if m == 0:
        return 0, 0
    if m != len(fps):
        fps = fps[miss]
        urls = [urls[i] for i in miss.tolist()]
    buf[n:n + m] = fps
    buf_urls.extend(urls)
    if window is None:
        return m, -1
    try:
        blob = "\n".join(urls).encode(URL_ENCODING)
    except (UnicodeEncodeError, TypeError):     # SubmitJournal.append encodes these, or raises
        return m, -1
    if blob.count(_NEWLINE) != m - 1:
        return m, -1
    fb = fps.astype("<u8", copy=False).tobytes()
    size = _HEADER_BYTES + len(fb) + len(blob)
    if pos < 0 or pos + size > len(window):
        return m, -1
    mid = pos + _HEADER_BYTES + len(fb)
    window[pos + _HEADER_BYTES:mid] = fb
    window[mid:pos + size] = blob
    _PACK_INTO(window, pos, TAG_LINES, m, len(blob), zlib.crc32(blob, zlib.crc32(fb)))
    return m, size


submit = native_or("due_submit", py_submit)
COMPILED: bool = submit is not py_submit

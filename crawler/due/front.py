"""The DUE's front: `DiskDUE.submit`'s common case in one call, and the state it touches.

Why. The submit pass (`submit_pass.py`) does the work of a page's links in C,
but the Python around it still cost ~1.2 us per call (measured inside
`DiskDUE.submit` on the 5M-URL due_bench run): reading the buffer, cache and
journal attributes, updating the append position and counters, and checking
whether a merge, an fsync or a delivery is due. A page has ~60 links, so that
was ~20 ns per link, a sixth of the DUE's time. The front keeps that state
(cache, buffer, its URL list, the journal's window and append position, the
check counter, and the thresholds at which Python must look) and does the
common case itself; `DiskDUE` and its `SubmitJournal` read and set the same state
as the front's attributes, and take over whenever the front hands back.

    front.submit(fps, urls)
        []                 probed, buffered, journaled; nothing else to do
        front.slow(fps, urls)
                           nothing done: `attention` is set (the DUE has URLs
                           to hand out or releases pending), or the batch
                           needs Python (not a list, empty, no room)
        front.finish(r)    done, but `accept` answered r, not []
    front.accept(fps, urls)
        []       probed, buffered, journaled; nothing else to do
        (n, m)   buffered at [n, n + m) but the record was not written (the
                 window is full, or a URL needs the journal's own encoding):
                 the caller journals it and sets n = n + m
        m        done; the caller must look: the journal fsync is due
                 (`fsync_at`), a fault hook is set (`hooked`), the buffer
                 reached `look_at`, or the merge ended (`merge_done`)

`DiskDUE` sets `slow` and `finish` to its own methods and binds its `submit`
to the front's, so a page costs one call from Python (a Python `submit`
around the front's cost ~120 ns per call more, and the front used to read
the DUE's three lists of pending work as attributes, ~100-150 ns; the DUE
now keeps `attention` up to date instead).

`DueFront` in crawler/_native/due_front.c is the compiled one; `PyFront` is its
pure-Python twin (no extension, or CRAWLER_CACHE_PURE_PYTHON=1), and
tests/unit/test_due_submit_pass.py checks they agree.
"""

from __future__ import annotations

import math
import time

import numpy as np

from crawler._native import NATIVE
from crawler.due import submit_pass


class PyFront:
    """Pure-Python twin of the compiled `DueFront` (see the module docstring)."""

    def __init__(self, cache, buf: np.ndarray) -> None:
        self.cache = cache
        self.buf = buf
        self.urls: list[str] = []
        self.window = None
        self.n = 0
        self.window_at = 0
        self.active_bytes = 0
        self.look_at = 2 ** 63 - 1
        self.checks = 0
        self.fsync_at = math.inf
        self.dirty = False
        self.merge_done = False
        self.hooked = False
        self.attention = False
        self.slow = None
        self.finish = None

    def submit(self, fps, urls):
        if (self.attention or urls.__class__ is not list or not urls
                or self.n + len(urls) > len(self.buf)):
            return self.slow(fps, urls)
        r = self.accept(fps, urls)
        return r if r.__class__ is list else self.finish(r)

    def accept(self, fps, urls):
        if urls.__class__ is not list:
            raise TypeError("DueFront.accept needs a list of URLs")
        n = self.n
        m, size = submit_pass.py_submit(self.cache, fps, urls, self.buf, n, self.urls, self.window,
                                        self.active_bytes - self.window_at)
        self.checks += len(urls)
        if m and size < 0:
            return (n, m)
        if m:
            self.n = n + m
            self.active_bytes += size
            self.dirty = True
        if ((m and (self.hooked or time.monotonic() >= self.fsync_at))
                or self.n >= self.look_at or self.merge_done):
            return m
        return []


DueFront = NATIVE.DueFront if NATIVE is not None and submit_pass.COMPILED and hasattr(NATIVE, "DueFront") else PyFront
COMPILED: bool = DueFront is not PyFront

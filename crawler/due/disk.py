"""The disk-backed DUE: front cache, journaled buffer, bucketed sorted merges.

Data flow of one `submit(fps, urls)` (hot path, a page's links at a time):

1. Front cache (`due.cache`, any `crawler.cache` policy): a hit is a known
   duplicate and is dropped; a miss is inserted.
2. The misses are appended to the in-memory buffer (a uint64 array of
   fingerprints and a list of the caller's URL strings, no copies) and to
   the journal (one record, copied into a mapped window of the segment file:
   no system call). Steps 1 and 2 are one call of the submit kernel
   (`kernel.py`; compiled in crawler/cache/_ckernel.c when built). Repeats
   inside the buffer are caught at the merge, which sorts it anyway.
3. When the buffer holds `due.buffer_size` URLs (half of it when merges run
   in the background, so the two halves never exceed the buffer), or when
   the node calls `flush()` because the frontier runs low, the buffer is
   merged (Mercator): sorted, deduplicated, and checked against the sorted
   on-disk set bucket by bucket in one sequential pass (`diskset`). The
   fingerprints not on disk are new; their URLs are returned to the caller
   in the order they arrived. In the background, a merge's heavy passes are
   compiled kernels that release the GIL (`mergekernel`): it runs on a
   second core while `submit` goes on.

RAM is the cache plus the buffer (8 bytes per fingerprint plus the URL
strings it keeps alive, about 130 bytes each for 80-character URLs), plus one
bucket window and the sort arrays during a merge; never the number of URLs
seen. (After each merge freed heap pages go back to the OS: `trim`.)

Hot path cost is per call more than per URL: with the compiled kernel about
8-10 us per page-sized call (~60 links) on a 2-CPU VM, of which the CLOCK
probe is ~35-50 ns per link; the pure-Python twin costs about twice that.

Crash safety (`restore`, run by the constructor). A merge

    writes new bucket files (fsynced) while a helper fsyncs its journal
    segments -> waits for that fsync -> writes the positions of its new
    URLs -> commits MANIFEST.json (atomic) ->
    deletes replaced bucket files -> returns the new URLs -> at the next call
    into the DUE (the caller has them now) deletes its journal segments.

A crash before the commit leaves the old set and the whole journal: the
merge is redone from scratch. A crash after it, before the journal segments
are deleted, makes recovery hand out that merge's new URLs again: possibly
twice, at most one buffer of them, counted in `duplicates_emitted`. Accepted
URLs are never lost: a killed process's writes are in the page cache; power
loss is bounded by `journal_fsync_s`.
"""

from __future__ import annotations

import errno
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from crawler.cache import Cache, cache_from_config
from crawler.due.base import DUE
from crawler.due.diskset import DEFAULT_WINDOW_ENTRIES, FP_BYTES, FP_DTYPE, BucketTable, DiskSet
from crawler.due.front import DueFront
from crawler.due.journal import SubmitJournal
from crawler.due.manifest import DueCounters, DueManifest, Release, read_manifest, write_manifest
from crawler.due.mergekernel import pick, sort_unique
from crawler.due.trim import release_free_memory
from crawler.fsutil import fsync_dir

# Defaults for configs without the keys; the documented defaults are DueConfig's (crawler/config/schema.py).
DEFAULT_BUCKETS = 64
DEFAULT_DELTA_RATIO = 0.125
DEFAULT_JOURNAL_FSYNC_S = 1.0
POSITION_DTYPE = np.dtype("<i8")
BUFFER_HEADROOM = 1024          # extra fingerprints allocated past the merge trigger
PEEK_LOG = "peeked.u64"         # fingerprints prompt lookups handed out before their merge (uint64, appended)
PEEK_LAST = "peeked-last.u64"   # the last peek's fingerprints, until the next call logs them (uint64)
PEEK_LOG_SLACK_BYTES = 65536    # the log is rewritten once it holds this much more than the early set
_NO_FPS = np.empty(0, dtype=np.uint64)
_monotonic = time.monotonic

FaultHook = Callable[[str], None]


class _FromConfig:
    """Default of DiskDUE's tunables: the value of the same key in the `due` config section."""

    def __repr__(self) -> str:
        return "FROM_CONFIG"


FROM_CONFIG = _FromConfig()


def _tunable(value, config, key: str, default):
    """The value given, else config.<key> (else the default, for configs without the key)."""
    return getattr(config, key, default) if isinstance(value, _FromConfig) else value


@dataclass
class _MergeJob:
    """One merge: inputs taken from the buffer, outputs for the caller."""
    merge: int
    fps: np.ndarray                # dropped by the merge once it has committed
    urls_in: list[str]
    segments: list[int]
    count: int = 0                 # len(fps), for `pending` while the merge runs
    urls: list[str] = field(default_factory=list)
    new_fps: np.ndarray | None = None   # fingerprints of `urls`, same order (to skip those peeked early)
    positions: np.ndarray | None = None # buffer positions of `urls` (its release marker's content)
    skip: np.ndarray | None = None      # fingerprints peek handed out before the merge began: not handed out again
    new: int = 0
    repeats: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    error: BaseException | None = None
    committed: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class DiskDUE(DUE):
    """Mercator's DUE with DRUM buckets; restartable on its directory."""

    def __init__(self, directory: str | Path, config, *,
                 buckets: int | _FromConfig = FROM_CONFIG,
                 delta_ratio: float | _FromConfig = FROM_CONFIG,
                 background: bool | _FromConfig = FROM_CONFIG,
                 journal_fsync_s: float | None | _FromConfig = FROM_CONFIG,
                 window_entries: int | _FromConfig = FROM_CONFIG,
                 durable: bool = True,
                 cache: Cache | None = None,
                 fault_hook: FaultHook | None = None) -> None:
        """`config` is the `due` section (DueConfig); the tunables default to its
        keys (due.buckets, due.delta_ratio, due.background, due.journal_fsync_s,
        due.window_entries) and may be given here instead (tests, the bench)."""
        buckets = _tunable(buckets, config, "buckets", DEFAULT_BUCKETS)
        delta_ratio = _tunable(delta_ratio, config, "delta_ratio", DEFAULT_DELTA_RATIO)
        background = _tunable(background, config, "background", True)
        journal_fsync_s = _tunable(journal_fsync_s, config, "journal_fsync_s", DEFAULT_JOURNAL_FSYNC_S)
        window_entries = _tunable(window_entries, config, "window_entries", DEFAULT_WINDOW_ENTRIES)
        # Where and how big.
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.buffer_size = int(config.buffer_size)
        if self.buffer_size < 1:
            raise ValueError(f"due.buffer_size must be at least 1, got {self.buffer_size}")
        self.background = background
        # A background merge takes half the buffer while the other half fills.
        self._trigger = max(1, self.buffer_size // 2) if background else self.buffer_size
        self._journal_fsync_s = journal_fsync_s
        self._delta_ratio = delta_ratio
        self._window_entries = window_entries
        self._requested_buckets = buckets
        self._durable = durable
        self._fault = fault_hook
        # Parts. The front (front.py) holds the state submit's hot path touches: the
        # cache, the buffer (fingerprints of accepted, undecided URLs, and their URLs),
        # the journal's window and append position, and when Python must look.
        self._front = DueFront(cache if cache is not None else cache_from_config(config.cache),
                               np.empty(self._trigger + BUFFER_HEADROOM, dtype=np.uint64))
        self._front.hooked = fault_hook is not None
        # submit is the front's own: one call from Python per page. The front calls
        # back into these when it must (a cycle through the front, broken at close).
        self._front.slow = self._submit_slow
        self._front.finish = self._finish
        self.submit = self._front.submit
        self._journal = SubmitJournal(self.directory / "journal", durable, cursor=self._front)
        self._release_dir = self.directory / "release"
        self._release_dir.mkdir(exist_ok=True)
        self._set: DiskSet  # built by restore(), from the manifest's bucket count
        self._segments: list[int] = []            # the buffer's journal segments
        # Merges. Setting _job also sets the front's look_at (the buffer fill at which
        # submit must look at the merges) and clears merge_done (set when the merge ends).
        self._job = None
        self._last_merge = 0
        self._merged_through = 0
        self._ready: list[str] = []               # new URLs not yet returned
        self._undelivered: list[Release] = []     # merges whose URLs are in _ready
        self._delivered: list[Release] = []       # returned by the last call; released by the next
        # Committed merges whose journal segments still exist (the manifest's
        # `unreleased`); the merge thread adds, the caller's thread removes.
        self._releases: dict[int, Release] = {}
        self._lock = threading.Lock()
        self._counters = DueCounters()
        self._cache_base = (0, 0)                 # cache counters at the last restore
        self._last_merge_s = 0.0
        self._wait_s = 0.0                        # time callers waited for background merges
        self._merge_cpu_s = 0.0                   # CPU time of merges (this session)
        self._early: set[int] = set()             # fingerprints peek handed out, until their merge collects
        self._peeked = 0                          # URLs handed out by peek (this session)
        # Peeked fingerprints are logged (PEEK_LOG) at the next call after the one that handed them out:
        # by then the caller has queued them, so a crash repeats them at worst, never loses them.
        # Until then they are in PEEK_LAST: a restart hands them out again and counts them as duplicates.
        self._peek_pending: list[int] = []
        self._peek_log = self.directory / PEEK_LOG
        self._peek_last = self.directory / PEEK_LAST
        # Called at the end of every merge, from the thread that ran it (the merge thread for a
        # background merge): an event loop hooks `call_soon_threadsafe` here to collect the new
        # URLs at once instead of at its next look (the node's prompt merges, docs/due.md).
        self.on_merge_done: Callable[[], None] | None = None
        self._synced_now()
        self._closed = False
        self._held: OSError | None = None         # set by hold(): the caller can no longer record URLs
        self.restore()

    # --- the DUE interface -------------------------------------------------------

    def submit(self, fps: np.ndarray, urls: list[str]) -> list[str]:
        """Offer a batch; returns the URLs now known to be new (hot path: once per page).

        Each DiskDUE binds `submit` to its front's (`front.py`, compiled when
        the extension is built), which does the common case in one call: the
        cache probe, the buffer append, the journal record and the checks of
        whether anything else is due. It calls `_submit_slow` when there are
        URLs to hand out, and `_finish` when the record, an fsync, a merge or
        a fault hook needs Python. (This method is what the binding stands for.)
        """
        return self._front.submit(fps, urls)

    def _submit_slow(self, fps, urls: list[str]) -> list[str]:
        """submit when the front leaves the batch to Python: URLs or releases are
        waiting (`attention`), `urls` is not a list, the batch is empty, or the
        buffer must grow."""
        if self._delivered:
            self._release_delivered()
        if urls.__class__ is not list:
            urls = list(urls)
        count = len(urls)
        if count:
            if self._n + count > len(self._buf):
                self._grow(self._n + count)
            r = self._front.accept(fps, urls)
            return self._finish(0 if r.__class__ is list else r)
        if len(fps):
            raise ValueError(f"submit got {len(fps)} fingerprints and 0 URLs")
        return self._finish(0)

    def _finish(self, accepted) -> list[str]:
        """The rest of a submit after the front took the batch (its `accept` result):
        write the record it could not, start the fsync that is due, run the fault
        hook, look at the merges, hand out new URLs."""
        if accepted.__class__ is tuple:
            n, m = accepted
            self._journal_slow(n, m)
            self._n = n + m
        else:
            m = accepted
        if m:
            if _monotonic() >= self._front.fsync_at:
                self._fsync_soon()
            if self._fault is not None:
                self._fault("submit:journaled")
        front = self._front
        if front.n >= front.look_at or front.merge_done:
            # No yield to a background merge here: its passes run without the GIL
            # and it needs the GIL only a few dozen times (each within one switch
            # interval, 5 ms); a time.sleep(0) per call cost the caller more
            # (measured: 4.4M vs 5.0M checks/s, 10M-check runs, docs/due.md).
            self._schedule()
        if self._ready or self._undelivered:
            return self._deliver()
        return []

    def flush(self) -> list[str]:
        """Merge everything buffered now; returns the new URLs (also those of earlier merges)."""
        if self._held is not None:
            self._raise_held()
        if self._delivered:
            self._release_delivered()
        if self._peek_pending:
            self._log_peeked()
        if self._job is not None:
            self._collect()
        if self._n:
            self._run_now()
        return self._deliver()

    def start_merge(self) -> bool:
        """Merge the whole buffer in the background now (an early merge: the frontier runs low);
        its new URLs come out of the next `submit` or `poll`. Without `due.background` the merge
        runs here and `poll` returns its URLs."""
        if self._held is not None:
            self._raise_held()
        self._collect_if_done()
        if self._job is not None or not self._n:
            return False
        if self.background:
            self._start_merge()
        else:
            self._run_now()
        return True

    def poll(self) -> list[str]:
        """Collect a finished background merge (never waits); returns the new URLs found so far."""
        if self._held is not None:
            self._raise_held()
        self._collect_if_done()
        if self._ready or self._undelivered:
            return self._deliver()
        return []

    @property
    def merging(self) -> bool:
        return self._job is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def buffered(self) -> int:
        """URLs in the buffer that no merge has taken yet (a submit's misses raise it)."""
        return self._front.n

    @property
    def last_merge_s(self) -> float:
        """Wall time of the last merge collected."""
        return self._last_merge_s

    @property
    def _job(self) -> _MergeJob | None:
        """The merge in progress. Setting it sets what the front checks instead: its
        `look_at`, the buffer fill at which to start a merge (none running) or to wait
        for the running one (the buffer is full), and `merge_done`, which the merge
        sets when it ends."""
        return self._current_job

    @_job.setter
    def _job(self, job: _MergeJob | None) -> None:
        self._current_job = job
        front = self._front
        front.look_at = self._trigger if job is None else max(0, self.buffer_size - job.count)
        front.merge_done = job is not None and job.done.is_set()

    # The buffer and the cache live in the front (front.py); these name them.
    _n = property(lambda self: self._front.n, lambda self, n: setattr(self._front, "n", n))
    _buf = property(lambda self: self._front.buf, lambda self, buf: setattr(self._front, "buf", buf))
    _urls = property(lambda self: self._front.urls, lambda self, urls: setattr(self._front, "urls", urls))
    _cache = property(lambda self: self._front.cache, lambda self, cache: setattr(self._front, "cache", cache))

    def _collect_if_done(self) -> None:
        """Release what the caller has, and take a finished merge's results (never waits)."""
        if self._delivered:
            self._release_delivered()
        if self._peek_pending:
            self._log_peeked()
        job = self._job
        if job is not None and job.done.is_set():
            self._collect()

    @property
    def pending(self) -> int:
        """URLs accepted but not yet returned (buffered, merging, or found new and waiting)."""
        job = self._job
        return self._n + (job.count if job is not None else 0) + len(self._ready)

    def checkpoint(self) -> None:
        """Make everything accepted durable now (journal fsync; committed merges already are)
        and finish deleting released journal segments."""
        if self._held is not None:
            self._raise_held()
        if self._delivered:
            self._release_delivered()
        if self._peek_pending:
            self._log_peeked()
        self._journal.settle()
        self._journal.fsync_segments(self._segments)
        self._synced_now()
        if self._job is None:
            self._write_manifest()

    def stats(self) -> dict:
        c = self._counters
        job = self._job
        hits = self._cache_base[0] + self._cache.hits
        misses = self._cache_base[1] + self._cache.misses
        disk = self._set.count
        return {
            "checks": self._front.checks,
            "cache_hits": hits,
            "cache_misses": misses,
            "cache_size": self._cache.size,
            "cache_capacity": self._cache.capacity,
            "buffer": self._n + (job.count if job is not None else 0),
            "buffer_capacity": self.buffer_size,
            "pending": self.pending,
            "disk_fingerprints": disk,
            "disk_bytes": self._set.bytes,
            "journal_bytes": self._journal.bytes_on_disk(),
            "merges": c.merges,
            "merge_seconds": c.merge_seconds,
            "last_merge_seconds": self._last_merge_s,
            "merge_wait_seconds": self._wait_s,
            "merge_cpu_seconds": self._merge_cpu_s,
            "peeked": self._peeked,
            "new": c.new,
            "duplicates_emitted": c.duplicates_emitted,
            "buffer_repeats": c.buffer_repeats,
            "buckets": self._set.buckets,
            "seen": disk,
        }

    def close(self) -> None:
        """Wait for a running merge, make state durable and release files.

        New URLs found but never returned stay in the journal and are handed
        out by the next DiskDUE on this directory (not counted as duplicates).
        """
        if self._closed:
            return
        try:
            if self._held is not None:
                return                               # left as a crash leaves it (hold)
            if self._peek_pending:
                self._log_peeked()
            if self._job is not None:
                self._collect()
            if self._early and self._n:
                # Peeked URLs wait in the buffer: a restart would hand them out again, so they are merged
                # now; the rest of its new URLs come out at the next start, like any found but not returned.
                self._run_now()
            if self._delivered:
                self._release_delivered()
            for release in self._undelivered:
                release.count_duplicates = False
            self._journal.fsync_segments(self._segments)
            self._write_manifest()
        finally:
            self._closed = True
            front = self._front        # every later submit raises; the cycle through the front ends
            front.attention = True
            front.slow = partial(_closed_submit, str(self.directory))
            front.finish = None
            self._journal.shutdown()
            self._set.close()
            self._cache.close()

    def hold(self, error: OSError) -> None:
        """The caller cannot record what this DUE hands out any more (its frontier's journal failed: a full
        disk). From now on nothing is released, logged or written, and every call raises `error`'s kind
        of OSError: what is on disk stays as a crash would leave it, so a restart hands out again the URLs
        of every merge not released before this call, including those the caller just failed to record.
        Without it, any later call (the node's periodic checkpoint, a submit after an await) released them.
        A running background merge may still commit; its URLs come out at the restart like any unreleased."""
        if self._held is None:
            self._held = error
            front = self._front
            front.attention = True
            front.slow = self._held_submit
            front.finish = None

    def _held_submit(self, fps, urls) -> list[str]:
        self._raise_held()
        return []

    def _raise_held(self) -> None:
        error = self._held
        assert error is not None
        raise OSError(error.errno or errno.EIO, f"the DUE in {self.directory} is held after a storage error "
                                                f"({error.strerror or error}); restart the node to resume")

    # --- recovery ----------------------------------------------------------------

    def restore(self) -> None:
        """Rebuild state from the directory: set, unreleased merges, journaled buffer."""
        manifest = read_manifest(self.directory)
        buckets = manifest.buckets if manifest is not None else self._requested_buckets
        self._set = DiskSet(self.directory / "set", buckets, self._delta_ratio, self._window_entries,
                            self._durable)
        if manifest is None:
            manifest = DueManifest(buckets=buckets, table=BucketTable.empty(buckets))
        self._set.load(manifest.table)
        self._set.sweep()
        self._counters = manifest.counters
        self._front.checks = manifest.counters.checks
        self._cache_base = (manifest.counters.cache_hits - self._cache.hits,
                            manifest.counters.cache_misses - self._cache.misses)
        self._last_merge = manifest.merge
        self._merged_through = manifest.merged_through
        existing = set(self._journal.existing())
        peeked = _read_fps(self._peek_log)
        # Merges committed whose URLs may not have reached the caller: hand them out again.
        kept: list[Release] = []
        for release in manifest.unreleased:
            marker = self._release_path(release.merge)
            if marker.exists() and all(s in existing for s in release.segments):
                positions = np.fromfile(marker, dtype=POSITION_DTYPE)
                if len(peeked) and len(positions):
                    positions = self._not_peeked(release.segments, positions, peeked)
                urls = self._journal.read_urls(release.segments, positions)
                self._ready.extend(urls)
                if release.count_duplicates:
                    self._counters.duplicates_emitted += len(urls)
                release.count_duplicates = True
                kept.append(release)
                self._releases[release.merge] = release
            else:
                self._release(release)
        kept_segments = {s for r in kept for s in r.segments}
        kept_markers = {self._release_path(r.merge).name for r in kept}
        for path in self._release_dir.iterdir():
            if path.name not in kept_markers:
                path.unlink()
        # Merged segments nobody needs, and the buffer journaled since the last merge.
        restored = []
        for seq in sorted(existing):
            if seq <= self._merged_through:
                if seq not in kept_segments:
                    self._journal.remove([seq])
                continue
            scan = self._journal.scan(seq)
            if scan.torn_bytes:
                self._journal.truncate(seq, scan.valid_bytes)
            if len(scan.fps):
                self._append_buffer(scan.fps, scan.urls)
                restored.append(seq)
            else:
                self._journal.remove([seq])
        self._segments = restored
        self._restore_early(peeked)
        self._undelivered = kept
        self._front.attention = bool(self._ready or self._undelivered)
        last_seq = max([self._merged_through, *existing]) if existing else self._merged_through
        self._journal.open_segment(last_seq + 1)
        self._segments.append(last_seq + 1)
        self._journal.fsync_active()
        if self._durable:
            fsync_dir(self._journal.directory)
        self._write_manifest()
        self._peek_last.unlink(missing_ok=True)      # counted in the manifest just written

    # --- internals: buffer -------------------------------------------------------

    def _fsync_soon(self) -> None:
        """`due.journal_fsync_s` has passed: have the journal's helper fsync the active segment."""
        self._journal.fsync_active_soon()
        self._synced_now()

    def _synced_now(self) -> None:
        """The journal was just fsynced (or handed to the helper): the next fsync is due one
        `due.journal_fsync_s` from now (None: only at checkpoints and merges)."""
        self._front.fsync_at = math.inf if self._journal_fsync_s is None else _monotonic() + self._journal_fsync_s

    def _journal_slow(self, n: int, m: int) -> None:
        """Journal the misses the kernel just buffered at [n, n + m) when it could not:
        the window is full (slide it), or a URL needs the LENGTHS record or
        surrogate escapes. On failure the batch is taken back out of the buffer."""
        try:
            self._journal.append(self._buf[n:n + m], self._urls[n:])
        except BaseException:
            del self._urls[n:]
            # The cache already holds these fingerprints: forget it, or a later
            # repeat would be dropped as a duplicate of a URL that was never kept.
            old = self._cache
            self._cache_base = (self._cache_base[0] + old.hits, self._cache_base[1] + old.misses)
            old.close()
            self._cache = cache_from_config(self.config.cache)
            raise

    def _grow(self, need: int) -> None:
        grown = np.empty(max(2 * len(self._buf), need), dtype=np.uint64)
        grown[:self._n] = self._buf[:self._n]
        self._buf = grown

    def _append_buffer(self, fps: np.ndarray, urls: list[str]) -> None:
        n, m = self._n, len(fps)
        if n + m > len(self._buf):
            self._grow(n + m)
        self._buf[n:n + m] = fps
        self._n = n + m
        self._urls.extend(urls)

    # --- internals: merges -------------------------------------------------------

    def _take_buffer(self) -> _MergeJob:
        """Freeze the buffer and its journal segments into a merge job; start a new segment."""
        self._last_merge += 1
        job = _MergeJob(self._last_merge, self._buf[:self._n], self._urls, self._segments, self._n)
        if self._early:
            job.skip = np.fromiter(self._early, dtype=np.uint64, count=len(self._early))
        self._buf = np.empty(self._trigger + BUFFER_HEADROOM, dtype=np.uint64)
        self._n = 0
        self._urls = []
        self._journal.open_segment(self._journal.active + 1)
        self._segments = [self._journal.active]
        return job

    def _schedule(self) -> None:
        """Collect a finished merge; start one when the buffer is full enough."""
        job = self._job
        if job is not None and (job.done.is_set() or self._n + job.count >= self.buffer_size):
            self._collect()                       # finished, or the buffer is full: wait for it
        if self._n >= self._trigger and self._job is None:
            if self.background:
                self._start_merge()
            else:
                self._run_now()

    def _start_merge(self) -> None:
        job = self._take_buffer()
        job.thread = threading.Thread(target=self._merge, args=(job,), name=f"due-merge-{job.merge}", daemon=True)
        self._job = job
        job.thread.start()

    def _run_now(self) -> None:
        """Merge the buffer in the calling thread."""
        self._job = self._take_buffer()
        self._merge(self._job)
        self._collect()

    def _collect(self) -> None:
        """Wait for the merge job and take its results (or give its input back if it failed)."""
        job = self._job
        assert job is not None
        if not job.done.is_set():
            started = time.perf_counter()
            job.done.wait()
            self._wait_s += time.perf_counter() - started
        if job.thread is not None:
            job.thread.join()
        self._job = None
        if job.error is not None:
            if job.committed:
                # On disk, but its URLs were not picked: the next DiskDUE on
                # this directory hands them out (its segments are kept).
                with self._lock:
                    self._releases[job.merge].count_duplicates = False
                raise job.error
            self._last_merge = job.merge - 1        # give the input back to the buffer
            rest, rest_urls = self._buf[:self._n].copy(), self._urls
            self._n, self._urls = 0, []
            self._append_buffer(job.fps, job.urls_in)
            self._append_buffer(rest, rest_urls)
            self._segments = job.segments + self._segments
            raise job.error
        if self._early:
            self._skip_peeked(job)
        job.new_fps = job.skip = job.positions = None
        if self._ready:
            self._ready.extend(job.urls)
        else:                        # the usual case: take the list (extend would touch every str)
            self._ready = job.urls
        job.urls = []
        with self._lock:
            self._undelivered.append(self._releases[job.merge])
        self._front.attention = True
        self._counters.merge_seconds += job.seconds
        self._merge_cpu_s += job.cpu_seconds
        self._last_merge_s = job.seconds

    def _skip_peeked(self, job: _MergeJob) -> None:
        """Peeked URLs a merge found new are on disk now: they need no remembering. Those peek handed
        out while the merge ran (it skipped only the ones peeked before it began) are not handed out
        again."""
        if job.skip is not None:
            self._early.difference_update(job.skip.tolist())
        if self._early and job.new_fps is not None and len(job.new_fps):
            early = np.fromiter(self._early, dtype=np.uint64, count=len(self._early))
            twice = np.isin(job.new_fps, early)
            if twice.any():
                job.urls = [u for u, dup in zip(job.urls, twice.tolist()) if not dup]
                # Its release marker must not name them either, or a restart before its release hands them out.
                self._write_positions(job.merge, job.positions[~twice], atomic=True)
                self._early.difference_update(job.new_fps[twice].tolist())
        self._trim_peek_log()

    def peek(self, start: int) -> list[str]:
        """Decide now, without a merge, which URLs of the buffer from position `start` are new, and hand
        them out (the node's prompt lookups: these URLs may feed a worker that waits).

        `start` is `buffered` before the submit that added them: the buffer's tail is exactly that
        submit's misses (if a merge took the buffer meanwhile, there is nothing to peek). A URL is
        new if its fingerprint is not in the disk set and was not handed out early already; the
        merge that later takes it writes it to disk and does not hand it out again. Costs a lookup
        per fingerprint in the bucket files (a few cache lines each), so it is for a page's links
        now and then, not for every submit. A crash before that merge commits hands such URLs out
        again on restart, like the URLs of an unreleased merge (at most one buffer).
        """
        if self._held is not None:
            self._raise_held()
        if self._peek_pending:
            self._log_peeked()                       # the last peek's URLs are queued by now
        n = self._n
        if not 0 <= start < n:
            return []
        if self._delivered:
            self._release_delivered()
        # A page's worth of fingerprints: plain Python for the repeats and the early set, one kernel
        # call for the disk (numpy's set operations cost more than they save at this size).
        early = self._early
        candidates: dict[int, int] = {}               # fingerprint -> first position in the buffer
        for i, fp in enumerate(self._buf[start:n].tolist()):
            if fp not in candidates and fp not in early:
                candidates[fp] = start + i
        if not candidates:
            return []
        keys = np.fromiter(candidates, dtype=np.uint64, count=len(candidates))
        on_disk = self._set.contains(keys).tolist()
        urls = self._urls
        out = []
        pending = self._peek_pending
        for (fp, pos), seen in zip(candidates.items(), on_disk):
            if not seen:
                early.add(fp)
                pending.append(fp)
                out.append(urls[pos])
        self._peeked += len(out)
        if pending:
            # Before the caller has them: a crash from here to the next call hands them out again, counted.
            self._peek_last.write_bytes(np.asarray(pending, dtype=FP_DTYPE).tobytes())
        return out

    def _not_peeked(self, segments: list[int], positions: np.ndarray, peeked: np.ndarray) -> np.ndarray:
        """An unreleased merge's positions without the fingerprints a peek handed out while it ran (the
        caller had them: PEEK_LOG); the merge's collection would have dropped them, a crash came first."""
        fps = np.concatenate([self._journal.scan(seq).fps for seq in segments])
        return positions[~np.isin(fps[positions], peeked)]

    def _restore_early(self, logged: np.ndarray) -> None:
        """Peeked fingerprints the restored buffer still holds and the disk does not: those logged in PEEK_LOG
        (the caller had them) are early again, so their merge skips them; those of the last peek only
        (PEEK_LAST: the caller may or may not have queued them) come out again, counted as duplicates."""
        last = _read_fps(self._peek_last)
        if self._n and (len(logged) or len(last)):
            buffered = self._buf[:self._n]
            logged = logged[np.isin(logged, buffered)]
            logged = logged[~self._set.contains(logged)] if len(logged) else logged
            self._early = set(logged.tolist())
            last = np.unique(last[np.isin(last, buffered) & ~np.isin(last, logged)])
            if len(last):
                self._counters.duplicates_emitted += int((~self._set.contains(last)).sum())
        if not self._early:
            self._peek_log.unlink(missing_ok=True)

    def _log_peeked(self) -> None:
        """Append the fingerprints the last peeks handed out to PEEK_LOG, so a restart does not hand them
        out again: the restored buffer holds them, and the restored early set makes its merge skip them."""
        if self._peek_pending and self._held is None:
            with open(self._peek_log, "ab") as log_file:
                log_file.write(np.asarray(self._peek_pending, dtype=FP_DTYPE).tobytes())
            self._peek_pending = []
            self._peek_last.unlink(missing_ok=True)   # after the append: a crash between reads them as logged

    def _trim_peek_log(self) -> None:
        """After a merge took peeked fingerprints: drop the log when nothing is early any more, rewrite it
        (atomically) when it holds mostly fingerprints now on disk."""
        if self._early:
            try:
                size = self._peek_log.stat().st_size
            except FileNotFoundError:
                return
            if size <= PEEK_LOG_SLACK_BYTES + 2 * FP_BYTES * len(self._early):
                return
            logged = self._early.difference(self._peek_pending)
            tmp = self._peek_log.with_suffix(".tmp")
            np.fromiter(logged, dtype=np.uint64, count=len(logged)).astype(FP_DTYPE).tofile(tmp)
            os.replace(tmp, self._peek_log)
        else:                                        # every peeked fingerprint is on disk, its marker without it
            self._peek_pending = []
            self._peek_log.unlink(missing_ok=True)
            self._peek_last.unlink(missing_ok=True)

    def _deliver(self) -> list[str]:
        """Hand out the new URLs found so far; their merges are released at the next call."""
        if self._undelivered:
            self._delivered.extend(self._undelivered)
            self._undelivered = []
        self._front.attention = bool(self._delivered)   # released at the next call
        if not self._ready:
            return []
        out, self._ready = self._ready, []
        return out

    def _release_delivered(self) -> None:
        """The caller has the URLs of these merges: their journal segments can go
        (deleted by the journal's helper thread: off the hot path)."""
        if self._held is not None:
            return                                   # the caller may not have them after all (hold)
        for release in self._delivered:
            self._release(release, soon=True)
        self._delivered = []
        self._front.attention = bool(self._ready or self._undelivered)

    def _release(self, release: Release, soon: bool = False) -> None:
        with self._lock:
            self._releases.pop(release.merge, None)
        # The marker goes first: without it recovery treats the merge as released
        # (and deletes its segments if they are still there).
        try:
            self._release_path(release.merge).unlink()
        except FileNotFoundError:
            pass
        if self._fault is not None:
            self._fault("release:marker-deleted")
        if soon:
            self._journal.remove_soon(release.segments)
        else:
            self._journal.remove(release.segments)

    def _merge(self, job: _MergeJob) -> None:
        """Merge one frozen buffer with the disk set; commit; pick the new URLs.

        Runs in a background thread or in the caller's. The sort, the passes
        over the buckets, the fsyncs and deletions are merge kernels that run
        with the GIL released (`mergekernel`), so a background merge uses the
        other core and takes the GIL from the caller only for a few short steps.
        """
        start = time.perf_counter()
        cpu_start = time.thread_time()
        try:
            fault = self._fault or _no_fault
            fault("merge:begin")
            # The journal segments must be durable before the commit; their fsync
            # (~20-30 ms on this VM's disk) runs while the sort and the set pass do.
            synced = self._journal.fsync_segments_soon(job.segments)
            fps = job.fps
            # Sort and drop repeats, keeping each fingerprint's earliest buffer position.
            keys, first_pos = sort_unique(fps)
            job.repeats = len(fps) - len(keys)
            fault("merge:sorted")
            budget = None
            if self._delta_ratio > 0:
                share = self._set.buckets * self._delta_ratio * len(keys) / self.buffer_size
                budget = max(1, math.ceil(share))
            fault("merge:start")
            plan = self._set.merge(keys, job.merge, budget)
            release = Release(job.merge, job.segments)
            try:
                if synced is not None:
                    synced.result()
                fault("merge:written")
                # The new URLs' buffer positions in arrival order: marks in a
                # bitmap over the buffer, read back in order (cheaper than a sort).
                arrived = np.zeros(len(fps), dtype=bool)
                job.new = int(np.count_nonzero(plan.new_mask))
                emit = plan.new_mask if job.skip is None else plan.new_mask & ~np.isin(keys, job.skip)
                arrived[first_pos[emit]] = True
                positions = np.flatnonzero(arrived).astype(POSITION_DTYPE, copy=False)
                del arrived, emit
                self._write_positions(job.merge, positions)
                fault("merge:positions-written")
                with self._lock:
                    self._releases[job.merge] = release
                counters = DueCounters(**asdict(self._counters))
                counters.merges += 1
                counters.new += job.new
                counters.buffer_repeats += job.repeats
                self._write_manifest(table=plan.table, merge=job.merge, merged_through=max(job.segments),
                                     counters=counters)
            except BaseException:
                with self._lock:
                    self._releases.pop(job.merge, None)
                self._set.discard(plan)
                self._release_path(job.merge).unlink(missing_ok=True)
                raise
            job.committed = True
            c = self._counters
            c.merges += 1
            c.new += job.new
            c.buffer_repeats += job.repeats
            fault("merge:committed")
            self._merged_through = max(job.segments)
            self._set.adopt(plan)
            fault("merge:adopted")
            job.urls = pick(job.urls_in, positions)
            job.new_fps = fps[positions]
            job.positions = positions
            job.urls_in = []                      # the buffer's strings may go now
            job.fps = fps = _NO_FPS               # and its fingerprints
            del keys, first_pos, plan
            release_free_memory()                 # or glibc's arenas fragment and RSS creeps up
            fault("merge:urls-picked")
        except BaseException as exc:   # handed to the thread that collects the job
            job.error = exc
        finally:
            job.seconds = time.perf_counter() - start
            job.cpu_seconds = time.thread_time() - cpu_start
            self._front.merge_done = True       # before done.set(): after it, it could outlive the collect
            job.done.set()
            if self.on_merge_done is not None:
                self.on_merge_done()

    # --- internals: files ----------------------------------------------------------

    def _release_path(self, merge: int) -> Path:
        return self._release_dir / f"m{merge:08d}.pos"

    def _write_positions(self, merge: int, positions: np.ndarray, atomic: bool = False) -> None:
        """A merge's release marker. `atomic` for a rewrite: a crash must leave the old marker or the new one."""
        path = self._release_path(merge)
        target = path.with_suffix(".tmp") if atomic else path
        with open(target, "wb") as f:
            positions.tofile(f)
            if self._durable:
                f.flush()
                os.fsync(f.fileno())
        if atomic:
            os.replace(target, path)
        if self._durable:
            fsync_dir(self._release_dir)

    def _write_manifest(self, *, table: BucketTable | None = None,
                        merge: int | None = None, merged_through: int | None = None,
                        counters: DueCounters | None = None) -> None:
        """Commit the state; the merge thread passes its new table, others write the current one."""
        c = counters if counters is not None else DueCounters(**asdict(self._counters))
        c.checks = self._front.checks
        c.cache_hits = self._cache_base[0] + self._cache.hits
        c.cache_misses = self._cache_base[1] + self._cache.misses
        with self._lock:
            unreleased = sorted(self._releases.values(), key=lambda r: r.merge)
            unreleased = [Release(r.merge, list(r.segments), r.count_duplicates) for r in unreleased]
        manifest = DueManifest(
            buckets=self._set.buckets,
            table=table if table is not None else self._set.table,
            merge=merge if merge is not None else self._last_merge,
            merged_through=merged_through if merged_through is not None else self._merged_through,
            unreleased=unreleased,
            counters=c,
        )
        write_manifest(self.directory, manifest, self._durable)


def _read_fps(path: Path) -> np.ndarray:
    """A file of fingerprints (a torn last one is dropped), empty if there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return _NO_FPS
    return np.frombuffer(data[:len(data) - len(data) % FP_BYTES], dtype=FP_DTYPE).astype(np.uint64)


def _closed_submit(directory: str, fps, urls) -> list[str]:
    raise RuntimeError(f"submit on a closed DiskDUE ({directory})")


def _no_fault(point: str) -> None:
    """Default fault hook: nothing happens."""

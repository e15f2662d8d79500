"""The disk-backed DUE: front cache, journaled buffer, bucketed sorted merges.

Data flow of one `submit(fps, urls)` (hot path, a page's links at a time):

1. Front cache (`due.cache`, any `crawler.cache` policy): a hit is a known
   duplicate and is dropped; a miss is inserted.
2. The misses are appended to the in-memory buffer (a uint64 array of
   fingerprints and a list of the caller's URL strings, no copies) and to
   the journal (one record, copied into a mapped window of the segment file:
   no system call). Steps 1 and 2 are one call of the submit kernel
   (`submit_pass.py`; compiled in crawler/_native/ when built). Repeats
   inside the buffer are caught at the merge, which sorts it anyway.
3. When the buffer holds `due.buffer_size` URLs (half of it when merges run
   in the background, so the two halves never exceed the buffer), or when
   the node calls `flush()` because the frontier runs low, the buffer is
   merged (Mercator): sorted, deduplicated, and checked against the sorted
   on-disk set bucket by bucket in one sequential pass (`diskset`). The
   fingerprints not on disk are new; their URLs are returned to the caller
   in the order they arrived. In the background, a merge's heavy passes are
   compiled kernels that release the GIL (`merge_pass`): it runs on a
   second core while `submit` goes on.

RAM is the cache plus the buffer (8 bytes per fingerprint plus the URL
strings it keeps alive, about 130 bytes each for 80-character URLs), plus one
bucket window and the sort arrays during a merge; never the number of URLs
seen. (After each merge freed heap pages go back to the OS: `trim`.)

Hot path cost is per call more than per URL: with the compiled kernel about
8-10 us per page-sized call (~60 links) on a 2-CPU VM, of which the CLOCK-SETS
probe (the default policy) is ~35-50 ns per link; the pure-Python twin costs about twice that.

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

Where the parts are: this module is the DUE's interface, its recovery and its
buffer; the merges (taking the buffer, the merge itself, collecting, handing
out and releasing, committing) are `merging.py`, which DiskDUE inherits; the
journal `journal.py`; the release markers `release.py`; what prompt lookups
handed out early `peek.py`; the manifest `manifest.py`.
"""

from __future__ import annotations

import errno
import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TypeVar, cast

import numpy as np

from crawler.cache import Cache, cache_from_config
from crawler.config.schema import DueConfig
from crawler.due.diskset import BucketTable, DiskSet
from crawler.due.front import DueFront
from crawler.due.journal import SubmitJournal
from crawler.due.manifest import DueCounters, DueManifest, Release, read_manifest
from crawler.due.merging import BUFFER_HEADROOM, DueMerges, FaultHook, Front
from crawler.due.peek import PeekLog
from crawler.due.release import ReleaseMarkers
from crawler.fsutil import fsync_dir

_monotonic = time.monotonic


class _Unset:
    """An argument not given: DiskDUE takes the value of the same key in its `due` config."""

    def __repr__(self) -> str:
        return "FROM_CONFIG"


FROM_CONFIG = _Unset()
T = TypeVar("T")


def _given(value: T | _Unset, configured: T) -> T:
    return configured if isinstance(value, _Unset) else value


class DiskDUE(DueMerges):
    """Mercator's DUE with DRUM buckets; restartable on its directory."""

    def __init__(self, directory: str | Path, config: DueConfig, *,
                 buckets: int | _Unset = FROM_CONFIG,
                 delta_ratio: float | _Unset = FROM_CONFIG,
                 background: bool | _Unset = FROM_CONFIG,
                 journal_fsync_s: float | None | _Unset = FROM_CONFIG,
                 window_entries: int | _Unset = FROM_CONFIG,
                 durable: bool = True,
                 cache: Cache | None = None,
                 fault_hook: FaultHook | None = None) -> None:
        """`config` is the `due` section (DueConfig), the one source of its settings; the tunables
        (due.buckets, due.delta_ratio, due.background, due.journal_fsync_s, due.window_entries)
        may be given here instead (tests, the bench)."""
        config = replace(config, buckets=_given(buckets, config.buckets),
                         delta_ratio=_given(delta_ratio, config.delta_ratio),
                         background=_given(background, config.background),
                         journal_fsync_s=_given(journal_fsync_s, config.journal_fsync_s),
                         window_entries=_given(window_entries, config.window_entries))
        # Where and how big.
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.buffer_size = int(config.buffer_size)
        if self.buffer_size < 1:
            raise ValueError(f"due.buffer_size must be at least 1, got {self.buffer_size}")
        self.background = config.background
        # A background merge takes half the buffer while the other half fills.
        self._trigger = max(1, self.buffer_size // 2) if self.background else self.buffer_size
        self._journal_fsync_s = config.journal_fsync_s
        self._durable = durable
        self._fault = fault_hook
        # Parts. The front (front.py) holds the state submit's hot path touches: the
        # cache, the buffer (fingerprints of accepted, undecided URLs, and their URLs),
        # the journal's window and append position, and when Python must look.
        # (A cast: the compiled front is untyped, and the Python twin leaves its callbacks unannotated.)
        self._front = cast(Front, DueFront(cache if cache is not None else cache_from_config(config.cache),
                                           np.empty(self._trigger + BUFFER_HEADROOM, dtype=np.uint64)))
        self._front.hooked = fault_hook is not None
        # submit is the front's own: one call from Python per page (an instance attribute that
        # shadows the method). The front calls back into these when it must (a cycle through
        # the front, broken at close).
        self._front.slow = self._submit_slow
        self._front.finish = self._finish
        self.__dict__["submit"] = self._front.submit
        self._journal = SubmitJournal(self.directory / "journal", durable, cursor=self._front)
        self._markers = ReleaseMarkers(self.directory / "release", durable)
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
        self._peeks = PeekLog(self.directory)     # what peek handed out before its merge (peek.py)
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
        self._settle_calls()
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

    def _collect_if_done(self) -> None:
        """Release what the caller has, and take a finished merge's results (never waits)."""
        if self._delivered:
            self._release_delivered()
        if self._peeks.pending:
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
        self._settle_calls()
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
            "peeked": self._peeks.handed_out,
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
            if self._peeks.pending:
                self._log_peeked()
            if self._job is not None:
                self._collect()
            if self._peeks.early and self._n:
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

    def _settle_calls(self) -> None:
        """What flush and checkpoint settle first: a hold raises; URLs the caller surely has are
        released; fingerprints prompt lookups handed out are logged."""
        if self._held is not None:
            self._raise_held()
        if self._delivered:
            self._release_delivered()
        if self._peeks.pending:
            self._log_peeked()

    def _raise_held(self) -> None:
        error = self._held
        assert error is not None
        raise OSError(error.errno or errno.EIO, f"the DUE in {self.directory} is held after a storage error "
                                                f"({error.strerror or error}); restart the node to resume")

    # --- recovery ----------------------------------------------------------------

    def restore(self) -> None:
        """Rebuild state from the directory: set, unreleased merges, journaled buffer."""
        manifest = read_manifest(self.directory)
        buckets = manifest.buckets if manifest is not None else self.config.buckets
        self._set = DiskSet(self.directory / "set", buckets, self.config.delta_ratio, self.config.window_entries,
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
        peeked = self._peeks.logged()
        # Merges committed whose URLs may not have reached the caller: hand them out again.
        kept: list[Release] = []
        for release in manifest.unreleased:
            if self._markers.path(release.merge).exists() and all(s in existing for s in release.segments):
                positions = self._markers.read(release.merge)
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
        self._markers.keep_only([r.merge for r in kept])
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
        self._counters.duplicates_emitted += self._peeks.restore(peeked, self._buf[:self._n], self._set)
        self._undelivered = kept
        self._front.attention = bool(self._ready or self._undelivered)
        last_seq = max([self._merged_through, *existing]) if existing else self._merged_through
        self._journal.open_segment(last_seq + 1)
        self._segments.append(last_seq + 1)
        self._journal.fsync_active()
        if self._durable:
            fsync_dir(self._journal.directory)
        self._write_manifest()
        self._peeks.forget_last()                    # counted in the manifest just written

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
        if self._peeks.pending:
            self._log_peeked()                       # the last peek's URLs are queued by now
        n = self._n
        if not 0 <= start < n:
            return []
        if self._delivered:
            self._release_delivered()
        # A page's worth of fingerprints: plain Python for the repeats and the early set, one kernel
        # call for the disk (numpy's set operations cost more than they save at this size).
        early = self._peeks.early
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
        pending = self._peeks.pending
        for (fp, pos), seen in zip(candidates.items(), on_disk):
            if not seen:
                early.add(fp)
                pending.append(fp)
                out.append(urls[pos])
        self._peeks.handed_out += len(out)
        self._peeks.write_last()
        return out

    def _not_peeked(self, segments: list[int], positions: np.ndarray, peeked: np.ndarray) -> np.ndarray:
        """An unreleased merge's positions without the fingerprints a peek handed out while it ran (the
        caller had them: PEEK_LOG); the merge's collection would have dropped them, a crash came first."""
        fps = np.concatenate([self._journal.scan(seq).fps for seq in segments])
        return positions[~np.isin(fps[positions], peeked)]


    def _log_peeked(self) -> None:
        """The last peeks' URLs are queued by now: log them (peek.py), unless held (nothing is written then)."""
        if self._held is None:
            self._peeks.log()


def _closed_submit(directory: str, fps, urls) -> list[str]:
    raise RuntimeError(f"submit on a closed DiskDUE ({directory})")


"""The DUE's merges: the buffer frozen into a job, merged with the disk set, committed, collected.

A merge takes the whole buffer and its journal segments (`_take_buffer`),
then, in a background thread or in the caller's (`_merge`): sorts and
deduplicates the fingerprints, passes over the buckets of the disk set
(`diskset`, compiled kernels with the GIL released), waits for its journal
segments' fsync, writes its release marker (the positions of its new URLs),
and commits the manifest. The caller's thread collects the job (`_collect`):
takes its new URLs, or, if it failed before committing, gives its input back
to the buffer. Only one merge runs at a time; `submit` starts the next one
when the buffer reaches its trigger, and waits for the running one only when
the buffer is full.

`DueMerges` is the merge half of `DiskDUE`, which inherits it and provides
the state declared below.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from crawler.cache import Cache
from crawler.config.schema import DueConfig
from crawler.due.base import DUE
from crawler.due.diskset import BucketTable, DiskSet
from crawler.due.journal import SubmitJournal
from crawler.due.manifest import DueCounters, DueManifest, Release, write_manifest
from crawler.due.merge_pass import pick, sort_unique
from crawler.due.peek import PeekLog
from crawler.due.release import POSITION_DTYPE, ReleaseMarkers
from crawler.due.trim import release_free_memory

BUFFER_HEADROOM = 1024          # extra fingerprints allocated past the merge trigger
_NO_FPS = np.empty(0, dtype=np.uint64)

FaultHook = Callable[[str], None]
SubmitFn = Callable[[Any, Any], list[str]]   # (fingerprints, URLs) -> new URLs, as DUE.submit


class Front(Protocol):
    """What the DUE reads and sets of its front (front.py: compiled, or its Python twin): the state
    submit's hot path touches, and the callbacks it makes when Python must look."""
    cache: Cache
    buf: np.ndarray                # fingerprints of accepted, undecided URLs
    urls: list[str]                # their URLs
    n: int                         # how many
    look_at: int                   # the buffer fill at which submit looks at the merges
    merge_done: bool               # set by a merge when it ends
    attention: bool                # every submit goes to `slow` (URLs or releases are waiting)
    checks: int
    fsync_at: float                # monotonic time the next journal fsync is due
    hooked: bool                   # a fault hook wants to hear of every journaled batch
    slow: SubmitFn | None
    finish: Callable[[Any], list[str]] | None

    def submit(self, fps: Any, urls: Any) -> list[str]: ...

    def accept(self, fps: Any, urls: list[str]) -> Any: ...


@dataclass
class MergeJob:
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


class DueMerges(DUE):
    """Starting, running and collecting merges (the merge half of DiskDUE)."""

    # DiskDUE's state the merges use (set by DiskDUE.__init__ and its restore).
    directory: Path
    config: DueConfig
    buffer_size: int
    background: bool
    on_merge_done: Callable[[], None] | None
    _trigger: int
    _durable: bool
    _fault: FaultHook | None
    _held: OSError | None
    _front: Front
    _journal: SubmitJournal
    _set: DiskSet
    _markers: ReleaseMarkers
    _peeks: PeekLog
    _segments: list[int]
    _current_job: MergeJob | None
    _last_merge: int
    _merged_through: int
    _ready: list[str]
    _undelivered: list[Release]
    _delivered: list[Release]
    _releases: dict[int, Release]
    _lock: threading.Lock
    _counters: DueCounters
    _cache_base: tuple[int, int]
    _last_merge_s: float
    _wait_s: float
    _merge_cpu_s: float

    # The buffer and the cache live in the front (front.py); these name them.
    @property
    def _n(self) -> int:
        return self._front.n

    @_n.setter
    def _n(self, n: int) -> None:
        self._front.n = n

    @property
    def _buf(self) -> np.ndarray:
        return self._front.buf

    @_buf.setter
    def _buf(self, buf: np.ndarray) -> None:
        self._front.buf = buf

    @property
    def _cache(self) -> Cache:
        return self._front.cache

    @_cache.setter
    def _cache(self, cache: Cache) -> None:
        self._front.cache = cache

    @property
    def _urls(self) -> list[str]:
        return self._front.urls

    @_urls.setter
    def _urls(self, urls: list[str]) -> None:
        self._front.urls = urls

    @property
    def _job(self) -> MergeJob | None:
        """The merge in progress. Setting it sets what the front checks instead: its
        `look_at`, the buffer fill at which to start a merge (none running) or to wait
        for the running one (the buffer is full), and `merge_done`, which the merge
        sets when it ends."""
        return self._current_job

    @_job.setter
    def _job(self, job: MergeJob | None) -> None:
        self._current_job = job
        front = self._front
        front.look_at = self._trigger if job is None else max(0, self.buffer_size - job.count)
        front.merge_done = job is not None and job.done.is_set()

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

    def _take_buffer(self) -> MergeJob:
        """Freeze the buffer and its journal segments into a merge job; start a new segment."""
        self._last_merge += 1
        job = MergeJob(self._last_merge, self._buf[:self._n], self._urls, self._segments, self._n)
        early = self._peeks.early
        if early:
            job.skip = np.fromiter(early, dtype=np.uint64, count=len(early))
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
        if self._peeks.early:
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

    def _skip_peeked(self, job: MergeJob) -> None:
        """Peeked URLs a merge found new are on disk now: they need no remembering. Those peek handed
        out while the merge ran (it skipped only the ones peeked before it began) are not handed out
        again."""
        peeks = self._peeks
        if job.skip is not None:
            peeks.early.difference_update(job.skip.tolist())
        if peeks.early and job.new_fps is not None and len(job.new_fps) and job.positions is not None:
            early = np.fromiter(peeks.early, dtype=np.uint64, count=len(peeks.early))
            twice = np.isin(job.new_fps, early)
            if twice.any():
                job.urls = [u for u, dup in zip(job.urls, twice.tolist()) if not dup]
                # Its release marker must not name them either, or a restart before its release hands them out.
                self._markers.write(job.merge, job.positions[~twice], atomic=True)
                peeks.early.difference_update(job.new_fps[twice].tolist())
        peeks.trim()

    def _merge(self, job: MergeJob) -> None:
        """Merge one frozen buffer with the disk set; commit; pick the new URLs.

        Runs in a background thread or in the caller's. The sort, the passes
        over the buckets, the fsyncs and deletions are merge kernels that run
        with the GIL released (`merge_pass`), so a background merge uses the
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
            delta_ratio = self.config.delta_ratio
            if delta_ratio > 0:
                share = self._set.buckets * delta_ratio * len(keys) / self.buffer_size
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
                self._markers.write(job.merge, positions)
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
                self._markers.remove(job.merge)
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


    # --- handing out and releasing ------------------------------------------------

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
        self._markers.remove(release.merge)
        if self._fault is not None:
            self._fault("release:marker-deleted")
        if soon:
            self._journal.remove_soon(release.segments)
        else:
            self._journal.remove(release.segments)

    # --- committing -------------------------------------------------------------

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


def _no_fault(point: str) -> None:
    """Default fault hook: nothing happens."""

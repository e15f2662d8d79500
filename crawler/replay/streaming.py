"""The streaming replay: traces of any length, read once from disk in chunks.

Why. The in-memory replay (simulate.py) holds every stream and its next-use
times in RAM, and its LRU pass about 100 bytes per request: near 10 GB at
10^8 requests, where the paper's traces held 6.4-7.1 x 10^9 per machine.
Here memory is what the simulated caches hold (plus one chunk), whatever
the trace's length.

How. Each stream (chunks.StreamSource) is read once, chunk by chunk, and
every chunk is fed to every simulation of that stream before the next one
is read; each stream still gets its own caches (one cache per node, as in
the paper), and misses are summed per (trace, policy, size).
- lru: every size in one pass. A request whose LRU stack distance exceeds
  the largest size misses at every size, so only the top max-size entries
  of the stack matter: the compiled LruStackKernel (crawler/_native/
  lru_stack.c) keeps them, with a Fenwick tree over a window of time stamps
  renumbered when full, and counts the depths in a histogram; misses(k) =
  requests deeper than k. Memory about 40 bytes per entry of the largest size.
- every other online policy (clock, clock-sets, sieve, random, lru's
  siblings s3fifo, arc, 2q, wtinylfu): one cache per size, the crawler's own
  (make_cache), fed each chunk with check_and_add_many.
- min: one cache per size, as above, but MIN needs each request's next use
  (the whole future): before the caches run, min_streaming.build_next_use
  writes each stream's next uses to a file in `options.spill_dir`, out of
  core (8 bytes per request kept, 24 while building), and each MIN cache
  reads it in step with the chunks.
- infinite: no cache to run. Its misses are the first requests of each
  fingerprint, which the next-use build counts as it merges (a request
  never asked again is a fingerprint's last: one per fingerprint; a request
  that is an earlier one's next use is not a first): asked for `infinite`
  (or `min`), the next uses are built, and that count is the stream's
  distinct fingerprints in the summary too.
- static: every size in one pass, as LRU, once each stream's most frequent
  fingerprints (as many as the largest size) are found out of core
  (static_streaming.build_static_table, in `options.spill_dir`).
With `jobs` > 1 the simulations are split into that many groups of about
equal cost, each a forked process that reads the trace itself (the page
cache serves the later reads): time divides, memory adds up.

Without `min` or `infinite` the distinct fingerprints of a stream are not
counted (that needs the next-use build or a set of all of them), so
TraceStats.distinct is None.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crawler._native import NATIVE
from crawler.cache import make_cache
from crawler.replay.chunks import DEFAULT_CHUNK_REQUESTS, RAW_SUFFIX, StreamSource, open_sources
from crawler.replay.min_streaming import (
    NEXT_USE_COST_S_PER_REQUEST,
    MinRun,
    NextUseFile,
    NextUseReader,
    build_next_use,
)
from crawler.replay.simulate import ReplayOptions, ReplayResult, Tally, TraceStats, check_options, window_requests
from crawler.replay.static_streaming import STATIC_COST_S_PER_REQUEST, StaticRun, StaticTable, build_static_table
from crawler.splitter.streamlog import FLAG_CACHE_HIT, FLAG_CROSS

# Traces longer than this (requests in all streams) are replayed streaming unless told otherwise: the
# in-memory LRU pass needs about 100 bytes per request, so 5 GB here.
AUTO_STREAMING_REQUESTS = 50_000_000
# Rough seconds per request of a simulation (LRU: all sizes; the others: one size), to balance `jobs`
# groups and move the progress bar: 10^7 requests of bench/replay_scale_bench.py's trace, sizes 2^0..2^25,
# on a loaded machine (only the ratios matter).
COST_S_PER_REQUEST = {"lru": 9e-7, "clock": 5e-7, "sieve": 4e-7, "min": 3e-7, "static": 2e-7}
DEFAULT_COST_S_PER_REQUEST = 5e-7
# Policies no simulation runs: the next-use build counts their misses (see the module doc).
COUNTED = ("infinite",)
ONE_PASS = ("lru", "static")          # every size in one simulation
# Policies that need each stream's next uses built before the simulations.
NEEDS_NEXT_USES = ("min", "infinite")


class PyLruStack:
    """Pure-Python twin of the compiled LruStackKernel (used only when the extension is not built): the
    top `capacity` entries of the LRU stack in a list, most recent first. O(capacity) a request."""

    def __init__(self, capacity: int, window: int = 0) -> None:
        if not 1 <= capacity < (1 << 30):
            raise ValueError("LruStackKernel needs 1 <= capacity < 2**30")
        self.capacity = capacity
        self.window = window or 2 * capacity
        self.requests = 0
        self._stack: list[int] = []

    @property
    def size(self) -> int:
        return len(self._stack)

    def _access(self, fp: int) -> int:
        self.requests += 1
        stack = self._stack
        try:
            depth = stack.index(fp) + 1
            del stack[depth - 1]
        except ValueError:
            depth = 0
            if len(stack) == self.capacity:
                stack.pop()
        stack.insert(0, fp)
        return depth

    def depths(self, fps: np.ndarray, out: np.ndarray) -> None:
        for i, fp in enumerate(np.asarray(fps, dtype=np.uint64).tolist()):
            out[i] = self._access(fp)

    def histogram(self, fps: np.ndarray, hist: np.ndarray) -> None:
        for fp in np.asarray(fps, dtype=np.uint64).tolist():
            hist[self._access(fp)] += 1


def lru_stack(capacity: int, window: int = 0):
    """The compiled bounded LRU stack (crawler/_native/lru_stack.c), or its pure-Python twin."""
    if NATIVE is not None and hasattr(NATIVE, "LruStackKernel"):
        return NATIVE.LruStackKernel(capacity, window)
    return PyLruStack(capacity, window)


def misses_from_histogram(hist: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Misses per size from a depth histogram (hist[0]: deeper than the largest size, or first requests)."""
    deeper = np.cumsum(hist[::-1])[::-1]           # deeper[d] = requests of depth >= d (d >= 1)
    beyond = sizes + 1
    tail = np.where(beyond < len(hist), deeper[np.minimum(beyond, len(hist) - 1)], 0)
    return (int(hist[0]) + tail).astype(np.int64)


class _Windows:
    """Misses per size and window of one stream, grown as it goes on (its length is known at its end)."""

    def __init__(self, count: int, window: int) -> None:
        self.window = window
        self.counts = np.zeros((count, 0), dtype=np.int64)

    def _span(self, offset: int, length: int) -> tuple[int, int]:
        first, last = offset // self.window, (offset + length - 1) // self.window
        if last >= self.counts.shape[1]:
            grown = np.zeros((self.counts.shape[0], max(last + 1, 2 * self.counts.shape[1])), dtype=np.int64)
            grown[:, :self.counts.shape[1]] = self.counts
            self.counts = grown
        return first, last - first + 1

    def add_misses(self, offset: int, length: int, missed: np.ndarray) -> None:
        """One size: the misses at positions `missed` of a chunk of `length` starting `offset` into the stream."""
        first, span = self._span(offset, length)
        self.counts[0, first:first + span] += np.bincount((missed + offset) // self.window - first, minlength=span)

    def add_buckets(self, offset: int, length: int, buckets: np.ndarray) -> None:
        """Every size: bucket[j] = the number of sizes (the smallest ones) at which request j misses."""
        first, span = self._span(offset, length)
        rows = self.counts.shape[0]
        win = (np.arange(offset, offset + length, dtype=np.int64) // self.window - first) * (rows + 1)
        grid = np.bincount(win + buckets, minlength=span * (rows + 1)).reshape(span, rows + 1)
        # misses at size i = requests whose bucket exceeds i
        self.counts[:, first:first + span] += np.cumsum(grid[:, ::-1], axis=1)[:, ::-1][:, 1:].T

    def trimmed(self, requests: int) -> np.ndarray:
        return self.counts[:, :-(-requests // self.window)]


class _LruRun:
    """LRU at every size of one stream's trace, one pass."""

    def __init__(self, sizes: np.ndarray, window: int | None) -> None:
        self.sizes = sizes
        self.kernel = lru_stack(int(sizes[-1]))
        self.hist = np.zeros(int(sizes[-1]) + 1, dtype=np.int64)
        self.windows = None if window is None else _Windows(len(sizes), window)
        if window is not None:
            # bucket[d] = sizes at which a request of depth d misses (d = 0: all of them)
            bucket = np.searchsorted(sizes, np.arange(int(sizes[-1]) + 1), side="left")
            bucket[0] = len(sizes)
            self.bucket = bucket.astype(np.uint16 if len(sizes) < (1 << 16) else np.int64)

    def feed(self, fps: np.ndarray, offset: int) -> None:
        if self.windows is None:
            self.kernel.histogram(fps, self.hist)
            return
        depths = np.empty(len(fps), dtype=np.uint32)
        self.kernel.depths(fps, depths)
        self.hist += np.bincount(depths, minlength=len(self.hist))[:len(self.hist)]
        self.windows.add_buckets(offset, len(fps), self.bucket[depths].astype(np.int64))

    def misses(self) -> np.ndarray:
        return misses_from_histogram(self.hist, self.sizes)


class _CacheRun:
    """One online policy at one size over one stream's trace."""

    def __init__(self, policy: str, size: int, seed: int, window: int | None) -> None:
        self.cache = make_cache(policy, size, seed=seed) if policy == "random" else make_cache(policy, size)
        self.windows = None if window is None else _Windows(1, window)

    def feed(self, fps: np.ndarray, offset: int) -> None:
        hits = self.cache.check_and_add_many(fps)
        if self.windows is not None:
            self.windows.add_misses(offset, len(fps), np.flatnonzero(~hits))

    def misses(self) -> np.ndarray:
        return np.array([self.cache.misses], dtype=np.int64)


class _ColdRun:
    """MIN at a size that holds all of a stream's distinct fingerprints: it never evicts, so it misses
    each fingerprint's first request only, which the next-use build counted. Nothing is simulated (the
    in-memory replay skips these sizes the same way)."""

    def __init__(self, built: NextUseFile, window: int | None) -> None:
        self.distinct = built.distinct
        self.windows = None
        if window is not None:
            self.windows = _Windows(1, window)
            if built.cold_windows is not None:
                self.windows.counts = built.cold_windows[None, :].copy()

    def feed(self, fps: np.ndarray, offset: int) -> None:
        pass

    def misses(self) -> np.ndarray:
        return np.array([self.distinct], dtype=np.int64)


@dataclass(frozen=True)
class Job:
    """A simulation: `policy` at one size (`size_index`), or LRU at every size (size_index None)."""

    policy: str
    size_index: int | None
    cost_s_per_request: float


@dataclass
class GroupResult:
    """What one group of simulations found over every stream."""

    tallies: dict[tuple[str, str], Tally]
    stats: dict[str, TraceStats] = field(default_factory=dict)


def plan_jobs(options: ReplayOptions) -> list[Job]:
    jobs = []
    for policy in options.policies:
        if policy in COUNTED:
            continue
        each = COST_S_PER_REQUEST.get(policy, DEFAULT_COST_S_PER_REQUEST)
        if policy in ONE_PASS:
            jobs.append(Job(policy, None, each))
        else:
            jobs.extend(Job(policy, i, each) for i in range(len(options.sizes)))
    return jobs


def split_jobs(jobs: list[Job], groups: int) -> list[list[Job]]:
    """`groups` lists of about equal cost (largest first onto the lightest group); empty ones dropped."""
    bins: list[list[Job]] = [[] for _ in range(max(1, groups))]
    load = [0.0] * len(bins)
    for job in sorted(jobs, key=lambda j: -j.cost_s_per_request):
        k = load.index(min(load))
        bins[k].append(job)
        load[k] += job.cost_s_per_request
    return [b for b in bins if b]


def _run_group(sources: list[StreamSource], options: ReplayOptions, jobs: list[Job],
               chunk_requests: int, next_uses: dict[tuple[int, str], NextUseFile],
               static_tables: dict[tuple[int, str], StaticTable], progress=None) -> GroupResult:
    """Every job of the group over every stream, reading each stream once; `progress` (in this process
    only) advances per chunk. `next_uses[(stream index, trace)]`: the stream's next uses, for MIN;
    `static_tables[(stream index, trace)]`: its most frequent fingerprints, for STATIC."""
    per_request = sum(j.cost_s_per_request for j in jobs)
    sizes = np.asarray(options.sizes, dtype=np.int64)
    window = options.window
    tallies: dict[tuple[str, str], Tally] = {}
    for trace in options.traces:
        for policy in {j.policy for j in jobs}:
            tallies[(trace, policy)] = Tally(np.zeros(len(sizes), dtype=np.int64),
                                             None if window is None else np.zeros((len(sizes), 0), dtype=np.int64))
    stats = {trace: TraceStats(trace, distinct=None) for trace in options.traces}
    for index, source in enumerate(sources):
        runs: dict[str, list[tuple[Job, _LruRun | _CacheRun | MinRun | StaticRun | _ColdRun]]] = {}
        readers: list[NextUseReader] = []
        for trace in options.traces:
            runs[trace] = []
            if any(j.policy == "min" for j in jobs):
                readers.append(NextUseReader(next_uses[(index, trace)]))
            for job in jobs:
                run: _LruRun | _CacheRun | MinRun | StaticRun | _ColdRun
                if job.policy == "static":
                    run = StaticRun(sizes, static_tables[(index, trace)],
                                    None if window is None else _Windows(len(sizes), window))
                elif job.size_index is None:
                    run = _LruRun(sizes, window)
                elif job.policy == "min" and int(sizes[job.size_index]) >= next_uses[(index, trace)].distinct:
                    run = _ColdRun(next_uses[(index, trace)], window)       # holds them all: never evicts
                elif job.policy == "min":
                    run = MinRun(int(sizes[job.size_index]), readers[-1],
                                 None if window is None else _Windows(1, window))
                else:
                    run = _CacheRun(job.policy, int(sizes[job.size_index]), options.seed, window)
                runs[trace].append((job, run))
        seconds = {(trace, i): 0.0 for trace in options.traces for i in range(len(jobs))}
        offsets = dict.fromkeys(options.traces, 0)
        logged = dict.fromkeys(options.traces, 0)
        for chunk in source.chunks(chunk_requests):
            for trace in options.traces:
                part = chunk.trace(trace)
                if chunk.flags is not None:
                    logged[trace] += int(_logged_hits(chunk.flags, trace))
                if not len(part):
                    continue
                for i, (_, run) in enumerate(runs[trace]):
                    t0 = time.perf_counter()
                    run.feed(part, offsets[trace])
                    seconds[(trace, i)] += time.perf_counter() - t0
                offsets[trace] += len(part)
            if progress is not None:
                progress.advance(per_request * len(chunk.fps), f"{source.name}: {sum(offsets.values()):,} requests")
        for trace in options.traces:
            st = stats[trace]
            st.requests += offsets[trace]
            st.streams.append({"stream": source.name, "requests": offsets[trace], "distinct": None})
            if source.has_flags():
                st.logged_cache_hits = (st.logged_cache_hits or 0) + logged[trace]
            for i, (job, run) in enumerate(runs[trace]):
                tally = tallies[(trace, job.policy)]
                where = slice(None) if job.size_index is None else job.size_index
                tally.misses[where] += run.misses() if job.size_index is None else int(run.misses()[0])
                tally.seconds += seconds[(trace, i)]
                tally.runs += 1 if offsets[trace] else 0
                if run.windows is not None and tally.windows is not None:
                    tally.windows = _add_windows(tally.windows, where, run.windows.trimmed(offsets[trace]))
                if isinstance(run, _CacheRun):
                    run.cache.close()
        for reader in readers:
            reader.close()
        del runs
    return GroupResult(tallies, stats)


def _logged_hits(flags: np.ndarray, trace: str) -> int:
    """Records of this chunk's trace that the online splitter cache logged as hits (traces.Stream's rule)."""
    hit = (flags & FLAG_CACHE_HIT) != 0
    if trace == "cross":
        hit &= (flags & FLAG_CROSS) != 0
    return int(hit.sum())


def _add_windows(total: np.ndarray, where: int | slice, counts: np.ndarray) -> np.ndarray:
    """total[where, :w] += counts, growing total to the longer of the two."""
    width = max(total.shape[1], counts.shape[1])
    if width > total.shape[1]:
        grown = np.zeros((total.shape[0], width), dtype=np.int64)
        grown[:, :total.shape[1]] = total
        total = grown
    if isinstance(where, slice):
        total[:, :counts.shape[1]] += counts
    else:
        total[where, :counts.shape[1]] += counts[0]
    return total


def _count_distinct(st: TraceStats, built: list[NextUseFile]) -> None:
    """The streams' distinct fingerprints, as the next-use build counted them."""
    st.distinct = sum(b.distinct for b in built)
    for row, b in zip(st.streams, built, strict=True):
        row["distinct"] = b.distinct


def _infinite(st: TraceStats, built: list[NextUseFile], sizes: int, windowed: bool) -> Tally:
    """INFINITE at every size: each stream's first requests of a fingerprint (its distinct count)."""
    windows = None
    if windowed:
        windows = np.zeros((sizes, 0), dtype=np.int64)
        for b in built:
            if b.cold_windows is not None:
                windows = _add_windows(windows, slice(None), np.tile(b.cold_windows, (sizes, 1)))
    return Tally(np.full(sizes, st.distinct or 0, dtype=np.int64), windows)


@dataclass(frozen=True)
class StreamingChoice:
    """How `crawler replay` reads its inputs: `sources` to stream, or None to load them in memory."""

    sources: list[StreamSource] | None
    requests: int


def choose_streaming(inputs: list[str | os.PathLike], streaming: bool | None) -> StreamingChoice:
    """Streams when asked (`streaming` True), never when told not to (False), and otherwise when the
    inputs hold more than AUTO_STREAMING_REQUESTS requests or include raw *.u64 files (which only the
    streaming path reads). The count comes from file sizes and headers: nothing is loaded."""
    sources = open_sources(inputs)
    requests = sum(s.requests for s in sources)
    raw = any(f.path.suffix == RAW_SUFFIX for s in sources for f in s.files)
    if streaming is False and raw:
        raise ValueError(f"raw {RAW_SUFFIX} inputs are read by the streaming replay only: drop --no-streaming")
    if streaming is None:
        streaming = raw or requests > AUTO_STREAMING_REQUESTS
    return StreamingChoice(sources if streaming else None, requests)


def replay_streaming(sources: list[StreamSource], options: ReplayOptions,
                     chunk_requests: int = DEFAULT_CHUNK_REQUESTS, progress=None) -> ReplayResult:
    """Simulates `options` over `sources` streaming (see the module docstring); the same result as
    simulate.replay on the same streams, except that the distinct counts are None unless the next
    uses were built (min or infinite asked)."""
    started = time.perf_counter()
    check_options(options)
    groups = split_jobs(plan_jobs(options), options.jobs) or [[]]     # no jobs: still read for the counts
    total = sum(s.requests for s in sources)
    with_next_uses = any(p in NEEDS_NEXT_USES for p in options.policies)
    with_static = "static" in options.policies
    if progress is not None:
        built = (NEXT_USE_COST_S_PER_REQUEST if with_next_uses else 0.0) + \
            (STATIC_COST_S_PER_REQUEST if with_static else 0.0)
        simulated = sum(j.cost_s_per_request for j in plan_jobs(options))
        progress.add_total(total * (simulated + built * len(options.traces)))
    spill = None
    if with_next_uses or with_static:
        spill = Path(tempfile.mkdtemp(prefix="crawler-replay-", dir=options.spill_dir))
    try:
        next_uses: dict[tuple[int, str], NextUseFile] = {}
        static_tables: dict[tuple[int, str], StaticTable] = {}
        built_s = dict.fromkeys(options.traces, 0.0)
        if spill is not None:       # once here, not in each group: the groups share the files
            for index, source in enumerate(sources):
                for trace in options.traces:
                    if with_static:
                        static_tables[(index, trace)] = build_static_table(
                            source, trace, spill, chunk_requests, int(options.sizes[-1]), progress=progress)
                    if with_next_uses:
                        t0 = time.perf_counter()
                        next_uses[(index, trace)] = build_next_use(source, trace, spill, chunk_requests,
                                                                   progress=progress, window=options.window)
                        built_s[trace] += time.perf_counter() - t0
        if len(groups) == 1:
            results = [_run_group(sources, options, groups[0], chunk_requests, next_uses, static_tables, progress)]
        else:
            with ProcessPoolExecutor(max_workers=len(groups),
                                     mp_context=multiprocessing.get_context("fork")) as pool:
                results = list(pool.map(_run_group, [sources] * len(groups), [options] * len(groups), groups,
                                        [chunk_requests] * len(groups), [next_uses] * len(groups),
                                        [static_tables] * len(groups)))
    finally:
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)
    if progress is not None:
        progress.advance(progress.total, "streamed")
    tallies: dict[tuple[str, str], Tally] = {}
    for result in results:              # a policy's sizes may be split over groups: each fills its own
        for key, tally in result.tallies.items():
            if key not in tallies:
                tallies[key] = tally
                continue
            summed = tallies[key]
            summed.misses += tally.misses
            summed.seconds += tally.seconds
            summed.runs += tally.runs
            if summed.windows is not None and tally.windows is not None:
                summed.windows = _add_windows(summed.windows, slice(None), tally.windows)
    stats = results[0].stats
    for trace, st in stats.items():
        if with_next_uses:
            st.next_use_seconds = built_s[trace]
            _count_distinct(st, [next_uses[(i, trace)] for i in range(len(sources))])
            if "infinite" in options.policies:
                tallies[(trace, "infinite")] = _infinite(st, [next_uses[(i, trace)] for i in range(len(sources))],
                                                         len(options.sizes), options.window is not None)
        if options.window is not None:
            st.window_requests = window_requests([s["requests"] for s in st.streams], options.window)
            for (tr, _), tally in tallies.items():
                if tr == trace and tally.windows is not None:
                    tally.windows = _add_windows(np.zeros((len(options.sizes), len(st.window_requests)),
                                                          dtype=np.int64), slice(None), tally.windows)
    return ReplayResult(options, stats, tallies, time.perf_counter() - started,
                        "stream" if "lru" in options.policies else None)

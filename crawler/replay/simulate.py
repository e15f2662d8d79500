"""Runs every (trace, policy, size) over every stream and sums per (trace, policy, size).

Each stream (one node's log, or one .npy array) is simulated with its own
cache, as the paper simulated one cache per crawling node, and requests and
misses are summed over the streams of a trace.

The work, per stream and trace:
1. prepare: next-use times (one sort), distinct fingerprints, cold misses
   per window, and MIN's saturation size (stack.min_saturation);
2. then, independent of each other:
   - lru: one pass, all sizes (stack distances, stack.lru_depths);
   - static: one pass, all sizes (frequency ranks; pre-loaded with the top k
     of the stream itself, the loading not charged, as in the paper);
   - infinite: no pass: misses are the cold misses;
   - min: crawler.cache.min's Belady per size, on the shared next-use times;
     sizes at or above the saturation size have only cold misses;
   - clock, clock-sets, random (and any other policy): the crawler's own
     caches (make_cache), one run per size over `CHUNK_REQUESTS`-request
     batches of check_and_add_many; `clock` is the paper's single-ring
     CLOCK exactly. A CLOCK or RANDOM cache at least as large as the
     distinct fingerprints never evicts, so it has only cold misses too; so
     has a CLOCK-SETS cache none of whose 32-entry sets is asked to hold more
     fingerprints than it has ways.

With `jobs` > 1 the tasks run in forked worker processes, largest first;
the streams and next-use times are handed over as .npy files in a
temporary directory and mapped read-only, so no process copies them.
"""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crawler.cache import PAPER_POLICIES, POLICY_NAMES, make_cache
from crawler.replay import stack
from crawler.replay.traces import TRACES, Stream

DEFAULT_SIZES: tuple[int, ...] = tuple(1 << e for e in range(26))   # 2^0 .. 2^25, as in the paper
DEFAULT_SEED = 0              # the splitter's default random seed, so replay matches the online cache
CHUNK_REQUESTS = 1 << 20      # requests per check_and_add_many call
SMALL_RUN_REQUESTS = 1 << 20  # below this many requests in all, worker processes cost more than they save
# Rough seconds per request of each kind of task, to order the work (largest
# first) and to move the progress bar evenly. Measured on a 10 M request trace.
COST_S_PER_REQUEST = {
    "prepare": 2e-7, "lru": 1.2e-6, "static": 3e-7, "infinite": 0.0,
    "min": 8e-8, "clock": 8e-8, "clock-sets": 6e-8, "random": 8e-8,
}
COMPILED_LRU_COST_S_PER_REQUEST = 1.2e-7   # the numba twin
SHORTCUT_COST_S = 1e-6        # a size answered from the cold misses


@dataclass(frozen=True)
class ReplayOptions:
    """What to simulate."""

    traces: tuple[str, ...] = TRACES
    """`full` and/or `cross`."""
    policies: tuple[str, ...] = PAPER_POLICIES
    """Cache policies (crawler.cache names; the default, the paper's set)."""
    sizes: tuple[int, ...] = DEFAULT_SIZES
    """Cache sizes in entries, ascending."""
    window: int | None = None
    """Requests per window for miss rates over time (None: not recorded)."""
    seed: int = DEFAULT_SEED
    """Seed of the random policy."""
    jobs: int = 1
    """Worker processes."""
    engine: str = "auto"
    """LRU pass: "numpy", "numba" (compiled twin, when installed) or "auto" (numba if installed)."""
    spill_dir: str | None = None
    """Where the streaming replay writes MIN's next uses (8 bytes per request, 24 while building them);
    None: the system's temporary directory (TMPDIR)."""


@dataclass
class Tally:
    """Sums over the streams of one (trace, policy)."""

    misses: np.ndarray
    """Misses per size (int64, one per ReplayOptions.sizes)."""
    windows: np.ndarray | None
    """Misses per size and window (int64 [sizes, windows]), or None."""
    seconds: float = 0.0
    """Time spent simulating it (summed over tasks, wall clock in the worker)."""
    runs: int = 0
    """Simulations run: one per stream for the one-pass policies, one per stream
    and size for the others (sizes answered by the cold misses alone not counted)."""


@dataclass
class TraceStats:
    """Request counts of one trace, summed over its streams."""

    trace: str
    requests: int = 0
    distinct: int | None = 0
    """Sum of each stream's distinct fingerprints (its INFINITE misses); None when not counted (streaming)."""
    window_requests: np.ndarray | None = None
    logged_cache_hits: int | None = None
    """Hits the online splitter cache logged (FLAG_CACHE_HIT), logs only."""
    streams: list[dict] = field(default_factory=list)
    next_use_seconds: float | None = None
    """Streaming MIN only: seconds spent building the streams' next uses out of core."""


@dataclass
class ReplayResult:
    """Everything a replay found, ready for results.csv and the plots."""

    options: ReplayOptions
    stats: dict[str, TraceStats]
    tallies: dict[tuple[str, str], Tally]
    seconds: float = 0.0
    lru_engine: str | None = None
    """The engine of the LRU pass ("numpy" or "numba"), None without LRU."""


@dataclass(frozen=True)
class Task:
    """One unit of work on one stream of one trace."""

    trace: str
    part: int
    policy: str
    """A policy name, or "prepare"."""
    size_index: int | None
    """Index into ReplayOptions.sizes; None for the all-sizes passes."""
    cost_s: float


@dataclass
class TaskResult:
    task: Task
    misses: np.ndarray
    windows: np.ndarray | None
    seconds: float
    info: dict = field(default_factory=dict)


class PartStore:
    """The arrays of each (trace, stream) part: in memory, or as .npy files for worker processes."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._arrays: dict[tuple[str, int, str], np.ndarray] = {}

    def put(self, trace: str, part: int, name: str, array: np.ndarray) -> None:
        if self.directory is None:
            self._arrays[(trace, part, name)] = array
        else:
            np.save(self.directory / f"{trace}-{part}-{name}.npy", array)

    def get(self, trace: str, part: int, name: str) -> np.ndarray:
        if self.directory is None:
            return self._arrays[(trace, part, name)]
        return np.load(self.directory / f"{trace}-{part}-{name}.npy", mmap_mode="r")

    def __getstate__(self) -> dict:
        if self._arrays:
            raise RuntimeError("an in-memory PartStore cannot be sent to a worker process")
        return {"directory": self.directory, "_arrays": {}}


# --- the work of one task ---------------------------------------------------------

def _prepare(fps: np.ndarray, options: ReplayOptions) -> tuple[np.ndarray, dict]:
    order, grouped = stack.grouped_order(fps)
    nu = stack.next_use_from_groups(order, grouped)
    del order
    cold = stack.cold_requests(nu)
    info: dict[str, Any] = {"requests": len(fps), "distinct": int(cold.sum())}
    if options.window is not None:
        info["cold_windows"] = stack.window_misses(~cold, options.window)
    if "min" in options.policies:
        info["min_saturation"] = stack.min_saturation(nu)
    if "clock-sets" in options.policies:
        mixed = stack.distinct_mixed(grouped)
        info["clock_sets_cold_only"] = [bool(stack.clock_sets_never_evicts(mixed, size)) for size in options.sizes]
    return nu, info


def _run_online(policy: str, size: int, fps: np.ndarray, options: ReplayOptions
                ) -> tuple[np.ndarray, np.ndarray | None]:
    """The crawler's own cache over the stream in large batches (hot path: C loop per batch)."""
    cache = make_cache(policy, size, seed=options.seed) if policy == "random" else make_cache(policy, size)
    window = options.window
    counts = None if window is None else np.zeros(-(-len(fps) // window), dtype=np.int64)
    for start in range(0, len(fps), CHUNK_REQUESTS):
        hits = cache.check_and_add_many(fps[start:start + CHUNK_REQUESTS])
        if counts is not None and window is not None:     # both or neither
            counts += np.bincount((np.flatnonzero(~hits) + start) // window, minlength=len(counts))
    misses = cache.misses
    cache.close()
    return np.array([misses], dtype=np.int64), None if counts is None else counts[None, :]


def run_task(task: Task, store: PartStore, options: ReplayOptions) -> TaskResult:
    """Does one task (in this process or a worker) and returns its counts."""
    started = time.perf_counter()
    sizes = np.asarray(options.sizes, dtype=np.int64)
    fps = store.get(task.trace, task.part, "fps")
    windows = None
    info: dict = {}
    if task.policy == "prepare":
        nu, info = _prepare(fps, options)
        store.put(task.trace, task.part, "nu", nu)
        misses = np.zeros(0, dtype=np.int64)
    elif task.policy == "lru":
        depths = stack.lru_depths(store.get(task.trace, task.part, "nu"), options.engine)
        misses, windows = stack.misses_by_size(depths, sizes, options.window)
    elif task.policy == "static":
        misses, windows = stack.misses_by_size(stack.static_depths(fps), sizes, options.window)
    elif task.policy == "min":
        hits = stack.min_hits(store.get(task.trace, task.part, "nu"), int(sizes[task.size_index]))
        misses = np.array([len(hits) - int(hits.sum())], dtype=np.int64)
        if options.window is not None:
            windows = stack.window_misses(hits, options.window)[None, :]
    else:
        misses, windows = _run_online(task.policy, int(sizes[task.size_index]), fps, options)
    return TaskResult(task, misses, windows, time.perf_counter() - started, info)


# --- planning and running ---------------------------------------------------------

def lru_engine(options: ReplayOptions) -> str:
    """The engine the LRU pass will use: "numpy" or "numba"."""
    if options.engine == "numpy":
        return "numpy"
    from crawler.replay import _jit

    if options.engine == "numba" and not _jit.AVAILABLE:
        raise ValueError(f"engine 'numba' asked for, but numba is not installed (or {_jit.PURE_NUMPY_ENV} is set)")
    return "numba" if _jit.AVAILABLE else "numpy"


def _plan(parts: list[tuple[str, int, int]], options: ReplayOptions, infos: dict[tuple[str, int], dict]
          ) -> tuple[list[Task], list[tuple[str, int, str, int]]]:
    """(tasks to run, (trace, part, policy, size index) answered by cold misses alone)."""
    lru_compiled = "lru" in options.policies and lru_engine(options) == "numba"
    tasks: list[Task] = []
    shortcuts: list[tuple[str, int, str, int]] = []
    for trace, part, n in parts:
        info = infos[(trace, part)]
        for policy in options.policies:
            per_request = COST_S_PER_REQUEST.get(policy, COST_S_PER_REQUEST["clock"])
            if policy == "lru" and lru_compiled:
                per_request = COMPILED_LRU_COST_S_PER_REQUEST
            if policy in ("lru", "static"):
                tasks.append(Task(trace, part, policy, None, per_request * n))
                continue
            for i, size in enumerate(options.sizes):
                cold_only = (policy == "infinite"
                             or (policy in ("clock", "random") and size >= info["distinct"])
                             or (policy == "clock-sets" and info["clock_sets_cold_only"][i])
                             or (policy == "min" and size >= min(info["distinct"], info["min_saturation"])))
                if cold_only:
                    shortcuts.append((trace, part, policy, i))
                else:
                    tasks.append(Task(trace, part, policy, i, per_request * n))
    tasks.sort(key=lambda t: -t.cost_s)
    return tasks, shortcuts


def _run_all(tasks: list[Task], store: PartStore, options: ReplayOptions, pool: ProcessPoolExecutor | None,
             on_done: Callable[[TaskResult], None]) -> None:
    if pool is None:
        for task in tasks:
            on_done(run_task(task, store, options))
        return
    pending: set[Future] = {pool.submit(run_task, task, store, options) for task in tasks}
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            on_done(future.result())


class _Collector:
    """Adds task results into the per-(trace, policy) tallies."""

    def __init__(self, options: ReplayOptions, n_windows: dict[str, int]) -> None:
        self.options = options
        self.tallies: dict[tuple[str, str], Tally] = {}
        count = len(options.sizes)
        for trace in n_windows:
            for policy in options.policies:
                windows = None if options.window is None else np.zeros((count, n_windows[trace]), dtype=np.int64)
                self.tallies[(trace, policy)] = Tally(np.zeros(count, dtype=np.int64), windows)

    def add(self, trace: str, policy: str, sizes: slice | int, misses: np.ndarray,
            windows: np.ndarray | None, seconds: float = 0.0, run: bool = False) -> None:
        tally = self.tallies[(trace, policy)]
        tally.misses[sizes] += misses if isinstance(sizes, slice) else int(misses[0])
        tally.seconds += seconds
        tally.runs += int(run)
        if tally.windows is not None and windows is not None:
            width = windows.shape[1]
            if isinstance(sizes, slice):
                tally.windows[sizes, :width] += windows
            else:
                tally.windows[sizes, :width] += windows[0]


def check_options(options: ReplayOptions) -> None:
    unknown = sorted(set(options.policies) - set(POLICY_NAMES))
    if unknown:
        raise ValueError(f"unknown cache policy {', '.join(unknown)}; known policies: {', '.join(POLICY_NAMES)}")
    if not options.sizes or list(options.sizes) != sorted(set(options.sizes)) or options.sizes[0] < 1:
        raise ValueError("sizes must be distinct positive integers in ascending order")
    bad = sorted(set(options.traces) - set(TRACES))
    if bad:
        raise ValueError(f"unknown trace {', '.join(bad)}; known traces: {', '.join(TRACES)}")
    if options.window is not None and options.window < 1:
        raise ValueError("the over-time window must be at least 1 request")
    if options.engine not in stack.ENGINES:
        raise ValueError(f"unknown engine {options.engine!r}; known: {', '.join(stack.ENGINES)}")
    if "lru" in options.policies:
        lru_engine(options)


def window_requests(lengths: list[int], window: int) -> np.ndarray:
    """Requests in each window index, summed over streams of these lengths."""
    counts = np.zeros(max((-(-n // window) for n in lengths), default=0), dtype=np.int64)
    for n in lengths:
        full, rest = divmod(n, window)
        counts[:full] += window
        if rest:
            counts[full] += rest
    return counts


def _upper_bound_cost_s(parts: list[tuple[str, int, int]], options: ReplayOptions) -> float:
    """Every task's cost, as if no size were cold-only: the progress bar's first total."""
    cost = 0.0
    for _, _, n in parts:
        for policy in options.policies:
            each = COST_S_PER_REQUEST.get(policy, COST_S_PER_REQUEST["clock"]) * n
            cost += each if policy in ("lru", "static") else each * len(options.sizes)
    return cost


def replay(streams: list[Stream], options: ReplayOptions, progress=None,
           min_requests_for_jobs: int = SMALL_RUN_REQUESTS) -> ReplayResult:
    """Simulates `options` over `streams`, one cache per stream, and sums per (trace, policy, size).

    `progress` (a progress.ReplayProgress) is advanced as tasks finish. Worker
    processes are used only when `options.jobs` > 1 and the streams hold at
    least `min_requests_for_jobs` requests in all.
    """
    started = time.perf_counter()
    check_options(options)
    parts: list[tuple[str, int, int]] = []
    arrays: dict[tuple[str, int], np.ndarray] = {}
    stats: dict[str, TraceStats] = {}
    for trace in options.traces:
        stats[trace] = TraceStats(trace)
        lengths = []
        for i, stream in enumerate(streams):
            fps = stream.trace(trace)
            lengths.append(len(fps))
            if len(fps):
                parts.append((trace, i, len(fps)))
                arrays[(trace, i)] = fps
            logged = stream.logged_cache_hits(trace)
            if logged is not None:
                stats[trace].logged_cache_hits = (stats[trace].logged_cache_hits or 0) + logged
        if options.window is not None:
            stats[trace].window_requests = window_requests(lengths, options.window)
    total = sum(n for _, _, n in parts)
    jobs = options.jobs if total >= min_requests_for_jobs else 1
    workdir = Path(tempfile.mkdtemp(prefix="crawler-replay-")) if jobs > 1 else None
    store = PartStore(workdir)
    pool = None
    try:
        for (trace, i), fps in arrays.items():
            store.put(trace, i, "fps", fps)
        if jobs > 1:
            pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork"))
        prepare = [Task(trace, i, "prepare", None, COST_S_PER_REQUEST["prepare"] * n) for trace, i, n in parts]
        guess = _upper_bound_cost_s(parts, options)
        if progress is not None:
            progress.add_total(sum(t.cost_s for t in prepare) + guess)
        infos: dict[tuple[str, int], dict] = {}

        def prepared(result: TaskResult) -> None:
            infos[(result.task.trace, result.task.part)] = result.info
            if progress is not None:
                progress.advance(result.task.cost_s, f"prepared {result.task.trace} {streams[result.task.part].name}")

        _run_all(prepare, store, options, pool, prepared)
        for (trace, i), info in sorted(infos.items()):
            stats[trace].requests += info["requests"]
            stats[trace].distinct = (stats[trace].distinct or 0) + info["distinct"]
            stats[trace].streams.append({"stream": streams[i].name, "requests": info["requests"],
                                         "distinct": info["distinct"]})
        widths = {t: 0 if st.window_requests is None else len(st.window_requests) for t, st in stats.items()}
        collector = _Collector(options, widths)
        tasks, shortcuts = _plan(parts, options, infos)
        for trace, i, policy, k in shortcuts:
            info = infos[(trace, i)]
            cold_windows = info.get("cold_windows")
            collector.add(trace, policy, k, np.array([info["distinct"]]),
                          None if cold_windows is None else cold_windows[None, :])
        if progress is not None:
            progress.add_total(sum(t.cost_s for t in tasks) - guess)

        def finished(result: TaskResult) -> None:
            task = result.task
            where = slice(None) if task.size_index is None else task.size_index
            collector.add(task.trace, task.policy, where, result.misses, result.windows, result.seconds, run=True)
            if progress is not None:
                size = "all sizes" if task.size_index is None else f"size {options.sizes[task.size_index]}"
                progress.advance(task.cost_s, f"{task.policy} {task.trace} {streams[task.part].name} {size}")

        _run_all(tasks, store, options, pool, finished)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    return ReplayResult(options, stats, collector.tallies, time.perf_counter() - started,
                        lru_engine(options) if "lru" in options.policies else None)

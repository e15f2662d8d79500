"""Benchmark of `crawler replay` against the issue's two speed targets.

  small  a 10 M request trace, lru + min + clock-sets, 26 sizes (2^0..2^25):
         target under 60 s
  large  a 100 M request trace, 4 compiled online policies (clock-sets,
         lru, random, static), 26 sizes: target under 10 minutes
The CLOCK here is the set-associative one the figures in docs/replay.md were
taken with; the exact single-ring `clock` is timed by adding it to a tuple.

The trace is bench/cache_bench.py's crawler-like stream (pages of lognormal
link counts, repeats within a page, returns to recent URLs, popular URLs,
new URLs; seed 1). It runs through crawler.replay.replay exactly as the
command does (`--jobs` worker processes). For each scenario it prints wall
time, CPU time (this process and its workers), the worker seconds spent per
policy and the per-size policies' rate in requests per worker second,
since the machine may be shared (the load average is printed too).

    python bench/replay_bench.py                      # both scenarios
    python bench/replay_bench.py --large 0            # the 10 M one only
    python bench/replay_bench.py --stream-dir /tmp/s  # keep the generated traces for reruns

Building the 100 M stream takes about 1.5 minutes and 8 GB of memory; with
--stream-dir it is saved (800 MB) and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from cache_bench import crawler_stream  # noqa: E402
from crawler.cache import COMPILED  # noqa: E402
from crawler.replay import ReplayOptions, replay  # noqa: E402
from crawler.replay.simulate import DEFAULT_SIZES, lru_engine  # noqa: E402
from crawler.replay.traces import Stream  # noqa: E402

SMALL_REQUESTS = 10_000_000
LARGE_REQUESTS = 100_000_000
SMALL_POLICIES = ("lru", "min", "clock-sets")
LARGE_POLICIES = ("clock-sets", "lru", "random", "static")
SMALL_TARGET_S = 60.0
LARGE_TARGET_S = 600.0
SEED = 1
PER_SIZE = ("clock", "clock-sets", "random", "min")


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load_stream(n: int, directory: Path | None) -> tuple[np.ndarray, float]:
    """The crawler-like stream of n requests (seed 1), from `directory` when saved there before."""
    started = time.perf_counter()
    path = None if directory is None else directory / f"replay-bench-{n}-seed{SEED}.npy"
    if path is not None and path.exists():
        return np.load(path), time.perf_counter() - started
    fps, _ = crawler_stream(n, SEED)
    if path is not None:
        directory.mkdir(parents=True, exist_ok=True)
        np.save(path, fps)
    return fps, time.perf_counter() - started


def run(name: str, n: int, policies: tuple[str, ...], target_s: float, args) -> dict:
    fps, built_s = load_stream(n, args.stream_dir)
    distinct = len(np.unique(fps)) if args.count_distinct else None
    options = ReplayOptions(traces=("full",), policies=policies, sizes=DEFAULT_SIZES, jobs=args.jobs,
                            engine=args.engine)
    load = os.getloadavg()[0]
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    result = replay([Stream(f"bench-{n}", None, (), fps, None)], options)
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    per_policy = {p: round(result.tallies[("full", p)].seconds, 1) for p in policies}
    # Per-size policies: requests simulated (sizes answered by cold misses alone not counted) per worker second.
    rates = {p: round(n * result.tallies[("full", p)].runs / result.tallies[("full", p)].seconds / 1e6, 1)
             for p in policies if p in PER_SIZE and result.tallies[("full", p)].seconds > 0}
    runs = {p: result.tallies[("full", p)].runs for p in policies}
    row = {"scenario": name, "requests": n, "distinct": distinct, "policies": list(policies),
           "sizes": len(DEFAULT_SIZES), "jobs": args.jobs, "lru_engine": result.lru_engine,
           "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "target_s": target_s, "met": wall < target_s,
           "worker_s_by_policy": per_policy, "runs_by_policy": runs, "m_requests_per_worker_s": rates,
           "load_avg_at_start": round(load, 2), "stream_built_s": round(built_s, 1)}
    print(f"{name:6s} {n / 1e6:6.0f}M  {','.join(policies):26s} {wall:8.1f} {cpu:8.1f} {target_s:7.0f}  "
          f"{'yes' if row['met'] else 'NO':4s} {load:5.2f}  {per_policy}  runs={runs}  M req/worker-s={rates}",
          flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=SMALL_REQUESTS, help="requests of the small trace (0 = skip)")
    parser.add_argument("--large", type=int, default=LARGE_REQUESTS, help="requests of the large trace (0 = skip)")
    parser.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                        help="worker processes (default: CPUs, at most 4)")
    parser.add_argument("--engine", default="auto", choices=("auto", "numpy", "numba"), help="LRU pass engine")
    parser.add_argument("--stream-dir", type=Path, default=None, help="save/reuse the generated traces here")
    parser.add_argument("--count-distinct", action="store_true", help="also report distinct fingerprints")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    benchkit.add_kernels_option(parser)
    args = parser.parse_args(argv)
    benchkit.check_kernels(args)

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
    print(f"# replay_bench: python {platform.python_version()}, numpy {np.__version__}, compiled caches: "
          f"{COMPILED}, lru engine: {lru_engine(ReplayOptions(engine=args.engine))}, cpu: {cpu} x{os.cpu_count()}, "
          f"jobs {args.jobs}")
    print(f"{'run':6s} {'trace':7s} {'policies':26s} {'wall s':>8s} {'cpu s':>8s} {'target':>7s}  met  load   "
          f"worker seconds by policy")
    rows = []
    if args.small:
        rows.append(run("small", args.small, SMALL_POLICIES, SMALL_TARGET_S, args))
    if args.large:
        rows.append(run("large", args.large, LARGE_POLICIES, LARGE_TARGET_S, args))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["met"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

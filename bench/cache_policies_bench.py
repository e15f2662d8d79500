"""Side-by-side figures of every URL cache policy, old and new, with ratios to LRU from the same run.

For each policy it prints:
  B/entry     memory per entry at full capacity (`--memory-capacity`, filled
              with 3x that many distinct fingerprints, so ghost lists are full
              too): self-reported (memory_bytes) and measured with tracemalloc
  single/s    check_and_add once per request from a Python loop
  batch/s     check_and_add_many over the stream in 2**16-request chunks
  miss rate   misses / requests on the stream, at `--capacity`
and each figure divided by LRU's, measured in the same run on the same
stream, so a shared machine's load mostly cancels out of the ratios.

The stream is bench/cache_bench.py's crawler-like locality stream (pages of
lognormal link counts, repeats within a page, returns to recent URLs,
popular URLs, new URLs), so the miss rates compare with that bench's.
min is asked the stream itself (offline; its memory is the stored trace,
so no B/entry is printed for it, and no single/s: its work is done when it
is built, and that time is its batch figure).

sieve, s3fifo, arc, 2q and wtinylfu are pure Python (no compiled kernel
yet); lru, clock, clock-sets and min run on the compiled kernel when it is built.

    python bench/cache_policies_bench.py                     # ~1-2 min on 2 shared cores
    python bench/cache_policies_bench.py --requests 200000   # quick
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
import tracemalloc

import numpy as np

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from cache_bench import crawler_stream  # noqa: E402
from crawler.cache import make_cache  # noqa: E402

POLICIES = ("lru", "clock", "clock-sets", "min", "sieve", "s3fifo", "arc", "2q", "wtinylfu")
DEFAULT_REQUESTS = 1_000_000
DEFAULT_CAPACITY = 1 << 14          # entries, for speed and miss rate
DEFAULT_MEMORY_CAPACITY = 100_000   # entries, for bytes per entry
CHUNK_REQUESTS = 1 << 16
FILL_FACTOR = 3                     # distinct fingerprints per entry when measuring memory


def build(policy: str, capacity: int, trace: np.ndarray):
    return make_cache("min", capacity, trace=trace) if policy == "min" else make_cache(policy, capacity)


def bytes_per_entry(policy: str, capacity: int, seed: int) -> tuple[float, float]:
    """(self-reported, tracemalloc) bytes per entry of a cache filled to capacity."""
    fill = np.random.default_rng(seed).integers(0, 1 << 63, size=FILL_FACTOR * capacity, dtype=np.uint64)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = make_cache(policy, capacity)
        for a in range(0, len(fill), CHUNK_REQUESTS):
            cache.check_and_add_many(fill[a:a + CHUNK_REQUESTS])
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.size == capacity, (policy, cache.size)
    return cache.memory_bytes() / capacity, traced / capacity


def single_rate(policy: str, capacity: int, stream: np.ndarray) -> float:
    cache = build(policy, capacity, stream)
    call = cache.check_and_add
    requests = stream.tolist()
    start = time.perf_counter()
    for fp in requests:
        call(fp)
    return len(requests) / (time.perf_counter() - start)


def batch_rate_and_misses(policy: str, capacity: int, stream: np.ndarray) -> tuple[float, float]:
    """(requests/s of check_and_add_many, miss rate); for min the build (the simulation) is timed too."""
    start = time.perf_counter()
    cache = build(policy, capacity, stream)
    for a in range(0, len(stream), CHUNK_REQUESTS):
        cache.check_and_add_many(stream[a:a + CHUNK_REQUESTS])
    elapsed = time.perf_counter() - start
    return len(stream) / elapsed, cache.misses / len(stream)


def ratio(x: float, base: float) -> str:
    return f"{x / base:6.2f}" if base and x == x else "     -"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=DEFAULT_REQUESTS, help="stream length")
    parser.add_argument("--capacity", type=int, default=DEFAULT_CAPACITY, help="entries, for speed and miss rate")
    parser.add_argument("--memory-capacity", type=int, default=DEFAULT_MEMORY_CAPACITY,
                        help="entries, for bytes per entry")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated; lru is always run")
    benchkit.add_kernels_option(parser)
    args = parser.parse_args(argv)
    benchkit.check_kernels(args)
    policies = ["lru", *[p for p in args.policies.split(",") if p and p != "lru"]]
    began = time.perf_counter()
    stream, _ = crawler_stream(args.requests, args.seed)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# cache_policies_bench: {args.requests} requests ({len(np.unique(stream)) / len(stream):.1%} distinct), "
          f"capacity {args.capacity}, memory at {args.memory_capacity} entries, seed {args.seed}")
    print(f"# python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cpus, "
          f"load avg at start {load:.2f}")
    head = (f"{'policy':10}{'B/entry':>9}{'(tm)':>8}{'single/s':>10}{'batch/s':>10}{'miss rate':>10}"
            f"{'B/lru':>7}{'single/lru':>11}{'batch/lru':>10}{'miss/lru':>9}")
    print(head)
    print("-" * len(head))
    base: dict[str, float] = {}
    for policy in policies:
        nan = float("nan")
        reported, traced = (nan, nan) if policy == "min" else bytes_per_entry(policy, args.memory_capacity, args.seed)
        single = nan if policy == "min" else single_rate(policy, args.capacity, stream)
        batch, miss = batch_rate_and_misses(policy, args.capacity, stream)
        if policy == "lru":
            base = {"bytes": reported, "single": single, "batch": batch, "miss": miss}

        def num(x: float, scale: float = 1.0, unit: str = "") -> str:
            return "-" if x != x else f"{x / scale:.2f}{unit}"

        print(f"{policy:10}{num(reported):>9}{num(traced):>8}{num(single, 1e6, 'M'):>10}{num(batch, 1e6, 'M'):>10}"
              f"{num(miss, 0.01, '%'):>10}{ratio(reported, base['bytes']):>7}{ratio(single, base['single']):>11}"
              f"{ratio(batch, base['batch']):>10}{ratio(miss, base['miss']):>9}", flush=True)
    print(f"# total {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

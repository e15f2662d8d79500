"""Benchmark of the URL cache policies on a crawler-like request stream.

For each policy of crawler.cache, and in the same run for cachetools.LRUCache
and a plain dict-based CLOCK (the baselines the design is measured against),
it prints:
  single/s    check_and_add called once per request from a Python loop
  batch/s     check_and_add_many over the stream in chunks (as replay does),
              wall clock, and per CPU second (the machine may be shared)
  page/s      check_and_add_many once per page (as the splitter and DUE do)
  B/entry     memory per cache entry: self-reported (arrays + objects) and
              measured with tracemalloc while building and filling the cache
  hit rate    hits / requests over the whole stream
and then, with --miss-sizes, the miss rate of the --miss-policies (default
the two CLOCKs and LRU) at each of those capacities on the same stream.

The stream ("crawler-like locality"): pages of lognormal link counts with the
paper's median 23 and mean 62.55 links; of the links, ~30% repeat a link
earlier on the same page, 35% go back to a recently seen URL (log-uniform
distance up to 2M requests back: site navigation), 20% go to popular URLs
(rank drawn 1/x from 10M), the rest are new URLs. The static policy is
preloaded with the top-capacity URLs of an earlier stream from the same
generator (another seed); min is given the stream itself.

    python bench/cache_bench.py                    # 10M requests, 2**18 entries
    python bench/cache_bench.py --requests 200000  # quick
    python bench/cache_bench.py --policies clock,clock-sets --miss-sizes 256,4096,65536,262144
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from crawler.cache import COMPILED, POLICY_NAMES, make_cache  # noqa: E402
from crawler.cache.static import top_k  # noqa: E402

DEFAULT_REQUESTS = 10_000_000
DEFAULT_CAPACITY = 1 << 18
CHUNK_REQUESTS = 1 << 20          # batch size for the "batch" column (replay-like)
LINKS_MEDIAN = 23.0               # Broder, Najork & Wiener: links per page
LINKS_MEAN = 62.55
P_SAME_PAGE = 0.30                # a link repeated within its page
P_RECENT = 0.35                   # back to a recently seen URL
P_POPULAR = 0.20                  # a popular URL (the rest are new URLs)
MAX_BACK_DISTANCE = 2_000_000     # requests
POPULAR_UNIVERSE = 10_000_000     # URLs
STREAM_SALT = 0x9E3779B97F4A7C15


def _fmix64(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xFF51AFD7ED558CCD)
        x ^= x >> np.uint64(33)
        x *= np.uint64(0xC4CEB9FE1A85EC53)
        x ^= x >> np.uint64(33)
    return x


def crawler_stream(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fingerprints uint64[n], page start offsets) of a synthetic crawl's link stream."""
    rng = np.random.default_rng(seed)
    mu, sigma = np.log(LINKS_MEDIAN), np.sqrt(2 * np.log(LINKS_MEAN / LINKS_MEDIAN))
    lengths: list[np.ndarray] = []
    total = 0
    while total < n:
        chunk = np.maximum(1, rng.lognormal(mu, sigma, size=max(1000, n // 20)).astype(np.int64))
        lengths.append(chunk)
        total += int(chunk.sum())
    page_len = np.concatenate(lengths)
    page_len = page_len[: int(np.searchsorted(np.cumsum(page_len), n)) + 1]
    starts = np.concatenate(([0], np.cumsum(page_len)[:-1]))
    page_start = np.repeat(starts, page_len)[:n]
    idx = np.arange(n)
    pos = idx - page_start
    u = rng.random(n)
    src = idx.copy()
    same = (u < P_SAME_PAGE) & (pos > 0)
    src[same] = page_start[same] + (rng.random(int(same.sum())) * pos[same]).astype(np.int64)
    recent = ~same & (u >= P_SAME_PAGE) & (u < P_SAME_PAGE + P_RECENT) & (idx > 0)
    back = np.maximum(1, np.exp(rng.random(int(recent.sum())) * np.log(MAX_BACK_DISTANCE)).astype(np.int64))
    src[recent] = np.maximum(0, idx[recent] - back)
    popular = ~same & ~recent & (u >= P_SAME_PAGE + P_RECENT) & (u < P_SAME_PAGE + P_RECENT + P_POPULAR)
    ids = idx.astype(np.uint64) + np.uint64(POPULAR_UNIVERSE) + np.uint64(seed) * np.uint64(n)
    ids[popular] = np.exp(rng.random(int(popular.sum())) * np.log(POPULAR_UNIVERSE)).astype(np.uint64)
    for _ in range(64):  # resolve copies of copies (pointer jumping)
        nxt = src[src]
        if np.array_equal(nxt, src):
            break
        src = nxt
    return _fmix64(ids[src] ^ np.uint64(STREAM_SALT)), starts[starts < n]


# --- baselines ------------------------------------------------------------------

class CachetoolsLru:
    """cachetools.LRUCache behind the check_and_add interface."""

    def __init__(self, capacity: int) -> None:
        import cachetools
        self.cache = cachetools.LRUCache(maxsize=capacity)
        self.hits = 0

    def check_and_add(self, fp: int) -> bool:
        if self.cache.get(fp) is None:
            self.cache[fp] = True
            return False
        self.hits += 1
        return True

    @property
    def size(self) -> int:
        return len(self.cache)


class DictClock:
    """A plain Python CLOCK: list ring, dict key -> position, bytearray of marks."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.hand, self.hits = capacity, 0, 0
        self.keys: list[int] = []
        self.where: dict[int, int] = {}
        self.marks = bytearray(capacity)

    def check_and_add(self, fp: int) -> bool:
        i = self.where.get(fp)
        if i is not None:
            self.marks[i] = 1
            self.hits += 1
            return True
        if len(self.keys) < self.capacity:
            self.where[fp] = len(self.keys)
            self.keys.append(fp)
            return False
        marks, hand = self.marks, self.hand
        while marks[hand]:
            marks[hand] = 0
            hand = hand + 1 if hand + 1 < self.capacity else 0
        del self.where[self.keys[hand]]
        self.keys[hand] = fp
        self.where[fp] = hand
        self.hand = hand + 1 if hand + 1 < self.capacity else 0
        return False

    @property
    def size(self) -> int:
        return len(self.keys)


# --- measurements ---------------------------------------------------------------

@dataclass
class Row:
    name: str
    single_per_s: float = 0.0
    batch_per_s: float = 0.0
    batch_per_cpu_s: float = 0.0
    page_per_s: float = 0.0
    bytes_per_entry: float = 0.0
    traced_bytes_per_entry: float = 0.0
    hit_rate: float = 0.0
    prepare_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def time_single(factory: Callable[[], object], stream: np.ndarray, requests: int) -> tuple[float, object]:
    """Requests per second of check_and_add from a Python loop (list conversion not timed)."""
    cache = factory()
    call = cache.check_and_add  # type: ignore[attr-defined]
    elapsed = 0.0
    for a in range(0, requests, CHUNK_REQUESTS):
        chunk = stream[a:min(requests, a + CHUNK_REQUESTS)].tolist()
        start = time.perf_counter()
        for fp in chunk:
            call(fp)
        elapsed += time.perf_counter() - start
    return requests / elapsed, cache


def time_batches(factory, stream: np.ndarray, repeat: int) -> tuple[float, float, float]:
    """Best (requests/s wall, requests/s CPU) over `repeat` fresh caches, and the hit rate."""
    best_wall = best_cpu = 0.0
    hit_rate = 0.0
    for _ in range(repeat):
        cache = factory()
        hits = 0
        wall = cpu = 0.0
        for a in range(0, len(stream), CHUNK_REQUESTS):
            chunk = stream[a:a + CHUNK_REQUESTS]
            w, c = time.perf_counter(), time.thread_time()
            result = cache.check_and_add_many(chunk)
            cpu += time.thread_time() - c
            wall += time.perf_counter() - w
            hits += int(np.count_nonzero(result))
        best_wall = max(best_wall, len(stream) / wall)
        best_cpu = max(best_cpu, len(stream) / cpu) if cpu > 0 else best_cpu
        hit_rate = hits / len(stream)
    return best_wall, best_cpu, hit_rate


def time_pages(factory, stream: np.ndarray, starts: np.ndarray) -> float:
    """Requests per second when check_and_add_many is called once per page."""
    cache = factory()
    call = cache.check_and_add_many
    bounds = np.append(starts, len(stream)).tolist()
    begin = time.perf_counter()
    for a, b in zip(bounds, bounds[1:]):
        call(stream[a:b])
    return len(stream) / (time.perf_counter() - begin)


def traced_bytes(factory, stream: np.ndarray, capacity: int, use_batches: bool) -> tuple[int, int]:
    """(bytes traced by tracemalloc for building and filling a cache, its size then)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = factory()
        for a in range(0, len(stream), 1 << 16):
            chunk = stream[a:a + (1 << 16)]
            if use_batches:
                cache.check_and_add_many(chunk)
            else:
                for fp in chunk.tolist():
                    cache.check_and_add(fp)
            if cache.size >= capacity:
                break
        del chunk
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - before
        size = cache.size
    finally:
        tracemalloc.stop()
    return traced, size


def bench_policy(policy: str, args, stream, starts, earlier) -> Row:
    capacity = args.capacity
    options: dict = {}
    if policy == "static":
        options["preload"] = top_k(earlier, capacity)
    elif policy == "random":
        options["seed"] = args.seed
    elif policy == "min":
        options["trace"] = stream

    def factory():
        return make_cache(policy, capacity, **options)

    row = Row(policy)
    start = time.perf_counter()
    cache = factory()
    row.prepare_s = time.perf_counter() - start
    if policy == "min":  # answers are precomputed; only the batch replay is timed
        row.notes.append(f"built in {row.prepare_s:.1f} s (the whole simulation); its memory is the stored trace")
        row.page_per_s = row.single_per_s = row.traced_bytes_per_entry = float("nan")
    row.batch_per_s, row.batch_per_cpu_s, row.hit_rate = time_batches(factory, stream, args.repeat)
    if policy != "min":
        row.page_per_s = time_pages(factory, stream, starts)
        row.single_per_s, _ = time_single(factory, stream, min(args.single, len(stream)))
        traced, size = traced_bytes(factory, stream, capacity, use_batches=True)
        row.traced_bytes_per_entry = traced / (size if policy == "infinite" else capacity)
    for a in range(0, len(stream), CHUNK_REQUESTS):  # fill it, then count its memory
        cache.check_and_add_many(stream[a:a + CHUNK_REQUESTS])
        if policy not in ("min", "infinite") and cache.size >= capacity:
            break
    if policy == "infinite":
        row.bytes_per_entry = cache.memory_bytes() / cache.size
        row.notes.append(f"bytes per held entry ({cache.size} held after the stream; capacity is not enforced)")
    else:
        row.bytes_per_entry = cache.memory_bytes() / capacity
    return row


def bench_baseline(name: str, factory, args, stream) -> Row:
    row = Row(name)
    requests = min(args.single, len(stream))
    row.single_per_s, cache = time_single(factory, stream, requests)
    row.hit_rate = cache.hits / requests  # type: ignore[attr-defined]
    row.batch_per_s = row.batch_per_cpu_s = row.page_per_s = float("nan")
    row.notes.append("no batch call: a Python loop of single calls")
    traced, _ = traced_bytes(factory, stream, args.capacity, use_batches=False)
    row.traced_bytes_per_entry = row.bytes_per_entry = traced / args.capacity
    return row


def miss_rates(policies: list[str], sizes: list[int], stream: np.ndarray) -> dict[str, list[float]]:
    """Miss rate of each policy at each capacity over the stream (batches, as replay runs them)."""
    rates: dict[str, list[float]] = {}
    for policy in policies:
        rates[policy] = []
        for size in sizes:
            cache = make_cache(policy, size)
            for a in range(0, len(stream), CHUNK_REQUESTS):
                cache.check_and_add_many(stream[a:a + CHUNK_REQUESTS])
            rates[policy].append(cache.misses / len(stream))
    return rates


def fmt_rate(x: float) -> str:
    return "-" if x != x else f"{x / 1e6:.2f}M"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=DEFAULT_REQUESTS, help="stream length (default 10M)")
    parser.add_argument("--capacity", type=int, default=DEFAULT_CAPACITY, help="cache entries (default 2**18)")
    parser.add_argument("--seed", type=int, default=1, help="stream seed; also the random policy's seed")
    parser.add_argument("--single", type=int, default=DEFAULT_REQUESTS,
                        help="requests for the single-call column (default: up to 10M)")
    parser.add_argument("--repeat", type=int, default=3, help="batch runs per policy, best kept (default 3)")
    parser.add_argument("--policies", default=",".join(POLICY_NAMES), help="comma-separated policies")
    parser.add_argument("--no-baselines", action="store_true", help="skip cachetools and the dict CLOCK")
    parser.add_argument("--miss-sizes", default="", help="comma-separated capacities for a miss-rate table")
    parser.add_argument("--miss-policies", default="clock,clock-sets,lru",
                        help="policies of the miss-rate table (default clock,clock-sets,lru)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    benchkit.add_kernels_option(parser)
    args = parser.parse_args(argv)
    benchkit.check_kernels(args)

    t0 = time.perf_counter()
    stream, starts = crawler_stream(args.requests, args.seed)
    earlier, _ = crawler_stream(args.requests, args.seed + 1)
    distinct = len(np.unique(stream))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
    print(f"# cache_bench: {args.requests} requests ({len(starts)} pages, {distinct / args.requests:.1%} distinct), "
          f"capacity {args.capacity}, seed {args.seed}")
    print(f"# python {platform.python_version()}, numpy {np.__version__}, compiled kernel: {COMPILED}, "
          f"cpu: {cpu} x{os.cpu_count()}, load avg at start: {os.getloadavg()[0]:.2f}; "
          f"stream built in {time.perf_counter() - t0:.1f} s")

    rows: list[Row] = []
    for policy in [p.strip() for p in args.policies.split(",") if p.strip()]:
        rows.append(bench_policy(policy, args, stream, starts, earlier))
        print(f"#   done {policy}", file=sys.stderr, flush=True)
    if not args.no_baselines:
        rows.append(bench_baseline("cachetools.LRUCache", lambda: CachetoolsLru(args.capacity), args, stream))
        rows.append(bench_baseline("dict CLOCK (one ring)", lambda: DictClock(args.capacity), args, stream))

    header = f"{'policy':<24}{'single/s':>10}{'batch/s':>10}{'batch/cpu-s':>12}{'page/s':>10}" \
             f"{'B/entry':>9}{'B/entry(tm)':>12}{'hit rate':>10}"
    print(header)
    print("-" * len(header))
    for r in rows:
        traced = "-" if r.traced_bytes_per_entry != r.traced_bytes_per_entry else f"{r.traced_bytes_per_entry:.2f}"
        print(f"{r.name:<24}{fmt_rate(r.single_per_s):>10}{fmt_rate(r.batch_per_s):>10}"
              f"{fmt_rate(r.batch_per_cpu_s):>12}{fmt_rate(r.page_per_s):>10}"
              f"{r.bytes_per_entry:>9.2f}{traced:>12}{r.hit_rate:>10.4f}")
    for r in rows:
        for note in r.notes:
            print(f"# {r.name}: {note}")
    sizes = [int(x) for x in args.miss_sizes.split(",") if x.strip()]
    table: dict[str, list[float]] = {}
    if sizes:
        table = miss_rates([p.strip() for p in args.miss_policies.split(",") if p.strip()], sizes, stream)
        print(f"{'miss rate':<12}" + "".join(f"{name:>12}" for name in table))
        for i, size in enumerate(sizes):
            print(f"{size:<12}" + "".join(f"{rates[i]:>12.2%}" for rates in table.values()))
    print(f"# total {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows], "miss_sizes": sizes,
                                         "miss_rates": table}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())

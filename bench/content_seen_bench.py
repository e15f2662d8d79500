"""Benchmark of the content-seen set (crawler/parse/seen.py) against the plain set it replaced.

It prints, for `ContentSeen` at the given capacity and for a Python set of
the same fingerprints:
  B/entry     memory per entry: self-reported (ContentSeen) and measured with
              tracemalloc while building and filling it
  lookups/s   check_and_add called once per body from a Python loop (as the
              node does, one call per HTML page), half repeats
and, for ContentSeen only, how much it has forgotten after n distinct
fingerprints (n a fraction of the capacity): CLOCK-SETS runs in sets of 32 chosen
by hash, so a set can overflow before the whole is full. Forgotten = n - size.

    python bench/content_seen_bench.py                      # the default capacity
    python bench/content_seen_bench.py --capacity 65536     # quick
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc
from collections.abc import Callable

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from crawler.config.schema import ParseConfig  # noqa: E402
from crawler.parse import ContentSeen  # noqa: E402

FILL_FRACTIONS = (0.25, 0.5, 0.75, 0.9, 1.0)
DEFAULT_ROUNDS = 3


def fingerprints(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(64) for _ in range(n)]


def traced_fill(make: Callable[[], object], add: Callable[[object, int], object], fps: list[int]) -> int:
    """Bytes tracemalloc sees for the structure built and filled with fps; each fingerprint is a new int
    object, as content_fingerprint makes one per body (a set keeps it alive, ContentSeen does not)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        obj = make()
        for fp in fps:
            add(obj, int.from_bytes(fp.to_bytes(8, "little"), "little"))
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


def lookups_per_s(make_check: Callable[[], Callable[[int], object]], stream: list[int], rounds: int) -> float:
    """Best of `rounds`, each on a fresh structure so every round sees the same misses and hits."""
    best = float("inf")
    for _ in range(rounds):
        check = make_check()
        start = time.perf_counter()
        for fp in stream:
            check(fp)
        best = min(best, time.perf_counter() - start)
    return len(stream) / best


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--capacity", type=int, default=ParseConfig().content_seen_size, help="entries")
    args.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="timed runs per figure (best is kept)")
    benchkit.add_kernels_option(args)
    opts = args.parse_args()
    benchkit.check_kernels(opts)
    capacity = opts.capacity
    fps = fingerprints(capacity, seed=1)
    stream = fps[: capacity // 2] * 2                   # every body twice: half the lookups are repeats
    random.Random(2).shuffle(stream)

    seen = ContentSeen(capacity)
    traced = traced_fill(lambda: ContentSeen(capacity), lambda s, fp: s.check_and_add(fp), fps)
    plain = traced_fill(set, lambda s, fp: s.add(fp), fps)
    print(f"capacity {capacity:,} entries")
    print(f"ContentSeen  {seen.memory_bytes() / capacity:.2f} B/entry self-reported, "
          f"{traced / capacity:.2f} B/entry traced, filled")
    print(f"set()        {plain / capacity:.2f} B/entry traced, filled (table and int objects; grows with the crawl)")
    rate = lookups_per_s(lambda: ContentSeen(capacity).check_and_add, stream, opts.rounds)

    def set_check() -> Callable[[int], bool]:
        model: set[int] = set()

        def check(fp: int) -> bool:
            if fp in model:
                return True
            model.add(fp)
            return False
        return check

    base = lookups_per_s(set_check, stream, opts.rounds)
    print(f"lookups/s    ContentSeen {rate:,.0f}, set() {base:,.0f} (one call per body, half repeats)")
    for frac in FILL_FRACTIONS:
        n = int(capacity * frac)
        s = ContentSeen(capacity)
        for fp in fps[:n]:
            s.check_and_add(fp)
        lost = n - s.size
        print(f"after {frac:4.0%} of capacity distinct: forgotten {lost:,} of {n:,} ({100 * lost / n:.3f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

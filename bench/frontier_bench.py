"""Frontier at scale: RSS while the frontier grows to tens of millions of URLs, and its rates.

    python bench/frontier_bench.py [--urls 30000000] [--hosts 20000] [--baseline-urls 2000000]

Adds `--urls` URLs (80-character, spread over `--hosts` hosts with a Zipf
popularity) in page-sized batches to a durable frontier with the default
`frontier.memory_urls`, printing RSS every tenth (and checkpointing there in the background, as a
node does periodically, while a ticker measures how long the event loop is
held); then takes and releases
`--take` URLs. Baseline in the same process, first: the same URLs kept in
RAM as per-host deques (what an in-memory frontier holds), up to
`--baseline-urls`, to show what a URL costs in RAM without spilling.
The last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tempfile
import time
from collections import deque
from pathlib import Path

import numpy as np

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from crawler.config.schema import FrontierConfig  # noqa: E402
from crawler.frontier import Frontier  # noqa: E402

BATCH = 60                     # links per page (Broder et al.: mean ~62)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def url_stream(n: int, hosts: int, seed: int = 1):
    """Batches of (url, host, quality): hosts by Zipf popularity, URLs ~80 characters."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, hosts + 1)
    p = 1.0 / ranks
    p /= p.sum()
    names = [f"host{h:06d}.example.org" for h in range(hosts)]
    done = 0
    while done < n:
        k = min(BATCH * 1000, n - done)
        hs = rng.choice(hosts, size=k, p=p)
        for start in range(0, k, BATCH):
            chunk = hs[start:start + BATCH]
            yield [(f"http://{names[h]}/section/{done + start + i:012d}/page-content.html", names[h], 0.0)
                   for i, h in enumerate(chunk.tolist())]
        done += k


def baseline(n: int, hosts: int) -> dict:
    gc.collect()
    before = rss_mb()
    queues: dict[str, deque] = {}
    for batch in url_stream(n, hosts):
        for url, host, _ in batch:
            q = queues.get(host)
            if q is None:
                q = queues[host] = deque()
            q.append(url)
    grown = rss_mb() - before
    out = {"urls": n, "rss_growth_mb": round(grown, 1), "bytes_per_url": round(grown * 2**20 / n, 1)}
    del queues
    gc.collect()
    return out


def dir_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir())


async def checkpoint_with_ticker(f: Frontier) -> tuple[float, float]:
    """A background checkpoint's duration and the longest the event loop was held meanwhile."""
    return await benchkit.loop_held(f.checkpoint_async)


async def frontier_run(n: int, hosts: int, take: int, directory: Path) -> dict:
    f = Frontier(FrontierConfig(), workers=64, directory=directory)
    t0, cpu0 = time.perf_counter(), time.process_time()
    marks = []
    stalls = []
    step = max(n // 10, 1)
    added = 0
    next_mark = step
    for batch in url_stream(n, hosts):
        f.add_many(batch)
        added += len(batch)
        if added >= next_mark:
            next_mark += step
            # The node checkpoints every frontier.checkpoint_interval_s, in the background;
            # a ticker measures how long the event loop is held meanwhile.
            cp_s, stall_s = await checkpoint_with_ticker(f)
            stalls.append(stall_s)
            marks.append((added, round(rss_mb(), 1), round(time.perf_counter() - t0, 1)))
            print(f"  {added:>11,} URLs queued  RSS {marks[-1][1]:8.1f} MB  {marks[-1][2]:7.1f} s  "
                  f"checkpoint {cp_s:5.2f} s (loop held <= {stall_s * 1000:4.0f} ms)  "
                  f"disk {dir_bytes(directory) / added:5.1f} B/URL", flush=True)
    add_s, add_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    stats = f.stats()
    disk = dir_bytes(directory)
    t1 = time.perf_counter()
    for _ in range(take):
        host, _url = await f.get()
        f.release(host, 0.0)
    take_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    f.checkpoint()
    checkpoint_s = time.perf_counter() - t2
    f.shutdown()
    t3 = time.perf_counter()
    again = Frontier(FrontierConfig(), workers=64, directory=directory)
    restore_s = time.perf_counter() - t3
    assert again.queued == n - take, (again.queued, n - take)
    again.shutdown()
    rss = [m[1] for m in marks]
    return {"urls": n, "hosts": hosts, "rss_mb_at_tenths": rss,
            "rss_growth_first_to_last_mb": round(rss[-1] - rss[0], 1),
            "peak_rss_mb": round(max(rss), 1), "adds_per_s": round(n / add_s), "add_cpu_s": round(add_cpu, 1),
            "ram_urls": stats["ram_urls"], "spilled_urls": stats["spilled_urls"],
            "disk_bytes_per_url": round(disk / n, 1), "takes_per_s": round(take / take_s) if take else 0,
            "checkpoint_s": round(checkpoint_s, 2), "restore_s": round(restore_s, 2),
            "checkpoint_loop_stall_ms_max": round(max(stalls) * 1000), "chunks": stats["chunks"],
            "rewritten_urls": stats["rewritten_urls"], "chunks_relocated": stats["chunks_relocated"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--urls", type=int, default=30_000_000)
    ap.add_argument("--hosts", type=int, default=20_000)
    ap.add_argument("--take", type=int, default=200_000)
    ap.add_argument("--baseline-urls", type=int, default=2_000_000)
    ap.add_argument("--dir", default=None, help="where the frontier's files go (default: a temporary folder)")
    benchkit.add_kernels_option(ap)
    args = ap.parse_args()
    benchkit.check_kernels(args)
    print(f"baseline: {args.baseline_urls:,} URLs in per-host deques (RAM only)", flush=True)
    base = baseline(args.baseline_urls, args.hosts)
    print(f"  RSS +{base['rss_growth_mb']} MB = {base['bytes_per_url']} B/URL", flush=True)
    print(f"frontier: {args.urls:,} URLs over {args.hosts:,} hosts, memory_urls {FrontierConfig().memory_urls:,}",
          flush=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        result = asyncio.run(frontier_run(args.urls, args.hosts, args.take, Path(tmp)))
    result["baseline"] = base
    result["baseline_rss_mb_at_frontier_size"] = round(base["bytes_per_url"] * args.urls / 2**20)
    print(f"frontier: peak RSS {result['peak_rss_mb']} MB (first->last tenth +{result['rss_growth_first_to_last_mb']}"
          f" MB); in-RAM deques would need ~{result['baseline_rss_mb_at_frontier_size']} MB; "
          f"{result['adds_per_s']:,} adds/s, {result['takes_per_s']:,} takes/s, "
          f"{result['disk_bytes_per_url']} disk B/URL, checkpoint {result['checkpoint_s']} s "
          f"(background: loop held <= {result['checkpoint_loop_stall_ms_max']} ms), "
          f"restore {result['restore_s']} s", flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

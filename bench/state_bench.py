"""robots.txt and DNS caches at their bounds: how long a checkpoint's save holds the event loop.

    python bench/state_bench.py [--origins 200000] [--names 1000000] [--rounds 3]

Fills a `RobotsCache` with `--origins` fetched entries (~1 KB of robots text
each, the size `crawler/state.py` quotes) and a DNS `Resolver` with `--names`
positive answers (the default bounds of both caches), then, `--rounds` times,
changes one entry (an unchanged cache is not written) and saves it as the
node's periodic checkpoint does, while a ticker on the loop (a 1 ms sleep,
as in `bench/frontier_bench.py`) records the longest gap between its ticks:
the longest time no fetch could have made progress. Then restores each file
into a fresh cache. Prints per-round figures and the medians; the last line
is JSON. The baseline is the loop's own ticker gap with nothing saving,
measured in the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from crawler.config.schema import DnsConfig, RobotsConfig  # noqa: E402
from crawler.fetch import dns as dns_mod  # noqa: E402
from crawler.fetch import robots as robots_mod  # noqa: E402
from crawler.state import StateStore  # noqa: E402

TICK_S = 0.001                     # the ticker's sleep, as in frontier_bench
ROBOTS_TEXT_BYTES = 1024           # robots text per origin (state.py quotes ~1 KB)
TTL_S = 3600.0                     # entries stay fresh for the whole run


def robots_text(i: int) -> str:
    """~1 KB of plausible robots.txt text, distinct per origin."""
    lines = ["User-agent: *"] + [f"Disallow: /private/{i}/section-{k:03d}/" for k in range(40)]
    return "\n".join(lines)[:ROBOTS_TEXT_BYTES] + "\n"


def filled_robots(n: int) -> robots_mod.RobotsCache:
    cache = robots_mod.RobotsCache(None, RobotsConfig(), "BenchBot/1.0", max_entries=n)   # type: ignore[arg-type]
    expires = time.monotonic() + TTL_S
    for i in range(n):
        cache._store(f"https://host{i:07d}.example.org",
                     robots_mod.RobotsRules(robots_mod.FETCHED, expires, agent="BenchBot", text=robots_text(i)))
    return cache


def filled_dns(n: int) -> dns_mod.Resolver:
    resolver = dns_mod.Resolver(DnsConfig(), max_entries=n)
    expires = time.monotonic() + TTL_S
    for i in range(n):
        addr = (f"93.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}",)
        resolver._store(f"host{i:07d}.example.org", dns_mod._Entry(addr, addr, None, "", expires))
    return resolver


async def timed(call) -> tuple[float, float]:
    """(seconds `call()` took, longest gap between the ticker's ticks meanwhile); the old save wrote on the
    loop and returned None, the new one returns an awaitable."""
    return await benchkit.loop_held(call, TICK_S, settle_s=0.05)


async def rounds_of(cache, touch, store: StateStore, rounds: int) -> dict:
    saves, pauses = [], []
    for r in range(rounds):
        touch(r)                              # one change: an unchanged cache is not written
        took, pause = await timed(lambda: cache.save(store))
        saves.append(took)
        pauses.append(pause)
        print(f"  {cache.name} round {r + 1}: save {took:6.2f} s, loop held <= {pause * 1000:6.0f} ms, "
              f"file {store.path(cache.name).stat().st_size / 2**20:6.1f} MB", flush=True)
    return {"save_s": [round(s, 2) for s in saves], "pause_ms": [round(p * 1000) for p in pauses],
            "save_s_median": round(statistics.median(saves), 2),
            "pause_ms_median": round(statistics.median(pauses) * 1000),
            "pause_ms_max": round(max(pauses) * 1000),
            "file_mb": round(store.path(cache.name).stat().st_size / 2**20, 1)}


async def run(origins: int, names: int, rounds: int, directory: Path) -> dict:
    store = StateStore(directory)
    _, idle = await timed(lambda: None)
    print(f"baseline: loop ticker gap with nothing saving {idle * 1000:.1f} ms", flush=True)
    out: dict = {"origins": origins, "names": names, "idle_pause_ms": round(idle * 1000, 1)}

    t0 = time.perf_counter()
    robots = filled_robots(origins)
    print(f"robots: {origins:,} origins filled in {time.perf_counter() - t0:.1f} s", flush=True)
    expires = time.monotonic() + TTL_S
    # The touch binds the cache it changes: the name is deleted below to free the cache before the DNS part.
    out["robots"] = await rounds_of(robots, lambda r, cache=robots: cache._store(
        "https://host0000000.example.org",
        robots_mod.RobotsRules(robots_mod.FETCHED, expires, agent="BenchBot", text=robots_text(r))), store, rounds)
    close = getattr(robots, "close", None)
    if close is not None:
        await close()
    del robots
    t0 = time.perf_counter()
    robots_mod.RobotsCache(None, RobotsConfig(), "BenchBot/1.0", max_entries=origins).restore(store)  # type: ignore[arg-type]
    out["robots"]["restore_s"] = round(time.perf_counter() - t0, 2)

    t0 = time.perf_counter()
    resolver = filled_dns(names)
    print(f"dns: {names:,} names filled in {time.perf_counter() - t0:.1f} s", flush=True)
    out["dns"] = await rounds_of(resolver, lambda r, cache=resolver: cache._store(
        "host0000000.example.org", dns_mod._Entry(("93.0.0.1",), ("93.0.0.1",), None, "", expires)), store, rounds)
    await resolver.close()
    del resolver
    t0 = time.perf_counter()
    dns_mod.Resolver(DnsConfig(), max_entries=names).restore(store)
    out["dns"]["restore_s"] = round(time.perf_counter() - t0, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--origins", type=int, default=robots_mod.DEFAULT_MAX_ENTRIES)
    ap.add_argument("--names", type=int, default=dns_mod.DEFAULT_MAX_ENTRIES)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the state files go (default: a temporary folder)")
    benchkit.add_kernels_option(ap)
    args = ap.parse_args()
    benchkit.check_kernels(args)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        result = asyncio.run(run(args.origins, args.names, args.rounds, Path(tmp)))
    for part in ("robots", "dns"):
        r = result[part]
        print(f"{part}: save median {r['save_s_median']} s, loop held median {r['pause_ms_median']} ms "
              f"(max {r['pause_ms_max']} ms), file {r['file_mb']} MB, restore {r['restore_s']} s", flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

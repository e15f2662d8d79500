"""Crawl benchmark: the full node pipeline against a minimal crawl loop, same web, same process.

Starts the synthetic test web as a child process (so its CPU is not counted),
then, for several rounds, crawls it with a page cap twice:

- **node**: `crawler.node.Node` with robots.txt, politeness, filter, splitter,
  DUE, crawl log and metrics, WARC off (what the issue measures);
- **minimal**: aiohttp + selectolax, a Python set for seen URLs, no robots,
  no politeness (the floor a Python crawler cannot go below).

Each gets a fresh web server (so nothing is cached on the server side for one
but not the other) and is measured by this process's CPU time (threads
included), divided by the pages fetched. Prints per-round figures, medians,
and the ratio node / minimal; the last line is JSON.

    python bench/crawl_bench.py [--web-pages 5000] [--hosts 100] [--rounds 3] [--workers 64] [--pages CAP]

Without a cap both crawls fetch the whole web, i.e. the same pages: with a
cap an unconstrained BFS reaches the link-heavy hub pages first and the two
would do different work per page.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

import aiohttp  # noqa: E402
from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from crawler.config import from_dict  # noqa: E402
from crawler.node import Node  # noqa: E402
from crawler.testweb.process import TestWebProcess  # noqa: E402


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def seeds_of(info: dict) -> list[str]:
    return [line.strip() for line in Path(info["seeds"]).read_text().splitlines() if line.strip()]


async def minimal_crawl(seeds: list[str], port: int, max_pages: int, workers: int) -> int:
    """The floor: fetch, extract links, join, dedupe with a set. No robots, no politeness.

    Ends like the 500-lines crawler: `queue.join()`, then the workers are cancelled.
    """
    seen = set(seeds)
    queue: asyncio.Queue[str] = asyncio.Queue()
    for s in seeds:
        queue.put_nowait(s)
    fetched = 0
    done = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=0, resolver=_LoopbackResolver())

    async with aiohttp.ClientSession(connector=connector) as session:
        async def visit(url: str) -> None:
            nonlocal fetched
            try:
                async with session.get(url, allow_redirects=False) as resp:
                    body = await resp.read()
                    ctype = resp.headers.get("Content-Type", "")
            except (TimeoutError, aiohttp.ClientError, OSError):
                return
            fetched += 1
            if max_pages and fetched >= max_pages:
                done.set()
            if "html" not in ctype:
                return
            for node in LexborHTMLParser(body).css(_LINKS):
                attrs = node.attributes
                href = attrs.get("href") or attrs.get("src") or ""
                link = urldefrag(urljoin(url, href))[0]
                if link.startswith("http") and link not in seen:
                    seen.add(link)
                    queue.put_nowait(link)

        async def worker() -> None:
            while True:
                url = await queue.get()
                try:
                    await visit(url)
                finally:
                    queue.task_done()

        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        joined = asyncio.create_task(queue.join())
        capped = asyncio.create_task(done.wait())
        await asyncio.wait([joined, capped], return_when=asyncio.FIRST_COMPLETED)
        for t in (*tasks, joined, capped):
            t.cancel()
        await asyncio.gather(*tasks, joined, capped, return_exceptions=True)
    return fetched


# The same link sources as the node's default (a, area, link, img, frame, iframe, embed, source, form).
_LINKS = "a[href],area[href],link[href],img[src],frame[src],iframe[src],embed[src],source[src]"


class _LoopbackResolver(aiohttp.abc.AbstractResolver):
    """Every *.web.test name is the test web on loopback (what the node's DNS override does)."""

    async def resolve(self, host, port=0, family=0):
        import socket
        return [{"hostname": host, "host": "127.0.0.1", "port": port, "family": socket.AF_INET,
                 "proto": 0, "flags": 0}]

    async def close(self) -> None:
        pass


def node_config(seeds_file: str, data_dir: Path, max_pages: int, workers: int) -> dict:
    return {
        "cluster": {"nodes": [{"id": 0, "peer_port": 0, "metrics_port": 0}]},
        "crawl": {"seeds_file": seeds_file, "data_dir": str(data_dir / "node-{node}"), "max_pages": max_pages},
        "workers": workers,
        "fetch": {"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
        "store": {"warc": {"enabled": False}},
        "metrics": {"progress_interval_s": 0},
    }


def run_once(kind: str, web_args: list[str], tmp: Path, args: argparse.Namespace) -> dict:
    with TestWebProcess(tmp / f"web-{kind}", web_args) as web:
        started_cpu, started = cpu_s(), time.perf_counter()
        if kind == "node":
            config = from_dict(node_config(web.info["seeds"], tmp / f"data-{time.time_ns()}", args.pages, args.workers))
            pages = asyncio.run(Node(config, 0).run())["fetches"]
        else:
            pages = asyncio.run(minimal_crawl(seeds_of(web.info), web.info["port"], args.pages, args.workers))
        wall, cpu = time.perf_counter() - started, cpu_s() - started_cpu
    return {"kind": kind, "pages": pages, "pages_per_s": pages / wall, "cpu_ms_per_page": 1000 * cpu / max(pages, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=0,
                   help="page cap of each crawl; 0 (default) = the whole web, so both crawls fetch the same pages")
    p.add_argument("--hosts", type=int, default=100)
    p.add_argument("--web-pages", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=64)
    p.add_argument("--profile", metavar="FILE", help="cProfile one extra node crawl into FILE")
    benchkit.add_kernels_option(p)
    args = p.parse_args(argv)
    benchkit.check_kernels(args)
    web_args = ["--hosts", str(args.hosts), "--pages", str(args.web_pages), "--no-bad-host", "--no-slow-host",
                "--no-trap", "--no-nxdomain-links"]
    results: dict[str, list[dict]] = {"node": [], "minimal": []}
    with tempfile.TemporaryDirectory(prefix="crawl-bench-") as tmpdir:
        tmp = Path(tmpdir)
        for r in range(args.rounds):
            for kind in (("node", "minimal") if r % 2 == 0 else ("minimal", "node")):
                res = run_once(kind, web_args, tmp, args)
                results[kind].append(res)
                print(f"round {r + 1} {kind:8s} pages {res['pages']:6d}  {res['pages_per_s']:8.1f} pages/s  "
                      f"{res['cpu_ms_per_page']:6.3f} CPU-ms/page", flush=True)
        if args.profile:
            import cProfile
            with TestWebProcess(tmp / "web-profile", web_args) as web:
                config = from_dict(node_config(web.info["seeds"], tmp / "data-profile", args.pages, args.workers))
                cProfile.runctx("asyncio.run(Node(config, 0).run())", globals(), {"config": config, "Node": Node,
                                                                                 "asyncio": asyncio}, args.profile)
            print(f"profile written to {args.profile}")
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("pages_per_s", "cpu_ms_per_page")}
           for k, v in results.items()}
    ratio = med["node"]["cpu_ms_per_page"] / med["minimal"]["cpu_ms_per_page"]
    for name in ("node", "minimal"):
        print(f"median {name:8s} {med[name]['pages_per_s']:8.1f} pages/s  "
              f"{med[name]['cpu_ms_per_page']:6.3f} CPU-ms/page")
    print(f"CPU per page, node / minimal: {ratio:.2f}x")
    print(json.dumps({"node": med["node"], "minimal": med["minimal"], "cpu_ratio": round(ratio, 3),
                      "rounds": args.rounds, "pages_cap": args.pages}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

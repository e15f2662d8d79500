"""Discovery bench: how long links that could feed an idle worker wait in the DUE, prompt merges on and off.

A link found on a page, while a worker waits for something to fetch and the
link's host has nothing queued, is work the node could start now; until a
merge decides it is new it sits in the DUE buffer. This bench measures that
wait from the node's own calls (instrumented here, in this process): each
URL's time of discovery (its page's links entering the DUE) and the time it
enters the frontier. Only URLs that were "hungry" at discovery count: a
worker waited and their host had nothing queued. Two webs, each crawled by
one node with `due.prompt_lookups` on and off in interleaved rounds (the test
web runs as a child process, so its CPU is not counted):

- **broad**: the default test web (100 hosts, 5,000 pages), the defaults;
- **one-host**: one big host at `politeness.delay_factor: 1`,
  `min_delay_s: 0`: the host alternates fetching and waiting its delay, so a
  crawl with no DUE stalls takes about 2 x (sum of fetch times) plus the
  node's own time per page. Printed: wall time, CPU, and per gap between two
  requests to the host, the time beyond the politeness wait (median, p99)
  next to the node's CPU per page.

    python bench/discovery_bench.py [--rounds 3] [--one-host-pages 3000]

Prints per-round figures, medians and ratios; the last line is JSON.
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

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from crawler.config import from_dict  # noqa: E402
from crawler.node import Node  # noqa: E402
from crawler.testweb.process import TestWebProcess  # noqa: E402
from crawler.urls import host_of  # noqa: E402

WEBS = {
    "broad": ["--hosts", "100", "--pages", "5000", "--crawl-delay-hosts", "0", "--no-bad-host"],
    "one-host": ["--hosts", "1", "--seed-hosts", "1", "--no-slow-host", "--no-bad-host", "--no-trap",
                 "--no-nxdomain-links", "--crawl-delay-hosts", "0"],
}


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Discovery:
    """Wraps a node's add_urls and enqueue: discovery and frontier-entry times of hungry URLs.

    A URL counts once, at its first sighting: if a worker waited then and its host had nothing
    queued, its wait until it enters the frontier is recorded. (A URL first seen while its host was
    busy, and seen again later when the host has drained, is not a prompt-discovery case.)
    """

    def __init__(self, node: Node) -> None:
        self.node = node
        self.seen: set[str] = set()
        self.found: dict[str, float] = {}       # hungry URL -> time its page's links entered the DUE
        self.delays: list[float] = []
        add_urls, enqueue = node.add_urls, node.enqueue

        async def traced_add_urls(urls: list[str]) -> None:
            frontier, seen = node.frontier, self.seen
            waiting = frontier.has_waiters
            now = time.monotonic()
            for url in urls:
                if url not in seen:
                    seen.add(url)
                    if waiting and not frontier.queued_of(host_of(url)):
                        self.found[url] = now
            await add_urls(urls)

        def traced_enqueue(urls: list[str]) -> None:
            now = time.monotonic()
            for url in urls:
                t = self.found.pop(url, None)
                if t is not None:
                    self.delays.append(now - t)
            enqueue(urls)

        node.add_urls, node.enqueue = traced_add_urls, traced_enqueue


def config_for(web: str, seeds_file: str, data_dir: Path, prompt: bool) -> dict:
    config = {
        "cluster": {"nodes": [{"id": 0, "peer_port": 0, "metrics_port": 0}]},
        "crawl": {"seeds_file": seeds_file, "data_dir": str(data_dir / "node-{node}")},
        "fetch": {"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
        "due": {"prompt_lookups": prompt},
        "store": {"warc": {"enabled": False}},
        "metrics": {"enabled": False, "progress_interval_s": 0},
    }
    if web == "one-host":
        config["politeness"] = {"delay_factor": 1.0, "min_delay_s": 0.0}
    return config


def run_once(web: str, web_args: list[str], prompt: bool, tmp: Path) -> dict:
    with TestWebProcess(tmp / f"web-{time.time_ns()}", web_args) as server:
        config = from_dict(config_for(web, server.info["seeds"], tmp / f"data-{time.time_ns()}", prompt))
        node = Node(config, 0)
        probe = Discovery(node)
        cpu0, wall0 = cpu_s(), time.perf_counter()
        summary = asyncio.run(node.run())
        wall, cpu = time.perf_counter() - wall0, cpu_s() - cpu0
        requests = server.requests()
    pages = [r for r in requests if r.path != "/robots.txt"]
    fetch_s = sum(r.end - r.start for r in requests)
    span = (max(r.end for r in requests) - min(r.start for r in requests)) if requests else 0.0
    out = {"web": web, "prompt": prompt, "pages": len(pages), "wall_s": wall, "cpu_s": cpu,
           "hungry_urls": len(probe.delays), "p50_ms": 1000 * quantile(probe.delays, 0.5),
           "p99_ms": 1000 * quantile(probe.delays, 0.99), "max_ms": 1000 * max(probe.delays, default=0.0),
           "merges": summary["due"]["merges"], "lookups": summary["discovery_delay_s"]["lookups"]}
    if web == "one-host":
        # k = 1: after a fetch of x s the host waits x. The rest of each gap between two requests to the
        # host is the node's own time: its CPU for the page (parse, links, DUE, logs), the loop's timers,
        # and any wait for URLs (a DUE wait shows as gaps that prompt lookups close).
        big = sorted((r for r in requests if r.host == "h000.web.test"), key=lambda r: r.start)
        beyond = sorted(b.start - a.end - (a.end - a.start) for a, b in zip(big, big[1:]))
        out.update(fetch_s=fetch_s, span_s=span, gap_p50_ms=1000 * quantile(beyond, 0.5),
                   gap_p99_ms=1000 * quantile(beyond, 0.99), cpu_ms_per_page=1000 * cpu / max(len(pages), 1))
    return out


def line(res: dict) -> str:
    text = (f"{res['web']:8s} prompt {'on ' if res['prompt'] else 'off'}  pages {res['pages']:5d}  "
            f"wall {res['wall_s']:6.2f} s  CPU {res['cpu_s']:6.2f} s  hungry URLs {res['hungry_urls']:5d}  "
            f"wait p50 {res['p50_ms']:7.1f} ms  p99 {res['p99_ms']:7.1f} ms  max {res['max_ms']:7.1f} ms  "
            f"merges {res['merges']:4d}, prompt lookups {res['lookups']}")
    if "gap_p50_ms" in res:
        text += (f"  between requests beyond politeness: p50 {res['gap_p50_ms']:.2f} ms, "
                 f"p99 {res['gap_p99_ms']:.2f} ms;"
                 f" node CPU {res['cpu_ms_per_page']:.2f} ms/page")
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--one-host-pages", type=int, default=3000)
    p.add_argument("--webs", default="broad,one-host", help="comma-separated: broad, one-host")
    benchkit.add_kernels_option(p)
    args = p.parse_args(argv)
    benchkit.check_kernels(args)
    webs = {name: list(WEBS[name]) for name in args.webs.split(",")}
    if "one-host" in webs:
        webs["one-host"] += ["--pages", str(args.one_host_pages)]
    results: dict[tuple[str, bool], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="discovery-bench-") as tmpdir:
        tmp = Path(tmpdir)
        for r in range(args.rounds):
            for web, web_args in webs.items():
                for prompt in ((True, False) if r % 2 == 0 else (False, True)):
                    res = run_once(web, web_args, prompt, tmp)
                    results.setdefault((web, prompt), []).append(res)
                    print(f"round {r + 1}  {line(res)}", flush=True)
    keys = ("wall_s", "cpu_s", "p50_ms", "p99_ms", "max_ms", "hungry_urls", "merges", "lookups",
            "fetch_s", "span_s", "gap_p50_ms", "gap_p99_ms", "cpu_ms_per_page")
    medians = {f"{web}/{'on' if prompt else 'off'}":
               {k: statistics.median(r[k] for r in rs) for k in keys if k in rs[0]}
               for (web, prompt), rs in results.items()}
    print("medians:")
    for name, med in medians.items():
        print(f"  {name:14s} " + "  ".join(f"{k} {v:.2f}" for k, v in med.items()))
    ratios = {}
    for web in webs:
        on, off = medians.get(f"{web}/on"), medians.get(f"{web}/off")
        if on and off:
            ratios[web] = {"p99_off_over_on": off["p99_ms"] / on["p99_ms"] if on["p99_ms"] else None,
                           "wall_off_over_on": off["wall_s"] / on["wall_s"],
                           "cpu_on_over_off": on["cpu_s"] / off["cpu_s"]}
            print(f"  {web}: p99 wait off/on {ratios[web]['p99_off_over_on']:.1f}x, wall off/on "
                  f"{ratios[web]['wall_off_over_on']:.2f}x, CPU on/off {ratios[web]['cpu_on_over_off']:.2f}x")
    print(json.dumps({"medians": medians, "ratios": ratios, "rounds": args.rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

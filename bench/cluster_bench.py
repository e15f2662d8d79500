"""Cluster overhead: CPU per page of a 3-node cluster against one node, same web, same script.

Both runs go through `crawler cluster` (one child process per node) on a
fresh copy of the synthetic test web (a child process too). The nodes' CPU is
read with RUSAGE_CHILDREN around the cluster run (the web server is still
running then, so its CPU is not in the figure), and divided by the pages the
cluster fetched. Rounds alternate the order; medians and the ratio are
printed, the last line is JSON.

    python bench/cluster_bench.py [--web-pages 5000] [--hosts 100] [--rounds 3] [--workers 32] [--pin]

`--pin` puts the web server on one CPU and every node on another, so both runs
have one core and the three nodes are not oversubscribed against a 2-core
machine shared with the server (they share their core, as one node's
workers do).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from crawler.cluster import run_cluster  # noqa: E402
from crawler.demo import SECRET_ENV, demo_config  # noqa: E402
from crawler.testweb.process import TestWebProcess  # noqa: E402


ALL_CPUS = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
NODES_CPU, WEB_CPU = (sorted(ALL_CPUS) + [0, 1])[:2]      # the first two CPUs this process may use


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(nodes: int, web_args: list[str], tmp: Path, workers: int, pin: bool = False) -> dict:
    work = tmp / f"n{nodes}-{time.time_ns()}"
    with TestWebProcess(work / "web", web_args) as web:
        if pin:
            # The web server on one core, every node (children inherit this process's mask) on
            # the other: one node and three nodes get the same CPU, and neither competes with
            # the server, so the 3-node run is not oversubscribed against the machine.
            os.sched_setaffinity(web.proc.pid, {WEB_CPU})
            os.sched_setaffinity(0, {NODES_CPU})
        config = demo_config(web.info["seeds"], work / "data", workers, nodes)
        config["store"] = {"warc": {"enabled": False}}
        config["metrics"] = {"progress_interval_s": 0}
        path = work / "crawl.yaml"
        path.write_text(yaml.safe_dump(config))
        out = io.StringIO()
        cpu0, t0 = children_cpu_s(), time.perf_counter()
        code = asyncio.run(run_cluster(str(path), progress_interval_s=0, out=out,
                                       extra_env={SECRET_ENV: "bench-secret-0123456789"}))
        wall, cpu = time.perf_counter() - t0, children_cpu_s() - cpu0
    if pin:
        os.sched_setaffinity(0, ALL_CPUS)
    if code != 0:
        raise SystemExit(f"cluster of {nodes} failed; see {work}")
    cluster = json.loads(out.getvalue().splitlines()[-1])
    pages = cluster["fetches"]
    return {"nodes": nodes, "pages": pages, "wall_s": wall, "cpu_ms_per_page": 1000 * cpu / max(pages, 1),
            "run_cpu_ms_per_page": 1000 * cluster["cpu_s"] / max(pages, 1),
            "splitter_hit_rate": cluster["cache_hit_rates"].get("splitter"), "peer_bytes": cluster["peer_bytes_sent"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--web-pages", type=int, default=5000)
    p.add_argument("--hosts", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--pin", action="store_true",
                   help="web server on one CPU, all nodes on another (Linux; needs 2 CPUs)")
    args = p.parse_args(argv)
    if args.pin and len(ALL_CPUS) < 2:
        p.error("--pin needs at least 2 CPUs")
    web_args = ["--hosts", str(args.hosts), "--pages", str(args.web_pages), "--no-bad-host", "--no-slow-host",
                "--no-nxdomain-links"]
    runs: dict[int, list[dict]] = {1: [], 3: []}
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmpdir:
        for r in range(args.rounds):
            for nodes in ((1, 3) if r % 2 == 0 else (3, 1)):
                res = run_once(nodes, web_args, Path(tmpdir), args.workers, args.pin)
                runs[nodes].append(res)
                print(f"round {r + 1} nodes {nodes}: {res['pages']} pages in {res['wall_s']:.1f} s, "
                      f"{res['cpu_ms_per_page']:.3f} CPU-ms/page ({res['run_cpu_ms_per_page']:.3f} without process "
                      f"start-up), splitter hits {res['splitter_hit_rate']}, "
                      f"peer bytes {res['peer_bytes']}", flush=True)
    med = {n: statistics.median(r["cpu_ms_per_page"] for r in v) for n, v in runs.items()}
    run_med = {n: statistics.median(r["run_cpu_ms_per_page"] for r in v) for n, v in runs.items()}
    ratio, run_ratio = med[3] / med[1], run_med[3] / run_med[1]
    print(f"median CPU-ms/page, whole processes: 1 node {med[1]:.3f}, 3 nodes {med[3]:.3f}; ratio 3/1 = {ratio:.3f}x")
    print(f"median CPU-ms/page, crawl only (no interpreter start-up and imports): 1 node {run_med[1]:.3f}, "
          f"3 nodes {run_med[3]:.3f}; ratio 3/1 = {run_ratio:.3f}x")
    print(json.dumps({"cpu_ms_per_page_1": round(med[1], 4), "cpu_ms_per_page_3": round(med[3], 4),
                      "ratio": round(ratio, 4), "run_cpu_ms_per_page_1": round(run_med[1], 4),
                      "run_cpu_ms_per_page_3": round(run_med[3], 4), "run_ratio": round(run_ratio, 4),
                      "rounds": args.rounds, "pinned": args.pin}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Kill bench: crawls SIGKILLed at random moments, at a size where state is large, judged from outside.

A single node and a 3-node cluster (each node its own `crawler run --node I`
process on its own 127.0.0.x source address) crawl a test web of 400 hosts
and 60,000 pages at the defaults; a seeded schedule SIGKILLs a random node
at random page counts and restarts it after a short pause, waiting each time
until it has resumed. Judged from the test web's access log and the nodes'
own records:

- recall: the share of the manifest's expected pages that were fetched
  (goal >= 0.995; the crawler's promise is 1.0);
- re-fetches: pages fetched more than once, against the bound the nodes
  report (fetches in flight and fetched-but-unconfirmed at each kill, from
  their "resumed" log lines, plus the DUE's `duplicates_emitted`);
- owners: no host fetched from an address other than its owner's;
- politeness: no two requests to one host in flight at once, and between
  two requests to a host at least k times the crawler's measured fetch time
  (`politeness.delay_factor`) and the host's Crawl-delay, across the kills.

    python bench/kill_bench.py                      # both shapes, 4 kills each
    python bench/kill_bench.py --nodes 3 --kills 6 --seed 7

The last line is JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from benchkit import add_kernels_option, check_kernels, cluster_config, start_node, use_installed_crawler

use_installed_crawler()

import yaml  # noqa: E402

from crawler.config.schema import PolitenessConfig  # noqa: E402
from crawler.splitter import Partitioner  # noqa: E402
from crawler.testweb.audit import ROBOTS_PATH, compare, overlaps, politeness_shortfalls, request_durations  # noqa: E402
from crawler.testweb.process import TestWebProcess  # noqa: E402

SECRET_ENV = "KILL_BENCH_SECRET"
RESUMED = re.compile(r"resumed: .* (\d+) fetches were in flight, (\d+) done but unconfirmed")
RUN_LIMIT_S = 1800
RESTART_LIMIT_S = 120


def config(tmp: Path, seeds: str, nodes: int, workers: int) -> dict:
    return cluster_config(tmp, seeds, nodes, workers, "kill-bench", SECRET_ENV)


def start(config_path: Path, node: int, tmp: Path) -> subprocess.Popen:
    return start_node(config_path, node, tmp, SECRET_ENV, "a-kill-bench-secret-of-some-length")


def resumed_count(tmp: Path, node: int) -> int:
    path = tmp / f"node-{node}.stderr"
    return len(RESUMED.findall(path.read_text(errors="replace"))) if path.exists() else 0


def page_count(web) -> int:
    return sum(1 for r in web.requests() if r.path != ROBOTS_PATH)


def run(nodes: int, args: argparse.Namespace, tmp: Path) -> dict:
    rng = random.Random(args.seed * 1000 + nodes)
    web_args = ["--hosts", str(args.hosts), "--pages", str(args.pages), "--no-slow-host"]
    with TestWebProcess(tmp / "web", web_args) as web:
        manifest = web.manifest()
        total = len(manifest.fetched)
        config_path = tmp / "crawl.yaml"
        config_path.write_text(yaml.safe_dump(config(tmp, web.info["seeds"], nodes, args.workers)))
        t0 = time.monotonic()
        procs = {i: start(config_path, i, tmp) for i in range(nodes)}
        kills: list[tuple[int, int]] = []
        try:
            for k in range(args.kills):
                target = total * (k + 1) // (args.kills + 1) + rng.randrange(0, max(total // 50, 1))
                deadline = time.monotonic() + RUN_LIMIT_S
                while page_count(web) < target and time.monotonic() < deadline:
                    if any(p.poll() is not None for p in procs.values()):
                        break                                   # a node ended: the crawl is nearly done
                    time.sleep(0.05)
                live = [i for i, p in procs.items() if p.poll() is None]
                if not live:
                    break
                victim = rng.choice(live)
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait(10)
                kills.append((victim, page_count(web)))
                time.sleep(rng.uniform(0.1, 2.0))
                before = resumed_count(tmp, victim)
                procs[victim] = start(config_path, victim, tmp)
                deadline = time.monotonic() + RESTART_LIMIT_S
                while resumed_count(tmp, victim) == before and time.monotonic() < deadline:
                    if procs[victim].poll() is not None:
                        break
                    time.sleep(0.05)
            codes = {i: p.wait(RUN_LIMIT_S) for i, p in procs.items()}
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    p.wait(10)
        wall_s = time.monotonic() - t0
        requests = web.requests()
    result = compare(requests, manifest)
    records = []
    for i in range(nodes):
        log_path = tmp / "data" / f"node-{i}" / "crawl.log.jsonl"
        if log_path.exists():
            for line in log_path.read_text(errors="replace").splitlines():
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass                     # a line a SIGKILL cut short
    # Per request, not per URL: re-fetches after a kill (robots.txt above all) measured other times.
    durations = request_durations(requests, records, manifest)
    pol = PolitenessConfig()
    shortfalls = politeness_shortfalls(requests, manifest, durations, pol.delay_factor, pol.min_delay_s,
                                       max_delay_s=pol.max_delay_s)
    summaries = []
    for i in range(nodes):
        lines = (tmp / f"node-{i}.stdout").read_text().splitlines()
        summaries.append(json.loads(lines[-1]) if lines else {})
    resumed = [tuple(map(int, m)) for i in range(nodes)
               for m in RESUMED.findall((tmp / f"node-{i}.stderr").read_text(errors="replace"))]
    repeats = sum(n - 1 for url, n in result.duplicates.items() if not url.endswith(ROBOTS_PATH))
    bound = sum(a + b for a, b in resumed) + sum(s.get("due", {}).get("duplicates_emitted", 0) for s in summaries)
    part = Partitioner(nodes)
    peers_by_host = defaultdict(set)
    for r in requests:
        peers_by_host[r.host].add(r.peer)
    wrong_owner = sorted(h for h, p in peers_by_host.items() if p != {f"127.0.0.{part.owner(h) + 1}"})
    figures = {
        "nodes": nodes, "expected": total, "missing": len(result.missing), "unexpected": len(result.unexpected),
        "recall": round((total - len(result.missing)) / total, 5) if total else 1.0,
        "kills": len(kills), "resumes": len(resumed), "re_fetches": repeats, "re_fetch_bound": bound,
        "wrong_owner_hosts": len(wrong_owner), "overlaps": len(overlaps(requests)),
        "politeness_shortfalls": len(shortfalls),
        "exit_codes": sorted(set(codes.values())), "wall_s": round(wall_s, 1),
    }
    ok = (figures["recall"] >= 0.995 and repeats <= bound and not wrong_owner and not figures["overlaps"]
          and not shortfalls and figures["exit_codes"] == [0] and not result.unexpected)
    figures["pass"] = ok
    if result.missing:
        figures["missing_sample"] = sorted(result.missing)[:5]
    if shortfalls:
        figures["shortfall_sample"] = shortfalls[:5]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, choices=(1, 3), action="append",
                        help="cluster sizes to run (repeatable; default: 1 and 3)")
    parser.add_argument("--hosts", type=int, default=400)
    parser.add_argument("--pages", type=int, default=60000)
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", metavar="DIR", help="run in DIR/kill-bench-N and keep it (web log, crawl logs, "
                                                      "node output) to look into a failure")
    add_kernels_option(parser)
    args = parser.parse_args()
    check_kernels(args)
    out = []
    for nodes in args.nodes or [1, 3]:
        if args.keep:
            kept = Path(args.keep) / f"kill-bench-{nodes}"
            kept.mkdir(parents=True, exist_ok=False)
            figures = run(nodes, args, kept)
        else:
            with tempfile.TemporaryDirectory(prefix=f"kill-bench-{nodes}-") as tmp:
                figures = run(nodes, args, Path(tmp))
        out.append(figures)
        print(f"{nodes} node(s): {figures['kills']} kills, {figures['resumes']} resumes; "
              f"recall {figures['recall']:.5f} "
              f"({figures['missing']} of {figures['expected']} missing); re-fetches {figures['re_fetches']} "
              f"(bound {figures['re_fetch_bound']}); hosts from a wrong address {figures['wrong_owner_hosts']}; "
              f"overlaps {figures['overlaps']}; politeness shortfalls {figures['politeness_shortfalls']}; "
              f"exit codes {figures['exit_codes']}; {figures['wall_s']} s; "
              f"{'PASS' if figures['pass'] else 'FAIL'}", flush=True)
    print(json.dumps({"runs": out, "seed": args.seed}))
    sys.exit(0 if all(f["pass"] for f in out) else 1)


if __name__ == "__main__":
    main()

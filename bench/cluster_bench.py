"""Cluster overhead: CPU per page of a 3-node cluster against one node, same web, same script.

Both runs go through `crawler cluster` (one child process per node) on a
fresh copy of the synthetic test web (a child process too). The nodes' CPU is
read with RUSAGE_CHILDREN around the cluster run (the web server is still
running then, so its CPU is not in the figure), and divided by the pages the
cluster fetched. Rounds alternate the order; medians and the ratio are
printed, and the median of each round's own ratio (its two runs are minutes
apart, so a slow hour moves both), also over the rounds whose runs both saw
at most 2% hypervisor steal (read from /proc/stat around each run: on a
shared virtual machine, steal comes with slower caches and memory, and CPU
per page rises with it); the last line is JSON.

A third run per round is the control: three independent one-node crawls at
once, each of its own copy of a web a third the size (a third of the hosts
and pages, its own server process). About the same pages in all, the same
three node processes competing for the same cores as the cluster, but no
splitter, peers or termination rounds. So
    independent / 1 node   = what running three processes costs on this machine
    cluster / independent  = what the cluster's own machinery costs

    python bench/cluster_bench.py [--web-pages 5000] [--hosts 100] [--rounds 3] [--workers 32] [--pin]
                                  [--no-control] [--loaded-baseline S]

CPU per page rises as a node's load falls (it wakes for fewer events at a
time), and the web server caps the crawl's rate, so three nodes each run at
about a third of one node's load. `--loaded-baseline S` adds a one-node run
slowed by politeness.min_delay_s = S; with S chosen so that node is about
as busy as each of the three (every run prints how busy its nodes were),
`3 nodes / 1 node slowed` compares them at about equal load.

`--pin` puts the web server on one CPU and node i on the i-th of the others (in
turn, when there are fewer CPUs than nodes). On a 2-core machine every node
shares the one other core, so the three nodes are not oversubscribed against
the server but do compete with each other for that core's caches, which one
node's workers never do; with at least nodes + 1 CPUs each node has a core of
its own, as on separate machines. The bench prints which it was.
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

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

import yaml  # noqa: E402

from crawler.cluster import run_cluster  # noqa: E402
from crawler.demo import SECRET_ENV, demo_config  # noqa: E402
from crawler.ports import free_ports  # noqa: E402
from crawler.testweb.process import TestWebProcess  # noqa: E402

QUIET_STEAL = 0.02         # a round counts as quiet when both its runs saw at most this much steal
ALL_CPUS = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
WEB_CPU = min(ALL_CPUS, default=0)                         # the web server's CPU under --pin
NODE_CPUS = sorted(ALL_CPUS - {WEB_CPU}) or [WEB_CPU]      # the nodes', in turn


def node_cpu(i: int) -> int:
    """The CPU of the i-th node process of a run under --pin."""
    return NODE_CPUS[i % len(NODE_CPUS)]


def pin_nodes(first: int):
    """An `on_started` for run_cluster: node processes on their CPUs, numbered from `first`."""
    def place(pids: dict[int, int]) -> None:
        for k, pid in enumerate(pids[node] for node in sorted(pids)):
            try:
                os.sched_setaffinity(pid, {node_cpu(first + k)})
            except ProcessLookupError:
                pass                          # already gone: its exit code tells
    return place


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_ticks() -> tuple[int, int] | None:
    """(all ticks, steal ticks) of the machine so far (Linux /proc/stat; None elsewhere)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return sum(fields), fields[7] if len(fields) > 7 else 0


def steal_share(before, after) -> float | None:
    """The share of the machine's CPU time the hypervisor took from us in between
    (steal): a virtual machine's neighbours slow every run they overlap, unevenly."""
    if before is None or after is None or after[0] <= before[0]:
        return None
    return (after[1] - before[1]) / (after[0] - before[0])


def run_once(nodes: int, web_args: list[str], tmp: Path, workers: int, pin: bool = False,
             independent: bool = False, min_delay_s: float | None = None) -> dict:
    """One crawl: a cluster of `nodes` on a fresh web, or with `independent` that many one-node
    crawls at once, each of its own fresh web 1/nodes the size (the control); `min_delay_s`
    sets politeness.min_delay_s (a slower crawl: less load per second on each node)."""
    work = tmp / f"{'i' if independent else 'n'}{nodes}-{time.time_ns()}"
    webs = ([TestWebProcess(work / f"web-{i}", scaled(web_args, nodes)) for i in range(nodes)] if independent
            else [TestWebProcess(work / "web", web_args)])
    try:
        for web in webs:
            web.start()
        if pin:
            # The web server on one core and the nodes on the others (pin_nodes, once they run),
            # so no node competes with the server; on two CPUs the nodes share the second, which
            # one node has to itself. The launcher inherits this process's mask.
            for web in webs:
                os.sched_setaffinity(web.proc.pid, {WEB_CPU})
            os.sched_setaffinity(0, {node_cpu(0)})      # this process and the launcher
        if independent:
            ports = free_ports(2 * nodes)
            configs = [bench_config(demo_config(web.info["seeds"], work / f"data-{i}", workers, 1))
                       for i, web in enumerate(webs)]
            for i, config in enumerate(configs):
                config["cluster"]["nodes"][0].update(peer_port=ports[2 * i], metrics_port=ports[2 * i + 1],
                                                     source_address=f"127.0.0.{i + 1}")
        else:
            configs = [bench_config(demo_config(webs[0].info["seeds"], work / "data", workers, nodes))]
        if min_delay_s is not None:
            for config in configs:
                config["politeness"] = {"min_delay_s": min_delay_s}
        outs = [io.StringIO() for _ in configs]
        paths = []
        for i, config in enumerate(configs):
            paths.append(work / f"crawl-{i}.yaml")
            paths[-1].write_text(yaml.safe_dump(config))

        async def crawl() -> list[int]:
            return await asyncio.gather(*(
                run_cluster(str(path), progress_interval_s=0, out=out, on_started=pin_nodes(i) if pin else None,
                            extra_env={SECRET_ENV: "bench-secret-0123456789"})
                for i, (path, out) in enumerate(zip(paths, outs))))

        cpu0, t0, stat0 = children_cpu_s(), time.perf_counter(), cpu_ticks()
        codes = asyncio.run(crawl())
        wall, cpu = time.perf_counter() - t0, children_cpu_s() - cpu0
        steal = steal_share(stat0, cpu_ticks())
    finally:
        for web in webs:
            web.stop()
        if pin:
            os.sched_setaffinity(0, ALL_CPUS)
    if any(codes):
        raise SystemExit(f"{'independent nodes' if independent else 'cluster'} of {nodes} failed; see {work}")
    results = [json.loads(out.getvalue().splitlines()[-1]) for out in outs]
    pages = sum(r["fetches"] for r in results)
    run_cpu = sum(r["cpu_s"] for r in results)
    return {"nodes": nodes, "independent": independent, "pages": pages, "wall_s": wall, "steal": steal,
            "node_load": run_cpu / nodes / wall,     # the share of a core each node kept busy, on average
            "cpu_ms_per_page": 1000 * cpu / max(pages, 1), "run_cpu_ms_per_page": 1000 * run_cpu / max(pages, 1),
            "splitter_hit_rate": results[0]["cache_hit_rates"].get("splitter"),
            "peer_bytes": sum(r["peer_bytes_sent"] for r in results)}


def scaled(web_args: list[str], parts: int) -> list[str]:
    """The test web's arguments with --hosts and --pages divided by `parts`."""
    out = list(web_args)
    for flag in ("--hosts", "--pages"):
        i = out.index(flag)
        out[i + 1] = str(max(1, int(out[i + 1]) // parts))
    return out


def bench_config(config: dict) -> dict:
    config["store"] = {"warc": {"enabled": False}}
    config["metrics"] = {"progress_interval_s": 0}
    return config


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--web-pages", type=int, default=5000)
    p.add_argument("--hosts", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--pin", action="store_true",
                   help="web server on one CPU, node i on the i-th of the others, in turn (Linux; needs 2 CPUs)")
    p.add_argument("--no-control", action="store_true", help="skip the three independent one-node crawls")
    p.add_argument("--loaded-baseline", type=float, metavar="S",
                   help="also run one node with politeness.min_delay_s=S (a slower crawl, so each second "
                        "carries less of its work, as each of three nodes carries a third) and compare the "
                        "3 nodes with it")
    benchkit.add_kernels_option(p)
    args = p.parse_args(argv)
    benchkit.check_kernels(args)
    if args.pin and len(ALL_CPUS) < 2:
        p.error("--pin needs at least 2 CPUs")
    if args.pin:
        shared = len(NODE_CPUS) < 3
        print(f"pinned: web server on CPU {WEB_CPU}, nodes on CPUs {NODE_CPUS}"
              + (" (the 3 nodes share them: fewer than 4 CPUs)" if shared else " (a CPU each)"), flush=True)
    web_args = ["--hosts", str(args.hosts), "--pages", str(args.web_pages), "--no-bad-host", "--no-slow-host",
                "--no-nxdomain-links"]
    kinds = [("1 node", 1, False, None), ("3 nodes", 3, False, None)]
    if not args.no_control:
        kinds.append(("3 independent", 3, True, None))
    if args.loaded_baseline is not None:
        kinds.append(("1 node slowed", 1, False, args.loaded_baseline))
    runs: dict[str, list[dict]] = {name: [] for name, *_ in kinds}
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmpdir:
        for r in range(args.rounds):
            for name, nodes, independent, delay in (kinds if r % 2 == 0 else kinds[::-1]):
                res = run_once(nodes, web_args, Path(tmpdir), args.workers, args.pin, independent, delay)
                runs[name].append(res)
                steal = "" if res["steal"] is None else f" (steal {100 * res['steal']:.0f}%)"
                print(f"round {r + 1} {name}: {res['pages']} pages in {res['wall_s']:.1f} s{steal}, "
                      f"{res['cpu_ms_per_page']:.3f} CPU-ms/page ({res['run_cpu_ms_per_page']:.3f} without process "
                      f"start-up), each node {100 * res['node_load']:.0f}% busy, "
                      f"splitter hits {res['splitter_hit_rate']}, "
                      f"peer bytes {res['peer_bytes']}", flush=True)
    med = {n: statistics.median(r["cpu_ms_per_page"] for r in v) for n, v in runs.items()}
    run_med = {n: statistics.median(r["run_cpu_ms_per_page"] for r in v) for n, v in runs.items()}
    summary = {"rounds": args.rounds, "pinned": args.pin, "cpus": len(ALL_CPUS)}
    for label, m, key in (("whole processes", med, ""), ("crawl only (no interpreter start-up and imports)",
                                                         run_med, "run_")):
        print(f"median CPU-ms/page, {label}: " + ", ".join(f"{n} {v:.3f}" for n, v in m.items()))
        ratios = {"ratio": m["3 nodes"] / m["1 node"]}
        per_round = [t[f"{key}cpu_ms_per_page"] / o[f"{key}cpu_ms_per_page"]
                     for o, t in zip(runs["1 node"], runs["3 nodes"])]
        ratios["round_ratio"] = statistics.median(per_round)
        quiet = [r for r, o, t in zip(per_round, runs["1 node"], runs["3 nodes"])
                 if max(o["steal"] or 0, t["steal"] or 0) <= QUIET_STEAL]
        if quiet:
            ratios["quiet_round_ratio"] = statistics.median(quiet)
        print(f"  3 nodes / 1 node = {ratios['ratio']:.3f}x (per round "
              + ", ".join(f"{r:.3f}" for r in per_round) + f"; median {ratios['round_ratio']:.3f}x"
              + (f"; rounds with <= {100 * QUIET_STEAL:.0f}% steal in both runs: {len(quiet)}, median "
                 f"{ratios['quiet_round_ratio']:.3f}x" if quiet else "") + ")", end="")
        if "3 independent" in m:
            ratios["machine_ratio"] = m["3 independent"] / m["1 node"]
            ratios["cluster_ratio"] = m["3 nodes"] / m["3 independent"]
            print(f"; 3 independent / 1 node (the machine) = {ratios['machine_ratio']:.3f}x"
                  f"; 3 nodes / 3 independent (the cluster's machinery) = {ratios['cluster_ratio']:.3f}x", end="")
        if "1 node slowed" in m:
            slowed = [t[f"{key}cpu_ms_per_page"] / o[f"{key}cpu_ms_per_page"]
                      for o, t in zip(runs["1 node slowed"], runs["3 nodes"])]
            ratios["loaded_ratio"] = statistics.median(slowed)
            print("; 3 nodes / 1 node slowed (each node about as busy) = per round "
                  + ", ".join(f"{r:.3f}" for r in slowed) + f", median {ratios['loaded_ratio']:.3f}x", end="")
        print()
        summary.update({f"{key}cpu_ms_per_page_{n.replace(' ', '_')}": round(v, 4) for n, v in m.items()})
        summary.update({f"{key}{k}": round(v, 4) for k, v in ratios.items()})
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Soak bench: one long 3-node crawl of a large synthetic web, every node's memory and rate sampled over time.

The parts were shown flat on their own (the DUE to 10^8 fingerprints, the
frontier to 3 x 10^7 URLs); a whole node over a long crawl was not. This bench
crawls a test web of `--pages` pages (default 10^6) on `--hosts` hosts
(default 2 x 10^4) with `--nodes` `crawler run --node I` processes (each on
its own 127.0.0.x source address, a cluster secret, the defaults but no WARC
files), and every `--sample-s` seconds reads each node's /metrics and its
/proc/PID/status:

- RSS: `process_resident_memory_bytes` and, as a cross-check from outside the
  node, VmRSS (the figures below use VmRSS);
- pages: `crawler_pages_total{kind="page"}` (pages/s over each interval);
- frontier size: `crawler_frontier_urls` (queued URLs);
- DUE size: `crawler_due_disk_fingerprints` + `crawler_due_buffer_urls`;
- cache hit rates: `crawler_cache_lookups_total` of the `splitter` cache and
  the DUE front cache (`due`), per interval, and `crawler_cache_entries`;
- CPU of each node and of the web server (/proc/PID/stat), so a server that
  limits the crawl shows as a server at one full core.

The goal (issue 24): each node's RSS grows at most 10% from 20% to 100% of the
crawl, and pages/s stays steady. Defined here as:

- `rss_20` of a node: its VmRSS at the first sample at which the cluster has
  fetched >= 20% of the pages it fetches in all;
- `rss_100`: the node's largest VmRSS over the samples from 95% of the pages to
  its exit (the end of a crawl is a moment, so the last 5% stand for it);
- growth = rss_100 / rss_20 - 1, goal <= 0.10 for every node; and, since RSS
  may rise and fall in between, peak_growth = (largest VmRSS from 20% on) /
  rss_20 - 1;
- steady pages/s: the cluster's pages/s per sample interval between 20% and 95%
  of the pages (start-up and the politeness-bound tail, when only a few large
  hosts are left, excluded); reported as the median, the 10th and 90th
  percentiles, and the median of the last third of those intervals over the
  median of the first third (steady when >= 0.9).

Samples go to OUT/samples.csv (one row per node and sample) and the plot to
OUT/soak.png (`--png PATH` writes it there too); the last line printed is JSON
with every figure. The web server and the nodes inherit the bench's niceness
(on a shared machine, run it under `nice -n 10`).

    nice -n 10 python bench/soak_bench.py --out /tmp/soak --png docs/soak/soak.png   # 10^6 pages, 2 x 10^4 hosts
    nice -n 10 python bench/soak_bench.py --pages 20000 --hosts 500 --out /tmp/soak-small
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import os
import shutil
import statistics
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from benchkit import add_kernels_option, check_kernels, cluster_config, start_node, use_installed_crawler

use_installed_crawler()

import yaml  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from crawler.testweb.process import TestWebProcess  # noqa: E402

SECRET_ENV = "SOAK_BENCH_SECRET"
START_PCT = 0.20            # RSS is compared from here ...
END_PCT = 0.95              # ... to the largest RSS from here to the end
STEADY_RATIO = 0.9          # pages/s of the last third of the steady window over the first third
RSS_GOAL = 0.10
WEB_READY_S = 1800.0        # building a 10^6-page web and its manifest takes minutes
SCRAPE_TIMEOUT_S = 5.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
CACHES = ("splitter", "due")


@dataclass
class Sample:
    """One node (or the web server, node -1) at one moment."""
    t: float                    # seconds since the nodes started
    node: int
    vmrss: int                  # bytes, /proc/PID/status
    cpu_s: float                # /proc/PID/stat utime + stime
    rss_metric: int = 0         # process_resident_memory_bytes
    pages: int = 0
    frontier_urls: int = 0
    active_hosts: int = 0
    due_fingerprints: int = 0   # on disk + in the buffer
    splitter_hits: int = 0
    splitter_misses: int = 0
    due_hits: int = 0
    due_misses: int = 0
    splitter_entries: int = 0
    due_entries: int = 0
    content_entries: int = 0


def proc_figures(pid: int) -> tuple[int, float] | None:
    """(VmRSS bytes, CPU seconds) of a live process; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rss = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    after_name = stat.rsplit(")", 1)[1].split()          # fields from 3 (state) on
    return rss, (int(after_name[11]) + int(after_name[12])) / CLK_TCK


def read_metrics(sample: Sample, port: int) -> bool:
    """Fill `sample` from the node's /metrics; False when the node did not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=SCRAPE_TIMEOUT_S) as resp:
            text = resp.read().decode()
    except OSError:
        return False
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name, labels, value = s.name, s.labels, int(s.value)
            cache = labels.get("cache")
            if name == "crawler_pages_total" and labels.get("kind") == "page":
                sample.pages += value
            elif name == "process_resident_memory_bytes":
                sample.rss_metric = value
            elif name == "crawler_frontier_urls":
                sample.frontier_urls = value
            elif name == "crawler_frontier_active_hosts":
                sample.active_hosts = value
            elif name in ("crawler_due_disk_fingerprints", "crawler_due_buffer_urls"):
                sample.due_fingerprints += value
            elif name == "crawler_cache_lookups_total" and cache in CACHES:
                key = f"{cache}_{'hits' if labels.get('result') == 'hit' else 'misses'}"
                setattr(sample, key, getattr(sample, key) + value)
            elif name == "crawler_cache_entries" and cache in (*CACHES, "content"):
                setattr(sample, f"{cache}_entries", value)
    return True


def crawl(args: argparse.Namespace, out: Path) -> tuple[list[Sample], dict]:
    """Run the web and the cluster, sample until every node has exited; (samples, run facts)."""
    web_args = ["--hosts", str(args.hosts), "--pages", str(args.pages), "--no-bad-host", "--no-slow-host",
                "--no-nxdomain-links"]
    samples: list[Sample] = []
    csv_file = (out / "samples.csv").open("w", newline="")          # as it goes: a cut run keeps its samples
    writer = csv.DictWriter(csv_file, fieldnames=[fl.name for fl in fields(Sample)])
    writer.writeheader()
    t_build = time.monotonic()
    with TestWebProcess(out / "web", web_args, ready_timeout_s=WEB_READY_S) as web:
        build_s = time.monotonic() - t_build
        print(f"test web: {args.hosts} hosts, {args.pages} pages, ready in {build_s:.0f} s "
              f"(pid {web.info['pid']})", flush=True)
        config = cluster_config(out, web.info["seeds"], args.nodes, args.workers, "soak-bench", SECRET_ENV)
        config["store"] = {"warc": {"enabled": False}}
        for key, value in args.set:
            section, _, name = key.rpartition(".")
            target = config
            for part in section.split(".") if section else []:
                target = target.setdefault(part, {})
            target[name] = yaml.safe_load(value)
        ports = [n["metrics_port"] for n in config["cluster"]["nodes"]]
        config_path = out / "crawl.yaml"
        config_path.write_text(yaml.safe_dump(config))
        t0 = time.monotonic()
        procs = {i: start_node(config_path, i, out, SECRET_ENV, "a-soak-bench-secret-of-some-length")
                 for i in range(args.nodes)}
        pids = {i: p.pid for i, p in procs.items()}
        pids[-1] = web.proc.pid if web.proc else 0
        deadline = t0 + args.limit_s
        next_at = t0
        last_report = t0
        try:
            while any(p.poll() is None for p in procs.values()) and time.monotonic() < deadline:
                time.sleep(max(0.0, next_at - time.monotonic()))
                next_at += args.sample_s
                now = time.monotonic() - t0
                for node, pid in pids.items():
                    if node >= 0 and procs[node].poll() is not None:
                        continue
                    figures = proc_figures(pid)
                    if figures is None:
                        continue
                    sample = Sample(t=round(now, 2), node=node, vmrss=figures[0], cpu_s=figures[1])
                    if node < 0 or read_metrics(sample, ports[node]):
                        samples.append(sample)
                        writer.writerow(asdict(sample))
                csv_file.flush()
                if time.monotonic() - last_report >= args.report_s:
                    last_report = time.monotonic()
                    live = [s for s in samples if s.t == round(now, 2) and s.node >= 0]
                    print(f"{now:7.0f} s: pages {sum(s.pages for s in live)}, RSS MiB "
                          + ", ".join(f"{s.vmrss >> 20}" for s in live)
                          + f", frontier {sum(s.frontier_urls for s in live)}", flush=True)
            for p in procs.values():
                if p.poll() is None:                    # --limit-s: stopped as an operator stops a node
                    p.terminate()
            codes = {i: p.wait(120) for i, p in procs.items()}
        finally:
            csv_file.close()
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
        wall_s = time.monotonic() - t0
        web_figures = [s for s in samples if s.node < 0]
    summaries = []
    for i in range(args.nodes):
        lines = (out / f"node-{i}.stdout").read_text().splitlines()
        summaries.append(json.loads(lines[-1]) if lines else {})
    facts = {"build_s": round(build_s, 1), "wall_s": round(wall_s, 1), "exit_codes": sorted(set(codes.values())),
             "fetches": sum(s.get("fetches", 0) for s in summaries),
             "web_cpu_s": round(web_figures[-1].cpu_s - web_figures[0].cpu_s, 1) if len(web_figures) > 1 else None}
    return samples, facts


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def analyse(samples: list[Sample], nodes: int) -> dict:
    """The figures of the module docstring, from the samples."""
    times = sorted({s.t for s in samples if s.node >= 0})
    by_t: dict[float, dict[int, Sample]] = {t: {} for t in times}
    for s in samples:
        if s.node >= 0:
            by_t[s.t][s.node] = s
    last_pages: dict[int, int] = {}                 # a node that has exited keeps its last count
    cluster_pages = []
    for t in times:
        for node, s in by_t[t].items():
            last_pages[node] = s.pages
        cluster_pages.append(sum(last_pages.values()))
    total = cluster_pages[-1]
    t20 = next(t for t, p in zip(times, cluster_pages) if p >= START_PCT * total)
    t95 = next(t for t, p in zip(times, cluster_pages) if p >= END_PCT * total)
    per_node = {}
    for node in range(nodes):
        mine = [s for s in samples if s.node == node]
        rss_20 = next(s.vmrss for s in mine if s.t >= t20)
        rss_100 = max(s.vmrss for s in mine if s.t >= t95)
        per_node[node] = {"rss_20_mib": round(rss_20 / 2**20, 1), "rss_100_mib": round(rss_100 / 2**20, 1),
                          "growth": round(rss_100 / rss_20 - 1, 4),
                          "rss_peak_mib": round(max(s.vmrss for s in mine) / 2**20, 1),
                          "peak_growth": round(max(s.vmrss for s in mine if s.t >= t20) / rss_20 - 1, 4),
                          # The frontier keeps up to frontier.memory_urls URLs in RAM, and freed Python
                          # objects rarely go back to the system: its peak after 20% against before.
                          "frontier_peak_to_20": max(s.frontier_urls for s in mine if s.t <= t20),
                          "frontier_peak_after_20": max(s.frontier_urls for s in mine if s.t > t20),
                          "metric_vs_vmrss": round(statistics.median(abs(s.rss_metric - s.vmrss) / s.vmrss
                                                                     for s in mine if s.rss_metric), 4)}
    rates = [(t1, (p1 - p0) / (t1 - t0)) for (t0, p0), (t1, p1)
             in zip(zip(times, cluster_pages), zip(times[1:], cluster_pages[1:])) if t1 > t0]
    steady = [r for t, r in rates if t20 < t <= t95]
    third = max(1, len(steady) // 3)
    first, last = statistics.median(steady[:third]), statistics.median(steady[-third:])
    figures = {
        "pages": total, "t20_s": t20, "t95_s": t95, "end_s": times[-1], "per_node": per_node,
        "rss_goal_met": all(n["growth"] <= RSS_GOAL for n in per_node.values()),
        "pages_per_s_whole": round(total / times[-1], 1),
        "pages_per_s_steady": {"median": round(statistics.median(steady), 1), "p10": round(percentile(steady, 0.1), 1),
                               "p90": round(percentile(steady, 0.9), 1), "first_third": round(first, 1),
                               "last_third": round(last, 1), "last_over_first": round(last / first, 3)},
        "pages_per_s_by_tenth": tenths(times, cluster_pages),
    }
    figures["steady"] = figures["pages_per_s_steady"]["last_over_first"] >= STEADY_RATIO
    web = [s for s in samples if s.node < 0 and t20 < s.t <= t95]
    if len(web) > 1:
        figures["web_cpu_share"] = round((web[-1].cpu_s - web[0].cpu_s) / (web[-1].t - web[0].t), 3)
        figures["web_rss_mib"] = [round(web[0].vmrss / 2**20, 1), round(web[-1].vmrss / 2**20, 1)]
    node_cpu = []
    for node in range(nodes):
        mine = [s for s in samples if s.node == node and t20 < s.t <= t95]
        if len(mine) > 1:
            node_cpu.append(round((mine[-1].cpu_s - mine[0].cpu_s) / (mine[-1].t - mine[0].t), 3))
    figures["node_cpu_share"] = node_cpu
    return figures


def tenths(times: list[float], pages: list[int]) -> list[float]:
    """The cluster's pages/s over each tenth of the crawl's wall time."""
    end = times[-1]
    out = []
    for k in range(10):
        ia = max(bisect.bisect_right(times, end * k / 10) - 1, 0)
        ib = max(bisect.bisect_right(times, end * (k + 1) / 10) - 1, 0)
        out.append(round((pages[ib] - pages[ia]) / (times[ib] - times[ia]), 1) if ib > ia else 0.0)
    return out


def read_csv(path: Path) -> list[Sample]:
    types = {fl.name: (float if fl.type in ("float", float) else int) for fl in fields(Sample)}
    with path.open(newline="") as f:
        return [Sample(**{k: types[k](v) for k, v in row.items()}) for row in csv.DictReader(f)]


def plot(samples: list[Sample], nodes: int, figures: dict, path: Path) -> None:
    """Six panels against minutes since start: RSS, pages/s, frontier, DUE size, hit rates, cache entries."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(3, 2, figsize=(12, 11), sharex=True)
    ax_rss, ax_rate, ax_frontier, ax_due, ax_hits, ax_entries = axes.flat
    for node in range(nodes):
        mine = [s for s in samples if s.node == node]
        t = [s.t / 60 for s in mine]
        color = f"C{node}"
        ax_rss.plot(t, [s.vmrss / 2**20 for s in mine], color=color, label=f"node {node}")
        ax_rate.plot(t[1:], [(b.pages - a.pages) / (b.t - a.t) for a, b in zip(mine, mine[1:])], color=color,
                     lw=0.7, label=f"node {node}")
        ax_frontier.plot(t, [s.frontier_urls for s in mine], color=color, label=f"node {node}")
        ax_due.plot(t, [s.due_fingerprints for s in mine], color=color, label=f"node {node}")
        for cache, style in zip(CACHES, ("-", "--")):
            rates = []
            for a, b in zip(mine, mine[1:]):
                hits = getattr(b, f"{cache}_hits") - getattr(a, f"{cache}_hits")
                lookups = hits + getattr(b, f"{cache}_misses") - getattr(a, f"{cache}_misses")
                rates.append(hits / lookups if lookups else float("nan"))
            ax_hits.plot(t[1:], rates, style, color=color, lw=0.7, label=f"{cache} node {node}")
            ax_entries.plot(t, [getattr(s, f"{cache}_entries") for s in mine], style, color=color,
                            label=f"{cache} node {node}")
    web = [s for s in samples if s.node < 0]
    ax_web = ax_rss.twinx()          # the server is another order of size: its own axis
    ax_web.plot([s.t / 60 for s in web], [s.vmrss / 2**20 for s in web], ":", color="grey")
    ax_web.set_ylabel("web server MiB (grey, dotted)", color="grey")
    for ax in axes.flat:
        for key in ("t20_s", "t95_s"):
            ax.axvline(figures[key] / 60, color="black", lw=0.5, ls=":")
        ax.grid(alpha=0.3)
    growth = ", ".join(f"{100 * n['growth']:+.1f}%" for n in figures["per_node"].values())
    ax_rss.set(title=f"RSS (VmRSS), MiB; 20% -> 100%: {growth}", ylabel="MiB")
    ax_rate.set(title=f"pages/s per node (cluster median {figures['pages_per_s_steady']['median']:.0f} "
                      "between the dotted lines)", ylabel="pages/s")
    ax_frontier.set(title="frontier: queued URLs", ylabel="URLs")
    ax_due.set(title="DUE: fingerprints stored (disk + buffer)", ylabel="fingerprints")
    ax_hits.set(title="cache hit rate per interval", ylabel="hit rate", ylim=(0, 1))
    ax_entries.set(title="cache entries", ylabel="entries")
    for ax in axes[-1]:
        ax.set_xlabel("minutes since the nodes started (dotted: 20% and 95% of the pages)")
    for ax in axes.flat:
        ax.legend(fontsize=7)
    fig.suptitle(f"soak: {figures['pages']:,} pages on {figures['hosts']:,} hosts, {nodes} nodes, "
                 f"{figures['workers']} workers each")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. frontier.memory_urls=50000")
    return key, value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pages", type=int, default=1_000_000)
    p.add_argument("--hosts", type=int, default=20_000)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--workers", type=int, default=64, help="fetch workers per node")
    p.add_argument("--out", required=True, help="directory for the web, the nodes' data, samples.csv and soak.png")
    p.add_argument("--png", help="also write the plot here (e.g. docs/soak/soak.png)")
    p.add_argument("--sample-s", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--report-s", type=float, default=60.0, help="seconds between progress lines")
    p.add_argument("--limit-s", type=float, default=4 * 3600.0, help="stop the nodes after this long")
    p.add_argument("--set", action="append", default=[], type=setting, metavar="KEY=VALUE",
                   help="a config key for every node, e.g. frontier.memory_urls=50000 (repeatable)")
    p.add_argument("--replot", action="store_true",
                   help="no crawl: analyse and plot OUT/samples.csv and OUT/run.json of an earlier run again")
    add_kernels_option(p)
    args = p.parse_args(argv)
    check_kernels(args)
    out = Path(args.out)
    if args.replot:
        samples = read_csv(out / "samples.csv")
        facts = json.loads((out / "run.json").read_text())
    else:
        out.mkdir(parents=True, exist_ok=False)
        samples, facts = crawl(args, out)
        facts.update(pages_arg=args.pages, hosts=args.hosts, nodes=args.nodes, workers=args.workers,
                     sample_s=args.sample_s, settings=dict(args.set))
        (out / "run.json").write_text(json.dumps(facts))
    figures = {**facts, **analyse(samples, facts["nodes"])}
    plot(samples, facts["nodes"], figures, out / "soak.png")
    if args.png:
        Path(args.png).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / "soak.png", args.png)
    for node, n in figures["per_node"].items():
        print(f"node {node}: RSS {n['rss_20_mib']} MiB at 20% -> {n['rss_100_mib']} MiB at 95-100% "
              f"({100 * n['growth']:+.1f}%; goal <= {100 * RSS_GOAL:.0f}%), peak {n['rss_peak_mib']} MiB "
              f"({100 * n['peak_growth']:+.1f}% over the 20% figure); frontier peak {n['frontier_peak_to_20']} URLs "
              f"up to 20%, {n['frontier_peak_after_20']} after")
    st = figures["pages_per_s_steady"]
    print(f"pages/s 20-95%: median {st['median']} (p10 {st['p10']}, p90 {st['p90']}), last third / first third "
          f"{st['last_over_first']}; by tenth of wall time {figures['pages_per_s_by_tenth']}; "
          f"{figures['pages']} pages in {figures['wall_s']} s; web server CPU {figures.get('web_cpu_share')} "
          f"of a core, nodes {figures['node_cpu_share']}")
    print(json.dumps(figures))
    return 0 if facts["exit_codes"] == [0] else 1


if __name__ == "__main__":
    sys.exit(main())

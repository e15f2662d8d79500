"""The paper's section 5 on our own crawler: crawls with 20, 100 and 500 workers per node, replayed.

Broder, Najork & Wiener (2003) replayed the host-splitter streams of their
crawls and asked, without answering, whether one cache per node beats one
cache per crawling thread. This bench redoes that on the project's test web:

1. crawl: for each worker count, a fresh copy of the same test web (no
   slow, bad or trap hosts, no Crawl-delay hosts, so wall time is the
   crawl's) crawled to the end by a two-node cluster (`crawler cluster`,
   one process per node) with `splitter.log.enabled` on. The logs say which
   worker's page held each URL (stream log version 2).
2. replay: each crawl's logs through the paper's policies (CLOCK, CLOCK-SETS,
   LRU, RANDOM, STATIC, MIN, INFINITE), full and cross traces, sizes 2^0 up
   to a doubling past the largest stream's distinct count: once with one
   cache per node (`crawler replay ... --threads W`) and once with one cache
   per worker (`crawler replay ... --per-worker`, each worker's cache of
   SIZE entries). The `--main-workers` crawl is also replayed through
   today's policies (SIEVE, S3-FIFO, ARC, 2Q, W-TinyLFU; pure Python, so at
   every third power of two only) and MIN, one cache per node. The replays
   are the `crawler replay` command itself, run in this process; the bench
   prints each command line.
3. figures: the PNGs of docs/replay/experiments.md, and the tables quoted
   there, from the replays' results.csv files.

    python bench/paper_experiments_bench.py --out DIR [--workers 20,100,500] [--hosts 4000]
        [--web-pages 100000] [--phase all|crawl|replay|figures] [--png-dir docs/replay]

Phases can be run one by one on the same --out (a crawl is skipped when its
summary is there already). The last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import math
import sys
import time
from pathlib import Path

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

import yaml  # noqa: E402

from crawler.cache import PAPER_POLICIES  # noqa: E402
from crawler.cluster import run_cluster  # noqa: E402
from crawler.demo import SECRET_ENV, demo_config  # noqa: E402
from crawler.replay.cli import main as replay_main  # noqa: E402
from crawler.replay.traces import load_streams, per_worker_streams  # noqa: E402
from crawler.testweb.process import TestWebProcess  # noqa: E402

NODES = 2
DEFAULT_WORKERS = "20,100,500"
WEB_FLAGS = ["--no-slow-host", "--no-bad-host", "--no-trap", "--no-nxdomain-links", "--crawl-delay-hosts", "0"]
OVER_TIME_WINDOW = 20_000
NEWER_POLICIES = ("sieve", "s3fifo", "arc", "2q", "wtinylfu")
FIGURE_POLICIES = ("clock", "lru", "random", "static", "sieve", "s3fifo", "arc", "2q", "wtinylfu", "min",
                   "infinite")
DPI = 80
STYLE = {"clock": ("tab:blue", "o"), "clock-sets": ("tab:cyan", "P"), "lru": ("tab:orange", "s"),
         "random": ("tab:green", "^"), "static": ("tab:red", "v"), "min": ("black", "D"),
         "infinite": ("tab:gray", "x"), "sieve": ("tab:purple", "*"), "s3fifo": ("tab:brown", "<"),
         "arc": ("tab:pink", ">"), "2q": ("tab:olive", "h"), "wtinylfu": ("navy", "d")}


def crawl_config(seeds: str, data: Path, workers: int, delay_factor: float) -> dict:
    """The demo's cluster on loopback (splitter log on), without HTTPS hosts or WARC files."""
    config = demo_config(seeds, data, workers, NODES, ca_file="")
    config["cluster"]["name"] = "paper"
    config["fetch"] = {"dns": {"overrides": {"*.web.test": "127.0.0.1"}}}
    config["politeness"] = {"delay_factor": delay_factor}
    config["store"] = {"warc": {"enabled": False}}
    config["metrics"] = {"progress_interval_s": 0}
    return config


def crawl(out: Path, workers: int, args: argparse.Namespace) -> dict:
    """One crawl of a fresh web to its end; its summary (also kept as crawl-W/summary.json)."""
    work = out / f"crawl-{workers}"
    done = work / "summary.json"
    if done.exists():
        return json.loads(done.read_text())
    web_args = ["--hosts", str(args.hosts), "--pages", str(args.web_pages), "--seed-hosts", str(args.seed_hosts),
                *WEB_FLAGS]
    with TestWebProcess(work / "web", web_args) as web:
        config = crawl_config(web.info["seeds"], work / "data", workers, args.delay_factor)
        path = work / "crawl.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        lines = io.StringIO()
        started = time.perf_counter()
        code = asyncio.run(run_cluster(str(path), progress_interval_s=0, out=lines,
                                       extra_env={SECRET_ENV: "paper-bench-secret-0123456789"}))
        wall = time.perf_counter() - started
    if code:
        raise SystemExit(f"the crawl with {workers} workers failed (exit {code}); see {work}")
    cluster = json.loads(lines.getvalue().splitlines()[-1])
    summary = {"workers": workers, "nodes": NODES, "pages": cluster["pages"], "wall_s": round(wall, 1),
               "pages_per_s": round(cluster["pages"] / wall, 1), "web_args": web_args,
               "delay_factor": args.delay_factor}
    done.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def stream_counts(data: Path) -> dict:
    """Requests and distinct fingerprints of the crawl's streams: largest per node and per worker."""
    streams = load_streams([data])
    out: dict = {"requests": sum(len(s.fps) for s in streams)}
    out["node_distinct_max"] = max(len(set(s.fps.tolist())) for s in streams)
    parts = per_worker_streams(streams)
    out["workers_seen"] = len(parts)
    out["worker_distinct_max"] = max(len(set(p.fps.tolist())) for p in parts)
    return out


def size_range(distinct: int, step: int = 1) -> str:
    """Sizes 2^0 up to a doubling past `distinct`: every power (step 1) or every other (step 2)."""
    top = math.ceil(math.log2(max(distinct, 2))) + 1
    if step == 1:
        return f"2^0..2^{top}"
    return ",".join(f"2^{e}" for e in range(0, top + step, step))


def replay_commands(out: Path, workers: int, args: argparse.Namespace, newer: bool
                    ) -> list[tuple[str, list[str]]]:
    """The replays of one crawl: the paper's policies at every power of two, one cache per node
    and one per worker; with `newer`, also today's policies (pure Python, 14-70 times slower
    than the compiled ones) at every third power, one cache per node, MIN with them for the ratios."""
    data = out / f"crawl-{workers}" / "data"
    counts = stream_counts(data)
    (out / f"crawl-{workers}" / "streams.json").write_text(json.dumps(counts, indent=2) + "\n")
    common = [str(data), "--trace", "full,cross", "--no-plots", "--quiet", "--jobs", str(args.jobs)]
    node, worker = counts["node_distinct_max"], counts["worker_distinct_max"]
    runs = [
        ("global", [*common, "--policies", ",".join(PAPER_POLICIES), "--sizes", size_range(node),
                    "--threads", str(workers), "--over-time", str(OVER_TIME_WINDOW),
                    "--out", str(out / f"replay-{workers}-global")]),
        ("worker", [*common, "--policies", ",".join(PAPER_POLICIES), "--sizes", size_range(worker),
                    "--per-worker", "--out", str(out / f"replay-{workers}-worker")]),
    ]
    if newer:
        policies = ",".join((*NEWER_POLICIES, "min"))
        runs.append(("global-new", [*common, "--policies", policies, "--sizes", size_range(node, 3),
                                    "--threads", str(workers), "--out", str(out / f"replay-{workers}-global-new")]))
    return runs


def run_replays(out: Path, workers: int, args: argparse.Namespace, newer: bool) -> dict:
    times = {}
    for mode, argv in replay_commands(out, workers, args, newer):
        if (Path(argv[-1]) / "results.csv").exists():
            continue
        print("crawler replay " + " ".join(argv), flush=True)
        started = time.perf_counter()
        if replay_main(argv) != 0:
            raise SystemExit(f"replay {mode} of the {workers}-worker crawl failed")
        times[mode] = round(time.perf_counter() - started, 1)
    return times


# --- reading the results ---------------------------------------------------------

def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def replay_rows(out: Path, workers: int, mode: str) -> list[dict]:
    """results.csv of one crawl's replay ("global" or "worker"), with today's policies when run."""
    rows = read_rows(out / f"replay-{workers}-{mode}" / "results.csv")
    newer = out / f"replay-{workers}-{mode}-new" / "results.csv"
    if newer.exists():
        rows += [r for r in read_rows(newer) if r["policy"] != "min"]
    return rows


def series(rows: list[dict], trace: str, policy: str, x: str = "size") -> tuple[list[float], list[float]]:
    pts = [(float(r[x]), float(r["miss_rate"])) for r in rows
           if r["trace"] == trace and r["policy"] == policy and r["miss_rate"]]
    return [p[0] for p in pts], [p[1] for p in pts]


def rate_at(rows: list[dict], trace: str, policy: str, size: int) -> float | None:
    for r in rows:
        if r["trace"] == trace and r["policy"] == policy and int(r["size"]) == size and r["miss_rate"]:
            return float(r["miss_rate"])
    return None


def interpolate(xs: list[float], ys: list[float], x: float) -> float | None:
    """The miss rate at x entries, interpolated in log2(x); None outside the measured sizes."""
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x0 <= x <= x1:
            t = 0.0 if x1 == x0 else (math.log2(x) - math.log2(x0)) / (math.log2(x1) - math.log2(x0))
            return y0 + t * (y1 - y0)
    return None


def steepest(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(size at the start of the doubling over which the miss rate falls most, the fall)."""
    drops = [(ys[i] - ys[i + 1], xs[i]) for i in range(len(xs) - 1)]
    fall, at = max(drops)
    return at, fall


# --- figures -----------------------------------------------------------------------

def _axes(rows_n: int, cols: int, width: float = 10.0, height: float = 3.8):
    from matplotlib.figure import Figure  # imported here: only the figures need matplotlib

    fig = Figure(figsize=(width, height * rows_n), dpi=DPI)
    return fig, fig.subplots(rows_n, cols, squeeze=False)


def _save(fig, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def _log2(ax, label: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlabel(label)
    ax.grid(True, alpha=0.3)


def _policy_figure(rows: list[dict], column: str, ylabel: str, title: str, path: Path) -> Path:
    """One panel per trace, a line per policy of `column` against the node's cache size."""
    fig, axes = _axes(1, 2)
    for ax, trace in zip(axes[0], ("full", "cross")):
        for policy in FIGURE_POLICIES:
            if column == "relative_to_min" and policy in ("min", "infinite"):
                continue
            pts = [(float(r["size"]), float(r[column])) for r in rows
                   if r["trace"] == trace and r["policy"] == policy and r[column]]
            color, marker = STYLE[policy]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, marker=marker, markersize=3,
                    linewidth=1, label=policy.upper())
        if column == "relative_to_min":
            ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        _log2(ax, "cache size (entries, one cache per node)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{trace} trace, {title}", fontsize=10)
    axes[0][0].legend(fontsize=7, ncol=2)
    return _save(fig, path)


def figures(out: Path, worker_counts: list[int], png_dir: Path, main_w: int) -> list[Path]:
    png_dir.mkdir(parents=True, exist_ok=True)
    glob = {w: replay_rows(out, w, "global") for w in worker_counts}
    per = {w: replay_rows(out, w, "worker") for w in worker_counts}
    made = []
    # 1. Miss rate vs size, every policy, full and cross (Figures 2-7); 2. the same relative to MIN.
    made.append(_policy_figure(glob[main_w], "miss_rate", "miss rate", f"{main_w} workers per node",
                               png_dir / "experiments_miss_rate.png"))
    made.append(_policy_figure(glob[main_w], "relative_to_min", "miss rate / MIN's",
                               f"relative to MIN, {main_w} workers per node", png_dir / "experiments_relative.png"))
    # 3. The thread count: LRU against cache size and against entries per thread (Figures 6-9).
    fig, axes = _axes(2, 2)
    shades = dict(zip(worker_counts, ("tab:blue", "tab:orange", "tab:red", "tab:green")))
    for row, trace in enumerate(("full", "cross")):
        for w in worker_counts:
            xs, ys = series(glob[w], trace, "lru")
            axes[row][0].plot(xs, ys, color=shades[w], marker="o", markersize=3, label=f"{w} workers")
            axes[row][1].plot([x / w for x in xs], ys, color=shades[w], marker="o", markersize=3,
                              label=f"{w} workers, one cache per node")
            px, py = series(per[w], trace, "lru")
            axes[row][1].plot(px, py, color=shades[w], linestyle="--", linewidth=1,
                              label=f"{w} workers, one cache per worker")
        _log2(axes[row][0], "cache size (entries per node)")
        _log2(axes[row][1], "cache entries per worker")
        axes[row][0].set_ylabel(f"LRU miss rate, {trace}")
        axes[row][0].set_title(f"{trace}: against the node's cache size", fontsize=10)
        axes[row][1].set_title(f"{trace}: against entries per worker (same memory)", fontsize=10)
    axes[0][0].legend(fontsize=7)
    axes[0][1].legend(fontsize=6)
    made.append(_save(fig, png_dir / "experiments_threads.png"))
    # 4. Over time (Figures 10-11): LRU, CLOCK and MIN per window along the streams.
    over = read_rows(out / f"replay-{main_w}-global" / "over_time.csv")
    sizes = sorted({int(r["size"]) for r in over})
    picks = [s for s in sizes if s in (1 << 8, 1 << 11, 1 << 14)] or sizes[:3]
    fig, axes = _axes(1, len(picks), 11.0, 3.4)
    for ax, size in zip(axes[0], picks):
        for policy in ("clock", "lru", "random", "min", "infinite"):
            pts = [(int(r["first_request"]) / 1e3, float(r["miss_rate"])) for r in over
                   if r["trace"] == "full" and r["policy"] == policy and int(r["size"]) == size and r["miss_rate"]]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=STYLE[policy][0], linewidth=1,
                    label=policy.upper())
        ax.set_title(f"full trace, size 2^{int(math.log2(size))}, {main_w} workers", fontsize=10)
        ax.set_xlabel("thousands of requests into each node's stream", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("miss rate per window")
    axes[0][0].legend(fontsize=7)
    made.append(_save(fig, png_dir / "experiments_over_time.png"))
    return made


def tables(out: Path, worker_counts: list[int], main_w: int) -> dict:
    """The figures the doc quotes, as numbers."""
    glob = {w: replay_rows(out, w, "global") for w in worker_counts}
    per = {w: replay_rows(out, w, "worker") for w in worker_counts}
    report: dict = {"policies": {}, "threads": {}, "global_vs_worker": {}}
    for trace in ("full", "cross"):
        sizes = sorted({int(r["size"]) for r in glob[main_w] if r["trace"] == trace})
        picks = [s for s in sizes if math.log2(s) % 3 == 0]       # the sizes today's policies ran at
        report["policies"][trace] = {p: {s: rate_at(glob[main_w], trace, p, s) for s in picks}
                                     for p in FIGURE_POLICIES}
        for w in worker_counts:
            xs, ys = series(glob[w], trace, "lru")
            at, fall = steepest(xs, ys)
            px, py = series(per[w], trace, "lru")
            pat, pfall = steepest(px, py)
            report["threads"].setdefault(trace, {})[w] = {
                "steepest_global_size": at, "steepest_global_per_worker": at / w, "fall": round(fall, 4),
                "steepest_per_worker_size": pat, "fall_per_worker": round(pfall, 4)}
            compare = {}
            for e in (1, 4, 16, 64, 256, 1024):
                for policy in ("lru", "clock", "min"):
                    g = interpolate(*series(glob[w], trace, policy), e * w)
                    p = rate_at(per[w], trace, policy, e)
                    compare.setdefault(e, {})[policy] = (None if g is None else round(g, 4),
                                                         None if p is None else round(p, 4))
            report["global_vs_worker"].setdefault(trace, {})[w] = compare
    return report


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def markdown(out: Path, worker_counts: list[int], report: dict) -> str:
    """The tables of docs/replay/experiments.md, from the crawls' summaries and `tables`."""
    lines = ["| workers per node | pages | wall | pages/s | requests (full) | distinct, largest node | "
             "distinct, largest worker |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for w in worker_counts:
        crawl_summary = json.loads((out / f"crawl-{w}" / "summary.json").read_text())
        counts = json.loads((out / f"crawl-{w}" / "streams.json").read_text())
        lines.append(f"| {w} | {crawl_summary['pages']:,} | {crawl_summary['wall_s']:.0f} s | "
                     f"{crawl_summary['pages_per_s']:.0f} | {counts['requests']:,} | "
                     f"{counts['node_distinct_max']:,} | {counts['worker_distinct_max']:,} |")
    for trace, table in report["policies"].items():
        sizes = sorted({s for row in table.values() for s in row})
        lines += ["", f"{trace} trace, miss rate in percent:", "",
                  "| policy | " + " | ".join(f"2^{int(math.log2(s))}" for s in sizes) + " |",
                  "|---|" + "---:|" * len(sizes)]
        for policy, row in table.items():
            lines.append(f"| {policy} | " + " | ".join(_pct(row.get(s)) for s in sizes) + " |")
    for trace, by_w in report["threads"].items():
        lines += ["", f"{trace} trace, LRU's steepest doubling:", "",
                  "| workers | one cache per node: from size | per worker | fall (points) | "
                  "one cache per worker: from size | fall (points) |", "|---:|---:|---:|---:|---:|---:|"]
        for w, t in by_w.items():
            lines.append(f"| {w} | 2^{int(math.log2(t['steepest_global_size']))} | "
                         f"{t['steepest_global_per_worker']:.3g} | {100 * t['fall']:.1f} | "
                         f"2^{int(math.log2(t['steepest_per_worker_size']))} | {100 * t['fall_per_worker']:.1f} |")
    for trace, by_w in report["global_vs_worker"].items():
        lines += ["", f"{trace} trace, miss rate in percent at equal memory, one cache per node (of E x W "
                  "entries) / one cache per worker (of E entries each):", "",
                  "| workers | policy | " + " | ".join(f"E = {e}" for e in next(iter(by_w.values()))) + " |",
                  "|---:|---|" + "---:|" * len(next(iter(by_w.values())))]
        for w, by_e in by_w.items():
            for policy in ("lru", "clock", "min"):
                cells = [f"{_pct(g)} / {_pct(p)}" for g, p in (by_e[e][policy] for e in by_e)]
                lines.append(f"| {w} | {policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="directory for the crawls and replays")
    p.add_argument("--workers", default=DEFAULT_WORKERS, help=f"workers per node, comma list ({DEFAULT_WORKERS})")
    p.add_argument("--hosts", type=int, default=4000)
    p.add_argument("--web-pages", type=int, default=100_000)
    p.add_argument("--seed-hosts", type=int, default=50)
    p.add_argument("--delay-factor", type=float, default=10.0, help="politeness.delay_factor (default 10)")
    p.add_argument("--jobs", type=int, default=2, help="replay worker processes")
    p.add_argument("--main-workers", type=int, default=20,
                   help="the crawl whose replay has today's policies too and is drawn per policy (default 20: the "
                        "pure-Python policies are the costliest part, and every crawl is as long)")
    p.add_argument("--newer-everywhere", action="store_true",
                   help="today's policies on every crawl, not only the middle worker count's")
    p.add_argument("--phase", choices=("all", "crawl", "replay", "figures"), default="all")
    p.add_argument("--png-dir", type=Path, default=Path("docs/replay"))
    benchkit.add_kernels_option(p)
    args = p.parse_args(argv)
    benchkit.check_kernels(args)
    worker_counts = [int(w) for w in args.workers.split(",")]
    main_w = args.main_workers
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"crawls": {}, "replay_s": {}}
    if args.phase in ("all", "crawl"):
        for w in worker_counts:
            result["crawls"][w] = crawl(args.out, w, args)
            print(json.dumps(result["crawls"][w]), flush=True)
    if args.phase in ("all", "replay"):
        for w in worker_counts:
            result["replay_s"][w] = run_replays(args.out, w, args, args.newer_everywhere or w == main_w)
    if args.phase in ("all", "figures"):
        result["figures"] = [str(p) for p in figures(args.out, worker_counts, args.png_dir, main_w)]
        report = tables(args.out, worker_counts, main_w)
        (args.out / "tables.json").write_text(json.dumps(report, indent=1) + "\n")
        (args.out / "tables.md").write_text(markdown(args.out, worker_counts, report))
        result["tables"] = str(args.out / "tables.json")
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

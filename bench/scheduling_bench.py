"""Scheduling benchmark: which host policy fetches the most page quality in a fixed time.

Cao, Jiang & Singh schedule a crawl at two levels, hosts and URLs within a
host, and compare host policies by three curves over time: pages fetched,
quality sum fetched, and quality fetched per second. This bench reproduces
that experiment on the synthetic test web (crawler/testweb):

1. a web too big to finish in `--seconds` (several hundred hosts), some
   hosts slow servers (`--slow-share` of them delay every response by
   `--slow-latency-s MIN MAX`), the rest fast (`--fast-latency-s`);
2. a page quality oracle (crawler/testweb/quality.py): Zipf quality
   rank ** -s over a seeded permutation of the pages, written by the test web
   for the port it bound, in the format `frontier.quality_file` reads;
3. for each host policy in `--policies` (bfs, performance, quality,
   capability): a fresh test web process (same params, so the same web) and
   a fresh `crawler run` with `crawl.max_duration_s = --seconds`, the same
   seeds, politeness at its defaults (delay_factor 10), loopback only;
4. from the server's access log (request start times, robots.txt excluded)
   and the oracle: pages(t), quality(t), and quality per second (quality of
   the last `--window-s` seconds / window) for t from the first request to
   `--seconds` after it.

Prints a table (medians over `--rounds`; ratios against bfs), writes three
PNG plots (one line per policy) and results.json to `--out`, and prints a
final JSON line.

    python bench/scheduling_bench.py [--seconds 60] [--hosts 400] [--pages 40000] [--workers 64]
        [--policies bfs,performance,quality,capability] [--rounds 1] [--out DIR]

`--url-policy auto` (default) uses URL policy `quality` under the host
policies that use quality (quality, capability) and `fifo` under the others.
`--no-frontier-keys` leaves the `frontier.*` scheduling keys out of the
config (a frontier without them runs breadth-first), so the machinery can
be tested before the scheduling frontier exists; it allows only `bfs`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from crawler.testweb.audit import ROBOTS_PATH, Request, overlaps, read_access_log  # noqa: E402
from crawler.testweb.manifest import WebManifest  # noqa: E402
from crawler.testweb.process import TestWebProcess  # noqa: E402
from crawler.testweb.quality import read_oracle  # noqa: E402
from crawler.urls import canonicalize  # noqa: E402

HOST_POLICIES = ("bfs", "performance", "quality", "capability")
QUALITY_HOST_POLICIES = frozenset({"quality", "capability"})
"""Host policies that rank by quality; `--url-policy auto` orders their URLs by quality too."""
URL_POLICIES = ("fifo", "quality")
QUALITY_SOURCES = ("oracle", "inlinks")
CRAWL_GRACE_S = 120.0
"""Time a `crawler run` may take beyond --seconds (start-up, shutdown) before it is killed."""
STEP_S = 1.0
"""Resolution of the curves."""
DOMAIN = "web.test"


@dataclass
class Curves:
    """One crawl's three metrics on a common time grid (seconds since its first request)."""

    t_s: list[float]
    pages: list[int]
    """Page requests (robots.txt excluded) started by t."""
    quality: list[float]
    """Oracle quality of the distinct URLs requested by t."""
    quality_per_s: list[float]
    """Quality of the requests started in (t - window, t], divided by the window."""


@dataclass
class Run:
    """One policy's crawl and what the server saw of it."""

    policy: str
    url_policy: str
    round: int
    pages: int
    quality: float
    quality_per_s: float
    quality_share: float
    """Quality fetched / quality of the whole crawl (every oracle page)."""
    slow_share: float
    """Share of the page requests that went to slow hosts."""
    hosts: int
    """Hosts that answered at least one page request."""
    overlaps: int
    """Pairs of requests to one host in flight at once (must be 0: politeness)."""
    stop: str
    """Why the crawler stopped (`max_duration` expected; `done` = the web was too small)."""
    crawl_exit: int
    curves: Curves = field(repr=False)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="crawl time per policy (crawl.max_duration_s)")
    p.add_argument("--hosts", type=int, default=400, help="ordinary hosts of the web")
    p.add_argument("--pages", type=int, default=40000, help="HTML pages of the web")
    p.add_argument("--workers", type=int, default=64, help="crawler workers")
    p.add_argument("--policies", default=",".join(HOST_POLICIES), help="comma-separated host policies")
    p.add_argument("--url-policy", default="auto", choices=("auto", *URL_POLICIES),
                   help="URL policy within a host; auto = quality under quality/capability, else fifo")
    p.add_argument("--quality", default="oracle", choices=QUALITY_SOURCES,
                   help="frontier.quality: what the crawler's scheduler is told (the metrics always use the oracle)")
    p.add_argument("--rounds", type=int, default=1, help="repeat every policy this often; medians are reported")
    p.add_argument("--out", default=None, help="directory for plots, results.json and run files (default: a temp dir)")
    p.add_argument("--seed", type=int, default=1, help="seed of the web (and of the quality permutation)")
    p.add_argument("--slow-share", type=float, default=0.3, help="share of hosts that are slow servers")
    p.add_argument("--slow-latency-s", type=float, nargs=2, default=(0.2, 1.0), metavar=("MIN", "MAX"),
                   help="response delay range of slow hosts")
    p.add_argument("--fast-latency-s", type=float, nargs=2, default=(0.0, 0.0), metavar=("MIN", "MAX"),
                   help="response delay range of the other hosts")
    p.add_argument("--zipf-s", type=float, default=1.0, help="quality = rank ** -s")
    p.add_argument("--window-s", type=float, default=5.0, help="window of the quality-per-second curve")
    p.add_argument("--no-frontier-keys", action="store_true",
                   help="omit frontier.host_policy/url_policy/quality/quality_file (only with --policies bfs)")
    p.add_argument("--crawler-path", default=str(REPO), metavar="DIR",
                   help="directory holding the `crawler` package to run (default: this checkout), e.g. an "
                        "exported older version to compare against")
    p.add_argument("--keep-data", action="store_true", help="keep each crawl's data dir (default: removed)")
    benchkit.add_kernels_option(p)
    args = p.parse_args(argv)
    benchkit.check_kernels(args)
    args.policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    bad = [x for x in args.policies if x not in HOST_POLICIES]
    if bad or not args.policies:
        p.error(f"--policies: unknown {bad}; choose from {','.join(HOST_POLICIES)}")
    if args.no_frontier_keys and args.policies != ["bfs"]:
        p.error("--no-frontier-keys runs the frontier's default order, which is bfs: use it with --policies bfs")
    if args.fast_latency_s[1] >= args.slow_latency_s[0] and args.slow_share:
        p.error("--fast-latency-s must stay below --slow-latency-s (slow hosts are told apart by their latency)")
    if args.seconds <= 0 or args.rounds < 1 or args.window_s <= 0:
        p.error("--seconds and --window-s must be > 0, --rounds >= 1")
    return args


def web_args(a: argparse.Namespace) -> list[str]:
    """`crawler testweb` flags: ordinary hosts only (no hostile hosts), latencies, the oracle."""
    return ["--hosts", str(a.hosts), "--pages", str(a.pages), "--seed", str(a.seed), "--domain", DOMAIN,
            "--no-slow-host", "--no-bad-host", "--no-trap", "--no-nxdomain-links",
            "--host-latency-share", str(a.slow_share),
            "--host-slow-latency-min-s", str(a.slow_latency_s[0]),
            "--host-slow-latency-max-s", str(a.slow_latency_s[1]),
            "--host-fast-latency-min-s", str(a.fast_latency_s[0]),
            "--host-fast-latency-max-s", str(a.fast_latency_s[1]),
            "--quality-exponent", str(a.zipf_s)]


def url_policy_for(policy: str, a: argparse.Namespace) -> str:
    if a.url_policy != "auto":
        return a.url_policy
    return "quality" if policy in QUALITY_HOST_POLICIES else "fifo"


def crawl_config(info: dict, data_dir: Path, policy: str, url_policy: str, a: argparse.Namespace) -> dict:
    """One node, WARC off, politeness at its defaults, every *.web.test name on loopback."""
    config = {
        "cluster": {"nodes": [{"id": 0, "peer_port": 0, "metrics_port": 0}]},
        "crawl": {"seeds_file": info["seeds"], "data_dir": str(data_dir), "max_duration_s": a.seconds},
        "workers": a.workers,
        "fetch": {"dns": {"overrides": {f"*.{DOMAIN}": "127.0.0.1"}}},
        "store": {"warc": {"enabled": False}},
        "metrics": {"progress_interval_s": 0},
    }
    if not a.no_frontier_keys:
        frontier = {"host_policy": policy, "url_policy": url_policy, "quality": a.quality}
        if a.quality == "oracle":
            frontier["quality_file"] = info["quality"]
        config["frontier"] = frontier
    return config


def run_crawler(config_path: Path, timeout_s: float, run_dir: Path, crawler_path: str) -> tuple[int, dict]:
    """`python -m crawler run -c CONFIG` from `crawler_path`; (exit code, its summary line or {})."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (crawler_path, env.get("PYTHONPATH", "")) if p)
    with open(run_dir / "crawler.stderr.log", "wb") as err:
        proc = subprocess.run([sys.executable, "-m", "crawler", "run", "-c", str(config_path),
                               "--progress-interval", "0"],
                              stdout=subprocess.PIPE, stderr=err, env=env, timeout=timeout_s, cwd=crawler_path)
    lines = proc.stdout.decode(errors="replace").splitlines()
    (run_dir / "crawler.stdout.log").write_text("\n".join(lines) + "\n")
    try:
        return proc.returncode, json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        return proc.returncode, {}


def curves(requests: list[Request], oracle: dict[str, float], port: int, seconds: float,
           window_s: float) -> tuple[Curves, np.ndarray, list[Request]]:
    """The three metrics from the server's log: (curves, quality of each counted request, those requests)."""
    if not requests:
        grid = np.arange(0.0, seconds + STEP_S / 2, STEP_S)
        zeros = [0.0] * grid.size
        return Curves(grid.tolist(), [0] * grid.size, zeros, zeros), np.zeros(0), []
    t0 = min(r.start for r in requests)
    pages = sorted((r for r in requests if r.path != ROBOTS_PATH and r.start - t0 <= seconds), key=lambda r: r.start)
    seen: set[str] = set()
    q = np.zeros(len(pages))
    for i, r in enumerate(pages):
        url = canonicalize(f"http://{r.host}:{port}{r.path}") or ""
        if url not in seen:  # a repeated request collects no quality twice
            seen.add(url)
            q[i] = oracle.get(url, 0.0)
    t = np.array([r.start - t0 for r in pages])
    grid = np.arange(0.0, seconds + STEP_S / 2, STEP_S)
    n_by = np.searchsorted(t, grid, side="right")
    cum_q = np.concatenate([[0.0], np.cumsum(q)])
    q_by = cum_q[n_by]
    q_before = cum_q[np.searchsorted(t, grid - window_s, side="right")]
    width = np.minimum(grid, window_s)
    rate = np.where(width > 0, (q_by - q_before) / np.maximum(width, 1e-9), 0.0)
    return Curves(grid.tolist(), n_by.tolist(), q_by.tolist(), rate.tolist()), q, pages


def run_policy(policy: str, rnd: int, a: argparse.Namespace, out: Path) -> Run:
    run_dir = out / f"round{rnd + 1}-{policy}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    url_policy = url_policy_for(policy, a)
    with TestWebProcess(run_dir / "web", web_args(a)) as web:
        config_path = run_dir / "crawl.yaml"
        config_path.write_text(yaml.safe_dump(crawl_config(web.info, run_dir / "data", policy, url_policy, a),
                                              sort_keys=False))
        code, summary = run_crawler(config_path, a.seconds + CRAWL_GRACE_S, run_dir, a.crawler_path)
    if not a.keep_data:
        shutil.rmtree(run_dir / "data", ignore_errors=True)
    manifest = WebManifest.load(web.info["manifest"])
    oracle = read_oracle(web.info["quality"])
    requests = read_access_log(web.info["access_log"])
    c, q, pages = curves(requests, oracle, web.info["port"], a.seconds, a.window_s)
    slow = slow_hosts(manifest, a)
    total = sum(oracle.values())
    slow_reqs = sum(1 for r in pages if r.host in slow)
    return Run(
        policy=policy, url_policy=url_policy, round=rnd + 1, pages=len(pages), quality=float(q.sum()),
        quality_per_s=float(q.sum()) / a.seconds, quality_share=float(q.sum()) / total if total else 0.0,
        slow_share=slow_reqs / len(pages) if pages else 0.0, hosts=len({r.host for r in pages}),
        overlaps=len(overlaps(requests)), stop=str(summary.get("stop", "?")), crawl_exit=code, curves=c,
    )


def slow_hosts(manifest: WebManifest, a: argparse.Namespace) -> set[str]:
    """Hosts with a latency in the slow range (the ranges must not overlap: checked by parse_args)."""
    if not a.slow_share:
        return set()
    return {h for h, v in manifest.host_latency_s.items() if v >= a.slow_latency_s[0]}


def describe_web(a: argparse.Namespace, out: Path) -> dict:
    """Start the web once to print what it is (hosts, latencies, oracle) before the crawls."""
    with TestWebProcess(out / "web-info", web_args(a)) as web:
        manifest = WebManifest.load(web.info["manifest"])
        oracle = read_oracle(web.info["quality"])
    slow = [manifest.host_latency_s[h] for h in slow_hosts(manifest, a)]
    info = {
        "hosts": a.hosts, "pages": a.pages, "expected_fetches": len(manifest.fetched),
        "oracle_pages": len(oracle), "oracle_total": round(sum(oracle.values()), 4),
        "slow_hosts": len(slow), "slow_latency_s": [round(min(slow), 3), round(max(slow), 3)] if slow else None,
        "crawl_delay_hosts": len(manifest.crawl_delay_s), "zipf_s": a.zipf_s, "seed": a.seed,
    }
    shutil.rmtree(out / "web-info", ignore_errors=True)
    return info


def median_curves(runs: list[Run]) -> Curves:
    """Pointwise median over rounds."""
    def med(name: str) -> list[float]:
        return np.median(np.array([getattr(r.curves, name) for r in runs], dtype=np.float64), axis=0).tolist()
    return Curves(runs[0].curves.t_s, med("pages"), med("quality"), med("quality_per_s"))


def plot(curves_by_policy: dict[str, Curves], out: Path, window_s: float) -> list[str]:
    """pages.png, quality.png, quality_per_s.png (one line per policy); [] without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots", file=sys.stderr)
        return []
    written = []
    for name, ylabel, title in (
        ("pages", "pages fetched", "Pages over time"),
        ("quality", "quality sum", "Quality sum over time"),
        ("quality_per_s", f"quality per second ({window_s:g} s window)", "Quality per second"),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for policy, c in curves_by_policy.items():
            ax.plot(c.t_s, getattr(c, name), label=policy)
        ax.set_xlabel("seconds since the first request")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    return written


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    out = Path(a.out).resolve() if a.out else Path(tempfile.mkdtemp(prefix="sched-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    web = describe_web(a, out)
    print(f"web: {web['hosts']} hosts, {web['pages']} pages ({web['expected_fetches']} fetches to finish), "
          f"{web['slow_hosts']} slow hosts {web['slow_latency_s']} s, {web['crawl_delay_hosts']} with Crawl-delay; "
          f"oracle: {web['oracle_pages']} pages, quality total {web['oracle_total']} (s = {a.zipf_s:g})", flush=True)
    runs: dict[str, list[Run]] = {p: [] for p in a.policies}
    for rnd in range(a.rounds):
        order = a.policies[rnd % len(a.policies):] + a.policies[: rnd % len(a.policies)]  # rotate: no order bias
        for policy in order:
            r = run_policy(policy, rnd, a, out)
            runs[policy].append(r)
            print(f"round {rnd + 1} {policy:12s} url={r.url_policy:7s} pages {r.pages:6d}  quality {r.quality:9.3f}  "
                  f"{r.quality_per_s:7.4f}/s  share {r.quality_share:6.2%}  slow {r.slow_share:5.1%}  "
                  f"hosts {r.hosts:4d}  overlaps {r.overlaps}  stop {r.stop}  exit {r.crawl_exit}", flush=True)
            if r.crawl_exit != 0:
                logs = out / f"round{rnd + 1}-{policy}"
                print(f"  warning: crawler exited {r.crawl_exit}: see {logs}/crawler.stderr.log", file=sys.stderr)
            if r.stop == "done":
                print(f"  warning: the {policy} crawl finished the web before {a.seconds:g} s: use more --pages",
                      file=sys.stderr)
    med = {p: {m: statistics.median(getattr(r, m) for r in rs)
               for m in ("pages", "quality", "quality_per_s", "quality_share", "slow_share", "hosts")}
           for p, rs in runs.items()}
    base = med.get("bfs")

    def ratio(p: str, m: str) -> float | None:
        if base is None or not base[m]:
            return None
        return med[p][m] / base[m]

    print(f"\nmedians over {a.rounds} round(s), {a.seconds:g} s each, {a.workers} workers:")
    print(f"{'policy':12s} {'pages':>8s} {'quality':>10s} {'quality/s':>10s} {'share':>7s} "
          f"{'pages/bfs':>10s} {'quality/bfs':>12s} {'q/s / bfs':>10s}")
    for p, m in med.items():
        rs = [ratio(p, k) for k in ("pages", "quality", "quality_per_s")]
        cells = " ".join(f"{x:>{w}.3f}" if x is not None else f"{'-':>{w}s}" for x, w in zip(rs, (10, 12, 10)))
        print(f"{p:12s} {m['pages']:8.0f} {m['quality']:10.3f} {m['quality_per_s']:10.4f} "
              f"{m['quality_share']:7.2%} {cells}")
    curves_by_policy = {p: median_curves(rs) for p, rs in runs.items()}
    plots = plot(curves_by_policy, out, a.window_s)
    result = {
        "seconds": a.seconds, "workers": a.workers, "rounds": a.rounds, "web": web, "quality_source": a.quality,
        "medians": {p: {k: round(v, 4) for k, v in m.items()} for p, m in med.items()},
        "ratios_vs_bfs": {p: {k: (round(x, 4) if (x := ratio(p, k)) is not None else None)
                              for k in ("pages", "quality", "quality_per_s")} for p in med},
        "url_policy": {p: rs[0].url_policy for p, rs in runs.items()},
        "overlaps": sum(r.overlaps for rs in runs.values() for r in rs),
        "out": str(out), "plots": plots, "wall_s": round(time.perf_counter() - started, 1),
    }
    (out / "results.json").write_text(json.dumps({
        **result, "runs": [{k: v for k, v in asdict(r).items() if k != "curves"} for rs in runs.values() for r in rs],
        "curves": {p: asdict(c) for p, c in curves_by_policy.items()},
    }, indent=1))
    print(f"plots and results.json in {out}")
    print(json.dumps(result))
    return 0 if result["overlaps"] == 0 and all(r.crawl_exit == 0 for rs in runs.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())

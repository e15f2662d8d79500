"""CPU per request: the crawler against GNU wget on the same real sites, in the same script.

The sites, nginx, the per-run CA and both runners are tests/integration/realsites.py's:
six documentation sites from Debian packages over HTTPS, http:// answering 301.
Each tool runs as a child process and is measured by its own rusage (user + sys,
threads and children included; `wait4`), its requests are counted from nginx's
access log by user agent, and its peak RSS is the child's ru_maxrss. nginx's CPU
is nobody's. Variants, run interleaved, the order rotated each round:

- `wget`: `wget -r -l inf -p`, robots on (the reference);
- `wget-warc`: the same writing a WARC file (`--warc-file`, gzip per record), since
  the crawler writes a gzip WARC record per page with warcio;
- `crawler`: `python -m crawler run`, one node, at the defaults;
- `crawler-k0`: the same at `politeness.delay_factor: 0`. At the defaults a host waits
  10x its last fetch time between requests, so on loopback the crawler spends most
  of its wall time idle, and an idle event loop still pays per wake-up (timers,
  the frontier's polls, progress and metrics): k = 0 shows the CPU of the work
  itself, the defaults what an operator pays. The Crawl-delay site keeps its 1 s;
- `crawler-k0-nowarc` (on request): k = 0 without the WARC, to price the WARC alone.

Scopes: `all` crawls every site in one run, from the same seeds as the test (the
three bad-certificate hosts included); with --per-site (default) each site is also
crawled alone. A crawler run includes the interpreter's start and imports, which
weigh on the small sites; the crawler's own summary (`cpu_s`, measured inside the
run) is printed beside it.

--profile runs the crawler once more over `all` under py-spy when it is installed
(`pip install py-spy`: samples every thread, the parse threads and the DUE's merge
thread included) or else cProfile (the main thread only), and prints the top
functions by cumulative and by own time.

    python bench/realsite_bench.py [--rounds 3] [--sites requests,git] [--no-per-site]
                                   [--variants wget,crawler] [--profile [--profiler py-spy|cprofile]]
                                   [--keep DIR]

The last line is JSON: per scope and variant, the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from tests.integration import realsites as rs  # noqa: E402

NO_DELAY = {"politeness": {"delay_factor": 0}}
CRAWLER_OVERRIDES: dict[str, dict | None] = {
    "crawler": None,
    "crawler-k0": NO_DELAY,
    "crawler-k0-nowarc": {**NO_DELAY, "store": {"warc": {"enabled": False}}},
    "crawler-nowarc": {"store": {"warc": {"enabled": False}}},
}
WGET_POLITE_WAIT_S = 0.02
"""wget-polite's --wait: about what the crawler's politeness (10 x a loopback fetch of ~2 ms) spaces its
requests to one host by, so both pay what an idle process pays to wake up per request."""
WGET_VARIANTS = {"wget": {}, "wget-warc": {"warc": True}, "wget-polite": {"wait_s": WGET_POLITE_WAIT_S},
                 "wget-warc-polite": {"warc": True, "wait_s": WGET_POLITE_WAIT_S}}
VARIANTS = (*WGET_VARIANTS, *CRAWLER_OVERRIDES)
DEFAULT_VARIANTS = ("wget", "wget-warc", "crawler", "crawler-k0")
RUN_TIMEOUT_S = 600.0
TOP_FUNCTIONS = 20
PY_SPY_RATE_HZ = 250
PY_SPY_PROCESS_FRAME = "process "
NO_PYTHON_FRAME = "(no Python frame)"
ALL = "all"
KIB_PER_MIB = 1024
MS_PER_S = 1000


@dataclass
class Sample:
    """One run of one variant over one scope."""

    variant: str
    scope: str
    round: int
    code: int
    requests: int
    cpu_s: float
    user_s: float
    sys_s: float
    wall_s: float
    max_rss_kib: int | None                  # None: no GNU time to measure it
    inner_cpu_s: float | None = None          # the crawler's own summary: CPU of the run, start-up excluded

    @property
    def cpu_ms_per_request(self) -> float:
        return MS_PER_S * self.cpu_s / self.requests if self.requests else float("nan")


def bytecode_env(cache_dir: Path) -> dict[str, str | None]:
    """The crawler's children keep compiled bytecode, under `cache_dir` (not the source tree), as an
    installed crawler does: with PYTHONDONTWRITEBYTECODE set (as on some CI and developer machines) each
    start would compile every module again, some 0.2-0.3 s of CPU that no deployed crawler pays."""
    return {"PYTHONDONTWRITEBYTECODE": None, "PYTHONPYCACHEPREFIX": str(cache_dir)}


def warm_bytecode(env: dict[str, str | None]) -> None:
    """Import the crawler once, unmeasured, so the runs find its bytecode (and their dependencies') cached."""
    full_env = {k: v for k, v in os.environ.items() if k not in env}
    full_env.update({k: v for k, v in env.items() if v is not None})
    full_env["PYTHONPATH"] = str(rs.REPO)
    subprocess.run([sys.executable, "-c", "import crawler.cli, crawler.node"], env=full_env, check=True,
                   timeout=RUN_TIMEOUT_S)


def measure(web: rs.RealWeb, variant: str, scope: str, round_no: int, seeds: Path, out_dir: Path,
            crawler_env: dict[str, str | None]) -> Sample:
    offset = web.log_offset()
    if variant.startswith("wget"):
        run = rs.run_wget(web, out_dir, timeout_s=RUN_TIMEOUT_S, seeds_file=seeds, tool=variant,
                          **WGET_VARIANTS[variant])
        requests = len(rs.by_wget(rs.read_log(web.access_log, offset)))
        inner = None
    else:
        run = rs.run_crawler(web, out_dir, overrides=CRAWLER_OVERRIDES[variant],
                             timeout_s=RUN_TIMEOUT_S, seeds_file=seeds, env=crawler_env)
        requests = len(rs.by_crawler(rs.read_log(web.access_log, offset)))
        inner = rs.summary(run).get("cpu_s")
        if run.code != 0 or run.timed_out:
            print(f"  {variant} {scope}: exit {run.code}{' (killed)' if run.timed_out else ''}:\n{run.tail(1500)}",
                  file=sys.stderr)
    sample = Sample(variant, scope, round_no, run.code, requests, run.cpu_s, run.user_s, run.sys_s, run.wall_s,
                    run.max_rss_kib, inner)
    print(f"  round {round_no} {scope:16s} {variant:17s} {requests:5d} req  cpu {run.cpu_s:6.3f} s "
          f"({sample.cpu_ms_per_request:6.3f} ms/req)  wall {run.wall_s:6.2f} s  rss {mib(run.max_rss_kib)} MiB"
          + (f"  inner cpu {inner:.3f} s" if inner is not None else ""), flush=True)
    return sample


def mib(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / KIB_PER_MIB:.1f}"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(samples: list[Sample], variants: list[str]) -> dict:
    """scope -> variant -> medians; plus the crawler/wget ratios of CPU per request."""
    groups: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        groups[s.scope][s.variant].append(s)
    out: dict = {}
    for scope, by_variant in groups.items():
        row = {}
        for variant in variants:
            runs = by_variant.get(variant, [])
            if not runs:
                continue
            inner = [s.inner_cpu_s for s in runs if s.inner_cpu_s is not None]
            rss = [s.max_rss_kib for s in runs if s.max_rss_kib is not None]
            row[variant] = {
                "runs": len(runs),
                "requests": median([s.requests for s in runs]),
                "cpu_s": round(median([s.cpu_s for s in runs]), 4),
                "cpu_ms_per_request": round(median([s.cpu_ms_per_request for s in runs]), 4),
                "wall_s": round(median([s.wall_s for s in runs]), 3),
                "max_rss_mib": round(median(rss) / KIB_PER_MIB, 1) if rss else None,
            }
            if inner:
                row[variant]["inner_cpu_s"] = round(median(inner), 4)
        ratios = {}
        for crawler in CRAWLER_OVERRIDES:
            for wget in WGET_VARIANTS:
                if crawler in row and wget in row and row[wget]["cpu_ms_per_request"]:
                    ratios[f"{crawler}/{wget}"] = round(row[crawler]["cpu_ms_per_request"]
                                                        / row[wget]["cpu_ms_per_request"], 2)
        out[scope] = {"variants": row, "ratios": ratios}
    return out


def print_table(table: dict) -> None:
    print("\nmedians per scope (CPU = user + sys of the child, requests from nginx's log)")
    print(f"{'scope':16s} {'variant':17s} {'req':>6s} {'cpu s':>8s} {'ms/req':>8s} {'wall s':>8s} {'RSS MiB':>8s} "
          f"{'inner cpu s':>11s}")
    for scope, entry in table.items():
        for variant, m in entry["variants"].items():
            inner = f"{m['inner_cpu_s']:11.3f}" if "inner_cpu_s" in m else f"{'':11s}"
            rss = "n/a" if m["max_rss_mib"] is None else f"{m['max_rss_mib']:.1f}"
            print(f"{scope:16s} {variant:17s} {m['requests']:6.0f} {m['cpu_s']:8.3f} {m['cpu_ms_per_request']:8.3f} "
                  f"{m['wall_s']:8.2f} {rss:>8s} {inner}")
        if entry["ratios"]:
            print(f"{'':16s} ratio of CPU per request: "
                  + ", ".join(f"{k} {v:.2f}x" for k, v in entry["ratios"].items()))


# --- profiling ---------------------------------------------------------------------------------------------------

PY_SPY_MODES = {
    "active": ([], "every thread, samples of threads py-spy sees idle left out (blocking file I/O and fsync "
                   "still count, so sample-seconds exceed CPU)"),
    "gil": (["--gil"], "only the thread holding the GIL (C code that releases it, zlib's deflate among it, is "
                       "not seen)"),
}


def profile(web: rs.RealWeb, out_dir: Path, profiler: str, overrides: dict | None,
            crawler_env: dict[str, str | None], py_spy_mode: str = "active", top: int = TOP_FUNCTIONS) -> None:
    """Crawl every site once more under a profiler and print the top functions."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if profiler == "py-spy":
        raw = out_dir / "py-spy.txt"
        extra, what = PY_SPY_MODES[py_spy_mode]
        # --nonblocking: the crawler is never paused to be sampled, so its timing stays its own.
        wrapper = [shutil.which("py-spy"), "record", "--format", "raw", "--nolineno", "--rate", str(PY_SPY_RATE_HZ),
                   "--nonblocking", "--subprocesses", *extra, "-o", str(raw), "--"]
        run = rs.run_crawler(web, out_dir, overrides=overrides, timeout_s=RUN_TIMEOUT_S, wrapper=wrapper,
                             env=crawler_env)
        print(f"\nprofile (py-spy at {PY_SPY_RATE_HZ} Hz, {what}): exit {run.code}, wall {run.wall_s:.1f} s, "
              f"cpu {run.cpu_s:.2f} s (py-spy's own included); raw stacks in {raw}")
        print_collapsed(raw, top)
    else:
        prof = out_dir / "crawler.prof"
        wrapper = [sys.executable, "-m", "cProfile", "-o", str(prof)]
        run = rs.run_crawler(web, out_dir, overrides=overrides, timeout_s=RUN_TIMEOUT_S, wrapper=wrapper,
                             env=crawler_env)
        print(f"\nprofile (cProfile, main thread only; a coroutine's time includes its awaits): exit {run.code}, "
              f"wall {run.wall_s:.1f} s, cpu {run.cpu_s:.2f} s")
        stats = pstats.Stats(str(prof))
        for key in ("cumulative", "tottime"):
            print(f"\ntop {top} by {key}")
            stats.sort_stats(key).print_stats(top)


def print_collapsed(raw: Path, top: int = TOP_FUNCTIONS) -> None:
    """Top functions of py-spy's collapsed stacks: own = the sample's innermost frame, cumulative = anywhere in it."""
    own: Counter = Counter()
    cumulative: Counter = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        if frames[0].startswith(PY_SPY_PROCESS_FRAME):      # --subprocesses roots each stack at its process
            frames = frames[1:]
        own[frames[-1] if frames else NO_PYTHON_FRAME] += n
        for frame in set(frames):
            cumulative[frame] += n
    if not total:
        print("no samples")
        return
    for title, counter in (("cumulative", cumulative), ("own", own)):
        print(f"\ntop {top} by {title} time ({total} samples = {total / PY_SPY_RATE_HZ:.2f} s)")
        for frame, n in counter.most_common(top):
            print(f"{100 * n / total:6.1f}% {n / PY_SPY_RATE_HZ:7.2f} s  {frame}")


# --- main --------------------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sites", default="", help="comma-separated site names (default: every installed one)")
    ap.add_argument("--per-site", action=argparse.BooleanOptionalAction, default=True,
                    help="also crawl each site alone (per-site figures)")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help=f"comma-separated, of {', '.join(VARIANTS)} (crawler-k0-nowarc: the WARC's share)")
    ap.add_argument("--profile", action="store_true", help="then crawl once more under a profiler")
    ap.add_argument("--profiler", choices=("auto", "py-spy", "cprofile"), default="auto")
    ap.add_argument("--profile-k0", action="store_true", help="profile at delay_factor 0 instead of the defaults")
    ap.add_argument("--profile-variant", choices=list(CRAWLER_OVERRIDES),
                    help="profile this crawler variant (default: crawler, or crawler-k0 with --profile-k0)")
    ap.add_argument("--py-spy-mode", choices=tuple(PY_SPY_MODES), default="active",
                    help="what py-spy samples: active threads, or the GIL holder only")
    ap.add_argument("--top", type=int, default=TOP_FUNCTIONS, help="functions listed per profile table")
    ap.add_argument("--keep", type=Path, default=None, help="keep every run's files under this directory")
    benchkit.add_kernels_option(ap)
    args = ap.parse_args()
    benchkit.check_kernels(args)

    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; choose from {', '.join(VARIANTS)}")
    sites, skipped = rs.find_sites((*rs.CATALOG, rs.HANDBOOK_ALL))
    for reason in skipped:
        print(reason, file=sys.stderr)
    if args.sites:
        wanted = set(args.sites.split(","))
        sites = [s for s in sites if s.name in wanted]
    else:
        sites = [s for s in sites if s is not rs.HANDBOOK_ALL]     # the big corpus only when named
    if not sites:
        print("no site to crawl", file=sys.stderr)
        return 2
    if shutil.which("wget") is None or rs.find_binary("nginx") is None:
        print("needs wget and nginx (Debian packages wget, nginx)", file=sys.stderr)
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="realsite-bench-", dir=args.keep))
    try:
        web = rs.build_web(tmp / "web", sites)
        scopes = {ALL: web.seeds_file}
        if args.per_site:
            for site in sites:
                scopes[site.name] = web.write_seeds(tmp / f"seeds-{site.name}.txt", [site.name])
        print(f"sites: {', '.join(f'{s.name} ({s.generator})' for s in sites)}; rounds {args.rounds}; "
              f"variants {', '.join(variants)}; files under {tmp}")
        crawler_env = bytecode_env(tmp / "pycache")
        warm_bytecode(crawler_env)
        samples: list[Sample] = []
        with web:
            for round_no in range(args.rounds):
                order = variants[round_no % len(variants):] + variants[:round_no % len(variants)]
                for scope, seeds in scopes.items():
                    for variant in order:
                        out_dir = tmp / f"r{round_no}" / scope / variant
                        samples.append(measure(web, variant, scope, round_no, seeds, out_dir, crawler_env))
                        if args.keep is None:
                            shutil.rmtree(out_dir, ignore_errors=True)
            table = summarize(samples, variants)
            print_table(table)
            if args.profile:
                profiler = args.profiler
                if profiler == "auto":
                    profiler = "py-spy" if shutil.which("py-spy") else "cprofile"
                chosen = args.profile_variant or ("crawler-k0" if args.profile_k0 else "crawler")
                profile(web, tmp / "profile", profiler, CRAWLER_OVERRIDES[chosen], crawler_env, args.py_spy_mode,
                        args.top)
        print(json.dumps({"table": table, "samples": [asdict(s) for s in samples]}, sort_keys=True))
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

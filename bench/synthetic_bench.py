"""The paper's critical region, and how it moves with the thread count, on traces of its model.

Broder, Najork & Wiener (2003, section 5.2) explain the steep drop of the
miss rate over a narrow range of cache sizes (the critical region) with a
model of the crawler's stream, and conjecture that the region moves to
larger caches in proportion to the number of crawling threads. This bench
writes a trace of that model (crawler.replay.synthetic, as `crawler synth`
does) for each thread count, replays it through LRU, CLOCK and MIN at sizes
2^0..2^16 (as `crawler replay` does), and prints per thread count:

  steepest   the doubling 2^i -> 2^(i+1) over which LRU's miss rate drops most,
             and the drop in percentage points
  critical   the centre of that doubling, 2^(i+0.5), and critical / threads
  fine       the same from LRU alone at sizes 2^(k/4) (one more stack-distance
             pass): the centre of the doubling 2^(k/4) -> 2^(k/4+1) that falls most
  midpoint   the size (log2-interpolated) at which LRU's miss rate falls below
             the midpoint of its largest and smallest, and midpoint / threads

then writes a PNG (miss rate against size, and against size per thread) and
one JSON line with every miss rate. Every thread count runs the same model
(the defaults of `crawler synth`) for REQUESTS_PER_THREAD requests per thread.

    python bench/synthetic_bench.py                         # threads 1,4,16,64
    python bench/synthetic_bench.py --threads 1,2,4,8 --png synthetic-small.png
    python bench/synthetic_bench.py --interleave random      # threads drawn per request
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from crawler.replay import ReplayOptions, load_streams, replay  # noqa: E402
from crawler.replay.synthetic import INTERLEAVES, ModelParams, write_log  # noqa: E402

THREADS = (1, 4, 16, 64)
SIZES = tuple(1 << e for e in range(17))          # 2^0 .. 2^16
FINE_SIZES = tuple(sorted({round(2 ** (k / 4)) for k in range(4 * 16 + 1)}))   # quarter doublings, for LRU
POLICIES = ("lru", "clock", "min")
REQUESTS_PER_THREAD = 40_000                      # 40 host runs of 1,000 links per thread with the defaults
MIN_REQUESTS = 200_000
SEED = 1
DEFAULT_PNG = "synthetic.png"


def steepest(rate: np.ndarray) -> tuple[int, float]:
    """(i, drop): the doubling SIZES[i] -> SIZES[i+1] with the largest fall of the miss rate."""
    drops = rate[:-1] - rate[1:]
    i = int(np.argmax(drops))
    return i, float(drops[i])


def steepest_fine(rate: np.ndarray) -> float:
    """The centre of the doubling 2^(k/4) -> 2^(k/4 + 1), k = 0..60, over which the miss rate falls most
    (sizes rounded to integers; `rate` is per FINE_SIZES)."""
    at = dict(zip(FINE_SIZES, rate.tolist()))
    drops = [at[round(2 ** (k / 4))] - at[round(2 ** (k / 4 + 1))] for k in range(4 * 15 + 1)]
    k = int(np.argmax(drops))
    return float(2 ** (k / 4 + 0.5))


def midpoint_log2(rate: np.ndarray) -> float:
    """log2 of the size at which the miss rate first falls below the midpoint of its extremes."""
    middle = (rate.max() + rate.min()) / 2
    i = int(np.argmax(rate < middle))
    if i == 0:
        return 0.0
    return math.log2(SIZES[i - 1]) + (rate[i - 1] - middle) / (rate[i - 1] - rate[i])


def run(threads: int, workdir: Path, jobs: int, interleave: str) -> dict:
    params = ModelParams(threads=threads, requests=max(MIN_REQUESTS, threads * REQUESTS_PER_THREAD), seed=SEED,
                         interleave=interleave)
    directory = workdir / f"threads-{threads}"
    started = time.perf_counter()
    write_log(params, directory)
    generated_s = time.perf_counter() - started
    streams = load_streams([directory])
    result = replay(streams, ReplayOptions(traces=("full",), policies=POLICIES, sizes=SIZES, jobs=jobs))
    requests = result.stats["full"].requests
    fine = replay(streams, ReplayOptions(traces=("full",), policies=("lru",), sizes=FINE_SIZES))
    fine_centre = steepest_fine(fine.tallies[("full", "lru")].misses / requests)
    rates = {p: (result.tallies[("full", p)].misses / requests).tolist() for p in POLICIES}
    lru = np.asarray(rates["lru"])
    i, drop = steepest(lru)
    mid = midpoint_log2(lru)
    return {"threads": threads, "requests": requests, "distinct": result.stats["full"].distinct,
            "generate_s": round(generated_s, 2), "replay_s": round(result.seconds, 2),
            "steepest": [SIZES[i], SIZES[i + 1]], "drop_points": round(100 * drop, 1),
            "critical": round(2 ** (i + 0.5), 1), "critical_per_thread": round(2 ** (i + 0.5) / threads, 1),
            "clock_steepest": [SIZES[steepest(np.asarray(rates["clock"]))[0]],
                               SIZES[steepest(np.asarray(rates["clock"]))[0] + 1]],
            "fine": round(fine_centre, 1), "fine_per_thread": round(fine_centre / threads, 1),
            "midpoint": round(2 ** mid, 1), "midpoint_per_thread": round(2 ** mid / threads, 1),
            "miss_rate": {p: [round(r, 4) for r in v] for p, v in rates.items()}}


def plot(rows: list[dict], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.4), dpi=100)
    axes = fig.subplots(1, 2)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:gray"]
    for row, color in zip(rows, colors * 3):
        sizes = np.asarray(SIZES, dtype=float)
        for ax, scale in ((axes[0], 1.0), (axes[1], float(row["threads"]))):
            ax.plot(sizes / scale, row["miss_rate"]["lru"], color=color, marker="o", markersize=3,
                    label=f"{row['threads']} threads, LRU")
            ax.plot(sizes / scale, row["miss_rate"]["clock"], color=color, linestyle="--", linewidth=1,
                    label=f"{row['threads']} threads, CLOCK")
            ax.plot(sizes / scale, row["miss_rate"]["min"], color=color, linestyle=":", linewidth=1,
                    label=f"{row['threads']} threads, MIN")
    for ax, label in ((axes[0], "cache size (entries)"), (axes[1], "cache entries per thread")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(label)
        ax.set_ylabel("miss rate")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    axes[0].set_title("The paper's model: miss rate against cache size", fontsize=10)
    axes[1].set_title("The same against entries per thread", fontsize=10)
    axes[1].legend(fontsize=6, ncol=2, loc="upper right")
    fig.tight_layout()
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default=",".join(map(str, THREADS)), help="thread counts, comma separated")
    parser.add_argument("--png", default=DEFAULT_PNG, help=f"the figure (default {DEFAULT_PNG})")
    parser.add_argument("--jobs", type=int, default=2, help="replay worker processes (default 2)")
    parser.add_argument("--interleave", choices=INTERLEAVES, default=INTERLEAVES[0],
                        help=f"how the threads' streams are interleaved (default {INTERLEAVES[0]})")
    args = parser.parse_args()
    counts = [int(t) for t in args.threads.split(",") if t.strip()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="synthetic-bench-") as tmp:
        for threads in counts:
            rows.append(run(threads, Path(tmp), args.jobs, args.interleave))
            row = rows[-1]
            print(f"threads {threads:>3}: {row['requests']:>9,} requests, {row['distinct']:>9,} distinct; LRU's "
                  f"steepest doubling {row['steepest'][0]}->{row['steepest'][1]} (-{row['drop_points']} points), "
                  f"critical {row['critical']:g} = {row['critical_per_thread']:g} per thread; fine "
                  f"{row['fine']:g} = {row['fine_per_thread']:g} per thread; midpoint "
                  f"{row['midpoint']:g} = {row['midpoint_per_thread']:g} per thread; CLOCK's steepest "
                  f"{row['clock_steepest'][0]}->{row['clock_steepest'][1]}; "
                  f"{row['generate_s']} s to write, {row['replay_s']} s to replay", flush=True)
    plot(rows, Path(args.png))
    print(f"figure: {args.png}", flush=True)
    params = ModelParams(seed=SEED, interleave=args.interleave).as_dict()
    print(json.dumps({"params": params | {"requests": "per row", "threads": "per row"},
                      "sizes": list(SIZES), "rows": rows}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

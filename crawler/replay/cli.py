"""`crawler replay INPUT...`: simulate cache policies over logged splitter streams.

Wired into the `crawler` command as `crawler replay` (crawler.replay.cli.main).
It writes DIR/results.csv, DIR/summary.json, the PNG figures and, with
--over-time, DIR/over_time.csv; the last line on standard output is a JSON
summary (as with the other commands); progress goes to standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

from crawler.cache import PAPER_POLICIES, POLICY_NAMES
from crawler.cache.base import MAX_CAPACITY
from crawler.replay.plots import PlotsUnavailable, require_matplotlib
from crawler.replay.progress import ReplayProgress
from crawler.replay.results import over_time_rows, result_rows, summary, write_over_time, write_results, write_summary
from crawler.replay.simulate import DEFAULT_SEED, ReplayOptions, replay
from crawler.replay.stack import ENGINES
from crawler.replay.streaming import (
    AUTO_STREAMING_REQUESTS,
    DEFAULT_CHUNK_REQUESTS,
    StreamingChoice,
    choose_streaming,
    replay_streaming,
)
from crawler.replay.traces import TRACES, InputError, load_streams, per_worker_streams
from crawler.splitter.streamlog import NO_WORKER

DEFAULT_OUT = "replay-out"
DEFAULT_SIZES_TEXT = "2^0..2^25"
MAX_DEFAULT_JOBS = 4
EXIT_USAGE = 2
_POWER = re.compile(r"^2\^(\d+)$")


def parse_sizes(text: str) -> tuple[int, ...]:
    """Cache sizes from "1,2,1000", "2^0..2^25" or a mix ("2^4..2^8,1000"): distinct and ascending."""
    sizes: set[int] = set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if ".." in item:
            low, _, high = item.partition("..")
            lo, hi = _POWER.match(low.strip()), _POWER.match(high.strip())
            if not lo or not hi or int(lo.group(1)) > int(hi.group(1)):
                raise ValueError(f"size range {item!r}: expected 2^A..2^B with A <= B")
            sizes.update(1 << e for e in range(int(lo.group(1)), int(hi.group(1)) + 1))
        elif power := _POWER.match(item):
            sizes.add(1 << int(power.group(1)))
        elif item.isdigit():
            sizes.add(int(item))
        else:
            raise ValueError(f"size {item!r}: expected an integer, 2^A, or 2^A..2^B")
    if not sizes:
        raise ValueError("no cache sizes given")
    bad = [s for s in sizes if not 1 <= s <= MAX_CAPACITY]
    if bad:
        raise ValueError(f"cache size {min(bad)} is outside 1..{MAX_CAPACITY}")
    return tuple(sorted(sizes))


def parse_policies(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(p.strip().lower() for p in text.split(",") if p.strip()))
    unknown = [p for p in names if p not in POLICY_NAMES]
    if unknown or not names:
        raise ValueError(f"unknown cache policy {', '.join(unknown) or '(none)'}; "
                         f"known policies: {', '.join(POLICY_NAMES)}")
    return names


def parse_traces(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(t.strip().lower() for t in text.split(",") if t.strip()))
    unknown = [t for t in names if t not in TRACES]
    if unknown or not names:
        raise ValueError(f"unknown trace {', '.join(unknown) or '(none)'}; known traces: {', '.join(TRACES)}")
    return names


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crawler replay",
        description="Simulate URL cache policies over logged host-splitter streams (Broder, Najork & Wiener "
                    "2003): miss rates for every policy and size, relative to MIN, per worker and over time.",
        epilog="Synthetic traces from the paper's model (section 5.2: threads, a global set, per-page and "
               "per-host local sets, random URLs): `crawler synth OUT --threads N ...` writes a log this "
               "command reads (`crawler replay OUT --trace full --threads N`); see `crawler synth --help`.")
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="splitter stream logs (splitter-<node>-<seq>.log), directories holding them "
                             "(searched recursively, e.g. a crawl's data directory), or .npy arrays of "
                             "uint64 fingerprints")
    parser.add_argument("--trace", default=None, metavar="LIST",
                        help="full, cross, or full,cross (default: both; cross = records flagged "
                             "cross-host, which needs logs)")
    parser.add_argument("--policies", default=",".join(PAPER_POLICIES), metavar="LIST",
                        help=f"comma list of cache policies, of {','.join(POLICY_NAMES)} "
                             f"(default: the paper's, {','.join(PAPER_POLICIES)})")
    parser.add_argument("--sizes", default=DEFAULT_SIZES_TEXT, metavar="LIST",
                        help=f"cache sizes: integers, 2^A, or 2^A..2^B, comma separated (default {DEFAULT_SIZES_TEXT})")
    parser.add_argument("--threads", type=_positive, default=None, metavar="N",
                        help="worker threads that shared each cache in the crawl: adds entries per thread "
                             "to results.csv and the per-thread figure")
    parser.add_argument("--per-worker", action="store_true",
                        help="one cache per crawling worker instead of one per node (version-2 logs): each "
                             "worker's cache has SIZE entries, so a node's caches hold SIZE x workers in all; "
                             "misses are summed over the workers; --threads defaults to the workers per node")
    parser.add_argument("--over-time", type=_positive, default=None, metavar="WINDOW",
                        help="also record the miss rate in windows of WINDOW requests along each stream")
    parser.add_argument("--over-time-sizes", default=None, metavar="LIST",
                        help="sizes drawn in the over-time figure (default: 4 spread over --sizes)")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output directory (default {DEFAULT_OUT})")
    parser.add_argument("--jobs", type=_positive, default=None, metavar="J",
                        help=f"worker processes (default: CPUs, at most {MAX_DEFAULT_JOBS})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"seed of the random policy (default {DEFAULT_SEED}, the splitter's default)")
    parser.add_argument("--engine", choices=ENGINES, default="auto",
                        help="LRU pass: numpy, numba (compiled, optional dependency) or auto (numba if installed)")
    parser.add_argument("--streaming", action=argparse.BooleanOptionalAction, default=None,
                        help="read the inputs from disk chunk by chunk, memory bounded by the caches (every "
                             "policy but static and infinite; min writes next uses to --spill-dir); default: "
                             f"when the inputs hold more than {AUTO_STREAMING_REQUESTS:,} requests (docs/replay.md)")
    parser.add_argument("--chunk-requests", type=_positive, default=DEFAULT_CHUNK_REQUESTS, metavar="N",
                        help=f"requests read per chunk when streaming (default {DEFAULT_CHUNK_REQUESTS})")
    parser.add_argument("--spill-dir", default=None, metavar="DIR",
                        help="where the streaming replay builds what min and infinite (each stream's next "
                             "uses: 8 bytes per request, 24 while building) and static (its most frequent "
                             "fingerprints: 16 bytes per request while counting) need first (default: the "
                             "temporary directory, TMPDIR)")
    parser.add_argument("--no-plots", action="store_true", help="write the CSV files only")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _fail(message: str) -> int:
    print(f"crawler replay: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    """Runs `crawler replay` with `argv` (default sys.argv[1:]); returns the exit code."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        policies = parse_policies(args.policies)
        sizes = parse_sizes(args.sizes)
        chosen = parse_sizes(args.over_time_sizes) if args.over_time_sizes else None
        traces = parse_traces(args.trace) if args.trace else None
        inputs: StreamingChoice = choose_streaming(args.inputs, args.streaming)
        if inputs.sources is not None and args.per_worker:
            raise ValueError("--per-worker replays in memory and does not stream: add --no-streaming")
        streams = [] if inputs.sources else load_streams(args.inputs)
        if args.per_worker:
            streams = per_worker_streams(streams)
            per_node = Counter(s.name.rsplit(" worker ", 1)[0] for s in streams if s.worker != NO_WORKER)
            args.threads = args.threads or max(per_node.values(), default=1)
    except (ValueError, InputError) as exc:
        return _fail(str(exc))
    with_flags = any(s.has_flags() for s in inputs.sources or streams)
    if traces is None:
        traces = TRACES if with_flags else ("full",)
    elif "cross" in traces and not with_flags:
        return _fail("--trace cross needs splitter logs (plain .npy fingerprint arrays have no cross-host flags)")
    if not args.no_plots:
        try:
            require_matplotlib()            # before the simulations, which may take hours
        except PlotsUnavailable as exc:
            return _fail(str(exc))
    jobs = args.jobs or max(1, min(MAX_DEFAULT_JOBS, os.cpu_count() or 1))
    options = ReplayOptions(traces=traces, policies=policies, sizes=sizes, window=args.over_time,
                            seed=args.seed, jobs=jobs, engine=args.engine, spill_dir=args.spill_dir)
    if args.spill_dir is not None and "min" in policies and not Path(args.spill_dir).is_dir():
        return _fail(f"--spill-dir {args.spill_dir}: no such directory (MIN writes its next uses there)")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"--out {out}: cannot create the directory: {exc.strerror or exc}")
    progress = ReplayProgress(0.0, enabled=not args.quiet)
    try:
        result = (replay_streaming(inputs.sources, options, args.chunk_requests, progress) if inputs.sources
                  else replay(streams, options, progress))
    except ValueError as exc:
        return _fail(str(exc))
    finally:
        progress.close()
    rows = result_rows(result, args.threads, args.per_worker)
    files: dict[str, str | list[str]] = {"results": str(out / "results.csv")}
    write_results(out / "results.csv", rows)
    if options.window is not None:
        write_over_time(out / "over_time.csv", over_time_rows(result))
        files["over_time"] = str(out / "over_time.csv")
    if not args.no_plots:
        from crawler.replay.plots import plot_all

        # Per worker, the sizes are already a worker's entries: the size figures are the per-thread ones.
        threads = None if args.per_worker else args.threads
        files["plots"] = [str(p) for p in plot_all(result, rows, out, threads, chosen)]
    data = summary(result, [str(p) for p in args.inputs], files)
    data["per_worker"] = args.per_worker
    write_summary(out / "summary.json", data)
    line = {"out": str(out), "rows": len(rows), "seconds": data["seconds"], "per_worker": args.per_worker,
            "traces": {t: {"requests": v["requests"], "distinct": v["distinct"]} for t, v in data["traces"].items()}}
    print(json.dumps(line, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

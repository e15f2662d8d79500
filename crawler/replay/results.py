"""Replay's tables: results.csv (DESIGN 2.14), over_time.csv and summary.json.

results.csv has one row per (trace, policy, size):
    trace, policy, size, requests, misses, miss_rate, relative_to_min,
    threads, entries_per_thread
requests and misses are summed over the streams (nodes) of the trace;
miss_rate = misses / requests; relative_to_min = miss_rate / MIN's miss rate
at the same trace and size (empty when MIN was not simulated);
entries_per_thread = size / threads when --threads was given (Figures 8-9),
and = size with --per-worker (every worker has a cache of `size` entries).
Undefined values (a trace with no requests) are empty cells.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from crawler.cache import COMPILED
from crawler.replay.simulate import ReplayResult

RESULT_COLUMNS = ("trace", "policy", "size", "requests", "misses", "miss_rate", "relative_to_min",
                  "threads", "entries_per_thread")
OVER_TIME_COLUMNS = ("trace", "policy", "size", "window", "first_request", "requests", "misses", "miss_rate")


@dataclass(frozen=True)
class Row:
    """One line of results.csv."""

    trace: str
    policy: str
    size: int
    requests: int
    misses: int
    miss_rate: float | None
    relative_to_min: float | None
    threads: int | None = None
    entries_per_thread: float | None = None


def _rate(misses: int, requests: int) -> float | None:
    return misses / requests if requests else None


def result_rows(result: ReplayResult, threads: int | None = None, per_worker: bool = False) -> list[Row]:
    """The rows of results.csv, in trace, policy, size order; with `per_worker` each size is
    one worker's cache (its entries per thread), else one node's, shared by `threads` workers."""
    rows = []
    options = result.options
    for trace in options.traces:
        requests = result.stats[trace].requests
        floor = result.tallies.get((trace, "min"))
        for policy in options.policies:
            tally = result.tallies[(trace, policy)]
            for i, size in enumerate(options.sizes):
                rate = _rate(int(tally.misses[i]), requests)
                relative = None
                if floor is not None and rate is not None and floor.misses[i] > 0:
                    relative = rate / (int(floor.misses[i]) / requests)      # requests > 0: rate is a number
                rows.append(Row(trace, policy, size, requests, int(tally.misses[i]), rate, relative, threads,
                                None if threads is None else float(size) if per_worker else size / threads))
    return rows


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.10g}"
    return value


def write_results(path: Path, rows: list[Row]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(RESULT_COLUMNS)
        for row in rows:
            writer.writerow([_cell(getattr(row, c)) for c in RESULT_COLUMNS])


def over_time_rows(result: ReplayResult) -> list[tuple]:
    """(trace, policy, size, window, first_request, requests, misses, miss_rate) per window."""
    options = result.options
    out: list[tuple] = []
    if options.window is None:
        return out
    for trace in options.traces:
        requests = result.stats[trace].window_requests
        assert requests is not None, "every trace counts its windows when options.window is set"
        for policy in options.policies:
            windows = result.tallies[(trace, policy)].windows
            assert windows is not None
            for i, size in enumerate(options.sizes):
                for w, n in enumerate(requests.tolist()):
                    misses = int(windows[i, w])
                    out.append((trace, policy, size, w, w * options.window, n, misses, _rate(misses, n)))
    return out


def write_over_time(path: Path, rows: list[tuple]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(OVER_TIME_COLUMNS)
        for row in rows:
            writer.writerow([_cell(v) for v in row])


def summary(result: ReplayResult, inputs: list[str], files: dict[str, str | list[str]]) -> dict:
    """The run in one JSON-able dict: inputs, options, per-trace counts, timings, outputs."""
    options = result.options
    traces: dict[str, dict[str, object]] = {}
    for trace in options.traces:
        st = result.stats[trace]
        traces[trace] = {"requests": st.requests, "distinct": st.distinct, "streams": st.streams,
                         "logged_cache_hits": st.logged_cache_hits}
        if st.next_use_seconds is not None:
            traces[trace]["next_use_seconds"] = round(st.next_use_seconds, 3)
    return {
        "inputs": inputs,
        "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(options).items()},
        "traces": traces,
        "seconds_by_policy": {f"{t}/{p}": round(tally.seconds, 3) for (t, p), tally in result.tallies.items()},
        "runs_by_policy": {f"{t}/{p}": tally.runs for (t, p), tally in result.tallies.items()},
        "seconds": round(result.seconds, 3),
        "compiled_caches": COMPILED,
        "lru_engine": result.lru_engine,
        "files": files,
    }


def write_summary(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

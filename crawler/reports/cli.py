"""`crawler report -c FILE --out DIR`: the cluster's hosts, status codes, MIME types, seeds and summary.

    crawler report -c cluster.yaml --out report/ [--from auto|live|data] [--timeout S]

`--from live` asks every node's `GET /control/report` (a running crawl, or a
finished one whose nodes linger); `--from data` reads the nodes' data_dirs
(a stopped crawl, on the machine that holds them); `auto` (the default) is
live when every node answers, the data_dirs when none does, and an error when
only some do (the numbers of half a cluster would look whole). The last line
of standard output is the summary as JSON.

Exit codes: 0 written, 1 the report could not be made (the message says why),
2 bad config or arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from crawler.config import ConfigError, load
from crawler.reports.build import ClusterReport
from crawler.reports.collect import ReportError, live_nodes, offline_nodes
from crawler.reports.seeds import seed_scopes
from crawler.reports.write import write_report

DEFAULT_TIMEOUT_S = 30.0
"""How long one node may take to answer (its answer holds a row per host)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crawler report", description="Write the cluster's report (CSV and JSON).")
    p.add_argument("-c", "--config", required=True, help="cluster YAML file")
    p.add_argument("--out", required=True, help="directory for the report's files (made if missing)")
    p.add_argument("--from", dest="source", choices=("auto", "live", "data"), default="auto",
                   help="live: the nodes' /control/report; data: their data_dirs; auto (default): live when "
                        "every node answers, data when none does")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per node (live)")
    return p


def make_report(config_path: str, source: str, timeout_s: float) -> ClusterReport:
    config = load(config_path)
    if source in ("auto", "live"):
        got, missing = live_nodes(config, timeout_s)
        if not missing:
            return ClusterReport.of(got, seed_scopes(config), "live")
        if source == "live" or got:
            why = "; ".join(f"node {n}: {reason}" for n, reason in sorted(missing.items()))
            hint = "" if source == "live" else " (some nodes answer: a report of part of the cluster is refused)"
            raise ReportError(f"no report from every node{hint}: {why}")
    return ClusterReport.of(offline_nodes(config), seed_scopes(config), "data")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        report = make_report(args.config, args.source, args.timeout)
        write_report(report, Path(args.out))
    except ConfigError as exc:
        print(f"crawler report: {exc}", file=sys.stderr)
        return 2
    except (ReportError, OSError) as exc:
        print(f"crawler report: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report.summary(), sort_keys=True))
    return 0

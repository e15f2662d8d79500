"""The `crawler` command: run, demo, testweb, replay, synth, resize (and the commands later issues add).

Every command that crawls prints one JSON summary as the last line of its
standard output; progress and logs go to standard error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Coroutine
from typing import Any

from crawler.config import ConfigError, load

# The crawler never calls BLAS, but numpy's OpenBLAS starts a thread pool at import
# that spins ~0.1 s of CPU (measured: 0.08 s more at import, 0.04 s in the first
# second after); a cluster of N nodes on a machine pays it N times. Set before numpy
# is first imported (crawler.node, below); an operator's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def run_async(coro: Coroutine) -> Any:
    """Run on uvloop when it is installed (DESIGN 1), else the default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _cmd_run(args: argparse.Namespace) -> int:
    from crawler.node import Node

    config = load(args.config)
    if args.progress_interval is not None:
        config.metrics.progress_interval_s = args.progress_interval
    try:
        node = Node(config, args.node, source=args.config, fresh=args.fresh)
    except OSError as exc:
        # Typically a full or read-only disk while opening the state: nothing was changed yet.
        print(f"crawler: node {args.node}: cannot open its state in {config.crawl.data_dir}: "
              f"{exc.strerror or exc}: {exc.filename or ''}", file=sys.stderr)
        return 3
    summary = run_async(node.run(handle_signals=True))
    print(json.dumps(summary, sort_keys=True), flush=True)
    if summary["storage_error"]:
        return 3
    return 0 if summary["worker_errors"] == 0 else 1


def _cmd_cluster(args: argparse.Namespace) -> int:
    from crawler.cluster import run_cluster

    return run_async(run_cluster(args.config, progress_interval_s=args.progress_interval))


def _cmd_demo(args: argparse.Namespace) -> int:
    from crawler.demo import demo

    return demo(args)


def _cmd_testweb(argv: list[str]) -> int:
    from crawler.testweb.cli import main as testweb_main

    return testweb_main(argv)


def _cmd_status(argv: list[str]) -> int:
    from crawler.status import main as status_main

    return status_main(argv)


def _cmd_ctl(argv: list[str]) -> int:
    from crawler.control.client import main as ctl_main

    return ctl_main(argv)


def _cmd_report(argv: list[str]) -> int:
    from crawler.reports.cli import main as report_main

    return report_main(argv)


def _cmd_replay(argv: list[str]) -> int:
    from crawler.replay.cli import main as replay_main

    return replay_main(argv)


def _cmd_resize(argv: list[str]) -> int:
    from crawler.resize.cli import main as resize_main

    return resize_main(argv)


def _cmd_synth(argv: list[str]) -> int:
    from crawler.replay.synth_cli import main as synth_main

    return synth_main(argv)


# Commands with parsers of their own: the rest of the line is handed over untouched.
_PASS_THROUGH = {"testweb": _cmd_testweb, "status": _cmd_status, "ctl": _cmd_ctl, "report": _cmd_report,
                 "replay": _cmd_replay, "synth": _cmd_synth, "resize": _cmd_resize}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawler", description="A distributed, Mercator-style web crawler.")
    parser.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING (default) or ERROR")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one crawling node")
    run.add_argument("-c", "--config", required=True, help="cluster YAML file")
    run.add_argument("--node", type=int, default=0, help="which node of the file this process is (default 0)")
    run.add_argument("--progress-interval", type=float, default=None, metavar="S",
                     help="seconds between progress lines on stderr, 0 = none (overrides metrics.progress_interval_s)")
    run.add_argument("--fresh", action="store_true",
                     help="start over: remove the earlier crawl's frontier, DUE and peer spools in data_dir (WARC "
                          "files and the crawl log are kept); without it an unfinished crawl there is resumed")
    run.set_defaults(func=_cmd_run)

    cluster = sub.add_parser("cluster", help="run every node of the file that lives on this machine")
    cluster.add_argument("-c", "--config", required=True, help="cluster YAML file")
    cluster.add_argument("--progress-interval", type=float, default=None, metavar="S",
                         help="seconds between combined progress lines, 0 = none")
    cluster.set_defaults(func=_cmd_cluster)

    demo = sub.add_parser("demo", help="crawl a built-in local test web and print a summary")
    demo.add_argument("--hosts", type=int, default=100, help="hosts in the test web (default 100)")
    demo.add_argument("--pages", type=int, default=5000, help="pages in the test web (default 5000)")
    demo.add_argument("--workers", type=int, default=64, help="workers per node (default 64)")
    demo.add_argument("--nodes", type=int, default=3, help="crawling nodes, each its own process (default 3)")
    demo.add_argument("--dir", default=None, help="where the demo's files go (default: a new folder under the "
                                                 "system's temporary directory); kept unless --remove")
    demo.add_argument("--remove", action="store_true", help="delete the demo's folder at the end")
    demo.set_defaults(func=_cmd_demo)

    sub.add_parser("testweb", help="serve the synthetic test web (see `crawler testweb --help`)", add_help=False)
    sub.add_parser("status", help="one table of every node's /metrics (see `crawler status --help`)", add_help=False)
    sub.add_parser("ctl", help="control a running cluster: pause, resume, seeds add, block, delay, stop, status "
                               "(see `crawler ctl --help`)", add_help=False)
    sub.add_parser("report", help="the cluster's per-host, status, MIME, seed and summary report as CSV and JSON "
                                  "(see `crawler report --help`)", add_help=False)
    sub.add_parser("replay", help="simulate URL cache policies over logged splitter streams "
                                  "(see `crawler replay --help`)", add_help=False)
    sub.add_parser("resize", help="change the node count of a stopped crawl: hosts move with their queues, "
                                  "politeness and seen URLs (see `crawler resize --help`)", add_help=False)
    sub.add_parser("synth", help="write a URL stream from the paper's model of crawling threads, for replay "
                                 "(see `crawler synth --help`)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    for i, word in enumerate(argv):
        if not word.startswith("-") and (i == 0 or argv[i - 1] != "--log-level"):
            if word in _PASS_THROUGH:
                level = argv[argv.index("--log-level") + 1] if "--log-level" in argv[:i] else "WARNING"
                logging.basicConfig(level=getattr(logging, level.upper(), logging.WARNING),
                                    format="%(asctime)s %(levelname)s %(name)s: %(message)s")
                return _PASS_THROUGH[word](argv[i + 1:])
            break
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"crawler: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

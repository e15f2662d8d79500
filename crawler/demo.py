"""`crawler demo`: the embedded default run, with nothing to set up.

Starts the synthetic test web as a child process on a free loopback port,
writes a cluster config for it (DNS overrides point `*.web.test` at the
loopback address, so no DNS server is needed and the private-network guard
stays on), crawls it, then checks the crawl from the outside: the server's
access log against the web's manifest and the politeness rules. Prints a
summary table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from crawler.testweb.audit import compare, overlaps, short_gaps
from crawler.testweb.process import TestWebProcess


def demo_config(seeds: str, data_dir: Path, workers: int) -> dict:
    return {
        "cluster": {"name": "demo", "nodes": [{"id": 0, "host": "127.0.0.1", "peer_port": 0, "metrics_port": 0}]},
        "crawl": {"seeds_file": seeds, "data_dir": str(data_dir / "node-{node}")},
        "workers": workers,
        "fetch": {"dns": {"overrides": {"*.web.test": "127.0.0.1"}},
                  "read_timeout_s": 3, "total_timeout_s": 20,
                  "max_body_bytes": 4 << 20, "max_decoded_bytes": 16 << 20},
        "metrics": {"progress_interval_s": 2},
    }


def demo(args: argparse.Namespace) -> int:
    from crawler.cli import run_async
    from crawler.config import load
    from crawler.node import Node

    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="crawler-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    web_args = ["--hosts", str(args.hosts), "--pages", str(args.pages), "--private-links", "--stall-s", "6"]
    print(f"demo: serving a test web of {args.hosts} hosts / {args.pages} pages; files in {root}", file=sys.stderr)
    try:
        with TestWebProcess(root / "web", web_args) as web:
            config_path = root / "crawl.yaml"
            config_path.write_text(yaml.safe_dump(demo_config(web.info["seeds"], root / "data", args.workers),
                                                  sort_keys=False))
            config = load(config_path)
            started = time.monotonic()
            summary = run_async(Node(config, 0, source=str(config_path)).run(handle_signals=True))
            wall_s = time.monotonic() - started
            requests = web.requests()
            manifest = web.manifest()
        result = compare(requests, manifest)
        overlap = overlaps(requests)
        gaps = short_gaps(requests, manifest.crawl_delay_s, delay_factor=0.0)
        report = {
            "demo": "ok" if result.ok and not overlap and not gaps else "mismatch",
            "pages": summary["pages"],
            "expected_pages": len(manifest.fetched),
            "missing": len(result.missing), "unexpected": len(result.unexpected),
            "fetched_twice": len(result.duplicates), "robots_forbidden_fetched": len(result.forbidden),
            "overlapping_requests": len(overlap), "crawl_delay_violations": len(gaps),
            "errors_by_reason": summary["errors_by_reason"],
            "cache_hit_rates": summary["cache_hit_rates"],
            "wall_s": round(wall_s, 1), "files": str(root),
        }
        print(_table(summary, report))
        print(json.dumps(report, sort_keys=True), flush=True)
        return 0 if report["demo"] == "ok" else 1
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


def _table(summary: dict, report: dict) -> str:
    rows = [
        ("pages fetched", f"{summary['pages']} of {report['expected_pages']} expected"),
        ("status classes", ", ".join(f"{k}: {v}" for k, v in summary["status"].items())),
        ("failures (by reason)", ", ".join(f"{k}: {v}" for k, v in sorted(summary["errors_by_reason"].items())) or "none"),
        ("robots.txt denials", summary["robots_denied"]),
        ("missing / unexpected / twice", f"{report['missing']} / {report['unexpected']} / {report['fetched_twice']}"),
        ("politeness", f"{report['overlapping_requests']} overlapping requests, "
                       f"{report['crawl_delay_violations']} Crawl-delay violations (server's log)"),
        ("cache hit rates", ", ".join(f"{k}: {v}" for k, v in summary["cache_hit_rates"].items())),
        ("pages/s", summary["pages_per_s"]),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)

"""What `crawler report` costs a running node: the tally per fetch, the crawl log's write per line, the
checkpoint's copy of the host rows.

    python bench/report_bench.py [--fetches 200000] [--hosts 1000000] [--changed 20000]

Times `Tally.fetch` over `--fetches` page fetches spread over 5,000 hosts (and
`host_of` alone, its biggest share); `CrawlLog.write` of a typical line, written
through (a line per write(2), as the node does, so a SIGKILL loses none) and
buffered (a flush every 256 lines, as it was); then fills a tally with
`--hosts` hosts and times the checkpoint's snapshot on the loop
(`ReportState._snapshot`): the first (every row, as at restart) and the next
with `--changed` hosts changed. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from crawler.reports.state import ReportState  # noqa: E402
from crawler.reports.tally import Tally  # noqa: E402
from crawler.store import CrawlLog  # noqa: E402
from crawler.urls import host_of  # noqa: E402

BUSY_HOSTS = 5000                 # hosts the fetches of the first figures are spread over
BUFFERED_LINES = 256              # the crawl log's flush interval before it was written through


def per_item_us(seconds: float, n: int) -> float:
    return round(seconds / n * 1e6, 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fetches", type=int, default=200_000)
    p.add_argument("--hosts", type=int, default=1_000_000)
    p.add_argument("--changed", type=int, default=20_000)
    args = p.parse_args()
    urls = [f"http://h{i % BUSY_HOSTS}.example/p{i}" for i in range(args.fetches)]
    out: dict[str, float] = {}

    t0 = time.perf_counter()
    for u in urls:
        host_of(u)
    out["host_of_us"] = per_item_us(time.perf_counter() - t0, len(urls))
    tally = Tally()
    t0 = time.perf_counter()
    for u in urls:
        tally.fetch(u, "page", 200, "ok", 12345, "text/html", None, 10)
    out["tally_fetch_us"] = per_item_us(time.perf_counter() - t0, len(urls))

    line = {"kind": "page", "status": 200, "reason": "ok", "bytes": 12345, "duration_s": 0.012345,
            "content_type": "text/html", "ip": "127.0.0.1", "content_fp": "0123456789abcdef", "links": 10}
    with tempfile.TemporaryDirectory() as tmp:
        for name, flush in (("crawl_log_through_us", 1), ("crawl_log_buffered_us", BUFFERED_LINES)):
            log = CrawlLog(Path(tmp) / f"{name}.jsonl")
            log.FLUSH_LINES = flush
            t0 = time.perf_counter()
            for u in urls:
                log.write({"url": u, **line})
            log.close()
            out[name] = per_item_us(time.perf_counter() - t0, len(urls))

    big = Tally()
    state = ReportState(SimpleNamespace(records=SimpleNamespace(crawl_log=None)), big)  # type: ignore[arg-type]
    for i in range(args.hosts):
        big.fetch(f"http://h{i}.example/", "page", 200, "ok", 100, "text/html")
    t0 = time.perf_counter()
    state._snapshot()
    out["snapshot_all_s"] = round(time.perf_counter() - t0, 3)
    step = max(args.hosts // max(args.changed, 1), 1)
    for i in range(0, args.hosts, step):
        big.fetch(f"http://h{i}.example/x", "page", 200, "ok", 100, "text/html")
    t0 = time.perf_counter()
    state._snapshot()
    out["snapshot_changed_s"] = round(time.perf_counter() - t0, 3)
    for key, value in out.items():
        print(f"{key:24} {value}")
    print(json.dumps({"fetches": args.fetches, "hosts": args.hosts, "changed": args.changed, **out}))


if __name__ == "__main__":
    main()

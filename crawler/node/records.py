"""What the node writes about every fetch: counts, the fetch-latency histogram, the crawl-log line and
the WARC records (DESIGN 1's "record" step; formats in crawler/store)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram

from crawler.config import Config
from crawler.fetch import FetchResult
from crawler.node.totals import PageCounts
from crawler.parse import content_fingerprint
from crawler.reports.tally import Tally
from crawler.store import CrawlLog, WarcStore
from crawler.urls.lineage import NO_FP, Lineage

# Fetch-latency histogram buckets: loopback test webs answer in milliseconds, the web in seconds.
FETCH_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def status_class(status: int) -> str:
    return f"{status // 100}xx" if status else "none"


def lineage_fields(lineage: Lineage) -> dict:
    """The crawl-log fields of a URL's lineage: `hops` from its seed, `via` the page that linked it and `seed`
    (fingerprints in hex; null when not known: a seed's via, a URL queued before lineage was kept)."""
    return {"hops": lineage.hops, "via": f"{lineage.via:016x}" if lineage.via != NO_FP else None,
            "seed": f"{lineage.seed:016x}" if lineage.seed != NO_FP else None}


class Records:
    """Counts each fetch into `counts` and writes its crawl-log line and WARC records (once `open`)."""

    def __init__(self, counts: PageCounts, registry: CollectorRegistry) -> None:
        self.counts = counts
        self.tally = Tally()             # per-host aggregates for `crawler report` (crawler/reports)
        self.crawl_log: CrawlLog | None = None
        self.warc: WarcStore | None = None
        self.on_fetch: Callable[[FetchResult, str], None] | None = None    # the console's tally (crawler/console)
        self.fetch_seconds = Histogram("crawler_fetch_duration_seconds", "Duration of fetches, by kind.", ["kind"],
                                       buckets=FETCH_BUCKETS_S, registry=registry)
        self._observe = {kind: self.fetch_seconds.labels(kind).observe for kind in ("page", "robots")}

    def open(self, config: Config, data_dir: Path, node_id: int) -> None:
        """Open the crawl log and the WARC store the config asks for (`store.*`)."""
        if config.store.crawl_log:
            self.crawl_log = CrawlLog(data_dir / "crawl.log.jsonl")
        if config.store.warc.enabled:
            self.warc = WarcStore(data_dir / "warc", config.store.warc, node_id)

    def closers(self) -> list[Callable[[], object]]:
        """Their close calls, in closing order."""
        return [part.close for part in (self.crawl_log, self.warc) if part is not None]

    def write_line(self, line: dict) -> None:
        """A crawl-log line of a URL that was not fetched (refused or dropped)."""
        self.tally.skip(line["url"], line["reason"], "dropped" in line)
        if self.crawl_log is not None:
            self.crawl_log.write(line)

    def record(self, result: FetchResult, kind: str, links: int = 0, failure: str | None = None,
               content_fp: int | None = None, links_dropped: int = 0, lineage: Lineage | None = None) -> None:
        """Count one fetch, write its crawl-log line and WARC records."""
        c = self.counts
        self._observe[kind](result.duration_s)
        if kind == "robots":
            c.robots_fetches += 1
        if result.status:
            cls = status_class(result.status)
            c.pages[(cls, kind)] += 1
            c.bytes[cls] += result.wire_bytes
            if self.warc is not None:
                self.warc.write(result)
        if result.reason != "ok":
            c.errors[result.reason] += 1
        fields = lineage_fields(lineage) if lineage is not None else None
        self.tally.fetch(result.url, kind, result.status, result.reason, result.wire_bytes, result.content_type,
                         failure, links, fields["seed"] if fields is not None else None)
        if self.on_fetch is not None:
            self.on_fetch(result, kind)
        if self.crawl_log is not None:
            line = {"url": result.url, "kind": kind, "status": result.status, "reason": result.reason,
                    "bytes": result.wire_bytes, "duration_s": round(result.duration_s, 6),
                    "content_type": result.content_type, "ip": result.ip}
            if result.body and result.status:
                fp = content_fingerprint(result.body) if content_fp is None else content_fp
                line["content_fp"] = f"{fp:016x}"
            if links:
                line["links"] = links
            if links_dropped:
                line["links_dropped"] = links_dropped
            if result.location:
                line["location"] = result.location
            if failure:
                line["failure"] = failure
            if result.detail and result.reason != "ok":
                line["detail"] = result.detail
            if fields is not None:
                line.update(fields)
            self.crawl_log.write(line)

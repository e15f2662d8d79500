"""Map a node's stats snapshot to Prometheus metric families at scrape time."""

from __future__ import annotations

from typing import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

Snapshot = Callable[[], dict]


def _counter(name: str, doc: str, labels: list[str], values: dict) -> CounterMetricFamily:
    fam = CounterMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        fam.add_metric(list(key) if isinstance(key, tuple) else [str(key)], value)
    return fam


def _gauge(name: str, doc: str, value: float, labels: list[str] | None = None,
           per_label: dict | None = None) -> GaugeMetricFamily:
    if labels:
        fam = GaugeMetricFamily(name, doc, labels=labels)
        for key, v in sorted((per_label or {}).items()):
            fam.add_metric(list(key) if isinstance(key, tuple) else [str(key)], v)
        return fam
    return GaugeMetricFamily(name, doc, value=value)


class NodeCollector(Collector):
    """Reads `snapshot()` (the node's `metrics_snapshot`) and yields metric families."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterable:
        s = self._snapshot()
        yield _counter("crawler_pages", "Fetches that got an HTTP response, by status class and kind (page or robots).",
                       ["status_class", "kind"], s["pages"])
        yield _counter("crawler_bytes", "Body bytes received on the wire, by status class.",
                       ["status_class"], s["bytes"])
        yield _counter("crawler_fetch_errors", "Fetches that got no complete HTTP response, by reason.",
                       ["reason"], s["errors"])
        yield _counter("crawler_links_extracted", "Links extracted from pages (before the filter).",
                       [], {(): s["links_extracted"]})
        yield _counter("crawler_filter_rejected", "URLs dropped by the URL filter, by reason.",
                       ["reason"], s["filter_rejected"])
        yield _counter("crawler_robots_denied", "URLs not fetched because robots.txt disallows them.",
                       [], {(): s["robots_denied"]})
        yield _counter("crawler_duplicate_content", "Pages whose body was seen before (links not processed again).",
                       [], {(): s["duplicate_content"]})
        yield _counter("crawler_worker_errors", "Unexpected errors caught in a worker (the worker went on).",
                       [], {(): s["worker_errors"]})
        yield _counter("crawler_cache_lookups", "URL cache lookups, by cache and result (hit rate = hit / all).",
                       ["cache", "result"], s["cache_lookups"])
        yield _gauge("crawler_cache_entries", "Entries held in each URL cache.", 0, ["cache"], s["cache_entries"])
        yield _gauge("crawler_cache_capacity", "Capacity of each URL cache.", 0, ["cache"], s["cache_capacity"])
        yield _counter("crawler_due_checks", "URLs offered to the duplicate URL eliminator.", [], {(): s["due_checks"]})
        yield _counter("crawler_due_new_urls", "URLs the DUE found new (sent to the frontier).", [], {(): s["due_new"]})
        yield _gauge("crawler_frontier_urls", "URLs queued in the frontier.", s["frontier_urls"])
        yield _gauge("crawler_frontier_active_hosts", "Hosts with a back queue.", s["frontier_active_hosts"])
        yield _gauge("crawler_frontier_busy_hosts", "Hosts with a request in flight.", s["frontier_busy_hosts"])
        yield _counter("crawler_dns_lookups", "DNS lookups, by result.", ["result"], s["dns_lookups"])

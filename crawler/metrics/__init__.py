"""Prometheus metrics of one node, served at http://<metrics.bind>:<metrics_port>/metrics.

Components keep plain counters in their `stats()` (an integer increment is the
cheapest thing on the per-page path); `NodeCollector` turns a snapshot of
them into metric families when Prometheus scrapes, so nothing is counted twice
and no lock is needed. Only the fetch-latency histogram is observed per page.
The endpoint runs on the node's own event loop (aiohttp), never in a thread
that would read state mid-update. Names follow Prometheus conventions:
`crawler_` prefix, `_total` counters, base units, labels instead of variants.
`docs/metrics.md` lists every metric.
"""

from crawler.metrics.collector import NodeCollector
from crawler.metrics.server import MetricsServer

__all__ = ["MetricsServer", "NodeCollector"]

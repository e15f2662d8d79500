"""Prometheus metrics of one node, served at http://<metrics.bind>:<metrics_port>/metrics.

Components keep plain counters in their `stats()` (an integer increment is the
cheapest thing on the per-page path); `NodeCollector` turns a snapshot of
them into metric families when Prometheus scrapes, so nothing is counted twice
and no lock is needed. Only the fetch-latency histogram is observed per page.
The endpoint runs on the node's own event loop (aiohttp), never in a thread
that would read state mid-update. Names follow Prometheus conventions:
`crawler_` prefix, `_total` counters, base units, labels instead of variants.
`process.py` adds the standard process (CPU, RSS, file descriptors) and
Python runtime series and `crawler_node_info` (node, cluster, version).
`docs/metrics.md` lists every metric.
"""

from crawler.metrics.collector import NodeCollector
from crawler.metrics.process import NodeInfoCollector, register_process_metrics
from crawler.metrics.server import MetricsServer

__all__ = ["MetricsServer", "NodeCollector", "NodeInfoCollector", "register_process_metrics"]

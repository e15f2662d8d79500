"""What runs where: the process's CPU, memory and file descriptors, the Python runtime, and the crawler build.

prometheus-client's `ProcessCollector` (from /proc/self, so Linux only: it
exposes nothing elsewhere) and `PlatformCollector` are the standard
`process_*` and `python_info` series every Prometheus user knows; they are
read at scrape time like the node's own collector, so they cost nothing
between scrapes. `crawler_node_info` is an info gauge (always 1) naming the
node, its cluster and the crawler version, so a dashboard can tell which
build each node runs and join it onto any other series.
"""

from __future__ import annotations

from typing import Iterable

from prometheus_client import PlatformCollector, ProcessCollector
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

import crawler

NODE_INFO = "crawler_node_info"
NODE_INFO_LABELS = ("node", "cluster", "version")


class NodeInfoCollector(Collector):
    """`crawler_node_info{node, cluster, version} 1`."""

    def __init__(self, node_id: int, cluster: str, version: str) -> None:
        self._labels = [str(node_id), cluster, version]

    def collect(self) -> Iterable[GaugeMetricFamily]:
        fam = GaugeMetricFamily(NODE_INFO, "Always 1: which node of which cluster runs which crawler version.",
                                labels=list(NODE_INFO_LABELS))
        fam.add_metric(self._labels, 1)
        yield fam

    def describe(self) -> Iterable[GaugeMetricFamily]:
        """Lets the registry refuse a second registration (it checks names only for collectors that describe)."""
        return self.collect()


def register_process_metrics(registry: CollectorRegistry, *, node_id: int, cluster: str,
                             version: str = crawler.__version__) -> None:
    """Add the node-info, process and platform collectors to a node's registry.

    Once per registry: a second call raises ValueError (duplicated series) before adding anything.
    """
    registry.register(NodeInfoCollector(node_id, cluster, version))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)

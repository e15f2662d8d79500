"""What runs where: the process's CPU, memory and file descriptors, the Python runtime, and the crawler build.

prometheus-client's `ProcessCollector` (from /proc/self, so Linux only: it
exposes nothing elsewhere) and `PlatformCollector` are the standard
`process_*` and `python_info` series every Prometheus user knows; they are
read at scrape time like the node's own collector, so they cost nothing
between scrapes. `crawler_node_info` is an info gauge (always 1) naming the
node, its cluster, the crawler version and its kernels (`compiled`, or
`python` when the C extension is missing and the pure-Python twins run), so a
dashboard can tell which build each node runs and join it onto any other series.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import PlatformCollector, ProcessCollector
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

import crawler
from crawler._native import KERNELS

NODE_INFO = "crawler_node_info"
NODE_INFO_LABELS = ("node", "cluster", "version", "kernels")


class NodeInfoCollector(Collector):
    """`crawler_node_info{node, cluster, version, kernels} 1`."""

    def __init__(self, node_id: int, cluster: str, version: str, kernels: str) -> None:
        self._labels = [str(node_id), cluster, version, kernels]

    def collect(self) -> Iterable[GaugeMetricFamily]:
        fam = GaugeMetricFamily(NODE_INFO, "Always 1: which node of which cluster runs which crawler version, "
                                "on which kernels (compiled, or the pure-Python twins).",
                                labels=list(NODE_INFO_LABELS))
        fam.add_metric(self._labels, 1)
        yield fam

    def describe(self) -> Iterable[GaugeMetricFamily]:
        """Lets the registry refuse a second registration (it checks names only for collectors that describe)."""
        return self.collect()


def register_process_metrics(registry: CollectorRegistry, *, node_id: int, cluster: str,
                             version: str = crawler.__version__, kernels: str = KERNELS) -> None:
    """Add the node-info, process and platform collectors to a node's registry.

    Once per registry: a second call raises ValueError (duplicated series) before adding anything.
    """
    registry.register(NodeInfoCollector(node_id, cluster, version, kernels))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)

"""The control state on /metrics: paused or not, the standing blocks and delays, the URLs blocks removed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from crawler.control.controller import Control

ACTIONS = ("dropped", "rejected")


class ControlCollector(Collector):
    """Read at each scrape from the node's `Control`."""

    def __init__(self, control: Control) -> None:
        self._control = control

    def collect(self) -> Iterable:
        c = self._control
        yield GaugeMetricFamily("crawler_control_paused", "1 while the node is paused by crawler ctl pause.",
                                value=int(c.paused))
        yield GaugeMetricFamily("crawler_control_blocked_patterns", "Host patterns blocked by crawler ctl block.",
                                value=len(c.settings.blocked))
        yield GaugeMetricFamily("crawler_control_host_delays", "Host patterns with a least delay set by crawler ctl "
                                "delay.", value=len(c.settings.delays))
        this = CounterMetricFamily("crawler_blocked_urls", "URLs of blocked hosts: queued ones dropped, new ones "
                                   "rejected.", labels=["action"])
        crawl = GaugeMetricFamily("crawler_crawl_blocked_urls", "URLs of blocked hosts dropped or rejected since the "
                                  "crawl began, across restarts.", labels=["action"])
        totals = c.totals()
        for action, n in zip(ACTIONS, (c.dropped, c.rejected)):
            this.add_metric([action], n)
            crawl.add_metric([action], totals[action])
        yield this
        yield crawl

"""Prompt lookups: links that may feed a waiting worker are looked up in the DUE's disk set at once
(`DiskDUE.peek`) instead of waiting in its buffer for the next merge (`due.prompt_lookups`, docs/due.md;
the test for "may feed" is merging.is_hungry). Their delays feed the summary and a histogram."""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram

from crawler.node.errors import is_storage_error
from crawler.node.merging import is_hungry
from crawler.urls import host_of

if TYPE_CHECKING:
    from crawler.node.node import Node

DISCOVERY_SAMPLES = 100_000      # prompt lookups' delays kept for the summary's percentiles (the newest)
DISCOVERY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)


class PromptLookups:
    """Asks whether new links may feed a waiting worker and, if so, looks them up at once."""

    def __init__(self, node: Node, registry: CollectorRegistry) -> None:
        self.node = node
        self.delays: deque[float] = deque(maxlen=DISCOVERY_SAMPLES)   # prompt lookups' durations
        self.seconds = Histogram(
            "crawler_discovery_delay_seconds", "Prompt lookups: from a page's links entering the DUE buffer while a "
            "worker waited and a host they are for had nothing queued, to their new URLs entering the frontier.",
            buckets=DISCOVERY_BUCKETS_S, registry=registry)

    def wanted(self, buffered: int, links: list[str], page_host: str | None = None) -> bool:
        """Should the links the DUE buffered past `buffered` be looked up now? Only while a worker waits,
        when the config asks for it, and when they may feed it (hot path: once per page or batch)."""
        node = self.node
        return (node.frontier.has_waiters and node.due.buffered > buffered and node.config.due.prompt_lookups
                and is_hungry(links, page_host, node.frontier.queued_of, host_of, node.partitioner.owner,
                              node.node_id, node.n_nodes == 1))

    def lookup(self, start: int) -> None:
        """Look up the DUE's buffered URLs from `start` on in its disk set now; new ones go to the frontier."""
        node = self.node
        t0 = time.perf_counter()
        try:
            new = node.due.peek(start)
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            node.storage_failed(exc)
            return
        if new:
            node.enqueue(new)
        delay_s = time.perf_counter() - t0
        self.delays.append(delay_s)
        self.seconds.observe(delay_s)

    def summary(self) -> dict:
        """Prompt lookups of this process: how many, and their delays' median, p99 and max (seconds)."""
        delays = sorted(self.delays)
        if not delays:
            return {"lookups": 0}

        def at(q: float) -> float:
            return round(delays[min(len(delays) - 1, int(q * len(delays)))], 6)

        return {"lookups": len(delays), "p50": at(0.5), "p99": at(0.99), "max": round(delays[-1], 6)}

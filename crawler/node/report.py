"""What the node tells about itself: the summary it returns (the CLI's last line), the snapshot its
/metrics collector reads, the URL caches' hit rates. Read-only over the node's parts."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from crawler._native import KERNELS

if TYPE_CHECKING:
    from crawler.node.node import Node

# Statistics of the DUE the summary shows.
SUMMARY_DUE_KEYS = ("merges", "merge_seconds", "merge_cpu_seconds", "disk_fingerprints", "disk_bytes",
                    "duplicates_emitted")


class Report:
    """The node's summary and metrics snapshot; also keeps the clocks the summary's rates need."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.started = 0.0                             # time.monotonic() at the run's start
        self.cpu0 = 0.0                                # time.process_time() at the run's start
        self.cpu_marks: dict[str, float] = {}          # phase -> process_time() at its end (cpu_phases_s)

    def begin(self) -> None:
        self.started = time.monotonic()
        self.cpu0 = time.process_time()

    def summary(self) -> dict:
        """The crawl's figures (totals go on across restarts; `run` is this process alone)."""
        node = self.node
        c = node.totals()
        run = node.counters
        duration = time.monotonic() - self.started
        run_pages = run.page_fetches
        due = node.due.stats()
        return {
            "node": node.node_id,
            "stop": node.stop_reason,
            "kernels": KERNELS,
            "resumed": node.resuming,
            "pages": c.page_fetches,
            "fetches": c.fetches,
            "robots_fetches": c.robots_fetches,
            "bytes": sum(c.bytes.values()),
            "errors": sum(c.errors.values()),
            "errors_by_reason": dict(c.errors),
            "status": {cls: n for (cls, kind), n in sorted(c.pages.items()) if kind == "page"},
            "robots_denied": c.robots_denied,
            "robots_parked": c.robots_parked,
            "robots_unreachable": c.robots_unreachable,
            "dropped": dict(c.dropped),
            "filter_rejected": sum(node.filter_rejected_total().values()),
            "filter_rejected_by_reason": dict(node.filter_rejected_total()),
            "scope_hops": node.nearer.stats(),
            "links": c.links_extracted,
            "links_truncated": c.links_truncated,
            "new_urls": due["new"],
            "due": {k: due[k] for k in SUMMARY_DUE_KEYS},
            "worker_errors": c.worker_errors,
            "discovery_delay_s": node.lookups.summary(),
            "storage_error": node.storage_error,
            "cache_hit_rates": self.cache_hit_rates(),
            "cache_lookups": {name: list(hc) for name, hc in self.cache_counts().items()},
            "splitter": {k: v for k, v in node.splitter.stats().items() if k != "by_destination"},
            "urls_received": node.urls_received,
            "peer_bytes_sent": self._peer_total("bytes_sent"),
            "run": {"pages": run_pages, "fetches": run.fetches, "robots_fetches": run.robots_fetches,
                    "bytes": sum(run.bytes.values()), "errors": sum(run.errors.values())},
            "duration_s": round(duration, 3),
            "cpu_s": round(time.process_time() - self.cpu0, 3),
            "cpu_phases_s": self._cpu_phases(),
            "pages_per_s": round(run_pages / duration, 2) if duration > 0 else 0.0,
            "control": node.control.summary(),
        }

    def _cpu_phases(self) -> dict:
        """CPU seconds by phase: opening the stores, crawling (until the workers end), and the
        rest (waiting for the cluster to finish, the final flush, checkpoint and close). Which
        phase a cost sits in tells a fixed per-process cost from a per-page one."""
        now = time.process_time()
        start = self.cpu_marks.get("start", now)
        crawl = self.cpu_marks.get("crawl", now)
        return {"start": round(start - self.cpu0, 3), "crawl": round(crawl - start, 3),
                "finish": round(now - crawl, 3)}

    def cache_hit_rates(self) -> dict[str, float | None]:
        rates: dict[str, float | None] = {}
        for name, (hits, misses) in self.cache_counts().items():
            total = hits + misses
            rates[name] = round(hits / total, 4) if total else None
        return rates

    def _peer_total(self, key: str) -> int:
        peers = self.node.peers
        if peers is None:
            return 0
        return sum(p[key] for p in peers.counts()["peers"].values())

    def cache_counts(self) -> dict[str, tuple[int, int]]:
        """(hits, misses) per URL cache: the DUE's front cache and the splitter's."""
        s = self.node.due.stats()
        sc = self.node.splitter_cache
        counts = {"due": (s["cache_hits"], s["cache_misses"])}
        if sc.hits + sc.misses:
            counts["splitter"] = (sc.hits, sc.misses)
        return counts

    def metrics_snapshot(self) -> dict:
        """What NodeCollector (crawler/metrics) turns into metric families at each scrape."""
        node = self.node
        c = node.counters
        totals = node.totals()
        lookups = {}
        for name, (hits, misses) in self.cache_counts().items():
            lookups[(name, "hit")] = hits
            lookups[(name, "miss")] = misses
        due = node.due.stats()
        dns = node.resolver.stats() if node.resolver is not None else {}
        splitter_urls = {(str(d), "local" if d == node.node_id else "cross"): n
                         for d, n in node.splitter.by_destination.items()}
        network = node.peers
        counts: dict[str, Any] = network.counts() if network is not None else {"peers": {}, "rejected": {}}
        peers = {p: dict(v, connected=int(network.connected(p))) for p, v in counts["peers"].items()} \
            if network is not None else {}
        seen = node.visitor.content_seen
        return {
            "dns_failures": dns.get("failures", {}), "dns_queries": dns.get("latency_count", 0),
            "dns_seconds": dns.get("latency_s_sum", 0.0),
            "splitter_urls": splitter_urls, "splitter_batches": node.splitter.batches_sent,
            "peers": peers, "peer_rejected": counts["rejected"], "due": due,
            "pages": c.pages, "bytes": c.bytes, "errors": c.errors,
            "links_extracted": c.links_extracted, "links_truncated": c.links_truncated,
            "filter_rejected": node.filter.rejected,
            "robots_denied": c.robots_denied, "duplicate_content": c.duplicate_content,
            "robots_parked": c.robots_parked, "robots_unreachable": c.robots_unreachable,
            "urls_dropped": c.dropped, "worker_errors": c.worker_errors, "cache_lookups": lookups,
            "cache_entries": {"due": due["cache_size"], "splitter": node.splitter_cache.size,
                              "content": seen.size},
            "cache_capacity": {"due": due["cache_capacity"], "splitter": node.splitter_cache.capacity,
                               "content": seen.capacity},
            "due_checks": due["checks"], "due_new": due["new"],
            "frontier_urls": node.frontier.queued, "frontier_active_hosts": node.frontier.active_hosts,
            "frontier_busy_hosts": node.frontier.busy_hosts, "dns_lookups": dns.get("lookups", {}),
            "crawl_pages": totals.pages, "crawl_bytes": totals.bytes, "crawl_errors": totals.errors,
        }

"""The cluster's report from its nodes' shares: the tables `crawler report` writes (write.py).

A host is crawled by its owner node, but a robots.txt redirect may lead a
node to another node's host, so rows of the same host are summed. Blocked
means a pattern of `crawler ctl block` (on any node) matches the host.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from crawler.control.hosts import HostPatterns
from crawler.reports.collect import NodeData
from crawler.reports.seeds import Seed
from crawler.reports.tally import OTHER_CLASS, STATUS_CLASSES, HostRow, Tally
from crawler.urls import fingerprint

CLASS_COLUMNS = [f"status_{c}" for c in STATUS_CLASSES] + [f"status_{OTHER_CLASS}"]
HOST_COLUMNS = ["host", "fetched", "bytes", *CLASS_COLUMNS, "failures", "failures_by_reason", "robots_fetches",
                "robots_denied", "dropped", "queued", "blocked"]
STATUS_COLUMNS = ["status", "class", "responses"]
MIME_COLUMNS = ["mime_type", "responses", "share"]
SEED_COLUMNS = ["seed", "scope", "fetched", "status_2xx", "hosts", "hosts_fetched", "bytes", "queued"]


@dataclass
class ClusterReport:
    """Every table of the report, as lists of rows (dicts keyed by their column names)."""
    source: str
    nodes: list[NodeData]
    tally: Tally = field(default_factory=Tally)
    queued: Counter = field(default_factory=Counter)
    blocked: HostPatterns = field(default_factory=HostPatterns)
    seeds: list[Seed] = field(default_factory=list)

    @classmethod
    def of(cls, nodes: list[NodeData], seeds: list[Seed], source: str) -> ClusterReport:
        report = cls(source, nodes, seeds=seeds)
        for n in nodes:
            report.tally.merge(n.tally)
            report.queued.update(n.queued)
            for pattern in n.blocked:
                report.blocked.set(pattern, 1.0)
        return report

    def host_rows(self) -> list[dict[str, Any]]:
        """One row per host the crawl fetched, refused or still has queued; by host name."""
        hosts = self.tally.hosts
        rows = []
        for host in sorted(set(hosts) | set(self.queued)):
            r = hosts.get(host) or HostRow()
            failures = r.failures or Counter()
            row: dict[str, Any] = {"host": host, "fetched": r.fetched, "bytes": r.bytes}
            row.update(zip(CLASS_COLUMNS, r.status))
            row.update(failures=sum(failures.values()), failures_by_reason=dict(sorted(failures.items())),
                       robots_fetches=r.robots_fetches, robots_denied=r.robots_denied, dropped=r.dropped,
                       queued=self.queued.get(host, 0), blocked=bool(self.blocked) and self.blocked.matches(host))
            rows.append(row)
        return rows

    def status_rows(self) -> list[dict[str, Any]]:
        return [{"status": code, "class": f"{code // 100}xx", "responses": n}
                for code, n in sorted(self.tally.codes.items())]

    def mime_rows(self) -> list[dict[str, Any]]:
        total = sum(self.tally.mime.values())
        return [{"mime_type": mime, "responses": n, "share": round(n / total, 4) if total else 0.0}
                for mime, n in sorted(self.tally.mime.items(), key=lambda kv: (-kv[1], kv[0]))]

    def seed_rows(self) -> list[dict[str, Any]]:
        """Per seed: the pages reached from it (their URLs carried its id, so they are within its scope),
        then the hosts its scope covers with their pages, bytes and queued URLs (docs/operations.md)."""
        t, hosts = self.tally, self.tally.hosts
        rows = []
        for seed in self.seeds:
            key = f"{fingerprint(seed.url):016x}"
            covered = seed.scope.hosts(hosts)
            rows.append({"seed": seed.url, "scope": seed.scope.name, "fetched": t.seed_pages[key],
                         "status_2xx": t.seed_ok[key], "hosts": len(covered),
                         "hosts_fetched": sum(hosts[h].fetched for h in covered),
                         "bytes": sum(hosts[h].bytes for h in covered),
                         "queued": sum(self.queued.get(h, 0) for h in covered)})
        return rows

    def summary(self) -> dict[str, Any]:
        t = self.tally
        blocked_urls: Counter = Counter()
        for n in self.nodes:
            blocked_urls.update(n.blocked_urls)
        page_classes = {cls: n for (cls, kind), n in sorted(t.pages.items()) if kind == "page"}
        return {
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "source": self.source,
            "nodes": [{"node": n.node, "from": n.source, "fetched": n.tally.pages_fetched(),
                       "fetches": n.tally.fetches} for n in self.nodes],
            "hosts": len(t.hosts), "fetched": t.pages_fetched(), "fetches": t.fetches,
            "status": page_classes, "bytes": sum(t.bytes.values()),
            "failures": sum(t.errors.values()), "failures_by_reason": dict(sorted(t.errors.items())),
            "robots_fetches": t.robots_fetches, "robots_denied": t.robots_denied,
            "robots_unreachable": t.robots_unreachable, "dropped": dict(sorted(t.dropped.items())),
            "links": t.links, "queued": sum(self.queued.values()),
            "queued_hosts": sum(1 for n in self.queued.values() if n),
            "blocked": sorted(self.blocked.as_dict()), "blocked_urls": dict(blocked_urls),
            "seeds": len(self.seeds), "unreadable_lines": t.bad_lines,
        }

"""What the console shows that no counter holds: pages per second over the last minutes, and per host.

A node's counters are totals; a chart of the crawl's pace needs their history,
and "which hosts are busiest or failing" needs counts per host. `HostTally`
keeps both for the node's page fetches (robots.txt excluded, as in
`crawler status`, but for its failures), fed once per fetch from the node's
records.

Hot path (once per page): a second's slot bumped in a fixed ring, one dict
probe per host. Memory is bounded: past `MAX_HOSTS` hosts the tally keeps
the most failing and the busiest half and forgets the rest (a forgotten host
counts again from zero if it comes back), so on a crawl of millions of hosts
the lists are those of the hosts that matter, not a census. The counts are
this process's, since its start: the chart and lists of a restarted node
start over, while the node table's totals (from /metrics) go on.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from crawler.fetch import FetchResult
from crawler.fetch.result import OK
from crawler.urls import host_of

WINDOW_S = 600                    # pages/s kept per second for this long (the chart's width)
MAX_HOSTS = 4096                  # hosts counted at once; past it the quieter half is forgotten
TOP_HOSTS = 10                    # hosts per list (busiest, failing) a node reports


@dataclass(slots=True)
class HostCounts:
    """One host's page fetches since the node started."""
    pages: int = 0                # fetches with an HTTP response
    bytes: int = 0                # their wire bytes
    errors: int = 0               # failed fetches (no complete response), by reason below
    status_4xx: int = 0
    status_5xx: int = 0
    reasons: Counter = field(default_factory=Counter)   # reason -> failed fetches

    @property
    def failures(self) -> int:
        """What ranks a failing host: no response, or a server error."""
        return self.errors + self.status_5xx

    def as_dict(self, host: str) -> dict:
        top = self.reasons.most_common(1)
        return {"host": host, "pages": self.pages, "bytes": self.bytes, "errors": self.errors,
                "status_4xx": self.status_4xx, "status_5xx": self.status_5xx,
                "reason": top[0][0] if top else ""}


class HostTally:
    """Per-second page counts over the last WINDOW_S seconds and per-host counts (bounded)."""

    def __init__(self, window_s: int = WINDOW_S, max_hosts: int = MAX_HOSTS,
                 clock: Callable[[], float] = time.time) -> None:
        self.window_s = window_s
        self.max_hosts = max_hosts
        self._clock = clock
        self._second = [0] * window_s          # the wall-clock second each slot counts
        self._pages = [0] * window_s
        self.hosts: dict[str, HostCounts] = {}
        self.forgotten = 0                     # hosts dropped to stay within max_hosts

    def record(self, result: FetchResult, kind: str) -> None:
        """Count one fetch as the node's counters do: a response is a page, a reason other than "ok" a
        failure (a response cut at a size limit is both). Hot path: once per page. robots.txt fetches
        count only when they fail: a host whose robots.txt cannot be fetched is failing, though none of
        its pages is tried."""
        status = result.status
        failed = result.reason != OK
        page = kind == "page"
        if not (page or failed):
            return
        counts = self.hosts.get(host := host_of(result.url))
        if counts is None:
            if len(self.hosts) >= self.max_hosts:
                self._forget()
            counts = self.hosts[host] = HostCounts()
        if failed:
            counts.errors += 1
            counts.reasons[result.reason] += 1
        if status and page:
            counts.pages += 1
            counts.bytes += result.wire_bytes
            if status >= 500:
                counts.status_5xx += 1
            elif status >= 400:
                counts.status_4xx += 1
            now = int(self._clock())
            slot = now % self.window_s
            if self._second[slot] != now:
                self._second[slot], self._pages[slot] = now, 0
            self._pages[slot] += 1

    def _forget(self) -> None:
        """Keep half: the most failing (up to a quarter), then the busiest. Amortized: the next pruning
        comes max_hosts / 2 new hosts later."""
        hosts = self.hosts
        failing = sorted((h for h in hosts if hosts[h].failures), key=lambda h: hosts[h].failures,
                         reverse=True)[:self.max_hosts // 4]
        kept = {h: hosts[h] for h in failing}
        for h in sorted(hosts, key=lambda h: hosts[h].pages, reverse=True):
            if len(kept) >= self.max_hosts // 2:
                break
            kept.setdefault(h, hosts[h])
        self.forgotten += len(hosts) - len(kept)
        self.hosts = kept

    def series(self, now: int | None = None) -> tuple[int, list[int]]:
        """(first second, pages per second) for the WINDOW_S whole seconds before `now` (the current,
        partial second left out)."""
        end = int(self._clock()) if now is None else now
        start = end - self.window_s
        out = []
        for second in range(start, end):
            slot = second % self.window_s
            out.append(self._pages[slot] if self._second[slot] == second else 0)
        return start, out

    def top(self, n: int = TOP_HOSTS) -> dict[str, list[dict]]:
        """The `n` busiest hosts (most pages) and the `n` most failing (failures > 0)."""
        hosts = self.hosts
        busiest = sorted(hosts, key=lambda h: (-hosts[h].pages, h))[:n]
        failing = sorted((h for h in hosts if hosts[h].failures), key=lambda h: (-hosts[h].failures, h))[:n]
        return {"busiest": [hosts[h].as_dict(h) for h in busiest],
                "failing": [hosts[h].as_dict(h) for h in failing]}

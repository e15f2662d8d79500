"""Two-level scheduling (Cao, Jiang and Singh): which ready host next, which URL of it next.

A host policy turns what the frontier knows of a host (its queued URLs and
their qualities, and EWMA estimates of its connect and response times) into
one number, higher first. The frontier asks only among hosts that politeness
already allows (DESIGN 2.6: politeness holds on top of any policy), so a
policy can never make a host be contacted early.

    bfs          -(sequence number of the host's oldest queued URL): FIFO over
                 the whole frontier, as close to breadth-first as per-host
                 queues allow.
    performance  R = P / T: expected pages per second of the next connection.
                 P = min(requests per connection, queued URLs); T = connect
                 time + P x response time, from the estimates.
    quality      the best quality among the host's queued URLs.
    capability   C = (quality sum of the P URLs) / T: expected quality per
                 second, the paper's crawl capability. The quality sum of the
                 next P URLs is estimated as P x the host's mean queued quality
                 (URLs spilled to disk are known only by chunk sums).

Estimates are exponentially weighted moving averages with weight `w` on the
history: est <- w * est + (1 - w) * sample, the first sample taken as it is
(Cao et al. use w = 0.8). A server never fetched uses the mean estimate over
all servers seen so far (or `default_*` before any), and is assumed to serve
`requests_per_connection` (50) requests on one persistent connection; a
known server's requests per connection is its fetches divided by the
connections it needed.

URL policies order URLs within a host: `fifo` (arrival order) or `quality`
(best first, among the URLs of the host held in RAM: spilled chunks keep
their arrival order between them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

HOST_POLICIES = ("bfs", "performance", "quality", "capability")
URL_POLICIES = ("fifo", "quality")

DEFAULT_CONNECT_S = 0.1
DEFAULT_RESPONSE_S = 0.5


@dataclass(slots=True)
class HostStats:
    """EWMA estimates of one server's connect and response times, and its connection reuse."""
    connect_s: float | None = None
    response_s: float | None = None
    fetches: int = 0
    connections: int = 0

    def observe(self, connect_s: float | None, response_s: float, weight: float) -> None:
        """One fetch: `connect_s` is None when the request reused an open connection."""
        self.fetches += 1
        if connect_s is not None:
            self.connections += 1
            self.connect_s = connect_s if self.connect_s is None else weight * self.connect_s + (1 - weight) * connect_s
        self.response_s = (response_s if self.response_s is None
                           else weight * self.response_s + (1 - weight) * response_s)

    def requests_per_connection(self, unknown: float) -> float:
        if not self.connections:
            return unknown
        return self.fetches / self.connections


@dataclass(slots=True)
class GlobalEstimates:
    """Means over every server with an estimate: what an unknown server is assumed to be."""
    connect_sum: float = 0.0
    connect_n: int = 0
    response_sum: float = 0.0
    response_n: int = 0

    def connect_s(self) -> float:
        return self.connect_sum / self.connect_n if self.connect_n else DEFAULT_CONNECT_S

    def response_s(self) -> float:
        return self.response_sum / self.response_n if self.response_n else DEFAULT_RESPONSE_S

    def replace(self, before: HostStats | None, after: HostStats) -> None:
        """Keep the sums equal to the sum of every host's current estimates."""
        if before is not None:
            if before.connect_s is not None:
                self.connect_sum -= before.connect_s
                self.connect_n -= 1
            if before.response_s is not None:
                self.response_sum -= before.response_s
                self.response_n -= 1
        if after.connect_s is not None:
            self.connect_sum += after.connect_s
            self.connect_n += 1
        if after.response_s is not None:
            self.response_sum += after.response_s
            self.response_n += 1


@dataclass(frozen=True, slots=True)
class HostView:
    """What a host policy may look at: a snapshot of one host."""
    oldest_seq: int
    queued: int
    quality_sum: float
    quality_max: float
    stats: HostStats


ScoreFn = Callable[[HostView], float]


class HostPolicy:
    """Scores hosts for one of HOST_POLICIES; higher is fetched first."""

    def __init__(self, name: str, *, requests_per_connection: float, estimates: GlobalEstimates) -> None:
        if name not in HOST_POLICIES:
            raise ValueError(f"unknown host policy {name!r}; expected one of {', '.join(HOST_POLICIES)}")
        self.name = name
        self._rpc = requests_per_connection
        self._est = estimates
        self.score: ScoreFn = getattr(self, f"_{name}")

    def pages_and_time(self, view: HostView) -> tuple[float, float]:
        """(P, T) of the paper: pages the next connection is expected to serve, and its seconds."""
        s = view.stats
        pages = min(s.requests_per_connection(self._rpc), float(view.queued))
        connect = s.connect_s if s.connect_s is not None else self._est.connect_s()
        response = s.response_s if s.response_s is not None else self._est.response_s()
        return pages, connect + pages * response

    @staticmethod
    def _bfs(view: HostView) -> float:
        return -float(view.oldest_seq)

    def _performance(self, view: HostView) -> float:
        pages, seconds = self.pages_and_time(view)
        return pages / seconds if seconds > 0 else float("inf")

    @staticmethod
    def _quality(view: HostView) -> float:
        return view.quality_max

    def _capability(self, view: HostView) -> float:
        pages, seconds = self.pages_and_time(view)
        if view.queued <= 0:
            return 0.0
        quality = view.quality_sum / view.queued * pages
        return quality / seconds if seconds > 0 else float("inf")


def url_key(policy: str) -> Callable[[int, float], float]:
    """The within-host ordering key of a URL (smaller first) from its sequence number and quality."""
    if policy == "fifo":
        return lambda seq, quality: float(seq)
    if policy == "quality":
        return lambda seq, quality: -quality
    raise ValueError(f"unknown URL policy {policy!r}; expected one of {', '.join(URL_POLICIES)}")

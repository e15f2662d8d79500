"""Politeness and completeness checks from the server's side of a crawl.

Reads the access log of the test web (server.py, `start`/`end`) or of nginx
(static.py's JSON `log_format`, `msec`/`request_time`, start = end - duration)
into `Request` records, then answers the questions a crawler test asks:

- `overlaps`: were two requests to one host ever in flight at once?
- `short_gaps`: did the crawler wait long enough after each request to a host?
  Per host, in start order, `next.start - prev.end` must be at least
  `max(min_gap_s[host], delay_factor * (prev.end - prev.start))` minus a
  tolerance (1 ms by default; nginx's times have 1 ms resolution, so pass
  2-3 ms for its logs).
- `duplicates`: was any URL requested more than once?
- `compare`: which manifest URLs were never requested, which requests were
  not in the manifest.

Server-side durations are shorter than what the crawler measures (they
exclude the network), so a crawler honouring `k * x` with its own x always
passes the server-side check.

A host is its name: http:// and https:// requests to one name are one host
for every politeness check (the crawler's frontier keys hosts by name, one
request in flight per name whatever the scheme), while URLs (`compare`,
`duplicates`) keep the scheme: http://h/p (a 301) and https://h/p are two.
A log line without a scheme (older logs) is http.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .manifest import WebManifest

TOLERANCE_S = 0.001
ROBOTS_PATH = "/robots.txt"
HTTP = "http"


@dataclass(frozen=True)
class Request:
    """One request as the server saw it."""

    host: str
    path: str
    start: float
    end: float
    status: int
    peer: str = ""
    bytes: int = 0
    method: str = "GET"
    ua: str = ""
    scheme: str = HTTP

    @property
    def duration_s(self) -> float:
        return self.end - self.start

    def url(self, port: int, tls_port: int = 0) -> str:
        """The request as a manifest URL (scheme://host:port/path, the port of its scheme)."""
        return f"{self.scheme}://{self.host}:{port if self.scheme == HTTP else tls_port}{self.path}"


@dataclass(frozen=True)
class Overlap:
    host: str
    first: Request
    second: Request


@dataclass(frozen=True)
class Gap:
    """A gap between two requests to `host` shorter than required."""

    host: str
    prev: Request
    next: Request
    gap_s: float
    required_s: float


@dataclass
class Comparison:
    missing: set[str] = field(default_factory=set)
    """Manifest URLs (fetched or robots) never requested."""
    unexpected: set[str] = field(default_factory=set)
    """Requested URLs the manifest does not list."""
    duplicates: dict[str, int] = field(default_factory=dict)
    """URLs requested more than once, with the count."""
    forbidden: set[str] = field(default_factory=set)
    """Requested URLs the manifest says must never be sent (refused or disallowed)."""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.duplicates or self.forbidden)


def read_access_log(path: str | Path) -> list[Request]:
    """Requests of a testweb or nginx JSON access log, in file order (a torn last line is skipped)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line still being written
            out.append(_request(d))
    return out


def _request(d: dict) -> Request:
    if "start" in d:
        start, end = float(d["start"]), float(d["end"])
    else:  # nginx: msec = end of request (log time), request_time = duration
        end = float(d["msec"])
        start = end - float(d["request_time"])
    return Request(host=str(d.get("host", "")).lower(), path=str(d.get("path", "")), start=start, end=end,
                   status=int(d.get("status", 0)), peer=str(d.get("peer", "")), bytes=int(d.get("bytes", 0) or 0),
                   method=str(d.get("method", "GET")), ua=str(d.get("ua", "")),
                   scheme=str(d.get("scheme") or HTTP).lower())


def by_host(requests: Iterable[Request], include_robots: bool = True) -> dict[str, list[Request]]:
    """Requests grouped by host name (both schemes), each list in start order."""
    groups: dict[str, list[Request]] = defaultdict(list)
    for r in requests:
        if include_robots or r.path != ROBOTS_PATH:
            groups[r.host].append(r)
    for rs in groups.values():
        rs.sort(key=lambda r: (r.start, r.end))
    return dict(groups)


def overlaps(requests: Iterable[Request]) -> list[Overlap]:
    """Pairs of requests to one host whose [start, end] intervals intersect."""
    found = []
    for host, rs in by_host(requests).items():
        latest: Request | None = None
        for r in rs:
            if latest is not None and r.start < latest.end:
                found.append(Overlap(host, latest, r))
            if latest is None or r.end > latest.end:
                latest = r
    return found


def short_gaps(requests: Iterable[Request], min_gap_s: dict[str, float] | float, delay_factor: float,
               tolerance_s: float = TOLERANCE_S, include_robots: bool = True) -> list[Gap]:
    """Consecutive requests to a host closer than max(min gap, delay_factor * previous duration)."""
    found = []
    for host, rs in by_host(requests, include_robots).items():
        floor_s = min_gap_s.get(host, 0.0) if isinstance(min_gap_s, dict) else float(min_gap_s)
        for prev, nxt in zip(rs, rs[1:]):
            required = max(floor_s, delay_factor * prev.duration_s)
            gap = nxt.start - prev.end
            if gap < required - tolerance_s:
                found.append(Gap(host, prev, nxt, gap, required))
    return found


END_LAG_TOLERANCE_S = 0.025       # how late a loaded server may stamp a response's end (see below)


def fetch_durations(crawl_records: Iterable[dict]) -> dict[str, float]:
    """URL -> fetch seconds as the crawler measured them, from its crawl log records."""
    return {r["url"]: r["duration_s"] for r in crawl_records if r.get("status")}


# A crawl-log line is written this soon after its response (a re-fetch after a restart comes later).
MATCH_WINDOW_S = 1.0


def request_durations(requests: Iterable[Request], crawl_records: Iterable[dict], manifest: WebManifest
                      ) -> Callable[[Request], float]:
    """Request -> the fetch time the crawler measured for that very request, for a crawl where a URL may
    be fetched more than once (restarts): each request is matched to the first crawl-log line of its URL
    written after it started and at most MATCH_WINDOW_S after it ended (`t`): no earlier fetch's line can
    come after a later fetch started, while a loaded server stamps `end` late, after the crawler logged.
    A request with no such line (a request the kill cut: no answer was recorded) counts the
    server's own start-to-end time less END_LAG_TOLERANCE_S, the most a loaded server stamps `end` late.
    Counting 0 s there hid a real shortfall after a restart (a 10 s page re-fetched 46 s later, 60 s
    due); the server's full time flagged fast pages the crawler had timed a millisecond shorter."""
    by_url: dict[str, list[tuple[float, float]]] = {}
    for r in crawl_records:
        if r.get("status") and "t" in r:
            by_url.setdefault(r["url"], []).append((float(r["t"]), float(r["duration_s"])))
    for lines in by_url.values():
        lines.sort()
    found: dict[tuple[str, str, str, float], float] = {}
    for req in requests:
        logged = by_url.get(req.url(manifest.port, manifest.tls_port))
        if not logged:
            continue
        i = bisect.bisect_left(logged, (req.start, -1.0))
        if i < len(logged) and logged[i][0] - req.end <= MATCH_WINDOW_S:
            found[(req.scheme, req.host, req.path, req.start)] = logged[i][1]
    return lambda req: found.get((req.scheme, req.host, req.path, req.start),
                                 max(0.0, req.duration_s - END_LAG_TOLERANCE_S))


def politeness_shortfalls(requests: Iterable[Request], manifest: WebManifest,
                          durations_s: dict[str, float] | Callable[[Request], float],
                          delay_factor: float, min_delay_s: float = 0.0,
                          end_tolerance_s: float = END_LAG_TOLERANCE_S, resolution_s: float = 0.0,
                          max_delay_s: float | None = None) -> list[str]:
    """Per host, consecutive requests must respect the crawler's delay, checked from the server's log.

    Sound from the server's side: a request's server `start` is never later than
    the crawler sending it, while the server's `end` stamp can lag the moment the
    crawler had the last byte (the server may be descheduled after writing). So:
    (a) next.start - prev.start >= max(k * x, min_delay, Crawl-delay), x being
        the fetch time the crawler measured (`durations_s`, URL -> seconds, from its
        crawl log; or a function of the request, `request_durations`, where a URL was
        fetched more than once), exactly;
    (b) next.start - prev.end >= max(min_delay, Crawl-delay) within `end_tolerance_s`, the
        allowance for the server stamping `end` late (on a loaded 2-core machine that
        reaches several milliseconds). (a) is exact.
    `resolution_s` allows for a server's coarse time stamps (nginx logs milliseconds,
    and start = end - duration carries two roundings). A host's Crawl-delay binds only
    after its robots.txt answered 200: a crawler cannot know it before (the requests of a
    robots.txt redirect, http -> https, come first). `max_delay_s`: the crawler's cap
    (`politeness.max_delay_s`) on k * x and Crawl-delay, where a crawl meets a very slow page.
    """
    cap = None if max_delay_s is None else max(max_delay_s, min_delay_s)
    problems = []
    for host, reqs in by_host(requests, True).items():
        crawl_delay = manifest.crawl_delay_s.get(host, 0.0)
        known = False           # Crawl-delay binds once the host's robots.txt has answered with its rules
        for prev, nxt in zip(reqs, reqs[1:]):
            known = known or (prev.path == ROBOTS_PATH and prev.status == 200)
            floor = max(min_delay_s, crawl_delay if known else 0.0)
            if cap is not None and floor > cap:
                floor = cap
            x = (durations_s(prev) if callable(durations_s)
                 else durations_s.get(prev.url(manifest.port, manifest.tls_port), 0.0))
            need = max(delay_factor * x, floor)
            if cap is not None and need > cap:
                need = cap
            if nxt.start - prev.start < need - resolution_s:
                problems.append(f"{host}: {prev.path} -> {nxt.path}: start gap {nxt.start - prev.start:.4f}s "
                                f"< {need:.4f}s")
            if nxt.start - prev.end < floor - end_tolerance_s - resolution_s:
                problems.append(f"{host}: {prev.path} -> {nxt.path}: gap {nxt.start - prev.end:.4f}s < {floor:.4f}s")
    return problems


def duplicates(requests: Iterable[Request], include_robots: bool = True) -> dict[tuple[str, str, str], int]:
    """(scheme, host, path) requested more than once, with the count."""
    counts = Counter((r.scheme, r.host, r.path) for r in requests if include_robots or r.path != ROBOTS_PATH)
    return {k: n for k, n in counts.items() if n > 1}


def requested_urls(requests: Iterable[Request], port: int, tls_port: int = 0) -> Counter[str]:
    """Count of each requested URL in the manifest's form (scheme://host:port/path)."""
    return Counter(r.url(port, tls_port) for r in requests)


def compare(requests: Iterable[Request], manifest: WebManifest) -> Comparison:
    """How a crawl's requests differ from the manifest's expected crawl."""
    got = requested_urls(requests, manifest.port, manifest.tls_port)
    expected = manifest.fetched | manifest.robots
    return Comparison(
        missing=expected - set(got),
        unexpected=set(got) - expected,
        duplicates={u: n for u, n in got.items() if n > manifest.requests_of(u)},
        forbidden=set(got) & (manifest.refused | manifest.disallowed),
    )

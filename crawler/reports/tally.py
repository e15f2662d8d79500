"""Per-host aggregates of a crawl, kept from the same events the crawl log records.

One `Tally` is fed either live (the node's `Records` calls `fetch` and `skip`
for every fetch and every URL refused after dequeuing, next to its crawl-log
line) or from crawl-log lines (`add_line`, for a finished crawl and for the
lines a killed node wrote after its last checkpoint). Both paths go through
`fetch`/`skip`, so the live numbers and the numbers read back from the logs
cannot drift apart. The node-level counts (`pages`, `bytes`, `errors`, ...)
are the ones the node's `PageCounts` and `/metrics` keep, counted the same way
(crawler/node/records.py, crawler/node/visit.py).

Hot path: one dict look-up and a few integer adds per fetch; no per-URL state
(a host's row is a handful of ints and, when it failed, a small Counter).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from crawler.urls import host_of

STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
OTHER_CLASS = "other"                 # a status outside 100-599 (a broken server's answer)
ROBOTS_ERROR_REASON = "robots_error_disallowed"   # visit.py: robots.txt unreachable past its retries


@dataclass(slots=True)
class HostRow:
    """What the crawl did with one host (these are the columns of hosts.csv, see docs/operations.md)."""
    fetched: int = 0
    """Page requests the host answered (any status; robots.txt not included)."""
    bytes: int = 0
    """Body bytes received from the host on the wire, robots.txt included (as crawler_crawl_bytes)."""
    status: list[int] = field(default_factory=lambda: [0] * (len(STATUS_CLASSES) + 1))
    """Page responses by status class: 1xx..5xx, then other."""
    failures: Counter | None = None
    """Fetches (pages and robots.txt) without a usable response, by reason (as crawler_crawl_fetch_errors)."""
    robots_fetches: int = 0
    """robots.txt requests made to the host (answered or not)."""
    robots_denied: int = 0
    """URLs robots.txt disallowed (not fetched)."""
    dropped: int = 0
    """URLs dropped unfetched: the origin failed for good, or its robots.txt stayed unreachable."""

    def frozen(self) -> tuple:
        """An immutable copy, cheap to take (the checkpoint's snapshot, on the event loop): `thaw` makes
        the JSON of it elsewhere."""
        return (self.fetched, self.bytes, tuple(self.status), dict(self.failures) if self.failures else None,
                self.robots_fetches, self.robots_denied, self.dropped)

    @staticmethod
    def thaw(frozen: tuple) -> dict[str, Any]:
        """`to_json` of a `frozen` copy."""
        fetched, wire, status, failures, robots_fetches, robots_denied, dropped = frozen
        out: dict[str, Any] = {"fetched": fetched, "bytes": wire, "status": list(status),
                               "robots_fetches": robots_fetches, "robots_denied": robots_denied, "dropped": dropped}
        if failures:
            out["failures"] = failures
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fetched": self.fetched, "bytes": self.bytes, "status": list(self.status),
                               "robots_fetches": self.robots_fetches, "robots_denied": self.robots_denied,
                               "dropped": self.dropped}
        if self.failures:
            out["failures"] = dict(self.failures)
        return out

    @classmethod
    def from_json(cls, data: dict) -> HostRow:
        status = [_count(n) for n in data.get("status", [])]
        if len(status) != len(STATUS_CLASSES) + 1:
            raise ValueError(f"status must hold {len(STATUS_CLASSES) + 1} counts, not {status!r}")
        failures = Counter({str(k): _count(n) for k, n in data.get("failures", {}).items()}) or None
        return cls(_count(data.get("fetched", 0)), _count(data.get("bytes", 0)), status, failures,
                   _count(data.get("robots_fetches", 0)), _count(data.get("robots_denied", 0)),
                   _count(data.get("dropped", 0)))

    def add(self, other: HostRow) -> None:
        self.fetched += other.fetched
        self.bytes += other.bytes
        self.status = [a + b for a, b in zip(self.status, other.status)]
        if other.failures:
            self.failures = (self.failures or Counter()) + other.failures
        self.robots_fetches += other.robots_fetches
        self.robots_denied += other.robots_denied
        self.dropped += other.dropped


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def _seed(value: object) -> str | None:
    """A crawl-log line's seed id: 16 hex digits, or None (not known)."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != 16:
        raise ValueError(f"not a seed id: {value!r}")
    int(value, 16)
    return value


_CLASS_INDEX = {c: i for i, c in enumerate(STATUS_CLASSES)}


class Tally:
    """Per-host rows plus the node-level counts, fed by fetches and skips (or their crawl-log lines)."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostRow] = {}
        self._watchers: list[set[str]] = []      # each reader's hosts changed since it last looked (`watch`)
        self.codes: Counter = Counter()          # page status code -> responses
        self.mime: Counter = Counter()           # page media type ("" when none) -> responses
        self.seed_pages: Counter = Counter()     # seed id (hex, as in the crawl log) -> page responses reached from it
        self.seed_ok: Counter = Counter()        # the same, 2xx only
        # The node's own counts, as PageCounts keeps them (crawler/node/totals.py).
        self.fetches = 0                         # page fetch attempts
        self.robots_fetches = 0
        self.pages: Counter = Counter()          # (status class, kind) -> responses
        self.bytes: Counter = Counter()          # status class -> wire bytes
        self.errors: Counter = Counter()         # reason -> fetches without a usable response
        self.links = 0
        self.robots_denied = 0
        self.robots_unreachable = 0
        self.dropped: Counter = Counter()        # reason -> URLs dropped: their origin is dead
        self.lines = 0                           # events counted (fetches and skips)
        self.bad_lines = 0                       # crawl-log lines that could not be read (add_line)

    def _row(self, host: str) -> HostRow:
        for changed in self._watchers:
            changed.add(host)
        row = self.hosts.get(host)
        if row is None:
            row = self.hosts[host] = HostRow()
        return row

    def fetch(self, url: str, kind: str, status: int, reason: str, wire_bytes: int, content_type: str | None,
              failure: str | None = None, links: int = 0, seed: str | None = None) -> None:
        """One fetch the node recorded (hot path); `seed` is the id of the seed its URL was reached from."""
        self.lines += 1
        row = self._row(host_of(url) or "")
        if kind == "robots":
            self.robots_fetches += 1
            row.robots_fetches += 1
        else:
            self.fetches += 1
            self.links += links
        if status:
            cls = f"{status // 100}xx"            # as crawler/node/records.py counts it; hosts.csv: 1xx..5xx, other
            self.pages[(cls, kind)] += 1
            self.bytes[cls] += wire_bytes
            row.bytes += wire_bytes
            if kind != "robots":
                row.fetched += 1
                row.status[_CLASS_INDEX.get(cls, len(STATUS_CLASSES))] += 1
                self.codes[status] += 1
                self.mime[content_type or ""] += 1
                if seed is not None:
                    self.seed_pages[seed] += 1
                    if cls == "2xx":
                        self.seed_ok[seed] += 1
        for why in (reason if reason != "ok" else None, failure):
            if why:
                self.errors[why] += 1
                if row.failures is None:
                    row.failures = Counter()
                row.failures[why] += 1

    def skip(self, url: str, reason: str, dropped: bool) -> None:
        """A URL dequeued and not fetched: robots.txt disallowed it, or its origin is dead."""
        self.lines += 1
        row = self._row(host_of(url) or "")
        if dropped:
            self.dropped[reason] += 1
            row.dropped += 1
        elif reason == ROBOTS_ERROR_REASON:
            self.robots_unreachable += 1
            row.dropped += 1
        else:
            self.robots_denied += 1
            row.robots_denied += 1

    def add_line(self, line: object) -> None:
        """One crawl-log line (crawler/node/records.py writes them); one it cannot read is counted in
        `bad_lines` and left out."""
        try:
            if not isinstance(line, dict):
                raise TypeError("not an object")
            url, kind, status, reason = line["url"], line.get("kind", "page"), line.get("status", 0), line["reason"]
            if not isinstance(url, str) or not isinstance(status, int) or not isinstance(reason, str):
                raise TypeError("url, status or reason of the wrong type")
            if "duration_s" in line:                 # a fetch (a skip has no duration)
                self.fetch(url, str(kind), status, reason, _count(line.get("bytes", 0)), line.get("content_type"),
                           line.get("failure"), _count(line.get("links", 0)), _seed(line.get("seed")))
            else:
                self.skip(url, reason, "dropped" in line)
        except (KeyError, TypeError, ValueError):
            self.bad_lines += 1

    def watch(self) -> set[str]:
        """A set that every host changed from now on joins, holding every host known now: a reader that
        copies rows (the checkpoint, the endpoint) copies those it finds there and clears it, instead of
        copying every row each time."""
        changed = set(self.hosts)
        self._watchers.append(changed)
        return changed

    def merge(self, other: Tally) -> None:
        """Add another tally (another node's, or the lines after a checkpoint)."""
        for host, row in other.hosts.items():
            self._row(host).add(row)
        for name in ("codes", "mime", "pages", "bytes", "errors", "dropped", "seed_pages", "seed_ok"):
            getattr(self, name).update(getattr(other, name))
        for name in ("fetches", "robots_fetches", "links", "robots_denied", "robots_unreachable", "lines",
                     "bad_lines"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    # --- plain JSON (the node's state file and its /control/report answer) -------------------------
    def totals_json(self) -> dict[str, Any]:
        """Everything but the host rows."""
        return {"codes": {str(k): n for k, n in sorted(self.codes.items())}, "mime": dict(sorted(self.mime.items())),
                "fetches": self.fetches, "robots_fetches": self.robots_fetches,
                "pages": [[cls, kind, n] for (cls, kind), n in sorted(self.pages.items())],
                "bytes": dict(self.bytes), "errors": dict(self.errors), "links": self.links,
                "robots_denied": self.robots_denied, "robots_unreachable": self.robots_unreachable,
                "dropped": dict(self.dropped), "lines": self.lines, "bad_lines": self.bad_lines,
                "seeds": {k: [n, self.seed_ok[k]] for k, n in sorted(self.seed_pages.items())}}

    def to_json(self) -> dict[str, Any]:
        return {**self.totals_json(), "hosts": {h: r.to_json() for h, r in self.hosts.items()}}

    @classmethod
    def from_json(cls, data: dict, hosts: dict[str, dict] | None = None) -> Tally:
        """The inverse of `to_json` (`hosts` given apart: the state file holds them one per line);
        raises ValueError/TypeError/KeyError on what is not a tally."""
        t = cls()
        t.codes = Counter({int(k): _count(n) for k, n in data["codes"].items()})
        t.mime = Counter({str(k): _count(n) for k, n in data["mime"].items()})
        t.pages = Counter({(str(c), str(k)): _count(n) for c, k, n in data["pages"]})
        for name in ("bytes", "errors", "dropped"):
            setattr(t, name, Counter({str(k): _count(n) for k, n in data[name].items()}))
        for name in ("fetches", "robots_fetches", "links", "robots_denied", "robots_unreachable", "lines",
                     "bad_lines"):
            setattr(t, name, _count(data.get(name, 0)))
        for seed, (pages, ok) in data.get("seeds", {}).items():      # absent in a state file of before seeds
            t.seed_pages[str(seed)], t.seed_ok[str(seed)] = _count(pages), _count(ok)
        for host, row in (data.get("hosts", {}) if hosts is None else hosts).items():
            t.hosts[str(host)] = HostRow.from_json(row)
        return t

    def pages_fetched(self) -> int:
        """Page responses (robots.txt excluded): the summary's and `crawler status`'s `pages`."""
        return sum(n for (_, kind), n in self.pages.items() if kind == "page")

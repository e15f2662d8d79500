"""The node's page counts and the crawl's totals across restarts.

`PageCounts` are plain integers bumped on the hot path (one attribute add per
event, no locks: the node is one event loop); metrics and the summary read
them. `CrawlTotals` is the part of the state protocol (crawler/state.py) that
saves them, so the crawl's figures go on across restarts, and
`saved_summary` reads them back for a node that died before printing its own.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.state import StateStore

if TYPE_CHECKING:
    from crawler.node.node import Node

log = logging.getLogger("crawler.node")


@dataclass
class PageCounts:
    """Plain integers on the hot path; metrics and the summary read them."""
    fetches: int = 0                 # page fetch attempts (robots.txt excluded)
    robots_fetches: int = 0
    pages: Counter = field(default_factory=Counter)     # (status_class, kind) -> n
    bytes: Counter = field(default_factory=Counter)     # status_class -> wire bytes
    errors: Counter = field(default_factory=Counter)    # reason -> n
    links_extracted: int = 0
    links_truncated: int = 0         # links past parse.max_links_per_page, dropped (pages with links_dropped)
    robots_denied: int = 0
    robots_parked: int = 0           # URLs put back because their robots.txt was unreachable
    robots_unreachable: int = 0      # URLs dropped: robots.txt unreachable past robots.error_max_retries
    dropped: Counter = field(default_factory=Counter)   # reason -> URLs dropped unfetched: their origin is dead
    duplicate_content: int = 0
    worker_errors: int = 0
    retries: int = 0

    def __add__(self, other: PageCounts) -> PageCounts:
        return PageCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(PageCounts)})

    def to_json(self) -> dict:
        """Plain JSON: Counter keys that are tuples become lists, as [key, n] pairs."""
        out = {}
        for f in fields(PageCounts):
            value = getattr(self, f.name)
            out[f.name] = [[list(k) if isinstance(k, tuple) else k, n] for k, n in sorted(value.items())] \
                if isinstance(value, Counter) else value
        return out

    @classmethod
    def from_json(cls, data: dict) -> PageCounts:
        """The inverse of `to_json`; unknown keys are ignored, wrong types raise ValueError/TypeError."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.default_factory is Counter:
                values[f.name] = Counter({tuple(k) if isinstance(k, list) else str(k): _count(n) for k, n in value})
            else:
                values[f.name] = _count(value)
        return cls(**values)

    @property
    def page_fetches(self) -> int:
        """Fetches of pages (robots.txt excluded) that had an HTTP response."""
        return sum(n for (_, kind), n in self.pages.items() if kind == "page")


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


class CrawlTotals:
    """The crawl's totals as a part of the state protocol (crawler/state.py).

    Prometheus counters start at 0 in every process (`rate()` handles the
    reset); the crawl's own totals -- pages, fetches, bytes by status class,
    errors, robots fetches and denials, filter rejections -- go on across
    restarts: the summary, `crawler status` and the `crawler_crawl_*` gauges
    show what was restored plus what this process did. Saved at every
    checkpoint, so after SIGKILL they are those of the last checkpoint.
    """

    name = "counters"
    VERSION = 1

    def __init__(self, node: Node) -> None:
        self.node = node

    def save(self, store: StateStore, *, final: bool = False) -> None:
        node = self.node
        store.write(self.name, self.VERSION, [{"counters": node.totals().to_json(),
                                               "filter_rejected": dict(node.filter_rejected_total())}])

    def restore(self, store: StateStore) -> None:
        records = store.read(self.name, self.VERSION)
        if not records:
            return
        rec = records[0]
        counts = PageCounts.from_json(rec["counters"])
        rejected = Counter({str(k): _count(n) for k, n in rec.get("filter_rejected", {}).items()})
        self.node.restored, self.node.restored_filter_rejected = counts, rejected
        log.info("node %d: crawl totals restored: %d fetches, %d pages", self.node.node_id, counts.fetches,
                 counts.page_fetches)


def saved_summary(node_id: int, data_dir: str | Path, why: str) -> dict | None:
    """A summary of a node that printed none (killed, or its launcher was), from the totals it saved at its
    last checkpoint (`state/counters.jsonl`); None when it saved none. Totals only: the crawl's, as in a
    summary; what it did after that checkpoint is not in them."""
    records = StateStore(Path(data_dir) / "state").read(CrawlTotals.name, CrawlTotals.VERSION)
    if not records:
        return None
    try:
        c = PageCounts.from_json(records[0]["counters"])
    except (KeyError, TypeError, ValueError):
        return None
    return {"node": node_id, "stop": why, "from_saved_state": True,
            "pages": c.page_fetches, "fetches": c.fetches,
            "robots_fetches": c.robots_fetches, "bytes": sum(c.bytes.values()), "errors": sum(c.errors.values()),
            "errors_by_reason": dict(c.errors), "robots_denied": c.robots_denied, "worker_errors": c.worker_errors}

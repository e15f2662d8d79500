"""Crawl scope: which of a page's links belong to the crawl, by distance from a seed, the seed's scope and URL
patterns (the `scope` section; docs/scope.md).

Sits right after the URL filter (`URLFilter`), on canonical URLs, and counts
every rejection by reason in the same counter (so the node's totals and
`crawler_filter_rejected_total{reason}` show them):

- ``hops``: the link is more than ``scope.max_hops`` links from its seed;
- ``scope``: outside the scope of the seed it descends from (``host``,
  ``domain``, ``prefix``; ``any`` has no bound);
- ``include``: ``scope.include`` is given and the URL matches none of it;
- ``exclude``: the URL matches one of ``scope.exclude``.

All links of one page share one distance and one seed, so `admit` takes them
per page: a page past the hop limit costs one comparison, not one per link.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from crawler.config.schema import ScopeConfig
from crawler.urls import fingerprint, host_of

REASONS = ("hops", "scope", "include", "exclude")
WWW = "www."


def compile_patterns(patterns: list[str], key: str) -> list[re.Pattern[str]]:
    """The compiled expressions of a pattern list; a bad one is a ValueError naming the key and the entry."""
    compiled = []
    for i, pattern in enumerate(patterns):
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ValueError(f"{key}[{i}]: {pattern!r} is not a regular expression: {exc}") from None
    return compiled


@dataclass(frozen=True, slots=True)
class Seed:
    """A canonical seed URL and its scope (host | domain | prefix | any)."""
    url: str
    scope: str = "any"

    @property
    def fp(self) -> int:
        """The seed's id: its URL's fingerprint (stable whatever the order of the seed list)."""
        return fingerprint(self.url)

    def bound(self) -> str | None:
        """What a URL must share with the seed to be in its scope: the host, the domain, the URL prefix."""
        if self.scope == "host":
            return host_of(self.url)
        if self.scope == "domain":
            host = host_of(self.url)
            return host[len(WWW):] if host.startswith(WWW) and host.count(".") > 1 else host
        if self.scope == "prefix":
            path = self.url.split("?", 1)[0]
            return path[:path.rfind("/") + 1]
        return None


def in_bound(url: str, scope: str, bound: str) -> bool:
    """Whether a canonical URL is inside a seed's bound (`Seed.bound`)."""
    if scope == "prefix":
        return url.startswith(bound)
    host = host_of(url)
    if scope == "host":
        return host == bound
    return host == bound or host.endswith("." + bound)


class ScopeFilter:
    """The scope checks of canonical URLs; rejections go to `rejected` (the URL filter's counter)."""

    def __init__(self, config: ScopeConfig, seeds: list[Seed], rejected: Counter) -> None:
        self.max_hops = config.max_hops
        self._include = compile_patterns(config.include, "scope.include")
        self._exclude = compile_patterns(config.exclude, "scope.exclude")
        self.rejected = rejected
        self.seed_fps = frozenset(s.fp for s in seeds)
        self._bounds: dict[int, tuple[str, str]] = {}
        for s in seeds:
            bound = s.bound()
            if bound is not None:
                self._bounds[s.fp] = (s.scope, bound)
        self.active = bool(self.max_hops is not None or self._include or self._exclude or self._bounds)

    def reason(self, url: str, bound: tuple[str, str] | None = None) -> str | None:
        """None when the URL is in scope (hops aside), else the reason it is not."""
        if bound is not None and not in_bound(url, *bound):
            return "scope"
        if self._include and not any(p.search(url) for p in self._include):
            return "include"
        if self._exclude and any(p.search(url) for p in self._exclude):
            return "exclude"
        return None

    def admit(self, urls: list[str], hops: int, seed: int) -> tuple[list[str], list[str]]:
        """(kept, cut for hops) of one page's links at distance `hops` from seed `seed` (hot path: once
        per page). The links cut for hops are returned unchecked otherwise: a nearer path may bring
        them back (crawler/filter/nearer.py), and they are checked then."""
        if not self.active or not urls:
            return urls, []
        if self.max_hops is not None and hops > self.max_hops:
            self.rejected["hops"] += len(urls)
            return [], urls
        bound = self._bounds.get(seed)
        if bound is None and not self._include and not self._exclude:
            return urls, []
        kept = []
        rejected = self.rejected
        why = self.reason
        for url in urls:
            r = why(url, bound)
            if r is None:
                kept.append(url)
            else:
                rejected[r] += 1
        return kept, []

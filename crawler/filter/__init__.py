"""URL filter: drop links the crawl must not fetch, before they cost anything.

Sits between the link extractor and the host splitter (DESIGN 1). Its input is
canonical URLs (so the scheme is already http or https and the host is
lower-case); it rejects by syntax and policy, and counts every rejection by
reason so an operator can see what the crawl is leaving out:

- ``too_long``: longer than ``filter.max_url_bytes``;
- ``domain``: host outside ``allow_domains`` or inside ``deny_domains`` (suffix
  match on label boundaries: ``example.org`` matches ``a.example.org``);
- ``depth``: more path segments than ``max_path_depth`` (depth = number of '/'
  in the path: ``/`` is 1, ``/a/b.html`` is 2) -- the usual calendar trap;
- ``repeated_segment``: one path segment more than ``max_repeated_segments``
  times (``/a/b/a/b/a/b/...``) -- the usual relative-link trap;
- ``extension``: a path ending in one of ``deny_extensions``;
- ``host_budget``: the host already had ``max_pages_per_host`` new URLs admitted.
  The budget is charged only for new URLs (after the DUE), so duplicates
  never use it up; see `HostBudget`.

The crawl scope (`scope.py`: hops from a seed, the seed's scope, include and
exclude patterns; `nearer.py`: a nearer path to a page cut at the hop limit)
comes right after and counts its reasons in the same counter (docs/scope.md).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from crawler.config.schema import FilterConfig

REASONS = ("too_long", "domain", "depth", "repeated_segment", "extension", "host_budget")


def _split(url: str) -> tuple[str, str]:
    """(host, path) of a canonical URL by slicing; no full parse on the hot path."""
    start = url.find("://") + 3
    slash = url.find("/", start)
    if slash < 0:
        hostport, path = url[start:], "/"
    else:
        hostport, path = url[start:slash], url[slash:]
    q = path.find("?")
    if q >= 0:
        path = path[:q]
    if hostport.startswith("["):
        host = hostport[: hostport.find("]") + 1]
    else:
        colon = hostport.rfind(":")
        host = hostport if colon < 0 else hostport[:colon]
    return host, path


def _suffix_match(host: str, suffixes: frozenset[str]) -> bool:
    """Whether the host or one of its parent domains is in the set: one lookup per label, so an
    allow list of thousands of domains (a focused crawl) costs no more per link than one domain."""
    while True:
        if host in suffixes:
            return True
        dot = host.find(".")
        if dot < 0:
            return False
        host = host[dot + 1:]


@dataclass
class URLFilter:
    """Stateless checks on canonical URLs; `rejected` counts by reason."""

    config: FilterConfig
    rejected: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        c = self.config
        self._max_len = c.max_url_bytes
        self._max_depth = c.max_path_depth
        self._max_repeat = c.max_repeated_segments
        self._allow = frozenset(d.lower().strip(".") for d in c.allow_domains)
        self._deny = frozenset(d.lower().strip(".") for d in c.deny_domains)
        self._ext = tuple(e.lower() for e in c.deny_extensions)

    def check(self, url: str) -> str | None:
        """None when the URL passes, else the reason it is dropped."""
        if len(url) > self._max_len and len(url.encode("utf-8")) > self._max_len:
            return "too_long"
        host, path = _split(url)
        if self._allow and not _suffix_match(host, self._allow):
            return "domain"
        if self._deny and _suffix_match(host, self._deny):
            return "domain"
        slashes = path.count("/")
        if slashes > self._max_depth:
            return "depth"
        if slashes > self._max_repeat:
            parts = path.split("/")
            # A segment can occur more than max_repeat times only if there are at least
            # max_repeat duplicates in all: the cheap set() test spares most paths the Counter.
            if len(parts) - len(set(parts)) >= self._max_repeat:
                counts = Counter(parts)
                counts.pop("", None)
                if counts and max(counts.values()) > self._max_repeat:
                    return "repeated_segment"
        if self._ext and path.lower().endswith(self._ext):
            return "extension"
        return None

    def filter(self, urls: list[str]) -> list[str]:
        """The URLs that pass, in order, repeats kept; rejections counted per occurrence.

        Hot path, one call per page: a page repeats ~30% of its links, so each
        distinct URL is checked once.
        """
        kept = []
        check = self.check
        verdicts: dict[str, str | None] = {}
        for url in urls:
            if url in verdicts:
                reason = verdicts[url]
            else:
                reason = verdicts[url] = check(url)
            if reason is None:
                kept.append(url)
            else:
                self.rejected[reason] += 1
        return kept

    def stats(self) -> dict:
        return {"rejected": dict(self.rejected)}


@dataclass
class HostBudget:
    """Per-host cap on new URLs (``filter.max_pages_per_host``; 0 = none)."""

    limit: int
    admitted: Counter = field(default_factory=Counter)
    refused: int = 0

    def admit(self, host: str) -> bool:
        if not self.limit:
            return True
        if self.admitted[host] >= self.limit:
            self.refused += 1
            return False
        self.admitted[host] += 1
        return True

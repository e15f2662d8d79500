"""robots.txt (RFC 9309): fetched once per origin, parsed by protego, cached with expiry.

The worker asks `RobotsCache.lookup(origin)` before each fetch (a dict lookup);
on None it fetches the robots.txt itself through `RobotsCache.fetch(origin)`,
as a polite request to that host, and logs every FetchResult it returns.

How a response becomes rules (RFC 9309 section 2.3.1):
- 2xx: parsed with protego. Only the first `robots.max_bytes` bytes count
  (cut at the last complete line); a longer file is not an error. Bytes are
  decoded as UTF-8 with replacement, so binary junk parses to nothing rather
  than raising. source="fetched", trusted for `robots.cache_s`.
- 3xx: followed, up to 5 hops, to any origin (the RFC asks crawlers to follow
  redirects "even across authorities", and http -> https or example.org ->
  www.example.org are the common cases); the rules apply to the origin asked
  for. More hops, or a target that is not a fetchable http(s) URL, count as
  unavailable.
- 4xx except 429: unavailable, everything allowed (source="missing",
  cached `cache_s`).
- 429, 5xx, or any network failure (DNS, connect, timeout, refused private
  address...): unreachable, everything disallowed (source="error") for
  `robots.error_retry_s`, then fetched again. 429 is treated like 5xx, as
  Google does: a server that asks us to slow down is not telling us its
  robots.txt is missing.
- `robots.enabled: false`: every origin allows everything (source="disabled").

The group applying to us is chosen by the product token, the first word of
the User-Agent before "/" ("ExampleCrawler/1.0 (+url)" -> "ExampleCrawler"),
case-insensitively, with protego's matching (the most specific matching
group, else "*"). A group's `User-agent: Foo Bar` line is read up to the first
space, as Google's parser does. Crawl-delay comes from the same group.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin

from protego import Protego

from crawler.config.schema import RobotsConfig
from crawler.fetch import result as R
from crawler.fetch.fetcher import Fetcher
from crawler.fetch.result import FetchResult

log = logging.getLogger(__name__)

FETCHED = "fetched"
MISSING = "missing"
ERROR = "error"
DISABLED = "disabled"

MAX_REDIRECTS = 5                          # RFC 9309 2.3.1.2: follow at least five
THREAD_PARSE_BYTES = 64 * 1024             # larger files (up to ~0.5 s to parse) are parsed off the event loop
DEFAULT_MAX_ENTRIES = 200_000              # origins cached before the oldest are dropped
_EVICT_KEEP_FRACTION = 0.875
_TOO_MANY_REQUESTS = 429
_LIMIT_REASONS = frozenset({R.BODY_TOO_LARGE, R.DECODED_TOO_LARGE})      # a long 2xx body is still usable
_UNUSABLE_TARGET_REASONS = frozenset({R.UNSUPPORTED_SCHEME, R.INVALID_URL, R.URL_TOO_LONG})
_BOM = "\ufeff"
# "User-agent: Foo Bar" -> "User-agent: Foo" (Google reads the value up to the first space).
_UA_VALUE_TAIL = re.compile(r"(?im)^([ \t]*user-?agent[ \t]*:[ \t]*[^\s#]+)[ \t]+[^#\r\n]*")


def origin_of(url: str) -> str:
    """'scheme://host[:port]' of an absolute URL, lower-case, without userinfo."""
    start = url.find("//")
    if start < 0:
        return url.lower()
    authority_start = start + 2
    end = len(url)
    for sep in "/?#":
        pos = url.find(sep, authority_start)
        if pos != -1 and pos < end:
            end = pos
    at = url.rfind("@", authority_start, end)
    if at != -1:
        return (url[:authority_start] + url[at + 1:end]).lower()
    return url[:end].lower()


def product_token(user_agent: str) -> str:
    """The robots.txt product token of a User-Agent: its first word, up to '/'."""
    words = user_agent.split()
    return words[0].split("/", 1)[0] if words else ""


def robots_text(body: bytes, max_bytes: int) -> str:
    """The part of a robots.txt body that counts, as text; never raises."""
    if len(body) > max_bytes:
        body = body[:max_bytes]
        cut = max(body.rfind(b"\n"), body.rfind(b"\r"))
        body = body[:cut + 1] if cut >= 0 else b""
    text = body.decode("utf-8", "replace")
    if text.startswith(_BOM):
        text = text[1:]
    return _UA_VALUE_TAIL.sub(r"\1", text)


@dataclass(slots=True)
class RobotsRules:
    """One origin's robots.txt, ready to answer `allowed(url)`."""

    source: str                            # "fetched" | "missing" | "error" | "disabled"
    expires: float                         # time.monotonic() deadline
    crawl_delay_s: float | None = None     # Crawl-delay of our group
    agent: str = ""                        # product token the rules are read for
    parser: Protego | None = field(default=None, repr=False, compare=False)
    sitemaps: tuple[str, ...] = ()

    @classmethod
    def parse(cls, body: bytes, agent: str, expires: float, max_bytes: int) -> "RobotsRules":
        """Rules of a 2xx robots.txt body."""
        text = robots_text(body, max_bytes)
        try:
            parser = Protego.parse(text)
            delay = parser.crawl_delay(agent)
            sitemaps = tuple(parser.sitemaps)
        except Exception:                  # noqa: BLE001 - a parser bug must not stop the crawl
            log.warning("robots.txt parser failed; allowing all", exc_info=True)
            return cls(FETCHED, expires, None, agent)
        return cls(FETCHED, expires, delay, agent, parser, sitemaps)

    def allowed(self, url: str) -> bool:
        """May `url` be fetched? Hot path: once per fetched URL."""
        parser = self.parser
        if parser is None:
            return self.source != ERROR
        try:
            return parser.can_fetch(url, self.agent)
        except ValueError:                 # a URL protego cannot split: do not fetch it
            return False


class RobotsCache:
    """robots.txt rules per origin: lookup (sync, cached) and fetch (async, through the Fetcher)."""

    def __init__(self, fetcher: Fetcher, config: RobotsConfig, user_agent: str, *,
                 max_entries: int = DEFAULT_MAX_ENTRIES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fetcher = fetcher
        self._config = config
        self._agent = product_token(user_agent)
        self._max_entries = max_entries
        self._clock = clock
        self._rules: dict[str, RobotsRules] = {}
        self._disabled = RobotsRules(DISABLED, float("inf"), agent=self._agent)
        self._lookups = {"hit": 0, "miss": 0, "expired": 0}
        self._by_source = {FETCHED: 0, MISSING: 0, ERROR: 0}
        self._requests = 0
        self._redirects = 0
        self._evictions = 0

    @property
    def agent(self) -> str:
        """The product token robots.txt groups are matched against."""
        return self._agent

    def lookup(self, origin: str) -> RobotsRules | None:
        """Cached rules of `origin`, or None if they must be fetched (not cached or expired)."""
        if not self._config.enabled:
            return self._disabled
        rules = self._rules.get(origin)
        if rules is None:
            self._lookups["miss"] += 1
            return None
        if rules.expires <= self._clock():
            self._lookups["expired"] += 1
            del self._rules[origin]
            return None
        self._lookups["hit"] += 1
        return rules

    async def fetch(self, origin: str) -> tuple[RobotsRules, list[FetchResult]]:
        """Fetch, parse and cache `origin`'s robots.txt; returns the rules and every fetch made."""
        if not self._config.enabled:
            return self._disabled, []
        results: list[FetchResult] = []
        url = origin + "/robots.txt"
        for hop in range(MAX_REDIRECTS + 1):
            res = await self._fetcher.fetch(url, max_body_bytes=self._config.max_bytes)
            results.append(res)
            self._requests += 1
            source = self._source_of(res, hop)
            if source is not None:
                break
            if hop == MAX_REDIRECTS:
                source = MISSING                          # too many hops: unavailable
                break
            try:
                url = urljoin(url, res.location)
            except ValueError:
                source = MISSING                          # an unusable Location: unavailable
                break
            self._redirects += 1
        rules = await self._make_rules(source, res)
        self._store(origin, rules)
        return rules, results

    def _source_of(self, res: FetchResult, hop: int) -> str | None:
        """What a robots.txt response means; None = a redirect to follow."""
        status = res.status
        if res.reason != R.OK:
            if 200 <= status < 300 and res.reason in _LIMIT_REASONS:
                return FETCHED
            if hop and res.reason in _UNUSABLE_TARGET_REASONS:
                return MISSING
            return ERROR
        if 200 <= status < 300:
            return FETCHED
        if 300 <= status < 400:
            return None if res.location else MISSING
        if status == _TOO_MANY_REQUESTS or status >= 500:
            return ERROR
        return MISSING

    async def _make_rules(self, source: str, res: FetchResult) -> RobotsRules:
        cfg = self._config
        now = self._clock()
        self._by_source[source] += 1
        if source == FETCHED:
            args = (res.body, self._agent, now + cfg.cache_s, cfg.max_bytes)
            if len(res.body) > THREAD_PARSE_BYTES:
                return await asyncio.to_thread(RobotsRules.parse, *args)
            return RobotsRules.parse(*args)
        if source == ERROR:
            return RobotsRules(ERROR, now + cfg.error_retry_s, agent=self._agent)
        return RobotsRules(MISSING, now + cfg.cache_s, agent=self._agent)

    def _store(self, origin: str, rules: RobotsRules) -> None:
        cache = self._rules
        if len(cache) >= self._max_entries and origin not in cache:
            now = self._clock()
            for key in [k for k, r in cache.items() if r.expires <= now]:
                del cache[key]
            keep = int(self._max_entries * _EVICT_KEEP_FRACTION)
            while len(cache) > keep:                     # oldest insertions first
                del cache[next(iter(cache))]
                self._evictions += 1
        cache[origin] = rules

    def stats(self) -> dict:
        """Lookups by result, fetched rules by source, requests made, cache size."""
        return {
            "lookups": dict(self._lookups),
            "by_source": dict(self._by_source),
            "requests": self._requests,
            "redirects": self._redirects,
            "cache_size": len(self._rules),
            "evictions": self._evictions,
        }

    async def close(self) -> None:
        """Nothing to release (the fetcher belongs to the caller); here for the component shape."""

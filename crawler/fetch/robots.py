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
  unavailable. When the chain ends at another origin's own `/robots.txt`, the
  answer is that origin's robots.txt too and is cached for it as well (unless
  it has a fresh entry), so `http://h/robots.txt -> https://h/robots.txt`
  costs two requests, not three. http and https stay separate origins
  (RFC 9309 2.3): nothing is cached for an origin that was not fetched.
- 4xx except 429: unavailable, everything allowed (source="missing",
  cached `cache_s`).
- A permanent failure (`result.PERMANENT`: the name does not exist, the
  certificate fails verification, only private addresses): source="dead",
  everything disallowed for `robots.dead_cache_s`; the node drops the
  origin's URLs at once, without a request, each counted by the reason.
- 429, 5xx, or any transient failure (timeouts, refused connections, DNS
  SERVFAIL or REFUSED, a TLS handshake failure): unreachable, everything
  disallowed (source="error") for a back-off that starts at
  `robots.error_retry_s` and is multiplied by `robots.error_backoff` per
  failure in a row (at most `robots.error_retry_max_s`), or for the answer's
  Retry-After if that is longer (at most `politeness.max_retry_after_s`);
  then fetched again. 429 is treated like 5xx, as Google does: a server that
  asks us to slow down is not telling us its robots.txt is missing.
- `robots.enabled: false`: every origin allows everything (source="disabled").

Each robots.txt request may take at most `robots.fetch_timeout_s`; one cut
there is a transient failure (total_timeout). A redirect to the same host
waits the host's politeness delay before its next request. With the back-off
keys this bounds how long an origin that never answers holds a crawl: at the
defaults, 2+4+8+16+32 s of waits and six fetches of at most 10 s, about two
minutes at worst.

An "error" entry counts the consecutive unreachable fetches of its origin
(`RobotsRules.failures`): the node parks the origin's URLs while that count
is within `robots.error_max_retries` and drops them after (crawler/node/visit.py).

Checkpoint (`save`/`restore`, the node's state protocol, crawler/state.py):
every cached origin is saved with its source, the robots text that was
parsed (at most `robots.max_bytes`) and its expiry as wall-clock time (a
monotonic deadline means nothing to the next process), error entries with
their failure count. A restarted node restores the entries still fresh and
re-parses their text with protego the first time an origin is asked for
(`fetch()` answers from them without a request); parsing everything at start
would hold up a large restart by about a millisecond per origin. For the
checkpoint each cached origin keeps its robots text in RAM beside protego's
parsed rules (at most `robots.max_bytes`, typically a few hundred bytes).

The group applying to us is chosen by the product token, the first word of
the User-Agent before "/" ("ExampleCrawler/1.0 (+url)" -> "ExampleCrawler"),
case-insensitively, with protego's matching (the most specific matching
group, else "*"). A group's `User-agent: Foo Bar` line is read up to the first
space, as Google's parser does. Crawl-delay comes from the same group.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import urljoin, urlsplit

from protego import Protego

from crawler.config.schema import PolitenessConfig, RobotsConfig
from crawler.fetch import result as R
from crawler.fetch.fetcher import Fetcher
from crawler.fetch.result import FetchResult
from crawler.state import CacheState, StateStore
from crawler.urls import canonicalize

log = logging.getLogger(__name__)

FETCHED = "fetched"
MISSING = "missing"
ERROR = "error"
DEAD = "dead"
DISABLED = "disabled"
SOURCES = (FETCHED, MISSING, ERROR, DEAD)
UNREACHABLE = frozenset({ERROR, DEAD})     # sources that disallow everything
STATE_VERSION = 1                          # version of the robots part's state file (crawler/state.py)

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


def host_of_url(url: str) -> str:
    """Lower-case host of an absolute URL (no port, no userinfo); '' if it has none."""
    return (urlsplit(url).hostname or "") if "//" in url else ""


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
    text: str = field(default="", repr=False, compare=False)   # what protego parsed (saved at checkpoints)
    failures: int = 0                      # "error": consecutive unreachable fetches of this origin
    reason: str = ""                       # "error"/"dead": why the last fetch failed (a reason code or "http_NNN")

    @classmethod
    def parse(cls, body: bytes, agent: str, expires: float, max_bytes: int) -> RobotsRules:
        """Rules of a 2xx robots.txt body."""
        return cls.from_text(robots_text(body, max_bytes), agent, expires)

    @classmethod
    def from_text(cls, text: str, agent: str, expires: float) -> RobotsRules:
        """Rules of robots text already cut and cleaned by `robots_text` (a fetch, or a checkpoint)."""
        try:
            parser = Protego.parse(text)
            delay = parser.crawl_delay(agent)
            sitemaps = tuple(parser.sitemaps)
        except Exception:                  # noqa: BLE001 - a parser bug must not stop the crawl
            log.warning("robots.txt parser failed; allowing all", exc_info=True)
            return cls(FETCHED, expires, None, agent, text=text)
        return cls(FETCHED, expires, delay, agent, parser, sitemaps, text)

    def allowed(self, url: str) -> bool:
        """May `url` be fetched? Hot path: once per fetched URL."""
        parser = self.parser
        if parser is None:
            return self.source not in UNREACHABLE
        try:
            return parser.can_fetch(url, self.agent)
        except ValueError:                 # a URL protego cannot split: do not fetch it
            return False


@dataclass(slots=True)
class _Saved:
    """An entry restored from a checkpoint, parsed the first time its origin is asked for."""

    source: str
    expires: float                         # time.monotonic() deadline in this process
    text: str
    failures: int
    reason: str = ""


class RobotsCache(CacheState):
    """robots.txt rules per origin: lookup (sync, cached) and fetch (async, through the Fetcher)."""

    name = "robots"                        # its part name in the node's state protocol (crawler/state.py)
    state_version = STATE_VERSION

    def __init__(self, fetcher: Fetcher, config: RobotsConfig, user_agent: str, *,
                 max_retry_after_s: float = PolitenessConfig.max_retry_after_s,
                 hop_delay_s: Callable[[float], float] | None = None,
                 max_entries: int = DEFAULT_MAX_ENTRIES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fetcher = fetcher
        self._config = config
        self._max_retry_after_s = max_retry_after_s
        self._hop_delay_s = hop_delay_s        # politeness delay after a request that took x s (None: no wait)
        self._agent = product_token(user_agent)
        self._max_entries = max_entries
        self._clock = clock
        self._rules: dict[str, RobotsRules] = {}
        self._saved: dict[str, _Saved] = {}          # restored, not asked for yet
        self._changes = 0                            # entries stored since the cache was made
        self._saved_changes = -1                     # _changes at the last save
        self._disabled = RobotsRules(DISABLED, float("inf"), agent=self._agent)
        self._lookups = {"hit": 0, "miss": 0, "expired": 0}
        self._by_source = {FETCHED: 0, MISSING: 0, ERROR: 0, DEAD: 0}
        self._shared = 0                             # entries stored for a redirect's target origin
        self._reused = 0                             # chains that ended at a target origin already answered
        self._requests = 0
        self._redirects = 0
        self._evictions = 0
        self._restored = 0
        self._revived = 0

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
            # Kept until fetch() replaces it: an "error" entry's failure count carries over.
            self._lookups["expired"] += 1
            return None
        self._lookups["hit"] += 1
        return rules

    async def fetch(self, origin: str) -> tuple[RobotsRules, list[FetchResult]]:
        """Fetch, parse and cache `origin`'s robots.txt; returns the rules and every fetch made.

        An origin restored from a checkpoint and still fresh is answered from
        it, with no request (the list of fetches is empty).
        """
        if not self._config.enabled:
            return self._disabled, []
        if self._saved:
            rules = await self._revive(origin)
            if rules is not None:
                return rules, []
        results, known = await self._fetch_chain(origin)
        if known is not None:
            # The chain reached another origin's own /robots.txt, already answered: those rules, no request.
            rules = dataclasses.replace(known)
            self._store(origin, rules)
            self._reused += 1
            return rules, results
        res = results[-1]
        source = self._final_source(results)
        rules = await self._make_rules(source, res)
        if source == ERROR:
            previous = self._rules.get(origin)
            rules.failures = previous.failures + 1 if previous is not None and previous.source == ERROR else 1
            rules.expires = self._clock() + self._error_wait_s(rules.failures, res)
            if rules.failures == self._config.error_max_retries + 1:
                log.info("robots.txt of %s unreachable %d times in a row (last: %s); its URLs are dropped until "
                         "it answers", origin, rules.failures, rules.reason)
        elif source == DEAD:
            log.info("robots.txt of %s: %s (%s); the origin's URLs are dropped for %.0f s", origin, rules.reason,
                     res.detail or "permanent", self._config.dead_cache_s)
        self._store(origin, rules)
        self._share_with_target(origin, results, rules)
        return rules, results

    async def _fetch_chain(self, origin: str) -> tuple[list[FetchResult], RobotsRules | None]:
        """GET /robots.txt and follow redirects, each request within robots.fetch_timeout_s; also the
        fresh rules of the origin whose own /robots.txt a redirect leads to, if they are cached (then the
        chain stops there: http -> https after the https origin's robots.txt was fetched is not fetched again).

        A redirect to the same host (http -> https, another path) waits the host's politeness delay
        after the request before (`hop_delay_s`): the worker holds that host, and the next request
        to it is as polite as any. A redirect to another host is followed at once (that host is
        not held; see docs/fetching.md).
        """
        results: list[FetchResult] = []
        url = origin + "/robots.txt"
        for hop in range(MAX_REDIRECTS + 1):
            started, t0 = time.time(), time.monotonic()
            try:
                async with asyncio.timeout(self._config.fetch_timeout_s):
                    res = await self._fetcher.fetch(url, max_body_bytes=self._config.max_bytes)
            except TimeoutError:
                res = FetchResult(url=url, reason=R.TOTAL_TIMEOUT, started=started,
                                  duration_s=time.monotonic() - t0,
                                  detail=f"robots.txt not fetched within robots.fetch_timeout_s="
                                         f"{self._config.fetch_timeout_s:g} s")
            results.append(res)
            self._requests += 1
            if self._source_of(res, hop) is not None or hop == MAX_REDIRECTS:
                break
            try:
                target = urljoin(url, res.location)
            except ValueError:
                break
            self._redirects += 1
            known = self._known_target(origin, target)
            if known is not None:
                return results, known
            if self._hop_delay_s is not None and host_of_url(target) == host_of_url(url):
                await asyncio.sleep(self._hop_delay_s(res.duration_s))
            url = target
        return results, None

    def _known_target(self, origin: str, target: str) -> RobotsRules | None:
        """Fresh cached rules of another origin whose own /robots.txt `target` is (an error entry is not
        reused: that origin is being retried)."""
        final = canonicalize(target)
        if final is None:
            return None
        other = origin_of(final)
        if other == origin or final != other + "/robots.txt":
            return None
        rules = self._rules.get(other)
        if rules is None or rules.source == ERROR or rules.expires <= self._clock():
            return None
        return rules

    def _final_source(self, results: list[FetchResult]) -> str:
        """What the chain's last response means for the origin asked for."""
        hop = len(results) - 1
        source = self._source_of(results[-1], hop)
        if source is not None:
            return source
        return MISSING          # still a redirect after MAX_REDIRECTS hops, or an unusable Location

    def _error_wait_s(self, failures: int, res: FetchResult) -> float:
        """The back-off after the `failures`-th transient failure in a row (a Retry-After may ask for more)."""
        cfg = self._config
        wait = min(cfg.error_retry_s * cfg.error_backoff ** (failures - 1), cfg.error_retry_max_s)
        if res.retry_after_s is not None:
            wait = max(wait, min(res.retry_after_s, self._max_retry_after_s))
        return wait

    def _share_with_target(self, origin: str, results: list[FetchResult], rules: RobotsRules) -> None:
        """A chain that ends at another origin's own /robots.txt answered for that origin too: cache it there,
        so the target origin's first URL does not fetch the same file again."""
        if len(results) < 2:
            return
        final = canonicalize(results[-1].url)
        if final is None:
            return
        target = origin_of(final)
        if target == origin or final != target + "/robots.txt":
            return
        current = self._rules.get(target)
        if (current is not None and current.expires > self._clock()) or target in self._saved:
            return
        shared = dataclasses.replace(rules)
        if rules.source == ERROR:
            shared.failures = 1                  # the target's own count starts here
        self._store(target, shared)
        self._shared += 1

    def mark_dead(self, origin: str, reason: str) -> None:
        """A page of `origin` failed permanently (`result.PERMANENT`): its URLs are dropped from now on, for
        robots.dead_cache_s, as if its robots.txt had failed so."""
        if not self._config.enabled:
            return
        self._by_source[DEAD] += 1
        log.info("%s: %s on a page; the origin's URLs are dropped for %.0f s", origin, reason,
                 self._config.dead_cache_s)
        self._store(origin, RobotsRules(DEAD, self._clock() + self._config.dead_cache_s, agent=self._agent,
                                        reason=reason))

    def remaining_s(self, rules: RobotsRules) -> float:
        """Seconds until `rules` expire (0 if they have)."""
        return max(rules.expires - self._clock(), 0.0)

    async def _revive(self, origin: str) -> RobotsRules | None:
        """Rules from the restored entry of `origin`, if there is one and it is still fresh."""
        saved = self._saved.pop(origin, None)
        if saved is None:
            return None
        if saved.expires <= self._clock():
            if saved.source == ERROR:                    # its failure count carries over to the next fetch
                self._store(origin, RobotsRules(ERROR, saved.expires, agent=self._agent, failures=saved.failures,
                                                reason=saved.reason))
            return None
        if saved.source == FETCHED:
            args = (saved.text, self._agent, saved.expires)
            if len(saved.text) > THREAD_PARSE_BYTES:
                rules = await asyncio.to_thread(RobotsRules.from_text, *args)
            else:
                rules = RobotsRules.from_text(*args)
        else:
            rules = RobotsRules(saved.source, saved.expires, agent=self._agent, reason=saved.reason)
        rules.failures = saved.failures
        self._revived += 1
        self._store(origin, rules)
        return rules

    def _source_of(self, res: FetchResult, hop: int) -> str | None:
        """What a robots.txt response means; None = a redirect to follow."""
        status = res.status
        if res.reason != R.OK:
            if 200 <= status < 300 and res.reason in _LIMIT_REASONS:
                return FETCHED
            if hop and res.reason in _UNUSABLE_TARGET_REASONS:
                return MISSING
            return DEAD if res.reason in R.PERMANENT else ERROR
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
        if source in UNREACHABLE:
            reason = res.reason if res.reason != R.OK else f"http_{res.status}"
            expires = now + (cfg.dead_cache_s if source == DEAD else cfg.error_retry_s)
            return RobotsRules(source, expires, agent=self._agent, reason=reason)
        return RobotsRules(MISSING, now + cfg.cache_s, agent=self._agent)

    def _store(self, origin: str, rules: RobotsRules) -> None:
        cache = self._rules
        saved = self._saved
        if len(cache) + len(saved) >= self._max_entries and origin not in cache:
            now = self._clock()
            for entries in (cache, saved):
                for key in [k for k, r in entries.items() if r.expires <= now]:
                    del entries[key]
            keep = int(self._max_entries * _EVICT_KEEP_FRACTION)
            while len(cache) + len(saved) > keep:        # restored entries not asked for, then oldest insertions
                del (saved or cache)[next(iter(saved or cache))]
                self._evictions += 1
        cache[origin] = rules
        self._changes += 1

    # --- checkpoint (crawler/state.py) ------------------------------------------------

    def _snapshot(self) -> tuple[float, float, dict[str, _Saved], dict[str, RobotsRules]]:
        """Shallow copies, on the loop (~ms at 200,000 origins): entries are replaced by `_store`,
        never changed once stored, so the writer thread may read them."""
        return self._clock(), time.time(), self._saved.copy(), self._rules.copy()

    @staticmethod
    def _records(snapshot: object) -> Iterator[dict]:
        now, wall, saved, rules = cast(tuple[float, float, dict[str, _Saved], dict[str, RobotsRules]], snapshot)
        entries: Iterator[tuple[str, _Saved | RobotsRules]] = itertools.chain(saved.items(), rules.items())
        for origin, r in entries:     # oldest first
            if r.expires <= now or not math.isfinite(r.expires):
                continue
            record = {"origin": origin, "source": r.source, "expires_at": round(wall + (r.expires - now), 3)}
            if r.source == FETCHED:
                record["text"] = r.text
            if r.failures:
                record["failures"] = r.failures
            if r.reason:
                record["reason"] = r.reason
            yield record

    def restore(self, store: StateStore) -> None:
        """Load the entries an earlier process saved that are still fresh (text parsed when used).

        Raises ValueError/TypeError/KeyError on a record that makes no sense;
        the cache then stays as it was (empty at start).
        """
        records = store.read(self.name, STATE_VERSION)
        if not records:
            return
        now, wall = self._clock(), time.time()
        saved: dict[str, _Saved] = {}
        expired = 0
        for rec in records:
            origin, source = rec["origin"], rec["source"]
            if not isinstance(origin, str) or source not in SOURCES:
                raise ValueError(f"robots entry {origin!r}: source {source!r}")
            remaining_s = float(rec["expires_at"]) - wall
            text = rec.get("text", "") if source == FETCHED else ""
            failures = int(rec.get("failures", 0))
            reason = rec.get("reason", "")
            if not isinstance(text, str) or failures < 0 or not isinstance(reason, str):
                raise ValueError(f"robots entry {origin!r}: text, failures or reason")
            if not remaining_s > 0:
                expired += 1
                continue
            saved.pop(origin, None)
            saved[origin] = _Saved(source, now + remaining_s, text, failures, reason)
        while len(saved) > self._max_entries:            # the newest entries are the last ones
            del saved[next(iter(saved))]
        self._saved = saved
        self._restored = len(saved)
        self._saved_changes = self._changes
        log.info("robots: %d origins restored from %s (%d expired)", len(saved), store.path(self.name), expired)

    def stats(self) -> dict:
        """Lookups by result, fetched rules by source, requests made, cache size."""
        return {
            "lookups": dict(self._lookups),
            "by_source": dict(self._by_source),
            "requests": self._requests,
            "redirects": self._redirects,
            "shared_with_target": self._shared,
            "reused_from_target": self._reused,
            "cache_size": len(self._rules) + len(self._saved),
            "evictions": self._evictions,
            "restored": self._restored,
            "revived": self._revived,
        }

    async def close(self) -> None:
        """Wait for a save still being written (the fetcher belongs to the caller)."""
        await self.wait_saved()

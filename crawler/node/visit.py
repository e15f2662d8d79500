"""The worker's visit of one URL whose host it holds: robots.txt, fetch, retry, parse, links.

Make sure robots.txt for the URL's origin is known (fetching it is a request
of its own: the URL goes back to the head of its host's queue and the host
waits its polite delay first), fetch, compute the host's next delay, parse,
and send the links on (`Node.add_urls`: filter -> splitter -> DUE ->
frontier).

robots.txt that cannot be reached for a while (5xx, 429, a timeout, a refused
connection, DNS SERVFAIL) disallows its origin (RFC 9309) until it can be:
the URL is parked (put back at the head of its host's queue, the host held
until the error entry expires: a back-off from `robots.error_retry_s`, or a
longer Retry-After) and robots.txt is fetched again then; after
`robots.error_max_retries` such retries in a row the origin's URLs are
dropped (crawl log reason robots_error_disallowed). A permanent failure (the
name does not exist, a certificate that fails verification, only private
addresses), of robots.txt or of a page, makes the origin dead: its URLs are
dropped at once, without a request, each logged and counted by that reason
(`dropped` in the summary), for `robots.dead_cache_s`.

A 429 or 503 holds its host back by its Retry-After (or
`politeness.default_retry_after_s`), at most `politeness.max_retry_after_s`,
whether or not the URL has retries left: the URL's retry budget
(`politeness.max_retries`) and the host's back-off are two decisions.

Hot path: one `visit` per URL; links cost one call per page, not per link.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from typing import TYPE_CHECKING

from crawler.config import ConfigError
from crawler.fetch import FetchResult
from crawler.fetch.result import PERMANENT
from crawler.fetch.robots import DEAD as ROBOTS_DEAD
from crawler.fetch.robots import ERROR as ROBOTS_ERROR
from crawler.fetch.robots import UNREACHABLE as ROBOTS_UNREACHABLE
from crawler.fetch.robots import RobotsRules
from crawler.node.records import lineage_fields
from crawler.parse import ContentSeen, LinkExtractor, content_fingerprint, parse_kind
from crawler.parse.links import ParsedPage
from crawler.parse.mime import HTML
from crawler.splitter.streamlog import NO_WORKER
from crawler.urls import canonicalize, fingerprint, host_of, origin_of
from crawler.urls.lineage import split

if TYPE_CHECKING:
    from crawler.node.node import Node

log = logging.getLogger("crawler.node")

# Statuses that ask us to come back later rather than report a result.
RETRY_STATUSES = (429, 503)


class Visitor:
    """Visits URLs for the node's workers; holds what visiting needs beyond the node's shared parts
    (politeness figures, the link extractor, the content-seen set, the parse threads, retry counts)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.counts = node.counters
        c = node.config
        pol = c.politeness
        self._k = pol.delay_factor
        self.min_delay_s = pol.min_delay_s
        self._max_delay = max(pol.max_delay_s, pol.min_delay_s)
        self._respect_crawl_delay = pol.respect_crawl_delay
        self.extractor = LinkExtractor(c.parse)
        try:
            self.content_seen = ContentSeen(c.parse.content_seen_size)     # bounded: it forgets, never invents
        except ValueError as exc:
            raise ConfigError(f"parse.content_seen_size: {exc}") from None
        self._parse_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._retries: dict[str, int] = {}

    def close(self) -> None:
        """Let parses still running end on their own (a thread cannot be stopped); drop queued ones."""
        if self._parse_pool is not None:
            self._parse_pool.shutdown(wait=False, cancel_futures=True)

    def delay_for(self, duration_s: float, crawl_delay_s: float | None) -> float:
        """Mercator's politeness: max(k * x, min_delay, Crawl-delay), capped by max_delay."""
        delay = self._k * duration_s
        if crawl_delay_s and self._respect_crawl_delay and crawl_delay_s > delay:
            delay = crawl_delay_s
        if delay > self._max_delay:
            delay = self._max_delay
        return delay if delay > self.min_delay_s else self.min_delay_s

    async def visit(self, host: str, item: str, worker: int = NO_WORKER) -> float:
        """Process one URL whose host we hold (`item`: the URL tagged with its lineage, as queued); returns
        the host's next delay. `worker` (the calling worker's index) goes with the page's links into the
        splitter's stream log."""
        node = self.node
        url, lineage = split(item)
        rules = None
        if node.robots is not None:
            rules = node.robots.lookup(origin_of(url))
            robots_delay = 0.0
            if rules is None:
                rules, results = await node.robots.fetch(origin_of(url))
                if results:                    # not answered from the restored state: requests were made
                    for r in results:
                        node.records.record(r, "robots")
                    # Between the requests of a redirect chain to this host it waited already (robots.py):
                    # its delay now follows its last request.
                    last = next((r for r in reversed(results) if host_of(r.url) == host), results[0])
                    robots_delay = self.delay_for(last.duration_s, rules.crawl_delay_s)
                    if rules.source not in ROBOTS_UNREACHABLE:
                        node.frontier.requeue(host, item)
                        return robots_delay
            if not rules.allowed(url):
                return self._refuse(host, item, rules, robots_delay)
        crawl_delay = rules.crawl_delay_s if rules is not None else None
        assert node.fetcher is not None, "start() opens the fetcher before the workers run"
        result = await node.fetcher.fetch(url)
        self.counts.fetches += 1
        if result.status:
            connect_s = result.connect_s
            node.frontier.observe(host, connect_s, result.duration_s - (connect_s or 0.0), result.ip)
        elif result.reason in PERMANENT and node.robots is not None:
            node.robots.mark_dead(origin_of(url), result.reason)     # the origin's other URLs are dropped
        delay = self.delay_for(result.duration_s, crawl_delay)
        if result.status in RETRY_STATUSES:
            # Retry-After speaks about the host, not about this URL: it holds, retried or not.
            delay = max(delay, self._retry_after_s(result))
            if self._retry(url):
                node.frontier.requeue(host, item)
        content_fp = content_fingerprint(result.body) if result.body and result.status else None
        links, failure, truncated = await self.links_of(result, content_fp)
        page_fp = fingerprint(url)
        if links:
            # A seed is at hop 0 whatever path reached it; else the smallest hop count any path brought.
            lineage = node.nearer.settle(page_fp, lineage)
        node.records.record(result, "page", len(links), failure, content_fp, truncated, lineage)
        if links:
            buffered = node.due.buffered
            await node.add_urls(links, lineage, page_fp, worker)
            if node.lookups.wanted(buffered, links, host):
                node.lookups.lookup(buffered)
        if node.config.crawl.max_pages and self.counts.fetches >= node.config.crawl.max_pages:
            node.stop("max_pages")
        return delay

    def _retry_after_s(self, result: FetchResult) -> float:
        """How long a 429/503 holds its host: its Retry-After, or the default, within the cap."""
        pol = self.node.config.politeness
        wait = result.retry_after_s if result.retry_after_s is not None else pol.default_retry_after_s
        return min(wait, pol.max_retry_after_s)

    def _refuse(self, host: str, item: str, rules: RobotsRules, delay_s: float) -> float:
        """robots.txt does not let the URL of `item` be fetched now: park it (transient error), drop it (a
        dead origin, or an error past its retries) or count a denial."""
        source = rules.source
        if source == ROBOTS_ERROR and rules.failures <= self.node.config.robots.error_max_retries:
            return self._park(host, item, rules, delay_s)
        url, lineage = split(item)
        line = {"url": url, "kind": "page", "status": 0, **lineage_fields(lineage)}
        if source == ROBOTS_DEAD:
            self.counts.dropped[rules.reason] += 1
            line["reason"], line["dropped"] = rules.reason, "origin"
        elif source == ROBOTS_ERROR:
            self.counts.robots_unreachable += 1
            line["reason"] = "robots_error_disallowed"
        else:
            self.counts.robots_denied += 1
            line["reason"] = f"robots_{source}_disallowed"
        self.node.records.write_line(line)
        return delay_s

    def _park(self, host: str, item: str, rules: RobotsRules, delay_s: float) -> float:
        """robots.txt of the URL's origin is unreachable: the URL goes back to the head of its host's
        queue and the host waits until the error entry expires; robots.txt is then fetched again."""
        node = self.node
        assert node.robots is not None, "only robots.txt rules park a URL"
        node.frontier.requeue(host, item)
        self.counts.robots_parked += 1
        return max(delay_s, node.robots.remaining_s(rules), self.min_delay_s)

    def _retry(self, url: str) -> bool:
        n = self._retries.get(url, 0)
        if n >= self.node.config.politeness.max_retries:
            self._retries.pop(url, None)
            return False
        self._retries[url] = n + 1
        self.counts.retries += 1
        return True

    async def links_of(self, result: FetchResult, content_fp: int | None = None
                       ) -> tuple[list[str], str | None, int]:
        """Links of a 2xx HTML page or stylesheet, or the Location of a 3xx (redirects are links, DESIGN 1).

        Returns (links, failure, truncated): failure names why a page's links were not taken
        (parse_timeout), else None; truncated counts links past parse.max_links_per_page, dropped.
        """
        status = result.status
        if 300 <= status < 400:
            if result.location:
                target = canonicalize(result.location, result.url)
                if target:
                    self.counts.links_extracted += 1
                    return [target], None, 0
            return [], None, 0
        kind = parse_kind(result.content_type) if 200 <= status < 300 and result.body else None
        if kind is None:
            return [], None, 0
        # The content-seen test (Mercator): a page seen before at another URL is a mirror, and its links
        # lead into the mirror. A stylesheet seen before is not: its url()s, relative to where it sits,
        # are the requisites of the pages that use it there, so it is always read. The set is bounded and
        # may forget a body (a redundant parse; the DUE drops the URLs already seen), never invent one.
        if kind == HTML:
            fp = content_fingerprint(result.body) if content_fp is None else content_fp
            if self.content_seen.check_and_add(fp):
                self.counts.duplicate_content += 1
                return [], None, 0
        parse = self.node.config.parse
        page: ParsedPage | None
        if len(result.body) <= parse.inline_max_bytes:
            page = self.extractor.parse(result.body, result.url, result.content_type, result.charset)
        else:
            page = await self._parse_in_thread(result)
            if page is None:
                self.counts.errors["parse_timeout"] += 1
                return [], "parse_timeout", 0
        self.counts.links_extracted += len(page.links)
        if page.truncated_links:
            self.counts.links_truncated += page.truncated_links
            log.warning("node %d: %s has more than parse.max_links_per_page=%d links; %d dropped",
                        self.node.node_id, result.url, parse.max_links_per_page, page.truncated_links)
        return page.links, None, page.truncated_links

    async def _parse_in_thread(self, result: FetchResult) -> ParsedPage | None:
        """Parse off the event loop with a deadline; None when the deadline passed.

        A thread cannot be stopped, so a parse past its deadline runs on in the
        background; one still queued when its deadline passes never starts.
        """
        parse = self.node.config.parse
        if self._parse_pool is None:
            self._parse_pool = concurrent.futures.ThreadPoolExecutor(
                parse.threads, thread_name_prefix=f"parse-{self.node.node_id}")
        timeout_s = parse.timeout_s
        deadline = time.monotonic() + timeout_s
        extractor = self.extractor

        def job() -> ParsedPage | None:
            if time.monotonic() > deadline:
                return None
            return extractor.parse(result.body, result.url, result.content_type, result.charset)

        future = asyncio.get_running_loop().run_in_executor(self._parse_pool, job)
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            log.warning("node %d: parsing %s took over %.1f s; its links are not followed",
                        self.node.node_id, result.url, timeout_s)
            return None

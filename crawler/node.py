"""One crawling node: the pipeline of DESIGN 1 wired together and run by W workers.

Each worker repeats: take (host, url) from the frontier (the host is now busy:
nobody else may contact it), make sure robots.txt for the URL's origin is
known (fetching it is a request of its own: the URL goes back to the head of
its host's queue and the host waits its polite delay first), fetch, compute
the host's next delay, parse, and send the links through filter -> splitter ->
DUE -> frontier. Whatever happens inside one URL, the worker records it,
releases the host and goes on.

The node stops by itself when it has no work left (frontier empty, nothing in
flight, nothing pending in the DUE), at a limit (`crawl.max_pages`,
`crawl.max_duration_s`) or on SIGTERM/SIGINT, and returns the summary that
the CLI prints as the last line of standard output.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from crawler.config import Config, node_config
from crawler.config.schema import NodeConfig
from crawler.due import MemoryDUE
from crawler.fetch import Fetcher, FetchResult, Resolver, RobotsCache
from crawler.filter import HostBudget, URLFilter
from crawler.frontier import Frontier
from crawler.metrics import MetricsServer, NodeCollector
from crawler.parse import LinkExtractor, content_fingerprint, is_html
from crawler.store import CrawlLog, WarcStore
from crawler.urls import canonicalize, fingerprints, host_of, origin_of

log = logging.getLogger("crawler.node")

# Statuses that ask us to come back later rather than report a result.
_RETRY_STATUSES = (429, 503)


def status_class(status: int) -> str:
    return f"{status // 100}xx" if status else "none"


@dataclass
class Counters:
    """Plain integers on the hot path; metrics and the summary read them."""
    fetches: int = 0                 # page fetch attempts (robots.txt excluded)
    robots_fetches: int = 0
    pages: Counter = field(default_factory=Counter)     # (status_class, kind) -> n
    bytes: Counter = field(default_factory=Counter)     # status_class -> wire bytes
    errors: Counter = field(default_factory=Counter)    # reason -> n
    links_extracted: int = 0
    robots_denied: int = 0
    duplicate_content: int = 0
    worker_errors: int = 0
    retries: int = 0


class Node:
    """A crawling process: `await Node(config, node_id).run()` returns the summary dict."""

    def __init__(self, config: Config, node_id: int = 0, *, source: str = "<config>") -> None:
        self.config = config
        self.me: NodeConfig = node_config(config, node_id, source)
        self.node_id = node_id
        self.data_dir = Path(config.crawl.data_dir.replace("{node}", str(node_id)))
        self.counters = Counters()
        self._inflight = 0
        self._stopping = False
        self._stop_reason = ""
        self._retries: dict[str, int] = {}
        self._content_seen: set[int] = set()
        self._started = 0.0

        c = config
        pol = c.politeness
        self._k = pol.delay_factor
        self._min_delay = pol.min_delay_s
        self._max_delay = max(pol.max_delay_s, pol.min_delay_s)
        self._respect_crawl_delay = pol.respect_crawl_delay

        self.filter = URLFilter(c.filter)
        self.budget = HostBudget(c.filter.max_pages_per_host)
        self.due = MemoryDUE()
        self.frontier = Frontier(c.frontier, c.workers)
        self.extractor = LinkExtractor(c.parse)
        self._parse_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.registry = CollectorRegistry()
        self.registry.register(NodeCollector(self.metrics_snapshot))
        self.metrics_server: MetricsServer | None = None
        self.resolver: Resolver | None = None
        self.fetcher: Fetcher | None = None
        self.robots: RobotsCache | None = None
        self.crawl_log: CrawlLog | None = None
        self.warc: WarcStore | None = None

    # --- the pipeline ---------------------------------------------------------------
    def delay_for(self, duration_s: float, crawl_delay_s: float | None) -> float:
        """Mercator's politeness: max(k * x, min_delay, Crawl-delay), capped by max_delay."""
        delay = self._k * duration_s
        if crawl_delay_s and self._respect_crawl_delay and crawl_delay_s > delay:
            delay = crawl_delay_s
        if delay > self._max_delay:
            delay = self._max_delay
        return delay if delay > self._min_delay else self._min_delay

    def add_urls(self, urls: list[str]) -> None:
        """Filter -> splitter -> DUE -> frontier for canonical URLs (hot path: once per page)."""
        urls = self.filter.filter(urls)
        if not urls:
            return
        new = self.due.submit(fingerprints(urls), urls)
        if new:
            self.enqueue(new)

    def enqueue(self, urls: list[str]) -> None:
        add, admit = self.frontier.add, self.budget.admit
        for url in urls:
            host = host_of(url)
            if admit(host):
                add(url, host)

    async def _visit(self, host: str, url: str) -> float:
        """Process one URL whose host we hold; returns the host's next delay."""
        rules = None
        if self.robots is not None:
            rules = self.robots.lookup(origin_of(url))
            if rules is None:
                rules, results = await self.robots.fetch(origin_of(url))
                for r in results:
                    self.record(r, "robots")
                self.frontier.requeue(host, url)
                return self.delay_for(sum(r.duration_s for r in results), rules.crawl_delay_s)
            if not rules.allowed(url):
                self.counters.robots_denied += 1
                if self.crawl_log is not None:
                    self.crawl_log.write({"url": url, "kind": "page", "status": 0,
                                          "reason": f"robots_{rules.source}_disallowed"})
                return 0.0
        crawl_delay = rules.crawl_delay_s if rules is not None else None
        result = await self.fetcher.fetch(url)
        self.counters.fetches += 1
        delay = self.delay_for(result.duration_s, crawl_delay)
        if result.status in _RETRY_STATUSES and self._retry(url):
            self.frontier.requeue(host, url)
            retry_after = result.retry_after_s
            if retry_after is None:
                retry_after = self.config.politeness.default_retry_after_s
            delay = max(delay, min(retry_after, self.config.politeness.max_retry_after_s))
        links, failure = await self.links_of(result)
        self.record(result, "page", len(links), failure)
        if links:
            self.add_urls(links)
        if self.config.crawl.max_pages and self.counters.fetches >= self.config.crawl.max_pages:
            self.stop("max_pages")
        return delay

    def _retry(self, url: str) -> bool:
        n = self._retries.get(url, 0)
        if n >= self.config.politeness.max_retries:
            self._retries.pop(url, None)
            return False
        self._retries[url] = n + 1
        self.counters.retries += 1
        return True

    async def links_of(self, result: FetchResult) -> tuple[list[str], str | None]:
        """Links of a 2xx HTML page, or the Location of a 3xx (redirects are links, DESIGN 1).

        Returns (links, failure): failure names why a page's links were not
        taken (parse_timeout), else None.
        """
        status = result.status
        if 300 <= status < 400:
            if result.location:
                target = canonicalize(result.location, result.url)
                if target:
                    self.counters.links_extracted += 1
                    return [target], None
            return [], None
        if not (200 <= status < 300) or not result.body or not is_html(result.content_type):
            return [], None
        fp = content_fingerprint(result.body)
        if fp in self._content_seen:
            self.counters.duplicate_content += 1
            return [], None
        self._content_seen.add(fp)
        if len(result.body) <= self.config.parse.inline_max_bytes:
            page = self.extractor.parse(result.body, result.url, result.content_type, result.charset)
        else:
            page = await self._parse_in_thread(result)
            if page is None:
                self.counters.errors["parse_timeout"] += 1
                return [], "parse_timeout"
        self.counters.links_extracted += len(page.links)
        return page.links, None

    async def _parse_in_thread(self, result: FetchResult):
        """Parse off the event loop with a deadline; None when the deadline passed.

        A thread cannot be stopped, so a parse past its deadline runs on in the
        background; one still queued when its deadline passes never starts.
        """
        if self._parse_pool is None:
            self._parse_pool = concurrent.futures.ThreadPoolExecutor(
                self.config.parse.threads, thread_name_prefix=f"parse-{self.node_id}")
        timeout_s = self.config.parse.timeout_s
        deadline = time.monotonic() + timeout_s
        extractor = self.extractor

        def job():
            if time.monotonic() > deadline:
                return None
            return extractor.parse(result.body, result.url, result.content_type, result.charset)

        future = asyncio.get_running_loop().run_in_executor(self._parse_pool, job)
        try:
            return await asyncio.wait_for(future, timeout_s)
        except asyncio.TimeoutError:
            log.warning("node %d: parsing %s took over %.1f s; its links are not followed",
                        self.node_id, result.url, timeout_s)
            return None

    def record(self, result: FetchResult, kind: str, links: int = 0, failure: str | None = None) -> None:
        """Count one fetch, write its crawl-log line and WARC records."""
        c = self.counters
        if kind == "robots":
            c.robots_fetches += 1
        if result.status:
            cls = status_class(result.status)
            c.pages[(cls, kind)] += 1
            c.bytes[cls] += result.wire_bytes
            if self.warc is not None:
                self.warc.write(result)
        if result.reason != "ok":
            c.errors[result.reason] += 1
        if self.crawl_log is not None:
            line = {"url": result.url, "kind": kind, "status": result.status, "reason": result.reason,
                    "bytes": result.wire_bytes, "duration_s": round(result.duration_s, 6),
                    "content_type": result.content_type, "ip": result.ip}
            if result.body and result.status:
                line["content_fp"] = f"{content_fingerprint(result.body):016x}"
            if links:
                line["links"] = links
            if result.location:
                line["location"] = result.location
            if failure:
                line["failure"] = failure
            if result.detail and result.reason != "ok":
                line["detail"] = result.detail
            self.crawl_log.write(line)

    # --- workers and lifecycle ---------------------------------------------------------
    async def _worker(self) -> None:
        frontier = self.frontier
        while True:
            item = await frontier.get()
            if item is None:
                return
            host, url = item
            self._inflight += 1
            delay = self._min_delay
            try:
                delay = await self._visit(host, url)
            except Exception:  # one page must never kill a worker
                self.counters.worker_errors += 1
                log.exception("node %d: unexpected error on %s (worker goes on)", self.node_id, url)
            finally:
                frontier.release(host, delay)
                self._inflight -= 1

    def stop(self, reason: str) -> None:
        """Ask the node to finish: workers end after their current URL."""
        if not self._stopping:
            self._stopping = True
            self._stop_reason = reason
            self.frontier.close()

    def _idle(self) -> bool:
        return self.frontier.idle() and self._inflight == 0

    async def _watch(self) -> None:
        """Ends the crawl when there is no work left or a limit is reached."""
        max_s = self.config.crawl.max_duration_s
        loop = asyncio.get_running_loop()
        progress_every = self.config.metrics.progress_interval_s
        next_progress = loop.time() + progress_every if progress_every else float("inf")
        while not self._stopping:
            await asyncio.sleep(0.02)
            now = loop.time()
            if max_s and now - self._t0 >= max_s:
                self.stop("max_duration")
            elif self.frontier.queued < self.config.workers and self.due.pending:
                self.enqueue(self.due.flush())
            elif self._idle() and not self.due.pending:
                self.stop("done")
            if now >= next_progress:
                next_progress = now + progress_every
                self.progress()

    def progress(self) -> None:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        c = self.counters
        print(f"node {self.node_id}: {c.fetches} pages ({c.fetches / elapsed:.1f}/s), "
              f"frontier {self.frontier.queued} URLs on {self.frontier.active_hosts} hosts, "
              f"errors {sum(c.errors.values())}", file=sys.stderr, flush=True)

    def seeds(self) -> list[str]:
        crawl = self.config.crawl
        raw = list(crawl.seeds)
        if crawl.seeds_file:
            for line in Path(crawl.seeds_file).read_text(encoding="utf-8").splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    raw.append(line)
        seeds = []
        for s in raw:
            url = canonicalize(s)
            if url is None:
                log.warning("node %d: seed %r is not a crawlable http(s) URL; skipped", self.node_id, s)
            else:
                seeds.append(url)
        return seeds

    async def start(self) -> None:
        c = self.config
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.resolver = Resolver(c.fetch.dns, allow_private_networks=c.fetch.allow_private_networks)
        self.fetcher = Fetcher(c.fetch, self.resolver, c.crawl.user_agent,
                               source_address=self.me.source_address, max_url_bytes=c.filter.max_url_bytes)
        if c.robots.enabled:
            self.robots = RobotsCache(self.fetcher, c.robots, c.crawl.user_agent)
        if c.store.crawl_log:
            self.crawl_log = CrawlLog(self.data_dir / "crawl.log.jsonl")
        if c.store.warc.enabled:
            self.warc = WarcStore(self.data_dir / "warc", c.store.warc, self.node_id)
        if c.metrics.enabled:
            self.metrics_server = MetricsServer(self.registry, c.metrics.bind, self.me.metrics_port)
            await self.metrics_server.start()
            log.info("node %d: metrics at http://%s:%d/metrics", self.node_id, c.metrics.bind, self.metrics_server.port)

    async def close(self) -> None:
        if self.fetcher is not None:
            await self.fetcher.close()
        if self.resolver is not None:
            await self.resolver.close()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.crawl_log is not None:
            self.crawl_log.close()
        if self.warc is not None:
            self.warc.close()
        if self._parse_pool is not None:
            self._parse_pool.shutdown(wait=False, cancel_futures=True)
        self.due.close()

    async def run(self, *, handle_signals: bool = False) -> dict:
        """Crawl until done; returns the summary."""
        loop = asyncio.get_running_loop()
        self._started = time.monotonic()
        self._t0 = loop.time()
        await self.start()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop, sig.name)
        try:
            self.add_urls(self.seeds())
            workers = [asyncio.create_task(self._worker(), name=f"worker-{i}")
                       for i in range(self.config.workers)]
            watcher = asyncio.create_task(self._watch(), name="watch")
            await asyncio.gather(*workers)
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        finally:
            if handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            await self.close()
        return self.summary()

    # --- reporting ---------------------------------------------------------------------
    def summary(self) -> dict:
        c = self.counters
        duration = time.monotonic() - self._started
        pages = sum(n for (cls, kind), n in c.pages.items() if kind == "page")
        return {
            "node": self.node_id,
            "stop": self._stop_reason,
            "pages": pages,
            "fetches": c.fetches,
            "robots_fetches": c.robots_fetches,
            "bytes": sum(c.bytes.values()),
            "errors": sum(c.errors.values()),
            "errors_by_reason": dict(c.errors),
            "status": {cls: n for (cls, kind), n in sorted(c.pages.items()) if kind == "page"},
            "robots_denied": c.robots_denied,
            "filter_rejected": sum(self.filter.rejected.values()),
            "links": c.links_extracted,
            "new_urls": self.due.stats()["new"],
            "worker_errors": c.worker_errors,
            "cache_hit_rates": self.cache_hit_rates(),
            "duration_s": round(duration, 3),
            "pages_per_s": round(pages / duration, 2) if duration > 0 else 0.0,
        }

    def cache_hit_rates(self) -> dict:
        rates = {}
        for name, (hits, misses) in self.cache_counts().items():
            total = hits + misses
            rates[name] = round(hits / total, 4) if total else None
        return rates

    def cache_counts(self) -> dict[str, tuple[int, int]]:
        """(hits, misses) per URL cache; the DUE's exact seen-set counts as its cache here."""
        s = self.due.stats()
        return {"due": (s["checks"] - s["new"], s["new"])}

    def metrics_snapshot(self) -> dict:
        c = self.counters
        lookups = {}
        for name, (hits, misses) in self.cache_counts().items():
            lookups[(name, "hit")] = hits
            lookups[(name, "miss")] = misses
        due = self.due.stats()
        dns = self.resolver.stats().get("lookups", {}) if self.resolver is not None else {}
        return {
            "pages": c.pages, "bytes": c.bytes, "errors": c.errors,
            "links_extracted": c.links_extracted, "filter_rejected": self.filter.rejected,
            "robots_denied": c.robots_denied, "duplicate_content": c.duplicate_content,
            "worker_errors": c.worker_errors, "cache_lookups": lookups,
            "cache_entries": {"due": due["seen"]}, "cache_capacity": {},
            "due_checks": due["checks"], "due_new": due["new"],
            "frontier_urls": self.frontier.queued, "frontier_active_hosts": self.frontier.active_hosts,
            "frontier_busy_hosts": self.frontier.busy_hosts, "dns_lookups": dns,
        }

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

State lives in `crawl.data_dir` (frontier, DUE, peer spools, `state/` for
the robots.txt and DNS caches and the crawl totals, `state.json` naming the
crawl). Every stateful part speaks one protocol (crawler/state.py): the node
keeps them in `self.parts`, saves them all every
`frontier.checkpoint_interval_s` and at a clean stop, and restores them at
start. A node started on a data_dir with an unfinished crawl of the same node
of the same cluster resumes it; a clean stop (signal or limit) drains
in-flight fetches (up to `crawl.drain_timeout_s`), flushes the splitter and
the peer links, merges the DUE buffer into the frontier and saves every
part; after SIGKILL, the journals bring the frontier and DUE back, only the
fetches that were in flight are repeated, and the caches and totals are
those of the last checkpoint. Starting over is deliberate (`fresh=True`,
`crawler run --fresh`); a data_dir holding another crawl, a finished crawl,
or state without `state.json` is refused.

The visit of one URL (robots.txt, fetch, retry, parse) is in visit.py.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import sys
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram

from crawler.cache import cache_from_config
from crawler.cache._native import COMPILED, KERNELS, kernels_line
from crawler.config import Config, ConfigError, cluster_secret, node_config
from crawler.config.schema import CacheConfig, NodeConfig
from crawler.due import DiskDUE
from crawler.fetch import Fetcher, Resolver, RobotsCache
from crawler.filter import HostBudget, URLFilter
from crawler.frontier import Frontier, InlinkScorer, OracleScorer
from crawler.metrics import MetricsServer, NodeCollector, register_process_metrics
from crawler.metrics.rate import Rate
from crawler.node.identity import DataDir
from crawler.node.records import Records
from crawler.node.seeds import add_seeds
from crawler.node.totals import CrawlTotals, PageCounts
from crawler.node.visit import Visitor
from crawler.peers import PeerNetwork
from crawler.splitter import HostSplitter, Partitioner, StreamLog
from crawler.state import DueState, FrontierState, PeerSpoolState, Stateful, StateStore, restore_all, save_all
from crawler.termination import Termination
from crawler.urls import fingerprints, host_of

log = logging.getLogger("crawler.node")

# Write errors that stop the node (its state could no longer be recorded).
_STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)

def build_cache(config: CacheConfig, where: str):
    """A URL cache from its config section (`splitter.cache`, `due.cache`); errors name the key."""
    try:
        return cache_from_config(config)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


WATCH_INTERVAL_S = 0.05          # the node's housekeeping tick (limits, checkpoints, early merges, the end)
DISCOVERY_SAMPLES = 100_000      # prompt lookups' delays kept for the summary's percentiles (the newest)
DISCOVERY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)
EARLY_MERGE_BACKOFF_MAX = 8      # early merges that yield little back off up to this many flush intervals


class ListenError(ConfigError):
    """A port of the node's config cannot be listened on (taken, or not an address of this machine)."""


class Node:
    """A crawling process: `await Node(config, node_id).run()` returns the summary dict."""

    def __init__(self, config: Config, node_id: int = 0, *, source: str = "<config>", fresh: bool = False) -> None:
        self.config = config
        self.me: NodeConfig = node_config(config, node_id, source)
        self.node_id = node_id
        self.data_dir = Path(config.crawl.data_dir.replace("{node}", str(node_id)))
        self.counters = PageCounts()                 # this process (Prometheus counters start at 0)
        self.restored = PageCounts()                 # the crawl before this process (state/counters.jsonl)
        self.restored_filter_rejected: Counter = Counter()
        self.source = source
        self.n_nodes = len(config.cluster.nodes)
        self._inflight = 0
        self._stopping = False
        self._stop_reason = ""
        self._limited = False          # a limit stopped our fetching; we still serve the cluster
        self._cluster_done = asyncio.Event()
        self.finished = asyncio.Event()     # the crawl is over; /metrics may still be served (linger)
        self._interrupted = asyncio.Event()
        self.urls_received = 0
        self._started = 0.0
        self._cpu0 = 0.0
        self._cpu_marks: dict[str, float] = {}     # phase -> process_time() at its end (summary's cpu_phases_s)
        self._workers: list[asyncio.Task] = []
        self.storage_error = ""
        self._drain_timer: asyncio.TimerHandle | None = None
        self._saving: asyncio.Task | None = None       # the periodic checkpoint, while it runs
        self.discovery_delays: deque[float] = deque(maxlen=DISCOVERY_SAMPLES)   # prompt lookups' durations
        self._rate: Rate | None = None                 # the progress line's pages/s (made at the first line)

        c = config
        self.filter = URLFilter(c.filter)
        self.budget = HostBudget(c.filter.max_pages_per_host)
        self.dir = DataDir(self.data_dir, config, node_id, source)
        self.resuming = self.dir.check(fresh)
        self.due = DiskDUE(self.data_dir / "due", c.due, cache=build_cache(c.due.cache, "due.cache"))
        self.partitioner = Partitioner(self.n_nodes, c.cluster.partition)
        self.splitter_cache = build_cache(c.splitter.cache, "splitter.cache")
        self.splitter = HostSplitter(c.splitter, node_id, self.partitioner, self.splitter_cache, self._send_batch)
        self.peers: PeerNetwork | None = None
        self.termination: Termination | None = None
        self.frontier = Frontier(c.frontier, c.workers, directory=self.data_dir / "frontier",
                                 per_ip=c.politeness.per_ip)
        self.frontier.on_storage_error = self._storage_failed
        self.scorer = self._scorer()
        self.visitor = Visitor(self)
        self.registry = CollectorRegistry()
        self.registry.register(NodeCollector(self.metrics_snapshot))
        register_process_metrics(self.registry, node_id=node_id, cluster=c.cluster.name)
        self.records = Records(self.counters, self.registry)
        self.discovery_seconds = Histogram(
            "crawler_discovery_delay_seconds", "Prompt lookups: from a page's links entering the DUE buffer while a "
            "worker waited and a host they are for had nothing queued, to their new URLs entering the frontier.",
            buckets=DISCOVERY_BUCKETS_S, registry=self.registry)
        self.metrics_server: MetricsServer | None = None
        self.resolver: Resolver | None = None
        self.fetcher: Fetcher | None = None
        self.robots: RobotsCache | None = None
        # Every part whose state outlives the process (crawler/state.py); start() makes the full list.
        self.state = StateStore(self.data_dir / "state")
        self.parts: list[Stateful] = self._state_parts()

    def _state_parts(self) -> list[Stateful]:
        """The parts the state protocol saves, in order: the DUE and frontier first (the crawl's work),
        the totals last (they count what the others did)."""
        parts: list[Stateful] = [DueState(self.due), FrontierState(self.frontier)]
        if self.peers is not None:
            parts.append(PeerSpoolState(self.peers))
        parts += [p for p in (self.robots, self.resolver) if p is not None]
        parts.append(CrawlTotals(self))
        return parts

    def _scorer(self):
        """The quality source when a policy uses quality; None keeps the hot path free of it."""
        f = self.config.frontier
        if f.host_policy not in ("quality", "capability") and f.url_policy != "quality":
            return None
        if f.quality == "oracle":
            try:
                return OracleScorer(f.quality_file)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"{self.source}: frontier.quality_file: {exc}") from None
        return InlinkScorer(f.inlink_bits)

    # --- the pipeline ---------------------------------------------------------------
    async def add_urls(self, urls: list[str]) -> None:
        """Filter -> splitter -> DUE -> frontier for canonical URLs (hot path: once per page)."""
        if self.storage_error:
            return              # state can no longer be written: the DUE must not call these URLs seen
        urls = self.filter.filter(urls)
        if not urls:
            return
        fps, urls = await self.splitter.route(urls, fingerprints(urls))
        if urls:
            if self.scorer is not None:
                self.scorer.count(fps)
            new = self.due.submit(fps, urls)
            if new:
                self.enqueue(new)

    def _on_batch(self, peer: int, urls: list[str]) -> None:
        """URLs a peer sends us enter at the DUE, exactly like our local stream."""
        if self.storage_error:
            raise OSError(errno.ENOSPC, f"node {self.node_id} cannot write its state")   # no ACK: resent later
        self.urls_received += len(urls)
        fps = fingerprints(urls)
        if self.scorer is not None:
            self.scorer.count(fps)
        try:
            buffered = self.due.buffered
            new = self.due.submit(fps, urls)
            if new:
                self.enqueue(new)
        except OSError as exc:
            if exc.errno in _STORAGE_ERRNOS:
                self._storage_failed(exc)
            raise                                   # no ACK: the peer keeps the batch and sends it again
        if (self.frontier.has_waiters and self.due.buffered > buffered and self.config.due.prompt_lookups
                and self.hungry(urls)):
            self.prompt_lookup(buffered)

    async def _send_batch(self, peer: int, urls: list[str]) -> None:
        await self.peers.send(peer, urls)

    def enqueue(self, urls: list[str]) -> None:
        """New URLs (from the DUE) into the frontier, with their quality when a policy uses it."""
        admit = self.budget.admit
        scorer = self.scorer
        if scorer is None:
            qualities = [0.0] * len(urls)
        elif isinstance(scorer, OracleScorer):
            qualities = [scorer.quality_of(u) for u in urls]
        else:
            qualities = scorer.qualities(fingerprints(urls))
        items = []
        for url, quality in zip(urls, qualities):
            host = host_of(url)
            if admit(host):
                items.append((url, host, quality))
        self.frontier.add_many(items)

    def hungry(self, links: list[str], page_host: str | None = None) -> bool:
        """Could these links, now in the DUE buffer, feed a waiting worker? Yes if their page's host, or
        a host of ours one of them is for, has nothing queued. Asked only while a worker waits."""
        queued_of = self.frontier.queued_of
        if page_host is not None and not queued_of(page_host):
            return True
        owner, me, single = self.partitioner.owner, self.node_id, self.n_nodes == 1
        for url in links:
            other = host_of(url)
            if other != page_host and not queued_of(other) and (single or owner(other) == me):
                return True
        return False

    def _merge_finished(self) -> None:
        """A merge ended (called from the DUE's thread, through the loop): its new URLs go to the frontier
        now, not at the watch's next look."""
        if self.storage_error or self.due.closed:
            return
        try:
            new = self.due.poll()
            if new:
                self.enqueue(new)
        except OSError as exc:
            if exc.errno not in _STORAGE_ERRNOS:
                raise
            self._storage_failed(exc)

    def prompt_lookup(self, start: int) -> None:
        """Links that may feed a waiting worker are looked up in the DUE's disk set now (`peek`) instead of
        waiting in its buffer for the next merge (due.prompt_lookups, docs/due.md)."""
        t0 = time.perf_counter()
        try:
            new = self.due.peek(start)
        except OSError as exc:
            if exc.errno not in _STORAGE_ERRNOS:
                raise
            self._storage_failed(exc)
            return
        if new:
            self.enqueue(new)
        delay_s = time.perf_counter() - t0
        self.discovery_delays.append(delay_s)
        self.discovery_seconds.observe(delay_s)

    # --- workers and lifecycle ---------------------------------------------------------
    async def _worker(self) -> None:
        frontier = self.frontier
        while True:
            item = await frontier.get()
            if item is None:
                return
            host, url = item
            self._inflight += 1
            delay = self.visitor.min_delay_s
            try:
                delay = await self.visitor.visit(host, url)
            except asyncio.CancelledError:
                # The drain timed out mid-fetch: the URL goes back and is fetched after a restart.
                frontier.requeue(host, url)
                raise
            except OSError as exc:
                if exc.errno not in _STORAGE_ERRNOS:
                    self.counters.worker_errors += 1
                    log.exception("node %d: unexpected error on %s (worker goes on)", self.node_id, url)
                else:
                    self._storage_failed(exc)
            except Exception:  # one page must never kill a worker
                self.counters.worker_errors += 1
                log.exception("node %d: unexpected error on %s (worker goes on)", self.node_id, url)
            finally:
                # In a cluster a page is done for good only once its cross links are durable (_confirm).
                frontier.release(host, delay, confirmed=self.peers is None)
                self._inflight -= 1

    def stop(self, reason: str) -> None:
        """Ask the node to finish: workers end after their current URL.

        At a limit, a node of a cluster stops fetching but keeps receiving
        batches and answering the termination check until the cluster is done;
        on a signal or at the cluster's end it leaves at once.
        """
        if reason in ("SIGTERM", "SIGINT"):
            self._interrupted.set()
        if reason in ("max_pages", "max_duration") and self.n_nodes > 1:
            self._limited = True
        else:
            self._cluster_done.set()
        if not self._stopping:
            self._stopping = True
            self._stop_reason = reason
            self.frontier.close()
            if self._workers:
                self._drain_timer = asyncio.get_running_loop().call_later(
                    self.config.crawl.drain_timeout_s, self._cut_drain)

    def _storage_failed(self, exc: OSError) -> None:
        """The node cannot write its state (disk full, read-only): going on would lose what it cannot
        record, so it stops; what is on disk is the last consistent state, and a restart resumes it."""
        if not self.storage_error:
            self.storage_error = f"{exc.strerror or exc}: {exc.filename or self.data_dir}"
            self.frontier.stop_journal(exc)      # from now on links are dropped: record no page as done
            # The DUE releases nothing more: the URLs it handed out last may be the ones the frontier
            # failed to record (a checkpoint in progress, a submit after an await would release them).
            self.due.hold(exc)
            log.error("node %d: cannot write its state (%s); stopping. Free space and start it again: it "
                      "resumes from what is on disk.", self.node_id, self.storage_error)
        self.stop("storage_error")

    def _cut_drain(self) -> None:
        """The drain timeout passed: cancel the fetches still running (their URLs are put back)."""
        running = [t for t in self._workers if not t.done()]
        if running:
            log.warning("node %d: %d fetches still running after crawl.drain_timeout_s=%.1f s; cancelled, their "
                        "URLs stay queued", self.node_id, len(running), self.config.crawl.drain_timeout_s)
        for task in running:
            task.cancel()

    def _idle(self) -> bool:
        """No work here: nothing queued or in flight, nothing pending in splitter, DUE or peer links."""
        if self._inflight or self.due.pending or self.splitter.pending:
            return False
        if not self._limited and not self.frontier.idle():
            return False
        return self.peers is None or self.peers.idle()

    def _status(self) -> dict:
        counts = self.peers.counts() if self.peers is not None else {}
        return {"idle": self._idle(),
                "activity": [counts.get("batches_sent_total", 0), counts.get("batches_received_total", 0),
                             self.counters.fetches]}

    async def _watch(self) -> None:
        """Ends the crawl when there is no work left or a limit is reached."""
        max_s = self.config.crawl.max_duration_s
        loop = asyncio.get_running_loop()
        progress_every = self.config.metrics.progress_interval_s
        next_progress = loop.time() + progress_every if progress_every else float("inf")
        flush_every_s = flush_wait_s = self.config.due.flush_interval_s
        last_flush = loop.time()
        early: tuple[int, int] | None = None     # a running early merge: (workers waiting, DUE's new count)
        fc = self.config.frontier
        next_checkpoint = loop.time() + fc.checkpoint_interval_s
        next_fsync = loop.time() + fc.journal_fsync_s
        while not self._cluster_done.is_set():
            await asyncio.sleep(WATCH_INTERVAL_S)
            now = loop.time()
            if max_s and now - self._t0 >= max_s:
                self.stop("max_duration")
            try:
                if now >= next_checkpoint:
                    next_checkpoint = now + fc.checkpoint_interval_s
                    # After a storage error what is on disk stays as it is: the last consistent state.
                    if not self.storage_error and (self._saving is None or self._saving.done()):
                        self._saving = asyncio.create_task(self._checkpoint(), name="checkpoint")
                elif fc.journal_fsync_s and now >= next_fsync:
                    next_fsync = now + fc.journal_fsync_s
                    self.frontier.sync_soon()
                # "The frontier runs low" means workers wait for a host: queued URLs on hosts that must
                # wait out politeness do not count (a policy may hold many URLs on few hosts).
                # An idle node merges at once, here (nothing in flight to stall). With fetches in
                # flight the merge runs in the DUE's background thread (tens of ms: on the loop it
                # would stall those fetches and inflate their measured times, and so their hosts'
                # politeness delays). It costs ~10 ms of CPU whatever it yields. While the frontier
                # holds a queue per worker, merges that yield fewer URLs than workers waited for
                # back off (more URLs for busy hosts do not help); once it holds less, the next
                # hosts' URLs may be in the buffer, so it merges every interval.
                if not self.storage_error:
                    new = self.due.poll()
                    if new:
                        self.enqueue(new)
                    if early is not None and not self.due.merging:
                        waited, new_before = early
                        early = None
                        flush_wait_s = (flush_every_s if self.due.stats()["new"] - new_before >= waited
                                        else min(flush_wait_s * 2, flush_every_s * EARLY_MERGE_BACKOFF_MAX))
                # A node stopped by a limit still takes its peers' batches: with nothing in flight it
                # merges them at once (into the closed frontier, kept for a restart), or it never idles.
                quiet = self._inflight == 0 and (self._limited or self.frontier.idle())
                if not self.storage_error and self.due.pending:
                    if quiet:
                        if not self.due.merging:      # else the next tick collects it
                            last_flush = now
                            self.enqueue(self.due.flush())
                    elif (not self.due.merging and self.frontier.waiting_workers and now - last_flush >= (
                            flush_every_s if self.frontier.queued < self.config.workers else flush_wait_s)):
                        last_flush = now
                        early = (self.frontier.waiting_workers, self.due.stats()["new"])
                        if not self.due.start_merge():
                            early = None
                if quiet and self.splitter.pending:
                    await self.splitter.flush_all()
            except OSError as exc:
                if exc.errno not in _STORAGE_ERRNOS:
                    raise
                self._storage_failed(exc)       # this loop must go on: it is what ends the crawl
            if self.n_nodes == 1 and self._idle():
                self.stop("done")
            if now >= next_progress:
                next_progress = now + progress_every
                self.progress()

    async def _checkpoint(self) -> None:
        """The periodic save of every part (crawler/state.py); the crawl goes on meanwhile."""
        try:
            await save_all(self.parts, self.state)
        except OSError as exc:
            if exc.errno in _STORAGE_ERRNOS:
                self._storage_failed(exc)
            else:
                log.error("node %d: checkpoint failed (%s); the crawl goes on, the next one tries again",
                          self.node_id, exc)

    async def _confirm(self) -> None:
        """Cluster only: confirm fetched pages once their links are durable.

        A page's cross-host links sit in the splitter's batches and the peer
        links' memory until a peer ACKs them (its DUE has them) or they are
        spooled; a crash before that would lose them, so the page stays
        unconfirmed and is fetched again after a restart. Every
        `frontier.confirm_interval_s`: flush the splitter, note each link's
        newest batch, wait until all of them are durable, confirm.
        """
        interval = self.config.frontier.confirm_interval_s
        while True:
            await asyncio.sleep(interval)
            mark = self.frontier.unconfirmed_mark()
            await self.splitter.flush_all()
            marks = self.peers.marks()
            while not self.peers.durable(marks):
                await asyncio.sleep(min(interval, 0.05))
            self.frontier.confirm(mark)

    async def _linger(self) -> None:
        """Keep /metrics up after the crawl so a scraper sees the final values (metrics.linger_s)."""
        linger_s = self.config.metrics.linger_s
        if linger_s and self.metrics_server is not None and not self._interrupted.is_set():
            try:
                await asyncio.wait_for(self._interrupted.wait(), linger_s)
            except TimeoutError:
                pass

    def progress(self) -> None:
        c = self.counters
        if self._rate is None:
            self._rate = Rate(self._started)
        rates = ", ".join(f"{name} {100 * r:.1f}%" for name, r in self.cache_hit_rates().items() if r is not None)
        print(f"node {self.node_id}: {c.fetches} pages ({self._rate.text(c.fetches, time.monotonic())}), "
              f"frontier {self.frontier.queued} URLs on {self.frontier.active_hosts} hosts, "
              f"errors {sum(c.errors.values())}, cache hits: {rates or '-'}", file=sys.stderr, flush=True)

    async def start(self) -> None:
        c = self.config
        if KERNELS == COMPILED:
            log.info("node %d: %s", self.node_id, kernels_line())
        else:
            log.warning("node %d: %s", self.node_id, kernels_line())
        self.data_dir.mkdir(parents=True, exist_ok=True)
        loop = asyncio.get_running_loop()

        def merged() -> None:                           # runs in the merge thread
            try:
                loop.call_soon_threadsafe(self._merge_finished)
            except RuntimeError:                        # the loop is closed: the node is gone
                pass

        self.due.on_merge_done = merged
        if c.splitter.log.enabled:
            self.splitter.log = StreamLog(self.data_dir / "splitter-log", self.node_id, self.n_nodes,
                                          c.splitter.log.rotate_bytes)
        if self.n_nodes > 1:
            secret = cluster_secret(c, self.source)
            options = {k: v for k, v in vars(c.peers).items() if k != "termination_round_s"}
            self.peers = PeerNetwork(self.me, c.cluster.nodes, c.cluster.name, secret, self.data_dir / "peers",
                                     self._on_batch, self._on_control, **options)
            self.termination = Termination(self.node_id, self.n_nodes, self._status, self.peers.send_control,
                                           self.peers.broadcast_control, lambda: self.stop("done"),
                                           c.peers.termination_round_s)
            await self._listen("peers", "peer_port", self.me.host, self.me.peer_port, self.peers.start)
        self.resolver = Resolver(c.fetch.dns, allow_private_networks=c.fetch.allow_private_networks)
        self.fetcher = Fetcher(c.fetch, self.resolver, c.crawl.user_agent, source_address=self.me.source_address,
                               max_url_bytes=c.filter.max_url_bytes, proxy=self.me.proxy)
        if c.robots.enabled:
            self.robots = RobotsCache(self.fetcher, c.robots, c.crawl.user_agent,
                                      max_retry_after_s=c.politeness.max_retry_after_s,
                                      hop_delay_s=lambda duration_s: self.visitor.delay_for(duration_s, None))
        self.parts = self._state_parts()
        if self.resuming:
            restore_all(self.parts, self.state)
        self.records.open(c, self.data_dir, self.node_id)
        if c.metrics.enabled:
            self.metrics_server = MetricsServer(self.registry, c.metrics.bind, self.me.metrics_port)
            await self._listen("/metrics", "metrics_port", c.metrics.bind, self.me.metrics_port,
                               self.metrics_server.start)
            log.info("node %d: metrics at http://%s:%d/metrics", self.node_id, c.metrics.bind, self.metrics_server.port)

    async def _listen(self, what: str, key: str, host: str, port: int,
                      start: Callable[[], Awaitable[None]]) -> None:
        try:
            await start()
        except OSError as exc:
            raise ListenError(f"node {self.node_id}: cannot listen for {what} on {host}:{port} "
                              f"(cluster.nodes, node {self.node_id}: {key}): {exc.strerror or exc}") from None

    async def _abandon_start(self) -> None:
        """start() failed before anything was crawled: close what it opened. A fresh crawl's state is
        removed again (a later run starts it anew instead of refusing a data_dir without state.json);
        a resumed one is kept for the next run."""
        if self.peers is not None:
            await self.peers.close()
        for call in self._io_closers():
            result = call()
            if asyncio.iscoroutine(result):
                await result
        self.frontier.close()
        self.due.close()
        self.frontier.shutdown()
        if not self.resuming:
            self.dir.remove_state()

    def _io_closers(self) -> list[Callable[[], object]]:
        """Close calls of the I/O parts start() opened (some return coroutines), in closing order."""
        calls: list[Callable[[], object]] = [part.close for part in (self.fetcher, self.resolver) if part is not None]
        calls += self.records.closers()
        if self.metrics_server is not None:
            calls.append(self.metrics_server.stop)
        return calls

    def _on_control(self, peer: int, message: dict) -> None:
        if self.termination is not None:
            self.termination.on_control(peer, message)

    async def close(self) -> None:
        """Flush, save and close every part. A part that cannot write (full disk) is reported; from then on
        the crawl's state (frontier, DUE, state/) is left as it is on disk, as after a crash."""
        async def step(call) -> None:
            try:
                result = call()
                if asyncio.iscoroutine(result):
                    await result
            except OSError as exc:
                self._storage_failed(exc)

        if self.peers is not None:
            await step(self.splitter.flush_all)
            mark = self.frontier.unconfirmed_mark()
            await step(self.peers.close)                  # what is not ACKed goes to the spool
            await step(lambda: self.frontier.confirm(mark))
        await step(self.splitter.close)
        self.due.on_merge_done = None
        for call in self._io_closers():
            await step(call)
        self.visitor.close()
        if not self.storage_error:
            # Merge what the DUE still holds so the frontier checkpoint has it (clean stop).
            await step(lambda: self.enqueue(self.due.flush()))
        if not self.storage_error:
            await step(lambda: save_all(self.parts, self.state, final=True))
        if not self.storage_error:
            await step(self.due.close)
        # After a storage error the DUE is left as a crash would leave it: closing it would release the
        # merges whose new URLs it handed out, and the write that failed may have been the frontier's
        # record of them; unreleased, a restart hands them out again (counted in duplicates_emitted).

    async def run(self, *, handle_signals: bool = False) -> dict:
        """Crawl until done; returns the summary."""
        loop = asyncio.get_running_loop()
        self._started = time.monotonic()
        self._cpu0 = time.process_time()
        self._t0 = loop.time()
        try:
            await self.start()
        except ConfigError:               # a port taken, a TLS file that will not load, a bad proxy
            await self._abandon_start()
            raise
        self._cpu_marks["start"] = time.process_time()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop, sig.name)
        background = []
        try:
            if self.resuming or self.frontier.resumed:
                counts = self.frontier.counts
                log.warning("node %d: resumed: %d URLs queued on %d hosts, %d fetches were in flight, "
                            "%d done but unconfirmed", self.node_id, self.frontier.queued, self.frontier.active_hosts,
                            counts.resumed_inflight, counts.resumed_unconfirmed)
            else:
                await add_seeds(self)
            self.dir.write_state(finished=False)
            workers = self._workers = [asyncio.create_task(self._worker(), name=f"worker-{i}")
                                       for i in range(self.config.workers)]
            background.append(asyncio.create_task(self._watch(), name="watch"))
            background.append(asyncio.create_task(self.splitter.run_timer(), name="splitter-timer"))
            if self.peers is not None:
                background.append(asyncio.create_task(self._confirm(), name="confirm"))
            if self.termination is not None and self.node_id == 0:
                background.append(asyncio.create_task(self.termination.run_coordinator(), name="termination"))
            await asyncio.gather(*workers, return_exceptions=True)
            self._cpu_marks["crawl"] = time.process_time()
            if self._drain_timer is not None:
                self._drain_timer.cancel()
            await self._cluster_done.wait()
            if self._stop_reason == "done":
                self.dir.write_state(finished=True, finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            self.finished.set()
            await self._linger()
        finally:
            if self._saving is not None:
                background.append(self._saving)      # the clean stop's save follows; a cut one is redone
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            if handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            self._cpu_marks.setdefault("crawl", time.process_time())
            await self.close()
        return self.summary()

    # --- reporting ---------------------------------------------------------------------
    def totals(self) -> PageCounts:
        """The crawl's counters: what earlier processes saved plus this process."""
        return self.restored + self.counters

    def filter_rejected_total(self) -> Counter:
        return self.restored_filter_rejected + self.filter.rejected

    def summary(self) -> dict:
        """The crawl's figures (totals go on across restarts; `run` is this process alone)."""
        c = self.totals()
        run = self.counters
        duration = time.monotonic() - self._started
        pages = sum(n for (cls, kind), n in c.pages.items() if kind == "page")
        run_pages = sum(n for (cls, kind), n in run.pages.items() if kind == "page")
        return {
            "node": self.node_id,
            "stop": self._stop_reason,
            "kernels": KERNELS,
            "resumed": self.resuming,
            "pages": pages,
            "fetches": c.fetches,
            "robots_fetches": c.robots_fetches,
            "bytes": sum(c.bytes.values()),
            "errors": sum(c.errors.values()),
            "errors_by_reason": dict(c.errors),
            "status": {cls: n for (cls, kind), n in sorted(c.pages.items()) if kind == "page"},
            "robots_denied": c.robots_denied,
            "robots_parked": c.robots_parked,
            "robots_unreachable": c.robots_unreachable,
            "dropped": dict(c.dropped),
            "filter_rejected": sum(self.filter_rejected_total().values()),
            "links": c.links_extracted,
            "links_truncated": c.links_truncated,
            "new_urls": self.due.stats()["new"],
            "due": {k: self.due.stats()[k] for k in ("merges", "merge_seconds", "merge_cpu_seconds", "disk_fingerprints",
                                                     "disk_bytes", "duplicates_emitted")},
            "worker_errors": c.worker_errors,
            "discovery_delay_s": self._discovery_summary(),
            "storage_error": self.storage_error,
            "cache_hit_rates": self.cache_hit_rates(),
            "cache_lookups": {name: list(hc) for name, hc in self.cache_counts().items()},
            "splitter": {k: v for k, v in self.splitter.stats().items() if k != "by_destination"},
            "urls_received": self.urls_received,
            "peer_bytes_sent": self._peer_total("bytes_sent"),
            "run": {"pages": run_pages, "fetches": run.fetches, "robots_fetches": run.robots_fetches,
                    "bytes": sum(run.bytes.values()), "errors": sum(run.errors.values())},
            "duration_s": round(duration, 3),
            "cpu_s": round(time.process_time() - self._cpu0, 3),
            "cpu_phases_s": self._cpu_phases(),
            "pages_per_s": round(run_pages / duration, 2) if duration > 0 else 0.0,
        }

    def _discovery_summary(self) -> dict:
        """Prompt lookups of this process: how many, and their delays' median, p99 and max (seconds)."""
        delays = sorted(self.discovery_delays)
        if not delays:
            return {"lookups": 0}
        at = lambda q: round(delays[min(len(delays) - 1, int(q * len(delays)))], 6)     # noqa: E731
        return {"lookups": len(delays), "p50": at(0.5), "p99": at(0.99), "max": round(delays[-1], 6)}

    def _cpu_phases(self) -> dict:
        """CPU seconds by phase: opening the stores, crawling (until the workers end), and the
        rest (waiting for the cluster to finish, the final flush, checkpoint and close). Which
        phase a cost sits in tells a fixed per-process cost from a per-page one."""
        now = time.process_time()
        start = self._cpu_marks.get("start", now)
        crawl = self._cpu_marks.get("crawl", now)
        return {"start": round(start - self._cpu0, 3), "crawl": round(crawl - start, 3), "finish": round(now - crawl, 3)}

    def cache_hit_rates(self) -> dict:
        rates = {}
        for name, (hits, misses) in self.cache_counts().items():
            total = hits + misses
            rates[name] = round(hits / total, 4) if total else None
        return rates

    def _peer_total(self, key: str) -> int:
        if self.peers is None:
            return 0
        return sum(p[key] for p in self.peers.counts()["peers"].values())

    def cache_counts(self) -> dict[str, tuple[int, int]]:
        """(hits, misses) per URL cache: the DUE's front cache and the splitter's."""
        s = self.due.stats()
        sc = self.splitter_cache
        counts = {"due": (s["cache_hits"], s["cache_misses"])}
        if sc.hits + sc.misses:
            counts["splitter"] = (sc.hits, sc.misses)
        return counts

    def metrics_snapshot(self) -> dict:
        c = self.counters
        totals = self.totals()
        lookups = {}
        for name, (hits, misses) in self.cache_counts().items():
            lookups[(name, "hit")] = hits
            lookups[(name, "miss")] = misses
        due = self.due.stats()
        dns = self.resolver.stats() if self.resolver is not None else {}
        splitter_urls = {(str(d), "local" if d == self.node_id else "cross"): n
                         for d, n in self.splitter.by_destination.items()}
        counts = self.peers.counts() if self.peers is not None else {"peers": {}, "rejected": {}}
        peers = {p: dict(v, connected=int(self.peers.connected(p))) for p, v in counts["peers"].items()}
        return {
            "dns_failures": dns.get("failures", {}), "dns_queries": dns.get("latency_count", 0),
            "dns_seconds": dns.get("latency_s_sum", 0.0),
            "splitter_urls": splitter_urls, "splitter_batches": self.splitter.batches_sent,
            "peers": peers, "peer_rejected": counts["rejected"], "due": due,
            "pages": c.pages, "bytes": c.bytes, "errors": c.errors,
            "links_extracted": c.links_extracted, "links_truncated": c.links_truncated,
            "filter_rejected": self.filter.rejected,
            "robots_denied": c.robots_denied, "duplicate_content": c.duplicate_content,
            "robots_parked": c.robots_parked, "robots_unreachable": c.robots_unreachable,
            "urls_dropped": c.dropped, "worker_errors": c.worker_errors, "cache_lookups": lookups,
            "cache_entries": {"due": due["cache_size"], "splitter": self.splitter_cache.size,
                              "content": self.visitor.content_seen.size},
            "cache_capacity": {"due": due["cache_capacity"], "splitter": self.splitter_cache.capacity,
                               "content": self.visitor.content_seen.capacity},
            "due_checks": due["checks"], "due_new": due["new"],
            "frontier_urls": self.frontier.queued, "frontier_active_hosts": self.frontier.active_hosts,
            "frontier_busy_hosts": self.frontier.busy_hosts, "dns_lookups": dns.get("lookups", {}),
            "crawl_pages": totals.pages, "crawl_bytes": totals.bytes, "crawl_errors": totals.errors,
        }

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

The visit of one URL (robots.txt, fetch, retry, parse) is in visit.py, the
watch loop that ends the crawl in housekeeping.py, the summary in report.py
(the package's docstring lists them all).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

from crawler._native import COMPILED, KERNELS, kernels_line
from crawler.cache import Cache, cache_from_config
from crawler.config import Config, ConfigError, cluster_secret, node_config
from crawler.config.schema import CacheConfig, NodeConfig
from crawler.console import Console
from crawler.control.controller import Control
from crawler.control.server import routes as control_routes
from crawler.due import DiskDUE
from crawler.fetch import Fetcher, Resolver, RobotsCache
from crawler.filter import HostBudget, URLFilter
from crawler.filter.nearer import NearerPaths
from crawler.filter.scope import ScopeFilter
from crawler.frontier import Frontier, InlinkScorer, OracleScorer
from crawler.metrics import MetricsServer, NodeCollector, register_process_metrics
from crawler.node.errors import ListenError, is_storage_error
from crawler.node.housekeeping import Housekeeping
from crawler.node.identity import DataDir
from crawler.node.lookups import PromptLookups
from crawler.node.records import Records
from crawler.node.report import Report
from crawler.node.seeds import add_seeds, read_seeds
from crawler.node.totals import CrawlTotals, PageCounts
from crawler.node.visit import Visitor
from crawler.peers import PeerNetwork
from crawler.reports.endpoint import routes as report_routes
from crawler.reports.state import ReportState
from crawler.splitter import HostSplitter, Partitioner, StreamLog
from crawler.splitter.streamlog import NO_WORKER
from crawler.state import DueState, FrontierState, PeerSpoolState, Stateful, StateStore, restore_all, save_all
from crawler.termination import Termination
from crawler.urls import fingerprints, host_of
from crawler.urls.lineage import NO_FP, UNKNOWN, Lineage, bare, bare_all, hops_and_vias, tag_all

log = logging.getLogger("crawler.node")
_HOPS_SALT = 0x9E3779B97F4A7C15       # odd 64-bit constant: hop counts map to distinct splitter-cache keys
_U64_MASK = (1 << 64) - 1


def build_cache(config: CacheConfig, where: str) -> Cache:
    """A URL cache from its config section (`splitter.cache`, `due.cache`); errors name the key."""
    try:
        return cache_from_config(config)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


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
        self.inflight = 0
        self._stopping = False
        self.stop_reason = ""
        self.limited = False          # a limit stopped our fetching; we still serve the cluster
        self.cluster_done = asyncio.Event()
        self.finished = asyncio.Event()     # the crawl is over; /metrics may still be served (linger)
        self.interrupted = asyncio.Event()
        self.urls_received = 0
        self._workers: list[asyncio.Task] = []
        self.storage_error = ""
        self._drain_timer: asyncio.TimerHandle | None = None

        c = config
        self.filter = URLFilter(c.filter)
        try:
            self.seeds = read_seeds(c.crawl, node_id)     # every node: the per-seed scopes need them all
        except OSError as exc:
            raise ConfigError(f"{source}: crawl.seeds_file: cannot read {c.crawl.seeds_file}: {exc.strerror}") from None
        self.scope = ScopeFilter(c.scope, self.seeds, self.filter.rejected)
        self.nearer = NearerPaths(c.scope.max_hops, c.scope.memory_urls, c.scope.memory_links, self.scope.seed_fps)
        self._resending: set[asyncio.Task] = set()
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
                                 per_ip=c.politeness.per_ip,
                                 # the longest delay a response can earn: Visitor.delay_for caps at this
                                 max_delay_s=max(c.politeness.max_delay_s, c.politeness.min_delay_s))
        self.frontier.on_storage_error = self.storage_failed
        self.scorer = self._scorer()
        self.visitor = Visitor(self)
        self.registry = CollectorRegistry()
        self.registry.register(NodeCollector(self.metrics_snapshot))
        register_process_metrics(self.registry, node_id=node_id, cluster=c.cluster.name)
        self.records = Records(self.counters, self.registry)
        self.control = Control(self)                 # crawler ctl: pause, seeds, blocks, delays (crawler/control)
        self.console = Console(self)                 # the page at / on the metrics port (crawler/console)
        self.records.on_fetch = self.console.tally.record
        self.report_state = ReportState(self, self.records.tally)   # crawler report (crawler/reports)
        self.lookups = PromptLookups(self, self.registry)
        self.metrics_server: MetricsServer | None = None
        self.resolver: Resolver | None = None
        self.fetcher: Fetcher | None = None
        self.robots: RobotsCache | None = None
        # Every part whose state outlives the process (crawler/state.py); start() makes the full list.
        self.state = StateStore(self.data_dir / "state")
        self.parts: list[Stateful] = self._state_parts()
        self.housekeeping = Housekeeping(self)
        self.report = Report(self)

    def _state_parts(self) -> list[Stateful]:
        """The parts the state protocol saves, in order: the DUE and frontier first (the crawl's work),
        the totals last (they count what the others did)."""
        parts: list[Stateful] = [DueState(self.due), FrontierState(self.frontier)]
        if self.peers is not None:
            parts.append(PeerSpoolState(self.peers))
        parts += [p for p in (self.robots, self.resolver) if p is not None]
        parts.append(self.control.part)
        if self.nearer.active:
            parts.append(self.nearer)
        # The report's tally after the totals: its restore sets the totals the crawl log counts (crawler/reports).
        parts += [CrawlTotals(self), self.report_state]
        return parts

    def _scorer(self) -> InlinkScorer | OracleScorer | None:
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
    async def add_urls(self, urls: list[str], page: Lineage = UNKNOWN, page_fp: int = NO_FP,
                       worker: int = NO_WORKER) -> None:
        """Filter -> scope -> splitter -> DUE -> frontier for the canonical links of a page (hot path: once
        per page); `page` is the page's lineage, its links are one hop further; `worker` is the worker
        whose page they came from, for the splitter's stream log."""
        if self.storage_error:
            return              # state can no longer be written: the DUE must not call these URLs seen
        urls = self.control.admit(self.filter.filter(urls))
        urls, cut = self.scope.admit(urls, page.hops + 1, page.seed)
        if cut and self.nearer.active and page_fp != NO_FP:
            self.nearer.remember_cut(page_fp, page.hops, page.seed, cut)
        await self._route(urls, page.hops + 1, page.seed, page_fp, worker)

    async def _route(self, urls: list[str], hops: int, seed: int, via: int, worker: int = NO_WORKER) -> None:
        """Canonical URLs in scope, all at `hops` from `seed`, found on page `via`: tagged with that lineage
        (crawler/urls/lineage.py), split by owner, ours into the DUE."""
        if not urls:
            return
        fps = fingerprints(urls)
        # With a hop limit the splitter cache must not hide a nearer path to a URL it passed before
        # (docs/scope.md): its key is the URL's fingerprint mixed with the hop count.
        keys = fps ^ np.uint64((hops + 1) * _HOPS_SALT & _U64_MASK) if self.nearer.active else None
        fps, urls = await self.splitter.route(tag_all(urls, hops, seed, via), fps, worker, keys)
        if urls:
            if self.scorer is not None:
                self.scorer.count(fps)
            resend = (self.nearer.arrivals(fps.tolist(), [hops] * len(urls), [via] * len(urls))
                      if self.nearer.active else [])
            new = self.due.submit(fps, urls)
            if new:
                self.enqueue(new)
            for links, lineage in resend:
                await self._resend(links, lineage)

    async def _resend(self, links: list[str], lineage: Lineage) -> None:
        """Links cut for hops from a page now found nearer go on at their new distance (filter/nearer.py)."""
        links, _ = self.scope.admit(links, lineage.hops, lineage.seed)   # passed the URL filter already
        await self._route(links, lineage.hops, lineage.seed, lineage.via)

    def _on_batch(self, peer: int, urls: list[str]) -> None:
        """URLs a peer sends us enter at the DUE, exactly like our local stream."""
        if self.storage_error:
            raise OSError(errno.ENOSPC, f"node {self.node_id} cannot write its state")   # no ACK: resent later
        self.urls_received += len(urls)
        fps = fingerprints(bare_all(urls))
        if self.scorer is not None:
            self.scorer.count(fps)
        resend = []
        try:
            buffered = self.due.buffered
            if self.nearer.active:
                resend = self.nearer.arrivals(fps.tolist(), *hops_and_vias(urls))
            new = self.due.submit(fps, urls)
            if new:
                self.enqueue(new)
        except OSError as exc:
            if is_storage_error(exc):
                self.storage_failed(exc)
            raise                                   # no ACK: the peer keeps the batch and sends it again
        for links, lineage in resend:           # a task each; idle() waits for them
            task = asyncio.get_running_loop().create_task(self._resend(links, lineage))
            self._resending.add(task)
            task.add_done_callback(self._resending.discard)
        if self.lookups.wanted(buffered, urls):
            self.lookups.lookup(buffered)

    async def _send_batch(self, peer: int, urls: list[str]) -> None:
        assert self.peers is not None, "the splitter sends to peers only in a cluster"
        await self.peers.send(peer, urls)

    def enqueue(self, urls: list[str]) -> None:
        """New URLs (from the DUE) into the frontier, with their quality when a policy uses it."""
        urls = self.control.admit(urls)              # a peer's batch may predate a block
        admit = self.budget.admit
        scorer = self.scorer
        if scorer is None:
            qualities = [0.0] * len(urls)
        elif isinstance(scorer, OracleScorer):
            qualities = [scorer.quality_of(bare(u)) for u in urls]
        else:
            qualities = scorer.qualities(fingerprints(bare_all(urls)))
        items = []
        for url, quality in zip(urls, qualities):
            host = host_of(url)
            if admit(host):
                items.append((url, host, quality))
        self.frontier.add_many(items)

    # --- workers and lifecycle ---------------------------------------------------------
    async def _worker(self, index: int) -> None:
        """Worker `index` (0-based, as the splitter's stream log names it) visits until the frontier ends."""
        frontier = self.frontier
        logged = min(index, NO_WORKER)          # the log's u2 field: workers past 65534 share NO_WORKER
        while True:
            item = await frontier.get()
            if item is None:
                return
            host, url = item
            self.inflight += 1
            delay = self.visitor.min_delay_s
            try:
                delay = await self.visitor.visit(host, url, logged)
            except asyncio.CancelledError:
                # The drain timed out mid-fetch: the URL goes back and is fetched after a restart.
                frontier.requeue(host, url)
                raise
            except OSError as exc:
                if not is_storage_error(exc):
                    self.counters.worker_errors += 1
                    log.exception("node %d: unexpected error on %s (worker goes on)", self.node_id, url)
                else:
                    self.storage_failed(exc)
            except Exception:  # one page must never kill a worker
                self.counters.worker_errors += 1
                log.exception("node %d: unexpected error on %s (worker goes on)", self.node_id, url)
            finally:
                # In a cluster a page is done for good only once its cross links are durable (_confirm).
                frontier.release(host, delay, confirmed=self.peers is None)
                self.inflight -= 1

    def stop(self, reason: str) -> None:
        """Ask the node to finish: workers end after their current URL.

        At a limit, a node of a cluster stops fetching but keeps receiving
        batches and answering the termination check until the cluster is done;
        on a signal or at the cluster's end it leaves at once.
        """
        if reason in ("SIGTERM", "SIGINT"):
            self.interrupted.set()
        if reason in ("max_pages", "max_duration") and self.n_nodes > 1:
            self.limited = True
        else:
            self.cluster_done.set()
        if not self._stopping:
            self._stopping = True
            self.stop_reason = reason
            self.frontier.stop_handing_out()
            if self._workers:
                self._drain_timer = asyncio.get_running_loop().call_later(
                    self.config.crawl.drain_timeout_s, self._cut_drain)

    def storage_failed(self, exc: OSError) -> None:
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

    def idle(self) -> bool:
        """No work here: nothing queued or in flight, nothing pending in splitter, DUE or peer links."""
        if self.inflight or self.due.pending or self.splitter.pending or self._resending or self.control.paused:
            return False                             # a paused crawl is not done (crawler ctl pause)
        if not self.limited and not self.frontier.idle():
            return False
        return self.peers is None or self.peers.idle()

    def _status(self) -> dict:
        counts = self.peers.counts() if self.peers is not None else {}
        return {"idle": self.idle(),
                "activity": [counts.get("batches_sent_total", 0), counts.get("batches_received_total", 0),
                             self.counters.fetches]}

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
                loop.call_soon_threadsafe(self.housekeeping.merge_finished)
            except RuntimeError:                        # the loop is closed: the node is gone
                pass

        self.due.on_merge_done = merged
        if c.splitter.log.enabled:
            self.splitter.log = StreamLog(self.data_dir / "splitter-log", self.node_id, self.n_nodes,
                                          c.splitter.log.rotate_bytes)
        if self.n_nodes > 1:
            secret = cluster_secret(c, self.source)
            assert secret is not None, "cluster_secret refuses a cluster without one"
            self.peers = PeerNetwork(self.me, c.cluster.nodes, c.cluster.name, secret, self.data_dir / "peers",
                                     self._on_batch, self._on_control, options=c.peers)
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
        self.control.start()
        self.records.open(c, self.data_dir, self.node_id)
        self.report_state.begin()
        if c.metrics.enabled:
            self.metrics_server = MetricsServer(self.registry, c.metrics.bind, self.me.metrics_port,
                                                routes=control_routes(self.control) + self.console.routes()
                                                + report_routes(self))
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
        self.frontier.stop_handing_out()
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
        async def step(call: Callable[[], object]) -> None:
            try:
                result = call()
                if asyncio.iscoroutine(result):
                    await result
            except OSError as exc:
                self.storage_failed(exc)

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
        self.report.begin()
        self.housekeeping.t0 = loop.time()
        try:
            await self.start()
        except ConfigError:               # a port taken, a TLS file that will not load, a bad proxy
            await self._abandon_start()
            raise
        self.report.cpu_marks["start"] = time.process_time()
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
            # Every start offers all seeds: the DUE drops those the crawl has seen, so seeds added to
            # the config or the seeds file while the crawl was stopped are taken, and only those.
            await add_seeds(self)
            self.dir.write_state(finished=False)
            workers = self._workers = [asyncio.create_task(self._worker(i), name=f"worker-{i}")
                                       for i in range(self.config.workers)]
            background.append(asyncio.create_task(self.housekeeping.watch(), name="watch"))
            background.append(asyncio.create_task(self.splitter.run_timer(), name="splitter-timer"))
            if self.peers is not None:
                background.append(asyncio.create_task(self.housekeeping.confirm(), name="confirm"))
            if self.termination is not None and self.node_id == 0:
                background.append(asyncio.create_task(self.termination.run_coordinator(), name="termination"))
            await asyncio.gather(*workers, return_exceptions=True)
            self.report.cpu_marks["crawl"] = time.process_time()
            if self._drain_timer is not None:
                self._drain_timer.cancel()
            await self.cluster_done.wait()
            if self.stop_reason == "done":
                self.dir.write_state(finished=True, finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            self.finished.set()
            await self.housekeeping.linger()
        finally:
            if self.housekeeping.saving is not None:
                background.append(self.housekeeping.saving)      # the clean stop's save follows; a cut one is redone
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            if handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            self.report.cpu_marks.setdefault("crawl", time.process_time())
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
        return self.report.summary()

    def metrics_snapshot(self) -> dict:
        """What /metrics shows, read at each scrape."""
        return self.report.metrics_snapshot()

"""The node's housekeeping beside its workers: the watch loop (limits, checkpoints, journal syncs, early
merges, the end of the crawl, the progress line), the cluster's page confirmation, and the linger that
keeps /metrics up after the crawl."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import TYPE_CHECKING

from crawler.metrics.rate import Rate
from crawler.node.errors import is_storage_error
from crawler.node.merging import EarlyMergePolicy
from crawler.state import save_all

if TYPE_CHECKING:
    from crawler.node.node import Node

log = logging.getLogger("crawler.node")

WATCH_INTERVAL_S = 0.05          # the node's housekeeping tick (limits, checkpoints, early merges, the end)


class Housekeeping:
    """The node's background loops; `saving` is the periodic checkpoint while it runs."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.t0 = 0.0                                  # loop time the run began (crawl.max_duration_s)
        self.saving: asyncio.Task | None = None
        self._rate: Rate | None = None                 # the progress line's pages/s (made at the first line)

    async def watch(self) -> None:
        """Ends the crawl when there is no work left or a limit is reached."""
        node = self.node
        config = node.config
        due, frontier = node.due, node.frontier
        max_s = config.crawl.max_duration_s
        loop = asyncio.get_running_loop()
        progress_every = config.metrics.progress_interval_s
        next_progress = loop.time() + progress_every if progress_every else float("inf")
        merges = EarlyMergePolicy(config.due.flush_interval_s, config.workers, loop.time())
        fc = config.frontier
        next_checkpoint = loop.time() + fc.checkpoint_interval_s
        next_fsync = loop.time() + fc.journal_fsync_s
        while not node.cluster_done.is_set():
            await asyncio.sleep(WATCH_INTERVAL_S)
            now = loop.time()
            if max_s and now - self.t0 >= max_s:
                node.stop("max_duration")
            try:
                if now >= next_checkpoint:
                    next_checkpoint = now + fc.checkpoint_interval_s
                    # After a storage error what is on disk stays as it is: the last consistent state.
                    if not node.storage_error and (self.saving is None or self.saving.done()):
                        self.saving = asyncio.create_task(self.checkpoint(), name="checkpoint")
                elif fc.journal_fsync_s and now >= next_fsync:
                    next_fsync = now + fc.journal_fsync_s
                    frontier.sync_soon()
                # Early merges: crawler/node/merging.py says when and why.
                if not node.storage_error:
                    new = due.poll()
                    if new:
                        node.enqueue(new)
                    if merges.running is not None and not due.merging:
                        merges.finished(due.stats()["new"])
                # A node stopped by a limit still takes its peers' batches: with nothing in flight it
                # merges them at once (into the closed frontier, kept for a restart), or it never idles.
                quiet = node.inflight == 0 and (node.limited or frontier.idle())
                if not node.storage_error and due.pending:
                    if quiet:
                        if not due.merging:      # else the next tick collects it
                            merges.flushed(now)
                            node.enqueue(due.flush())
                    elif not due.merging and merges.should_start(now, frontier.waiting_workers, frontier.queued):
                        merges.started(now, frontier.waiting_workers, due.stats()["new"])
                        if not due.start_merge():
                            merges.not_started()
                if quiet and node.splitter.pending:
                    await node.splitter.flush_all()
            except OSError as exc:
                if not is_storage_error(exc):
                    raise
                node.storage_failed(exc)       # this loop must go on: it is what ends the crawl
            if node.n_nodes == 1 and node.idle():
                node.stop("done")
            if now >= next_progress:
                next_progress = now + progress_every
                self.progress()

    async def checkpoint(self) -> None:
        """The periodic save of every part (crawler/state.py); the crawl goes on meanwhile."""
        node = self.node
        try:
            await save_all(node.parts, node.state)
        except OSError as exc:
            if is_storage_error(exc):
                node.storage_failed(exc)
            else:
                log.error("node %d: checkpoint failed (%s); the crawl goes on, the next one tries again",
                          node.node_id, exc)

    def merge_finished(self) -> None:
        """A merge ended (called from the DUE's thread, through the loop): its new URLs go to the frontier
        now, not at the watch's next look."""
        node = self.node
        if node.storage_error or node.due.closed:
            return
        try:
            new = node.due.poll()
            if new:
                node.enqueue(new)
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            node.storage_failed(exc)

    async def confirm(self) -> None:
        """Cluster only: confirm fetched pages once their links are durable.

        A page's cross-host links sit in the splitter's batches and the peer
        links' memory until a peer ACKs them (its DUE has them) or they are
        spooled; a crash before that would lose them, so the page stays
        unconfirmed and is fetched again after a restart. Every
        `frontier.confirm_interval_s`: flush the splitter, note each link's
        newest batch, wait until all of them are durable, confirm.
        """
        node = self.node
        peers = node.peers
        assert peers is not None, "only a node of a cluster confirms"
        interval = node.config.frontier.confirm_interval_s
        while True:
            await asyncio.sleep(interval)
            mark = node.frontier.unconfirmed_mark()
            await node.splitter.flush_all()
            marks = peers.marks()
            while not peers.durable(marks):
                await asyncio.sleep(min(interval, 0.05))
            node.frontier.confirm(mark)

    async def linger(self) -> None:
        """Keep /metrics up after the crawl so a scraper sees the final values (metrics.linger_s)."""
        node = self.node
        linger_s = node.config.metrics.linger_s
        if linger_s and node.metrics_server is not None and not node.interrupted.is_set():
            try:
                await asyncio.wait_for(node.interrupted.wait(), linger_s)
            except TimeoutError:
                pass

    def progress(self) -> None:
        """The progress line on standard error (`metrics.progress_interval_s`)."""
        node = self.node
        c = node.counters
        if self._rate is None:
            self._rate = Rate(node.report.started)
        rates = ", ".join(f"{name} {100 * r:.1f}%" for name, r in node.report.cache_hit_rates().items()
                          if r is not None)
        print(f"node {node.node_id}: {c.fetches} pages ({self._rate.text(c.fetches, time.monotonic())}), "
              f"frontier {node.frontier.queued} URLs on {node.frontier.active_hosts} hosts, "
              f"errors {sum(c.errors.values())}, cache hits: {rates or '-'}", file=sys.stderr, flush=True)

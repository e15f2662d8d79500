"""Route each URL to its owner: local ones to our DUE, cross-host ones batched to peers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import numpy as np

from crawler.config.schema import SplitterConfig
from crawler.splitter.owner import Partitioner
from crawler.splitter.owner_pass import split_owners
from crawler.splitter.streamlog import FLAG_CACHE_HIT, FLAG_CROSS, NO_WORKER, StreamLog
from crawler.urls import host_of

SendBatch = Callable[[int, list[str]], Awaitable[None]]

_AUTHORITY_START = len("https://")       # the first "/" from here on ends a canonical URL's authority
                                         # (an http:// host has at least one character before it)
_ORIGIN_MEMO_LIMIT = 1 << 16             # origins remembered before the memo starts over
TIMER_SLACK_S = 0.001                    # batch deadlines are awaited this much late, never early


class HostSplitter:
    """The splitter of DESIGN 2.3; `route()` is called once per page (hot path)."""

    def __init__(self, config: SplitterConfig, node_id: int, partitioner: Partitioner, cache,
                 send: SendBatch, log: StreamLog | None = None) -> None:
        self.config = config
        self.node_id = node_id
        self.partitioner = partitioner
        self.cache = cache
        self.send = send
        self.log = log
        self._scope_all = config.cache_scope == "all"
        self._batch_size = config.batch_size
        self._batch_s = config.batch_ms / 1000.0
        self._batches: dict[int, list[str]] = {}
        self._born: dict[int, float] = {}
        self._opened = asyncio.Event()          # set when a batch is opened: wakes run_timer
        self._dest_counts = [0] * partitioner.nodes
        self._owner_by_origin: dict[str, int] = {}
        self.local = 0
        self.cross = 0
        self.cache_hits = 0
        self.urls_sent = 0
        self.batches_sent = 0
        self.largest_batch = 0

    async def route(self, urls: list[str], fps: np.ndarray, worker: int = NO_WORKER,
                    cache_keys: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
        """Returns the URLs this node owns (fingerprints, URLs); sends the rest on. `worker`, the
        worker whose page held them, is only logged (replay's one cache per worker). `cache_keys`
        (default: the fingerprints) are what the cache remembers: with scope.max_hops a URL's key
        includes its hop count, so a nearer path to a URL sent before still reaches its owner."""
        n = len(urls)
        if self.partitioner.nodes == 1 and not self._scope_all:  # single node: nothing to split
            self.local += n
            self._dest_counts[self.node_id] += n
            if self.log is not None:
                self.log.append(fps, np.full(n, self.node_id, np.uint16), np.zeros(n, np.uint16), worker)
            return fps, urls
        me = self.node_id
        owners, cross_idx, keep, keep_urls = split_owners(urls, self._owner_by_origin, self._resolve, me,
                                                          _AUTHORITY_START, self._dest_counts)
        n_cross = len(cross_idx)
        hit = None                              # bool per URL, or per cross URL (scope `cross`)
        if self.cache is not None and (self._scope_all or n_cross):
            keys = fps if cache_keys is None else cache_keys
            hit = self.cache.check_and_add_many(keys if self._scope_all else keys[cross_idx]).tolist()
        if self.log is not None:
            self._log(fps, owners, cross_idx, hit, worker)
        self.cross += n_cross
        self.local += n - n_cross
        if hit is not None:
            self.cache_hits += sum(hit)
        if self._scope_all and hit is not None:
            outgoing = [i for i in cross_idx if not hit[i]]
            keep = [i for i, o in enumerate(owners) if o == me and not hit[i]]
            keep_urls = None if len(keep) == n else [urls[i] for i in keep]
        else:
            outgoing = cross_idx if hit is None else [i for i, h in zip(cross_idx, hit) if not h]
        if outgoing:
            await self._append_many(owners, urls, outgoing)
        if keep_urls is None:                   # every URL is ours
            return fps, urls
        return fps[keep], keep_urls

    def _log(self, fps: np.ndarray, owners: list[int], cross_idx: list[int], hit: list[bool] | None,
             worker: int) -> None:
        """The stream log's record of one page: destination and flags per URL."""
        assert self.log is not None, "route() logs only with a stream log"
        n = len(owners)
        flags = np.zeros(n, dtype=np.uint16)
        flags[cross_idx] |= FLAG_CROSS
        if hit is not None:
            hits = np.zeros(n, dtype=bool)
            if self._scope_all:
                hits[:] = hit
            else:
                hits[cross_idx] = hit
            flags[hits] |= FLAG_CACHE_HIT
        self.log.append(fps, np.array(owners, dtype=np.uint16), flags, worker)

    def _resolve(self, origin: str, url: str) -> int:
        """The owner of a URL whose `scheme://authority` prefix the memo lacks (split_owners)."""
        memo = self._owner_by_origin
        if len(memo) >= _ORIGIN_MEMO_LIMIT:
            memo.clear()
        owner = memo[origin] = self.partitioner.owner(host_of(url))
        return owner

    @property
    def by_destination(self) -> dict[int, int]:
        """URLs routed to each node (this one included) so far."""
        return {d: n for d, n in enumerate(self._dest_counts) if n}

    async def _append_many(self, owners: list[int], urls: list[str], idx: list[int]) -> None:
        """Add urls[i] for i in idx to their owners' batches (in order); full batches are sent."""
        batches = self._batches
        for i in idx:
            peer = owners[i]
            batch = batches.get(peer)
            if batch is None:
                batch = batches[peer] = []
                self._born[peer] = time.monotonic()
                self._opened.set()
            batch.append(urls[i])
            if len(batch) >= self._batch_size:
                await self._flush(peer)

    async def _flush(self, peer: int) -> None:
        batch = self._batches.pop(peer, None)
        self._born.pop(peer, None)
        if not batch:
            return
        self.urls_sent += len(batch)
        self.batches_sent += 1
        self.largest_batch = max(self.largest_batch, len(batch))
        await self.send(peer, batch)

    async def flush_due(self) -> None:
        """Send every batch older than batch_ms (called by `run_timer`)."""
        now = time.monotonic()
        for peer in [p for p, born in self._born.items() if now - born >= self._batch_s]:
            await self._flush(peer)

    async def flush_all(self) -> None:
        for peer in list(self._batches):
            await self._flush(peer)
        if self.log is not None:
            self.log.flush()

    async def run_timer(self) -> None:
        """Flush batches by age; runs for the node's lifetime. It sleeps until the oldest open
        batch is due, and while no batch is open until one is: a fixed tick woke every node
        many times a second for nothing (a one-node crawl never opens a batch)."""
        while True:
            if not self._born:
                self._opened.clear()
                await self._opened.wait()
                continue
            wait_s = min(self._born.values()) + self._batch_s - time.monotonic()
            if wait_s > 0:
                await asyncio.sleep(wait_s + TIMER_SLACK_S)    # late, not early: no re-sleeping
            await self.flush_due()

    @property
    def pending(self) -> int:
        return sum(len(b) for b in self._batches.values())

    def stats(self) -> dict:
        return {
            "local": self.local, "cross": self.cross, "cache_hits": self.cache_hits,
            "urls_sent": self.urls_sent, "batches_sent": self.batches_sent,
            "largest_batch": self.largest_batch, "pending": self.pending,
            "by_destination": dict(self.by_destination),
        }

    def close(self) -> None:
        if self.log is not None:
            self.log.close()

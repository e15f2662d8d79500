"""The frontier proper: per-host queues, politeness timing, two-level scheduling, durability.

Every host with queued URLs has one `Host`: its queue is a heap `head` in RAM
(ordered by the URL policy), then `chunks` spilled to segment files, then a
RAM `tail` that new URLs join once anything is spilled (so arrival order is
kept across the three). A host is in exactly one state:

    IDLE     nothing queued (remembered a while for its next-contact time)
    WAITING  queued, on the `_waiting` heap until its next-contact time
    READY    queued and allowed now, on the `_ready` heap ranked by the host policy
    BUSY     a worker holds it: no other request to it can start
    BLOCKED  per-IP politeness: another host on its address is busy

Heap entries carry the host's version; any state change bumps it, so stale
entries are skipped when popped (lazy deletion). Politeness is the state
machine: a host is handed out only from READY, and only after its time; the
policy only orders hosts that are already allowed.

When the URLs held in RAM pass `memory_urls`, the hosts holding most are
spilled (head and tail written as chunks) until half the budget is free.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import logging
import os
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from crawler.config.schema import FrontierConfig
from crawler.frontier.journal import (
    HostRecord,
    Journal,
    journal_generation,
    journals_from,
    latest_checkpoint,
    read_checkpoint,
    read_journal,
    remove_before,
    write_checkpoint,
)
from crawler.frontier.policy import GlobalEstimates, HostPolicy, HostStats, HostView, url_key
from crawler.frontier.segments import DEFAULT_SEGMENT_BYTES, ChunkError, ChunkFile, ChunkRef, SegmentStore

log = logging.getLogger(__name__)

IDLE, WAITING, READY, BUSY, BLOCKED = range(5)
FIRST = float("-inf")            # head key of a URL put back: it is taken next
FORGET_EVERY = 4096              # releases between sweeps of idle hosts
COMPACT_LIVE_FRACTION = 0.5
TIMER_SLACK_S = 0.001            # wake-ups are armed this much late: never early (see _arm)      # segments less full than this are compacted


@dataclass(slots=True)
class FrontierStats:
    added: int = 0
    dispatched: int = 0
    requeued: int = 0
    spilled_urls: int = 0
    rewritten_urls: int = 0          # spilled again when small chunks are merged
    compactions: int = 0
    loaded_urls: int = 0
    chunk_errors: int = 0
    lost_urls: int = 0
    done_skipped: int = 0
    checkpoints: int = 0
    checkpoint_seconds: float = 0.0
    recovered_urls: int = 0
    resumed_inflight: int = 0
    resumed_unconfirmed: int = 0
    blocked_by_ip: int = 0


class Host:
    __slots__ = ("name", "head", "chunks", "tail", "tail_qmax", "queued", "qsum", "ready_at", "state", "version",
                 "stats", "ip", "inflight")

    def __init__(self, name: str) -> None:
        self.name = name
        self.head: list[tuple[float, int, float, str]] = []     # heap of (key, seq, quality, url)
        self.chunks: deque[ChunkRef] = deque()
        self.tail: list[tuple[int, float, str]] = []
        self.tail_qmax = 0.0
        self.queued = 0
        self.qsum = 0.0
        self.ready_at = 0.0            # monotonic time it may next be contacted
        self.state = IDLE
        self.version = 0
        self.stats: HostStats | None = None
        self.ip: str | None = None
        self.inflight: tuple[int, float, str] | None = None

    @property
    def ram(self) -> int:
        return len(self.head) + len(self.tail)

    def oldest_seq(self, fifo: bool) -> int:
        if fifo:
            seqs = [self.head[0][1]] if self.head else []
        else:
            seqs = [min(e[1] for e in self.head)] if self.head else []
        if self.chunks:
            seqs.append(min(c.first_seq for c in self.chunks))
        if self.tail:
            seqs.append(self.tail[0][0])
        return min(seqs) if seqs else 0

    def quality_max(self, fifo: bool) -> float:
        """Best queued quality. In a quality-keyed heap the best is the root or, when the root is
        a URL put back first, one of its two children; a FIFO-keyed head is scanned."""
        head = self.head if fifo else self.head[:3]
        best = max((e[2] for e in head), default=0.0)
        if self.chunks:
            best = max(best, max(c.qmax for c in self.chunks))
        return max(best, self.tail_qmax) if self.tail else best


@dataclass(slots=True)
class _Address:
    """Per-IP politeness: hosts sharing an address share its wait and its one request in flight."""
    busy: str | None = None
    next_ok: float = 0.0
    blocked: list[str] | None = None


class Frontier:
    """Politeness-aware, policy-ranked, disk-spilling, restartable URL frontier."""

    def __init__(self, config: FrontierConfig, workers: int, *, directory: str | Path | None = None,
                 per_ip: bool = False, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.config = config
        self.workers = workers
        self._per_ip = per_ip
        self._chunk = config.chunk_urls
        self._segment_bytes = segment_bytes
        self._memory_urls = config.memory_urls
        self._weight = config.ewma_weight
        self._estimates = GlobalEstimates()
        self.policy = HostPolicy(config.host_policy, requests_per_connection=config.requests_per_connection,
                                 estimates=self._estimates)
        self._bfs = config.host_policy == "bfs"
        self._key = url_key(config.url_policy)
        self._fifo = config.url_policy == "fifo"
        self._hosts: dict[str, Host] = {}
        self._addresses: dict[str, _Address] = {}
        self._waiting: list[tuple[float, int, str]] = []
        self._ready: list[tuple[float, int, str]] = []
        self._version = 0
        self._seq = 0
        self._ram = 0
        self._nonempty = 0
        self._busy = 0
        self._releases = 0
        self._done: set[str] = set()
        self._unconfirmed: deque[tuple[str, int, float, str]] = deque()     # (host, seq, quality, url)
        self._confirmed = 0
        self.queued = 0
        self.counts = FrontierStats()
        self._waiters: deque[asyncio.Future] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Durability.
        self.directory = Path(directory) if directory is not None else None
        self.resumed = False
        self._gen = 0
        self._journal: Journal | None = None
        self._store: SegmentStore | None = None
        self._pending: _CheckpointPlan | None = None
        # Set by the owner (the node) to hear of a journal write that failed (disk full): journal
        # writes happen inside dispatch, even from the loop's timer, where raising would lose the URL
        # being handed out and kill nothing but the callback. Unset, writes raise.
        self.on_storage_error: Callable[[OSError], None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._syncing: Future | None = None      # the last sync_soon's fsync
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._restore()
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="frontier-")
            self._store = SegmentStore(Path(self._tmp.name), segment_bytes=segment_bytes)

    # --- time ---------------------------------------------------------------------------
    def _now(self) -> float:
        """The real monotonic clock, not loop.time(): uvloop's loop time is cached per loop
        iteration and can lag by a whole iteration, which would let a host go early."""
        return time.monotonic()

    # --- adding -----------------------------------------------------------------------------
    def add(self, url: str, host: str, quality: float = 0.0) -> None:
        """Queue one new URL (the DUE has already said it is new)."""
        self.add_many([(url, host, quality)])

    def add_many(self, items: list[tuple[str, str, float]]) -> None:
        """Queue new URLs: (url, host, quality) each; one journal write for all. Hot path."""
        if not items:
            return
        rows = []
        seq = self._seq
        for url, host, quality in items:
            rows.append((seq, quality, host, url))
            self._insert(host, seq, quality, url)
            seq += 1
        self._seq = seq
        self.counts.added += len(items)
        if self._journal is not None:
            self._journal.added(rows)
        if self._ram > self._memory_urls:
            self._spill()
        self._dispatch()

    def _insert(self, name: str, seq: int, quality: float, url: str) -> None:
        h = self._hosts.get(name)
        if h is None:
            h = self._hosts[name] = Host(name)
        if not h.chunks and not h.tail and len(h.head) < self._chunk:
            heapq.heappush(h.head, (self._key(seq, quality), seq, quality, url))
        else:
            h.tail.append((seq, quality, url))
            if quality > h.tail_qmax:
                h.tail_qmax = quality
        if not h.queued:
            self._nonempty += 1
        h.queued += 1
        h.qsum += quality
        self.queued += 1
        self._ram += 1
        if h.state == IDLE:
            self._schedule(h)
        elif h.state == READY and not self._bfs:
            self._push_ready(h)            # its score changed

    def requeue(self, host: str, url: str) -> None:
        """Put the URL a worker holds back at the head of its host's queue: it is fetched next."""
        h = self._hosts[host]
        assert h.state == BUSY, host
        seq, quality, held = h.inflight if h.inflight is not None and h.inflight[2] == url else (self._seq, 0.0, url)
        h.inflight = None
        heapq.heappush(h.head, (FIRST, seq, quality, url))
        if not h.queued:
            self._nonempty += 1
        h.queued += 1
        h.qsum += quality
        self.queued += 1
        self._ram += 1
        self.counts.requeued += 1

    # --- scheduling ---------------------------------------------------------------------------
    def _bump(self, h: Host) -> int:
        self._version += 1
        h.version = self._version
        return h.version

    def _schedule(self, h: Host) -> None:
        """An idle or unblocked host with queued URLs waits for its time (and its address's)."""
        at = h.ready_at
        if self._per_ip and h.ip is not None:
            addr = self._addresses.get(h.ip)
            if addr is not None and addr.next_ok > at:
                at = addr.next_ok
        h.state = WAITING
        heapq.heappush(self._waiting, (at, self._bump(h), h.name))

    def _push_ready(self, h: Host) -> None:
        h.state = READY
        if self._bfs:
            score = -float(h.oldest_seq(self._fifo))
        else:
            score = self.policy.score(HostView(h.oldest_seq(self._fifo), h.queued, h.qsum,
                                               h.quality_max(self._fifo), h.stats or _NO_STATS))
        heapq.heappush(self._ready, (-score, self._bump(h), h.name))

    def _promote(self, now: float) -> None:
        waiting, hosts = self._waiting, self._hosts
        while waiting and waiting[0][0] <= now:
            _, version, name = heapq.heappop(waiting)
            h = hosts.get(name)
            if h is not None and h.version == version and h.state == WAITING:
                self._push_ready(h)

    def _pick(self) -> tuple[str, str] | None:
        """The best ready host's next URL, the host now BUSY; None when no host may go now."""
        now = self._now()
        self._promote(now)
        ready, hosts = self._ready, self._hosts
        while ready:
            _, version, name = heapq.heappop(ready)
            h = hosts.get(name)
            if h is None or h.version != version or h.state != READY:
                continue
            if self._per_ip and h.ip is not None and not self._address_allows(h, now):
                continue
            url = self._take(h)
            if url is None:
                continue
            return name, url
        return None

    def _address_allows(self, h: Host, now: float) -> bool:
        addr = self._addresses.get(h.ip)
        if addr is None:
            return True
        if addr.busy is not None and addr.busy != h.name:
            h.state = BLOCKED
            self._bump(h)
            if addr.blocked is None:
                addr.blocked = []
            addr.blocked.append(h.name)
            self.counts.blocked_by_ip += 1
            return False
        if addr.next_ok > now:
            h.ready_at = max(h.ready_at, addr.next_ok)
            self._schedule(h)
            return False
        return True

    def _take(self, h: Host) -> str | None:
        done = self._done
        while True:
            if not h.head and not self._refill(h):
                self._emptied(h)
                return None
            _, seq, quality, url = heapq.heappop(h.head)
            h.queued -= 1
            h.qsum -= quality
            self.queued -= 1
            self._ram -= 1
            if not h.queued:
                self._nonempty -= 1
            if done and url in done:
                done.discard(url)
                self.counts.done_skipped += 1
                continue
            break
        h.state = BUSY
        self._bump(h)
        h.inflight = (seq, quality, url)
        self._busy += 1
        if self._per_ip and h.ip is not None:
            self._addresses.setdefault(h.ip, _Address()).busy = h.name
        self.counts.dispatched += 1
        if self._journal is not None:
            self._journal.started(h.name, url)
        return url

    def _emptied(self, h: Host) -> None:
        h.state = IDLE
        self._bump(h)
        h.qsum = 0.0

    def _refill(self, h: Host) -> bool:
        """Move the next run of the host's queue into its head: a chunk from disk, else the tail."""
        key = self._key
        while h.chunks:
            ref = h.chunks.popleft()
            entries = self._read_chunk(h, ref)
            if entries is None:
                continue
            h.head = [(key(seq, q), seq, q, url) for seq, q, url in entries]
            heapq.heapify(h.head)
            self._ram += len(entries)
            self.counts.loaded_urls += len(entries)
            return True
        if h.tail:
            h.head = [(key(seq, q), seq, q, url) for seq, q, url in h.tail]
            heapq.heapify(h.head)
            h.tail = []
            h.tail_qmax = 0.0
            return True
        return False

    # --- taking and giving back -------------------------------------------------------------------
    async def get(self) -> tuple[str, str] | None:
        """Wait for a URL whose host may be contacted now: (host, url), or None once closed."""
        if self._closed:
            return None
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if not self._waiters:
            item = self._pick()
            if item is not None and self._closed:    # see _dispatch: the pick's journal write failed
                self.requeue(*item)
                return None
            if item is not None:
                return item
        fut = self._loop.create_future()
        self._waiters.append(fut)
        self._dispatch()
        return await fut

    def observe(self, host: str, connect_s: float | None, response_s: float, ip: str | None) -> None:
        """One fetch's timings (EWMA estimates for the policies) and the address it went to."""
        h = self._hosts.get(host)
        if h is None:
            return
        before = None
        if h.stats is None:
            h.stats = HostStats()
        else:
            before = HostStats(h.stats.connect_s, h.stats.response_s)
        h.stats.observe(connect_s, response_s, self._weight)
        self._estimates.replace(before, h.stats)
        if ip and self._per_ip and h.ip != ip:
            h.ip = ip
            addr = self._addresses.setdefault(ip, _Address())
            if addr.busy is None and h.state == BUSY:
                addr.busy = h.name

    def release(self, host: str, delay_s: float, *, confirmed: bool = True) -> None:
        """The host's request is done; it may be contacted again after `delay_s`.

        `confirmed=False`: the URL is done but what it led to is not durable
        yet (links still on their way to peers); it counts as done only after
        `confirm()`, and a crash before that fetches it again.
        """
        h = self._hosts[host]
        now = self._now()
        ready_at = now + delay_s
        if ready_at > h.ready_at:
            h.ready_at = ready_at
        url = ""
        if h.inflight is not None:
            if confirmed:
                url = h.inflight[2]
            else:
                self._unconfirmed.append((host,) + h.inflight)
        h.inflight = None
        self._busy -= 1
        if self._journal is not None:
            wall = time.time() + (h.ready_at - now) if h.ready_at > now else 0.0
            self._journal.finished(host, wall, url)
        if self._per_ip and h.ip is not None:
            self._release_address(h)
        if h.queued:
            self._schedule(h)
        else:
            self._emptied(h)
        self._releases += 1
        if self._releases % FORGET_EVERY == 0:
            self._forget_idle(now)
        self._dispatch()

    def unconfirmed_mark(self) -> int:
        """A mark for `confirm`: every URL released unconfirmed so far."""
        return self._confirmed + len(self._unconfirmed)

    def confirm(self, mark: int) -> None:
        """URLs released unconfirmed before `mark` are done for good (one journal write)."""
        n = min(mark - self._confirmed, len(self._unconfirmed))
        if n <= 0:
            return
        urls = [self._unconfirmed.popleft()[3] for _ in range(n)]
        self._confirmed += n
        if self._journal is not None:
            self._journal.confirmed(urls)

    def _release_address(self, h: Host) -> None:
        addr = self._addresses.get(h.ip)
        if addr is None:
            return
        if addr.busy == h.name:
            addr.busy = None
        if h.ready_at > addr.next_ok:
            addr.next_ok = h.ready_at
        if addr.blocked:
            blocked, addr.blocked = addr.blocked, None
            for name in blocked:
                b = self._hosts.get(name)
                if b is not None and b.state == BLOCKED:
                    self._schedule(b)

    def _forget_idle(self, now: float) -> None:
        """Drop idle hosts whose wait is over (bounds the host table to hosts that matter)."""
        gone = [name for name, h in self._hosts.items() if h.state == IDLE and not h.queued and h.ready_at <= now]
        for name in gone:
            del self._hosts[name]
        if self._per_ip:
            for ip in [ip for ip, a in self._addresses.items() if a.busy is None and not a.blocked and a.next_ok <= now]:
                del self._addresses[ip]

    def _dispatch(self) -> None:
        """Hand ready hosts to waiting workers, in arrival order; arm the timer for the next one."""
        waiters = self._waiters
        while True:
            while waiters and waiters[0].done():
                waiters.popleft()
            if not waiters:
                return
            item = self._pick()
            if item is None:
                break
            if self._closed:                         # _pick journals the fetch start; a failed write
                self.requeue(*item)                  # stops the node, which closes us (and the waiters)
                return
            waiters.popleft().set_result(item)       # nothing else runs between the check and this
        if self._waiting:
            self._arm(self._waiting[0][0])

    def _arm(self, at: float) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        # A timer that fires early only re-arms: _pick checks real time. The loop's timers have
        # millisecond resolution and its clock is read once per iteration, so without the slack
        # most timers fired early and re-armed for the sub-millisecond rest, again and again.
        self._timer = self._loop.call_later(max(at - time.monotonic(), 0.0) + TIMER_SLACK_S, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        self._dispatch()

    def close(self) -> None:
        """Wake every waiting worker with None; later get() calls return None."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    # --- spilling ---------------------------------------------------------------------------------
    def _spill(self) -> None:
        """Write RAM queues to disk until half the budget is free: first whole chunks from the
        longest tails (few, full chunks: a chunk reference costs RAM too), then, only if that is
        not enough, everything of the hosts holding most."""
        target = self._memory_urls // 2
        chunk = self._chunk
        for h in sorted((h for h in self._hosts.values() if len(h.tail) >= chunk),
                        key=lambda h: len(h.tail), reverse=True):
            if self._ram <= target:
                return
            full = len(h.tail) - len(h.tail) % chunk
            refs = [self._store.write(h.tail[i:i + chunk]) for i in range(0, full, chunk)]
            h.chunks.extend(refs)
            h.tail = h.tail[full:]
            h.tail_qmax = max((q for _, q, _ in h.tail), default=0.0)
            self._ram -= full
            self.counts.spilled_urls += full
        for h in sorted(self._hosts.values(), key=lambda h: h.ram, reverse=True):
            if self._ram <= target or h.ram == 0:
                break
            self._spill_host(h)
        self._compact()

    def _compact(self) -> None:
        """Move the live chunks out of mostly-dead segments once dead bytes pass the live ones
        (and one segment's worth): bounds disk use to about twice what is queued, whatever a
        few long-queued chunks would otherwise hold on to. Copies are byte for byte."""
        store = self._store
        if store.dead_bytes() < max(store.live_bytes(), store.segment_bytes):
            return
        victims = set(store.sparse_segments(COMPACT_LIVE_FRACTION))
        if not victims:
            return
        for h in self._hosts.values():
            for ref in h.chunks:
                if ref.seg in victims:
                    try:
                        store.relocate(ref)
                    except (ChunkError, OSError) as exc:
                        log.warning("frontier: could not move a chunk of %s out of segment %d: %s", h.name,
                                    ref.seg, exc)
                        return
        self.counts.compactions += 1

    def _spill_host(self, h: Host) -> None:
        keep = [e for e in h.head if e[0] == FIRST]
        run = sorted(e for e in h.head if e[0] != FIRST)
        front = [self._store.write([(seq, q, url) for _, seq, q, url in run[i:i + self._chunk]])
                 for i in range(0, len(run), self._chunk)]
        moved = len(run) + len(h.tail)
        h.chunks.extendleft(reversed(front))
        if h.tail:
            self._append_run(h, h.tail)
        h.head = keep
        h.tail = []
        h.tail_qmax = 0.0
        self._ram -= moved
        self.counts.spilled_urls += moved

    def _append_run(self, h: Host, run: list[tuple[int, float, str]]) -> None:
        """Write a run at the end of the host's disk queue, first merging it with the small
        chunks before it while they hold at most twice as many URLs (a binary counter).

        A long-tail host is spilled a few URLs at a time; kept as is, every such spill
        would be one more chunk reference in RAM, so RAM would grow with the frontier.
        Merged, a host holds at most ~log2(chunk_urls) partial chunks and each URL is
        rewritten about that many times at most (reads of recent writes, from the page cache).
        """
        chunk, chunks = self._chunk, h.chunks
        while chunks and chunks[-1].count < chunk and chunks[-1].count <= 2 * len(run):
            ref = chunks.pop()
            entries = self._read_chunk(h, ref)
            if entries is not None:
                run = entries + run
                self.counts.rewritten_urls += len(entries)
        for i in range(0, len(run), chunk):
            chunks.append(self._store.write(run[i:i + chunk]))

    def _read_chunk(self, h: Host, ref: ChunkRef) -> list[tuple[int, float, str]] | None:
        """A chunk's entries (the chunk is consumed); None if it cannot be read: its URLs are lost,
        logged and counted, and the host's counts drop them."""
        try:
            return self._store.read(ref)
        except (ChunkError, OSError) as exc:
            log.error("frontier: %s: %d URLs of host %s are lost: %s", self._store.directory, ref.count,
                      h.name, exc)
            self.counts.chunk_errors += 1
            self.counts.lost_urls += ref.count
            h.queued -= ref.count
            h.qsum -= ref.qsum
            self.queued -= ref.count
            if not h.queued:
                self._nonempty -= 1
            return None

    # --- durability ---------------------------------------------------------------------------------
    def checkpoint(self) -> None:
        """Write the whole frontier as checkpoint g+1 and start journal g+1; older files go.
        Synchronous: used at start, at shutdown and by tests (see `checkpoint_async`)."""
        if self.directory is None:
            return
        self._finish_pending()
        plan = self._snapshot()
        _write_plan(plan)
        self._finish(plan)

    async def checkpoint_async(self) -> None:
        """The periodic checkpoint: the snapshot is taken on the loop (the journal switches at
        that instant, so snapshot + new journal is exact); serialising, writing and the fsyncs
        run in a thread, so a large frontier does not stall fetching for seconds."""
        if self.directory is None or self._pending is not None:
            return
        plan = self._snapshot()
        self._pending = plan
        plan.future = self._writer().submit(_write_plan, plan)
        try:
            await asyncio.wrap_future(plan.future)
        finally:
            if self._pending is plan and plan.future.done():
                self._finish_pending()

    def _writer(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="frontier-checkpoint")
        return self._executor

    def _snapshot(self) -> _CheckpointPlan:
        # The copies below are acyclic, but allocating them sets off collections that walk the
        # whole heap (most of the snapshot's time on the loop); the collector waits until after.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._take_snapshot()
        finally:
            if collecting:
                gc.enable()

    def _take_snapshot(self) -> _CheckpointPlan:
        t0 = time.perf_counter()
        gen = self._gen = self._gen + 1         # used up even if writing the checkpoint fails
        old = self._journal
        self._journal = Journal(self.directory, gen, self._journal_failed)
        # The old journal is fsynced and closed by the writer, before the checkpoint is written.
        old_fd = old.detach() if old is not None else None
        mono, wall = self._now(), time.time()
        unconfirmed: dict[str, list[list]] = {}
        for host, seq, q, url in self._unconfirmed:
            unconfirmed.setdefault(host, []).append([seq, q, url, 1])
        referenced: set[int] = set()
        hosts = []
        for h in self._hosts.values():
            extra = unconfirmed.get(h.name)
            if not h.queued and h.inflight is None and h.ready_at <= mono and not extra:
                continue
            for c in h.chunks:
                referenced.add(c.seg)
            s = h.stats
            # Only cheap copies here, on the loop: heap and tail entries are immutable tuples
            # the writer thread may share; chunk references are not (compaction moves them).
            hosts.append((h.name, wall + (h.ready_at - mono) if h.ready_at > mono else 0.0, h.ip,
                          None if s is None else [s.connect_s, s.response_s, s.fetches, s.connections],
                          [c.as_list() for c in h.chunks], extra, h.inflight, list(h.head), list(h.tail)))
        # The queues held in RAM go to a segment of the checkpoint's own (written by the writer).
        ram_seg = self._store.reserve()
        referenced.add(ram_seg)
        # Until the new checkpoint is durable the old one is the recovery point: keep both
        # their segments (a chunk named by the snapshot may be consumed while it is written).
        self._store.pin(self._store.pinned | referenced)
        fds = self._store.dirty_fds() + ([old_fd] if old_fd is not None else [])
        return _CheckpointPlan(self.directory, gen, self._seq, sorted(self._done), hosts,
                               [u for _, _, _, u in self._unconfirmed], referenced, fds, t0, ram_seg)

    def _journal_failed(self, exc: OSError) -> None:
        if self.on_storage_error is None:
            raise exc
        log.error("frontier: cannot write its journal in %s: %s", self.directory, exc)
        self.on_storage_error(exc)

    def _finish(self, plan: _CheckpointPlan) -> None:
        self._store.pin(plan.referenced)
        remove_before(self.directory, plan.gen)
        self.counts.checkpoints += 1
        self.counts.checkpoint_seconds += time.perf_counter() - plan.t0

    def _finish_pending(self) -> None:
        """Complete a background checkpoint (waiting for its thread if needed); re-raises its error."""
        plan, self._pending = self._pending, None
        if plan is not None:
            plan.future.result()
            self._finish(plan)

    def sync(self) -> None:
        """fsync the journal (bounds what a power cut can take)."""
        if self._journal is not None:
            self._journal.sync()

    def stop_journal(self, exc: OSError) -> None:
        """Record nothing more (the node hit a storage error elsewhere). A small record can still
        fit in a full file system (the journal's last page has room), and a page recorded as done
        whose links the node could no longer keep would never be fetched again after a resume:
        its links would be lost."""
        if self._journal is not None and self._journal.failed is None:
            self._journal.failed = exc

    def sync_soon(self) -> None:
        """`sync` in the writer thread, for the node's periodic fsync: on the loop it stalls every
        fetch in flight, and the stall counts in their fetch times (so in politeness delays).
        An error of the previous one is raised here (the caller treats it as a storage error)."""
        prev = self._syncing
        if prev is not None:
            if not prev.done():
                return
            self._syncing = None
            prev.result()
        if self._journal is None:
            return
        fd = self._journal.dup_if_dirty()
        if fd is not None:
            self._syncing = self._writer().submit(_fsync_and_close, fd)

    def shutdown(self) -> None:
        """Final checkpoint (when durable) and close the files."""
        try:
            if self.directory is not None:
                self.checkpoint()
                self._journal.close()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            self._store.close()

    def _restore(self) -> None:
        """Rebuild from the newest checkpoint and the journals after it (see journal.py)."""
        directory = self.directory
        path = latest_checkpoint(directory)
        mono, wall = self._now(), time.time()
        crashed: dict[str, str] = {}
        unconfirmed: set[str] = set()
        if path is not None:
            cp = read_checkpoint(path)
            unconfirmed.update(cp.unconfirmed)
            self._gen = cp.gen
            self._seq = cp.seq
            self._done = set(cp.done)
            live: dict[int, tuple[int, int]] = {}
            for rec in cp.hosts:
                for row in rec.chunks:
                    count, size = live.get(int(row[0]), (0, 0))
                    live[int(row[0])] = (count + 1, size + int(row[2]))
            self._store = SegmentStore(directory, segment_bytes=self._segment_bytes, referenced=live)
            for rec in cp.hosts:
                self._load_host(rec, mono, wall)
                if rec.inflight:
                    crashed[rec.name] = rec.inflight
        else:
            self._store = SegmentStore(directory, segment_bytes=self._segment_bytes)
        replayed = 0
        journals = journals_from(directory, self._gen)
        for journal in journals:
            for rec in read_journal(journal):
                kind = rec[0]
                if kind == "a" and len(rec) == 5:
                    seq = int(rec[1])
                    self._insert(rec[3], seq, float(rec[2]), rec[4])
                    self._seq = max(self._seq, seq + 1)
                    self.counts.added += 1
                    replayed += 1
                elif kind == "s" and len(rec) == 3:
                    crashed[rec[1]] = rec[2]
                elif kind == "c" and len(rec) == 2:
                    self._done.add(rec[1])
                    unconfirmed.discard(rec[1])
                elif kind == "d" and len(rec) == 4:
                    started = crashed.pop(rec[1], None)
                    if started and not rec[3]:
                        unconfirmed.add(started)         # or put back: an upper bound either way
                    h = self._hosts.get(rec[1])
                    next_wall = float(rec[2])
                    if h is not None and next_wall > wall:
                        h.ready_at = max(h.ready_at, mono + next_wall - wall)
                    if rec[3]:
                        self._done.add(rec[3])
                if self._ram > self._memory_urls:
                    self._spill()
        if journals:
            # A snapshot whose checkpoint was never written still used up its generation, and its
            # journal holds records: the next checkpoint must not reuse that number and append a
            # second copy of them to the file it would then start.
            self._gen = max(self._gen, max(journal_generation(j) for j in journals))
        wait = self.config.resume_wait_s
        for name in crashed:
            h = self._hosts.get(name)
            if h is not None:
                h.ready_at = max(h.ready_at, mono + wait)
                if h.state == WAITING:
                    self._schedule(h)
        self.counts.resumed_inflight = len(crashed)
        self.counts.resumed_unconfirmed = len(unconfirmed - self._done)
        self.counts.recovered_urls = self.queued
        self.resumed = path is not None or replayed > 0
        if self.resumed:
            log.info("frontier: resumed %d URLs on %d hosts from %s (%d journal records, %d fetches were in flight)",
                     self.queued, self._nonempty, directory, replayed, len(crashed))
        self.checkpoint()

    def _load_host(self, rec: HostRecord, mono: float, wall: float) -> None:
        h = self._hosts.get(rec.name)
        if h is None:
            h = self._hosts[rec.name] = Host(rec.name)
        if rec.next_ok_wall > wall:
            h.ready_at = mono + rec.next_ok_wall - wall
        h.ip = rec.ip
        if rec.stats:
            c, r, fetches, connections = rec.stats
            h.stats = HostStats(c, r, int(fetches), int(connections))
            self._estimates.replace(None, h.stats)
        key = self._key
        if rec.ram:
            h.head += [(FIRST if first else key(seq, q), seq, q, url) for seq, q, url, first in rec.ram]
            heapq.heapify(h.head)
            h.qsum += sum(row[1] for row in rec.ram)
        h.queued += len(rec.ram)
        self._ram += len(rec.ram)
        for row in rec.chunks:
            ref = ChunkRef.from_list(row)
            h.chunks.append(ref)
            h.queued += ref.count
            h.qsum += ref.qsum
        self.queued += h.queued
        if h.queued:
            self._nonempty += 1
            self._schedule(h)

    # --- state ------------------------------------------------------------------------------------
    @property
    def waiting_workers(self) -> int:
        """Workers blocked in get(): nothing they may fetch now."""
        return sum(1 for f in self._waiters if not f.done())

    @property
    def has_waiters(self) -> bool:
        """A worker may be waiting in get() (cheap: no count; a cancelled waiter lingers until the next
        dispatch)."""
        return bool(self._waiters)

    def queued_of(self, host: str) -> int:
        """URLs queued for `host` (RAM and disk; not the one in flight)."""
        h = self._hosts.get(host)
        return h.queued if h is not None else 0

    @property
    def busy_hosts(self) -> int:
        return self._busy

    @property
    def active_hosts(self) -> int:
        """Hosts with queued URLs."""
        return self._nonempty

    def idle(self) -> bool:
        """Nothing queued and nothing being fetched."""
        return self.queued == 0 and not self._busy

    def stats(self) -> dict:
        out = {
            "queued": self.queued,
            "ram_urls": self._ram,
            "disk_urls": self.queued - self._ram,
            "hosts": self._nonempty,
            "known_hosts": len(self._hosts),
            "busy_hosts": self._busy,
            "chunks": sum(len(h.chunks) for h in self._hosts.values()),
            "segments_bytes_written": self._store.bytes_written if self._store else 0,
            "chunks_relocated": self._store.chunks_relocated if self._store else 0,
            "journal_bytes": self._journal.bytes if self._journal else 0,
            "done_pending": len(self._done),
        }
        out.update(asdict(self.counts))
        return out


_NO_STATS = HostStats()


@dataclass(slots=True)
class _CheckpointPlan:
    """A snapshot of the frontier, ready to be written by any thread (it shares nothing mutable)."""
    directory: Path
    gen: int
    seq: int
    done: list[str]
    hosts: list[tuple]                # see _snapshot
    unconfirmed: list[str]
    referenced: set[int]
    segment_fds: list[int]          # duplicates of the segments written since the last sync; closed here
    t0: float
    ram_seg: int                    # the segment number the RAM queues are written to (see _write_plan)
    future: Future | None = None


def _fsync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_plan(plan: _CheckpointPlan) -> None:
    """fsync the segments the snapshot may name, then write the checkpoint file atomically."""
    try:
        for fd in plan.segment_fds:
            os.fsync(fd)
    finally:
        for fd in plan.segment_fds:
            os.close(fd)
        plan.segment_fds = []
    # The RAM queues' segment is complete and fsynced before the checkpoint that names it is.
    # Should the checkpoint fail, the segment is deleted with the next one's `pin` (or at restore).
    ram = ChunkFile(plan.directory, plan.ram_seg)
    try:
        records = list(_host_records(plan.hosts, ram))
    finally:
        ram.close()
    write_checkpoint(plan.directory, plan.gen, plan.seq, plan.done, iter(records), unconfirmed=plan.unconfirmed)


def _host_records(hosts: list[tuple], ram: ChunkFile) -> Iterator[HostRecord]:
    """A snapshot's hosts as checkpoint records: what is in flight, unconfirmed or put back first
    (fetched first again after a crash) in the record itself; the rest of the RAM head and the tail
    as one chunk in `ram`, named before the host's spilled chunks (the order they are taken in).

    As a chunk, a restore reads a host's RAM queue when the host's turn comes: parsed as JSON
    rows at restore, the ~10M URLs refilled heads hold at 30M queued took ~45 s to load."""
    for name, next_ok_wall, ip, stats, chunks, extra, inflight, head, tail in hosts:
        first = list(extra or ())
        url = None
        if inflight is not None:
            seq, q, url = inflight
            first.insert(0, [seq, q, url, 1])
        queued = []
        put_back = []
        for entry in head:
            if entry[0] == FIRST:
                put_back.append(entry)
            else:
                queued.append(entry[1:])
        first += [[seq, q, u, 1] for _, seq, q, u in sorted(put_back)]
        queued += tail
        if queued:
            chunks = [ram.write(queued).as_list()] + chunks
        yield HostRecord(name, next_ok_wall, ip, stats, chunks, first, url)

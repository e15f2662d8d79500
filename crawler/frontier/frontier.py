"""The frontier proper: per-host queues, politeness timing, two-level scheduling.

Every host with queued URLs has one `HostQueue` (hostqueue.py: its RAM head,
spilled chunks and RAM tail, and its state IDLE, WAITING, READY, BUSY or
BLOCKED). Waiting hosts are on the `_waiting` heap until their next-contact
time, ready ones on the `_ready` heap ranked by the host policy.

Heap entries carry the host's version; any state change bumps it, so stale
entries are skipped when popped (lazy deletion). Politeness is the state
machine: a host is handed out only from READY, and only after its time (and
its address's, politeness.py); the policy only orders hosts that are already
allowed.

When the URLs held in RAM pass `memory_urls`, the hosts holding most are
spilled (spill.py) until half the budget is free. Checkpoints, the journal
and restore are the durable half the frontier inherits (checkpoint.py).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from crawler.config.schema import FrontierConfig, PolitenessConfig
from crawler.frontier.checkpoint import CheckpointPlan, FrontierCheckpoints
from crawler.frontier.hostqueue import BLOCKED, BUSY, FIRST, IDLE, READY, WAITING, HostQueue
from crawler.frontier.journal import FrontierJournal
from crawler.frontier.policy import GlobalEstimates, HostPolicy, HostStats, HostView, url_key
from crawler.frontier.politeness import AddressBook
from crawler.frontier.segments import DEFAULT_SEGMENT_BYTES, ChunkRef, SegmentStore
from crawler.frontier.spill import Spiller
from crawler.frontier.stats import FrontierStats
from crawler.urls import host_of

log = logging.getLogger(__name__)

FORGET_EVERY = 4096              # releases between sweeps of idle hosts
TIMER_SLACK_S = 0.001            # wake-ups are armed this much late: never early (see _arm)
_NO_STATS = HostStats()


class Frontier(FrontierCheckpoints):
    """Politeness-aware, policy-ranked, disk-spilling, restartable URL frontier."""

    def __init__(self, config: FrontierConfig, workers: int, *, directory: str | Path | None = None,
                 per_ip: bool = False, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 max_delay_s: float | None = None) -> None:
        """`max_delay_s`: politeness.max_delay_s, what a host whose request a crash cut waits unless
        frontier.resume_wait_s is set (the delay that request earned is unknown, at most this)."""
        self.config = config
        if config.resume_wait_s is not None:
            self.resume_wait_s = config.resume_wait_s
        else:
            self.resume_wait_s = max_delay_s if max_delay_s is not None else PolitenessConfig().max_delay_s
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
        self._hosts: dict[str, HostQueue] = {}
        self._addresses = AddressBook()
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
        self._stopped = False
        self._paused = False             # an operator's pause (crawler/control): nothing is handed out
        # An operator's per-host least delay (crawler/control), read at every release; None: none set.
        self.min_delay_of: Callable[[str], float] | None = None
        # Whether a URL a worker held may not go back to its host's queue (an operator blocked the host
        # meanwhile); None: every one goes back.
        self.refuse: Callable[[str], bool] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Durability.
        self.directory = Path(directory) if directory is not None else None
        self.resumed = False
        self._gen = 0
        self._journal: FrontierJournal | None = None
        self._store: SegmentStore          # set by _open_store, from the restore or below
        self._spiller: Spiller
        self._pending: CheckpointPlan | None = None
        # Set by the owner (the node) to hear of a journal write that failed (disk full): journal
        # writes happen inside dispatch, even from the loop's timer, where raising would lose the URL
        # being handed out and kill nothing but the callback. Unset, writes raise.
        self.on_storage_error: Callable[[OSError], None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._syncing: Future | None = None      # the last sync_soon's fsync
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._restore(self.directory)
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="frontier-")
            self._open_store(SegmentStore(Path(self._tmp.name), segment_bytes=segment_bytes))

    def _open_store(self, store: SegmentStore) -> None:
        """Spill to `store` from now on."""
        self._store = store
        self._spiller = Spiller(store, self._chunk, self._key, self.counts, self._lost)

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
            h = self._hosts[name] = HostQueue(name)
        if not h.chunks and not h.tail and len(h.head) < self._chunk:
            heapq.heappush(h.head, (self._key(seq, quality), seq, quality, url))
        else:
            h.tail.append((seq, quality, url))
            if quality > h.tail_qmax:
                h.tail_qmax = quality
        self._count_queued(h, quality)
        if h.state == IDLE:
            self._schedule(h)
        elif h.state == READY and not self._bfs:
            self._push_ready(h)            # its score changed

    def requeue(self, host: str, url: str) -> None:
        """Put the URL a worker holds back at the head of its host's queue: it is fetched next."""
        h = self._hosts[host]
        assert h.state == BUSY, host
        if self.refuse is not None and self.refuse(host):
            h.inflight = None
            return
        seq, quality, held = h.inflight if h.inflight is not None and h.inflight[2] == url else (self._seq, 0.0, url)
        h.inflight = None
        heapq.heappush(h.head, (FIRST, seq, quality, url))
        self._count_queued(h, quality)
        self.counts.requeued += 1

    def _count_queued(self, h: HostQueue, quality: float) -> None:
        """One more URL held in RAM in `h`'s queue: the counts the scheduler and spilling read."""
        if not h.queued:
            self._nonempty += 1
        h.queued += 1
        h.qsum += quality
        self.queued += 1
        self._ram += 1

    # --- scheduling ---------------------------------------------------------------------------
    def _bump(self, h: HostQueue) -> int:
        self._version += 1
        h.version = self._version
        return h.version

    def _schedule(self, h: HostQueue) -> None:
        """An idle or unblocked host with queued URLs waits for its time (and its address's)."""
        at = h.ready_at
        if self._per_ip and h.ip is not None:
            at = self._addresses.not_before(h.ip, at)
        h.state = WAITING
        heapq.heappush(self._waiting, (at, self._bump(h), h.name))

    def _push_ready(self, h: HostQueue) -> None:
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
        if self._paused:
            return None
        now = self._now()
        self._promote(now)
        ready, hosts = self._ready, self._hosts
        while ready:
            _, version, name = heapq.heappop(ready)
            h = hosts.get(name)
            if h is None or h.version != version or h.state != READY:
                continue
            if self._per_ip and h.ip is not None and not self._address_allows(h, h.ip, now):
                continue
            url = self._take(h)
            if url is None:
                continue
            return name, url
        return None

    def _address_allows(self, h: HostQueue, ip: str, now: float) -> bool:
        """Per-IP politeness: whether `h` may go now given its address (else it is BLOCKED or waits)."""
        if self._addresses.block_if_busy(ip, h.name):
            h.state = BLOCKED
            self._bump(h)
            self.counts.blocked_by_ip += 1
            return False
        next_ok = self._addresses.not_before(ip, now)
        if next_ok > now:
            h.ready_at = max(h.ready_at, next_ok)
            self._schedule(h)
            return False
        return True

    def _take(self, h: HostQueue) -> str | None:
        done = self._done
        while True:
            if not h.head:
                loaded = self._spiller.refill(h)
                if loaded is None:
                    self._emptied(h)
                    return None
                self._ram += loaded
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
            self._addresses.claim(h.ip, h.name)
        self.counts.dispatched += 1
        if self._journal is not None:
            self._journal.started(h.name, url)
        return url

    def _emptied(self, h: HostQueue) -> None:
        h.state = IDLE
        self._bump(h)
        h.qsum = 0.0

    # --- taking and giving back -------------------------------------------------------------------
    async def get(self) -> tuple[str, str] | None:
        """Wait for a URL whose host may be contacted now: (host, url), or None once stopped (`stop_handing_out`)."""
        if self._stopped:
            return None
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if not self._waiters:
            item = self._pick()
            if item is not None and self._stopped:   # see _dispatch: the pick's journal write failed
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
            self._addresses.seen(ip, h.name, busy=h.state == BUSY)

    def release(self, host: str, delay_s: float, *, confirmed: bool = True) -> None:
        """The host's request is done; it may be contacted again after `delay_s`.

        `confirmed=False`: the URL is done but what it led to is not durable
        yet (links still on their way to peers); it counts as done only after
        `confirm()`, and a crash before that fetches it again.
        """
        h = self._hosts[host]
        now = self._now()
        if self.min_delay_of is not None:
            delay_s = max(delay_s, self.min_delay_of(host))
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
            self._release_address(h, h.ip)
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

    def _release_address(self, h: HostQueue, ip: str) -> None:
        """Its address waits as long as `h` does; the hosts blocked on it may be scheduled again."""
        for name in self._addresses.release(ip, h.name, h.ready_at):
            b = self._hosts.get(name)
            if b is not None and b.state == BLOCKED:
                self._schedule(b)

    def _forget_idle(self, now: float) -> None:
        """Drop idle hosts whose wait is over (bounds the host table to hosts that matter)."""
        gone = [name for name, h in self._hosts.items() if h.state == IDLE and not h.queued and h.ready_at <= now]
        for name in gone:
            del self._hosts[name]
        if self._per_ip:
            self._addresses.forget(now)

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
            if self._stopped:                        # _pick journals the fetch start; a failed write
                self.requeue(*item)                  # stops the node, which stops us (and wakes the waiters)
                return
            waiters.popleft().set_result(item)       # nothing else runs between the check and this
        if self._waiting and not self._paused:       # paused: resume() dispatches (no timer spinning)
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

    def stop_handing_out(self) -> None:
        """Wake every waiting worker with None; later get() calls return None. (Files stay open
        for the final checkpoint: `shutdown` closes them.)"""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)

    def pause(self) -> None:
        """Hand out nothing until `resume` (an operator's pause); the URLs held by workers finish."""
        self._paused = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = float("inf")

    def resume(self) -> None:
        """Hand out again: waiting workers get the hosts whose time has come."""
        self._paused = False
        if self._loop is not None:
            self._dispatch()

    @property
    def paused(self) -> bool:
        return self._paused

    def drop_hosts(self, match: Callable[[str], bool]) -> int:
        """Remove every queued URL of the hosts `match` names (an operator blocked them); returns how
        many. A URL in flight finishes. Not journaled: after a crash the journal brings them back, and
        the owner drops them again at start (crawler/control), counting them again as the totals of
        the last checkpoint did not count them yet."""
        dropped = 0
        for h in self._hosts.values():
            if not h.queued or not match(h.name):
                continue
            for ref in h.chunks:
                self._store.release(ref)
            self._ram -= len(h.head) + len(h.tail)
            self.queued -= h.queued
            self._nonempty -= 1
            dropped += h.queued
            h.head, h.tail, h.chunks = [], [], deque()
            h.queued, h.qsum, h.tail_qmax = 0, 0.0, 0.0
            if h.state != BUSY:                       # a busy host is emptied at its release
                self._emptied(h)
        return dropped

    def busy_matching(self, match: Callable[[str], bool]) -> int:
        """How many hosts `match` names have a URL in flight now: what a block cannot stop (a request
        may be on the wire already); each finishes, and its URL is not put back."""
        return sum(1 for h in self._hosts.values() if h.state == BUSY and match(h.name))

    # --- spilling ---------------------------------------------------------------------------------
    def _spill(self) -> None:
        """Write RAM queues to disk until half the budget is free (spill.py)."""
        self._ram -= self._spiller.spill(self._hosts.values(), self._ram, self._memory_urls // 2)

    def _lost(self, h: HostQueue, ref: ChunkRef) -> None:
        """A spilled chunk could not be read back: its URLs are no longer queued."""
        h.queued -= ref.count
        h.qsum -= ref.qsum
        self.queued -= ref.count
        if not h.queued:
            self._nonempty -= 1

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

    def queued_hosts(self) -> Iterator[tuple[str, int]]:
        """(host, URLs it would still fetch) of every host with a queue (`crawler report`): a URL done
        but still queued after a restart is skipped when its turn comes, so it is not counted."""
        done = Counter(host_of(url) for url in self._done)
        for h in self._hosts.values():
            if h.queued > done[h.name]:
                yield h.name, h.queued - done[h.name]

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
            "segments_bytes_written": self._store.bytes_written,
            "chunks_relocated": self._store.chunks_relocated,
            "journal_bytes": self._journal.bytes if self._journal else 0,
            "done_pending": len(self._done),
        }
        out.update(asdict(self.counts))
        return out


"""The URL frontier: which URL to fetch next, and never two at once per host.

Mercator's layout (Najork & Heydon), as summarised in DESIGN 2.6:

    add(url) ──> front queues (FIFO per priority level, 0 = highest)
                     │  refilled one host at a time, only when a back queue empties
                     v
                 back queues: one FIFO per *active* host, at most
                 workers x back_queues_per_worker of them
                     │
                 ready heap: (earliest next contact, host) for every active
                 host that is not being fetched right now
                     │
    get() <──────────┘   a worker takes the host off the heap: the host is now
                         "busy" and no other worker can get one of its URLs
    release(host, delay_s): the host goes back on the heap at now + delay_s

Politeness follows from the shape: a host is either on the heap or busy,
never both, so at most one request per host is in flight; the node computes
the delay (max(k * fetch time, min_delay_s, Crawl-delay), or Retry-After) and
the heap makes the host wait it out. A host's last contact time is remembered
even after its back queue empties, so re-activating it cannot skip the wait.

Workers block in `get()` on futures handed out in arrival order; one timer
wakes the dispatcher when the heap's earliest host becomes ready. There is no
thundering herd: one ready host wakes exactly one worker.

This version keeps queues in memory; spilling to disk segments and the
two-level (host and URL) scheduling policies of Cao, Jiang and Singh are the
next step (see docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import deque
from dataclasses import dataclass

from crawler.config.schema import FrontierConfig


@dataclass(slots=True)
class FrontierStats:
    added: int = 0
    dispatched: int = 0
    requeued: int = 0
    activations: int = 0


class Frontier:
    """Politeness-aware URL frontier (front queues, back queues, ready heap)."""

    def __init__(self, config: FrontierConfig, workers: int) -> None:
        self._levels = config.priority_levels
        self._front: list[deque[tuple[str, str]]] = [deque() for _ in range(self._levels)]
        self._front_len = 0
        self._back: dict[str, deque[str]] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = 0
        self._busy: set[str] = set()
        self._next_ok: dict[str, float] = {}
        self._max_active = workers * config.back_queues_per_worker
        self._waiters: deque[asyncio.Future] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.queued = 0
        self.counts = FrontierStats()

    # --- time ---------------------------------------------------------------
    def _now(self) -> float:
        """The real monotonic clock, not loop.time(): uvloop's loop time is cached per loop
        iteration and can lag by a whole iteration, which would let a host go early."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return time.monotonic()

    # --- adding -----------------------------------------------------------------
    def add(self, url: str, host: str, priority: int = 0) -> None:
        """Queue a new URL (the DUE has already said it is new)."""
        self.queued += 1
        self.counts.added += 1
        q = self._back.get(host)
        if q is not None:
            q.append(url)
        elif len(self._back) < self._max_active:
            self._activate(host, url)
        else:
            level = min(max(priority, 0), self._levels - 1)
            self._front[level].append((url, host))
            self._front_len += 1
            return
        self._dispatch()

    def requeue(self, host: str, url: str) -> None:
        """Put a URL back at the head of its (busy) host's queue: fetched again next."""
        assert host in self._busy, host
        self._back[host].appendleft(url)
        self.queued += 1
        self.counts.requeued += 1

    def _activate(self, host: str, url: str) -> None:
        self._back[host] = deque((url,))
        self.counts.activations += 1
        ready = self._next_ok.get(host, 0.0)
        self._push(host, ready)

    def _push(self, host: str, ready_at: float) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (ready_at, self._seq, host))

    def _refill(self) -> None:
        """Mercator: pull from the front queues until one new host is activated."""
        for q in self._front:
            while q:
                url, host = q.popleft()
                self._front_len -= 1
                back = self._back.get(host)
                if back is not None:
                    back.append(url)
                else:
                    self._activate(host, url)
                    return

    # --- taking and giving back -----------------------------------------------
    async def get(self) -> tuple[str, str] | None:
        """Wait for a URL whose host may be contacted now: (host, url), or None once closed."""
        if self._closed:
            return None
        heap = self._heap
        if not self._waiters and heap and heap[0][0] <= self._now():
            return self._take()
        self._now()  # binds the running loop for timers
        fut = self._loop.create_future()
        self._waiters.append(fut)
        self._dispatch()
        return await fut

    def _take(self) -> tuple[str, str]:
        _, _, host = heapq.heappop(self._heap)
        url = self._back[host].popleft()
        self._busy.add(host)
        self.queued -= 1
        self.counts.dispatched += 1
        return host, url

    def release(self, host: str, delay_s: float) -> None:
        """The host's request is done; it may be contacted again after `delay_s`."""
        self._busy.discard(host)
        ready_at = self._now() + delay_s
        if ready_at > self._next_ok.get(host, 0.0):
            self._next_ok[host] = ready_at
        q = self._back[host]
        if q:
            self._push(host, self._next_ok[host])
        else:
            del self._back[host]
            self._refill()
            self._forget_old_hosts()
        self._dispatch()

    def _forget_old_hosts(self) -> None:
        """Drop remembered contact times that are in the past (bounds the dict)."""
        if len(self._next_ok) > 4 * max(self._max_active, 1024):
            now = self._now()
            self._next_ok = {h: t for h, t in self._next_ok.items() if t > now or h in self._back}

    def _dispatch(self) -> None:
        waiters, heap = self._waiters, self._heap
        while waiters and waiters[0].done():
            waiters.popleft()
        if not waiters or not heap:
            return
        now = self._now()
        while waiters and heap and heap[0][0] <= now:
            fut = waiters.popleft()
            if fut.done():
                continue
            fut.set_result(self._take())
        if waiters and heap:
            self._arm(heap[0][0])

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        # A timer that fires early (the loop's clock is coarse) only re-arms: _dispatch checks real time.
        self._timer = self._loop.call_later(max(at - time.monotonic(), 0.0), self._on_timer)

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

    # --- state --------------------------------------------------------------------
    @property
    def busy_hosts(self) -> int:
        return len(self._busy)

    @property
    def active_hosts(self) -> int:
        return len(self._back)

    def idle(self) -> bool:
        """Nothing queued and nothing being fetched."""
        return self.queued == 0 and not self._busy

    def stats(self) -> dict:
        return {
            "queued": self.queued,
            "front_queued": self._front_len,
            "active_hosts": len(self._back),
            "busy_hosts": len(self._busy),
            "added": self.counts.added,
            "dispatched": self.counts.dispatched,
            "requeued": self.counts.requeued,
        }

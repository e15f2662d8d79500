"""The outgoing link to one peer: the connection's life cycle (connect, handshake, transmit, ACKs,
watchdog, reconnect) around its outbound queue (outbox.py: order, window, resend, spill to the spool).

Backpressure choice: while the peer is up, a full `pending` makes `put`
await (a slow receiver slows the splitter). While the peer is down, `put`
never waits: once the queue is full, or the peer has been down for
`spill_after_s`, the queue and every new batch go to the spool, and the
splitter keeps crawling; so do the batches a dead connection left
unacknowledged that live only in memory (ahead of everything unread), or
the pages whose links they carry could not be confirmed until the peer is
back (a crash meanwhile re-fetched them all). Only when the spool cannot be written (disk full)
does `put` wait while the peer is down.

A peer that accepts TCP and says nothing fails the handshake timeout; one
that stops answering mid-session is caught by the PING/PONG watchdog
(`dead_after_s`) or the ACK timeout; either way the link drops, reconnects
with capped exponential backoff and jitter, and batches spill meanwhile.
Failed attempts are counted by reason (`connect_failures`) and logged once
per reason while the link stays down (a WARNING, or INFO for a refused
connection, which is what a peer that is still starting looks like).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from crawler.config.schema import NodeConfig, PeersConfig
from crawler.peers.auth import client_handshake
from crawler.peers.frames import (
    MALFORMED,
    FrameError,
    FrameType,
    decode_bye,
    decode_seq,
    encode_bye,
    encode_control,
    encode_seq,
    read_frame,
)
from crawler.peers.outbox import SPOOL_RETRY_S, Outbox

log = logging.getLogger(__name__)

BYE_DRAIN_S = 1.0          # most time spent pushing the BYE out at close
MIN_WATCHDOG_TICK_S = 0.01
WATCHDOG_TICKS = 4         # watchdog checks per shortest timer
QUIET_FAILURES = frozenset({"refused"})   # connect failures logged at INFO (a peer starting up), not WARNING


@dataclass
class LinkCounters:
    """The connection's own counters (the batches' are the outbox's)."""
    controls_sent: int = 0
    controls_dropped: int = 0     # not connected, or too big
    connects: int = 0             # successful handshakes
    connect_failures: Counter[str] = field(default_factory=Counter)
    disconnects: Counter[str] = field(default_factory=Counter)


class LinkDown(Exception):
    """The current connection is over; `reason` is the counter key."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PeerLink:
    """Delivers batches to one peer, at least once, in sequence order."""

    def __init__(self, me_id: int, peer: NodeConfig, cluster: str, secret: bytes,
                 spool_dir: Path, options: PeersConfig) -> None:
        self.me_id = me_id
        self.peer = peer
        self.peer_id = peer.id
        self._cluster = cluster
        self._secret = secret
        self.opts = options
        self.counters = LinkCounters()
        self._space = asyncio.Event()      # pending shrank or the link state changed
        self.outbox = Outbox(peer.id, spool_dir, options, on_space=self._space.set)
        self.up = False
        self.down_since = time.monotonic()
        self.last_rx = 0.0
        self._ping_token = 0
        self._ping_sent_at = 0.0
        self._writer: asyncio.StreamWriter | None = None
        self._work = asyncio.Event()       # something to transmit, or window space
        self._changed = asyncio.Event()    # an ACK arrived or the link state changed (close() watches)
        self._connecting = False
        self._try_after_close = False      # the attempt under way began after close()
        self._last_try = False             # close() wants one more attempt that has not started yet
        self._stop = asyncio.Event()
        self._nudge = asyncio.Event()      # cut a reconnect delay short (stop, or close() wants a last try)
        self._closing = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._acked_this_session = 0
        self._reported: set[str] = set()   # connect failure reasons logged since the link was last up

    # --- public surface ----------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"peer-link-{self.peer_id}")

    @property
    def last_seq(self) -> int:
        """The newest sequence number given to a batch."""
        return self.outbox.last_seq

    def durable_through(self, seq: int) -> bool:
        """Every batch numbered up to `seq` is ACKed or in the spool (see `Outbox.durable_through`)."""
        return self.outbox.durable_through(seq)

    def drained(self) -> bool:
        """Nothing queued, nothing unacked, nothing spooled."""
        return self.outbox.drained()

    async def put(self, body: bytes, urls: int) -> None:
        """Accept one batch (an `encode_urls` body); awaits only while the peer is up and the queue is full.

        The sequence number is given at the moment the batch is placed (no
        await in between), so concurrent callers can never put numbers out
        of order; a number given to a batch the spool then refused is just
        skipped.
        """
        outbox = self.outbox
        while True:
            if self._closed:
                raise RuntimeError(f"link to node {self.peer_id} is closed")
            if self._closing or (not self.up and (outbox.full or self._down_too_long())):
                if outbox.spill() and outbox.spool_new(body, urls):
                    return
            if outbox.queue(body, urls):
                self._work.set()
                return
            self._space.clear()
            await self._space.wait()

    def send_control(self, message: dict[str, object]) -> bool:
        """Best effort: written now if connected, else dropped."""
        if not self.up or self._writer is None or self._writer.is_closing():
            self.counters.controls_dropped += 1
            return False
        try:
            frame = encode_control(message, self.opts.max_control_bytes)
        except (ValueError, TypeError) as exc:
            log.warning("control message to node %d not sent: %s", self.peer_id, exc)
            self.counters.controls_dropped += 1
            return False
        self._writer.write(frame)
        self.counters.controls_sent += 1
        return True

    async def close(self, deadline: float) -> None:
        """Flush until `deadline` (monotonic), say BYE, keep what is left in the spool."""
        self._closing = True
        self._space.set()
        if not self.up and not self.drained():
            self._last_try = True          # one more attempt that starts now, whatever the backoff says
            self._nudge.set()
        # Wait while something can still be delivered: the link is up, or an attempt begun since close() runs.
        while not self.drained() and (self.up or self._last_try or (self._connecting and self._try_after_close)):
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                break
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining_s)
            except TimeoutError:
                break
        self._stop.set()
        self._nudge.set()
        self._work.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), BYE_DRAIN_S + max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._writer is not None:
            self._writer.transport.abort()
        self._go_down("closed")
        self.outbox.close()
        self._closed = True
        self._space.set()             # puts still waiting now raise

    async def abort(self) -> None:
        """Stop at once, as a crash would: no flush, no BYE, memory-only batches are lost."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._writer is not None:
            self._writer.transport.abort()
        self.outbox.spool.close()
        self._space.set()

    def _down_too_long(self) -> bool:
        return time.monotonic() - self.down_since >= self.opts.spill_after_s

    # --- connection loop -----------------------------------------------------------------

    async def _run(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            self._connecting = True
            self._try_after_close = self._closing
            self._last_try = False
            try:
                reader, writer = await self._connect()
            except LinkDown as exc:
                self._connecting = False
                self._changed.set()
                self.counters.connect_failures[exc.reason] += 1
                self._report_failure(exc.reason)
                await self._sleep_down(self._backoff(attempt))
                attempt += 1
                continue
            self._go_up(writer)
            reason = await self._session(reader, writer)
            self._go_down(reason)
            if self._stop.is_set():
                break
            attempt = 0 if self._acked_this_session else attempt + 1
            await self._sleep_down(self._backoff(attempt))

    def _report_failure(self, reason: str) -> None:
        """Log a failed attempt once per down period and reason (retries come every backoff step).

        A refused connection is what a peer that is starting or restarting
        looks like, so it is INFO; anything else (a port that accepts and
        never completes the handshake, a bad secret, a reset) is a WARNING.
        """
        if reason in self._reported:
            log.debug("node %d: connect failed again (%s)", self.peer_id, reason)
            return
        self._reported.add(reason)
        level = logging.INFO if reason in QUIET_FAILURES else logging.WARNING
        log.log(level, "link to node %d (%s:%d): connect failed (%s); retrying with backoff, batches wait or spill "
                "to the spool meanwhile", self.peer_id, self.peer.host, self.peer.peer_port, reason)

    def _backoff(self, attempt: int) -> float:
        """Capped exponential backoff with jitter: a random 50-100% of the step, so peers do not reconnect
        in lockstep."""
        step = min(self.opts.reconnect_max_s, self.opts.reconnect_min_s * (2 ** min(attempt, 32)))
        return step * random.uniform(0.5, 1.0)

    async def _sleep_down(self, delay_s: float) -> None:
        """Wait before reconnecting; spills the queue when the peer has been down too long."""
        end = time.monotonic() + delay_s
        self._nudge.clear()
        while not self._stop.is_set() and not self._last_try:
            now = time.monotonic()
            in_memory = self.outbox.memory_only()
            if in_memory and self._down_too_long():
                self.outbox.spill()
            if now >= end:
                return
            wait_s = end - now
            if in_memory:                  # wake to spill at the threshold, or to retry a refused spool
                until_spill_s = self.down_since + self.opts.spill_after_s - now
                wait_s = min(wait_s, until_spill_s if until_spill_s > 0 else SPOOL_RETRY_S)
            try:
                await asyncio.wait_for(self._nudge.wait(), wait_s)
                return
            except TimeoutError:
                pass

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.peer.host, self.peer.peer_port), self.opts.connect_timeout_s)
        except TimeoutError:
            raise LinkDown("connect_timeout") from None
        except ConnectionRefusedError:
            raise LinkDown("refused") from None
        except OSError:
            raise LinkDown("unreachable") from None
        try:
            await asyncio.wait_for(client_handshake(
                reader, writer, me_id=self.me_id, peer_id=self.peer_id, cluster=self._cluster,
                secret=self._secret, stream_id=self.outbox.seqs.stream_id), self.opts.handshake_timeout_s)
        except BaseException as exc:
            writer.transport.abort()
            if isinstance(exc, TimeoutError):
                raise LinkDown("handshake_timeout") from None
            if isinstance(exc, FrameError):
                if exc.reason not in ("eof", "truncated"):
                    log.warning("node %d: handshake failed: %s", self.peer_id, exc)
                raise LinkDown("closed" if exc.reason in ("eof", "truncated") else exc.reason) from None
            if isinstance(exc, OSError):
                raise LinkDown("reset") from None
            raise
        return reader, writer

    def _go_up(self, writer: asyncio.StreamWriter) -> None:
        self.up = True
        self._connecting = False
        self._changed.set()
        self._writer = writer
        self.last_rx = time.monotonic()
        self._ping_sent_at = 0.0
        self._acked_this_session = 0
        self._reported.clear()
        self.counters.connects += 1
        self._work.set()
        self._space.set()
        log.info("link to node %d up (%s:%d)", self.peer_id, self.peer.host, self.peer.peer_port)

    def _go_down(self, reason: str) -> None:
        self.outbox.connection_lost()
        if not self.up:
            return
        self.up = False
        self._changed.set()
        self._writer = None
        self.down_since = time.monotonic()
        self.counters.disconnects[reason] += 1
        self._space.set()
        log.info("link to node %d down (%s)", self.peer_id, reason)

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """Run one authenticated connection until it fails or close() asks to stop; returns why it ended."""
        tasks = [asyncio.create_task(self._transmit(writer)),
                 asyncio.create_task(self._receive(reader, writer)),
                 asyncio.create_task(self._watchdog(writer)),
                 asyncio.create_task(self._stop.wait())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            writer.transport.abort()
            raise
        finally:
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
        reason = "closed"
        for result in results:
            if isinstance(result, LinkDown):
                reason = result.reason
            elif isinstance(result, FrameError):
                reason = "closed" if result.reason in ("eof", "truncated") else result.reason
            elif isinstance(result, OSError):
                reason = "reset"
        if self._stop.is_set() and reason == "closed":
            reason = "bye"
            try:
                writer.write(encode_bye("closing"))
                await asyncio.wait_for(writer.drain(), BYE_DRAIN_S)
            except (OSError, TimeoutError, RuntimeError):
                pass
            writer.close()
        else:
            writer.transport.abort()
        return reason

    async def _transmit(self, writer: asyncio.StreamWriter) -> None:
        # Hot path: one write per batch of ~1000 URLs, frames encoded once at put().
        while True:
            batch = self.outbox.next_batch()
            if batch is None:
                self._work.clear()
                await self._work.wait()
                continue
            self.outbox.sent(batch)
            writer.write(batch.frame)
            await writer.drain()

    async def _receive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            ftype, payload = await read_frame(reader, self.opts.max_frame_bytes)
            self.last_rx = time.monotonic()
            if ftype == FrameType.ACK:
                self._ack(decode_seq(payload))
            elif ftype == FrameType.PONG:
                if decode_seq(payload) == self._ping_token:
                    self._ping_sent_at = 0.0
            elif ftype == FrameType.PING:
                writer.write(encode_seq(FrameType.PONG, decode_seq(payload)))
            elif ftype == FrameType.BYE:
                log.info("node %d said BYE (%s)", self.peer_id, decode_bye(payload))
                raise LinkDown("peer_bye")
            else:
                raise FrameError(MALFORMED, f"unexpected {ftype.name} from node {self.peer_id}")

    def _ack(self, seq: int) -> None:
        if not self.outbox.ack(seq):
            return                       # stale ACK from an earlier connection
        self._acked_this_session += 1
        self._work.set()
        self._changed.set()

    async def _watchdog(self, writer: asyncio.StreamWriter) -> None:
        o = self.opts
        tick_s = max(MIN_WATCHDOG_TICK_S, min(o.ping_interval_s, o.dead_after_s, o.ack_timeout_s) / WATCHDOG_TICKS)
        while True:
            await asyncio.sleep(tick_s)
            now = time.monotonic()
            silent_s = now - self.last_rx
            oldest = self.outbox.oldest_unacked()
            if (oldest is not None or self._ping_sent_at) and silent_s >= o.dead_after_s:
                raise LinkDown("silent")
            if oldest is not None and now - oldest.sent_at >= o.ack_timeout_s:
                raise LinkDown("ack_timeout")
            if silent_s >= o.ping_interval_s and not self._ping_sent_at:
                self._ping_token += 1
                self._ping_sent_at = now
                writer.write(encode_seq(FrameType.PING, self._ping_token))

    def stats(self) -> dict[str, object]:
        c = self.counters
        return {
            "connected": self.up,
            **self.outbox.stats(),
            "controls_sent": c.controls_sent, "controls_dropped": c.controls_dropped,
            "connects": c.connects, "connect_failures": dict(c.connect_failures),
            "disconnects": dict(c.disconnects), "lost_at_close": self.outbox.counters.lost_at_close,
        }

"""The incoming side: accept peers, check them, hand their batches to the node, ACK.

Each accepted connection first runs the server half of the handshake (under
`handshake_timeout_s`, with at most `max_handshakes` at once and a 4 KiB
frame limit); anything wrong closes it and bumps `rejected[reason]`, and
nothing of it reaches the callbacks. An authenticated connection then has two
tasks: a reader that decodes frames and answers PINGs at once (so a busy node
still looks alive), and a processor that calls `on_batch`/`on_control` in
arrival order and ACKs each batch after `on_batch` returns.

Dedupe: per sending node we keep its stream id and a high-water mark, the
highest sequence number processed + 1. Senders transmit in increasing
sequence order and resend from their oldest unacknowledged batch, so a batch
below the mark has been processed: it is ACKed again, counted as a duplicate,
and not passed on. One connection per peer is processed at a time (a new one
supersedes the old, and a per-peer lock serialises the hand-over), which is
what keeps the mark sound. The mark lives in memory: after a restart of this
node, resends are processed again (at-least-once; the DUE drops them).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from crawler.config.schema import PeersConfig
from crawler.peers.auth import BAD_VERSION, server_handshake
from crawler.peers.frames import (
    EOF,
    HEADER_BYTES,
    MALFORMED,
    FrameError,
    FrameType,
    decode_batch,
    decode_bye,
    decode_control,
    decode_seq,
    encode_bye,
    encode_seq,
    read_frame,
)

log = logging.getLogger(__name__)

OnBatch = Callable[[int, list[str]], Awaitable[None] | None]
OnControl = Callable[[int, dict], Awaitable[None] | None]

BUSY = "busy"                        # too many handshakes at once
HANDSHAKE_TIMEOUT = "handshake_timeout"
RESET = "reset"
CLOSED = "closed"                    # the client hung up during the handshake
BYE_WAIT_S = 1.0
SILENT_FACTOR = 2                    # an incoming connection silent this many dead_after_s is dropped
_CONTROL = object()                  # queue tag for CONTROL messages
_END = None                          # queue sentinel after a BYE


@dataclass
class InboundCounters:
    batches_received: int = 0        # distinct batches processed
    urls_received: int = 0
    bytes_received: int = 0
    batches_duplicate: int = 0       # resends below the high-water mark, ACKed and dropped
    controls_received: int = 0
    connects: int = 0
    callback_errors: int = 0
    dropped: Counter = field(default_factory=Counter)   # authenticated connections closed for a fault


@dataclass(eq=False)
class _Conn:
    peer_id: int
    stream_id: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    queue: asyncio.Queue
    dead: bool = False               # stop processing: the sender is gone, or a newer connection took over
    busy: bool = False               # on_batch is running for a batch of this connection
    batches_waiting: int = 0         # batches queued for on_batch (control messages do not count)
    processor: asyncio.Task | None = None
    last_rx: float = 0.0             # monotonic time of the last frame read


def _wake(conn: _Conn) -> None:
    """Make a processor waiting on an empty queue look at `dead` again."""
    if not conn.queue.full():
        conn.queue.put_nowait(_END)


class PeerServer:
    """Listens on the peer port and delivers authenticated batches to `on_batch`."""

    def __init__(self, me_id: int, known_ids: frozenset[int], cluster: str, secret: bytes,
                 options: PeersConfig, on_batch: OnBatch, on_control: OnControl | None = None) -> None:
        self.me_id = me_id
        self._known = known_ids
        self._cluster = cluster
        self._secret = secret
        self.opts = options
        self._on_batch = on_batch
        self._on_control = on_control
        self.rejected: Counter = Counter()
        self.accepted = 0
        self.batches_received_total = 0
        self.inbound: dict[int, InboundCounters] = {i: InboundCounters() for i in known_ids if i != me_id}
        self._marks: dict[int, list[int]] = {}            # peer -> [stream id, high-water mark]
        self._locks = {i: asyncio.Lock() for i in self.inbound}
        self._conns: dict[int, _Conn] = {}
        self._all: set[_Conn] = set()
        self._handlers: set[asyncio.Task] = set()
        self._handshaking = 0
        self._server: asyncio.AbstractServer | None = None
        self._sweeper: asyncio.Task | None = None
        self._closing = False

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the bound port."""
        self._server = await asyncio.start_server(self._handle, host, port)
        self._sweeper = asyncio.create_task(self._sweep(), name="peer-server-sweeper")
        return self._server.sockets[0].getsockname()[1]

    async def _sweep(self) -> None:
        """Hang up on senders gone silent (a live sender PINGs at least every ping_interval_s)."""
        limit_s = SILENT_FACTOR * self.opts.dead_after_s
        while True:
            await asyncio.sleep(self.opts.dead_after_s / 2)
            now = time.monotonic()
            for conn in list(self._all):
                waiting_for_data = conn.queue.empty() and not conn.busy
                if waiting_for_data and not conn.dead and now - conn.last_rx > limit_s:
                    self.inbound[conn.peer_id].dropped["silent"] += 1
                    conn.dead = True
                    conn.writer.transport.abort()

    def busy(self) -> bool:
        """A received batch is waiting for or inside on_batch (control messages do not count)."""
        return any(c.busy or c.batches_waiting for c in self._all)

    def connected(self, peer_id: int) -> bool:
        conn = self._conns.get(peer_id)
        return conn is not None and not conn.dead

    # --- accepting -----------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None            # a connection callback always runs in a task
        self._handlers.add(task)
        try:
            conn = await self._admit(reader, writer)
            if conn is not None:
                await self._serve(conn)
        except asyncio.CancelledError:
            writer.transport.abort()      # close()/abort() cancelled us; end quietly (asyncio's stream
            # callback logs an error for a connection task that ends cancelled)
        finally:
            self._handlers.discard(task)

    def _reject(self, writer: asyncio.StreamWriter, reason: str, detail: object = "") -> None:
        self.rejected[reason] += 1
        if reason == BAD_VERSION:
            # An operator's mistake (two crawler versions in one cluster), not noise: say it loud, and tell
            # the other end why in a BYE (a peer of another version reads a BYE's text whatever its version).
            log.warning("peer connection from %s rejected: %s", writer.get_extra_info("peername"), detail)
            writer.write(encode_bye(str(detail)))
            writer.close()
            return
        log.info("peer connection from %s rejected: %s %s", writer.get_extra_info("peername"), reason, detail)
        writer.transport.abort()

    async def _admit(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _Conn | None:
        if self._closing:
            writer.transport.abort()
            return None
        if self._handshaking >= self.opts.max_handshakes:
            self._reject(writer, BUSY)
            return None
        self._handshaking += 1
        try:
            hello = await asyncio.wait_for(server_handshake(
                reader, writer, me_id=self.me_id, known_ids=self._known, cluster=self._cluster,
                secret=self._secret), self.opts.handshake_timeout_s)
        except TimeoutError:
            self._reject(writer, HANDSHAKE_TIMEOUT)
            return None
        except FrameError as exc:
            self._reject(writer, CLOSED if exc.reason == EOF else exc.reason, exc)
            return None
        except OSError as exc:
            self._reject(writer, RESET, exc)
            return None
        finally:
            self._handshaking -= 1
        if self._closing:
            writer.transport.abort()
            return None
        conn = _Conn(hello.from_id, hello.stream_id, reader, writer, asyncio.Queue(self.opts.recv_buffer_batches),
                     last_rx=time.monotonic())
        old = self._conns.get(conn.peer_id)
        if old is not None:                  # the peer reconnected: the old connection is stale
            old.dead = True
            old.writer.transport.abort()
            self.inbound[conn.peer_id].dropped["superseded"] += 1
        self._conns[conn.peer_id] = conn
        self._all.add(conn)
        self.accepted += 1
        self.inbound[conn.peer_id].connects += 1
        log.info("peer node %d connected from %s", conn.peer_id, writer.get_extra_info("peername"))
        return conn

    # --- serving -------------------------------------------------------------------------

    async def _serve(self, conn: _Conn) -> None:
        conn.processor = asyncio.create_task(self._process(conn))
        bye = False
        try:
            bye = await self._read(conn)
        except FrameError as exc:
            if exc.reason != EOF:
                self.inbound[conn.peer_id].dropped[exc.reason] += 1
                log.warning("peer node %d: connection dropped: %s", conn.peer_id, exc)
        except OSError:
            pass
        finally:
            if not bye:
                conn.dead = True             # unprocessed frames will be resent; stop after the current one
            _wake(conn)
            try:
                await conn.processor
            except asyncio.CancelledError:
                conn.processor.cancel()
            while not conn.queue.empty():    # discarded: the sender still holds them
                conn.queue.get_nowait()
            if bye and not self._closing:
                conn.writer.close()
            else:
                conn.writer.transport.abort()
            self._all.discard(conn)
            if self._conns.get(conn.peer_id) is conn:
                del self._conns[conn.peer_id]

    async def _read(self, conn: _Conn) -> bool:
        """Read frames until the peer leaves; True if it said BYE."""
        max_frame, max_control = self.opts.max_frame_bytes, self.opts.max_control_bytes
        counters = self.inbound[conn.peer_id]
        while not conn.dead:
            ftype, payload = await read_frame(conn.reader, max_frame)
            conn.last_rx = time.monotonic()
            if ftype == FrameType.BATCH:
                seq, urls = decode_batch(payload)
                counters.bytes_received += len(payload) + HEADER_BYTES
                conn.batches_waiting += 1
                await conn.queue.put((seq, urls))
            elif ftype == FrameType.PING:
                conn.writer.write(encode_seq(FrameType.PONG, decode_seq(payload)))
            elif ftype == FrameType.CONTROL:
                await conn.queue.put((_CONTROL, decode_control(payload, max_control)))
            elif ftype == FrameType.BYE:
                log.info("peer node %d said BYE (%s)", conn.peer_id, decode_bye(payload))
                await conn.queue.put(_END)
                return True
            else:
                raise FrameError(MALFORMED, f"unexpected {ftype.name} from node {conn.peer_id}")
        return False

    async def _process(self, conn: _Conn) -> None:
        """Call the node's callbacks in arrival order; ACK each batch after on_batch returns."""
        peer = conn.peer_id
        counters = self.inbound[peer]
        lock = self._locks[peer]
        while True:
            item = await conn.queue.get()
            if item is _END:
                return
            if item[0] is _CONTROL:
                # Control messages never make the node busy: the termination check asks
                # "are you idle?" through one, and must not see its own question as work.
                async with lock:
                    if conn.dead:
                        return
                    counters.controls_received += 1
                    await self._call(self._on_control, peer, item[1], counters)
                continue
            async with lock:
                conn.batches_waiting -= 1
                if conn.dead:
                    return
                conn.busy = True
                try:
                    seq, urls = item
                    mark = self._marks.get(peer)
                    if mark is None or mark[0] != conn.stream_id:
                        mark = self._marks[peer] = [conn.stream_id, 0]
                    if seq < mark[1]:
                        counters.batches_duplicate += 1
                    else:
                        if not await self._call(self._on_batch, peer, urls, counters):
                            conn.dead = True         # no ACK: the sender resends after reconnecting
                            conn.writer.transport.abort()
                            counters.dropped["callback_error"] += 1
                            return
                        mark[1] = seq + 1
                        counters.batches_received += 1
                        counters.urls_received += len(urls)
                        self.batches_received_total += 1
                    conn.writer.write(encode_seq(FrameType.ACK, seq))
                finally:
                    conn.busy = False
            try:
                await conn.writer.drain()
            except (OSError, RuntimeError):
                conn.dead = True
                return

    async def _call(self, callback: Callable | None, peer: int, arg: object, counters: InboundCounters) -> bool:
        if callback is None:
            return True
        try:
            result = callback(peer, arg)
            if inspect.isawaitable(result):
                await result
        except Exception:
            counters.callback_errors += 1
            log.exception("peer callback failed for a frame from node %d", peer)
            return callback is not self._on_batch    # a failed control message is just dropped
        return True

    # --- closing -------------------------------------------------------------------------

    async def close(self, deadline: float) -> None:
        """Stop listening; let running callbacks finish (until `deadline`), then BYE and hang up."""
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self._all):
            conn.dead = True                 # finish the frame in hand, ACK it, take no more
            _wake(conn)
        processors = [c.processor for c in self._all if c.processor is not None]
        if processors:
            await asyncio.wait(processors, timeout=max(0.0, deadline - time.monotonic()))
        for conn in list(self._all):
            try:
                conn.writer.write(encode_bye("server closing"))
            except (OSError, RuntimeError):
                pass
            conn.writer.close()
        handlers = list(self._handlers)
        if handlers:
            _, late = await asyncio.wait(handlers, timeout=BYE_WAIT_S)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        for conn in list(self._all):
            conn.writer.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()
        if self._sweeper is not None:
            await asyncio.gather(self._sweeper, return_exceptions=True)

    def drop(self, peer_id: int) -> None:
        """Hang up on `peer_id` without a BYE (it reconnects and resends what it has not had ACKed)."""
        conn = self._conns.get(peer_id)
        if conn is not None:
            conn.writer.transport.abort()

    def abort(self) -> None:
        """Drop every connection at once, no BYE (tests use it to simulate a crash)."""
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self._all):
            conn.dead = True
            conn.writer.transport.abort()
            if conn.processor is not None:
                conn.processor.cancel()
        for task in list(self._handlers):
            task.cancel()

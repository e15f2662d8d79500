"""The outbound queue of one peer link: where each batch waits until the peer ACKs it.

A batch accepted by the link is in exactly one of these places until the
peer ACKs it, and they are sent in this order (which is sequence-number order):

    resend   sent on a connection that died before the ACK (at most window_batches)
    spool    on disk (see spool.py), read back one batch at a time
    pending  in memory, at most queue_batches

On the wire, at most `window_batches` are unacknowledged (`unacked`).

This module holds that bookkeeping and nothing of the connection: no
sockets, no tasks, no waiting. `PeerLink` (link.py) decides *when* to queue,
spill or transmit (it knows whether the peer is up and for how long it has
been down); the outbox keeps the order, the window, the counters and the
spool consistent whatever the link decides. So it can be tested alone.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crawler.config.schema import PeersConfig
from crawler.peers.frames import BATCH_HEAD, HEADER_BYTES, batch_frame
from crawler.peers.spool import SeqAllocator, Spool

log = logging.getLogger(__name__)

SPOOL_RETRY_S = 1.0        # after a failed spool write (disk full), wait this long before trying again


@dataclass(slots=True)
class Batch:
    """One encoded BATCH frame and where its durable copy lives."""
    seq: int
    frame: bytes
    urls: int
    segment: int | None = None    # spool segment holding it; None = only in memory
    sent_at: float = 0.0


@dataclass
class OutboxCounters:
    batches_sent: int = 0         # accepted (once each; resends not counted)
    urls_sent: int = 0
    bytes_sent: int = 0
    batches_resent: int = 0       # retransmissions after a lost connection
    batches_acked: int = 0
    urls_acked: int = 0
    batches_spilled: int = 0      # batches written to the spool
    batches_replayed: int = 0     # batches sent from the spool
    lost_at_close: int = 0        # batches neither delivered nor spooled at close (spool unwritable)


def _no_op() -> None:
    pass


class Outbox:
    """The batches bound for one peer, in sequence order, until ACKed: memory, spool and window."""

    def __init__(self, peer_id: int, spool_dir: Path, options: PeersConfig,
                 on_space: Callable[[], None] = _no_op, clock: Callable[[], float] = time.monotonic) -> None:
        self.peer_id = peer_id
        self.queue_batches = options.queue_batches
        self.window_batches = options.window_batches
        self._on_space = on_space          # pending shrank (a waiting put may go on)
        self._clock = clock
        self.counters = OutboxCounters()
        self.spool = Spool(spool_dir / f"peer-{peer_id}", options.spool_segment_bytes)
        self.seqs = SeqAllocator.open(self.spool.dir, floor=self.spool.max_seq())
        # Batches reloaded from the spool count as sent in this process's life
        # (the peer has not ACKed them), so sent - received stays the number in transit.
        self.counters.batches_sent += self.spool.unread
        self.resend: deque[Batch] = deque()
        self.pending: deque[Batch] = deque()
        self.unacked: dict[int, Batch] = {}          # insertion order = transmission order
        self.last_seq = 0                  # the newest sequence number given to a batch
        self._spool_retry_at = 0.0         # clock time before which a broken spool is not retried

    # --- state ---------------------------------------------------------------------------

    @property
    def full(self) -> bool:
        return len(self.pending) >= self.queue_batches

    @property
    def in_memory(self) -> int:
        """Batches held in RAM for this peer."""
        return len(self.pending) + len(self.resend) + sum(1 for b in self.unacked.values() if b.segment is None)

    def memory_only(self) -> bool:
        """Something waiting to be sent lives only in memory (what a spill would move to disk)."""
        return bool(self.pending) or any(b.segment is None for b in self.resend)

    def durable_through(self, seq: int) -> bool:
        """Every batch numbered up to `seq` is ACKed (the peer's DUE has it) or in the spool: it
        survives this process being killed. The node confirms fetched pages against this."""
        for group in (self.pending, self.resend, self.unacked.values()):
            for b in group:
                if b.segment is None and b.seq <= seq:
                    return False
        return True

    def drained(self) -> bool:
        """Nothing queued, nothing unacked, nothing spooled."""
        return not (self.pending or self.resend or self.unacked or self.spool.live)

    def oldest_unacked(self) -> Batch | None:
        """The batch on the wire longest without an ACK (the ACK timeout watches it)."""
        return next(iter(self.unacked.values()), None)

    # --- accepting -----------------------------------------------------------------------

    def queue(self, body: bytes, urls: int) -> bool:
        """Number a batch and queue it in memory; False (nothing numbered) when `pending` is full.

        The sequence number is given at the moment the batch is placed, so
        callers that never await between deciding and placing can never put
        numbers out of order.
        """
        if self.full:
            return False
        self.pending.append(self._accept(body, urls))
        return True

    def spool_new(self, body: bytes, urls: int) -> bool:
        """Number a new batch and append it to the spool (after everything queued); False if the disk
        refused (the number given is then just skipped)."""
        batch = self._accept(body, urls)
        try:
            self.spool.append([batch.frame])
        except OSError as exc:
            c = self.counters            # not accepted after all: the caller waits or queues it anew
            c.batches_sent -= 1
            c.urls_sent -= urls
            c.bytes_sent -= len(batch.frame)
            self._spool_failed(exc)
            return False
        self.counters.batches_spilled += 1
        return True

    def _accept(self, body: bytes, urls: int) -> Batch:
        """Number and frame a batch that is being placed now; counts it as sent (once, ever)."""
        seq = self.seqs.next()
        self.last_seq = seq
        batch = Batch(seq, batch_frame(seq, urls, body), urls)
        c = self.counters
        c.batches_sent += 1
        c.urls_sent += urls
        c.bytes_sent += len(batch.frame)
        return batch

    def spill(self) -> bool:
        """Move what is only in memory to the spool: a dead connection's unacknowledged batches (read
        first: they are the oldest), then the whole pending queue, oldest first; False if the disk
        refused (or refused less than SPOOL_RETRY_S ago). Until then the pages whose links they carry
        cannot be confirmed (`durable_through`)."""
        if self._clock() < self._spool_retry_at:
            return False
        try:
            memory = [b for b in self.resend if b.segment is None]
            if memory:
                self.spool.prepend([b.frame for b in memory])
                self.resend = deque(b for b in self.resend if b.segment is not None)
                self.counters.batches_spilled += len(memory)
            while self.pending:
                self.spool.append([self.pending[0].frame])
                self.pending.popleft()
                self.counters.batches_spilled += 1
        except OSError as exc:
            self._spool_failed(exc)
            return False
        finally:
            self._on_space()
        return True

    def _spool_failed(self, exc: OSError) -> None:
        log.error("spool for node %d not writable (retry in %.0f s): %s", self.peer_id, SPOOL_RETRY_S, exc)
        self._spool_retry_at = self._clock() + SPOOL_RETRY_S

    # --- sending -------------------------------------------------------------------------

    def next_batch(self) -> Batch | None:
        """The next batch to transmit, in sequence order, if the window allows."""
        if len(self.unacked) >= self.window_batches:
            return None
        if self.resend:
            self.counters.batches_resent += 1
            return self.resend.popleft()
        if self.spool.unread:
            got = self.spool.read_next()
            if got is not None:
                frame, segment = got
                seq, urls = BATCH_HEAD.unpack_from(frame, HEADER_BYTES)
                self.counters.batches_replayed += 1
                return Batch(seq, frame, urls, segment)
        if self.pending:
            batch = self.pending.popleft()
            self._on_space()
            return batch
        return None

    def sent(self, batch: Batch) -> None:
        """`batch` is being written to the connection now: it waits for its ACK in the window."""
        batch.sent_at = self._clock()
        self.unacked[batch.seq] = batch

    def ack(self, seq: int) -> bool:
        """The peer ACKed `seq`; False for a stale ACK (from an earlier connection)."""
        batch = self.unacked.pop(seq, None)
        if batch is None:
            return False
        c = self.counters
        c.batches_acked += 1
        c.urls_acked += batch.urls
        if batch.segment is not None:
            self.spool.ack(batch.segment)
        return True

    def connection_lost(self) -> None:
        """The connection died: its unacknowledged batches go first in line again, in order."""
        if self.unacked:
            self.resend.extendleft(reversed(list(self.unacked.values())))
            self.unacked.clear()

    # --- closing -------------------------------------------------------------------------

    def close(self) -> None:
        """Keep for the next start what lives only in memory (call after `connection_lost`); close the spool."""
        left = [b for b in self.resend if b.segment is None] + list(self.pending)
        try:
            self.spool.dump([b.frame for b in left])
            self.counters.batches_spilled += len(left)
        except OSError as exc:
            self.counters.lost_at_close += len(left)
            log.error("node %d: %d batches could not be spooled at close: %s", self.peer_id, len(left), exc)
        self.pending.clear()
        self.resend.clear()
        self.spool.close()

    def stats(self) -> dict[str, int]:
        c = self.counters
        return {
            "batches_sent": c.batches_sent, "urls_sent": c.urls_sent, "bytes_sent": c.bytes_sent,
            "batches_resent": c.batches_resent, "batches_acked": c.batches_acked, "urls_acked": c.urls_acked,
            "batches_spilled": c.batches_spilled, "batches_replayed": c.batches_replayed,
            "queued": len(self.pending), "unacked": len(self.unacked) + len(self.resend),
            "in_memory": self.in_memory,
            "spooled": self.spool.live, "spool_bytes": self.spool.size_bytes,
            "spool_segments": self.spool.segment_count,
        }

"""The outbound queue of a peer link alone: order, window, resend, spill to the spool, ACKs, close."""

import errno

import pytest

from crawler.config.schema import PeersConfig
from crawler.peers.frames import HEADER_BYTES, decode_batch, encode_urls
from crawler.peers.outbox import SPOOL_RETRY_S, Outbox
from crawler.peers.spool import Spool

PEER = 1


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(tmp_path, queue=4, window=2, clock=None, spaces=None):
    options = PeersConfig(queue_batches=queue, window_batches=window)
    on_space = (lambda: spaces.append(1)) if spaces is not None else (lambda: None)
    return Outbox(PEER, tmp_path, options, on_space=on_space, clock=clock or Clock())


def body(i):
    return encode_urls([f"http://h.test/{i}"]), 1


def put(outbox, i):
    return outbox.queue(*body(i))


def sent_urls(batch):
    return decode_batch(batch.frame[HEADER_BYTES:])[1]


def transmit(outbox):
    """Take every batch the window allows, as the link's transmit loop does; returns their sequence numbers."""
    got = []
    while (batch := outbox.next_batch()) is not None:
        outbox.sent(batch)
        got.append(batch.seq)
    return got


def refuse(*_args, **_kw):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_batches_are_numbered_in_order_and_counted_once(tmp_path):
    outbox = make(tmp_path)
    assert [put(outbox, i) for i in range(3)] == [True, True, True]
    assert [b.seq for b in outbox.pending] == [1, 2, 3] and outbox.last_seq == 3
    assert [sent_urls(b) for b in outbox.pending] == [["http://h.test/0"], ["http://h.test/1"], ["http://h.test/2"]]
    c = outbox.counters
    assert (c.batches_sent, c.urls_sent) == (3, 3)
    assert c.bytes_sent == sum(len(b.frame) for b in outbox.pending)


def test_a_full_queue_refuses_without_numbering(tmp_path):
    outbox = make(tmp_path, queue=2)
    assert put(outbox, 0) and put(outbox, 1)
    assert outbox.full
    assert not put(outbox, 2)
    assert outbox.last_seq == 2 and outbox.counters.batches_sent == 2


def test_the_window_bounds_what_is_on_the_wire(tmp_path):
    spaces = []
    outbox = make(tmp_path, queue=8, window=2, spaces=spaces)
    for i in range(5):
        put(outbox, i)
    assert transmit(outbox) == [1, 2]
    assert spaces == [1, 1]                       # each batch taken from pending frees a place
    assert list(outbox.unacked) == [1, 2] and len(outbox.pending) == 3
    assert outbox.ack(1) and not outbox.ack(1)    # the second is stale
    assert transmit(outbox) == [3]
    assert outbox.oldest_unacked().seq == 2
    c = outbox.counters
    assert (c.batches_acked, c.urls_acked) == (1, 1)


def test_a_lost_connection_resends_the_unacknowledged_first_in_order(tmp_path):
    outbox = make(tmp_path, queue=8, window=3)
    for i in range(5):
        put(outbox, i)
    assert transmit(outbox) == [1, 2, 3]
    outbox.ack(2)
    outbox.connection_lost()
    assert not outbox.unacked and [b.seq for b in outbox.resend] == [1, 3]
    assert transmit(outbox) == [1, 3, 4]
    assert outbox.counters.batches_resent == 2
    assert outbox.counters.batches_sent == 5      # resends are not sent again


def test_spill_moves_memory_to_the_spool_oldest_first(tmp_path):
    spaces = []
    outbox = make(tmp_path, queue=8, window=2, spaces=spaces)
    for i in range(5):
        put(outbox, i)
    transmit(outbox)                              # 1 and 2 on the wire
    outbox.connection_lost()                      # 1, 2 to resend (memory only)
    assert outbox.memory_only() and not outbox.durable_through(1)
    assert outbox.spill()
    assert not outbox.pending and not outbox.resend and not outbox.memory_only()
    assert outbox.counters.batches_spilled == 5 and outbox.spool.unread == 5
    assert outbox.durable_through(5) and spaces
    assert outbox.in_memory == 0
    assert transmit(outbox) == [1, 2]             # read back from the spool, in sequence order
    assert outbox.counters.batches_replayed == 2
    assert all(b.segment is not None for b in outbox.unacked.values())
    assert outbox.durable_through(5)              # spooled batches on the wire survive a crash


def test_new_batches_go_to_the_spool_after_everything_queued(tmp_path):
    outbox = make(tmp_path, queue=2, window=8)
    put(outbox, 0)
    assert outbox.spill() and outbox.spool_new(*body(1))
    put(outbox, 2)                                # back in memory, after the spool
    assert outbox.counters.batches_spilled == 2
    assert transmit(outbox) == [1, 2, 3]


def test_acking_spooled_batches_empties_the_spool(tmp_path):
    outbox = make(tmp_path, queue=4, window=4)
    for i in range(3):
        outbox.spool_new(*body(i))
    assert not outbox.drained()
    for seq in transmit(outbox):
        outbox.ack(seq)
    assert outbox.drained() and outbox.spool.live == 0
    assert list(tmp_path.glob("peer-1/seg-*.spool")) == []


def test_a_refused_spool_keeps_batches_in_memory_and_waits_before_retrying(tmp_path):
    clock = Clock()
    outbox = make(tmp_path, queue=4, clock=clock)
    put(outbox, 0)
    outbox.spool.append = refuse
    assert not outbox.spill()
    assert len(outbox.pending) == 1 and outbox.counters.batches_spilled == 0
    assert not outbox.spool_new(*body(1))         # refused: not counted as sent
    assert outbox.counters.batches_sent == 1
    del outbox.spool.append                       # the disk has room again ...
    clock.now += SPOOL_RETRY_S / 2
    assert not outbox.spill()                     # ... but it is not tried before the retry delay
    clock.now += SPOOL_RETRY_S
    assert outbox.spill() and not outbox.pending and outbox.spool.unread == 1


def test_a_refused_prepend_keeps_the_resend_queue(tmp_path):
    outbox = make(tmp_path, queue=4, window=2)
    put(outbox, 0)
    transmit(outbox)
    outbox.connection_lost()
    outbox.spool.prepend = refuse
    assert not outbox.spill()
    assert [b.seq for b in outbox.resend] == [1] and not outbox.durable_through(1)


def test_close_keeps_memory_batches_for_the_next_start(tmp_path):
    outbox = make(tmp_path, queue=8, window=2)
    for i in range(4):
        put(outbox, i)
    transmit(outbox)
    outbox.ack(1)
    outbox.connection_lost()
    outbox.close()
    assert outbox.counters.batches_spilled == 3 and outbox.counters.lost_at_close == 0
    again = make(tmp_path)
    assert again.counters.batches_sent == 3       # reloaded batches count as sent in this life
    assert transmit(again) == [2, 3]
    assert again.last_seq == 0 and again.seqs.next() > 4     # numbers never repeat across restarts
    again.close()


def test_close_counts_what_the_spool_refused(tmp_path):
    outbox = make(tmp_path)
    put(outbox, 0)
    put(outbox, 1)
    outbox.spool.dump = refuse
    outbox.close()
    assert outbox.counters.lost_at_close == 2 and not outbox.pending
    assert Spool(tmp_path / "peer-1").unread == 0


def test_stats_name_the_queue_window_and_spool(tmp_path):
    outbox = make(tmp_path, queue=8, window=1)
    put(outbox, 0)
    put(outbox, 1)
    transmit(outbox)
    stats = outbox.stats()
    assert stats["queued"] == 1 and stats["unacked"] == 1 and stats["in_memory"] == 2
    assert stats["spooled"] == 0 and stats["batches_sent"] == 2


@pytest.mark.parametrize("queue", [1, 3])
def test_memory_stays_within_queue_plus_window(tmp_path, queue):
    window = 2
    outbox = make(tmp_path, queue=queue, window=window)
    for i in range(20):
        if not put(outbox, i):
            transmit(outbox)
            outbox.ack(next(iter(outbox.unacked)))
            put(outbox, i)
        assert outbox.in_memory <= queue + window

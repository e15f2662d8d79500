"""PeerNetworks talking over real loopback TCP: delivery, exact counters, spill, crashes, backpressure."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from tests.support.ports import free_port

from crawler.config.schema import NodeConfig
from crawler.peers import PeerNetwork
from crawler.peers.auth import server_handshake

SECRET = b"cluster-secret-for-tests"
CLUSTER = "test"
# Short timers so failure paths run in well under a second.
FAST = dict(connect_timeout_s=0.5, handshake_timeout_s=0.3, ping_interval_s=0.1, dead_after_s=0.5,
            ack_timeout_s=5.0, reconnect_min_s=0.02, reconnect_max_s=0.2, spill_after_s=0.3)
WAIT_S = 10.0


def node_configs(count: int) -> list[NodeConfig]:
    """Node i listens on 127.0.0.(i+1), on a free port."""
    return [NodeConfig(id=i, host=f"127.0.0.{i + 1}", peer_port=free_port(f"127.0.0.{i + 1}"))
            for i in range(count)]


def batch(tag: str, index: int, size: int = 20) -> list[str]:
    return [f"http://{tag}-{index}.test/page/{j}" for j in range(size)]


async def wait_until(predicate, timeout_s: float = WAIT_S, what: str = "condition") -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class Node:
    """A PeerNetwork and a record of what reached its callbacks."""

    def __init__(self, cfg: NodeConfig, nodes: list[NodeConfig], spool: Path, delay_s: float = 0.0, **options):
        self.cfg = cfg
        self.received: list[tuple[int, list[str]]] = []
        self.controls: list[tuple[int, dict]] = []
        self.delay_s = delay_s
        self.net = PeerNetwork(cfg, nodes, CLUSTER, SECRET, spool, self.on_batch, self.on_control,
                               **{**FAST, **options})

    async def on_batch(self, src: int, urls: list[str]) -> None:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.received.append((src, urls))

    def on_control(self, src: int, message: dict) -> None:
        self.controls.append((src, message))

    def urls_from(self, src: int) -> list[list[str]]:
        return [urls for s, urls in self.received if s == src]


@pytest.fixture
async def cluster(tmp_path):
    """Factory of started Nodes; all are closed at teardown."""
    started: list[Node] = []

    async def make(cfg: NodeConfig, nodes: list[NodeConfig], spool_name: str | None = None, **kw) -> Node:
        node = Node(cfg, nodes, tmp_path / (spool_name or f"spool-{cfg.id}"), **kw)
        await node.net.start()
        started.append(node)
        return node

    yield make
    for node in started:
        if not node.net._closed:
            await node.net.close(timeout_s=0.5)


def all_idle(*nodes: Node) -> bool:
    return all(n.net.idle() for n in nodes)


def spool_files(node_or_path, peer: int) -> list[Path]:
    root = node_or_path.net.spool_dir if isinstance(node_or_path, Node) else node_or_path
    return sorted((root / f"peer-{peer}").glob("seg-*.spool"))


async def test_three_nodes_deliver_everything_with_exact_counts(cluster):
    cfgs = node_configs(3)
    nodes = [await cluster(c, cfgs) for c in cfgs]
    per_pair = 25
    for i in range(per_pair):
        for a in nodes:
            for b in nodes:
                if a is not b:
                    await a.net.send(b.cfg.id, batch(f"{a.cfg.id}to{b.cfg.id}", i))
    await wait_until(lambda: all_idle(*nodes), what="idle")
    for a in nodes:
        for b in nodes:
            if a is not b:
                assert b.urls_from(a.cfg.id) == [batch(f"{a.cfg.id}to{b.cfg.id}", i) for i in range(per_pair)]
    counts = [n.net.counts() for n in nodes]
    assert (sum(c["batches_sent_total"] for c in counts) == sum(c["batches_received_total"] for c in counts)
            == 6 * per_pair)
    for c in counts:
        assert c["rejected"] == {}
        for peer in c["peers"].values():
            assert peer["batches_sent"] == peer["batches_acked"] == peer["batches_received"] == per_pair
            assert peer["urls_sent"] == peer["urls_received"] == 20 * per_pair
            assert peer["bytes_sent"] == peer["bytes_received"] > 0
            assert peer["batches_duplicate"] == peer["batches_resent"] == peer["spooled"] == 0
    assert all(n.net.connected(p) for n in nodes for p in range(3) if p != n.cfg.id)


async def test_control_messages_reach_connected_peers_only(cluster):
    cfgs = node_configs(3)
    a, b = await cluster(cfgs[0], cfgs), await cluster(cfgs[1], cfgs)   # node 2 never starts
    await wait_until(lambda: a.net.connected(1), what="link 0->1")
    a.net.broadcast_control({"round": 1, "quiet": True})
    await wait_until(lambda: b.controls, what="control")
    assert b.controls == [(0, {"round": 1, "quiet": True})]
    assert a.net.stats()["links"][2]["controls_dropped"] == 1            # best effort: not spooled
    with pytest.raises(ValueError):
        await a.net.send(0, ["http://me.test/"])                          # not a peer: that is us
    with pytest.raises(ValueError):
        await a.net.send(9, ["http://nobody.test/"])


async def test_down_peer_spills_to_disk_then_drains_in_order(cluster):
    cfgs = node_configs(2)
    a = await cluster(cfgs[0], cfgs, queue_batches=4)
    sent = [batch("spill", i) for i in range(50)]
    for urls in sent:
        await asyncio.wait_for(a.net.send(1, urls), 1.0)                  # never blocks: the peer is down
    assert len(a.net._links[1].outbox.pending) <= 4
    await wait_until(lambda: a.net.counts()["peers"][1]["spooled"] == 50, what="everything spooled")
    assert spool_files(a, 1) and not a.net.idle()
    b = await cluster(cfgs[1], cfgs)
    await wait_until(lambda: all_idle(a, b), what="drained")
    assert b.urls_from(0) == sent                                          # in order, nothing lost, no repeats
    assert spool_files(a, 1) == []
    counts = a.net.counts()["peers"][1]
    assert counts["batches_spilled"] == 50 and counts["spooled"] == 0 and counts["batches_acked"] == 50
    assert b.net.counts()["batches_received_total"] == 50


async def test_receiver_crash_and_restart_loses_nothing(cluster):
    cfgs = node_configs(2)
    a = await cluster(cfgs[0], cfgs, window_batches=4)
    b = await cluster(cfgs[1], cfgs, delay_s=0.005)
    sent = [batch("crash", i) for i in range(60)]
    for i, urls in enumerate(sent):
        await a.net.send(1, urls)
        if i == 20:
            await wait_until(lambda: len(b.received) >= 10, what="first batches")
            await b.net.abort()                                           # transport.abort everywhere, no BYE
    b2 = await cluster(cfgs[1], cfgs)                                     # same port, same spool
    await wait_until(lambda: all_idle(a, b2), what="drained after restart")
    delivered = [tuple(u) for u in b.urls_from(0) + b2.urls_from(0)]
    assert set(delivered) == {tuple(u) for u in sent}                    # at-least-once
    assert a.net.counts()["peers"][1]["batches_acked"] == 60
    order = [sent.index(u) for u in b2.urls_from(0)]
    assert order == sorted(set(order))                                    # the restarted node got them in order, once


async def test_lost_ack_resend_is_acked_but_not_delivered_twice(cluster):
    cfgs = node_configs(2)
    a = await cluster(cfgs[0], cfgs)
    b = await cluster(cfgs[1], cfgs)
    calls = []

    async def on_batch(src, urls):                                        # hang up before the ACK of batch 3
        calls.append(urls)
        if len(calls) == 3:
            b.net._server.drop(src)
    b.net._server._on_batch = on_batch
    sent = [batch("dup", i) for i in range(8)]
    for urls in sent:
        await a.net.send(1, urls)
    await wait_until(lambda: all_idle(a, b), what="idle")
    assert calls == sent                                                  # each batch processed once
    cb, ca = b.net.counts(), a.net.counts()
    assert cb["peers"][0]["batches_duplicate"] >= 1                       # the resend was ACKed, not passed on
    assert ca["peers"][1]["batches_resent"] >= 1
    assert ca["batches_sent_total"] == cb["batches_received_total"] == 8


async def test_peer_that_never_answers_does_not_block_the_sender(cluster):
    cfgs = node_configs(2)
    seen_bytes = []

    async def black_hole(reader, writer):                                 # accepts TCP, reads, says nothing
        try:
            while data := await reader.read(65536):
                seen_bytes.append(len(data))
        finally:
            writer.close()
    hole = await asyncio.start_server(black_hole, cfgs[1].host, cfgs[1].peer_port)
    try:
        a = await cluster(cfgs[0], cfgs, queue_batches=4)
        sent = [batch("hole", i) for i in range(30)]
        for urls in sent:
            await asyncio.wait_for(a.net.send(1, urls), 1.0)
        await wait_until(lambda: a.net.counts()["peers"][1]["spooled"] == 30, what="spilled")
        await wait_until(lambda: a.net.stats()["links"][1]["connect_failures"].get("handshake_timeout", 0) >= 1,
                         what="handshake timeout")
        assert not a.net.connected(1) and seen_bytes                     # it got our HELLO, never a batch
    finally:
        hole.close()
        await hole.wait_closed()
    b = await cluster(cfgs[1], cfgs)
    await wait_until(lambda: all_idle(a, b), what="drained")
    assert b.urls_from(0) == sent


async def mute_peer(cfg: NodeConfig) -> asyncio.Server:
    """A server at `cfg`'s address that authenticates as node 1, then reads and never ACKs nor PONGs."""
    async def mute(reader, writer):
        try:
            await server_handshake(reader, writer, me_id=1, known_ids=frozenset({0, 1}), cluster=CLUSTER,
                                   secret=SECRET)
            while await reader.read(65536):
                pass
        except ConnectionError:
            pass
        finally:
            writer.close()
    return await asyncio.start_server(mute, cfg.host, cfg.peer_port)


async def test_peer_that_goes_silent_after_the_handshake_is_dropped(cluster):
    """Authenticates, then never ACKs nor PONGs: the watchdog drops it, batches spill, nothing waits forever."""
    cfgs = node_configs(2)

    fake = await mute_peer(cfgs[1])
    try:
        a = await cluster(cfgs[0], cfgs, queue_batches=4, window_batches=2)
        await wait_until(lambda: a.net.connected(1), what="fake peer up")
        sent = [batch("mute", i) for i in range(20)]
        for urls in sent:
            await asyncio.wait_for(a.net.send(1, urls), 2.0)
        await wait_until(lambda: a.net.stats()["links"][1]["disconnects"].get("silent", 0) >= 1, what="watchdog")
    finally:
        fake.close()
        await fake.wait_closed()
    b = await cluster(cfgs[1], cfgs)
    await wait_until(lambda: all_idle(a, b), what="drained")
    assert b.urls_from(0) == sent


async def test_unacked_batches_of_a_dead_connection_spill_too_and_keep_their_order(cluster):
    """A peer that takes batches and never ACKs, then goes: its window of batches lived only in memory.
    Once the peer is down for spill_after_s they are on disk (durable: the node may confirm the pages
    behind them), ahead of the spilled queue, and the real peer later gets everything in order.
    Found by the chaos test: a partitioned node confirmed nothing for the whole outage."""
    cfgs = node_configs(2)

    fake = await mute_peer(cfgs[1])
    try:
        a = await cluster(cfgs[0], cfgs, queue_batches=4, window_batches=3)
        await wait_until(lambda: a.net.connected(1), what="fake peer up")
        sent = [batch("unacked", i) for i in range(3)]
        for urls in sent:
            await asyncio.wait_for(a.net.send(1, urls), 2.0)
        marks = a.net.marks()
        await wait_until(lambda: a.net._link(1).outbox.unacked or a.net._link(1).outbox.resend, what="sent, not acked")
        assert not a.net.durable(marks)
    finally:
        fake.close()
        await fake.wait_closed()
    await wait_until(lambda: a.net.stats()["links"][1]["disconnects"].get("silent", 0) >= 1, what="watchdog")
    await wait_until(lambda: a.net.durable(marks), what="the dead connection's batches on disk")
    later = [batch("later", i) for i in range(5)]
    for urls in later:
        await asyncio.wait_for(a.net.send(1, urls), 2.0)
    b = await cluster(cfgs[1], cfgs)
    await wait_until(lambda: all_idle(a, b), what="drained")
    assert b.urls_from(0) == sent + later


async def test_slow_receiver_makes_send_wait_with_bounded_memory(cluster):
    cfgs = node_configs(2)
    queue, window = 4, 2
    a = await cluster(cfgs[0], cfgs, queue_batches=queue, window_batches=window)
    b = await cluster(cfgs[1], cfgs, delay_s=0.02)
    await wait_until(lambda: a.net.connected(1), what="link up")
    link = a.net._links[1]
    peak = {"pending": 0, "memory": 0}
    stop = asyncio.Event()

    async def sample():
        while not stop.is_set():
            peak["pending"] = max(peak["pending"], len(link.outbox.pending))
            peak["memory"] = max(peak["memory"], link.outbox.in_memory)
            await asyncio.sleep(0.001)
    sampler = asyncio.create_task(sample())
    sent = [batch("slow", i) for i in range(30)]
    waited = 0.0
    for urls in sent:
        t0 = time.monotonic()
        await a.net.send(1, urls)
        waited += time.monotonic() - t0
    await wait_until(lambda: all_idle(a, b), what="idle")
    stop.set()
    await sampler
    assert peak["pending"] <= queue and peak["memory"] <= queue + window
    assert waited >= 0.02 * (len(sent) - queue - window - 2)              # send() awaited the receiver
    assert b.urls_from(0) == sent
    assert a.net.counts()["peers"][1]["batches_spilled"] == 0             # an up peer is waited for, not spilled


async def test_close_flushes_and_says_bye(cluster):
    cfgs = node_configs(2)
    a = await cluster(cfgs[0], cfgs)
    b = await cluster(cfgs[1], cfgs)
    sent = [batch("bye", i) for i in range(20)]
    for urls in sent:
        await a.net.send(1, urls)
    await a.net.close(timeout_s=5)
    assert b.urls_from(0) == sent
    assert spool_files(a, 1) == []
    assert a.net.stats()["links"][1]["disconnects"] == {"bye": 1}
    with pytest.raises(RuntimeError):
        await a.net.send(1, ["http://late.test/"])


async def test_close_spools_what_is_left_and_a_restart_replays_it(cluster, tmp_path):
    cfgs = node_configs(2)
    a = await cluster(cfgs[0], cfgs, spill_after_s=60)                    # peer down, but not long enough to spill
    sent = [batch("kept", i) for i in range(10)]
    for urls in sent:
        await a.net.send(1, urls)
    assert a.net.counts()["peers"][1]["spooled"] == 0
    await a.net.close(timeout_s=0.2)
    assert spool_files(tmp_path / "spool-0", 1)
    a2 = await cluster(cfgs[0], cfgs, spool_name="spool-0")
    assert a2.net.counts()["batches_sent_total"] == 10                    # reloaded batches are still in transit
    b = await cluster(cfgs[1], cfgs)
    await wait_until(lambda: all_idle(a2, b), what="replayed")
    assert b.urls_from(0) == sent
    assert b.net.counts()["batches_received_total"] == 10


async def test_sender_restart_keeps_sequence_numbers_fresh(cluster):
    """A restarted sender must not reuse sequence numbers, or the receiver would drop new batches as repeats."""
    cfgs = node_configs(2)
    b = await cluster(cfgs[1], cfgs)
    a = await cluster(cfgs[0], cfgs)
    first = [batch("before", i) for i in range(5)]
    for urls in first:
        await a.net.send(1, urls)
    await wait_until(lambda: all_idle(a, b), what="first idle")
    await a.net.close(timeout_s=1)
    a2 = await cluster(cfgs[0], cfgs, spool_name="spool-0")
    second = [batch("after", i) for i in range(5)]
    for urls in second:
        await a2.net.send(1, urls)
    await wait_until(lambda: all_idle(a2, b), what="second idle")
    assert b.urls_from(0) == first + second
    assert b.net.counts()["peers"][0]["batches_duplicate"] == 0


async def test_spool_directory_is_locked(cluster, tmp_path):
    cfgs = node_configs(2)
    await cluster(cfgs[0], cfgs, spool_name="shared")
    other = PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path / "shared", lambda s, u: None,
                        **{**FAST, "listen_host": "127.0.0.1"})
    with pytest.raises(RuntimeError):
        await other.start()


def test_bad_construction_is_refused(tmp_path):
    cfgs = node_configs(2)
    with pytest.raises(ValueError):
        PeerNetwork(cfgs[0], cfgs, CLUSTER, b"", tmp_path, lambda s, u: None)
    with pytest.raises(ValueError):
        PeerNetwork(NodeConfig(id=5), cfgs, CLUSTER, SECRET, tmp_path, lambda s, u: None)
    with pytest.raises(TypeError):
        PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path, lambda s, u: None, no_such_option=1)
    with pytest.raises(ValueError):
        PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path, lambda s, u: None, ping_interval_s=5, dead_after_s=1)


async def test_failing_callback_means_no_ack_and_a_resend(cluster):
    cfgs = node_configs(2)
    a = await cluster(cfgs[0], cfgs)
    b = await cluster(cfgs[1], cfgs)
    calls = []

    def on_batch(src, urls):
        calls.append(urls)
        if len(calls) == 2:
            raise RuntimeError("DUE not ready")                           # the batch must come again
    b.net._server._on_batch = on_batch
    sent = [batch("retry", i) for i in range(5)]
    for urls in sent:
        await a.net.send(1, urls)
    await wait_until(lambda: all_idle(a, b), what="idle")
    assert calls[:2] == [sent[0], sent[1]] and calls[2:] == sent[1:]
    assert b.net.stats()["inbound"][0]["callback_errors"] == 1
    assert b.net.counts()["batches_received_total"] == a.net.counts()["batches_sent_total"] == 5


async def test_port_in_use_fails_start_and_frees_the_spool(tmp_path):
    cfgs = node_configs(2)
    blocker = await asyncio.start_server(lambda r, w: w.close(), cfgs[0].host, cfgs[0].peer_port)
    try:
        net = PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path / "s", lambda s, u: None, **FAST)
        with pytest.raises(OSError):
            await net.start()
    finally:
        blocker.close()
        await blocker.wait_closed()
    again = PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path / "s", lambda s, u: None, **FAST)
    await again.start()                                                   # the lock was released
    await again.close(timeout_s=0.2)


async def test_concurrent_senders_to_a_full_queue_lose_nothing(cluster):
    """Workers flushing batches to one slow peer at once: sequence numbers stay in placement order."""
    cfgs = node_configs(2)
    a = await cluster(cfgs[0], cfgs, queue_batches=2, window_batches=1)
    b = await cluster(cfgs[1], cfgs, delay_s=0.002)
    await wait_until(lambda: a.net.connected(1), what="link up")

    async def worker(w: int) -> None:
        for i in range(10):
            await a.net.send(1, batch(f"w{w}", i, size=3))
    await asyncio.gather(*(worker(w) for w in range(8)))
    await wait_until(lambda: all_idle(a, b), what="idle")
    got = b.urls_from(0)
    assert len(got) == 80 and sorted(map(tuple, got)) == sorted(tuple(batch(f"w{w}", i, size=3))
                                                                 for w in range(8) for i in range(10))
    assert b.net.counts()["peers"][0]["batches_duplicate"] == 0

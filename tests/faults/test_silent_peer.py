"""Fault: a peer that accepts TCP and then says nothing, reads nothing, forever.

Node 1's peer port is held by a plain asyncio server that accepts connections
and never touches them. Node 0's PeerNetwork must not be held up by it:
every `send()` returns within a bounded time (batches spill to the spool on
disk), the handshake times out and is counted and logged, the event loop
keeps running other tasks on time, and `close()` ends by its deadline. When a
real node 1 later takes over the same port, the spooled batches are all
delivered (at least once; the receiver's dedupe makes it exactly once here).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.support.ports import free_port

from crawler.config.schema import NodeConfig
from crawler.peers import PeerNetwork

SECRET = b"silent-peer-test-secret"
CLUSTER = "faults"
# Short timers so the test is quick, but the handshake timeout is kept longer than the bounds below:
# a sender held up by the silent peer would wait at least one handshake timeout, which they catch.
HANDSHAKE_TIMEOUT_S = 0.6
OPTIONS = dict(connect_timeout_s=0.5, handshake_timeout_s=HANDSHAKE_TIMEOUT_S, ping_interval_s=0.1,
               dead_after_s=0.5, ack_timeout_s=5.0, reconnect_min_s=0.02, reconnect_max_s=0.2, spill_after_s=0.3,
               queue_batches=4)
BATCHES = 60
URLS_PER_BATCH = 50
SEND_BOUND_S = HANDSHAKE_TIMEOUT_S / 2     # no single send() may take this long while the peer is silent
SILENT_PERIOD_S = 0.5          # how long node 0 lives beside the silent peer after two handshake timeouts
TICK_S = 0.01                  # the responsiveness probe's period
MAX_TICK_LATE_S = HANDSHAKE_TIMEOUT_S / 2  # how late one of its ticks may be (scheduling noise on a busy machine)
CLOSE_TIMEOUT_S = 0.5
CLOSE_SLACK_S = 1.5            # close() = flush deadline + BYE drain (1 s) at most, plus scheduling
WAIT_S = 10.0
POLL_S = 0.01


def node_configs() -> list[NodeConfig]:
    """Node i on 127.0.0.(i+1), on a free port."""
    return [NodeConfig(id=i, host=f"127.0.0.{i + 1}", peer_port=free_port(f"127.0.0.{i + 1}")) for i in range(2)]


def batch(index: int) -> list[str]:
    return [f"http://silent-{index}.test/page/{j}" for j in range(URLS_PER_BATCH)]


async def wait_until(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(POLL_S)


@dataclass
class Ticker:
    """Proves the event loop stays responsive: records how late each of its periodic wake-ups was."""
    ticks: int = 0
    worst_late_s: float = 0.0
    started: float = field(default_factory=time.monotonic)
    task: asyncio.Task | None = field(default=None, repr=False)

    async def _run(self) -> None:
        while True:
            due = time.monotonic() + TICK_S
            await asyncio.sleep(TICK_S)
            self.worst_late_s = max(self.worst_late_s, time.monotonic() - due)
            self.ticks += 1


@contextlib.asynccontextmanager
async def ticker() -> AsyncIterator[Ticker]:
    t = Ticker()
    t.task = asyncio.create_task(t._run())
    try:
        yield t
    finally:
        t.task.cancel()
        await asyncio.gather(t.task, return_exceptions=True)


@contextlib.asynccontextmanager
async def silent_server(host: str, port: int) -> AsyncIterator[list[asyncio.StreamWriter]]:
    """Accepts on host:port, then neither reads nor writes; yields the accepted connections."""
    accepted: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)          # kept open (and referenced) until the server goes

    server = await asyncio.start_server(hold, host, port)
    try:
        yield accepted
    finally:
        server.close()
        for writer in accepted:
            writer.transport.abort()
        await server.wait_closed()


class Receiver:
    """Node 1 for real: a PeerNetwork recording what reaches its callback."""

    def __init__(self, cfg: NodeConfig, nodes: list[NodeConfig], spool: Path) -> None:
        self.urls: list[str] = []
        self.net = PeerNetwork(cfg, nodes, CLUSTER, SECRET, spool, self.on_batch, **OPTIONS)

    async def on_batch(self, src: int, urls: list[str]) -> None:
        self.urls.extend(urls)


@pytest.fixture
async def networks():
    """Factory of started PeerNetworks; every one is closed at teardown."""
    started: list[PeerNetwork] = []

    async def start(net: PeerNetwork) -> PeerNetwork:
        await net.start()
        started.append(net)
        return net

    yield start
    for net in started:
        await net.close(timeout_s=CLOSE_TIMEOUT_S)


async def sink(src: int, urls: list[str]) -> None:
    """Node 0 receives nothing in these tests."""


async def test_silent_peer_does_not_block_the_sender_and_gets_everything_later(tmp_path, networks, caplog):
    caplog.set_level(logging.INFO, logger="crawler.peers")
    cfgs = node_configs()
    sent = [batch(i) for i in range(BATCHES)]
    send_s: list[float] = []
    async with silent_server(cfgs[1].host, cfgs[1].peer_port) as accepted:
        sender = await networks(PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path / "spool-0", sink, **OPTIONS))
        async with ticker() as tick:
            for urls in sent:
                t0 = time.monotonic()
                await asyncio.wait_for(sender.send(1, urls), WAIT_S)
                send_s.append(time.monotonic() - t0)
            await wait_until(lambda: sender.counts()["peers"][1]["spooled"] == BATCHES, "every batch spooled")
            await wait_until(lambda: sender.stats()["links"][1]["connect_failures"].get("handshake_timeout", 0) >= 2,
                             "two handshake timeouts")
            await asyncio.sleep(SILENT_PERIOD_S)          # live beside the silent peer a while longer
            link = sender.stats()["links"][1]
            ticks, worst_late_s, ticked_s = tick.ticks, tick.worst_late_s, time.monotonic() - tick.started
        connections = len(accepted)

    assert max(send_s) < SEND_BOUND_S, f"slowest send() {max(send_s):.3f} s"
    assert not sender.connected(1) and link["connects"] == 0
    assert link["queued"] == 0 and link["in_memory"] == 0 and link["spool_segments"] >= 1
    assert sorted((tmp_path / "spool-0" / "peer-1").glob("seg-*.spool")), "nothing on disk in the spool"
    assert link["batches_spilled"] == BATCHES and link["batches_acked"] == 0
    assert connections >= 2                               # it kept retrying the silent peer
    assert ticks >= ticked_s / (TICK_S + MAX_TICK_LATE_S) - 1, f"the loop ticked only {ticks} times in {ticked_s:.2f} s"
    assert worst_late_s < MAX_TICK_LATE_S, f"a tick came {worst_late_s:.3f} s late"
    timeouts = [r for r in caplog.records if "handshake_timeout" in r.getMessage() and "node 1" in r.getMessage()]
    assert timeouts and timeouts[0].levelno >= logging.WARNING, "the silent peer was not reported"
    assert len(timeouts) == 1, "one report per down period, not one per retry"

    receiver = Receiver(cfgs[1], cfgs, tmp_path / "spool-1")
    await networks(receiver.net)                          # the real node 1, on the same port
    await wait_until(lambda: sender.idle() and receiver.net.idle(), "the spool drained and ACKed")
    expected = [u for urls in sent for u in urls]
    assert set(receiver.urls) == set(expected)            # at least once: every URL arrives
    assert receiver.urls == expected                      # and here exactly once, in order
    counts = sender.counts()["peers"][1]
    assert counts["batches_acked"] == counts["batches_sent"] == receiver.net.counts()["batches_received_total"]
    assert sender.connected(1) and not sorted((tmp_path / "spool-0" / "peer-1").glob("seg-*.spool"))


async def test_close_beside_a_silent_peer_keeps_its_deadline_and_spools(tmp_path, networks):
    cfgs = node_configs()
    sent = [batch(i) for i in range(OPTIONS["queue_batches"])]   # fits in memory: nothing spilled before close
    async with silent_server(cfgs[1].host, cfgs[1].peer_port):
        sender = PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path / "spool-0", sink, **OPTIONS)
        await sender.start()
        for urls in sent:
            await asyncio.wait_for(sender.send(1, urls), SEND_BOUND_S)
        t0 = time.monotonic()
        await asyncio.wait_for(sender.close(timeout_s=CLOSE_TIMEOUT_S), CLOSE_TIMEOUT_S + CLOSE_SLACK_S)
        close_s = time.monotonic() - t0
    assert close_s < CLOSE_TIMEOUT_S + CLOSE_SLACK_S
    assert sender.stats()["links"][1]["lost_at_close"] == 0

    restarted = await networks(PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path / "spool-0", sink, **OPTIONS))
    assert restarted.counts()["peers"][1]["spooled"] == len(sent)   # close() left them in the spool
    receiver = Receiver(cfgs[1], cfgs, tmp_path / "spool-1")
    await networks(receiver.net)
    await wait_until(lambda: restarted.idle() and receiver.net.idle(), "the spool drained and ACKed")
    assert receiver.urls == [u for urls in sent for u in urls]

"""Throughput of one link between two PeerNetworks over loopback, batches of 1000 URLs of ~60 bytes.

Run with `-s` to see the figures; PEERS_BENCH_BATCHES scales the run and
PEERS_BENCH_LOOP=uvloop uses uvloop:

    PEERS_BENCH_BATCHES=5000 python -m pytest -q -s tests/integration/test_peers_throughput.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time

from tests.support.ports import free_port

from crawler.config.schema import NodeConfig
from crawler.peers import PeerNetwork

URLS_PER_BATCH = 1000
DISTINCT_BATCHES = 50
FLOOR_URLS_PER_S = 50_000        # far below what loopback does; only catches a gross regression
TIMEOUT_S = 120.0


def make_batches() -> list[list[str]]:
    return [[f"http://www.host{i % 97:02d}.example.com/path/to/page-{i:08d}-{j:04d}.html"
             for j in range(URLS_PER_BATCH)] for i in range(DISTINCT_BATCHES)]


async def measure(batch_count: int) -> dict:
    cfgs = [NodeConfig(id=0, host="127.0.0.1", peer_port=free_port("127.0.0.1")),
            NodeConfig(id=1, host="127.0.0.2", peer_port=free_port("127.0.0.2"))]
    received = [0]

    def on_batch(src: int, urls: list[str]) -> None:
        received[0] += len(urls)

    batches = make_batches()
    wire_bytes = sum(len(u) + 1 for u in batches[0])
    with tempfile.TemporaryDirectory() as spool:
        nets = [PeerNetwork(c, cfgs, "bench", b"bench-secret", os.path.join(spool, str(c.id)), on_batch)
                for c in cfgs]
        for net in nets:
            await net.start()
        try:
            end = time.monotonic() + TIMEOUT_S
            while not nets[0].connected(1):
                assert time.monotonic() < end
                await asyncio.sleep(0.01)
            t0 = time.perf_counter()
            for i in range(batch_count):
                await nets[0].send(1, batches[i % DISTINCT_BATCHES])
            while not nets[0].idle():
                assert time.monotonic() < end
                await asyncio.sleep(0.001)
            elapsed_s = time.perf_counter() - t0
        finally:
            for net in nets:
                await net.close(timeout_s=1)
    assert received[0] == batch_count * URLS_PER_BATCH
    return {"batches": batch_count, "urls": received[0], "seconds": elapsed_s,
            "urls_per_s": received[0] / elapsed_s, "mb_per_s": batch_count * wire_bytes / elapsed_s / 1e6,
            "url_bytes": wire_bytes / URLS_PER_BATCH - 1}


def test_loopback_throughput():
    batch_count = int(os.environ.get("PEERS_BENCH_BATCHES", "300"))
    if os.environ.get("PEERS_BENCH_LOOP") == "uvloop":
        import uvloop
        result = uvloop.run(measure(batch_count))
    else:
        result = asyncio.run(measure(batch_count))
    print(f"\npeers loopback: {result['batches']} batches x {URLS_PER_BATCH} URLs (~{result['url_bytes']:.0f} B) "
          f"in {result['seconds']:.2f} s: {result['urls_per_s']:,.0f} URLs/s, {result['mb_per_s']:.1f} MB/s")
    assert result["urls_per_s"] > FLOOR_URLS_PER_S

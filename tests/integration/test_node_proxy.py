"""A 2-node cluster where one node fetches through a proxy (`cluster.nodes[].proxy`) and the other directly.

Two sites on loopback addresses (IP-literal hosts: Debian's tinyproxy resolves
names with the system resolver, which knows no test names), chosen so that
each node owns one. Node 0 binds its fetches to 127.0.0.5; node 1 goes
through a real tinyproxy whose own connections leave from 127.0.0.3. Judged
from the sites' access log: every request to node 1's site came from the
proxy's address, every request to node 0's site from node 0's, and both
sites were crawled whole, each link across sites routed to its owner.
"""

from __future__ import annotations

import json
import time

import pytest
from aiohttp import web
from tests.support.configs import write_config
from tests.support.ports import free_port
from tests.support.processes import run_crawler
from tests.support.servers import TINYPROXY_OUT, Tinyproxy

from crawler.splitter import Partitioner

pytestmark = pytest.mark.slow
SECRET = {"TEST_CLUSTER_SECRET": "a-test-secret-of-some-length"}
PAGES = 6
NODE0_SOURCE = "127.0.0.5"


def site_hosts() -> tuple[str, str]:
    """Two loopback addresses, the first owned by node 0, the second by node 1 (modulo partition)."""
    part = Partitioner(2)
    candidates = [f"127.0.0.{i}" for i in range(10, 60)]
    first = next(h for h in candidates if part.owner(h) == 0)
    second = next(h for h in candidates if part.owner(h) == 1)
    return first, second


class Sites:
    """One aiohttp app on two loopback addresses, logging (host, path, peer) per request."""

    def __init__(self, hosts: tuple[str, str], port: int) -> None:
        self.hosts, self.port = hosts, port
        self.log: list[tuple[str, str, str]] = []
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        host = request.host.split(":")[0]
        self.log.append((host, request.path, request.remote or ""))
        if request.path == "/robots.txt":
            return web.Response(status=404)
        step = 0 if request.path == "/" else int(request.path.rsplit("/", 1)[1])
        other = self.hosts[1] if host == self.hosts[0] else self.hosts[0]
        links = f"<a href='http://{other}:{self.port}/'>other</a>"
        if step + 1 < PAGES:
            links += f"<a href='/p/{step + 1}'>next</a>"
        return web.Response(text=f"<html><body>{host} {step} {links}</body></html>", content_type="text/html")

    async def __aenter__(self) -> Sites:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        for host in self.hosts:
            await web.TCPSite(self._runner, host, self.port).start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._runner.cleanup()


async def test_one_node_through_a_proxy_the_other_direct(tmp_path):
    hosts, port = site_hosts(), free_port()
    with Tinyproxy(tmp_path) as proxy:
        async with Sites(hosts, port) as sites:
            config = write_config(tmp_path / "crawl.yaml", {
                "cluster": {"name": "proxy", "secret_env": "TEST_CLUSTER_SECRET", "nodes": [
                    {"id": 0, "peer_port": free_port(), "metrics_port": free_port(),
                     "source_address": NODE0_SOURCE},
                    {"id": 1, "peer_port": free_port(), "metrics_port": free_port(), "proxy": proxy.url}]},
                "crawl": {"seeds": [f"http://{hosts[0]}:{port}/"], "data_dir": str(tmp_path / "data" / "node-{node}")},
                "workers": 4,
                "fetch": {"allow_private_networks": True},
                "metrics": {"progress_interval_s": 0},
            })
            started = time.monotonic()
            code, out, err = await _run(config)
            assert code == 0, err[-3000:]
            log = list(sites.log)
        assert proxy.clients() >= 1
    summaries = [json.loads(line) for line in out if line.startswith("{")][:-1]
    assert sorted(s["node"] for s in summaries) == [0, 1] and time.monotonic() - started < 120
    pages = {h: sorted(p for host, p, _ in log if host == h and p != "/robots.txt") for h in hosts}
    want = sorted(["/"] + [f"/p/{i}" for i in range(1, PAGES)])
    assert pages == {hosts[0]: want, hosts[1]: want}
    peers = {h: {peer for host, _, peer in log if host == h} for h in hosts}
    assert peers == {hosts[0]: {NODE0_SOURCE}, hosts[1]: {TINYPROXY_OUT}}


async def _run(config) -> tuple[int, list[str], str]:
    import asyncio
    return await asyncio.to_thread(run_crawler, ["cluster", "-c", str(config), "--progress-interval", "0"],
                                   timeout_s=120, env=SECRET)

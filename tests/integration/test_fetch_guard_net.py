"""The private-network guard and source_address, against a real server that counts its connections."""

from __future__ import annotations

import asyncio
import socket

import pytest
from tests.support.fetching import Fetchers

from crawler.config.schema import DnsConfig, FetchConfig
from crawler.fetch import result as R
from crawler.fetch.fetcher import Fetcher

UA = "ExampleCrawler/1.0 (+https://example.org/crawler)"
SETTLE_S = 0.1                  # time for a connection that should not happen to show up


class CountingServer:
    """Answers every request with a tiny page naming the peer address; counts connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.peers: list[str] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        peer = writer.get_extra_info("peername")[0]
        self.peers.append(peer)
        try:
            while True:                               # keep-alive: answer until the client closes
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
                body = peer.encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))
                await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start(self, host: str = "127.0.0.1") -> None:
        self.server = await asyncio.start_server(self._handle, host, 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@pytest.fixture
async def counting_server():
    srv = CountingServer()
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@pytest.fixture
async def guarded():
    """A fetcher with the guard on and *.web.test / exact.test overridden to 127.0.0.1."""
    fetchers = Fetchers()

    async def factory(source_address: str | None = None, allow_private: bool = False) -> Fetcher:
        dns = DnsConfig(overrides={"*.web.test": "127.0.0.1", "exact.test": "127.0.0.1"},
                        nameservers=["127.0.0.1:9"], timeout_s=0.2, tries=1)
        config = FetchConfig(allow_private_networks=allow_private, connect_timeout_s=1.0,
                             read_timeout_s=2.0, total_timeout_s=5.0, dns=dns)
        return fetchers.make(config, source_address=source_address)

    yield factory
    await fetchers.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "[::ffff:127.0.0.1]", "[::1]", "0.0.0.0"])
async def test_private_literals_refused_without_connecting(counting_server, guarded, host):
    fetcher = await guarded()
    res = await fetcher.fetch(f"http://{host}:{counting_server.port}/")
    await asyncio.sleep(SETTLE_S)
    assert res.reason == R.PRIVATE_ADDRESS and res.status == 0 and res.ip is None
    assert counting_server.connections == 0


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/",
                                 "http://100.64.0.1/", "http://192.168.1.1:8080/", "http://[fe80::1]/",
                                 "http://[fc00::5]/", "http://224.0.0.1/"])
async def test_internal_targets_refused(guarded, url):
    fetcher = await guarded()
    res = await fetcher.fetch(url)
    assert res.reason == R.PRIVATE_ADDRESS and res.status == 0
    assert res.duration_s < 0.5                       # decided locally (the connect timeout is 1 s)


async def test_override_name_allowed_with_guard_on(counting_server, guarded):
    fetcher = await guarded()
    for host in ("site.web.test", "EXACT.test"):
        res = await fetcher.fetch(f"http://{host}:{counting_server.port}/")
        assert res.reason == R.OK and res.status == 200 and res.ip == "127.0.0.1"
    assert counting_server.connections == 2


async def test_allow_private_networks_lets_literals_through(counting_server, guarded):
    fetcher = await guarded(allow_private=True)
    res = await fetcher.fetch(f"http://127.0.0.1:{counting_server.port}/")
    assert res.reason == R.OK and res.body == b"127.0.0.1"


async def test_unresolvable_name_is_dns_failure_not_connection(counting_server, guarded):
    fetcher = await guarded()
    # Nothing answers DNS on 127.0.0.1:9: the lookup fails and nothing is connected.
    res = await fetcher.fetch(f"http://other.test:{counting_server.port}/")
    assert res.reason in (R.DNS_ERROR, R.DNS_NXDOMAIN) and res.status == 0
    assert counting_server.connections == 0


async def test_source_address_binds_client(counting_server, guarded):
    probe = socket.socket()
    try:
        probe.bind(("127.0.0.2", 0))
    except OSError:
        pytest.skip("127.0.0.2 cannot be bound on this machine")
    finally:
        probe.close()
    fetcher = await guarded(source_address="127.0.0.2")
    res = await fetcher.fetch(f"http://site.web.test:{counting_server.port}/")
    assert res.reason == R.OK and res.body == b"127.0.0.2"
    assert counting_server.peers == ["127.0.0.2"]

"""The fetcher through real proxies on loopback: Debian's tinyproxy (http://) and microsocks (socks5h://).

Each proxy binds its outgoing connections to an address of its own (tinyproxy
127.0.0.3, microsocks 127.0.0.4) while the fetcher connects from 127.0.0.1, so
the target server can tell that a request came through the proxy; the proxy's
log says so too. The private-network guard judges every target before anything
reaches the proxy: a name a real dnsmasq maps to 127.0.0.1 is refused as
private_address with no line in the proxy's log.

The proxies resolve target names with the system resolver, so the targets the
proxies do reach are 127.0.0.1 itself or `localhost` (given to the fetcher's
resolver as an override, which the guard trusts).
"""

from __future__ import annotations

import json
import socket
import ssl

import pytest
from aiohttp import web
from tests.support.fetching import Fetchers
from tests.support.ports import free_port
from tests.support.servers import MICROSOCKS_OUT, PROXY_CLIENT, TINYPROXY_OUT, Dnsmasq, Microsocks, Tinyproxy

from crawler.config import ConfigError
from crawler.config.schema import DnsConfig, FetchConfig, TlsConfig
from crawler.fetch import result as R
from crawler.fetch.dns import Resolver
from crawler.fetch.fetcher import Fetcher
from crawler.testweb import certs

UA = "ExampleCrawler/1.0 (+https://example.org/crawler)"


@pytest.fixture
def tinyproxy(tmp_path):
    proxy = Tinyproxy(tmp_path).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def microsocks(tmp_path):
    proxy = Microsocks(tmp_path).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA and a certificate for 127.0.0.1 and localhost (the names the proxies can reach)."""
    tmp = tmp_path_factory.mktemp("pki")
    ca = certs.CertAuthority()
    return ca.write_ca(tmp / "ca.pem"), certs.write(tmp, "target", ca.issue(["127.0.0.1", "localhost"]))


class Target:
    """An HTTP and an HTTPS aiohttp server on 127.0.0.1 recording each request's peer address and headers."""

    def __init__(self) -> None:
        self.seen: list[dict] = []
        self.runner: web.AppRunner | None = None
        self.http_port = self.https_port = 0

    async def handle(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peername")
        self.seen.append({"path": request.path, "peer": peer[0], "port": peer[1],
                          "headers": {k.lower(): v for k, v in request.headers.items()}})
        return web.json_response({"peer": list(peer)})

    async def start(self, server_ctx: ssl.SSLContext) -> Target:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self.runner.setup()
        plain = web.TCPSite(self.runner, "127.0.0.1", 0)
        secure = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=server_ctx)
        await plain.start()
        await secure.start()
        self.http_port = plain._server.sockets[0].getsockname()[1]
        self.https_port = secure._server.sockets[0].getsockname()[1]
        return self

    def url(self, https: bool, host: str = "127.0.0.1", path: str = "/") -> str:
        return f"https://{host}:{self.https_port}{path}" if https else f"http://{host}:{self.http_port}{path}"


@pytest.fixture
async def target(pki):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki[1].cert, pki[1].key)
    server = await Target().start(ctx)
    try:
        yield server
    finally:
        await server.runner.cleanup()


@pytest.fixture
async def make_fetcher(pki):
    fetchers = Fetchers()

    def factory(proxy: str | None, *, allow_private: bool = True, dns: DnsConfig | None = None,
                config_proxy: str | None = None, tls: TlsConfig | None = None, **overrides) -> Fetcher:
        config = FetchConfig(allow_private_networks=allow_private, connect_timeout_s=5.0, read_timeout_s=5.0,
                             total_timeout_s=10.0, proxy=config_proxy, tls=tls or TlsConfig(ca_file=str(pki[0])),
                             dns=dns or DnsConfig(), **overrides)
        return fetchers.make(config, proxy=proxy)

    yield factory
    await fetchers.close()


@pytest.mark.parametrize("https", [False, True], ids=["http", "https"])
async def test_through_tinyproxy(tinyproxy, target, make_fetcher, https):
    fetcher = make_fetcher(tinyproxy.url)
    res = await fetcher.fetch(target.url(https, path="/page"))
    assert (res.reason, res.status) == (R.OK, 200), res.detail
    assert json.loads(res.body)["peer"][0] == TINYPROXY_OUT
    assert [s["peer"] for s in target.seen] == [TINYPROXY_OUT]         # the target saw the proxy, not us
    assert res.ip == "127.0.0.1"                                         # the target's address, judged
    log = tinyproxy.log()
    if https:
        assert f"CONNECT 127.0.0.1:{target.https_port}" in log           # a tunnel; TLS runs inside it
    else:
        assert f"GET http://127.0.0.1:{target.http_port}/page" in log
        assert "tinyproxy" in target.seen[0]["headers"].get("via", "")


@pytest.mark.parametrize("https", [False, True], ids=["http", "https"])
async def test_through_microsocks(microsocks, target, make_fetcher, https):
    fetcher = make_fetcher(microsocks.url)
    res = await fetcher.fetch(target.url(https, path="/page"))
    assert (res.reason, res.status) == (R.OK, 200), res.detail
    assert [s["peer"] for s in target.seen] == [MICROSOCKS_OUT]
    port = target.https_port if https else target.http_port
    assert microsocks.connections() == [f"127.0.0.1:{port}"]


async def test_socks5h_sends_the_name_to_the_proxy(microsocks, target, make_fetcher):
    """socks5h: the proxy resolves the name (its log shows the name, not an address we resolved)."""
    fetcher = make_fetcher(microsocks.url, dns=DnsConfig(overrides={"localhost": "127.0.0.1"}))
    res = await fetcher.fetch(target.url(True, host="localhost"))
    assert res.reason == R.OK, res.detail
    assert microsocks.connections() == [f"localhost:{target.https_port}"]


@pytest.mark.parametrize("kind", ["tinyproxy", "microsocks"])
async def test_connections_through_the_proxy_are_kept_alive(tmp_path, target, make_fetcher, kind):
    proxy = (Tinyproxy(tmp_path) if kind == "tinyproxy" else Microsocks(tmp_path)).start()
    try:
        fetcher = make_fetcher(proxy.url)
        results = [await fetcher.fetch(target.url(True, path="/peer")) for _ in range(3)]
    finally:
        proxy.stop()
    assert [r.reason for r in results] == [R.OK] * 3
    assert len({s["port"] for s in target.seen}) == 1                  # one connection from the proxy
    assert results[0].connect_s is not None and results[1].connect_s is None and results[2].connect_s is None


@pytest.mark.parametrize("kind", ["tinyproxy", "microsocks"])
async def test_certificates_are_verified_end_to_end_through_the_proxy(tmp_path, target, make_fetcher, kind):
    """TLS runs between the fetcher and the target inside the tunnel: without the private CA the target's
    certificate is untrusted, whichever proxy carries it, and no request reaches the target."""
    proxy = (Tinyproxy(tmp_path) if kind == "tinyproxy" else Microsocks(tmp_path)).start()
    try:
        res = await make_fetcher(proxy.url, tls=TlsConfig()).fetch(target.url(True))
    finally:
        proxy.stop()
    assert res.reason == R.TLS_UNTRUSTED and res.status == 0, (res.reason, res.detail)
    assert target.seen == []


@pytest.fixture
def dnsmasq(tmp_path):
    with Dnsmasq(tmp_path, ["--address=/private.test/127.0.0.1", "--address=/proxy.test/127.0.0.1"]) as server:
        yield server


def localhost_is_127() -> None:
    try:
        first = socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)[0][4][0]
    except OSError as exc:
        first = str(exc)
    if first != "127.0.0.1":
        reason = f"the system resolves localhost to {first}, not 127.0.0.1 (the proxies resolve it so)"
        print(reason)
        pytest.skip(reason)


@pytest.mark.parametrize("kind", ["tinyproxy", "microsocks"])
async def test_guard_judges_targets_before_the_proxy(tmp_path, dnsmasq, target, make_fetcher, kind):
    """Guard on: a name resolving to 127.0.0.1 is refused before the proxy hears of it; the proxy itself (on
    loopback, and for tinyproxy given by a name dnsmasq maps to loopback) is trusted; NXDOMAIN keeps its reason."""
    localhost_is_127()
    proxy = (Tinyproxy(tmp_path) if kind == "tinyproxy" else Microsocks(tmp_path)).start()
    try:
        proxy_url = f"http://proxy.test:{proxy.port}" if kind == "tinyproxy" else proxy.url
        dns = DnsConfig(nameservers=[dnsmasq.nameserver], overrides={"localhost": "127.0.0.1"})
        fetcher = make_fetcher(proxy_url, allow_private=False, dns=dns)
        for https in (False, True):
            refused = await fetcher.fetch(target.url(https, host="private.test"))
            assert refused.reason == R.PRIVATE_ADDRESS and refused.status == 0, refused.detail
        missing = await fetcher.fetch(target.url(False, host="nx.test"))
        assert missing.reason == R.DNS_NXDOMAIN, missing.detail
        assert (proxy.clients() if kind == "tinyproxy" else len(proxy.connections())) == 0
        assert target.seen == []
        allowed = await fetcher.fetch(target.url(True, host="localhost"))   # an override: trusted
        assert allowed.reason == R.OK, allowed.detail
    finally:
        proxy.stop()
    assert len(target.seen) == 1 and target.seen[0]["peer"] in (TINYPROXY_OUT, MICROSOCKS_OUT)
    assert dnsmasq.queries("private.test") >= 1


@pytest.mark.parametrize("scheme", ["http", "socks5h"])
@pytest.mark.parametrize("https", [False, True], ids=["http", "https"])
async def test_dead_proxy_is_proxy_error(target, make_fetcher, scheme, https):
    port = free_port()                              # nothing listens there
    res = await make_fetcher(f"{scheme}://127.0.0.1:{port}").fetch(target.url(https))
    assert res.reason == R.PROXY_ERROR and res.status == 0, (res.reason, res.detail)
    assert str(port) in res.detail
    assert target.seen == []


async def test_connect_refused_by_the_proxy_is_proxy_error(tmp_path, target, make_fetcher):
    proxy = Tinyproxy(tmp_path, connect_ports=[443]).start()     # CONNECT only to 443, as many proxies do
    try:
        res = await make_fetcher(proxy.url).fetch(target.url(True))
    finally:
        proxy.stop()
    assert res.reason == R.PROXY_ERROR and "403" in res.detail, (res.reason, res.detail)
    assert target.seen == []


async def test_socks_error_is_proxy_error(microsocks, make_fetcher):
    port = free_port()                              # the proxy's connect to the target is refused
    res = await make_fetcher(microsocks.url).fetch(f"http://127.0.0.1:{port}/")
    assert res.reason == R.PROXY_ERROR and res.status == 0, (res.reason, res.detail)


async def test_http_proxy_error_page_for_a_plain_http_target_is_its_response(tinyproxy, make_fetcher):
    """Plain HTTP through a proxy has no tunnel: when the proxy cannot reach the target, its error page IS
    the response (tinyproxy: 500). The fetcher cannot tell it from the origin's own; documented."""
    port = free_port()
    res = await make_fetcher(tinyproxy.url).fetch(f"http://127.0.0.1:{port}/")
    assert (res.reason, res.status) == (R.OK, 500)
    assert b"Unable to connect" in res.body


async def test_node_proxy_overrides_fetch_proxy(tinyproxy, microsocks, target, make_fetcher):
    fetcher = make_fetcher(microsocks.url, config_proxy=tinyproxy.url)      # the node's own wins
    assert (await fetcher.fetch(target.url(False))).reason == R.OK
    fetcher = make_fetcher(None, config_proxy=tinyproxy.url)                # None: fetch.proxy
    assert (await fetcher.fetch(target.url(False))).reason == R.OK
    fetcher = make_fetcher("", config_proxy=tinyproxy.url)                  # "": no proxy for this node
    assert (await fetcher.fetch(target.url(False))).reason == R.OK
    assert [s["peer"] for s in target.seen] == [MICROSOCKS_OUT, TINYPROXY_OUT, PROXY_CLIENT]


@pytest.mark.parametrize("value, words", [
    ("ftp://127.0.0.1:21", "scheme 'ftp'"),
    ("socks5://127.0.0.1:1080", "use socks5h://"),
    ("https://127.0.0.1:3128", "scheme 'https'"),
    ("http://127.0.0.1", "a host and a port"),
    ("127.0.0.1:3128", "expected http://HOST:PORT"),
    ("http://user:secret@127.0.0.1:3128", "credentials"),
    ("http://127.0.0.1:3128/path", "no path"),
    ("http://127.0.0.1:99999", "expected http://HOST:PORT"),
])
@pytest.mark.parametrize("where", ["fetch", "node"])
def test_bad_proxy_urls_are_config_errors(value, words, where):
    config = FetchConfig(proxy=value if where == "fetch" else None)
    with pytest.raises(ConfigError) as err:
        Fetcher(config, Resolver(DnsConfig()), UA, proxy=value if where == "node" else None)
    key = "fetch.proxy" if where == "fetch" else "cluster.nodes[].proxy"
    assert str(err.value).startswith(key + ":") and words in str(err.value), str(err.value)


def test_good_proxy_urls_parse():
    for value in ("http://127.0.0.1:3128", "HTTP://Proxy.Example:8080/", "socks5h://[::1]:1080"):
        Fetcher(FetchConfig(), Resolver(DnsConfig()), UA, proxy=value)

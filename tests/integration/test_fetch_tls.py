"""The fetcher against real HTTPS servers on loopback: each bad certificate gives its own reason.

One aiohttp HTTPS server picks its certificate by SNI (crawler/testweb/certs.py):

    good.tls.test       issued by the run's CA             -> ok with fetch.tls.ca_file / ca_dir
    self.tls.test       self-signed                        -> tls_untrusted
    expired.tls.test    issued by the CA, validity past    -> tls_expired
    wrong.tls.test      issued by the CA for other.test    -> tls_hostname_mismatch

Names reach 127.0.0.1 through fetch.dns.overrides (trusted by the guard, which
stays on). Two more servers require a client certificate: aiohttp's, held to
TLS 1.2 where the refusal happens inside the handshake (asyncio's TLS server
closes without sending TLS 1.3's certificate_required alert, so a TLS 1.3
client could not tell the refusal from a dropped connection), and
`openssl s_server`, which sends that alert over TLS 1.3. The aiohttp servers
count the requests their handler sees: a certificate refused means nothing
was sent.
"""

from __future__ import annotations

import json
import logging
import ssl
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from tests.support.fetching import Fetchers
from tests.support.ports import free_port
from tests.support.processes import accepting, require_binary, stop_process

from crawler.config import ConfigError
from crawler.config.schema import DnsConfig, FetchConfig, TlsConfig
from crawler.fetch import result as R
from crawler.fetch import tls
from crawler.fetch.dns import Resolver
from crawler.fetch.fetcher import Fetcher
from crawler.testweb import certs

UA = "ExampleCrawler/1.0 (+https://example.org/crawler)"
PAGE = b"<html><body>secure</body></html>"
DOMAIN = "tls.test"
BAD = {
    "self": R.TLS_UNTRUSTED,
    "expired": R.TLS_EXPIRED,
    "wrong": R.TLS_HOSTNAME_MISMATCH,
}


def host(name: str) -> str:
    return f"{name}.{DOMAIN}"


class Pki:
    """The run's CA, the server certificates and a client certificate, on disk."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp
        self.ca = certs.CertAuthority()
        self.ca_file = self.ca.write_ca(tmp / "ca" / "ca.pem")
        self.server = {
            "good": certs.write(tmp, "good", self.ca.issue([host("good"), host("mtls")])),
            "self": certs.write(tmp, "self", certs.self_signed([host("self")])),
            "expired": certs.write(tmp, "expired", self.ca.issue([host("expired")], expired=True)),
            "wrong": certs.write(tmp, "wrong", self.ca.issue(["other.test"])),
        }
        self.client = certs.write(tmp, "client", self.ca.issue(["crawler"], client=True))
        self.other_client = certs.write(tmp, "other-client", self.ca.issue(["other"], client=True))

    def server_context(self, name: str) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        files = self.server[name]
        ctx.load_cert_chain(files.cert, files.key)
        return ctx


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def make_app(seen: Counter) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        seen[request.host.split(":")[0]] += 1
        peer = request.transport.get_extra_info("peername")
        if request.path == "/peer":
            return web.json_response({"peer": list(peer)})
        return web.Response(body=PAGE, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return app


async def start(app: web.Application, ctx: ssl.SSLContext) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


@pytest.fixture
async def sni_server(pki):
    """One port, a certificate per SNI name; yields (port, requests seen per host)."""
    by_name = {host(name): pki.server_context(name) for name in pki.server}
    default = pki.server_context("good")

    def pick(sslobj: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext) -> None:
        sslobj.context = by_name.get(server_name or "", default)

    default.sni_callback = pick
    seen: Counter = Counter()
    runner, port = await start(make_app(seen), default)
    try:
        yield port, seen
    finally:
        await runner.cleanup()


@pytest.fixture
async def mtls_server(pki):
    """A server that requires a client certificate issued by the run's CA (TLS 1.2: see the module doc)."""
    ctx = pki.server_context("good")
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cafile=pki.ca_file)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    seen: Counter = Counter()
    runner, port = await start(make_app(seen), ctx)
    try:
        yield port, seen
    finally:
        await runner.cleanup()


@pytest.fixture
async def make_fetcher():
    fetchers = Fetchers()

    def factory(**tls_options) -> Fetcher:
        return fetchers.make(FetchConfig(allow_private_networks=False, connect_timeout_s=5.0, read_timeout_s=5.0,
                                         total_timeout_s=10.0, tls=TlsConfig(**tls_options),
                                         dns=DnsConfig(overrides={f"*.{DOMAIN}": "127.0.0.1"})))

    yield factory
    await fetchers.close()


def url(name: str, port: int, path: str = "/") -> str:
    return f"https://{host(name)}:{port}{path}"


@pytest.mark.parametrize("name", sorted(BAD))
async def test_bad_certificate_has_its_reason_and_nothing_is_sent(pki, sni_server, make_fetcher, name):
    port, seen = sni_server
    fetcher = make_fetcher(ca_file=str(pki.ca_file))       # trusts the CA: only the defect itself fails
    res = await fetcher.fetch(url(name, port))
    assert res.reason == BAD[name], (res.reason, res.detail)
    assert res.status == 0 and res.body == b"" and "certificate verify failed" in res.detail
    assert seen[host(name)] == 0
    # The good name on the same server and port fetches: the reason belongs to the certificate.
    assert (await fetcher.fetch(url("good", port))).reason == R.OK
    assert seen == Counter({host("good"): 1})


async def test_detail_carries_the_librarys_words(pki, sni_server, make_fetcher):
    port, _ = sni_server
    fetcher = make_fetcher(ca_file=str(pki.ca_file))
    expired = await fetcher.fetch(url("expired", port))
    wrong = await fetcher.fetch(url("wrong", port))
    self_signed = await fetcher.fetch(url("self", port))
    assert "certificate has expired" in expired.detail
    assert "Hostname mismatch" in wrong.detail
    assert "self-signed certificate" in self_signed.detail or "self signed" in self_signed.detail


async def test_private_ca_by_file_and_by_directory(pki, sni_server, make_fetcher, tmp_path):
    port, seen = sni_server
    assert (await make_fetcher().fetch(url("good", port))).reason == R.TLS_UNTRUSTED      # system trust only
    res = await make_fetcher(ca_file=str(pki.ca_file)).fetch(url("good", port))
    assert (res.reason, res.status, res.body) == (R.OK, 200, PAGE)
    openssl = require_binary("openssl", "openssl")
    ca_dir = tmp_path / "cas"
    ca_dir.mkdir()
    (ca_dir / "test-ca.pem").write_bytes(pki.ca.ca_pem)
    subprocess.run([openssl, "rehash", str(ca_dir)], check=True, capture_output=True)
    assert any(p.is_symlink() for p in ca_dir.iterdir())
    res = await make_fetcher(ca_dir=str(ca_dir)).fetch(url("good", port))
    assert (res.reason, res.body) == (R.OK, PAGE)
    assert seen == Counter({host("good"): 2})


def test_private_ca_is_added_to_the_system_store(pki):
    """ca_file adds to the system's CAs, never replaces them (the public web stays trusted)."""
    system = ssl.create_default_context().cert_store_stats()["x509_ca"]
    ctx = tls.make_context(TlsConfig(ca_file=str(pki.ca_file)))
    assert ctx.cert_store_stats()["x509_ca"] == system + 1
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


async def test_verify_false_accepts_every_certificate(sni_server, make_fetcher, caplog):
    port, seen = sni_server
    with caplog.at_level(logging.WARNING, logger="crawler.fetch.fetcher"):
        fetcher = make_fetcher(verify=False)
    warnings = [r for r in caplog.records if "NOT verified" in r.getMessage()]
    assert len(warnings) == 1
    for name in ("good", *BAD):
        res = await fetcher.fetch(url(name, port))
        assert (res.reason, res.body) == (R.OK, PAGE), (name, res.detail)
    assert seen == Counter({host(name): 1 for name in ("good", *BAD)})
    assert len([r for r in caplog.records if "NOT verified" in r.getMessage()]) == 1   # once, at start


async def test_client_certificate(pki, mtls_server, make_fetcher):
    port, seen = mtls_server
    without = await make_fetcher(ca_file=str(pki.ca_file)).fetch(url("mtls", port))
    assert without.reason == R.TLS_HANDSHAKE and without.status == 0, (without.reason, without.detail)
    assert seen[host("mtls")] == 0
    fetcher = make_fetcher(ca_file=str(pki.ca_file), client_cert_file=str(pki.client.cert),
                           client_key_file=str(pki.client.key))
    res = await fetcher.fetch(url("mtls", port))
    assert (res.reason, res.body) == (R.OK, PAGE), res.detail
    assert seen[host("mtls")] == 1


@pytest.fixture
def openssl_mtls_server(pki, tmp_path):
    """`openssl s_server` over TLS 1.3 requiring a client certificate; yields its port."""
    openssl = require_binary("openssl", "openssl")
    port = free_port()
    files = pki.server["good"]
    proc = subprocess.Popen([openssl, "s_server", "-accept", f"127.0.0.1:{port}", "-cert", str(files.cert),
                             "-key", str(files.key), "-CAfile", str(pki.ca_file), "-Verify", "1",
                             "-tls1_3", "-www", "-quiet"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not accepting(proc, port):
            pytest.fail("openssl s_server did not start")
        yield port
    finally:
        stop_process(proc)


async def test_client_certificate_refused_by_a_tls13_alert(pki, openssl_mtls_server, make_fetcher):
    port = openssl_mtls_server
    without = await make_fetcher(ca_file=str(pki.ca_file)).fetch(url("mtls", port))
    assert without.reason == R.TLS_HANDSHAKE and without.status == 0, (without.reason, without.detail)
    assert "certificate required" in without.detail
    fetcher = make_fetcher(ca_file=str(pki.ca_file), client_cert_file=str(pki.client.cert),
                           client_key_file=str(pki.client.key))
    res = await fetcher.fetch(url("mtls", port))
    assert (res.reason, res.status) == (R.OK, 200), res.detail
    assert b"TLSv1.3" in res.body                      # s_server -www reports the session it served


async def test_client_certificate_and_key_in_one_file(pki, mtls_server, make_fetcher, tmp_path):
    port, _ = mtls_server
    both = tmp_path / "both.pem"
    both.write_bytes(pki.client.cert.read_bytes() + pki.client.key.read_bytes())
    res = await make_fetcher(ca_file=str(pki.ca_file), client_cert_file=str(both)).fetch(url("mtls", port))
    assert res.reason == R.OK, res.detail


async def test_connections_are_kept_alive(pki, sni_server, make_fetcher):
    port, _ = sni_server
    fetcher = make_fetcher(ca_file=str(pki.ca_file))
    results = [await fetcher.fetch(url("good", port, "/peer")) for _ in range(3)]
    assert [r.reason for r in results] == [R.OK] * 3
    assert len({json.loads(r.body)["peer"][1] for r in results}) == 1                 # one client port
    assert results[0].connect_s is not None and results[1].connect_s is None and results[2].connect_s is None


async def test_https_to_a_plain_http_server_is_tls_handshake(make_fetcher):
    seen: Counter = Counter()
    runner = web.AppRunner(make_app(seen), shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        res = await make_fetcher().fetch(url("good", port))
    finally:
        await runner.cleanup()
    assert res.reason == R.TLS_HANDSHAKE and res.status == 0, (res.reason, res.detail)


# --- bad settings stop the fetcher at construction, naming the key ----------------------------

def encrypted_key(pki: Pki, path: Path) -> Path:
    key = serialization.load_pem_private_key(pki.client.key.read_bytes(), None)
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.BestAvailableEncryption(b"secret")))
    return path


@pytest.mark.parametrize("case, key", [
    ("missing ca_file", "fetch.tls.ca_file"),
    ("junk ca_file", "fetch.tls.ca_file"),
    ("missing ca_dir", "fetch.tls.ca_dir"),
    ("unhashed ca_dir", "fetch.tls.ca_dir"),
    ("missing client cert", "fetch.tls.client_cert_file"),
    ("junk client cert", "fetch.tls.client_cert_file"),
    ("cert without key", "fetch.tls.client_cert_file"),
    ("key of another cert", "fetch.tls.client_key_file"),
    ("junk key", "fetch.tls.client_key_file"),
    ("encrypted key", "fetch.tls.client_key_file"),
    ("key without cert", "fetch.tls.client_key_file"),
])
def test_bad_tls_settings_are_config_errors(pki, tmp_path, case, key):
    junk = tmp_path / "junk.pem"
    junk.write_bytes(b"not a certificate\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "ca.pem").write_bytes(pki.ca.ca_pem)          # present, but no hashed name
    client = {"client_cert_file": str(pki.client.cert), "client_key_file": str(pki.client.key)}
    options = {
        "missing ca_file": {"ca_file": str(tmp_path / "nope.pem")},
        "junk ca_file": {"ca_file": str(junk)},
        "missing ca_dir": {"ca_dir": str(tmp_path / "nope")},
        "unhashed ca_dir": {"ca_dir": str(tmp_path / "empty")},
        "missing client cert": {**client, "client_cert_file": str(tmp_path / "nope.crt")},
        "junk client cert": {**client, "client_cert_file": str(junk)},
        "cert without key": {"client_cert_file": str(pki.client.cert)},
        "key of another cert": {**client, "client_key_file": str(pki.other_client.key)},
        "junk key": {**client, "client_key_file": str(junk)},
        "encrypted key": {**client, "client_key_file": str(encrypted_key(pki, tmp_path / "enc.key"))},
        "key without cert": {"client_key_file": str(pki.client.key)},
    }[case]
    with pytest.raises(ConfigError) as err:
        Fetcher(FetchConfig(tls=TlsConfig(**options)), Resolver(DnsConfig()), UA)
    assert str(err.value).startswith(key + ":"), str(err.value)

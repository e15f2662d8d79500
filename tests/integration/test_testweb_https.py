"""The test web over real HTTPS: the aiohttp server's TLS port, the CLI as a child process, nginx.

Clients are real: aiohttp with an ssl context trusting the run's CA, and plain `ssl`-module
sockets for the bad-certificate hosts. Everything runs on free loopback ports; every server and
process started here is stopped by this module (the CLI child and nginx by their PIDs).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import ssl
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
from cryptography import x509
from tests.support.ports import free_port
from tests.support.processes import require_binary
from tests.support.servers import Nginx

from crawler.testweb import audit
from crawler.testweb.build import build_web
from crawler.testweb.manifest import REFUSAL_REASONS, CrawlRules, expected_crawl
from crawler.testweb.model import TLS_BAD_ROLES, Role, Tls, WebParams
from crawler.testweb.pages import Renderer
from crawler.testweb.process import TestWebProcess
from crawler.testweb.reference import extract_links, http_fetch, reference_crawl
from crawler.testweb.server import TestWebServer
from crawler.testweb.static import prepare_nginx
from crawler.testweb.tls import WRONG_NAME, client_context, verify_reason

UA = "TestwebHttps/1.0 (+https://example.org/test)"
WAIT_S = 5.0
CONNECT_TIMEOUT_S = 2.0
PARAMS = WebParams(hosts=10, pages=200, seed=31, slow_host=False, bad_host=False,
                   https_share=0.3, https_redirect_share=0.3, tls_bad_hosts=True)


@pytest.fixture(scope="module")
def web():
    return build_web(PARAMS)


@pytest.fixture
async def server(web, tmp_path):
    srv = TestWebServer(web, tmp_path / "access.log.jsonl")
    await srv.start("127.0.0.1", 0)
    try:
        yield srv
    finally:
        await srv.stop()


@pytest.fixture
async def session():
    async with aiohttp.ClientSession(auto_decompress=False, headers={"User-Agent": UA}) as s:
        yield s


def _hosts(web, tls):
    return [h for h in web.hosts if h.role is Role.ORDINARY and h.tls is tls]


def _get(session, server, host, path, scheme, ctx=None):
    """GET scheme://host:port/path, connected to 127.0.0.1 (SNI and verification for the host name)."""
    if scheme == "https":
        return session.get(f"https://127.0.0.1:{server.tls_port}{path}", headers={"Host": f"{host}:{server.tls_port}"},
                           ssl=ctx, server_hostname=host, allow_redirects=False)
    return session.get(f"http://127.0.0.1:{server.port}{path}", headers={"Host": f"{host}:{server.port}"},
                       allow_redirects=False)


def _handshake(port: int, name: str, ctx: ssl.SSLContext) -> tuple[str, bytes]:
    """TLS handshake with 127.0.0.1:port as `name` (blocking): ("ok" or the failure's reason, peer cert DER)."""
    with socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S) as sock:
        try:
            with ctx.wrap_socket(sock, server_hostname=name) as tls:
                return "ok", tls.getpeercert(binary_form=True)
        except ssl.SSLCertVerificationError as e:
            return verify_reason(e), b""


def _no_verify() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def _settled(path: Path, count: int, timeout_s: float = WAIT_S) -> list[audit.Request]:
    """The access log once it holds `count` lines (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        requests = audit.read_access_log(path)
        if len(requests) >= count or time.monotonic() > deadline:
            return requests
        await asyncio.sleep(0.05)


async def test_bad_certificates_fail_verification_each_for_its_reason(server, web):
    """A verifying client refuses each bad host for its own reason, and the server logs nothing for them;
    the certificate each presents is the one its reason names."""
    ctx = client_context(server.ca_file)
    for role in TLS_BAD_ROLES:
        name = web.special(role).name
        reason, _ = await asyncio.to_thread(_handshake, server.tls_port, name, ctx)
        assert reason == REFUSAL_REASONS[role], (name, reason)
    for host in (*_hosts(web, Tls.ONLY)[:1], *_hosts(web, Tls.REDIRECT)[:1], *_hosts(web, Tls.NONE)[:1]):
        assert (await asyncio.to_thread(_handshake, server.tls_port, host.name, ctx))[0] == "ok", host.name
    await asyncio.sleep(0.1)
    assert audit.read_access_log(server.access_log_path) == []   # a failed handshake sends no request
    # What each presents (read without verification).
    now = dt.datetime.now(dt.UTC)
    certs = {}
    for role in TLS_BAD_ROLES:
        _, der = await asyncio.to_thread(_handshake, server.tls_port, web.special(role).name, _no_verify())
        certs[role] = x509.load_der_x509_certificate(der)
    assert certs[Role.TLS_SELF_SIGNED].issuer == certs[Role.TLS_SELF_SIGNED].subject
    assert certs[Role.TLS_EXPIRED].not_valid_after_utc < now
    san = certs[Role.TLS_WRONG_NAME].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [WRONG_NAME]


async def test_without_verification_the_bad_hosts_serve_pages(server, web, session):
    """A crawler with fetch.tls.verify off reaches the bad hosts' pages over HTTPS (and only HTTPS)."""
    renderer = Renderer(web)
    for role in TLS_BAD_ROLES:
        name = web.special(role).name
        async with _get(session, server, name, "/", "https", _no_verify()) as resp:
            page = renderer.page(web.lookup(web.special(role).index, "/"), server.port, server.tls_port)
            assert resp.status == 200 and await resp.read() == page
        async with _get(session, server, name, "/", "http") as resp:
            assert resp.status == 421
    requests = await _settled(server.access_log_path, 2 * len(TLS_BAD_ROLES))
    assert {(r.scheme, r.status) for r in requests} == {("https", 200), ("http", 421)}


async def test_redirects_lead_where_the_manifest_says(server, web, session):
    manifest = expected_crawl(web, server.port, CrawlRules(), tls_port=server.tls_port)
    ctx = client_context(server.ca_file)
    twins = [u for u, s in manifest.statuses.items() if s == 301 and u.startswith("http://")
             and web.host_named(u.split("//")[1].split(":")[0]).tls is Tls.REDIRECT]
    assert twins
    for host in _hosts(web, Tls.REDIRECT):
        async with _get(session, server, host.name, "/robots.txt", "http") as resp:
            assert resp.status == 301
            assert resp.headers["Location"] == f"https://{host.name}:{server.tls_port}/robots.txt"
        async with _get(session, server, host.name, "/robots.txt", "https", ctx) as resp:
            assert resp.status == 200 and b"user-agent: *" in (await resp.read()).lower()
    for url in twins[:20]:
        host, path = url.split("//")[1].split(":")[0], "/" + url.split("/", 3)[3]
        async with _get(session, server, host, path, "http") as resp:
            location = resp.headers["Location"]
            assert resp.status == 301 and location in manifest.fetched | manifest.disallowed
        async with _get(session, server, host, path, "https", ctx) as resp:
            assert resp.status == manifest.statuses.get(location, resp.status)
            assert resp.status in (200, 301, 302, 404)
    # An HTTPS-only host has no HTTP content, a plain host no HTTPS content.
    only, plain = _hosts(web, Tls.ONLY)[0], _hosts(web, Tls.NONE)[0]
    async with _get(session, server, only.name, "/", "http") as resp:
        assert resp.status == 421 and b"<a " not in await resp.read()
    async with _get(session, server, plain.name, "/", "https", ctx) as resp:
        assert resp.status == 421


async def test_pages_carry_the_ports_of_their_schemes(server, web, session):
    """Links in an https:// page name the TLS port for https:// URLs and the HTTP port for http:// ones."""
    ctx = client_context(server.ca_file)
    only = _hosts(web, Tls.ONLY)[0]
    uid = web.lookup(only.index, "/")
    async with _get(session, server, only.name, "/", "https", ctx) as resp:
        body = await resp.read()
    assert body == Renderer(web).page(uid, server.port, server.tls_port)
    links = [urlsplit(u) for u in extract_links(body, f"https://{only.name}:{server.tls_port}/", True)]
    schemes = {u.scheme for u in links if u.hostname.endswith(".web.test")}
    assert schemes == {"http", "https"}, schemes
    for u in links:
        if u.hostname.endswith(".web.test"):
            assert u.port == (server.tls_port if u.scheme == "https" else server.port), u.geturl()


async def test_access_log_records_the_scheme(server, web, session):
    redirect = _hosts(web, Tls.REDIRECT)[0]
    async with _get(session, server, redirect.name, "/", "http") as resp:
        assert resp.status == 301
    async with _get(session, server, redirect.name, "/", "https", client_context(server.ca_file)) as resp:
        assert resp.status == 200
    requests = await _settled(server.access_log_path, 2)
    assert [(r.host, r.scheme, r.path, r.status) for r in requests] == [
        (redirect.name, "http", "/", 301), (redirect.name, "https", "/", 200)]
    assert set(audit.requested_urls(requests, server.port, server.tls_port)) == {
        f"http://{redirect.name}:{server.port}/", f"https://{redirect.name}:{server.tls_port}/"}
    # One host name, two schemes: one host for politeness (the two requests did not overlap).
    assert list(audit.by_host(requests)) == [redirect.name] and not audit.overlaps(requests)


@pytest.mark.slow
async def test_reference_crawl_over_https_requests_exactly_the_manifest(server, web, session):
    """A sequential crawler over real HTTP and HTTPS (certificates verified) requests exactly the manifest:
    each bad host refused for its reason with no request logged, robots.txt once per origin."""
    manifest = expected_crawl(web, server.port, CrawlRules(), tls_port=server.tls_port)
    fetch = http_fetch(session, server.port, tls_port=server.tls_port, ssl_context=client_context(server.ca_file),
                       timeout_s=1.0)
    res = await reference_crawl(fetch, manifest.seeds, manifest.rules, host_gap_s=0.01)
    assert set(res.fetched) == manifest.fetched and len(res.fetched) == len(set(res.fetched))
    assert Counter(res.robots) == {u: manifest.requests_of(u) for u in manifest.robots}
    assert res.refusals == manifest.refusals
    assert res.statuses == manifest.statuses
    requests = await _settled(server.access_log_path, manifest.requests)
    cmp = audit.compare(requests, manifest)
    assert cmp.ok, (sorted(cmp.missing)[:5], sorted(cmp.unexpected)[:5], cmp.duplicates)
    assert not audit.overlaps(requests) and len(requests) == manifest.requests
    bad = {web.special(role).name for role in TLS_BAD_ROLES}
    assert not [r for r in requests if r.host in bad]
    assert {r.scheme for r in requests} == {"http", "https"}


@pytest.mark.slow
async def test_cli_serves_https_and_writes_the_ca(tmp_path):
    """`crawler testweb` with HTTPS: the ready line names the TLS port and the CA file in --out."""
    args = ["--hosts", "8", "--pages", "120", "--seed", "3", "--no-bad-host", "--no-slow-host",
            "--https-share", "0.25", "--https-redirect-share", "0.25", "--tls-bad-hosts"]
    proc = TestWebProcess(tmp_path / "tw", args)
    info = proc.start()
    try:
        assert info["tls_port"] > 0 and info["tls_port"] != info["port"]
        assert info["ca_file"] == str(tmp_path / "tw" / "ca.crt")
        manifest = proc.manifest()
        assert manifest.tls_port == info["tls_port"]
        seed = manifest.seeds[0]
        async with aiohttp.ClientSession(auto_decompress=False) as s:
            res = await reference_crawl(http_fetch(s, info["port"], tls_port=info["tls_port"],
                                                   ssl_context=client_context(info["ca_file"]), timeout_s=1.0),
                                        manifest.seeds, manifest.rules, host_gap_s=0.01)
    finally:
        code = proc.stop()
    assert code == 0 and seed.endswith("/")
    assert set(res.fetched) == manifest.fetched and res.refusals == manifest.refusals
    cmp = audit.compare(proc.requests(), manifest)
    assert cmp.ok, (sorted(cmp.missing)[:5], sorted(cmp.unexpected)[:5], cmp.duplicates)
    assert "fetch.tls.ca_file" in (tmp_path / "tw" / "testweb.stderr.log").read_text()


async def test_nginx_serves_the_https_export(tmp_path):
    """The static export under a real nginx: the same certificates, redirects and refusals over HTTPS."""
    nginx = require_binary("nginx", "nginx")
    web = build_web(WebParams(hosts=8, pages=160, seed=4, **{k: getattr(PARAMS, k) for k in
                                                             ("https_share", "https_redirect_share", "tls_bad_hosts")}))
    port = free_port()
    tls_port = free_port()
    while tls_port == port:
        tls_port = free_port()
    site = prepare_nginx(web, tmp_path / "root", tmp_path / "logs", port, tls_port=tls_port, nginx=nginx)
    ctx = client_context(site.ca_file)
    with Nginx(site.command, port):
        for role in TLS_BAD_ROLES:
            reason, _ = await asyncio.to_thread(_handshake, tls_port, web.special(role).name, ctx)
            assert reason == REFUSAL_REASONS[role]
        async with aiohttp.ClientSession(auto_decompress=False) as s:
            redirect = _hosts(web, Tls.REDIRECT)[0]
            async with s.get(f"http://127.0.0.1:{port}/robots.txt", headers={"Host": redirect.name},
                             allow_redirects=False) as resp:
                assert resp.status == 301
                assert resp.headers["Location"] == f"https://{redirect.name}:{tls_port}/robots.txt"
            res = await reference_crawl(http_fetch(s, port, tls_port=tls_port, ssl_context=ctx), site.manifest.seeds,
                                        site.manifest.rules, host_gap_s=0.01)
    manifest = site.manifest
    assert set(res.fetched) == manifest.fetched
    assert Counter(res.robots) == {u: manifest.requests_of(u) for u in manifest.robots}
    assert res.refusals == manifest.refusals and res.statuses == manifest.statuses
    requests = [r for r in audit.read_access_log(site.access_log) if r.ua.startswith("ExampleCrawler")]
    cmp = audit.compare(requests, manifest)
    assert cmp.ok, (sorted(cmp.missing)[:5], sorted(cmp.unexpected)[:5], cmp.duplicates)
    assert {r.scheme for r in requests} == {"http", "https"} and not audit.overlaps(requests)

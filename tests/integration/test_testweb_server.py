"""The test web served for real: aiohttp server in-process, the CLI as a child process, nginx.

Everything runs on free loopback ports; every server and process started here is stopped by
this module (the CLI child and nginx by their PIDs).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
import zlib
from pathlib import Path

import aiohttp
import pytest
from tests.support.ports import free_port
from tests.support.processes import accepting, find_binary

from crawler.testweb import audit
from crawler.testweb.build import build_web
from crawler.testweb.manifest import CrawlRules, WebManifest, expected_crawl
from crawler.testweb.model import CASE_PATHS, Case, Kind, Role, WebParams
from crawler.testweb.pages import Renderer
from crawler.testweb.process import TestWebProcess
from crawler.testweb.reference import http_fetch, reference_crawl
from crawler.testweb.server import TestWebServer
from crawler.testweb.static import export_static, nginx_command, nginx_conf

UA = "TestwebIntegration/1.0 (+https://example.org/test)"
WAIT_S = 5.0


@pytest.fixture(scope="module")
def web():
    return build_web(WebParams(hosts=8, pages=160, seed=21, stall_s=30.0, endless_max_s=30.0))


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


def _get(session, server, host, path, **kw):
    return session.get(f"http://127.0.0.1:{server.port}{path}", headers={"Host": f"{host}:{server.port}"},
                       allow_redirects=False, **kw)


async def _log_line(path: Path, url_path: str, timeout_s: float = WAIT_S) -> audit.Request:
    """The access-log record of `url_path`, waiting (bounded) for it to be written."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for r in audit.read_access_log(path):
            if r.path == url_path:
                return r
        await asyncio.sleep(0.05)
    raise AssertionError(f"no access log line for {url_path} within {timeout_s} s")


async def test_virtual_hosts_share_one_port(server, session, web):
    bodies = {}
    for name in ("h000.web.test", "h001.web.test"):
        async with _get(session, server, name, "/") as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"] == "text/html; charset=utf-8"
            bodies[name] = await resp.read()
    assert bodies["h000.web.test"] != bodies["h001.web.test"]
    assert f":{server.port}/".encode() in bodies["h000.web.test"]
    assert bodies["h000.web.test"] == Renderer(web).page(web.seed_ids[0], server.port)
    async with _get(session, server, "unknown.example", "/") as resp:
        assert resp.status == 404 and b"<a " not in await resp.read()
    async with _get(session, server, "h000.web.test", "/no/such/page.html") as resp:
        assert resp.status == 404 and b"<a " not in await resp.read()


async def test_robots_variants(server, session, web):
    ordinary = web.hosts[0]
    async with _get(session, server, ordinary.name, "/robots.txt") as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    assert "User-agent: *" in text or "user-agent: *" in text
    async with _get(session, server, "norobots.web.test", "/robots.txt") as resp:
        assert resp.status == 404
    async with _get(session, server, "robots500.web.test", "/robots.txt") as resp:
        assert resp.status == 500


async def test_redirects_answer_with_location(server, session, web):
    r = Renderer(web)
    seen = 0
    for uid, red in list(web.redirects.items())[:6]:
        host = web.hosts[int(web.url_host[uid])]
        async with _get(session, server, host.name, web.url_path[uid]) as resp:
            assert resp.status == red.status
            assert resp.headers["Location"] == r.location(uid, server.port)
            seen += 1
    assert seen
    async with _get(session, server, "bad.web.test", "/loop/a") as resp:
        assert resp.status == 302 and resp.headers["Location"] == "/loop/b"


async def test_images_css_and_percent_escapes(server, session, web):
    img = next(u for u in range(web.urls) if web.url_kind[u] == Kind.IMAGE)
    host = web.hosts[int(web.url_host[img])]
    async with _get(session, server, host.name, web.url_path[img]) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == "image/png"
        assert (await resp.read()).startswith(b"\x89PNG")
    async with _get(session, server, host.name, "/static/site.css") as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/css")
    tilde = next((u for u, p in enumerate(web.url_path) if "~" in p), None)
    if tilde is not None:
        host = web.hosts[int(web.url_host[tilde])]
        async with _get(session, server, host.name, web.url_path[tilde].replace("~", "%7E")) as resp:
            assert resp.status == 200


async def test_gzip_bomb_headers(server, session):
    async with _get(session, server, "bad.web.test", CASE_PATHS[Case.GZIP_BOMB]) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Encoding"] == "gzip"
        length = int(resp.headers["Content-Length"])
        assert length < 2 << 20
        raw = await resp.read()
    assert len(raw) == length and raw[:2] == b"\x1f\x8b"
    assert int.from_bytes(raw[-4:], "little") == (1 << 30) & 0xFFFFFFFF  # ISIZE: 1 GiB inflated
    assert zlib.decompressobj(31).decompress(raw[:65536], 1 << 20) == bytes(1 << 20)


async def test_stall_ends_when_the_client_goes_away(server, session):
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        async with _get(session, server, "bad.web.test", CASE_PATHS[Case.STALL],
                        timeout=aiohttp.ClientTimeout(sock_read=0.5)) as resp:
            assert int(resp.headers["Content-Length"]) > 0
            await resp.read()
    rec = await _log_line(server.access_log_path, CASE_PATHS[Case.STALL])
    assert time.monotonic() - started < WAIT_S  # stall_s is 30 s: the server noticed the client leave
    assert rec.end - rec.start < WAIT_S and 0 < rec.bytes < int(resp.headers["Content-Length"])


async def test_endless_and_too_large_bodies_end_when_the_client_goes_away(server, session, web):
    async with _get(session, server, "bad.web.test", CASE_PATHS[Case.ENDLESS]) as resp:
        assert "Content-Length" not in resp.headers
        got = 0
        while got < 1 << 20:
            got += len(await resp.content.read(65536))
        resp.close()
    rec = await _log_line(server.access_log_path, CASE_PATHS[Case.ENDLESS])
    assert 1 << 20 <= rec.bytes < web.params.endless_max_bytes
    async with _get(session, server, "bad.web.test", CASE_PATHS[Case.TOO_LARGE]) as resp:
        assert int(resp.headers["Content-Length"]) == web.params.big_body_bytes
        await resp.content.read(65536)
        resp.close()
    rec = await _log_line(server.access_log_path, CASE_PATHS[Case.TOO_LARGE])
    assert rec.bytes < web.params.big_body_bytes


async def test_stop_ends_a_stalled_response(web, tmp_path):
    srv = TestWebServer(web, tmp_path / "log.jsonl")
    await srv.start()
    async with aiohttp.ClientSession() as s:
        task = asyncio.ensure_future(s.get(f"http://127.0.0.1:{srv.port}{CASE_PATHS[Case.STALL]}",
                                           headers={"Host": "bad.web.test"}))
        await _log_line_absent_then_started(srv)
        t = time.monotonic()
        await srv.stop()
        assert time.monotonic() - t < WAIT_S
        try:
            resp = await asyncio.wait_for(task, WAIT_S)
            with pytest.raises((aiohttp.ClientError, asyncio.TimeoutError)):
                await asyncio.wait_for(resp.read(), WAIT_S)
            resp.release()
        except aiohttp.ClientError:
            pass
    rec = audit.read_access_log(tmp_path / "log.jsonl")
    assert [r.path for r in rec] == [CASE_PATHS[Case.STALL]]


async def _log_line_absent_then_started(srv: TestWebServer) -> None:
    """Wait until the server has begun answering its first request."""
    deadline = time.monotonic() + WAIT_S
    while srv.requests == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)


async def test_access_log_records_every_request(server, session):
    paths = ["/", "/robots.txt", "/no-such.html"]
    for p in paths:
        async with _get(session, server, "h002.web.test", p) as resp:
            await resp.read()
    recs = [r for r in audit.read_access_log(server.access_log_path) if r.host == "h002.web.test"]
    assert [r.path for r in recs] == paths
    assert [r.status for r in recs] == [200, 200, 404]
    for r in recs:
        assert r.start <= r.end and r.end - r.start < 1.0 and abs(r.end - time.time()) < 60
        assert r.peer == "127.0.0.1" and r.ua == UA and r.method == "GET" and r.bytes > 0
    assert not audit.overlaps(recs)


async def test_slow_host_is_slow(server, session, web):
    t = time.monotonic()
    async with _get(session, server, "slow.web.test", "/") as resp:
        assert resp.status == 200
    assert time.monotonic() - t >= web.params.slow_delay_s * 0.9
    rec = await _log_line(server.access_log_path, "/")
    assert rec.host == "slow.web.test" and rec.end - rec.start >= web.params.slow_delay_s * 0.9


@pytest.mark.slow
async def test_cli_process_serves_what_its_manifest_says(tmp_path):
    """`python -m crawler.testweb` as a child: a sequential reference crawl requests exactly the manifest."""
    args = ["--hosts", "12", "--pages", "240", "--seed", "5", "--stall-s", "10", "--endless-max-s", "10",
            "--slow-delay-s", "0.2", "--max-path-depth", "10"]
    proc = TestWebProcess(tmp_path / "tw", args)
    info = proc.start()
    try:
        assert info["pid"] == proc.proc.pid and info["port"] > 0
        manifest = proc.manifest()
        assert manifest.rules.max_path_depth == 10 and manifest.port == info["port"]
        assert Path(info["seeds"]).read_text().split() == manifest.seeds
        async with aiohttp.ClientSession(auto_decompress=False) as s:
            res = await reference_crawl(http_fetch(s, info["port"], timeout_s=1.0), manifest.seeds, manifest.rules,
                                        host_gap_s=0.01)
    finally:
        code = proc.stop()
    assert code == 0
    assert set(res.fetched) == manifest.fetched
    assert res.failed == set(manifest.failures)
    requests = audit.read_access_log(info["access_log"])
    cmp = audit.compare(requests, manifest)
    assert cmp.ok, (sorted(cmp.missing)[:5], sorted(cmp.unexpected)[:5], cmp.duplicates)
    assert not audit.overlaps(requests)
    assert len(requests) == manifest.requests


# --- nginx ----------------------------------------------------------------------------------


@pytest.fixture
def nginx_binary():
    path = find_binary("nginx")
    if path is None:
        print("nginx binary not found: skipping the static-export test")
        pytest.skip("nginx binary not found on PATH or in the sbin directories")
    return path


async def test_nginx_serves_the_static_export(tmp_path, nginx_binary):
    web = build_web(WebParams(hosts=8, pages=160, seed=4))
    port = free_port()
    root = tmp_path / "root"
    export_static(web, root, port)
    logs = tmp_path / "logs"
    logs.mkdir()
    access, error, pid = logs / "access.log.jsonl", logs / "error.log", logs / "nginx.pid"
    conf = root / "nginx.conf"
    conf.write_text(nginx_conf(root, port, access, error, pid))
    proc = subprocess.Popen(nginx_command(conf, root, error, nginx=nginx_binary),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not accepting(proc, port, timeout_s=WAIT_S):
            err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
            pytest.fail(f"nginx did not start: {err} {error.read_text() if error.exists() else ''}")
        manifest = expected_crawl(web, port, CrawlRules(), static=True)
        r = Renderer(web)
        async with aiohttp.ClientSession(auto_decompress=False) as s:
            base = f"http://127.0.0.1:{port}"
            h0 = web.hosts[0]
            async with s.get(base + "/", headers={"Host": f"{h0.name}:{port}"}) as resp:
                assert resp.status == 200 and await resp.read() == r.page(web.seed_ids[0], port)
                assert resp.headers["Content-Type"] == "text/html; charset=utf-8"
            uid, red = next((u, d) for u, d in web.redirects.items()
                            if web.hosts[int(web.url_host[u])].role is Role.ORDINARY)
            async with s.get(base + web.url_path[uid], headers={"Host": web.hosts[int(web.url_host[uid])].name},
                             allow_redirects=False) as resp:
                assert resp.status == red.status and resp.headers["Location"] == r.location(uid, port)
            for host, path, status in (("robots500.web.test", "/robots.txt", 500),
                                       ("norobots.web.test", "/robots.txt", 404),
                                       ("bad.web.test", "/", 404), (h0.name, "/gone/0.html", 404)):
                async with s.get(base + path, headers={"Host": host}) as resp:
                    assert resp.status == status, (host, path)
            res = await reference_crawl(http_fetch(s, port), manifest.seeds, manifest.rules, host_gap_s=0.01)
        assert set(res.fetched) == manifest.fetched
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)  # graceful stop of the master we started (by its PID)
            try:
                proc.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(WAIT_S)
        if proc.stderr is not None:
            proc.stderr.close()
    requests = audit.read_access_log(access)
    crawl = [q for q in requests if q.ua.startswith("ExampleCrawler")]
    cmp = audit.compare(crawl, manifest)
    assert cmp.ok, (sorted(cmp.missing)[:5], sorted(cmp.unexpected)[:5], cmp.duplicates)
    assert all(q.start <= q.end for q in crawl)
    assert not audit.overlaps(crawl)


def test_manifest_files_are_self_describing(tmp_path):
    """The CLI's manifest names the rules and params it was computed for."""
    proc = TestWebProcess(tmp_path / "tw", ["--hosts", "5", "--pages", "50", "--no-bad-host", "--no-trap"])
    info = proc.start()
    try:
        data = json.loads(Path(info["manifest"]).read_text())
    finally:
        assert proc.stop() == 0
    assert data["params"]["bad_host"] is False and data["params"]["trap"] is False
    assert data["rules"]["max_path_depth"] == 16 and data["trap_bound"] == 0
    m = WebManifest.from_json(json.dumps(data))
    assert not any("bad.web.test" in u for u in m.fetched)

"""Fetcher against real loopback servers: every limit and failure ends in a FetchResult with its reason."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import struct
import time
import tracemalloc
import zlib
from email.utils import formatdate

import brotli
import pytest
from aiohttp import web
from tests.support.fetching import Fetchers
from tests.support.ports import free_port

from crawler.config.schema import FetchConfig
from crawler.fetch import result as R
from crawler.fetch.decode import zstd
from crawler.fetch.fetcher import Fetcher

UA = "ExampleCrawler/1.0 (+https://example.org/crawler)"
PAGE = b"<html><head><title>t</title></head><body><a href='/x'>x</a></body></html>"
MIB = 1 << 20
BODY_LIMIT = 1 * MIB
DECODED_LIMIT = 4 * MIB
HEADER_LIMIT = 8192
BOMB_DECODED_BYTES = 1 << 30            # 1 GiB once inflated
ENDLESS_CHUNK = b"x" * 65536
ENDLESS_MAX_CHUNKS = 2000               # bound on the server loop (125 MiB), far past the limit
STALL_S = 5.0                           # server sleeps this long; the client gives up far earlier
SHORT_TIMEOUT_S = 0.3
TRICKLE_BYTES_PER_S = 2048              # a slow-loris body: half the default fetch.min_bytes_per_s
TRICKLE_TICK_S = 0.25
TRICKLE_MAX_S = 40.0                    # the server loop's own bound, far past the defaults' 10 s window


def make_gzip_bomb(decoded_bytes: int) -> bytes:
    """A valid gzip stream inflating to `decoded_bytes` zeros, built without holding them in memory."""
    block = b"\0" * MIB
    comp = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    deflated = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)   # identical for every block after a full flush
    blocks = decoded_bytes // MIB
    crc = 0
    for _ in range(blocks):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = comp.flush(zlib.Z_FINISH) + struct.pack("<II", crc, decoded_bytes & 0xFFFFFFFF)
    return header + deflated * blocks + trailer


def make_br_bomb(decoded_bytes: int) -> bytes:
    """A brotli stream inflating to `decoded_bytes` zeros (1 GiB -> about 190 KiB), made a MiB at a time."""
    comp = brotli.Compressor(quality=1)
    block = b"\0" * MIB
    return b"".join([comp.process(block) for _ in range(decoded_bytes // MIB)] + [comp.finish()])


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    return make_gzip_bomb(BOMB_DECODED_BYTES)


def make_app(bomb: bytes, seen: list[str], br_bomb: bytes = b"") -> web.Application:
    async def record(request: web.Request, handler):
        seen.append(request.path)
        return await handler(request)

    app = web.Application(middlewares=[web.middleware(record)])
    routes = web.RouteTableDef()

    @routes.get("/page")
    async def page(request):
        return web.Response(body=PAGE, content_type="text/html", charset="iso-8859-1")

    @routes.get("/gzip")
    async def gz(request):
        return web.Response(body=gzip.compress(PAGE * 100), headers={"Content-Encoding": "gzip",
                                                                       "Content-Type": "text/html"})

    @routes.get("/deflate")
    async def deflate(request):
        return web.Response(body=zlib.compress(PAGE * 100), headers={"Content-Encoding": "deflate",
                                                                       "Content-Type": "text/html"})

    @routes.get("/deflate-raw")
    async def deflate_raw(request):
        comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        return web.Response(body=comp.compress(PAGE * 100) + comp.flush(),
                            headers={"Content-Encoding": "deflate", "Content-Type": "text/html"})

    @routes.get("/bad-gzip")
    async def bad_gzip(request):
        return web.Response(body=b"\x1f\x8b\x08\x00 this is not gzip at all" * 10,
                            headers={"Content-Encoding": "gzip"})

    @routes.get("/br")
    async def br(request):
        return web.Response(body=brotli.compress(PAGE * 100), headers={"Content-Encoding": "br",
                                                                         "Content-Type": "text/html"})

    @routes.get("/zstd")
    async def zst(request):
        return web.Response(body=zstd.compress(PAGE * 100), headers={"Content-Encoding": "zstd",
                                                                       "Content-Type": "text/html"})

    @routes.get("/gzip-br")
    async def gzip_br(request):
        return web.Response(body=brotli.compress(gzip.compress(PAGE * 100)),
                            headers={"Content-Encoding": "gzip, br", "Content-Type": "text/html"})

    @routes.get("/bzip2")
    async def bzip2(request):
        return web.Response(body=b"BZh91AY&SY not really", headers={"Content-Encoding": "x-bzip2"})

    @routes.get("/bomb")
    async def bomb_handler(request):
        return web.Response(body=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "text/html"})

    @routes.get("/br-bomb")
    async def br_bomb_handler(request):
        return web.Response(body=br_bomb, headers={"Content-Encoding": "br",
                                                                   "Content-Type": "text/html"})

    @routes.get("/trickle")
    async def trickle(request):
        """A body at TRICKLE_BYTES_PER_S (or ?rate=), chunked, until the client hangs up or ?total= is sent."""
        rate = int(request.query.get("rate", TRICKLE_BYTES_PER_S))
        total = int(request.query.get("total", 0)) or None
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        step = b"t" * int(rate * TRICKLE_TICK_S)
        sent = 0
        try:
            for _ in range(int(TRICKLE_MAX_S / TRICKLE_TICK_S)):
                await resp.write(step)
                sent += len(step)
                if total is not None and sent >= total:
                    break
                await asyncio.sleep(TRICKLE_TICK_S)
        except (ConnectionError, RuntimeError):
            pass                              # the client hung up
        return resp

    @routes.get("/dribble")
    async def dribble(request):
        """A byte just before each read timeout (?every= seconds): never silent long enough to time out."""
        every = float(request.query["every"])
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            for _ in range(int(TRICKLE_MAX_S / every)):
                await resp.write(b"d")
                await asyncio.sleep(every)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    @routes.get("/endless")
    async def endless(request):
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            for _ in range(ENDLESS_MAX_CHUNKS):
                await resp.write(ENDLESS_CHUNK)
        except (ConnectionError, RuntimeError):
            pass                              # the client hung up, as it should
        return resp

    @routes.get("/big-content-length")
    async def big_cl(request):
        size = 10 * BODY_LIMIT
        resp = web.StreamResponse(headers={"Content-Length": str(size), "Content-Type": "text/plain"})
        await resp.prepare(request)
        try:
            for _ in range(size // len(ENDLESS_CHUNK)):
                await resp.write(ENDLESS_CHUNK)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    @routes.get("/stall")
    async def stall(request):
        resp = web.StreamResponse(headers={"Content-Length": "1000", "Content-Type": "text/plain"})
        await resp.prepare(request)
        await resp.write(b"y" * 100)
        await asyncio.sleep(STALL_S)
        return resp

    @routes.get("/slow-headers")
    async def slow_headers(request):
        await asyncio.sleep(STALL_S)
        return web.Response(text="late")

    @routes.get("/drip")
    async def drip(request):
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        for _ in range(int(STALL_S / 0.05)):
            await resp.write(b"z")
            await asyncio.sleep(0.05)
        return resp

    @routes.get("/huge-header")
    async def huge_header(request):
        return web.Response(text="x", headers={"X-Huge": "h" * (4 * HEADER_LIMIT)})

    @routes.get("/moved")
    async def moved(request):
        return web.Response(status=301, headers={"Location": "/page?from=moved"})

    @routes.get("/loop-a")
    async def loop_a(request):
        return web.Response(status=302, headers={"Location": "/loop-b"})

    @routes.get("/loop-b")
    async def loop_b(request):
        return web.Response(status=302, headers={"Location": f"http://127.0.0.1:{request.url.port:d}/loop-a"})

    @routes.get("/429")
    async def too_many(request):
        return web.Response(status=429, headers={"Retry-After": "120"})

    @routes.get("/503")
    async def unavailable(request):
        return web.Response(status=503, headers={"Retry-After": formatdate(time.time() + 60, usegmt=True)})

    @routes.get("/echo")
    async def echo(request):
        return web.json_response({"headers": list(request.headers.items()),
                                  "peer": request.transport.get_extra_info("peername")})

    app.add_routes(routes)
    return app


@pytest.fixture(scope="module")
def br_bomb() -> bytes:
    return make_br_bomb(BOMB_DECODED_BYTES)


@pytest.fixture
async def server(gzip_bomb, br_bomb):
    seen: list[str] = []
    runner = web.AppRunner(make_app(gzip_bomb, seen, br_bomb), handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


def make_config(**overrides) -> FetchConfig:
    values = dict(allow_private_networks=True, max_body_bytes=BODY_LIMIT, max_decoded_bytes=DECODED_LIMIT,
                  max_header_bytes=HEADER_LIMIT, connect_timeout_s=2.0, read_timeout_s=2.0,
                  total_timeout_s=10.0, keepalive_s=30.0)
    values.update(overrides)
    return FetchConfig(**values)


@pytest.fixture
async def make_fetcher():
    fetchers = Fetchers()

    async def factory(max_url_bytes: int = 2048, **overrides) -> Fetcher:
        return fetchers.make(make_config(**overrides), max_url_bytes=max_url_bytes)

    yield factory
    await fetchers.close()


async def test_normal_page(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher()
    res = await fetcher.fetch(base + "/page")
    assert (res.reason, res.status, res.http_reason) == (R.OK, 200, "OK")
    assert res.body == PAGE and res.raw_body is res.body
    assert res.content_type == "text/html" and res.charset == "iso-8859-1"
    assert res.ip == "127.0.0.1" and not res.truncated
    assert res.wire_bytes > len(PAGE) and res.duration_s > 0 and res.started <= time.time()
    names = [name.lower() for name, _ in res.headers]
    assert "content-type" in names and "content-length" in names
    sent = {k.lower(): v for k, v in res.request_headers}
    assert sent["user-agent"] == UA and sent["accept-encoding"] == "gzip, deflate, br, zstd"
    assert sent["accept"].startswith("text/html")


async def test_request_headers_reach_server(server, make_fetcher):
    base, _ = server
    res = await (await make_fetcher()).fetch(base + "/echo")
    got = {k.lower(): v for k, v in json.loads(res.body)["headers"]}
    assert got["user-agent"] == UA and got["accept-encoding"] == "gzip, deflate, br, zstd"
    assert "cookie" not in got


@pytest.mark.parametrize("path", ["/gzip", "/deflate", "/deflate-raw", "/br", "/zstd", "/gzip-br"])
async def test_content_encodings_decoded(server, make_fetcher, path):
    base, _ = server
    res = await (await make_fetcher()).fetch(base + path)
    assert res.reason == R.OK and res.body == PAGE * 100
    assert len(res.raw_body) < len(res.body) and res.raw_body != res.body
    assert res.wire_bytes > len(res.raw_body)


async def test_gzip_bomb_stops_at_decoded_limit_with_bounded_memory(server, make_fetcher, gzip_bomb):
    base, _ = server
    fetcher = await make_fetcher(max_body_bytes=4 * MIB)
    tracemalloc.start()
    try:
        res = await fetcher.fetch(base + "/bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.reason == R.DECODED_TOO_LARGE and res.truncated and res.status == 200
    assert len(res.body) == DECODED_LIMIT
    assert len(res.raw_body) < len(gzip_bomb)
    # Everything allocated during the fetch, server side included: a few times the limit, never the GiB.
    print(f"\ngzip bomb: {len(gzip_bomb)} bytes inflating to {BOMB_DECODED_BYTES}; "
          f"traced peak {peak / MIB:.1f} MiB with max_decoded_bytes {DECODED_LIMIT / MIB:.0f} MiB")
    assert peak < 8 * DECODED_LIMIT, peak


async def test_br_bomb_stops_at_decoded_limit_with_bounded_memory(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher(max_body_bytes=4 * MIB)
    tracemalloc.start()
    try:
        res = await fetcher.fetch(base + "/br-bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.reason == R.DECODED_TOO_LARGE and res.truncated and res.status == 200
    assert len(res.body) == DECODED_LIMIT and res.body == b"\0" * DECODED_LIMIT
    print(f"\nbr bomb: {len(res.raw_body)} bytes on the wire inflating to {BOMB_DECODED_BYTES}; "
          f"traced peak {peak / MIB:.1f} MiB with max_decoded_bytes {DECODED_LIMIT / MIB:.0f} MiB")
    assert peak < 8 * DECODED_LIMIT, peak


async def test_endless_chunked_body_is_cut(server, make_fetcher):
    base, _ = server
    res = await (await make_fetcher()).fetch(base + "/endless")
    assert res.reason == R.BODY_TOO_LARGE and res.truncated and res.status == 200
    assert len(res.raw_body) == BODY_LIMIT and res.body is res.raw_body


async def test_content_length_over_limit(server, make_fetcher):
    base, _ = server
    res = await (await make_fetcher()).fetch(base + "/big-content-length")
    assert res.reason == R.BODY_TOO_LARGE and res.truncated
    assert len(res.raw_body) == BODY_LIMIT


async def test_per_call_limit(server, make_fetcher):
    base, _ = server
    res = await (await make_fetcher()).fetch(base + "/gzip", max_body_bytes=1000)
    assert res.reason == R.DECODED_TOO_LARGE and len(res.body) == 1000


async def test_stall_mid_body_is_read_timeout(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher(read_timeout_s=SHORT_TIMEOUT_S)
    t0 = time.monotonic()
    res = await fetcher.fetch(base + "/stall")
    assert res.reason == R.READ_TIMEOUT and res.status == 200 and res.truncated
    assert res.raw_body == b"y" * 100
    assert time.monotonic() - t0 < STALL_S / 2


async def test_silent_server_is_read_timeout(server, make_fetcher):
    base, _ = server
    res = await (await make_fetcher(read_timeout_s=SHORT_TIMEOUT_S)).fetch(base + "/slow-headers")
    assert res.reason == R.READ_TIMEOUT and res.status == 0


async def test_dripping_body_hits_total_timeout(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher(read_timeout_s=1.0, total_timeout_s=0.5)
    res = await fetcher.fetch(base + "/drip")
    assert res.reason == R.TOTAL_TIMEOUT and res.status == 200 and res.truncated
    assert 0 < len(res.raw_body) < STALL_S / 0.05
    assert res.duration_s < 2.0


async def test_slow_connect_is_connect_timeout(make_fetcher):
    # A listening socket whose accept queue is full drops new SYNs: connect() hangs, on loopback.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            sock = socket.socket()
            sock.setblocking(False)
            try:
                sock.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            fillers.append(sock)
        await asyncio.sleep(0.1)
        fetcher = await make_fetcher(connect_timeout_s=SHORT_TIMEOUT_S)
        res = await fetcher.fetch(f"http://127.0.0.1:{port}/")
        if res.reason == R.READ_TIMEOUT:
            pytest.skip("this kernel completes connections beyond the accept backlog")
        assert res.reason == R.CONNECT_TIMEOUT and res.status == 0
    finally:
        for sock in fillers:
            sock.close()
        listener.close()


async def test_huge_header_is_header_too_large(server, make_fetcher):
    base, _ = server
    res = await (await make_fetcher()).fetch(base + "/huge-header")
    assert res.reason == R.HEADER_TOO_LARGE and res.status == 0


async def test_redirect_not_followed(server, make_fetcher):
    base, seen = server
    res = await (await make_fetcher()).fetch(base + "/moved")
    assert (res.reason, res.status, res.location) == (R.OK, 301, "/page?from=moved")
    assert seen == ["/moved"]


async def test_redirect_loop_is_one_result_per_hop(server, make_fetcher):
    base, seen = server
    fetcher = await make_fetcher()
    url = base + "/loop-a"
    locations = []
    for _ in range(4):
        res = await fetcher.fetch(url)
        assert res.reason == R.OK and res.status == 302
        locations.append(res.location)
        url = res.location if res.location.startswith("http") else base + res.location
    assert locations == ["/loop-b", base + "/loop-a"] * 2
    assert seen == ["/loop-a", "/loop-b"] * 2


async def test_retry_after_seconds_and_date(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher()
    res = await fetcher.fetch(base + "/429")
    assert (res.status, res.reason, res.retry_after_s) == (429, R.OK, 120.0)
    res = await fetcher.fetch(base + "/503")
    assert res.status == 503 and 55.0 <= res.retry_after_s <= 61.0


async def test_bad_gzip_keeps_raw_body(server, make_fetcher):
    base, _ = server
    res = await (await make_fetcher()).fetch(base + "/bad-gzip")
    assert res.reason == R.BAD_CONTENT_ENCODING and res.status == 200
    assert res.raw_body.startswith(b"\x1f\x8b") and res.body == b""


async def test_unsupported_encoding(server, make_fetcher):
    base, _ = server
    res = await (await make_fetcher()).fetch(base + "/bzip2")
    assert res.reason == R.BAD_CONTENT_ENCODING and "x-bzip2" in res.detail


async def test_keepalive_reuses_connection(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher()
    peers = [json.loads((await fetcher.fetch(base + "/echo")).body)["peer"][1] for _ in range(3)]
    assert len(set(peers)) == 1


async def test_url_checks_before_sending(server, make_fetcher):
    base, seen = server
    fetcher = await make_fetcher()
    res = await fetcher.fetch(base + "/page?" + "q" * 3000)
    assert res.reason == R.URL_TOO_LONG
    res = await fetcher.fetch("ftp://127.0.0.1/file")
    assert res.reason == R.UNSUPPORTED_SCHEME
    res = await fetcher.fetch("http:///nohost")
    assert res.reason == R.INVALID_URL
    res = await fetcher.fetch("http://127.0.0.1:99999/")
    assert res.reason == R.INVALID_URL
    assert seen == []
    assert fetcher.stats()["by_reason"] == {R.URL_TOO_LONG: 1, R.UNSUPPORTED_SCHEME: 1, R.INVALID_URL: 2}


async def test_connection_refused(make_fetcher):
    port = free_port()
    res = await (await make_fetcher()).fetch(f"http://127.0.0.1:{port}/")
    assert res.reason == R.CONNECT_ERROR and res.status == 0 and res.ip is None


async def raw_server(reply: bytes):
    """A TCP server that reads the request, writes `reply` verbatim and closes."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2.0)
            writer.write(reply)
            await writer.drain()
        finally:
            writer.close()
    return await asyncio.start_server(handle, "127.0.0.1", 0)


@pytest.mark.parametrize("reply, status", [
    (b"garbage that is not http\r\n\r\n", 0),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", 200),
    # The bad chunk arrives with the head, so aiohttp fails before returning the response.
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n", 0),
    (b"", 0),
])
async def test_malformed_responses_are_protocol_errors(make_fetcher, reply, status):
    srv = await raw_server(reply)
    port = srv.sockets[0].getsockname()[1]
    try:
        res = await (await make_fetcher()).fetch(f"http://127.0.0.1:{port}/")
    finally:
        srv.close()
        await srv.wait_closed()
    assert res.reason == R.PROTOCOL_ERROR, res.detail
    assert res.status == status
    if status:
        assert res.truncated


async def test_cancellation_propagates(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher()
    task = asyncio.ensure_future(fetcher.fetch(base + "/slow-headers"))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_stats_count_every_fetch(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher()
    for path in ("/page", "/gzip", "/429", "/endless"):
        await fetcher.fetch(base + path)
    stats = fetcher.stats()
    assert stats["fetches"] == 4
    assert stats["by_reason"] == {R.OK: 3, R.BODY_TOO_LARGE: 1}
    assert stats["by_status_class"] == {"2xx": 3, "4xx": 1}
    assert stats["wire_bytes"] > BODY_LIMIT and stats["unexpected_errors"] == 0


async def test_fetch_after_close_is_a_programming_error(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher()
    assert (await fetcher.fetch(base + "/page")).reason == R.OK
    await fetcher.close()
    with pytest.raises(RuntimeError):
        await fetcher.fetch(base + "/page")


async def test_connection_cap_queues_fetches_outside_their_timeouts(make_fetcher):
    """fetch.max_connections: the server never sees more requests at once than the cap, and a fetch
    waiting for a free connection does not spend its total_timeout_s waiting (all succeed)."""
    cap, fetches, hold_s = 2, 6, 0.25
    active = peak = 0

    async def slow(request):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            await asyncio.sleep(hold_s)
        finally:
            active -= 1
        return web.Response(body=PAGE, content_type="text/html")

    app = web.Application()
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    sites = []
    try:
        for i in range(fetches):                                   # six hosts: 127.0.0.1 .. 127.0.0.6
            site = web.TCPSite(runner, f"127.0.0.{i + 1}", 0)
            await site.start()
            sites.append(site._server.sockets[0].getsockname())
        # Three rounds of 0.25 s behind a cap of 2 take ~0.75 s: longer than the total timeout.
        fetcher = await make_fetcher(max_connections=cap, total_timeout_s=hold_s * 2.5)
        results = await asyncio.wait_for(
            asyncio.gather(*(fetcher.fetch(f"http://{host}:{port}/slow") for host, port in sites)), 10)
    finally:
        await runner.cleanup()
    assert [r.reason for r in results] == [R.OK] * fetches
    assert peak == cap
    assert fetcher.stats()["connection_waits"] == fetches - cap
    assert all(r.duration_s < hold_s * 2 for r in results)          # the queue is not in the fetch's time


@pytest.mark.slow
async def test_trickling_body_is_too_slow_at_the_defaults(server, make_fetcher):
    """2 KiB/s, under the default floor of 4096 bytes/s: cut at the first sweep after the first 10 s window."""
    base, _ = server
    defaults = FetchConfig()
    fetcher = await make_fetcher(min_bytes_per_s=defaults.min_bytes_per_s,
                                 min_rate_window_s=defaults.min_rate_window_s,
                                 total_timeout_s=3 * defaults.min_rate_window_s)
    res = await fetcher.fetch(base + "/trickle")
    window_s = defaults.min_rate_window_s
    assert res.reason == R.TOO_SLOW and res.truncated and res.status == 200, (res.reason, res.detail)
    assert window_s * 0.95 <= res.duration_s <= window_s * 1.25 + 1.0, res.duration_s
    expected = TRICKLE_BYTES_PER_S * window_s
    assert expected * 0.8 <= len(res.raw_body) <= expected * 1.2 and res.body is res.raw_body
    assert "min_bytes_per_s" in res.detail and fetcher.stats()["too_slow_cuts"] == 1
    # The cut connection was closed, not pooled: the next fetch opens a new one.
    again = await fetcher.fetch(base + "/page")
    assert again.reason == R.OK and again.connect_s is not None


async def test_healthy_body_is_not_cut(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher(min_bytes_per_s=4096, min_rate_window_s=0.5)
    total = 48 * 1024                                   # 3 s at 16 KiB/s: six windows, each well above the floor
    res = await fetcher.fetch(base + f"/trickle?rate={16 * 1024}&total={total}")
    assert res.reason == R.OK and not res.truncated and len(res.raw_body) >= total


async def test_zero_floor_disables_the_check(server, make_fetcher):
    base, _ = server
    fetcher = await make_fetcher(min_bytes_per_s=0, min_rate_window_s=0.25)
    res = await fetcher.fetch(base + f"/trickle?rate={TRICKLE_BYTES_PER_S}&total=4096")
    assert res.reason == R.OK and len(res.raw_body) >= 4096 and res.duration_s > 4 * 0.25


async def test_dribble_dodging_read_timeout_is_cut_within_the_bound(server, make_fetcher):
    """A byte every 0.8 s never trips a 1 s read timeout; the rate floor cuts it at the first sweep after its
    first window (_RateFloor's bound: 1.25 windows for a body slow from its first byte)."""
    base, _ = server
    window_s = 2.0
    fetcher = await make_fetcher(read_timeout_s=1.0, min_bytes_per_s=4096, min_rate_window_s=window_s,
                                 total_timeout_s=30.0)
    res = await fetcher.fetch(base + "/dribble?every=0.8")
    assert res.reason == R.TOO_SLOW and res.truncated, (res.reason, res.detail)
    assert window_s * 0.95 <= res.duration_s <= window_s * 1.25 + 0.5, res.duration_s
    assert 1 <= len(res.raw_body) <= 4

"""Fetcher CPU cost per fetch over keep-alive, against a server in another process (so only the client counts).

Run with -s to see the figure:
    python -m pytest -q -s tests/integration/test_fetch_perf.py
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from tests.support.ports import free_port
from tests.support.processes import accepting, stop_process

from crawler.config.schema import DnsConfig, FetchConfig
from crawler.fetch import result as R
from crawler.fetch.dns import Resolver
from crawler.fetch.fetcher import Fetcher

FETCHES = 2000
WARMUP = 50
CPU_MS_CEILING = 5.0              # a generous bound; measured ~0.4 ms on the default loop
START_TIMEOUT_S = 10.0

SERVER = textwrap.dedent("""
    import sys
    from aiohttp import web
    PAGE = b"<html><body>" + b"<a href='/p'>link</a>" * 50 + b"</body></html>"
    async def page(request):
        return web.Response(body=PAGE, content_type="text/html")
    app = web.Application()
    app.router.add_get("/", page)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
""")


@pytest.fixture
def page_server():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
    try:
        if not accepting(proc, port):
            pytest.skip("page server did not start")
        yield f"http://127.0.0.1:{port}/"
    finally:
        stop_process(proc)


async def test_cpu_per_fetch_over_keepalive(page_server):
    config = FetchConfig(allow_private_networks=True)
    resolver = Resolver(DnsConfig(), allow_private_networks=True)
    fetcher = Fetcher(config, resolver, "ExampleCrawler/1.0 (+https://example.org/crawler)")
    try:
        for _ in range(WARMUP):
            assert (await fetcher.fetch(page_server)).reason == R.OK
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(FETCHES):
            res = await fetcher.fetch(page_server)
        cpu_ms = (time.process_time() - cpu0) * 1000 / FETCHES
        wall_ms = (time.perf_counter() - wall0) * 1000 / FETCHES
        assert res.reason == R.OK and res.status == 200
    finally:
        await fetcher.close()
        await resolver.close()
    print(f"\nFetcher: {cpu_ms:.3f} ms CPU and {wall_ms:.3f} ms wall per fetch of a {len(res.body)}-byte page, "
          f"{FETCHES} sequential fetches over keep-alive")
    assert cpu_ms < CPU_MS_CEILING

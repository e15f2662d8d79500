"""Progress lines give the rate over the last interval next to the average: a stall shows as 0 at once.

A real aiohttp server: a few quick pages, then one that takes seconds to
answer (the crawl's last URL, a slow host), so for those seconds the node
fetches nothing. Its progress lines (every 0.3 s) must say 0.0/s for the
interval while the average since the start is still well above 0.
"""

from __future__ import annotations

import asyncio
import re

from aiohttp import web
from tests.support.configs import one_node_config

from crawler.config import from_dict
from crawler.node import Node

QUICK_PAGES = 20
STALL_S = 2.0
PROGRESS_EVERY_S = 0.3
CRAWL_TIMEOUT_S = 30.0
LINE = re.compile(r"node 0: (\d+) pages \(([\d.]+)/s now, ([\d.]+)/s average\)")


async def test_a_stall_shows_as_zero_pages_per_second(tmp_path, capfd):
    async def handle(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(status=404)
        if request.path == "/slow":
            await asyncio.sleep(STALL_S)
            return web.Response(text="<p>slow</p>", content_type="text/html")
        links = "".join(f"<a href='/p{i}'>{i}</a>" for i in range(QUICK_PAGES)) + "<a href='/slow'>s</a>"
        return web.Response(text=links if request.path == "/" else "<p>leaf</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        config = from_dict(one_node_config(
            tmp_path / "node-{node}", seeds=[f"http://stall.web.test:{port}/"],
            workers=4,
            politeness={"delay_factor": 0},
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            metrics={"enabled": False, "progress_interval_s": PROGRESS_EVERY_S},
        ))
        summary = await asyncio.wait_for(Node(config, 0).run(), CRAWL_TIMEOUT_S)
    finally:
        await runner.cleanup()
    assert summary["fetches"] == QUICK_PAGES + 2
    lines = [LINE.search(line) for line in capfd.readouterr().err.splitlines()]
    stalled = [m for m in lines if m and int(m.group(1)) == QUICK_PAGES + 1]       # waiting for /slow
    assert len(stalled) >= 3, [m.group(0) for m in lines if m]
    assert all(float(m.group(2)) == 0.0 for m in stalled[1:])                   # nothing fetched since the last line
    assert all(float(m.group(3)) > 0.0 for m in stalled)                         # the average stays above 0

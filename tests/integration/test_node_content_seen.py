"""The content-seen test: a duplicate page's links are not followed, a duplicate stylesheet's are.

A real aiohttp server has two copies of one page (a mirror) and two copies of
one stylesheet at different paths, as real sites do (a per-language tree of
shared files). The mirror's links lead into the mirror, so a crawler does not
follow them (Mercator). A stylesheet's url() is relative to where it sits: the
copy's images are the requisites of the pages that use the copy, so they are
fetched, or those pages cannot be replayed from the WARC.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from crawler.config import from_dict
from crawler.node import Node

CRAWL_TIMEOUT_S = 30.0
PAGE = "<html><head><link rel=stylesheet href='css/site.css'></head><body>{} <a href='deep.html'>deep</a></body></html>"
CSS = "body{background:url(../img/bg.png)}"


async def test_duplicate_pages_are_not_followed_but_duplicate_stylesheets_are(tmp_path):
    hits: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        path = request.path
        hits.append(path)
        if path == "/":
            return web.Response(text="<a href='/a/index.html'>a</a> <a href='/b/index.html'>b</a> "
                                     "<a href='/m1/index.html'>m1</a> <a href='/m2/index.html'>m2</a>",
                                content_type="text/html")
        if path in ("/a/index.html", "/b/index.html"):
            return web.Response(text=PAGE.format(path), content_type="text/html")     # two pages, one stylesheet
        if path in ("/m1/index.html", "/m2/index.html"):
            return web.Response(text=PAGE.format("mirror"), content_type="text/html")  # the same bytes twice
        if path.endswith("/css/site.css"):
            return web.Response(text=CSS, content_type="text/css")              # the same bytes twice
        if path.endswith(".png"):
            return web.Response(body=b"\x89PNG\r\n\x1a\n", content_type="image/png")
        if path.endswith("/deep.html"):
            return web.Response(text="<p>deep</p>", content_type="text/html")
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        config = from_dict({
            "cluster": {"nodes": [{"id": 0, "peer_port": 0, "metrics_port": 0}]},
            "crawl": {"seeds": [f"http://mirror.web.test:{port}/"], "data_dir": str(tmp_path / "node-{node}")},
            "workers": 4,
            "politeness": {"delay_factor": 0},
            "fetch": {"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            "metrics": {"enabled": False, "progress_interval_s": 0},
        })
        summary = await asyncio.wait_for(Node(config, 0).run(), CRAWL_TIMEOUT_S)
    finally:
        await runner.cleanup()
    pages = [p for p in hits if p != "/robots.txt"]
    # The stylesheet's two copies were fetched and read: each copy's image with it.
    styled = sorted(p for p in pages if p.endswith((".css", ".png")) and not p.startswith("/m"))
    assert styled == ["/a/css/site.css", "/a/img/bg.png", "/b/css/site.css", "/b/img/bg.png"]
    # Of the two identical pages only one was read: the other's links (its deep page, its stylesheet) are
    # the mirror's.
    assert len([p for p in pages if p.startswith("/m") and p.endswith("/deep.html")]) == 1
    assert len([p for p in pages if p.startswith("/m") and p.endswith(".css")]) == 1
    assert summary["due"]["merges"] >= 1
    assert summary["stop"] == "done"

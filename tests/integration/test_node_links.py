"""A node's handling of a page's links: the content-seen test, and pages cut at max_links_per_page.

The content-seen test: a duplicate page's links are not followed, a duplicate stylesheet's are.

A real aiohttp server has two copies of one page (a mirror) and two copies of
one stylesheet at different paths, as real sites do (a per-language tree of
shared files). The mirror's links lead into the mirror, so a crawler does not
follow them (Mercator). A stylesheet's url() is relative to where it sits: the
copy's images are the requisites of the pages that use the copy, so they are
fetched, or those pages cannot be replayed from the WARC. With
`parse.content_seen_size: 0` the test is off and the mirror is followed too.

A page with more links than `parse.max_links_per_page` is cut: a warning in
the log, `links_dropped` in its crawl-log line, `links_truncated` in the
summary and `crawler_links_truncated_total` on /metrics.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from aiohttp import web
from prometheus_client import generate_latest
from tests.support.configs import one_node_config

from crawler.config import from_dict
from crawler.node import Node

CRAWL_TIMEOUT_S = 30.0
PAGE = "<html><head><link rel=stylesheet href='css/site.css'></head><body>{} <a href='deep.html'>deep</a></body></html>"
CSS = "body{background:url(../img/bg.png)}"


async def serve(handler) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("content_seen_size", [None, 0], ids=["default", "off"])
async def test_duplicate_pages_are_not_followed_but_duplicate_stylesheets_are(tmp_path, content_seen_size):
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

    runner, port = await serve(handle)
    try:
        config = from_dict(one_node_config(
            tmp_path / "node-{node}", seeds=[f"http://mirror.web.test:{port}/"],
            workers=4,
            politeness={"delay_factor": 0},
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            metrics={"enabled": False, "progress_interval_s": 0},
            parse={} if content_seen_size is None else {"content_seen_size": content_seen_size},
        ))
        node = Node(config, 0)
        summary = await asyncio.wait_for(node.run(), CRAWL_TIMEOUT_S)
    finally:
        await runner.cleanup()
    pages = [p for p in hits if p != "/robots.txt"]
    # The stylesheet's two copies were fetched and read: each copy's image with it.
    styled = sorted(p for p in pages if p.endswith((".css", ".png")) and not p.startswith("/m"))
    assert styled == ["/a/css/site.css", "/a/img/bg.png", "/b/css/site.css", "/b/img/bg.png"]
    # Of the two identical pages only one was read: the other's links (its deep page, its stylesheet) are
    # the mirror's. With the test off both were read: a forgotten body costs a parse, and nothing is fetched
    # twice.
    read = 2 if content_seen_size == 0 else 1
    assert len([p for p in pages if p.startswith("/m") and p.endswith("/deep.html")]) == read
    assert len([p for p in pages if p.startswith("/m") and p.endswith(".css")]) == read
    assert len(pages) == len(set(pages))
    snapshot = node.metrics_snapshot()
    assert snapshot["duplicate_content"] == (0 if content_seen_size == 0 else 3)   # m2, two of three deep pages
    assert snapshot["cache_capacity"]["content"] == config.parse.content_seen_size
    assert snapshot["cache_entries"]["content"] == (0 if content_seen_size == 0 else 5)   # /, a, b, m, deep
    assert summary["due"]["merges"] >= 1
    assert summary["stop"] == "done"


async def test_a_page_past_max_links_per_page_is_cut_and_says_so(tmp_path, caplog):
    links, cap = 30, 10

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/":
            body = "".join(f"<a href='/p{i}'>{i}</a>" for i in range(links))
            return web.Response(text=body, content_type="text/html")
        if request.path.startswith("/p"):
            return web.Response(text="<p>leaf</p>", content_type="text/html")
        return web.Response(status=404)

    runner, port = await serve(handle)
    try:
        config = from_dict(one_node_config(
            tmp_path / "node-{node}", seeds=[f"http://many.web.test:{port}/"],
            workers=4, parse={"max_links_per_page": cap},
            politeness={"delay_factor": 0},
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            metrics={"enabled": False, "progress_interval_s": 0},
        ))
        node = Node(config, 0)
        with caplog.at_level(logging.WARNING, logger="crawler.node"):
            summary = await asyncio.wait_for(node.run(), CRAWL_TIMEOUT_S)
    finally:
        await runner.cleanup()
    assert summary["links_truncated"] == links - cap and summary["fetches"] == 1 + cap
    root = [json.loads(line) for line in (tmp_path / "node-0" / "crawl.log.jsonl").read_text().splitlines()
            if json.loads(line)["url"].endswith(f":{port}/")]
    assert root[0]["links"] == cap and root[0]["links_dropped"] == links - cap
    assert "max_links_per_page" in caplog.text and f":{port}/" in caplog.text
    assert f"crawler_links_truncated_total {float(links - cap)}" in generate_latest(node.registry).decode()

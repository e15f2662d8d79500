"""Every 429 and 503 holds its host back, the URL's last try included; checked from the server's side.

A real aiohttp server plays several hosts (told apart by Host) and logs when
each request began and ended. After every 429/503 answer, the next request
to that host may start only once the Retry-After (or
`politeness.default_retry_after_s`) has passed: whether the URL is queued
again (retries left) or its answer is final. A URL's retry budget and its
host's back-off are two decisions.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest
from aiohttp import web
from tests.support.configs import one_node_config

from crawler.config import from_dict
from crawler.node import Node

CRAWL_TIMEOUT_S = 60.0
RETRY_AFTER_S = 1                      # what "busy" and "robots429" ask for (whole seconds, as in the header)
DEFAULT_RETRY_AFTER_S = 0.6            # the node's default for "unavail", which names no Retry-After
CLOCK_SLACK_S = 0.02                   # the server's clock and the node's timers: same machine, event-loop jitter
MAX_RETRIES = 1


@dataclass
class Hit:
    host: str
    path: str
    status: int
    start: float
    end: float


class Web:
    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        start = time.monotonic()
        host = request.host.split(":")[0].split(".")[0]
        seen = sum(1 for h in self.hits if h.host == host and h.path == request.path)
        resp = self.answer(host, request.path, seen)
        self.hits.append(Hit(host, request.path, resp.status, start, time.monotonic()))
        return resp

    @staticmethod
    def answer(host: str, path: str, seen: int) -> web.Response:
        if path == "/robots.txt":
            if host == "robots429" and seen == 0:
                return web.Response(status=429, headers={"Retry-After": str(RETRY_AFTER_S)})
            return web.Response(status=404)
        if host == "busy":
            return web.Response(status=429, headers={"Retry-After": str(RETRY_AFTER_S)})
        if host == "unavail":
            return web.Response(status=503)
        if host == "recovers" and seen == 0:
            return web.Response(status=503, headers={"Retry-After": str(RETRY_AFTER_S)})
        return web.Response(text=f"<html><body>{host}{path}</body></html>", content_type="text/html")

    def of(self, host: str) -> list[Hit]:
        return sorted((h for h in self.hits if h.host == host), key=lambda h: h.start)

    async def __aenter__(self) -> Web:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        await self._runner.cleanup()


def gaps_after_slow_down(hits: list[Hit], wait_s: float) -> list[tuple[str, int, float]]:
    """(path, status, gap) for every 429/503 whose host was contacted again sooner than `wait_s` after it."""
    short = []
    for prev, nxt in zip(hits, hits[1:]):
        if prev.status in (429, 503) and nxt.start - prev.end < wait_s - CLOCK_SLACK_S:
            short.append((prev.path, prev.status, round(nxt.start - prev.end, 3)))
    return short


@pytest.mark.slow
async def test_every_429_and_503_holds_its_host_last_tries_included(tmp_path):
    paths = ["/a", "/b", "/c"]
    async with Web() as server:
        seeds = [f"http://{h}.web.test:{server.port}{p}" for h in ("busy", "unavail", "recovers", "robots429")
                 for p in paths]
        config = from_dict(one_node_config(
            tmp_path / "node-{node}", seeds=seeds,
            workers=8,
            politeness={"max_retries": MAX_RETRIES, "default_retry_after_s": DEFAULT_RETRY_AFTER_S},
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            metrics={"enabled": False, "progress_interval_s": 0},
        ))
        summary = await asyncio.wait_for(Node(config, 0).run(), CRAWL_TIMEOUT_S)
    assert summary["stop"] == "done"
    busy = [h for h in server.of("busy") if h.path != "/robots.txt"]
    # Each URL: 1 + max_retries tries, every one answered 429; the last try of each is final, and still held.
    assert sorted(h.path for h in busy) == sorted(paths * (1 + MAX_RETRIES))
    assert gaps_after_slow_down(server.of("busy"), RETRY_AFTER_S) == []
    unavail = [h for h in server.of("unavail") if h.path != "/robots.txt"]
    assert len(unavail) == len(paths) * (1 + MAX_RETRIES)
    assert gaps_after_slow_down(server.of("unavail"), DEFAULT_RETRY_AFTER_S) == []
    recovers = server.of("recovers")
    assert sorted(h.status for h in recovers if h.path != "/robots.txt") == [200] * len(paths) + [503] * len(paths)
    assert gaps_after_slow_down(recovers, RETRY_AFTER_S) == []
    # robots.txt answered 429 with Retry-After: the origin's URLs waited that long, then were fetched.
    robots429 = server.of("robots429")
    assert [h.status for h in robots429[:2]] == [429, 404] and gaps_after_slow_down(robots429, RETRY_AFTER_S) == []
    assert sorted(h.path for h in robots429[2:]) == paths
    assert summary["robots_parked"] >= 1

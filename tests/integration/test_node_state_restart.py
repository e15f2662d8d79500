"""A node's robots.txt cache, DNS cache and crawl totals across a restart; robots.txt that fails is waited out.

Everything is counted where it arrives: a real aiohttp server (one process
playing several hosts, told apart by Host) logs every request with its time,
and a real dnsmasq logs every query.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tests.support.configs import one_node_config
from tests.support.processes import find_binary
from tests.support.servers import Dnsmasq

from crawler.config import from_dict
from crawler.config.schema import DnsConfig
from crawler.fetch.dns import DnsError, Resolver
from crawler.node import Node
from crawler.state import StateStore

ROBOTS = b"User-agent: *\nDisallow: /private/\n"
PAGES_PER_HOST = 5                       # /, /p/1 .. /p/4, each linking to the next and to /private/x
CRAWL_TIMEOUT_S = 30.0


@dataclass
class Hit:
    host: str
    path: str
    status: int
    at: float                            # time.monotonic() when the server answered


class Web:
    """Hosts by name; /robots.txt answers from `robots_status(host, n)` (n = that host's robots requests so far)."""

    def __init__(self, robots_status=lambda host, n: 200) -> None:
        self.robots_status = robots_status
        self.hits: list[Hit] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        host = request.host.split(":")[0].split(".")[0]
        if request.path == "/robots.txt":
            n = sum(1 for h in self.hits if h.host == host and h.path == "/robots.txt")
            status = self.robots_status(host, n)
            resp = (web.Response(body=ROBOTS, content_type="text/plain") if status == 200
                    else web.Response(status=status))
        else:
            step = 0 if request.path == "/" else int(request.path.rsplit("/", 1)[1])
            links = "<a href='/private/x'>x</a>"
            if step + 1 < PAGES_PER_HOST:
                links += f"<a href='/p/{step + 1}'>next</a>"
            body = f"<html><body><h1>{host} {step}</h1>{links}</body></html>"     # distinct: no duplicate content
            resp = web.Response(text=body, content_type="text/html")
        self.hits.append(Hit(host, request.path, resp.status, time.monotonic()))
        return resp

    def requests(self, host: str, path: str | None = None) -> list[Hit]:
        return [h for h in self.hits if h.host == host and (path is None or h.path == path)]

    def pages(self, host: str) -> list[str]:
        return [h.path for h in self.hits if h.host == host and h.path != "/robots.txt"]

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


def node_config(tmp: Path, server: Web, hosts: list[str], **extra) -> object:
    return from_dict(one_node_config(
        tmp / "node-{node}", seeds=[f"http://{h}.web.test:{server.port}/" for h in hosts],
        crawl=extra.pop("crawl", {}),
        workers=4,
        politeness={"delay_factor": 1.0},
        fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
        metrics={"enabled": False, "progress_interval_s": 0},
        **extra,
    ))


async def crawl(config, **kwargs) -> dict:
    return (await crawl_node(config, **kwargs))[1]


async def crawl_node(config, **kwargs) -> tuple[Node, dict]:
    node = Node(config, 0, **kwargs)
    return node, await asyncio.wait_for(node.run(), CRAWL_TIMEOUT_S)


def exposed(node: Node) -> dict[str, float]:
    """What the node's /metrics says (the same registry, rendered in process): sample -> value summed
    over the labels given in the key ("name{kind=page}" keeps only kind="page")."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(generate_latest(node.registry).decode()):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
            if sample.labels.get("kind") == "page":
                key = sample.name + "{kind=page}"
                out[key] = out.get(key, 0.0) + sample.value
    return out


async def test_restarted_node_does_not_fetch_robots_again_and_continues_its_totals(tmp_path):
    hosts = ["a", "b", "c"]
    async with Web() as server:
        first = await crawl(node_config(tmp_path, server, hosts, crawl={"max_pages": 6}))
        assert first["stop"] == "max_pages" and first["robots_fetches"] == 3
        state = tmp_path / "node-0" / "state"
        assert {p.name for p in state.iterdir()} >= {"robots.jsonl", "dns.jsonl", "counters.jsonl"}
        fetched_first = sum(len(server.pages(h)) for h in hosts)
        assert fetched_first < len(hosts) * PAGES_PER_HOST

        node, second = await crawl_node(node_config(tmp_path, server, hosts))
    assert second["stop"] == "done" and second["resumed"]
    for host in hosts:
        assert len(server.requests(host, "/robots.txt")) == 1, host        # not fetched again after the restart
        assert sorted(server.pages(host)) == ["/"] + [f"/p/{i}" for i in range(1, PAGES_PER_HOST)]
    assert second["run"]["robots_fetches"] == 0 and second["robots_fetches"] == 3
    # Totals go on: the second summary counts both runs, its "run" only itself.
    assert second["pages"] == second["fetches"] == len(hosts) * PAGES_PER_HOST
    assert second["run"]["fetches"] == len(hosts) * PAGES_PER_HOST - fetched_first
    assert second["status"] == {"2xx": len(hosts) * PAGES_PER_HOST}
    assert first["robots_denied"] <= second["robots_denied"] == len(hosts)     # each /private/x, once
    counters = StateStore(tmp_path / "node-0" / "state").read("counters", 1)[0]["counters"]
    assert counters["fetches"] == len(hosts) * PAGES_PER_HOST           # the clean stop saved the totals
    # /metrics: counters start at 0 in each process (Prometheus semantics), the crawl_* gauges go on.
    metrics = exposed(node)
    assert metrics["crawler_pages_total{kind=page}"] == second["run"]["pages"]
    assert metrics["crawler_crawl_pages{kind=page}"] == second["pages"] == len(hosts) * PAGES_PER_HOST


async def test_unreachable_robots_parks_urls_until_it_answers_then_gives_up(tmp_path):
    failing = {"flaky": 2, "down": 10 ** 6}          # robots.txt requests answered 503 before it answers 200
    retry_s, max_retries = 0.3, 2

    def robots_status(host: str, n: int) -> int:
        return 503 if n < failing.get(host, 0) else 200

    async with Web(robots_status) as server:
        summary = await crawl(node_config(tmp_path, server, ["flaky", "down"],
                                          robots={"error_retry_s": retry_s, "error_max_retries": max_retries},
                                          store={"crawl_log": True}))
    flaky_robots = server.requests("flaky", "/robots.txt")
    assert [h.status for h in flaky_robots] == [503, 503, 200]
    # The origin was held back error_retry_s between robots.txt attempts, and no page went out before it answered.
    gaps = [b.at - a.at for a, b in zip(flaky_robots, flaky_robots[1:])]
    assert min(gaps) >= retry_s - 0.01, gaps
    assert all(h.at > flaky_robots[-1].at for h in server.requests("flaky") if h.path != "/robots.txt")
    assert sorted(server.pages("flaky")) == ["/"] + [f"/p/{i}" for i in range(1, PAGES_PER_HOST)]
    # "down" never answers: robots.txt tried 1 + error_max_retries times, then its URL is dropped, logged.
    assert [h.status for h in server.requests("down")] == [503] * (1 + max_retries)
    assert summary["stop"] == "done"
    assert summary["robots_parked"] == 2 + max_retries and summary["robots_unreachable"] == 1
    log = [json.loads(line) for line in (tmp_path / "node-0" / "crawl.log.jsonl").read_text().splitlines()]
    dropped = [r for r in log if r["reason"] == "robots_error_disallowed"]
    assert [r["url"] for r in dropped] == [f"http://down.web.test:{server.port}/"]


async def test_parked_urls_survive_a_restart(tmp_path):
    """A clean stop while robots.txt fails: the URL stays queued, the error entry and its count are saved."""
    state = {"answer": 503}
    async with Web(lambda host, n: state["answer"]) as server:
        config = node_config(tmp_path, server, ["flaky"], robots={"error_retry_s": 0.5, "error_max_retries": 3})
        node = Node(config, 0)
        run = asyncio.create_task(node.run())
        deadline = time.monotonic() + CRAWL_TIMEOUT_S
        while node.counters.robots_parked < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        node.stop("SIGTERM")
        first = await asyncio.wait_for(run, CRAWL_TIMEOUT_S)
        assert first["robots_parked"] == 1 and server.pages("flaky") == []
        saved = StateStore(tmp_path / "node-0" / "state").read("robots", 1)
        assert [(r["source"], r["failures"]) for r in saved] == [("error", 1)]
        state["answer"] = 200
        second = await crawl(config)
    assert second["stop"] == "done" and second["robots_parked"] >= 1
    assert len(server.pages("flaky")) == PAGES_PER_HOST
    assert [h.status for h in server.requests("flaky", "/robots.txt")] == [503, 200]


@pytest.mark.skipif(find_binary("dnsmasq") is None, reason="dnsmasq binary not installed")
async def test_dns_cache_restored_from_the_node_state_asks_no_query(tmp_path):
    with Dnsmasq(tmp_path, ["--host-record=a.test,127.0.0.5"]) as dnsmasq:
        config = DnsConfig(nameservers=[dnsmasq.nameserver], timeout_s=1.0, tries=1, min_ttl_s=60.0)
        store = StateStore(tmp_path / "state")
        first = Resolver(config)
        try:
            assert await first.resolve_host("a.test") == ["127.0.0.5"]
            with pytest.raises(DnsError):
                await first.resolve_host("nope.test")
            await first.save(store)
        finally:
            await first.close()
        before = (dnsmasq.queries("a.test"), dnsmasq.queries("nope.test"))
        second = Resolver(config)
        try:
            second.restore(store)
            assert await second.resolve_host("a.test") == ["127.0.0.5"]
            with pytest.raises(DnsError):
                await second.resolve_host("nope.test")
            await asyncio.sleep(0.15)                          # a query, had one gone out, reaches the log
            assert (dnsmasq.queries("a.test"), dnsmasq.queries("nope.test")) == before == (1, 1)
            assert second.stats()["queries"] == 0
        finally:
            await second.close()

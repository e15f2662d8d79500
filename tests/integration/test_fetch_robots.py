"""RobotsCache against a real server: one loopback server plays many origins, told apart by Host."""

from __future__ import annotations

import asyncio
import gzip
import random

import pytest
from aiohttp import web
from tests.support.ports import free_port

from crawler.config.schema import DnsConfig, FetchConfig, RobotsConfig
from crawler.fetch import result as R
from crawler.fetch.dns import Resolver
from crawler.fetch.fetcher import Fetcher
from crawler.fetch.robots import MAX_REDIRECTS, RobotsCache

UA = "ExampleCrawler/1.0 (+https://example.org/crawler)"
CAP_BYTES = 1000
ERROR_RETRY_S = 0.3

GROUPS = b"""# groups chosen by product token
User-agent: *
Disallow: /

User-agent: examplecrawler
Disallow: /private/
Allow: /private/open
Crawl-delay: 2.5

User-agent: OtherBot
Allow: /

Sitemap: http://ok.robots.test/sitemap.xml
"""
EARLY = b"User-agent: *\nDisallow: /early/\n"
LATE = b"Disallow: /late/\n"


def big_robots() -> bytes:
    padding = b"".join(b"# padding line %04d to push the next rule past the cap\n" % i for i in range(100))
    return EARLY + padding + LATE


def make_app(hits: dict[str, int]) -> web.Application:
    async def robots(request: web.Request) -> web.StreamResponse:
        host = request.host.split(":")[0]
        name = host.split(".")[0]
        hits[name] = hits.get(name, 0) + 1
        port = request.url.port
        if name == "ok":
            return web.Response(body=GROUPS, content_type="text/plain")
        if name == "missing":
            return web.Response(status=404)
        if name == "forbidden":
            return web.Response(status=403)
        if name == "broken":
            return web.Response(status=500)
        if name == "busy":
            return web.Response(status=429, headers={"Retry-After": "60"})
        if name == "moved":
            if request.path == "/robots.txt":
                return web.Response(status=301, headers={"Location": "/real-robots.txt"})
            return web.Response(body=b"User-agent: *\nDisallow: /r/\n")
        if name == "cross":
            return web.Response(status=302, headers={"Location": f"http://ok.robots.test:{port}/robots.txt"})
        if name == "crossbroken":
            return web.Response(status=302, headers={"Location": f"http://broken.robots.test:{port}/robots.txt"})
        if name == "loop":
            return web.Response(status=302, headers={"Location": f"/robots.txt?hop={hits[name]}"})
        if name == "badredirect":
            return web.Response(status=302, headers={"Location": "ftp://example.org/robots.txt"})
        if name == "big":
            return web.Response(body=big_robots())
        if name == "junk":
            return web.Response(body=random.Random(7).randbytes(10_000), content_type="application/octet-stream")
        if name == "hugeline":
            return web.Response(body=b"User-agent: *\nDisallow: /" + b"a*" * 200_000 + b"\nDisallow: /x\n")
        if name == "silent":
            await asyncio.sleep(30)
            return web.Response(status=200)
        if name == "gz":
            return web.Response(body=gzip.compress(b"User-agent: *\nDisallow: /zipped/\n"),
                                headers={"Content-Encoding": "gzip"})
        return web.Response(status=404)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", robots)
    return app


@pytest.fixture
async def site():
    hits: dict[str, int] = {}
    runner = web.AppRunner(make_app(hits), shutdown_timeout=1.0)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]
    try:
        yield port, hits
    finally:
        await runner.cleanup()


@pytest.fixture
async def make_cache():
    made = []

    async def factory(dns: DnsConfig | None = None, **robots_values) -> RobotsCache:
        dns = dns or DnsConfig(overrides={"*.robots.test": "127.0.0.1"})
        fetch_config = FetchConfig(allow_private_networks=False, connect_timeout_s=1.0, read_timeout_s=2.0,
                                   total_timeout_s=5.0, dns=dns)
        resolver = Resolver(dns)
        fetcher = Fetcher(fetch_config, resolver, UA)
        values = dict(max_bytes=CAP_BYTES, cache_s=60.0, error_retry_s=ERROR_RETRY_S)
        values.update(robots_values)
        made.append((fetcher, resolver))
        return RobotsCache(fetcher, RobotsConfig(**values), UA)

    yield factory
    for fetcher, resolver in made:
        await fetcher.close()
        await resolver.close()


def origin(name: str, port: int) -> str:
    return f"http://{name}.robots.test:{port}"


async def test_groups_allow_disallow_crawl_delay(site, make_cache):
    port, hits = site
    cache = await make_cache(max_bytes=512000)
    base = origin("ok", port)
    assert cache.lookup(base) is None
    rules, results = await cache.fetch(base)
    assert [r.status for r in results] == [200] and results[0].reason == R.OK
    assert rules.source == "fetched" and rules.crawl_delay_s == 2.5
    assert rules.allowed(base + "/index.html")                 # our group, not "*"
    assert not rules.allowed(base + "/private/secret")
    assert rules.allowed(base + "/private/open/x")
    assert rules.sitemaps == ("http://ok.robots.test/sitemap.xml",)
    assert cache.lookup(base) is rules and hits["ok"] == 1
    assert cache.stats()["lookups"] == {"hit": 1, "miss": 1, "expired": 0}


@pytest.mark.parametrize("name", ["missing", "forbidden"])
async def test_4xx_allows_all(site, make_cache, name):
    port, _ = site
    rules, results = await (await make_cache()).fetch(origin(name, port))
    assert rules.source == "missing" and results[0].status in (403, 404)
    assert rules.allowed(origin(name, port) + "/anything")


async def test_5xx_disallows_all_then_retries(site, make_cache):
    port, hits = site
    cache = await make_cache()
    base = origin("broken", port)
    rules, results = await cache.fetch(base)
    assert rules.source == "error" and results[0].status == 500 and rules.reason == "http_500"
    assert not rules.allowed(base + "/") and cache.lookup(base) is rules
    await asyncio.sleep(ERROR_RETRY_S + 0.05)
    assert cache.lookup(base) is None                          # expired: the caller fetches again
    rules, _ = await cache.fetch(base)
    assert rules.source == "error" and hits["broken"] == 2 and rules.failures == 2
    assert cache.stats()["lookups"]["expired"] == 1


async def test_error_waits_grow_by_the_backoff_up_to_the_cap(site, make_cache):
    """Failures in a row wait error_retry_s, x error_backoff each time, at most error_retry_max_s."""
    port, _ = site
    cache = await make_cache(error_retry_s=0.05, error_backoff=3.0, error_retry_max_s=0.5)
    base = origin("broken", port)
    waits = []
    for _ in range(4):
        rules, _ = await cache.fetch(base)
        waits.append(cache.remaining_s(rules))
        await asyncio.sleep(cache.remaining_s(rules) + 0.01)
    expected = [0.05, 0.15, 0.45, 0.5]
    assert all(e - 0.05 <= w <= e for w, e in zip(waits, expected)), waits


async def test_429_is_an_error_held_for_its_retry_after(site, make_cache):
    """busy answers 429 with Retry-After: 60; the wait is that, not the back-off's first step."""
    port, _ = site
    cache = await make_cache()
    rules, _ = await cache.fetch(origin("busy", port))
    assert rules.source == "error" and not rules.allowed(origin("busy", port) + "/")
    assert 59 < cache.remaining_s(rules) <= 60


async def test_retry_after_is_capped_by_max_retry_after_s(site, make_cache):
    port, _ = site
    cache = await make_cache()
    cache._max_retry_after_s = 5.0
    rules, _ = await cache.fetch(origin("busy", port))
    assert 4 < cache.remaining_s(rules) <= 5


async def test_a_robots_txt_that_never_answers_is_cut_at_fetch_timeout_s(site, make_cache):
    """The server accepts and stays silent: the fetch ends at robots.fetch_timeout_s, a transient error."""
    port, hits = site
    cache = await make_cache(fetch_timeout_s=0.3)
    started = asyncio.get_running_loop().time()
    rules, results = await cache.fetch(origin("silent", port))
    took = asyncio.get_running_loop().time() - started
    assert rules.source == "error" and results[-1].reason == R.TOTAL_TIMEOUT
    assert "robots.fetch_timeout_s" in results[-1].detail and 0.25 < took < 1.5 and hits["silent"] == 1


async def test_unreachable_disallows(make_cache):
    port = free_port()
    rules, results = await (await make_cache()).fetch(origin("down", port))
    assert rules.source == "error" and results[0].reason == R.CONNECT_ERROR
    assert not rules.allowed(origin("down", port) + "/page")


async def test_private_origin_is_dead_for_dead_cache_s(make_cache):
    """A permanent failure (here: only a private address) is not retried on the back-off: source dead."""
    cache = await make_cache(dead_cache_s=60.0)
    rules, results = await cache.fetch("http://127.0.0.1:9")
    assert rules.source == "dead" and rules.reason == R.PRIVATE_ADDRESS and results[0].reason == R.PRIVATE_ADDRESS
    assert not rules.allowed("http://127.0.0.1:9/x") and 59 < cache.remaining_s(rules) <= 60
    assert cache.lookup("http://127.0.0.1:9") is rules


async def test_nxdomain_origin_is_dead(make_cache):
    """A name that does not exist: dead, with the DNS reason (dnsmasq answers NXDOMAIN for unknown names)."""
    from tests.support.processes import require_binary
    from tests.support.servers import Dnsmasq
    require_binary("dnsmasq", "dnsmasq-base")
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp, Dnsmasq(Path(tmp), ["--address=/known.test/127.0.0.1"]) as dns:
        cache = await make_cache(dns=DnsConfig(nameservers=[dns.nameserver], timeout_s=1, tries=1))
        rules, results = await cache.fetch("http://nowhere.test")
    assert rules.source == "dead" and rules.reason == R.DNS_NXDOMAIN == results[0].reason


async def test_redirect_same_origin(site, make_cache):
    port, _ = site
    base = origin("moved", port)
    rules, results = await (await make_cache()).fetch(base)
    assert [r.status for r in results] == [301, 200]
    assert results[1].url == base + "/real-robots.txt"
    assert rules.source == "fetched" and not rules.allowed(base + "/r/x") and rules.allowed(base + "/s")


async def test_redirect_cross_origin_is_followed(site, make_cache):
    port, hits = site
    base = origin("cross", port)
    cache = await make_cache(max_bytes=512000)
    rules, results = await cache.fetch(base)
    assert [r.status for r in results] == [302, 200] and hits["ok"] == 1
    assert not rules.allowed(base + "/private/x")              # ok's rules, applied to cross's origin
    assert cache.lookup(base) is rules
    # The chain ended at ok's own /robots.txt: that answer is cached for ok too, and not fetched again.
    target = cache.lookup(origin("ok", port))
    assert target is not None and target.source == "fetched" and not target.allowed(origin("ok", port) + "/private/x")
    assert cache.stats()["shared_with_target"] == 1 and hits["ok"] == 1


async def test_redirect_target_with_a_fresh_entry_keeps_it_and_is_not_fetched_again(site, make_cache):
    """ok's robots.txt was fetched first; cross redirects to it: its answer is taken, not requested again
    (http -> https after the https origin was crawled first)."""
    port, hits = site
    cache = await make_cache(max_bytes=512000)
    own, _ = await cache.fetch(origin("ok", port))
    rules, results = await cache.fetch(origin("cross", port))
    assert [r.status for r in results] == [302] and hits["ok"] == 1 and hits["cross"] == 1
    assert rules.source == "fetched" and not rules.allowed(origin("cross", port) + "/private/x")
    assert cache.lookup(origin("cross", port)) is rules
    assert cache.lookup(origin("ok", port)) is own
    assert cache.stats()["shared_with_target"] == 0 and cache.stats()["reused_from_target"] == 1


async def test_redirect_target_in_error_is_fetched_again(site, make_cache):
    """An error entry of the target is being retried: the chain does not reuse it."""
    port, hits = site
    cache = await make_cache(max_bytes=512000)
    await cache.fetch(origin("broken", port))
    assert hits["broken"] == 1
    await cache.fetch(origin("crossbroken", port))
    assert hits["broken"] == 2 and cache.stats()["reused_from_target"] == 0


async def test_redirect_to_another_path_is_not_shared(site, make_cache):
    """moved/robots.txt -> moved/real-robots.txt: same origin; nothing cached elsewhere."""
    port, _ = site
    cache = await make_cache()
    await cache.fetch(origin("moved", port))
    assert cache.stats()["shared_with_target"] == 0 and cache.stats()["cache_size"] == 1


async def test_redirect_loop_gives_up_as_missing(site, make_cache):
    port, hits = site
    rules, results = await (await make_cache()).fetch(origin("loop", port))
    assert len(results) == MAX_REDIRECTS + 1 and all(r.status == 302 for r in results)
    assert rules.source == "missing" and hits["loop"] == MAX_REDIRECTS + 1


async def test_redirect_to_unfetchable_target(site, make_cache):
    port, _ = site
    rules, results = await (await make_cache()).fetch(origin("badredirect", port))
    assert [r.reason for r in results] == [R.OK, R.UNSUPPORTED_SCHEME]
    assert rules.source == "missing"


async def test_body_over_cap_is_cut_not_an_error(site, make_cache):
    port, _ = site
    base = origin("big", port)
    rules, results = await (await make_cache()).fetch(base)
    assert len(big_robots()) > CAP_BYTES
    assert results[0].reason == R.BODY_TOO_LARGE and len(results[0].raw_body) == CAP_BYTES
    assert rules.source == "fetched"
    assert not rules.allowed(base + "/early/1")
    assert rules.allowed(base + "/late/1")                     # the rule beyond the cap is ignored


async def test_binary_junk_and_huge_lines_do_not_raise(site, make_cache):
    port, _ = site
    cache = await make_cache(max_bytes=512000)
    for name in ("junk", "hugeline"):
        base = origin(name, port)
        rules, _ = await cache.fetch(base)
        assert rules.source == "fetched"
        assert rules.allowed(base + "/x") is (name == "junk")  # hugeline still has "Disallow: /x"
        rules.allowed(base + "/" + "a" * 5000)


async def test_gzip_robots(site, make_cache):
    port, _ = site
    base = origin("gz", port)
    rules, _ = await (await make_cache()).fetch(base)
    assert not rules.allowed(base + "/zipped/a") and rules.allowed(base + "/plain")


async def test_disabled_allows_everything_without_fetching(site, make_cache):
    port, hits = site
    cache = await make_cache(enabled=False)
    rules = cache.lookup(origin("broken", port))
    assert rules is not None and rules.source == "disabled" and rules.allowed(origin("broken", port) + "/")
    rules, results = await cache.fetch(origin("broken", port))
    assert results == [] and hits == {}


async def test_stats(site, make_cache):
    port, _ = site
    cache = await make_cache()
    for name in ("ok", "missing", "broken", "moved"):
        await cache.fetch(origin(name, port))
    stats = cache.stats()
    assert stats["by_source"] == {"fetched": 2, "missing": 1, "error": 1, "dead": 0}
    assert stats["requests"] == 5 and stats["redirects"] == 1 and stats["cache_size"] == 4

"""The caching resolver against a real dnsmasq on a loopback port; its query log shows what reached it."""

from __future__ import annotations

import asyncio
import time

import pytest
from tests.support.ports import free_port, free_udp_port
from tests.support.processes import find_binary
from tests.support.servers import Dnsmasq

from crawler.config.schema import DnsConfig, FetchConfig
from crawler.fetch import result as R
from crawler.fetch.dns import DnsError, Resolver
from crawler.fetch.fetcher import Fetcher

DNSMASQ = find_binary("dnsmasq")
LOCAL_TTL_S = 1                   # TTL dnsmasq gives its configured answers
POLL_S = 0.02
SETTLE_S = 0.15                   # time for a query that should not happen to reach the log

pytestmark = pytest.mark.skipif(DNSMASQ is None, reason="dnsmasq binary not installed")


async def wait_queries(server: Dnsmasq, name: str, count: int) -> int:
    deadline = time.monotonic() + 2.0
    while server.queries(name) < count and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
    await asyncio.sleep(SETTLE_S)
    return server.queries(name)


@pytest.fixture
def dnsmasq(tmp_path):
    server = Dnsmasq(tmp_path, [
        "--address=/web.test/127.0.0.1", "--host-record=a.test,127.0.0.5", "--host-record=pub.test,93.184.216.34",
        "--host-record=mixed.test,10.0.0.7", "--host-record=mixed.test,93.184.216.35",
        "--host-record=six.test,2001:db8::6"], ttl_s=LOCAL_TTL_S)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def make_resolver(dnsmasq):
    made = []

    def factory(**values) -> Resolver:
        allow = values.pop("allow_private_networks", True)
        values.setdefault("min_ttl_s", 0.0)
        config = DnsConfig(nameservers=[f"127.0.0.1:{dnsmasq.port}"], timeout_s=1.0, tries=1, **values)
        resolver = Resolver(config, allow_private_networks=allow)
        made.append(resolver)
        return resolver

    yield factory
    for resolver in made:
        await resolver.close()


async def test_answers_are_cached(dnsmasq, make_resolver):
    resolver = make_resolver()
    assert await resolver.resolve_host("a.test") == ["127.0.0.5"]
    assert await resolver.resolve_host("A.Test") == ["127.0.0.5"]
    assert await resolver.resolve_host("host.web.test") == ["127.0.0.1"]
    assert await wait_queries(dnsmasq, "a.test", 1) == 1
    lookups = resolver.stats()["lookups"]
    assert (lookups["miss"], lookups["hit"]) == (2, 1)
    assert resolver.stats()["latency_count"] == 2


async def test_nxdomain_is_negatively_cached(dnsmasq, make_resolver):
    resolver = make_resolver()
    for _ in range(3):
        with pytest.raises(DnsError) as err:
            await resolver.resolve_host("nope.test")
        assert err.value.reason == R.DNS_NXDOMAIN
    assert await wait_queries(dnsmasq, "nope.test", 1) == 1
    stats = resolver.stats()
    assert stats["lookups"]["negative_hit"] == 2 and stats["failures"][R.DNS_NXDOMAIN] == 1


async def test_refused_is_transient_and_cached_only_error_ttl_s(dnsmasq, make_resolver):
    """dnsmasq refuses names it neither knows nor may forward (REFUSED): dns_error, a transient failure,
    cached for dns.error_ttl_s only, so a later retry asks the nameserver again; NXDOMAIN keeps its
    longer negative_ttl_s."""
    resolver = make_resolver(error_ttl_s=0.3, negative_ttl_s=60.0)
    for name, reason in (("x.example", R.DNS_ERROR), ("nope.test", R.DNS_NXDOMAIN)):
        for _ in range(2):
            with pytest.raises(DnsError) as err:
                await resolver.resolve_host(name)
            assert err.value.reason == reason, name
    assert await wait_queries(dnsmasq, "x.example", 1) == 1 and dnsmasq.queries("nope.test") == 1
    await asyncio.sleep(0.35)
    for name in ("x.example", "nope.test"):
        with pytest.raises(DnsError):
            await resolver.resolve_host(name)
    assert await wait_queries(dnsmasq, "x.example", 2) == 2          # asked again after error_ttl_s
    assert dnsmasq.queries("nope.test") == 1                         # still answered from the cache


async def test_ttl_is_respected(dnsmasq, make_resolver):
    resolver = make_resolver()
    await resolver.resolve_host("a.test")
    await resolver.resolve_host("a.test")
    assert await wait_queries(dnsmasq, "a.test", 1) == 1
    await asyncio.sleep(LOCAL_TTL_S + 0.1)                 # the answer's TTL has run out
    await resolver.resolve_host("a.test")
    assert await wait_queries(dnsmasq, "a.test", 2) == 2


async def test_min_ttl_clamps_short_answers(dnsmasq, make_resolver):
    resolver = make_resolver(min_ttl_s=30.0)
    await resolver.resolve_host("a.test")
    await asyncio.sleep(LOCAL_TTL_S + 0.1)
    await resolver.resolve_host("a.test")
    assert await wait_queries(dnsmasq, "a.test", 1) == 1


async def test_max_ttl_clamps_long_answers(dnsmasq, make_resolver):
    resolver = make_resolver(min_ttl_s=0.0, max_ttl_s=0.0)
    await resolver.resolve_host("a.test")
    await resolver.resolve_host("a.test")
    # Our cache let both through; c-ares' own query cache (which honours the record TTL and cannot be
    # switched off through pycares) may answer the second, so count at our side.
    assert resolver.stats()["queries"] == 2 and resolver.stats()["lookups"]["miss"] == 2


async def test_concurrent_lookups_are_coalesced(dnsmasq, make_resolver):
    resolver = make_resolver()
    answers = await asyncio.gather(*(resolver.resolve_host("c.web.test") for _ in range(20)))
    assert all(a == ["127.0.0.1"] for a in answers)
    assert await wait_queries(dnsmasq, "c.web.test", 1) == 1
    assert resolver.stats()["lookups"]["coalesced"] == 19


async def test_overrides_never_query(dnsmasq, make_resolver):
    resolver = make_resolver(overrides={"*.web.test": "127.0.0.9", "a.test": "127.0.0.8"})
    assert await resolver.resolve_host("x.y.web.test") == ["127.0.0.9"]
    assert await resolver.resolve_host("a.test") == ["127.0.0.8"]
    assert resolver.is_override("X.WEB.TEST") and not resolver.is_override("web.test")
    await asyncio.sleep(SETTLE_S)
    assert dnsmasq.queries("x.y.web.test") == 0 and dnsmasq.queries("a.test") == 0
    assert resolver.stats()["lookups"]["override"] == 2 and resolver.stats()["queries"] == 0


async def test_ipv6_only_name_falls_back_to_aaaa(dnsmasq, make_resolver):
    resolver = make_resolver()
    assert await resolver.resolve_host("six.test") == ["2001:db8::6"]


async def test_unreachable_nameserver_is_dns_error(make_resolver):
    port = free_udp_port()                                  # nothing listens there
    resolver = Resolver(DnsConfig(nameservers=[f"127.0.0.1:{port}"], timeout_s=0.2, tries=1))
    try:
        with pytest.raises(DnsError) as err:
            await resolver.resolve_host("a.test")
        assert err.value.reason == R.DNS_ERROR
    finally:
        await resolver.close()


async def test_guard_filters_resolved_addresses(dnsmasq, make_resolver):
    resolver = make_resolver(allow_private_networks=False)
    infos = await resolver.resolve("pub.test", 80)
    assert [i["host"] for i in infos] == ["93.184.216.34"] and infos[0]["port"] == 80
    infos = await resolver.resolve("mixed.test", 80)
    assert [i["host"] for i in infos] == ["93.184.216.35"]
    with pytest.raises(OSError) as err:
        await resolver.resolve("a.test", 80)
    assert err.value.reason == R.PRIVATE_ADDRESS
    assert resolver.stats()["refused_private"] == 1


async def test_fetch_through_dnsmasq(dnsmasq, make_resolver):
    """A name resolving to loopback is refused by the guard, fetched when private networks are allowed."""
    dns = DnsConfig(nameservers=[f"127.0.0.1:{dnsmasq.port}"], timeout_s=1.0, tries=1)
    for allow, expected in ((False, R.PRIVATE_ADDRESS), (True, R.CONNECT_ERROR)):
        resolver = Resolver(dns, allow_private_networks=allow)
        fetcher = Fetcher(FetchConfig(allow_private_networks=allow, dns=dns), resolver, "ExampleCrawler/1.0")
        try:
            port = free_port()                              # a closed port: connecting is refused
            res = await fetcher.fetch(f"http://www.web.test:{port}/")
            assert res.reason == expected, res.detail
            res = await fetcher.fetch(f"http://missing.test:{port}/")
            assert res.reason == R.DNS_NXDOMAIN
        finally:
            await fetcher.close()
            await resolver.close()

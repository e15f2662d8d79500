"""Resolver behaviour that needs no DNS server: config parsing, overrides, literals, the guard hook, eviction."""

from __future__ import annotations

import socket

import pytest

from crawler.config.schema import DnsConfig
from crawler.fetch import result as R
from crawler.fetch.dns import Resolver, _Entry, _parse_nameservers
from crawler.fetch.guard import PrivateAddressError


@pytest.mark.parametrize("entries, expected", [
    ([], []),
    (["127.0.0.1"], ["127.0.0.1"]),
    (["127.0.0.1:5353", " 10.0.0.1 "], ["127.0.0.1:5353", "10.0.0.1"]),
    (["::1"], ["[::1]"]),
    (["[::1]:5353"], ["[::1]:5353"]),
])
def test_nameservers(entries, expected):
    assert _parse_nameservers(entries) == expected


@pytest.mark.parametrize("bad", ["localhost", "127.0.0.1:", "127.0.0.1:99999", "[::1", "1.2.3.4:x"])
def test_bad_nameserver_names_the_key(bad):
    with pytest.raises(ValueError, match="fetch.dns.nameservers"):
        Resolver(DnsConfig(nameservers=[bad]))


@pytest.mark.parametrize("overrides", [{"a.test": "not-an-ip"}, {"a.test": ""}])
def test_bad_override_names_the_key(overrides):
    with pytest.raises(ValueError, match="fetch.dns.overrides"):
        Resolver(DnsConfig(overrides=overrides))


def make(**overrides) -> Resolver:
    return Resolver(DnsConfig(overrides=overrides, nameservers=["127.0.0.1:9"]))


def test_override_matching():
    resolver = make(**{"*.web.test": "127.0.0.1", "*.deep.web.test": "127.0.0.2", "exact.org": "10.0.0.1"})
    assert resolver.is_override("a.web.test") and resolver.is_override("A.B.WEB.TEST.")
    assert not resolver.is_override("web.test") and not resolver.is_override("xweb.test")
    assert resolver.is_override("exact.org") and not resolver.is_override("sub.exact.org")
    assert resolver._override("x.deep.web.test") == ("127.0.0.2",)     # longest suffix wins


def test_catch_all_override():
    resolver = make(**{"*": "127.0.0.1"})
    assert resolver.is_override("anything.example") and resolver.is_override("localhost")


async def test_overrides_and_literals_resolve_without_queries():
    resolver = make(**{"*.web.test": "127.0.0.1, 127.0.0.3"})
    try:
        assert await resolver.resolve_host("x.web.test") == ["127.0.0.1", "127.0.0.3"]
        assert await resolver.resolve_host("93.184.216.34") == ["93.184.216.34"]
        stats = resolver.stats()
        assert stats["lookups"]["override"] == 1 and stats["lookups"]["literal"] == 1 and stats["queries"] == 0
    finally:
        await resolver.close()


async def test_aiohttp_hook_trusts_overrides_and_guards_literals():
    resolver = make(**{"*.web.test": "127.0.0.1", "v6.test": "::1"})
    try:
        infos = await resolver.resolve("x.web.test", 8080, socket.AF_UNSPEC)
        assert infos == [{"hostname": "x.web.test", "host": "127.0.0.1", "port": 8080, "family": socket.AF_INET,
                          "proto": 0, "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV}]
        assert (await resolver.resolve("v6.test", 80, socket.AF_UNSPEC))[0]["family"] == socket.AF_INET6
        with pytest.raises(OSError):
            await resolver.resolve("v6.test", 80, socket.AF_INET)
        with pytest.raises(PrivateAddressError) as err:
            await resolver.resolve("10.1.2.3", 80)
        assert err.value.reason == R.PRIVATE_ADDRESS and resolver.stats()["refused_private"] == 1
    finally:
        await resolver.close()


async def test_cache_is_bounded():
    now = [0.0]
    resolver = Resolver(DnsConfig(), max_entries=8, clock=lambda: now[0])
    try:
        for i in range(20):
            resolver._store(f"h{i}.test", _Entry(("93.184.216.34",), ("93.184.216.34",), None, "", 100.0))
        assert len(resolver._cache) <= 8 and resolver.stats()["evictions"] > 0
        assert "h19.test" in resolver._cache                    # the newest survive
    finally:
        await resolver.close()


async def test_invalid_tld_answers_nxdomain_without_a_query():
    """RFC 6761: names under .invalid never resolve; no query may leave the machine."""
    from crawler.config.schema import DnsConfig
    from crawler.fetch.dns import DnsError, Resolver

    # A nameserver nobody listens on: if a query were sent it would fail as dns_error, not nxdomain.
    resolver = Resolver(DnsConfig(nameservers=["127.0.0.1:9"], timeout_s=0.2, tries=1))
    try:
        for name in ("nx1.gone.invalid", "INVALID.", "a.b.invalid"):
            with pytest.raises(DnsError) as info:
                await resolver.resolve_host(name)
            assert info.value.reason == "dns_nxdomain"
        stats = resolver.stats()
        assert stats["lookups"]["special_use"] == 3
        assert stats["queries"] == 0
    finally:
        await resolver.close()

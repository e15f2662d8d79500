"""The caching DNS resolver: one query per host name per TTL, however many fetches.

A crawl touches each host many times and many hosts once; without a cache the
resolver is the first bottleneck (Mercator; Olston & Najork). This module:

- answers `fetch.dns.overrides` first (exact names, `*.suffix`, or `*` for
  every name; case-insensitive), like curl's --resolve, with no query at all;
- otherwise asks `fetch.dns.nameservers` (ADDRESS or ADDRESS:PORT; empty =
  the system's) through aiodns/c-ares: A records, AAAA only when a name has
  no A record;
- caches answers for their TTL clamped to [min_ttl_s, max_ttl_s], NXDOMAIN
  and NODATA (the name has no address: permanent, `dns_nxdomain`) for
  negative_ttl_s, and transient failures (SERVFAIL, REFUSED, timeouts, an
  unreachable resolver: `dns_error`) only for error_ttl_s, shorter than the
  robots.txt retry back-off, so that a retry asks the nameserver again;
- coalesces concurrent lookups of one name into one query.

c-ares (1.34, inside pycares 5) also keeps a query cache of its own, bounded
by each record's TTL (at most an hour) and not configurable through pycares;
so when `max_ttl_s` is shorter than a record's TTL, the re-query may be
answered by c-ares without reaching the nameserver (c-ares never serves an
answer past its TTL).

`Resolver` is also the aiohttp resolver of the fetcher's connector
(`resolve()`); that hook is where the private-network guard filters resolved
addresses (see `guard.py`), trusting override addresses. aiohttp's own DNS
cache is off so every connection comes through here.

Checkpoint (`save`/`restore`, the node's state protocol, crawler/state.py):
cached answers, positive and negative, are saved with their expiry as
wall-clock time; a restarted node restores those still fresh. The guard is
applied again to the saved addresses (what a file says is public is not
trusted). Overrides are configuration, not state: never saved.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import aiodns
import pycares
from aiohttp.abc import AbstractResolver, ResolveResult

from crawler.config.schema import DnsConfig
from crawler.fetch.guard import PrivateAddressError, ip_literal, is_forbidden, is_forbidden_text
from crawler.fetch.result import DNS_ERROR, DNS_NXDOMAIN
from crawler.state import CacheState, StateStore

log = logging.getLogger(__name__)

DEFAULT_MAX_ENTRIES = 1_000_000          # cached names (positive and negative) before eviction
_EVICT_KEEP_FRACTION = 0.875             # a full cache is cut to this fraction in one pass (amortised O(1))
_NXDOMAIN_CODES = frozenset({pycares.errno.ARES_ENOTFOUND, pycares.errno.ARES_ENODATA})
_NUMERIC_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
_MAX_PORT = 65535
STATE_VERSION = 1                        # version of the dns part's state file (crawler/state.py)
_REASONS = frozenset({DNS_NXDOMAIN, DNS_ERROR})


class DnsError(OSError):
    """A host name could not be resolved; `reason` is dns_nxdomain or dns_error.

    An OSError (with errno None) so that aiohttp reports it as a DNS failure of
    the connection; the fetcher reads `reason` back from the exception chain.
    """

    def __init__(self, reason: str, host: str, detail: str = "") -> None:
        super().__init__(None, f"{host}: {detail or reason}")
        self.reason = reason
        self.host = host


@dataclass(slots=True)
class _Entry:
    """One cached answer: addresses (positive) or a failure reason (negative)."""

    addresses: tuple[str, ...]
    public: tuple[str, ...]          # the addresses the private-network guard lets through
    reason: str | None               # None for a positive answer
    detail: str
    expires: float                   # monotonic deadline


def _split_nameserver(entry: str) -> tuple[str, int | None]:
    """(address, port) of ADDRESS, ADDRESS:PORT, IPV6 or [IPV6]:PORT; ValueError if malformed."""
    text = entry.strip()
    port: str | None = None
    if text.startswith("["):
        addr, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(entry)
        port = rest[1:] or None
    elif text.count(":") == 1:
        addr, _, port = text.partition(":")
    else:
        addr = text
    ipaddress.ip_address(addr)
    if port is None:
        return addr, None
    if not port.isdigit() or not 0 < int(port) <= _MAX_PORT:
        raise ValueError(entry)
    return addr, int(port)


def _parse_nameservers(entries: list[str]) -> list[str]:
    servers = []
    for entry in entries:
        try:
            addr, port = _split_nameserver(entry)
        except ValueError:
            raise ValueError(f"fetch.dns.nameservers: {entry!r} is not ADDRESS or ADDRESS:PORT") from None
        host = f"[{addr}]" if ":" in addr else addr
        servers.append(host if port is None else f"{host}:{port}")
    return servers


def _parse_overrides(overrides: dict[str, str]) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """({exact name: addresses}, {".suffix" or "*": addresses}); ValueError names the bad key."""
    exact: dict[str, tuple[str, ...]] = {}
    suffixes: dict[str, tuple[str, ...]] = {}
    for key, value in overrides.items():
        addrs = tuple(a.strip() for a in str(value).split(",") if a.strip())
        for addr in addrs:
            if ip_literal(addr) is None:
                raise ValueError(f"fetch.dns.overrides[{key!r}]: {addr!r} is not an IP address")
        if not addrs:
            raise ValueError(f"fetch.dns.overrides[{key!r}]: no address given")
        name = key.strip().lower().rstrip(".")
        if name == "*":
            suffixes["*"] = addrs
        elif name.startswith("*."):
            suffixes[name[1:]] = addrs           # "*.web.test" -> ".web.test"
        else:
            exact[name] = addrs
    return exact, suffixes


class Resolver(AbstractResolver, CacheState):
    """Caching, coalescing aiodns resolver with static overrides; also aiohttp's resolver."""

    name = "dns"                        # its part name in the node's state protocol (crawler/state.py)
    state_version = STATE_VERSION

    def __init__(self, config: DnsConfig, *, allow_private_networks: bool = False,
                 max_entries: int = DEFAULT_MAX_ENTRIES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._allow_private = allow_private_networks
        self._servers = _parse_nameservers(config.nameservers)
        self._exact, self._suffixes = _parse_overrides(config.overrides)
        self._catch_all = self._suffixes.get("*")
        self._max_entries = max_entries
        self._clock = clock
        self._cache: dict[str, _Entry] = {}
        self._inflight: dict[str, asyncio.Task[_Entry]] = {}
        self._channel: aiodns.DNSResolver | None = None
        self._lookups = {"hit": 0, "miss": 0, "negative_hit": 0, "override": 0, "coalesced": 0, "literal": 0,
                         "special_use": 0}
        self._failures = {DNS_NXDOMAIN: 0, DNS_ERROR: 0}
        self._refused_private = 0
        self._queries = 0
        self._latency_sum_s = 0.0
        self._latency_count = 0
        self._evictions = 0
        self._restored = 0
        self._changes = 0                 # entries stored since the resolver was made
        self._saved_changes = -1          # _changes at the last save

    # --- overrides -----------------------------------------------------------

    def _override(self, name: str) -> tuple[str, ...] | None:
        addrs = self._exact.get(name)
        if addrs is not None or not self._suffixes:
            return addrs
        dot = name.find(".")
        while dot != -1:                      # longest suffix first
            addrs = self._suffixes.get(name[dot:])
            if addrs is not None:
                return addrs
            dot = name.find(".", dot + 1)
        return self._catch_all

    def is_override(self, host: str) -> bool:
        """True if `host` is answered from fetch.dns.overrides (its addresses are trusted)."""
        return self._override(host.lower().rstrip(".")) is not None

    # --- lookups -------------------------------------------------------------

    async def resolve_host(self, host: str) -> list[str]:
        """Addresses of `host` (overrides first, then cache, then one coalesced query); raises DnsError."""
        return list((await self._entry(host)).addresses)

    async def _entry(self, host: str) -> _Entry:
        name = host.lower().rstrip(".")
        addrs = self._override(name)
        if addrs is not None:
            self._lookups["override"] += 1
            return _Entry(addrs, addrs, None, "", 0.0)
        if name == "invalid" or name.endswith(".invalid"):
            # RFC 6761 6.4: resolvers answer "invalid" names negatively, at once, without a query.
            self._lookups["special_use"] += 1
            raise DnsError("dns_nxdomain", host, "the .invalid domain never resolves (RFC 6761)")
        literal = ip_literal(name)
        if literal is not None:
            self._lookups["literal"] += 1
            text = str(literal)
            return _Entry((text,), () if is_forbidden_text(text) else (text,), None, "", 0.0)
        entry = self._cache.get(name)
        if entry is not None:
            if entry.expires > self._clock():
                if entry.reason is None:
                    self._lookups["hit"] += 1
                    return entry
                self._lookups["negative_hit"] += 1
                raise DnsError(entry.reason, host, entry.detail)
            del self._cache[name]
        task = self._inflight.get(name)
        if task is None:
            self._lookups["miss"] += 1
            task = asyncio.get_running_loop().create_task(self._lookup(name))
            self._inflight[name] = task

            def forget(_task: asyncio.Task[_Entry], n: str = name) -> None:
                self._inflight.pop(n, None)
            task.add_done_callback(forget)
        else:
            self._lookups["coalesced"] += 1
        # Shielded: a cancelled fetch must not cancel the lookup other fetches wait for.
        entry = await asyncio.shield(task)
        if entry.reason is not None:
            raise DnsError(entry.reason, host, entry.detail)
        return entry

    def _get_channel(self) -> aiodns.DNSResolver:
        if self._channel is None:
            self._channel = aiodns.DNSResolver(
                nameservers=self._servers or None,
                timeout=self._config.timeout_s,
                tries=self._config.tries,
                loop=asyncio.get_running_loop(),
            )
        return self._channel

    async def _query(self, name: str, qtype: str) -> tuple[list[str], float]:
        """Addresses of one record type and the smallest TTL of the answer; raises aiodns DNSError."""
        want = pycares.QUERY_TYPE_A if qtype == "A" else pycares.QUERY_TYPE_AAAA
        result = await self._get_channel().query_dns(name, qtype)
        addrs = [rec.data.addr for rec in result.answer
                 if rec.type == want and isinstance(rec.data, (pycares.ARecordData, pycares.AAAARecordData))]
        ttl = min((rec.ttl for rec in result.answer), default=0)
        return addrs, float(ttl)

    async def _lookup(self, name: str) -> _Entry:
        """Query, cache and return the entry for `name`; never raises for DNS failures."""
        cfg = self._config
        started = time.monotonic()
        self._queries += 1
        reason, detail = DNS_NXDOMAIN, "no address records"
        addrs: list[str] = []
        ttl_s = 0.0
        for qtype in ("A", "AAAA"):
            try:
                addrs, ttl_s = await self._query(name, qtype)
            except aiodns.error.DNSError as exc:
                code = exc.args[0] if exc.args else None
                if code == pycares.errno.ARES_ENODATA and qtype == "A":
                    continue
                reason = DNS_NXDOMAIN if code in _NXDOMAIN_CODES else DNS_ERROR
                detail = str(exc.args[1]) if len(exc.args) > 1 else repr(exc)
                break
            if addrs:
                break
        self._latency_sum_s += time.monotonic() - started
        self._latency_count += 1
        now = self._clock()
        if addrs:
            ttl_s = min(max(ttl_s, cfg.min_ttl_s), cfg.max_ttl_s)
            public = tuple(a for a in addrs if not is_forbidden_text(a))
            entry = _Entry(tuple(addrs), public, None, "", now + ttl_s)
        else:
            self._failures[reason] += 1
            ttl_s = cfg.negative_ttl_s if reason == DNS_NXDOMAIN else cfg.error_ttl_s
            entry = _Entry((), (), reason, detail, now + ttl_s)
        self._store(name, entry)
        return entry

    def _store(self, name: str, entry: _Entry) -> None:
        cache = self._cache
        if len(cache) >= self._max_entries and name not in cache:
            now = self._clock()
            keep = int(self._max_entries * _EVICT_KEEP_FRACTION)
            for key in [k for k, e in cache.items() if e.expires <= now]:
                del cache[key]
            while len(cache) > keep:             # oldest insertions first
                del cache[next(iter(cache))]
                self._evictions += 1
        cache[name] = entry
        self._changes += 1

    # --- checkpoint (crawler/state.py) ----------------------------------------------

    def _snapshot(self) -> tuple[float, float, dict[str, _Entry]]:
        """A shallow copy, on the loop (~10 ms at 1,000,000 names): entries are replaced by
        `_store`, never changed once stored, so the writer thread may read them."""
        return self._clock(), time.time(), self._cache.copy()

    @staticmethod
    def _records(snapshot: object) -> Iterator[dict]:
        now, wall, cache = cast(tuple[float, float, dict[str, _Entry]], snapshot)    # what _snapshot returned
        for name, e in cache.items():
            if e.expires <= now:
                continue
            record = {"name": name, "expires_at": round(wall + (e.expires - now), 3)}
            if e.reason is None:
                record["addresses"] = list(e.addresses)
            else:
                record["reason"] = e.reason
                record["detail"] = e.detail
            yield record

    def restore(self, store: StateStore) -> None:
        """Load the answers an earlier process saved that are still fresh, guard applied again.

        Raises ValueError/TypeError/KeyError on a record that makes no sense
        (an address that is not an IP address...); the cache then stays empty.
        """
        records = store.read(self.name, STATE_VERSION)
        if not records:
            return
        now, wall = self._clock(), time.time()
        cache: dict[str, _Entry] = {}
        forbidden: dict[str, bool] = {}              # address -> refused by the guard (hosts share addresses)
        for rec in records:
            name = rec["name"]
            remaining_s = float(rec["expires_at"]) - wall
            reason = rec.get("reason")
            if not isinstance(name, str) or not name:
                raise ValueError(f"dns entry {name!r}")
            if reason is None:
                addrs = tuple(rec["addresses"])
                if not addrs:
                    raise ValueError(f"dns entry {name!r}: no addresses")
                for a in addrs:
                    if a not in forbidden:
                        literal = ip_literal(a) if isinstance(a, str) else None
                        if literal is None:
                            raise ValueError(f"dns entry {name!r}: {a!r:.100} is not an IP address")
                        forbidden[a] = is_forbidden(literal)
                entry = _Entry(addrs, tuple(a for a in addrs if not forbidden[a]), None, "", now + remaining_s)
            elif reason in _REASONS:
                entry = _Entry((), (), reason, str(rec.get("detail", "")), now + remaining_s)
            else:
                raise ValueError(f"dns entry {name!r}: reason {reason!r}")
            if remaining_s > 0:
                cache.pop(name, None)
                cache[name] = entry
        while len(cache) > self._max_entries:            # the newest entries are the last ones
            del cache[next(iter(cache))]
        self._cache = cache
        self._restored = len(cache)
        self._saved_changes = self._changes
        log.info("dns: %d names restored from %s (%d expired)", len(cache), store.path(self.name),
                 len(records) - len(cache))

    # --- aiohttp hook ----------------------------------------------------------

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        """aiohttp's resolver interface: the addresses to connect to, guard applied."""
        entry = await self._entry(host)
        addrs = entry.addresses if self._allow_private else entry.public
        if not addrs:
            self._refused_private += 1
            raise PrivateAddressError(None, f"{host}: only private addresses {list(entry.addresses)}")
        results: list[ResolveResult] = []
        for addr in addrs:
            fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
            if family in (socket.AF_INET, socket.AF_INET6) and fam != family:
                continue
            results.append({"hostname": host, "host": addr, "port": port, "family": fam,
                            "proto": 0, "flags": _NUMERIC_FLAGS})
        if not results:
            raise DnsError(DNS_NXDOMAIN, host, f"no address of family {family!r}")
        return results

    # --- component protocol -------------------------------------------------------

    def stats(self) -> dict:
        """Lookups by result, failures by reason, query latency, cache size."""
        return {
            "lookups": dict(self._lookups),
            "failures": dict(self._failures),
            "refused_private": self._refused_private,
            "queries": self._queries,
            "latency_s_sum": self._latency_sum_s,
            "latency_count": self._latency_count,
            "cache_size": len(self._cache),
            "evictions": self._evictions,
            "inflight": len(self._inflight),
            "restored": self._restored,
        }

    async def close(self) -> None:
        """Cancel lookups in flight, release the c-ares channel, wait for a save still being written."""
        for task in list(self._inflight.values()):
            task.cancel()
        self._inflight.clear()
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()
        await self.wait_saved()

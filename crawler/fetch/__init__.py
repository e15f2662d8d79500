"""Fetching: getting bytes from web servers safely, politely and within limits.

Where it sits (DESIGN 1, 2.7). A worker takes a URL from the frontier, checks
robots.txt, fetches, and hands the result to parsing and storage:

    frontier.next() -> RobotsCache.lookup(origin_of(url))   # sync, cached
                       (None? -> RobotsCache.fetch(origin): a polite request)
                    -> rules.allowed(url)
                    -> Fetcher.fetch(url) -> FetchResult     # never raises
                    -> parse / WARC / crawl log; frontier waits k * duration_s

The parts, one module each:

- `result.py`  -- `FetchResult`, the record of one fetch, and the reason codes
  (`REASONS`): "ok" for any complete HTTP response, else why the fetch ended.
- `fetcher.py` -- `Fetcher`: one aiohttp session for the node, keep-alive
  connections, GET without redirects (a 3xx returns its `location`; the node
  treats the target as a link, as Mercator did), hard limits on URL length,
  connect/read/total time, the body's rate (too_slow), header size, body size
  and decoded size. Bodies are decoded here (gzip, deflate, br, zstd),
  incrementally and bounded (`decode.py`), so a bomb never allocates more than
  `fetch.max_decoded_bytes`, and the body as received is kept for WARC.
- `tls.py`     -- the SSL context from `fetch.tls` (system CAs plus a private
  CA, a client certificate, or no verification), and which tls_* reason a
  failed handshake is.
- `proxy.py`   -- `fetch.proxy` (or the node's own): http:// through aiohttp,
  HTTPS by CONNECT; socks5h:// through aiohttp-socks. The guard still judges
  every target, before the proxy hears of it.
- `dns.py`     -- `Resolver`: aiodns with a TTL-respecting positive cache, a
  negative cache, coalesced concurrent lookups and static overrides
  (`fetch.dns.overrides`, like curl --resolve). It is plugged into aiohttp as
  its resolver, with aiohttp's own DNS cache off.
- `guard.py`   -- the private-network guard: unless
  `fetch.allow_private_networks`, addresses that are not globally routable
  (private, loopback, link-local, CGNAT, multicast, reserved, unspecified; IPv4
  and IPv6, embedded IPv4 included) are refused before any connection, for IP
  literals and resolved names alike. Override addresses are trusted.
- `robots.py`  -- `RobotsCache` and `RobotsRules`: robots.txt per origin (RFC
  9309, parsed by protego) with expiry; 4xx allows all, 5xx/unreachable
  disallows all for a while, redirects followed up to 5 hops.
- `headers.py` -- forgiving parsers for Content-Type and Retry-After.

Every class has the component shape: built from its config dataclass
(`FetchConfig`, `DnsConfig`, `RobotsConfig`), `stats()` for metrics, and
`close()`. The caller owns and closes each one (the fetcher does not close
the resolver it was given). docs/fetching.md explains the limits, TLS,
content codings and proxies, and why.
"""

from crawler.fetch.dns import DnsError, Resolver
from crawler.fetch.fetcher import Fetcher
from crawler.fetch.guard import PrivateAddressError, is_forbidden, is_forbidden_text
from crawler.fetch.result import REASONS, FetchResult
from crawler.fetch.robots import RobotsCache, RobotsRules, origin_of, product_token

__all__ = [
    "REASONS",
    "DnsError",
    "FetchResult",
    "Fetcher",
    "PrivateAddressError",
    "Resolver",
    "RobotsCache",
    "RobotsRules",
    "is_forbidden",
    "is_forbidden_text",
    "origin_of",
    "product_token",
]

"""Egress through a proxy: `fetch.proxy`, or a node's own `cluster.nodes[].proxy`.

Two kinds, chosen by the URL's scheme:

- `http://HOST:PORT`: aiohttp's proxy support. A plain-HTTP target is asked
  of the proxy with its absolute URL; an HTTPS target goes through a CONNECT
  tunnel, and TLS (with `fetch.tls` verification) runs end to end with the
  target inside it. The proxy's name is resolved by the fetcher's Resolver
  (fetch.dns applies) without the private-network guard.
- `socks5h://HOST:PORT`: aiohttp-socks' ProxyConnector; the target's name is
  sent to the proxy, which resolves it (the "h"). The proxy's own name is
  resolved by the system resolver (aiohttp-socks connects to it itself), so
  give an address or a name the system knows; fetch.dns does not apply to it.

The proxy is configuration and therefore trusted: its address may be private.
Targets are not: the fetcher resolves every target through its Resolver and
refuses forbidden addresses before anything is sent to the proxy (guard.py).

Connections are still one per target host: aiohttp keys its pool by target
(and proxy), so a host's keep-alive connection, through the proxy, is its own.

Credentials in the URL are refused: secrets never go into the YAML
(DESIGN 2.11), and neither tinyproxy nor microsocks needs them on loopback.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import aiohttp
import aiohttp_socks
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from crawler.config.loader import ConfigError
from crawler.fetch.dns import Resolver

HTTP = "http"
SOCKS5H = "socks5h"
_SCHEMES = (HTTP, SOCKS5H)
_NUMERIC_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV

PROXY_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientProxyConnectionError,       # http proxy unreachable
    aiohttp.ClientHttpProxyError,             # CONNECT answered with an error status
    aiohttp_socks.ProxyConnectionError,       # socks proxy unreachable
    aiohttp_socks.ProxyError,                 # SOCKS reply: refused, unreachable, not allowed...
)
"""Failures of the proxy, or reported by it: reason proxy_error."""

PROXY_TIMEOUTS: tuple[type[BaseException], ...] = (aiohttp_socks.ProxyTimeoutError,)
"""The SOCKS connection (proxy, its connect to the target, TLS) outlasted fetch.connect_timeout_s."""


@dataclass(frozen=True)
class ProxySpec:
    """A parsed proxy URL."""

    scheme: str                  # "http" or "socks5h"
    host: str                    # lower-case; an IPv6 address without brackets
    port: int
    url: URL


def parse_proxy(value: str | None, key: str) -> ProxySpec | None:
    """The proxy named by `value` (None or "" for none); raises ConfigError naming `key`."""
    if not value:
        return None
    expected = "expected http://HOST:PORT or socks5h://HOST:PORT"
    try:
        url = URL(value)
        port = url.explicit_port
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{key}: {expected}, got {value!r} ({exc})") from None
    scheme = url.scheme.lower()
    if scheme not in _SCHEMES:
        hint = " (use socks5h://: names are sent to a SOCKS proxy, which resolves them)" \
            if scheme.startswith("socks") else ""
        raise ConfigError(f"{key}: {expected}, got scheme {url.scheme!r}{hint}")
    if not url.raw_host or port is None:
        raise ConfigError(f"{key}: {expected}, got {value!r} (a host and a port are needed)")
    if url.raw_user or url.raw_password:
        raise ConfigError(f"{key}: credentials in the proxy URL are not supported (secrets never go in the "
                          "config file); allow the crawler's address on the proxy instead")
    if url.raw_path not in ("", "/") or url.raw_query_string or url.raw_fragment:
        raise ConfigError(f"{key}: {expected}, got {value!r} (no path, query or fragment)")
    assert url.host is not None  # raw_host is set (checked above)
    host = url.host.lower()
    return ProxySpec(scheme, host, port, URL.build(scheme=scheme, host=host, port=port))


class ProxyTrustingResolver(AbstractResolver):
    """The fetcher's Resolver as aiohttp's resolver, except that the proxy's own name passes the guard.

    Only the http proxy needs it: aiohttp resolves the proxy's name (never the
    target's) through the connector's resolver. Closing it leaves the Resolver
    open (it belongs to the fetcher's caller).
    """

    def __init__(self, resolver: Resolver, proxy_host: str) -> None:
        self._resolver = resolver
        self._proxy_host = proxy_host.rstrip(".")

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        if host.lower().rstrip(".") != self._proxy_host:
            return await self._resolver.resolve(host, port, family)
        results: list[ResolveResult] = []
        for addr in await self._resolver.resolve_host(host):
            fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
            if family in (socket.AF_INET, socket.AF_INET6) and fam != family:
                continue
            results.append({"hostname": host, "host": addr, "port": port, "family": fam,
                            "proto": 0, "flags": _NUMERIC_FLAGS})
        return results

    async def close(self) -> None:
        """Nothing of its own to release."""


def socks_connector(spec: ProxySpec, **connector_kwargs) -> aiohttp.TCPConnector:
    """A connector that opens every connection through the SOCKS5 proxy, names resolved by the proxy."""
    return aiohttp_socks.ProxyConnector(proxy_type=aiohttp_socks.ProxyType.SOCKS5, host=spec.host, port=spec.port,
                                        rdns=True, **connector_kwargs)

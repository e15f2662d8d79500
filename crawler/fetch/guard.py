"""The private-network guard: a crawler must not be a way into its own network.

A page on the public web can link to http://169.254.169.254/ (cloud metadata),
http://127.0.0.1:6379/ or a name whose DNS answer is 10.0.0.5. Unless
`fetch.allow_private_networks` is on, the fetcher refuses every address that is
not globally routable, before any connection is made:

- IP literals in the URL are checked by the fetcher (aiohttp never asks the
  resolver about them);
- resolved addresses are checked by the resolver's aiohttp hook, which keeps
  only the public ones and fails with `PrivateAddressError` when none is left.

Addresses given in `fetch.dns.overrides` are declared by the operator and are
always trusted; that is how a local test web is crawled with the guard on.

Behind a proxy (`fetch.proxy`) nothing resolves the target on this side, so
the fetcher asks the resolver's hook itself before sending anything to the
proxy: the same refusal applies. The proxy's own address is configuration and
is trusted.

IPv6 addresses that embed an IPv4 address (IPv4-mapped ::ffff:a.b.c.d, 6to4
2002::/16, Teredo, NAT64 64:ff9b::/96) are judged by the embedded address.
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv6Address

from crawler.fetch.result import PRIVATE_ADDRESS

_NAT64_PREFIXES = (
    ipaddress.IPv6Network("64:ff9b::/96"),     # RFC 6052 well-known prefix
    ipaddress.IPv6Network("64:ff9b:1::/48"),   # RFC 8215 local-use prefix
)
_IPV4_BITS = 32
_IPV4_MASK = (1 << _IPV4_BITS) - 1


class PrivateAddressError(OSError):
    """Every address of a host is refused by the guard (an OSError so aiohttp reports it as a DNS failure)."""

    reason = PRIVATE_ADDRESS


def ip_literal(host: str) -> IPv4Address | IPv6Address | None:
    """The address if `host` is an IP literal (IPv6 with or without brackets), else None."""
    if not host:
        return None
    first = host[0]
    # Fast path: a DNS name that starts with a letter is never an address.
    if not (first.isdigit() or first in "[:" or ":" in host):
        return None
    if first == "[" and host.endswith("]"):
        host = host[1:-1]
    host = host.split("%", 1)[0]               # drop an IPv6 zone id
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _embedded_ipv4(addr: IPv6Address) -> IPv4Address | None:
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr.teredo is not None:
        return addr.teredo[1]                  # the client address
    for net in _NAT64_PREFIXES:
        if addr in net:
            return IPv4Address(int(addr) & _IPV4_MASK)
    return None


def is_forbidden(addr: IPv4Address | IPv6Address) -> bool:
    """True if the guard refuses this address: anything not globally routable."""
    if isinstance(addr, IPv6Address):
        embedded = _embedded_ipv4(addr)
        if embedded is not None:
            return is_forbidden(embedded)
    return (
        not addr.is_global
        or addr.is_private
        or addr.is_loopback
        or addr.is_link_local
        or addr.is_multicast
        or addr.is_reserved
        or addr.is_unspecified
    )


def is_forbidden_text(address: str) -> bool:
    """`is_forbidden` for an address string; anything that is not an address is refused."""
    addr = ip_literal(address)
    return True if addr is None else is_forbidden(addr)

"""The private-network guard's address table."""

from __future__ import annotations

import ipaddress

import pytest

from crawler.fetch.guard import ip_literal, is_forbidden, is_forbidden_text

FORBIDDEN = [
    "127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.5.4", "192.168.0.1", "169.254.169.254",
    "100.64.0.1", "100.127.255.254", "0.0.0.0", "224.0.0.1", "239.255.255.250", "240.0.0.1",
    "255.255.255.255", "192.0.2.1", "198.18.0.1", "::1", "::", "fc00::1", "fd12:3456::1", "fe80::1",
    "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "2002:7f00:1::1",
    "2002:a00:1::1", "64:ff9b::7f00:1", "64:ff9b::a00:1", "2001:db8::1",
]
ALLOWED = ["8.8.8.8", "93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001::200e",
           "::ffff:8.8.8.8", "2002:808:808::1", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", FORBIDDEN)
def test_forbidden(address):
    assert is_forbidden(ipaddress.ip_address(address)) and is_forbidden_text(address)


@pytest.mark.parametrize("address", ALLOWED)
def test_allowed(address):
    assert not is_forbidden(ipaddress.ip_address(address)) and not is_forbidden_text(address)


def test_non_address_text_is_refused():
    assert is_forbidden_text("example.org") and is_forbidden_text("")


@pytest.mark.parametrize("host, expected", [
    ("127.0.0.1", "127.0.0.1"), ("[::1]", "::1"), ("::1", "::1"), ("fe80::1%eth0", "fe80::1"),
    ("example.org", None), ("1password.com", None), ("", None), ("[nonsense]", None), ("999.1.1.1", None),
])
def test_ip_literal(host, expected):
    got = ip_literal(host)
    assert (str(got) if got is not None else None) == expected

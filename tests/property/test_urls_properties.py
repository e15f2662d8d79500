"""Properties of crawler.urls that must hold for any input (hypothesis).

- canonicalize is idempotent, and its result parses with ada (WHATWG) to itself;
- the result is an http(s) URL with no fragment and only upper-case escapes
  of characters that are not unreserved;
- host_of / origin_of agree with ada's own parse of the canonical URL;
- fingerprints are stable and in [0, 2**64), the array form equals the scalar one.
"""

from __future__ import annotations

import re

import ada_url
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.urls import canonicalize, fingerprint, fingerprints, host_of, normalize_percent, origin_of
from crawler.urls._ada import resolve_public

UINT64_LIMIT = 2**64
MAX_EXAMPLES = 300
ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# Pieces that stress the canonical rules: escapes (both cases, unreserved or
# not, dots), stray '%', dot segments, separators, non-ASCII, whitespace.
TRICKY = st.sampled_from([
    "%", "%%", "%2e", "%2E", "%2f", "%7e", "%41", "%4", "%3", "%zz", ".", "..", "/", "//", "\\", "?", "#",
    "&", "=", ";", ":", "@", "a", "Z", "0", "9", "-", "_", "~", " ", "\t", "\n", "\u00e9", "\u4f8b", "[", "]",
])
PATHS = st.lists(TRICKY, max_size=16).map("".join)
HOSTS = st.sampled_from([
    "example.com", "EXAMPLE.com", "xn--bcher-kva.example", "B\u00fccher.example", "127.0.0.1", "0x7f.1",
    "[::1]", "[2001:DB8::1]", "a.b.c.example", "user:pw@example.com", "%65xample.com", "example.com.",
])
PORTS = st.sampled_from(["", ":80", ":443", ":8080", ":0"])
SCHEMES = st.sampled_from(["http", "https", "HTTP", "hTTps", "ftp", "mailto", "javascript"])
BASES = st.sampled_from([
    "http://example.com/a/b/c", "https://example.com:8443/dir/", "http://[::1]/x?y", "http://h/%7e/%2F/",
])


@st.composite
def absolute_urls(draw) -> str:
    return f"{draw(SCHEMES)}://{draw(HOSTS)}{draw(PORTS)}/{draw(PATHS)}"


def check_canonical(url: str | None) -> None:
    if url is None:
        return
    assert url.startswith(("http://", "https://"))
    assert "#" not in url
    assert canonicalize(url) == url  # idempotent
    assert resolve_public(url, None) == url  # ada parses it to itself
    for hex_pair in ESCAPE.findall(url):
        assert hex_pair == hex_pair.upper()
        # An unreserved escape may remain only as a guarded %2E or next to a stray '%'.
        char = chr(int(hex_pair, 16))
        assert char not in UNRESERVED or char == "." or "%%" in url or re.search(r"%[0-9A-Fa-f]?%", url)


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(st.text(max_size=60))
def test_any_text(href: str) -> None:
    check_canonical(canonicalize(href))


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(st.one_of(st.text(max_size=40), PATHS), BASES)
def test_relative_against_base(href: str, base: str) -> None:
    check_canonical(canonicalize(href, base))


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(absolute_urls())
def test_absolute_urls(url: str) -> None:
    got = canonicalize(url)
    check_canonical(got)
    if got is not None:
        parsed = ada_url.URL(got)
        assert host_of(got) == parsed.hostname
        assert origin_of(got) == parsed.origin


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(PATHS)
def test_normalize_percent_idempotent(path: str) -> None:
    once = normalize_percent("http://h/" + path)
    assert normalize_percent(once) == once


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=20))
def test_fingerprints(urls: list[str]) -> None:
    scalar = [fingerprint(u) for u in urls]
    assert all(0 <= f < UINT64_LIMIT for f in scalar)
    assert scalar == [fingerprint(u) for u in urls]  # stable
    assert [int(f) for f in fingerprints(urls)] == scalar

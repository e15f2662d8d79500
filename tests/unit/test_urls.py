"""crawler.urls: WHATWG conformance, our canonical-form rules, fingerprints, host/origin."""

from __future__ import annotations

import json
from pathlib import Path

import mmh3
import numpy as np
import pytest

from crawler.urls import (
    canonicalize,
    fingerprint,
    fingerprints,
    host_fingerprint,
    host_of,
    normalize_percent,
    origin_of,
    resolve_canonical,
)
from crawler.urls._ada import resolve_c, resolve_public

TESTDATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "testdata"
URLTESTDATA = TESTDATA / "url" / "urltestdata.json"
BASE = "http://example.com/dir/page.html"
UINT64_LIMIT = 2**64


def wpt_cases() -> list[dict]:
    if not URLTESTDATA.is_file():
        pytest.skip(f"WHATWG test data not found at {URLTESTDATA}")
    return [case for case in json.loads(URLTESTDATA.read_text(encoding="utf-8")) if isinstance(case, dict)]


def our_rules(href: str) -> str:
    """What our canonical form adds to a WHATWG href: no fragment, normalized escapes."""
    href = href.split("#", 1)[0]
    return normalize_percent(href) if "%" in href else href


def test_wpt_conformance() -> None:
    """Every WPT case: http(s) results equal the expected href + our rules; failures and other schemes give None."""
    passed = {"http": 0, "failure": 0, "other": 0}
    wrong = []
    for case in wpt_cases():
        got = canonicalize(case["input"], case.get("base"))
        if case.get("failure"):
            kind, want = "failure", None
        elif case["href"].startswith(("http:", "https:")):
            kind, want = "http", our_rules(case["href"])
        else:
            kind, want = "other", None
        if got == want:
            passed[kind] += 1
        else:
            wrong.append((case, got, want))
    print(f"WPT urltestdata: {passed['http']} http(s) hrefs, {passed['failure']} failures, "
          f"{passed['other']} other schemes passed; {len(wrong)} wrong")
    assert not wrong, wrong[:5]
    assert passed["http"] >= 240  # 247 http(s) cases in the 891-case file


def test_wpt_outputs_are_idempotent() -> None:
    for case in wpt_cases():
        once = canonicalize(case["input"], case.get("base"))
        if once is not None:
            assert canonicalize(once) == once, case
            assert resolve_public(once, None) == once  # ada parses it to itself


@pytest.mark.skipif(resolve_c is None, reason="ada's C API is not available; only the public path runs")
def test_c_api_and_public_api_agree_on_wpt() -> None:
    for case in wpt_cases():
        base = case.get("base")
        base_b = None if base is None else base.encode()
        assert resolve_c(case["input"], base_b) == resolve_public(case["input"], base_b), case


# (href, base, expected canonical form)
CASES = [
    ("HTTP://WWW.Example.COM/A/B", None, "http://www.example.com/A/B"),  # scheme, host lower; path kept
    ("http://example.com:80/", None, "http://example.com/"),  # default ports dropped
    ("https://example.com:443/x", None, "https://example.com/x"),
    ("http://example.com:443/", None, "http://example.com:443/"),  # non-default kept
    ("https://example.com:80/", None, "https://example.com:80/"),
    ("http://example.com:8080", None, "http://example.com:8080/"),
    ("http://example.com", None, "http://example.com/"),  # empty path -> /
    ("http://example.com?q", None, "http://example.com/?q"),
    ("../../../../x", BASE, "http://example.com/x"),  # .. above the root
    ("http://example.com/a/./b/../c/", None, "http://example.com/a/c/"),
    ("http://example.com/a/%2e%2E/b", None, "http://example.com/b"),  # escaped dot segments resolve too
    ("http://example.com/a/.%2e/b", None, "http://example.com/b"),
    ("http://example.com/p#frag", None, "http://example.com/p"),  # fragment dropped
    ("#top", BASE, BASE),
    ("", BASE, BASE),  # empty href = the base itself
    ("?x=1#y", BASE, "http://example.com/dir/page.html?x=1"),
    ("http://example.com/%7euser/", None, "http://example.com/~user/"),  # unreserved decoded
    ("http://example.com/%41%62%2D%2e%5F%7E%30", None, "http://example.com/Ab-._~0"),
    ("http://example.com/a%2fb", None, "http://example.com/a%2Fb"),  # reserved stays, hex upper-cased
    ("http://example.com/?q=%3d%26", None, "http://example.com/?q=%3D%26"),
    ("http://example.com/a b", None, "http://example.com/a%20b"),
    ("http://example.com/caf\u00e9", None, "http://example.com/caf%C3%A9"),
    ("http://example.com/%zz%", None, "http://example.com/%zz%"),  # stray % kept as is
    ("http://example.com/%%34%31", None, "http://example.com/%%341"),  # no new escape from a stray %
    ("http://example.com/%4%31", None, "http://example.com/%4%31"),
    ("http://B\u00fccher.example/", None, "http://xn--bcher-kva.example/"),  # IDN -> punycode
    ("http://\u4f8b\u3048.\u30c6\u30b9\u30c8/", None, "http://xn--r8jz45g.xn--zckzah/"),
    ("http://EXAMPLE.com./", None, "http://example.com./"),  # trailing dot kept (WHATWG)
    ("http://192.168.0.1:80/", None, "http://192.168.0.1/"),  # IPv4
    ("http://0x7f.1/", None, "http://127.0.0.1/"),
    ("http://3232235521/", None, "http://192.168.0.1/"),
    ("http://[2001:DB8:0:0:0:0:0:1]:80/", None, "http://[2001:db8::1]/"),  # IPv6
    ("https://[::FFFF:192.168.0.1]/", None, "https://[::ffff:c0a8:1]/"),
    ("  \t http://example.com/\na\tb\r  ", None, "http://example.com/ab"),  # whitespace stripped
    ("\x00\x1f http://example.com/ \x7f", None, "http://example.com/%20%7F"),  # DEL is not stripped
    ("http:\\\\example.com\\a\\b", None, "http://example.com/a/b"),  # backslashes
    ("\\\\other.org\\x", BASE, "http://other.org/x"),
    ("//other.org/x", "https://example.com/", "https://other.org/x"),  # scheme-relative
    ("http://user:pass@Example.com/", None, "http://user:pass@example.com/"),  # userinfo kept
    ("http://user@example.com:80/", None, "http://user@example.com/"),
    ("http://us%65r:p%40ss@example.com/", None, "http://user:p%40ss@example.com/"),
    ("http://example.com/?", None, "http://example.com/?"),  # empty query kept (WHATWG)
    ("http://example.com/b?z=1&a=2", None, "http://example.com/b?z=1&a=2"),  # order kept
    ("https:example.com", None, "https://example.com/"),
    ("http:/x", BASE, "http://example.com/x"),
]

NOT_CRAWLABLE = [
    ("mailto:someone@example.com", BASE),
    ("javascript:void(0)", BASE),
    ("JavaScript:alert(1)", BASE),
    ("tel:+123", BASE),
    ("data:text/html,hi", BASE),
    ("ftp://example.com/file", BASE),
    ("file:///etc/passwd", None),
    ("ws://example.com/", None),
    ("about:blank", None),
    ("http://", None),  # no host
    ("http:///", None),
    ("http://exa mple.com/", None),  # forbidden host code point
    ("http://[::1/", None),
    ("http://example.com:99999/", None),  # port out of range
    ("relative/path", None),  # relative with no base
    ("", None),
    ("http://\ud800/", None),  # lone surrogate
    ("x", "not a base"),
    ("x", "mailto:a@b"),
]


@pytest.mark.parametrize(("href", "base", "want"), CASES)
def test_canonical_cases(href: str, base: str | None, want: str) -> None:
    got = canonicalize(href, base)
    assert got == want
    assert canonicalize(got) == got  # idempotent
    assert resolve_public(got, None) == got  # ada parses it to itself


@pytest.mark.parametrize(("href", "base"), NOT_CRAWLABLE)
def test_not_crawlable_gives_none(href: str, base: str | None) -> None:
    assert canonicalize(href, base) is None


def test_resolve_canonical_matches_canonicalize() -> None:
    for href, base, want in CASES:
        assert resolve_canonical(href, None if base is None else base.encode()) == want


def test_dot_guard_keeps_escaped_dot_segments() -> None:
    """Decoding %2E must never create a `.`/`..` segment (ada resolves those first; this is the net)."""
    assert normalize_percent("http://h/a/%2E%2E/b") == "http://h/a/%2E%2E/b"
    assert normalize_percent("http://h/a/%2e/b?%2e") == "http://h/a/%2E/b?%2E"
    assert normalize_percent("http://h/a/%2Ex/b?%2e") == "http://h/a/.x/b?."
    assert normalize_percent("http://h/a/b?x=/%2E%2E/") == "http://h/a/b?x=/../"  # query: no segments


@pytest.mark.parametrize("url", [
    "http://h/%%34%31", "http://h/%4%31", "http://h/%%36%31%36%31", "http://h/%2%2", "http://h/%%%41%41",
    "http://h/%7e%7E%2f%2F%zz%", "http://h/%", "http://h/%%", "http://h/%a", "http://h/%ag%61",
])
def test_normalize_percent_is_idempotent(url: str) -> None:
    once = normalize_percent(url)
    assert normalize_percent(once) == once


def test_fingerprint_definition() -> None:
    url = "http://example.com/"
    assert fingerprint(url) == mmh3.hash64(url.encode(), signed=False)[0]
    assert fingerprint(url) == mmh3.hash128(url.encode(), signed=False) & (UINT64_LIMIT - 1)
    assert fingerprint(url) == fingerprint("http://example.com/")  # stable
    assert fingerprint(url) != fingerprint("http://example.com/x")
    assert 0 <= fingerprint("http://\u00e9/") < UINT64_LIMIT
    assert fingerprint("http://h/\u00e9") == mmh3.hash64("http://h/\u00e9".encode(), signed=False)[0]


def test_fingerprints_array() -> None:
    urls = ["http://a.example/", "http://b.example/x?y", "http://a.example/"]
    fps = fingerprints(urls)
    assert fps.dtype == np.uint64 and fps.shape == (3,)
    assert [int(f) for f in fps] == [fingerprint(u) for u in urls]
    assert fps[0] == fps[2]
    assert fingerprints([]).dtype == np.uint64 and len(fingerprints([])) == 0


def test_host_fingerprint() -> None:
    assert host_fingerprint("example.com") == mmh3.hash64(b"example.com", signed=False)[0]
    assert 0 <= host_fingerprint("xn--bcher-kva.example") < UINT64_LIMIT


@pytest.mark.parametrize(("url", "host", "origin"), [
    ("http://example.com/", "example.com", "http://example.com"),
    ("https://example.com:8443/a/b?c=d", "example.com", "https://example.com:8443"),
    ("http://user:pass@example.com:81/x", "example.com", "http://example.com:81"),
    ("http://a%40b@example.com/@x", "example.com", "http://example.com"),
    ("http://[2001:db8::1]:8080/", "[2001:db8::1]", "http://[2001:db8::1]:8080"),
    ("http://[::1]/", "[::1]", "http://[::1]"),
    ("http://127.0.0.1/x:y", "127.0.0.1", "http://127.0.0.1"),
    ("http://xn--bcher-kva.example/", "xn--bcher-kva.example", "http://xn--bcher-kva.example"),
])
def test_host_and_origin(url: str, host: str, origin: str) -> None:
    assert canonicalize(url) == url  # these are canonical
    assert host_of(url) == host
    assert origin_of(url) == origin

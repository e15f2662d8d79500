"""Header parsers and the FetchResult record."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from crawler.fetch import result as R
from crawler.fetch.headers import parse_content_type, parse_retry_after
from crawler.fetch.result import REASON_CODES, REASONS, FetchResult

NOW = 1_700_000_000.0


@pytest.mark.parametrize("value, expected", [
    (None, (None, None)),
    ("", (None, None)),
    ("text/html", ("text/html", None)),
    ("Text/HTML; Charset=UTF-8", ("text/html", "UTF-8")),
    ('text/html; foo=bar; charset="iso-8859-1"', ("text/html", "iso-8859-1")),
    ("text/html;charset=", ("text/html", None)),
    (";charset=utf-8", (None, "utf-8")),
    ("application/xhtml+xml ; charset = 'windows-1252' ", ("application/xhtml+xml", "windows-1252")),
])
def test_parse_content_type(value, expected):
    assert parse_content_type(value) == expected


@pytest.mark.parametrize("value, expected", [
    ("120", 120.0), (" 0 ", 0.0), ("1.5", 1.5), (None, None), ("", None), ("-5", None),
    ("soon", None), ("inf", None), ("nan", None),
    (formatdate(NOW + 90, usegmt=True), 90.0),
    (formatdate(NOW - 90, usegmt=True), 0.0),                 # a date in the past: no wait
    ("Sun, 06 Nov 1994 08:49:37 -0000", 0.0),
    ("Mon, 99 Foo 2024 99:99:99 GMT", None),
])
def test_parse_retry_after(value, expected):
    assert parse_retry_after(value, NOW) == expected


def test_reasons_are_documented_and_unique():
    codes = [code for code, _ in REASONS]
    assert len(codes) == len(set(codes)) == len(REASON_CODES)
    assert all(doc for _, doc in REASONS)
    for name in ("OK", "DNS_NXDOMAIN", "DNS_ERROR", "PRIVATE_ADDRESS", "CONNECT_TIMEOUT", "CONNECT_ERROR",
                 "READ_TIMEOUT", "TOTAL_TIMEOUT", "BODY_TOO_LARGE", "DECODED_TOO_LARGE",
                 "BAD_CONTENT_ENCODING", "HEADER_TOO_LARGE", "PROTOCOL_ERROR", "URL_TOO_LONG",
                 "UNSUPPORTED_SCHEME"):
        assert getattr(R, name) in REASON_CODES


def test_fetch_result_defaults():
    res = FetchResult(url="http://example.org/")
    assert (res.status, res.reason, res.body, res.truncated, res.ip) == (0, "ok", b"", False, None)
    assert not hasattr(res, "__dict__")                       # slots

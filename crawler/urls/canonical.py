"""Canonical URL form: WHATWG resolution by ada, then our rules on top.

ada (DESIGN 2.13) already gives: lower-case scheme and host, IDN hosts in
punycode, IPv4/IPv6 hosts in their canonical notation, default port dropped,
dot segments (including `%2e` forms) removed, empty path -> `/`, backslashes
-> `/`, tab/newline removed and leading/trailing C0 controls and spaces
stripped, everything non-ASCII percent-encoded. On top of that:

1. Only `http://` and `https://` results are kept (None otherwise).
2. The fragment is dropped.
3. Percent-escapes are normalized: hex digits upper-case (`%2f` -> `%2F`), and
   escapes of unreserved characters (`A-Z a-z 0-9 - . _ ~`, RFC 3986 2.3) are
   decoded (`%7e` -> `~`). Two guards keep this meaning-preserving and
   idempotent:
   - a decoded `.` must never create a `.` or `..` path segment that a later
     parse would resolve differently; if it would, every `%2E` of the URL stays
     encoded (ada already resolves `%2e` segments, so this is a safety net);
   - a decoded hex digit must never complete a new escape with a stray `%`
     before it (`%%34%31` stays `%%341`, not `%41` -> `A` on the next pass).
   A stray `%` not followed by two hex digits is kept as is, as browsers do.

What is deliberately *kept*: userinfo (`user:pass@`), an empty query (`/?`),
query parameter order, trailing slashes, `www.`: they can all change what a
server returns, and the WHATWG form keeps them.

The result is idempotent: `canonicalize(canonicalize(x)) == canonicalize(x)`,
and ada parses it to itself.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from crawler.urls._ada import resolve

CRAWLABLE_PREFIXES = ("http://", "https://")
UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
HEX_DIGITS = frozenset("0123456789ABCDEFabcdef")
ESCAPE_HEX_LEN = 2  # two hex digits follow each '%'
# An escape that normalization changes: lower-case hex, or an unreserved
# character (2D-2E, 30-39, 41-5A, 5F, 61-7A, 7E). Most escaped URLs hold only
# %20, %2F, %3A... and skip the rewrite.
_CHANGING_ESCAPE = re.compile(
    r"%(?:[0-9A-Fa-f][a-f]|[a-f][0-9A-F]|2[DE]|3[0-9]|4[1-9A-F]|5[0-9AF]|6[1-9A-F]|7[0-9AE])")


def _escape_table() -> MappingProxyType:
    """Every 2-hex-digit spelling (any case) -> its normalized replacement."""
    table = {}
    digits = "0123456789abcdefABCDEF"
    for hi in digits:
        for lo in digits:
            char = chr(int(hi + lo, 16))
            table[hi + lo] = char if char in UNRESERVED else "%" + (hi + lo).upper()
    return MappingProxyType(table)


_ESCAPES = _escape_table()


def canonicalize(href: str, base: str | None = None) -> str | None:
    """The canonical absolute URL of `href` (resolved against `base`), or None
    where it is not a crawlable http(s) URL (other scheme, unparsable, no host)."""
    if base is None:
        return resolve_canonical(href, None)
    try:
        base_b = base.encode()
    except UnicodeEncodeError:
        return None
    return resolve_canonical(href, base_b)


def resolve_canonical(href: str, base_utf8: bytes | None) -> str | None:
    """`canonicalize` with the base already UTF-8 encoded (encode it once per page).

    Hot path (once per extracted link): most links contain neither `#` nor
    `%`, and then this is one ada call and two string scans.
    """
    raw = resolve(href, base_utf8)
    if raw is None or not raw.startswith(CRAWLABLE_PREFIXES):
        return None
    cut = raw.find("#")
    if cut >= 0:
        raw = raw[:cut]
    if "%" in raw and _CHANGING_ESCAPE.search(raw) is not None:
        return normalize_percent(raw)
    return raw


def normalize_percent(url: str) -> str:
    """Upper-case escape hex and decode escaped unreserved characters (see module doc)."""
    out = _normalize(url, decode_dot=True)
    if out is None:  # a decoded '.' formed a dot segment: keep %2E encoded
        out = _normalize(url, decode_dot=False)
        assert out is not None  # nothing decoded to '.', so no new dot segment
    return out


def _normalize(url: str, decode_dot: bool) -> str | None:
    """One pass of `normalize_percent`; None if decoding '.' created a dot segment."""
    pieces = url.split("%")
    out = [pieces[0]]
    decoded_dot = False
    for piece in pieces[1:]:
        key = piece[:ESCAPE_HEX_LEN]
        rep = _ESCAPES.get(key)
        if rep is None:  # stray '%': keep it literally
            out.append("%" + piece)
            continue
        if len(rep) == 1:  # an unreserved character
            if rep == ".":
                if decode_dot:
                    decoded_dot = True
                else:
                    rep = "%2E"
            elif rep in HEX_DIGITS and _ends_with_stray_escape_start(out):
                rep = "%" + key.upper()
        out.append(rep)
        out.append(piece[ESCAPE_HEX_LEN:])
    result = "".join(out)
    if decoded_dot and _has_dot_segment(result):
        return None
    return result


def _ends_with_stray_escape_start(out: list[str]) -> bool:
    """True if the text so far ends in `%` or `%<hex>`: one more hex digit would
    complete an escape that was not there before."""
    tail = "".join(out[-4:])[-ESCAPE_HEX_LEN:]
    if tail.endswith("%"):
        return True
    return len(tail) == ESCAPE_HEX_LEN and tail[0] == "%" and tail[1] in HEX_DIGITS


def _has_dot_segment(url: str) -> bool:
    """True if the path of absolute `url` has a `.` or `..` segment."""
    start = url.find("/", url.find("//") + 2)
    if start < 0:
        return False
    end = url.find("?", start)
    segments = url[start:end if end >= 0 else len(url)].split("/")
    return "." in segments or ".." in segments

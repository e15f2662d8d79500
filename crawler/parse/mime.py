"""Is a response HTML (or CSS) we should extract links from? And its charset parameter.

Decision for a missing (or empty) `Content-Type` (`is_html(None)`): treat it as HTML.
Servers that omit the header mostly serve HTML, and browsers sniff such
responses as HTML when they look like text. `LinkExtractor.parse` adds the
one check that matters for a crawler: a body without a Content-Type that
looks binary (WHATWG MIME sniffing's "binary data bytes" in its first 512
bytes, and no byte-order mark) yields no links.
"""

from __future__ import annotations

HTML_MEDIA_TYPES = frozenset(("text/html", "application/xhtml+xml"))
CSS_MEDIA_TYPE = "text/css"
HTML, CSS = "html", "css"  # what `parse_kind` returns
SNIFF_BYTES = 512  # how much of a body the binary check looks at
# WHATWG MIME sniffing: bytes that never occur in text.
_BINARY_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])
_TEXT_BYTES = bytes(b for b in range(256) if b not in _BINARY_BYTES)
_UTF16_BOMS = (b"\xfe\xff", b"\xff\xfe")


def media_type(content_type: str | None) -> str | None:
    """`text/html` from `Text/HTML; charset=UTF-8`; None if absent or empty."""
    if not content_type:
        return None
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind or None


def is_html(content_type: str | None) -> bool:
    """True for text/html and application/xhtml+xml, and for a missing or empty type (see module doc)."""
    kind = media_type(content_type)
    return kind is None or kind in HTML_MEDIA_TYPES


def is_css(content_type: str | None) -> bool:
    """True for text/css: a stylesheet whose url()/@import links we read."""
    return media_type(content_type) == CSS_MEDIA_TYPE


def parse_kind(content_type: str | None) -> str | None:
    """HTML, CSS, or None: which parser reads a body of this Content-Type (None: no links)."""
    kind = media_type(content_type)
    if kind is None or kind in HTML_MEDIA_TYPES:
        return HTML
    if kind == CSS_MEDIA_TYPE:
        return CSS
    return None


def charset_param(content_type: str | None) -> str | None:
    """The `charset` parameter of a Content-Type header, unquoted, or None."""
    if not content_type or ";" not in content_type:
        return None
    for param in content_type.split(";")[1:]:
        name, sep, value = param.partition("=")
        if sep and name.strip().lower() == "charset":
            value = value.strip().strip("\"'").strip()
            return value or None
    return None


def looks_binary(body: bytes) -> bool:
    """True if the first 512 bytes hold a byte that never occurs in text (UTF-16 BOM excepted)."""
    head = body[:SNIFF_BYTES]
    if head.startswith(_UTF16_BOMS):
        return False
    return bool(head.translate(None, _TEXT_BYTES))

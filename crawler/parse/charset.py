"""Which character encoding a page is decoded with, and decoding that never raises.

Order (HTML standard "determining the character encoding", DESIGN 2.8):
1. a byte-order mark (UTF-8, UTF-16LE/BE) wins over everything;
2. the HTTP `Content-Type` charset, if it names an encoding we know;
3. `<meta charset>` / `<meta http-equiv=Content-Type content="...charset=...">`
   found by the standard's prescan of the first 1024 bytes;
4. UTF-8, with U+FFFD for invalid bytes.

Labels are mapped the WHATWG way, not Python's: `iso-8859-1`, `latin1` and
`ascii` decode as windows-1252, `shift_jis` as windows-31j (cp932), `euc-kr`
as cp949, `gb2312`/`gbk` as gb18030, `big5` as big5-hkscs; a `<meta>` naming
UTF-16 means UTF-8. Only the encodings of the WHATWG Encoding standard are
accepted: an unknown or bogus label (or a Python pseudo-codec such as
`base64`, `rot13`, `undefined`) is ignored, so no page can break its own
decoding. The names we return are Python codec names (`utf-8`, `cp1252`,
`cp932`, ...).
"""

from __future__ import annotations

import codecs
from enum import Enum
from types import MappingProxyType
from typing import Final

import webencodings

PRESCAN_BYTES = 1024  # the HTML standard stops looking for <meta charset> here
DEFAULT_ENCODING = "utf-8"

BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)

# The WHATWG label table is webencodings' (a dependency of tinycss2, kept with html5lib); where its
# Python codec differs from what the WHATWG decoder does, ours wins: the standard decodes gbk and gb2312
# with its gb18030 decoder, and webencodings' x-user-defined codec is not in Python's registry (its upper
# half maps to U+F780.. and never spells a link, so windows-1252 decodes it for our purpose).
_OVERRIDES = MappingProxyType({"gbk": "gb18030", "gb18030": "gb18030", "x-user-defined": "cp1252"})

_UTF16 = frozenset(("utf-16-le", "utf-16-be"))
_WHITESPACE = b"\t\n\x0c\r "
_SPACE_OR_SLASH = frozenset(b"\t\n\x0c\r /")
_SPACE_OR_GT = frozenset(b"\t\n\x0c\r >")
_QUOTES = frozenset(b"\"'")
_CSS_CHARSET = b'@charset "'  # exactly these bytes, at the very start (CSS Syntax 3.2)


class _Prescan(Enum):
    END = "end"  # ran out of bytes inside a tag: the prescan gives up


_END: Final = _Prescan.END


def resolve_label(label: str | bytes | None) -> str | None:
    """The Python codec that decodes a charset label the WHATWG way, or None if unknown."""
    if not label:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    encoding = webencodings.lookup(label.strip("\t\n\x0c\r \"'"))
    if encoding is None:
        return None
    return _OVERRIDES.get(encoding.name) or encoding.codec_info.name


def sniff_bom(body: bytes) -> tuple[str, int] | None:
    """(codec, BOM length) if the body starts with a byte-order mark."""
    for bom, codec in BOMS:
        if body.startswith(bom):
            return codec, len(bom)
    return None


def choose_encoding(body: bytes, transport_label: str | None) -> tuple[str, int]:
    """(codec, bytes to skip) for a body: BOM, then HTTP charset, then prescan, then UTF-8."""
    bom = sniff_bom(body)
    if bom is not None:
        return bom
    codec = resolve_label(transport_label)
    if codec is not None:
        return codec, 0
    return prescan(body) or DEFAULT_ENCODING, 0


def choose_css_encoding(body: bytes, transport_label: str | None) -> tuple[str, int]:
    """(codec, bytes to skip) for a stylesheet (CSS Syntax 3.2): BOM, HTTP charset, `@charset`, UTF-8.

    The standard falls back to the referring document's encoding before
    UTF-8; a crawler fetches stylesheets on their own, so UTF-8 it is.
    """
    bom = sniff_bom(body)
    if bom is not None:
        return bom
    codec = resolve_label(transport_label)
    if codec is not None:
        return codec, 0
    if body.startswith(_CSS_CHARSET):
        end = body.find(b'";', len(_CSS_CHARSET), PRESCAN_BYTES)
        if end >= 0:
            codec = resolve_label(body[len(_CSS_CHARSET):end])
            if codec in _UTF16:
                return DEFAULT_ENCODING, 0  # a stylesheet that could say so is not UTF-16
            if codec is not None:
                return codec, 0
    return DEFAULT_ENCODING, 0


def decode(body: bytes, codec: str, skip: int = 0) -> str:
    """`body[skip:]` decoded with `codec`, invalid bytes as U+FFFD; never raises."""
    data = body[skip:] if skip else body
    try:
        return data.decode(codec, "replace")
    except (LookupError, UnicodeError, ValueError):  # pragma: no cover - allow-listed codecs replace
        return data.decode(DEFAULT_ENCODING, "replace")


def prescan(body: bytes) -> str | None:
    """The HTML standard's prescan for a `<meta>` charset in the first 1024 bytes.

    Per page, so a fast exit first: without the byte string `charset` there
    is nothing to find. Otherwise it jumps from `<` to `<` and reads
    attributes the way the standard does (comments skipped, quoted values
    honoured, names and values lower-cased).
    """
    data = body[:PRESCAN_BYTES].lower()  # ASCII-only lowering, as the standard's matching
    if b"charset" not in data:
        return None
    n = len(data)
    pos = 0
    while True:
        pos = data.find(b"<", pos)
        if pos < 0:
            return None
        if data.startswith(b"<!--", pos):
            end = data.find(b"-->", pos + 2)
            if end < 0:
                return None
            pos = end + 3
        elif data.startswith(b"<meta", pos) and pos + 5 < n and data[pos + 5] in _SPACE_OR_SLASH:
            found, pos = _meta_charset(data, pos + 5)
            if found is _END:
                return None
            if found is not None:
                return found
        elif pos + 1 < n and (_is_letter(data[pos + 1])
                              or (data[pos + 1] == 0x2F and pos + 2 < n and _is_letter(data[pos + 2]))):
            pos += 2
            while pos < n and data[pos] not in _SPACE_OR_GT:
                pos += 1
            while True:  # skip this tag's attributes (their values may hold '<')
                name, _, pos = _get_attribute(data, pos)
                if name is _END:
                    return None
                if name is None:
                    break
            pos += 1
        elif data.startswith((b"<!", b"</", b"<?"), pos):
            end = data.find(b">", pos)
            if end < 0:
                return None
            pos = end + 1
        else:
            pos += 1


def _is_letter(byte: int) -> bool:
    return 0x61 <= byte <= 0x7A  # data is lower-cased already


def _meta_charset(data: bytes, pos: int) -> tuple[str | None | _Prescan, int]:
    """Read one `<meta>` tag's attributes; (codec or None or _END, position after)."""
    seen: set[bytes] = set()
    got_pragma = False
    need_pragma: bool | None = None
    charset: bytes | None = None
    while True:
        name, value, pos = _get_attribute(data, pos)
        if name is _END:
            return _END, pos
        if name is None:
            break
        if name in seen:
            continue
        seen.add(name)
        if name == b"http-equiv":
            got_pragma = got_pragma or value == b"content-type"
        elif name == b"content":
            if charset is None:
                found = _charset_from_content(value)
                if found is not None:
                    charset, need_pragma = found, True
        elif name == b"charset":
            charset, need_pragma = value, False
    if need_pragma is None or (need_pragma and not got_pragma) or charset is None:
        return None, pos + 1
    codec = resolve_label(charset)
    if codec in _UTF16:
        codec = DEFAULT_ENCODING  # a <meta> can't truthfully declare UTF-16: it's UTF-8
    return codec, pos + 1


def _get_attribute(data: bytes, pos: int) -> tuple[bytes | None | _Prescan, bytes, int]:
    """The standard's "get an attribute": (name or None at '>' or _END, value, new position)."""
    n = len(data)
    while pos < n and data[pos] in _SPACE_OR_SLASH:
        pos += 1
    if pos >= n:
        return _END, b"", pos
    if data[pos] == 0x3E:  # '>'
        return None, b"", pos
    start = pos
    # The name: up to '=' (not first), whitespace, '/' or '>'.
    while True:
        if pos >= n:
            return _END, b"", pos
        byte = data[pos]
        if byte == 0x3D and pos > start:  # '='
            name = data[start:pos]
            pos += 1
            break
        if byte in _WHITESPACE:
            name = data[start:pos]
            while pos < n and data[pos] in _WHITESPACE:
                pos += 1
            if pos >= n:
                return _END, b"", pos
            if data[pos] != 0x3D:
                return name, b"", pos
            pos += 1
            break
        if byte == 0x2F or byte == 0x3E:  # '/' '>'
            return data[start:pos], b"", pos
        pos += 1
    while pos < n and data[pos] in _WHITESPACE:
        pos += 1
    if pos >= n:
        return _END, b"", pos
    byte = data[pos]
    if byte in _QUOTES:
        end = data.find(bytes((byte,)), pos + 1)
        if end < 0:
            return _END, b"", n
        return name, data[pos + 1:end], end + 1
    if byte == 0x3E:
        return name, b"", pos
    start = pos
    while pos < n and data[pos] not in _SPACE_OR_GT:
        pos += 1
    if pos >= n:
        return _END, b"", pos
    return name, data[start:pos], pos


def _charset_from_content(value: bytes) -> bytes | None:
    """The standard's "extracting a character encoding from a meta element"."""
    pos = 0
    n = len(value)
    while True:
        found = value.find(b"charset", pos)
        if found < 0:
            return None
        pos = found + len(b"charset")
        while pos < n and value[pos] in _WHITESPACE:
            pos += 1
        if pos < n and value[pos] == 0x3D:  # '='
            break
    pos += 1
    while pos < n and value[pos] in _WHITESPACE:
        pos += 1
    if pos >= n:
        return None
    byte = value[pos]
    if byte in _QUOTES:
        end = value.find(bytes((byte,)), pos + 1)
        return value[pos + 1:end] if end >= 0 else None
    end = pos
    while end < n and value[end] not in _WHITESPACE and value[end] != 0x3B:  # ';'
        end += 1
    return value[pos:end]

"""WHATWG URL resolution through ada, called the cheapest way we can.

Every extracted link passes through `resolve` once, so its cost is a large
share of the per-page budget (DESIGN 2.1, 2.13). The public `ada_url.join_url`
wraps the same C call but builds a garbage-collected handle, a fresh bytes copy
and an exception per invalid URL; calling ada's C API (`ada_c.h`, ada's stable
C interface, shipped inside the `ada_url` wheel as its cffi module) directly
with an explicit free is about 1.4x faster. If that module is ever missing or
renamed, we fall back to the public API: same results, slower.

`resolve_c` and `resolve_public` are both kept importable so the tests can hold
them to the same answers on the WHATWG conformance data.
"""

from __future__ import annotations

from collections.abc import Callable

import ada_url

try:  # ada's C API through the cffi module of the ada_url wheel
    from ada_url._ada_wrapper import ffi as _ffi
    from ada_url._ada_wrapper import lib as _lib
except ImportError:  # pragma: no cover - depends on the installed wheel
    _ffi = None
    _lib = None


def resolve_public(href: str, base: bytes | None) -> str | None:
    """WHATWG href of `href` parsed against `base` (UTF-8), or None: public ada_url API."""
    try:
        if base is None:
            return ada_url.URL(href).href
        return ada_url.URL(href, base.decode()).href
    except (ValueError, UnicodeError):
        return None


def _make_resolve_c() -> Callable[[str, bytes | None], str | None] | None:
    if _lib is None or _ffi is None:  # pragma: no cover - depends on the installed wheel
        return None
    parse = _lib.ada_parse
    parse_with_base = _lib.ada_parse_with_base
    is_valid = _lib.ada_is_valid
    get_href = _lib.ada_get_href
    free = _lib.ada_free
    unpack = _ffi.unpack

    def resolve_c(href: str, base: bytes | None) -> str | None:
        """WHATWG href of `href` parsed against `base` (UTF-8), or None: ada's C API.

        Hot path (once per link): local names only, one parse, one copy out, an
        explicit free instead of a gc-tracked handle.
        """
        try:
            href_b = href.encode()
        except UnicodeEncodeError:  # lone surrogates: not a URL
            return None
        if base is None:
            handle = parse(href_b, len(href_b))
        else:
            handle = parse_with_base(href_b, len(href_b), base, len(base))
        try:
            if not is_valid(handle):
                return None
            out = get_href(handle)
            return unpack(out.data, out.length).decode()
        finally:
            free(handle)

    return resolve_c


resolve_c = _make_resolve_c()
resolve: Callable[[str, bytes | None], str | None] = resolve_c or resolve_public

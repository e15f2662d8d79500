"""Bounded incremental content decoding."""

from __future__ import annotations

import gzip
import zlib

import pytest

from crawler.fetch.decode import BadContentEncoding, BodyDecoder, DecodedTooLarge, parse_codings

TEXT = b"<html>" + b"the quick brown fox jumps over the lazy dog " * 500 + b"</html>"


def raw_deflate(data: bytes) -> bytes:
    comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return comp.compress(data) + comp.flush()


def decode(codings: list[str], data: bytes, limit: int = 1 << 24, step: int | None = None) -> bytes:
    dec = BodyDecoder(codings, limit)
    step = step or len(data) or 1
    for i in range(0, len(data), step):
        dec.feed(data[i:i + step])
    dec.finish()
    return dec.decoded()


@pytest.mark.parametrize("coding, encoded", [
    ("gzip", gzip.compress(TEXT)),
    ("x-gzip", gzip.compress(TEXT)),
    ("deflate", zlib.compress(TEXT)),
    ("deflate", raw_deflate(TEXT)),
])
@pytest.mark.parametrize("step", [None, 1, 7, 4096])
def test_codings_round_trip_in_any_chunking(coding, encoded, step):
    assert decode([coding], encoded, step=step) == TEXT


def test_multi_member_gzip():
    assert decode(["gzip"], gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


def test_trailing_garbage_is_ignored():
    assert decode(["gzip"], gzip.compress(b"abc") + b"\0\0junk") == b"abc"


def test_truncated_stream_keeps_what_decoded():
    encoded = gzip.compress(TEXT)
    out = decode(["gzip"], encoded[: len(encoded) // 2])
    assert TEXT.startswith(out) and len(out) > 0


def test_stacked_codings_are_undone_in_reverse():
    encoded = gzip.compress(zlib.compress(TEXT))          # deflate applied first, then gzip
    assert decode(["deflate", "gzip"], encoded) == TEXT


def test_exact_limit_is_not_an_error():
    assert decode(["gzip"], gzip.compress(TEXT), limit=len(TEXT)) == TEXT


@pytest.mark.parametrize("step", [None, 1000])
def test_over_limit_stops_at_limit(step):
    limit = len(TEXT) - 1
    dec = BodyDecoder(["gzip"], limit)
    data = gzip.compress(TEXT)
    step = step or len(data)
    with pytest.raises(DecodedTooLarge):
        for i in range(0, len(data), step):
            dec.feed(data[i:i + step])
        dec.finish()
    assert dec.decoded() == TEXT[:limit] and dec.size == limit


def test_bomb_never_inflates_past_the_limit():
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)   # 64 MiB of zeros in ~64 KiB
    limit = 1 << 20
    dec = BodyDecoder(["gzip"], limit)
    with pytest.raises(DecodedTooLarge):
        dec.feed(bomb)
    assert dec.size == limit


@pytest.mark.parametrize("coding, data", [
    ("gzip", b"\x1f\x8b\x08\x00 definitely not gzip"),
    ("gzip", b"plain text"),
    ("deflate", b"\x78\x9c not zlib data"),
])
def test_corrupt_data_is_bad_content_encoding(coding, data):
    with pytest.raises(BadContentEncoding):
        decode([coding], data)


def test_one_byte_deflate_body_is_bad():
    dec = BodyDecoder(["deflate"], 100)
    dec.feed(b"x")
    with pytest.raises(BadContentEncoding):
        dec.finish()


@pytest.mark.parametrize("header, codings", [
    (None, []), ("", []), ("identity", []), ("GZIP", ["gzip"]), ("gzip, identity", ["gzip"]),
    ("deflate, gzip", ["deflate", "gzip"]), ("br", None), ("gzip, zstd", None), ("compress", None),
])
def test_parse_codings(header, codings):
    assert parse_codings(header) == codings

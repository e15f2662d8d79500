"""Bounded incremental content decoding: gzip, deflate, br, zstd, alone and chained."""

from __future__ import annotations

import gzip
import os
import tracemalloc
import zlib

import brotli
import pytest

from crawler.fetch.decode import ACCEPT_ENCODING, BadContentEncoding, BodyDecoder, DecodedTooLarge, parse_codings, zstd

TEXT = b"<html>" + b"the quick brown fox jumps over the lazy dog " * 500 + b"</html>"
MIB = 1 << 20
BOMB_DECODED_BYTES = 256 * MIB
BOMB_LIMIT = 1 * MIB
ZSTD_SKIPPABLE_FRAME = b"\x5a\x2a\x4d\x18" + (3).to_bytes(4, "little") + b"abc"   # magic, size, payload


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


def zstd_compress(data: bytes) -> bytes:
    return zstd.compress(data)


def encode(coding: str, data: bytes) -> bytes:
    return {"gzip": gzip.compress, "x-gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress,
            "zstd": zstd_compress}[coding](data)


def decode_split(codings: list[str], data: bytes, cut: int, limit: int = 1 << 24) -> bytes:
    """Decode `data` fed as two chunks split at `cut`."""
    dec = BodyDecoder(codings, limit)
    dec.feed(data[:cut])
    dec.feed(data[cut:])
    dec.finish()
    return dec.decoded()


# Fixed bytes (gzip's header carries a time unless told otherwise): pytest-xdist's processes must collect
# the same tests, and these bytes are part of each test's id.
ROUND_TRIPS = [
    ("gzip", gzip.compress(TEXT, mtime=0)),
    ("x-gzip", gzip.compress(TEXT, mtime=0)),
    ("deflate", zlib.compress(TEXT)),
    ("deflate", raw_deflate(TEXT)),
    ("br", brotli.compress(TEXT)),
    ("br", brotli.compress(TEXT, quality=0)),
    ("zstd", zstd.compress(TEXT)),
]


@pytest.mark.parametrize("coding, encoded", ROUND_TRIPS)
@pytest.mark.parametrize("step", [None, 1, 7, 4096])
def test_codings_round_trip_in_any_chunking(coding, encoded, step):
    assert decode([coding], encoded, step=step) == TEXT


@pytest.mark.parametrize("coding, encoded", ROUND_TRIPS)
def test_codings_round_trip_split_anywhere(coding, encoded):
    for cut in range(len(encoded) + 1):
        assert decode_split([coding], encoded, cut) == TEXT, cut


def test_accept_encoding_names_every_coding():
    assert ACCEPT_ENCODING == "gzip, deflate, br, zstd"
    assert all(parse_codings(c) == [c] for c in ("gzip", "deflate", "br", "zstd"))


def test_multi_member_gzip():
    assert decode(["gzip"], gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


def test_multi_member_gzip_split_anywhere():
    """A chunk may end anywhere around a member boundary, even one byte into the next member's magic."""
    encoded = gzip.compress(b"abc") + gzip.compress(b"def")
    for cut in range(len(encoded) + 1):
        assert decode_split(["gzip"], encoded, cut) == b"abcdef", cut


def test_zstd_frames_follow_one_another_at_any_split():
    encoded = zstd.compress(b"abc") + ZSTD_SKIPPABLE_FRAME + zstd.compress(b"def")
    for cut in range(len(encoded) + 1):
        assert decode_split(["zstd"], encoded, cut) == b"abcdef", cut


def test_zstd_trailing_garbage_is_ignored_at_any_split():
    encoded = zstd.compress(b"abc") + b"\0\0junk"
    for cut in range(len(encoded) + 1):
        assert decode_split(["zstd"], encoded, cut) == b"abc", cut


def test_br_data_after_the_stream_is_bad_at_any_split():
    """The library cannot say where a br stream ended inside a chunk: extra data is an error, however chunked."""
    encoded = brotli.compress(b"abc") + b"junk"
    for cut in range(len(encoded) + 1):
        with pytest.raises(BadContentEncoding):
            decode_split(["br"], encoded, cut)


def test_trailing_garbage_is_ignored():
    assert decode(["gzip"], gzip.compress(b"abc") + b"\0\0junk") == b"abc"


def test_truncated_stream_keeps_what_decoded():
    encoded = gzip.compress(TEXT)
    out = decode(["gzip"], encoded[: len(encoded) // 2])
    assert TEXT.startswith(out) and len(out) > 0


def test_truncated_br_and_zstd_keep_what_decoded():
    big = os.urandom(1 << 18)                            # incompressible: the first half decodes at once
    for coding in ("br", "zstd"):
        encoded = encode(coding, big)
        out = decode([coding], encoded[: len(encoded) // 2])
        assert big.startswith(out) and len(out) > 0, coding


def test_stacked_codings_are_undone_in_reverse():
    encoded = gzip.compress(zlib.compress(TEXT))          # deflate applied first, then gzip
    assert decode(["deflate", "gzip"], encoded) == TEXT


@pytest.mark.parametrize("codings", [["gzip", "br"], ["br", "gzip"], ["zstd", "br"], ["br", "zstd"],
                                     ["deflate", "zstd", "gzip"]])
@pytest.mark.parametrize("step", [None, 1, 100])
def test_chains_with_br_and_zstd(codings, step):
    encoded = TEXT
    for coding in codings:                                # in the order the server applied them
        encoded = encode(coding, encoded)
    assert parse_codings(", ".join(codings)) == codings
    assert decode(codings, encoded, step=step) == TEXT


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_exact_limit_is_not_an_error(coding):
    assert decode([coding], encode(coding, TEXT), limit=len(TEXT)) == TEXT


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
@pytest.mark.parametrize("step", [None, 1, 1000])
def test_over_limit_stops_at_limit(coding, step):
    limit = len(TEXT) - 1
    dec = BodyDecoder([coding], limit)
    data = encode(coding, TEXT)
    step = step or len(data)
    with pytest.raises(DecodedTooLarge):
        for i in range(0, len(data), step):
            dec.feed(data[i:i + step])
        dec.finish()
    assert dec.decoded() == TEXT[:limit] and dec.size == limit


def make_bomb(coding: str, decoded_bytes: int = BOMB_DECODED_BYTES) -> bytes:
    """`decoded_bytes` zeros encoded with `coding`, built a MiB at a time (never holding the zeros)."""
    block = b"\0" * MIB
    if coding == "br":
        comp = brotli.Compressor(quality=4)            # 256 MiB -> ~400 bytes in a third of a second
        parts = [comp.process(block) for _ in range(decoded_bytes // MIB)] + [comp.finish()]
    elif coding == "zstd":
        comp = zstd.ZstdCompressor()
        parts = [comp.compress(block) for _ in range(decoded_bytes // MIB)] + [comp.flush()]
    else:
        comp = zlib.compressobj(9, zlib.DEFLATED, 31 if coding == "gzip" else zlib.MAX_WBITS)
        parts = [comp.compress(block) for _ in range(decoded_bytes // MIB)] + [comp.flush()]
    return b"".join(parts)


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {coding: make_bomb(coding) for coding in ("gzip", "deflate", "br", "zstd")}


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
@pytest.mark.parametrize("step", [None, 4096])
def test_bomb_never_inflates_past_the_limit(bombs, coding, step):
    bomb = bombs[coding]
    dec = BodyDecoder([coding], BOMB_LIMIT)
    tracemalloc.start()
    try:
        with pytest.raises(DecodedTooLarge):
            for i in range(0, len(bomb), step or len(bomb)):
                dec.feed(bomb[i:i + (step or len(bomb))])
            dec.finish()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dec.size == BOMB_LIMIT and dec.decoded() == b"\0" * BOMB_LIMIT
    # What decoding allocated (the bomb itself was made before tracing): a few limits, never 256 MiB.
    assert peak < 4 * BOMB_LIMIT, (coding, peak)


@pytest.mark.parametrize("codings", [["gzip", "br"], ["br", "zstd"]])
def test_chained_bomb_stays_bounded(codings):
    """A bomb under another coding: the inner stage's output is bounded by the limit too."""
    bomb = make_bomb(codings[0], 64 * MIB)
    encoded = brotli.compress(bomb) if codings[1] == "br" else zstd.compress(bomb)
    dec = BodyDecoder(codings, BOMB_LIMIT)
    tracemalloc.start()
    try:
        with pytest.raises(DecodedTooLarge):
            dec.feed(encoded)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dec.size == BOMB_LIMIT and peak < 4 * BOMB_LIMIT, peak


def test_zstd_window_over_8_mib_is_refused():
    """RFC 9659 caps the window of the zstd coding at 8 MiB; a frame asking for more would make the
    decoder allocate it (up to 2 GiB), so it is refused before any allocation."""
    comp = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: 27})
    frame = comp.compress(os.urandom(MIB) * 12) + comp.flush()       # streamed: the header asks for 128 MiB
    with pytest.raises(BadContentEncoding, match="memory"):
        decode(["zstd"], frame)
    comp = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: 23})
    data = os.urandom(MIB) * 12
    assert decode(["zstd"], comp.compress(data) + comp.flush(), limit=len(data)) == data


@pytest.mark.parametrize("coding, data", [
    ("gzip", b"\x1f\x8b\x08\x00 definitely not gzip"),
    ("gzip", b"plain text"),
    ("deflate", b"\x78\x9c not zlib data"),
    ("br", b"this is not brotli at all"),
    ("br", brotli.compress(TEXT)[:-8] + b"\xff" * 8),
    ("zstd", b"\x28\xb5\x2f\xfd but not a zstd frame"),
    ("zstd", b"plain text, no frame at all"),
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
    ("deflate, gzip", ["deflate", "gzip"]), ("br", ["br"]), ("gzip, zstd", ["gzip", "zstd"]),
    ("gzip, BR", ["gzip", "br"]), ("compress", None), ("gzip, x-bzip2", None),
])
def test_parse_codings(header, codings):
    assert parse_codings(header) == codings

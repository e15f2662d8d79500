"""Bounded, incremental content decoding (gzip, deflate, br, zstd) for response bodies.

aiohttp's own decompression is switched off so that the fetcher can keep the
body as received (for WARC) and, above all, bound what decoding allocates: a
gzip bomb is a few hundred KiB on the wire and many GiB once inflated. Each
chunk read from the socket goes through one stage per coding, and every
stage is asked for at most the bytes still allowed, so no call ever produces
much more than the limit; crossing it raises `DecodedTooLarge` carrying
everything decoded so far (at most `max_bytes` long).

Supported codings, advertised in `ACCEPT_ENCODING`:

- gzip / x-gzip (multi-member too; trailing garbage after a member is
  ignored), through `zlib.decompressobj(...).decompress(data, max_length)`;
- deflate as the RFC says (zlib-wrapped) and as many servers send it (raw
  deflate, told apart by the first two bytes);
- br (brotli >= 1.2): `Decompressor.process(data, output_buffer_limit=...)`,
  drained with `process(b"")` while `can_accept_more_data()` is false. The
  limit is a floor on the output buffer's growth, not an exact cap (a call
  may return up to about twice it), so the stage asks in steps of
  `_BROTLI_STEP_BYTES` and cuts the last step at the budget. Data after the end
  of the stream is an error (the library cannot say where the stream ended
  within a chunk, so ignoring it would depend on how the body was chunked);
- zstd: `ZstdDecompressor.decompress(data, max_length)` (backports.zstd before
  Python 3.14, compression.zstd from it), one frame after another (skippable
  frames too); trailing bytes that start no frame are ignored, as for gzip.
  The window is capped at 8 MiB (`_ZSTD_WINDOW_LOG_MAX`, what RFC 9659 lets an
  HTTP encoder use), so a hostile frame cannot make the decoder allocate a
  2 GiB window; a frame asking for more is a `BadContentEncoding`.

A body cut short (the connection closed early, a limit) keeps what decoded,
as browsers do. Several codings ("gzip, br") are undone in reverse order, each
stage bounded the same way. Corrupt data of any coding, or an unknown coding,
is a `BadContentEncoding`.
"""

from __future__ import annotations

import zlib

import brotli

try:
    from compression import zstd  # Python 3.14+
except ImportError:                              # pragma: no cover - depends on the Python version
    from backports import zstd

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_WBITS = -zlib.MAX_WBITS
_GZIP_MAGIC = b"\x1f\x8b"
_ZLIB_HEADER_BYTES = 2
_ZLIB_METHOD_DEFLATE = 8
_ZLIB_CHECK_MODULUS = 31
_BROTLI_STEP_BYTES = 65536                       # output asked of brotli per call (it may return ~2x)
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"               # frame magic 0xFD2FB528, little-endian
_ZSTD_SKIPPABLE_TAIL = b"\x2a\x4d\x18"           # bytes 1-3 of skippable magics 0x184D2A50..5F
_ZSTD_SKIPPABLE_NIBBLE = 0x50
_ZSTD_MAGIC_BYTES = 4
_ZSTD_WINDOW_LOG_MAX = 23                        # 8 MiB: RFC 9659's limit for the zstd content coding

IDENTITY_CODINGS = frozenset({"", "identity"})
SUPPORTED_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd"})
ACCEPT_ENCODING = "gzip, deflate, br, zstd"


class DecodedTooLarge(Exception):
    """Decoding would exceed the limit; args[0] is what decoded up to the limit."""


class BadContentEncoding(Exception):
    """The body is not valid data of its Content-Encoding, or the coding is unsupported."""


def _looks_like_zlib(head: bytes) -> bool:
    """RFC 1950 header check: deflate method and a header checksum divisible by 31."""
    cmf, flg = head[0], head[1]
    return (cmf & 0x0F) == _ZLIB_METHOD_DEFLATE and ((cmf << 8) | flg) % _ZLIB_CHECK_MODULUS == 0


def _overflow(out: list[bytes], chunk: bytes, produced: int, budget: int) -> None:
    """`chunk` took the output past `budget`: keep what fits and raise DecodedTooLarge."""
    out.append(chunk[: len(chunk) - (produced - budget)])
    raise DecodedTooLarge(b"".join(out))


class _Inflater:
    """gzip or deflate: feeds compressed bytes in, returns at most `budget` decoded bytes."""

    __slots__ = ("_gzip", "_obj", "_pending", "_done", "_members")

    def __init__(self, coding: str) -> None:
        self._gzip = coding != "deflate"
        self._obj: zlib._Decompress | None = None   # the stream being decoded; None before a stream (member) starts
        self._pending = b""          # bytes held until a stream's first two bytes are known
        self._done = False           # nothing more is decoded; trailing bytes are ignored
        self._members = 0            # streams decoded to their end

    def _start(self, data: bytes) -> bytes:
        """Open the next stream from its first bytes; b"" while they are held or when they start none."""
        data = self._pending + data
        if len(data) < _ZLIB_HEADER_BYTES:
            self._pending = data
            return b""
        self._pending = b""
        if not self._gzip:
            self._obj = zlib.decompressobj(_ZLIB_WBITS if _looks_like_zlib(data) else _RAW_WBITS)
        elif self._members and data[:2] != _GZIP_MAGIC:
            self._done = True                                # trailing garbage after a member
            return b""
        else:
            self._obj = zlib.decompressobj(_GZIP_WBITS)
        return data

    def feed(self, data: bytes, budget: int) -> bytes:
        """Decode `data`; raise DecodedTooLarge if that yields more than `budget` bytes."""
        if self._done or not data:
            return b""
        out: list[bytes] = []
        produced = 0
        try:
            while data:
                if self._obj is None:
                    data = self._start(data)
                    if not data:
                        break
                obj = self._obj
                assert obj is not None                       # _start opened one
                # +1 so that reaching exactly the budget is not mistaken for crossing it.
                chunk = obj.decompress(data, budget - produced + 1)
                produced += len(chunk)
                if produced > budget:
                    _overflow(out, chunk, produced, budget)
                out.append(chunk)
                data = obj.unconsumed_tail
                if obj.eof:
                    data = obj.unused_data
                    self._obj = None
                    self._members += 1
                    if not self._gzip:
                        self._done = True                    # deflate is one stream
                        break
        except zlib.error as exc:
            raise BadContentEncoding(str(exc)) from exc
        return b"".join(out)

    def flush(self, budget: int) -> bytes:
        """Whatever the stage still holds (a truncated stream is accepted, as browsers do)."""
        if self._obj is None:
            if self._pending and not self._members:
                raise BadContentEncoding(f"{'gzip' if self._gzip else 'deflate'} body shorter than its header")
            return b""
        try:
            tail = self._obj.flush()     # the input is drained by feed: at most a last match is left
        except zlib.error as exc:
            raise BadContentEncoding(str(exc)) from exc
        if len(tail) > budget:
            raise DecodedTooLarge(tail[:budget])
        return tail


class _Unbrotli:
    """br: feeds compressed bytes in, returns at most `budget` decoded bytes."""

    __slots__ = ("_dec", "_finished")

    def __init__(self) -> None:
        self._dec = brotli.Decompressor()
        self._finished = False

    def feed(self, data: bytes, budget: int) -> bytes:
        """Decode `data`; raise DecodedTooLarge if that yields more than `budget` bytes."""
        if not data:
            return b""
        if self._finished:
            raise BadContentEncoding("br: data after the end of the stream")
        dec = self._dec
        out: list[bytes] = []
        produced = 0
        try:
            while True:
                step = min(budget - produced + 1, _BROTLI_STEP_BYTES)
                if dec.can_accept_more_data():
                    if not data:
                        break
                    chunk = dec.process(data, output_buffer_limit=step)
                    data = b""
                else:
                    chunk = dec.process(b"", output_buffer_limit=step)
                    if not chunk and not dec.can_accept_more_data() and not dec.is_finished():
                        raise BadContentEncoding("br: the decoder stopped making progress")
                if chunk:
                    produced += len(chunk)
                    if produced > budget:
                        _overflow(out, chunk, produced, budget)
                    out.append(chunk)
                if dec.is_finished():
                    self._finished = True
                    break
        except brotli.error as exc:
            raise BadContentEncoding(f"br: {exc}") from exc
        return b"".join(out)

    def flush(self, budget: int) -> bytes:
        """feed drains the decoder; a stream cut short keeps what decoded."""
        return b""


def _starts_zstd_frame(head: bytes) -> bool:
    return head[:4] == _ZSTD_MAGIC or (head[1:4] == _ZSTD_SKIPPABLE_TAIL
                                       and head[0] & 0xF0 == _ZSTD_SKIPPABLE_NIBBLE)


class _Unzstd:
    """zstd: feeds compressed bytes in, returns at most `budget` decoded bytes."""

    __slots__ = ("_obj", "_pending", "_done", "_frames")

    def __init__(self) -> None:
        self._obj = self._new()      # the frame being decoded; None between frames
        self._pending = b""          # bytes held until the next frame's magic is known
        self._done = False           # trailing bytes that start no frame: ignored
        self._frames = 0

    @staticmethod
    def _new() -> zstd.ZstdDecompressor:
        return zstd.ZstdDecompressor(options={zstd.DecompressionParameter.window_log_max: _ZSTD_WINDOW_LOG_MAX})

    def feed(self, data: bytes, budget: int) -> bytes:
        """Decode `data`; raise DecodedTooLarge if that yields more than `budget` bytes."""
        if self._done or not data:
            return b""
        out: list[bytes] = []
        produced = 0
        obj = self._obj
        try:
            while True:
                if obj is None:
                    data = self._pending + data
                    if len(data) < _ZSTD_MAGIC_BYTES:
                        self._pending = data
                        break
                    self._pending = b""
                    if not _starts_zstd_frame(data):
                        self._done = True
                        break
                    obj = self._obj = self._new()
                # +1 so that reaching exactly the budget is not mistaken for crossing it.
                chunk = obj.decompress(data, budget - produced + 1)
                data = b""
                if chunk:
                    produced += len(chunk)
                    if produced > budget:
                        _overflow(out, chunk, produced, budget)
                    out.append(chunk)
                if obj.eof:
                    data = obj.unused_data
                    obj = self._obj = None
                    self._frames += 1
                    if not data:
                        break
                elif obj.needs_input:
                    break
        except zstd.ZstdError as exc:
            raise BadContentEncoding(f"zstd: {exc}") from exc
        return b"".join(out)

    def flush(self, budget: int) -> bytes:
        """feed drains the decoder; a frame cut short keeps what decoded."""
        return b""


def _stage(coding: str) -> _Inflater | _Unbrotli | _Unzstd:
    if coding == "br":
        return _Unbrotli()
    if coding == "zstd":
        return _Unzstd()
    return _Inflater(coding)


class BodyDecoder:
    """Decodes a body chunk by chunk through one or more codings, never past `max_bytes`."""

    __slots__ = ("_stages", "_max_bytes", "_parts", "_size")

    def __init__(self, codings: list[str], max_bytes: int) -> None:
        # Codings are listed in the order they were applied; decode in reverse.
        self._stages = [_stage(c) for c in reversed(codings)]
        self._max_bytes = max_bytes
        self._parts: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def decoded(self) -> bytes:
        """Everything decoded so far."""
        return b"".join(self._parts)

    def _push(self, data: bytes, final: bool) -> None:
        for stage in self._stages:
            budget = self._max_bytes - self._size
            try:
                data = stage.feed(data, budget)
                if final:
                    data += stage.flush(budget - len(data))
            except DecodedTooLarge as exc:
                self._finish_partial(exc.args[0], stage)
                raise
        self._parts.append(data)
        self._size += len(data)

    def _finish_partial(self, partial: bytes, stage) -> None:
        # Only the last stage's output is the body; an intermediate stage crossing the limit
        # means the final output would too, so nothing more is appended.
        if stage is self._stages[-1]:
            self._parts.append(partial)
            self._size += len(partial)

    def feed(self, data: bytes) -> None:
        """Decode one chunk read from the socket."""
        self._push(data, final=False)

    def finish(self) -> None:
        """The body is complete: flush every stage."""
        self._push(b"", final=True)


def parse_codings(content_encoding: str | None) -> list[str] | None:
    """The codings to undo, in order applied; [] for none; None if one is unsupported."""
    if not content_encoding:
        return []
    codings = []
    for token in content_encoding.split(","):
        coding = token.strip().lower()
        if coding in IDENTITY_CODINGS:
            continue
        if coding not in SUPPORTED_CODINGS:
            return None
        codings.append(coding)
    return codings

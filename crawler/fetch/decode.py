"""Bounded, incremental content decoding (gzip, deflate) for response bodies.

aiohttp's own decompression is switched off so that the fetcher can keep the
body as received (for WARC) and, above all, bound what decoding allocates: a
gzip bomb is a few hundred KiB on the wire and many GiB once inflated. Each
chunk read from the socket is fed to `zlib.decompressobj().decompress` with
`max_length`, so no call ever produces more than the bytes still allowed;
crossing the limit raises `DecodedTooLarge` with everything decoded so far at
most `max_bytes` long.

Supported codings: gzip / x-gzip (multi-member too), deflate as the RFC says
(zlib-wrapped) and as many servers send it (raw deflate, detected from the
first two bytes), identity. br is not supported because no brotli library is
installed, and is therefore not advertised in Accept-Encoding; a response
using it, or any other unknown coding, is a `BadContentEncoding`.
"""

from __future__ import annotations

import zlib

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_WBITS = -zlib.MAX_WBITS
_GZIP_MAGIC = b"\x1f\x8b"
_ZLIB_HEADER_BYTES = 2
_ZLIB_METHOD_DEFLATE = 8
_ZLIB_CHECK_MODULUS = 31

IDENTITY_CODINGS = frozenset({"", "identity"})
SUPPORTED_CODINGS = frozenset({"gzip", "x-gzip", "deflate"})


class DecodedTooLarge(Exception):
    """Decoding would exceed the limit."""


class BadContentEncoding(Exception):
    """The body is not valid data of its Content-Encoding, or the coding is unsupported."""


def _looks_like_zlib(head: bytes) -> bool:
    """RFC 1950 header check: deflate method and a header checksum divisible by 31."""
    cmf, flg = head[0], head[1]
    return (cmf & 0x0F) == _ZLIB_METHOD_DEFLATE and ((cmf << 8) | flg) % _ZLIB_CHECK_MODULUS == 0


class _Inflater:
    """One coding stage: feeds compressed bytes in, returns at most `budget` decoded bytes."""

    __slots__ = ("_gzip", "_obj", "_pending", "_done")

    def __init__(self, coding: str) -> None:
        self._gzip = coding != "deflate"
        self._obj = zlib.decompressobj(_GZIP_WBITS) if self._gzip else None
        self._pending = b""          # deflate: bytes held until the header can be recognised
        self._done = False           # stream ended; trailing bytes are ignored

    def _start_deflate(self, data: bytes) -> bytes:
        data = self._pending + data
        if len(data) < _ZLIB_HEADER_BYTES:
            self._pending = data
            return b""
        self._pending = b""
        self._obj = zlib.decompressobj(_ZLIB_WBITS if _looks_like_zlib(data) else _RAW_WBITS)
        return data

    def feed(self, data: bytes, budget: int) -> bytes:
        """Decode `data`; raise DecodedTooLarge if that yields more than `budget` bytes."""
        if self._done or not data:
            return b""
        if self._obj is None:
            data = self._start_deflate(data)
            if not data:
                return b""
        out = []
        produced = 0
        try:
            while data:
                # +1 so that reaching exactly the budget is not mistaken for crossing it.
                chunk = self._obj.decompress(data, budget - produced + 1)
                produced += len(chunk)
                if produced > budget:
                    out.append(chunk[: len(chunk) - (produced - budget)])
                    raise DecodedTooLarge(b"".join(out))
                out.append(chunk)
                data = self._obj.unconsumed_tail
                if self._obj.eof:
                    data = self._obj.unused_data
                    if self._gzip and data[:2] == _GZIP_MAGIC:
                        self._obj = zlib.decompressobj(_GZIP_WBITS)   # next gzip member
                    else:
                        self._done = True                            # trailing garbage is ignored
                        break
        except zlib.error as exc:
            raise BadContentEncoding(str(exc)) from exc
        return b"".join(out)

    def flush(self, budget: int) -> bytes:
        """Whatever the stage still holds (a truncated stream is accepted, as browsers do)."""
        if self._obj is None:
            if self._pending:
                raise BadContentEncoding("deflate body shorter than its header")
            return b""
        try:
            tail = self._obj.flush(budget + 1)
        except zlib.error as exc:
            raise BadContentEncoding(str(exc)) from exc
        if len(tail) > budget:
            raise DecodedTooLarge(tail[:budget])
        return tail


class BodyDecoder:
    """Decodes a body chunk by chunk through one or more codings, never past `max_bytes`."""

    __slots__ = ("_stages", "_max_bytes", "_parts", "_size")

    def __init__(self, codings: list[str], max_bytes: int) -> None:
        # Codings are listed in the order they were applied; decode in reverse.
        self._stages = [_Inflater(c) for c in reversed(codings)]
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

    def _finish_partial(self, partial: bytes, stage: _Inflater) -> None:
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

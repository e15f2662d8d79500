"""The bad host's streamed responses: endless, too large, gzip bomb, stall.

Each one must hurt only a crawler without limits, never the server: bodies
are written lazily from one reused chunk (nothing is allocated per byte), the
gzip bomb is built once (about 1 MiB for 1 GiB inflated) and cached, and every
loop ends when the client goes away, when the server stops, or at its own
bound (`endless_max_s`/`endless_max_bytes`, `stall_s`). None of the bodies
contains a link, so whatever a crawler does with a cut body, the manifest
holds.

A client that goes away cancels the handler at once (the server runs with
aiohttp's handler cancellation), so the access log's `end` is when the client
left; as a fallback a write raises, or a waiting handler polls the transport
every `POLL_S`.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from .model import Case, WebParams

CHUNK_BYTES = 64 * 1024
"""Size of each body write."""
POLL_S = 0.05
"""How often a waiting handler checks for a stopping server (a departed client cancels the handler at once)."""
BOMB_BLOCK_BYTES = 1 << 20
"""Inflated size of one repeated deflate block of the gzip bomb."""
STALL_BODY_BYTES = 64 * 1024
"""Full Content-Length of the stalling response; half is sent, then the stall."""
# magic, deflate, no flags, mtime 0, max compression, unknown OS
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"


def gzip_bomb(inflated_bytes: int) -> bytes:
    """A gzip member of zeros that inflates to `inflated_bytes` (about 1/1000 of it compressed).

    After a full flush the deflate state is reset, so every 1 MiB block of
    zeros compresses to the same bytes: compress one, repeat it. Only the
    CRC-32 needs a pass over the (virtual) input.
    """
    blocks, tail = divmod(inflated_bytes, BOMB_BLOCK_BYTES)
    zero = bytes(BOMB_BLOCK_BYTES)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = comp.compress(zero) + comp.flush(zlib.Z_FULL_FLUSH)
    last = comp.compress(zero[:tail]) + comp.flush(zlib.Z_FINISH)
    # CRC-32 of `blocks` zero blocks without touching them: crc32(zero, v) is affine in v over GF(2),
    # so 33 CRCs of one block give the map, applied `blocks` times (milliseconds instead of a second).
    base = zlib.crc32(zero, 0)
    columns = [zlib.crc32(zero, 1 << i) ^ base for i in range(32)]
    crc = 0
    for _ in range(blocks):
        v, crc = crc, base
        for col in columns:
            if v & 1:
                crc ^= col
            v >>= 1
    crc = zlib.crc32(zero[:tail], crc)
    trailer = crc.to_bytes(4, "little") + (inflated_bytes & 0xFFFFFFFF).to_bytes(4, "little")
    return _GZIP_HEADER + block * blocks + last + trailer


@dataclass
class HostileProgress:
    """What a streamed response has done so far (read by the access log)."""

    status: int = 200
    bytes: int = 0


class Hostile:
    """Streams the bad host's failing cases; one per server."""

    def __init__(self, params: WebParams, stopping: Callable[[], bool]) -> None:
        self.params = params
        self._stopping = stopping
        self._bomb: bytes | None = None
        self._bomb_lock = asyncio.Lock()
        dull = b"<p>" + b"All work and no play makes a crawler a dull crawler. " * 1200
        self._chunk = dull[: CHUNK_BYTES - 5] + b"</p>\n"

    async def bomb(self) -> bytes:
        """The gzip bomb, built on first use in a thread (tens of milliseconds per GiB)."""
        async with self._bomb_lock:
            if self._bomb is None:
                self._bomb = await asyncio.to_thread(gzip_bomb, self.params.gzip_bomb_bytes)
        return self._bomb

    def _gone(self, request: web.BaseRequest) -> bool:
        transport = request.transport
        return self._stopping() or transport is None or transport.is_closing()

    async def serve(self, request: web.BaseRequest, case: Case, progress: HostileProgress) -> web.StreamResponse:
        """Write the response for `case`; returns it prepared and (if the client stayed) finished."""
        if case is Case.ENDLESS:
            resp = web.StreamResponse(status=200, headers={"Content-Type": "text/html; charset=utf-8"})
            await resp.prepare(request)
            deadline = time.monotonic() + self.params.endless_max_s
            head = b"<!DOCTYPE html>\n<html><head><title>Endless</title></head><body>\n"
            await self._write(request, resp, head, progress)
            await self._pour(request, resp, self.params.endless_max_bytes, deadline, progress)
        elif case is Case.TOO_LARGE:
            resp = web.StreamResponse(status=200, headers={"Content-Type": "text/html; charset=utf-8"})
            resp.content_length = self.params.big_body_bytes
            await resp.prepare(request)
            deadline = time.monotonic() + self.params.endless_max_s
            await self._pour(request, resp, self.params.big_body_bytes, deadline, progress)
        elif case is Case.GZIP_BOMB:
            body = await self.bomb()
            resp = web.StreamResponse(status=200, headers={"Content-Type": "text/html; charset=utf-8",
                                                           "Content-Encoding": "gzip"})
            resp.content_length = len(body)
            await resp.prepare(request)
            view = memoryview(body)
            for i in range(0, len(body), CHUNK_BYTES):
                if self._gone(request) or not await self._write(request, resp, view[i:i + CHUNK_BYTES], progress):
                    break
        elif case is Case.STALL:
            resp = web.StreamResponse(status=200, headers={"Content-Type": "text/html; charset=utf-8"})
            resp.content_length = STALL_BODY_BYTES
            await resp.prepare(request)
            half = STALL_BODY_BYTES // 2
            if await self._write(request, resp, self._chunk[:half], progress):
                await self._wait(request, self.params.stall_s)
                if not self._gone(request):
                    await self._write(request, resp, self._chunk[: STALL_BODY_BYTES - half], progress)
        else:
            raise ValueError(f"case {case} is not streamed")
        if progress.bytes == _expected_bytes(case, self.params, self._bomb) and not self._gone(request):
            await resp.write_eof()
        elif request.transport is not None:
            request.transport.close()  # cut short: never leave a half-sent response on a kept-alive connection
        return resp

    async def _pour(self, request: web.BaseRequest, resp: web.StreamResponse, limit: int,
                    deadline: float, progress: HostileProgress) -> None:
        """Write the chunk until `limit` bytes, the deadline, or the client/server goes."""
        chunk = self._chunk
        while progress.bytes < limit and time.monotonic() < deadline and not self._gone(request):
            piece = chunk if limit - progress.bytes >= len(chunk) else chunk[: limit - progress.bytes]
            if not await self._write(request, resp, piece, progress, deadline - time.monotonic()):
                return

    async def _write(self, request: web.BaseRequest, resp: web.StreamResponse, data: bytes | memoryview,
                     progress: HostileProgress, timeout_s: float | None = None) -> bool:
        """One write; False if the client went away or did not read within `timeout_s`."""
        try:
            if timeout_s is None:
                await resp.write(data)
            else:
                await asyncio.wait_for(resp.write(data), max(timeout_s, POLL_S))
        except (TimeoutError, ConnectionError, RuntimeError):
            return False
        progress.bytes += len(data)
        return True

    async def _wait(self, request: web.BaseRequest, seconds: float) -> None:
        """Sleep up to `seconds`, waking early when the client goes away or the server stops."""
        end = time.monotonic() + seconds
        while not self._gone(request):
            left = end - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(POLL_S, left))


def _expected_bytes(case: Case, params: WebParams, bomb: bytes | None) -> int:
    """Body bytes of a complete response of `case` (the endless one is complete at its bound)."""
    if case is Case.ENDLESS:
        return -1  # never "complete": always ends by cutting the connection
    if case is Case.TOO_LARGE:
        return params.big_body_bytes
    if case is Case.GZIP_BOMB:
        return len(bomb) if bomb is not None else -1
    return STALL_BODY_BYTES

"""Wire format of the peer transport: frame header, frame types, payload codecs.

A frame is ``u32 length | u8 type | payload`` (big-endian), where ``length``
counts the type byte and the payload (so it is at least 1). Everything here is
pure and synchronous except `read_frame`, which reads one frame from an
asyncio stream. Every decoder either returns a value or raises `FrameError`
with a short reason (the reason is what the server counts), never anything
else, so a hostile peer cannot crash a connection handler with odd bytes.

Hot path: `encode_batch` / `decode_batch` run once per batch of ~1000 URLs;
they join/split one string and check counts at C speed, no per-URL Python work.

Version 2 (this one) carries each URL's lineage in the BATCH body: a line is
``URL SP hops SP seed-fp SP via-fp`` (decimal, hex, hex; crawler/urls/lineage.py),
so the owner node knows how far from which seed the URL is and which page
linked it. A line may be a bare URL (batches spooled by version 1: no lineage
known). Version 1 bodies were bare URLs only; the HELLO carries the version
and the two ends refuse each other when they differ (crawler/peers/auth.py).
"""

from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import dataclass
from enum import IntEnum


class FrameType(IntEnum):
    HELLO = 1
    AUTH = 2
    BATCH = 3
    ACK = 4
    PING = 5
    PONG = 6
    BYE = 7
    CONTROL = 8


class FrameError(Exception):
    """A frame that cannot be accepted; `reason` is the counter key."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


# Counter keys (FrameError.reason and the server's rejection reasons).
EOF = "eof"                    # clean end of stream at a frame boundary
TRUNCATED = "truncated"        # end of stream inside a frame
OVERSIZED = "oversized"        # announced length above the limit
MALFORMED = "malformed"        # bad length, type, or payload

PROTOCOL_MAGIC = b"MCRP"       # "Mercator crawler peer protocol"
PROTOCOL_VERSION = 2          # 2: BATCH lines carry URL lineage; 1: bare URLs
LINEAGE_FIELDS = 3            # hops, seed, via after each URL of a version-2 BATCH line
NONCE_BYTES = 32
MAC_BYTES = 32                 # HMAC-SHA256
MAX_CLUSTER_NAME_BYTES = 255
MAX_NODE_ID = 0xFFFFFFFF
MAX_BYE_REASON_BYTES = 256

HEADER = struct.Struct(">IB")              # length (type + payload), type
HEADER_BYTES = HEADER.size
SEQ = struct.Struct(">Q")
BATCH_HEAD = struct.Struct(">QI")          # sequence number, URL count
HELLO_HEAD = struct.Struct(">4sBIIQ")      # magic, version, from id, to id, stream id
_HELLO_FIXED = HELLO_HEAD.size + NONCE_BYTES + 1   # + cluster name length byte
_TYPES = frozenset(int(t) for t in FrameType)


def encode_frame(ftype: FrameType, payload: bytes = b"") -> bytes:
    """One whole frame, ready for `transport.write`."""
    return HEADER.pack(len(payload) + 1, ftype) + payload


async def read_frame(reader: asyncio.StreamReader, max_frame_bytes: int) -> tuple[FrameType, bytes]:
    """Read one frame; raises FrameError (eof/truncated/oversized/malformed).

    `max_frame_bytes` bounds the announced length, so a peer cannot make us
    buffer more than that for one frame.
    """
    try:
        head = await reader.readexactly(HEADER_BYTES)
    except asyncio.IncompleteReadError as exc:
        raise FrameError(TRUNCATED if exc.partial else EOF) from None
    length, ftype = HEADER.unpack(head)
    if length > max_frame_bytes:
        raise FrameError(OVERSIZED, f"{length} bytes announced, limit {max_frame_bytes}")
    if length < 1 or ftype not in _TYPES:
        raise FrameError(MALFORMED, f"length {length}, type {ftype}")
    try:
        payload = await reader.readexactly(length - 1) if length > 1 else b""
    except asyncio.IncompleteReadError:
        raise FrameError(TRUNCATED) from None
    return FrameType(ftype), payload


# --- HELLO ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Hello:
    """First frame of each side: who I am, whom I expect, a fresh nonce."""
    from_id: int
    to_id: int
    cluster: str
    nonce: bytes
    stream_id: int = 0       # the sender's batch stream (client side); 0 from the server
    version: int = PROTOCOL_VERSION


def encode_hello(hello: Hello) -> bytes:
    name = hello.cluster.encode("utf-8")
    if len(name) > MAX_CLUSTER_NAME_BYTES:
        raise ValueError(f"cluster name longer than {MAX_CLUSTER_NAME_BYTES} bytes")
    if len(hello.nonce) != NONCE_BYTES:
        raise ValueError(f"nonce must be {NONCE_BYTES} bytes")
    if not (0 <= hello.from_id <= MAX_NODE_ID and 0 <= hello.to_id <= MAX_NODE_ID):
        raise ValueError("node id out of range")
    head = HELLO_HEAD.pack(PROTOCOL_MAGIC, hello.version, hello.from_id, hello.to_id, hello.stream_id)
    return encode_frame(FrameType.HELLO, head + hello.nonce + bytes([len(name)]) + name)


def decode_hello(payload: bytes) -> Hello:
    if len(payload) < _HELLO_FIXED:
        raise FrameError(MALFORMED, "short HELLO")
    magic, version, from_id, to_id, stream_id = HELLO_HEAD.unpack_from(payload)
    if magic != PROTOCOL_MAGIC:
        raise FrameError(MALFORMED, "bad magic")
    nonce = payload[HELLO_HEAD.size:HELLO_HEAD.size + NONCE_BYTES]
    name_len = payload[_HELLO_FIXED - 1]
    if len(payload) != _HELLO_FIXED + name_len:
        raise FrameError(MALFORMED, "HELLO length")
    try:
        cluster = payload[_HELLO_FIXED:].decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError(MALFORMED, "cluster name not UTF-8") from None
    return Hello(from_id, to_id, cluster, bytes(nonce), stream_id, version)


# --- AUTH ----------------------------------------------------------------------------

def encode_auth(mac: bytes) -> bytes:
    return encode_frame(FrameType.AUTH, mac)


def decode_auth(payload: bytes) -> bytes:
    if len(payload) != MAC_BYTES:
        raise FrameError(MALFORMED, "AUTH length")
    return payload


# --- BATCH ---------------------------------------------------------------------------

def encode_batch(seq: int, urls: list[str]) -> bytes:
    """A BATCH frame: u64 seq, u32 count, the (lineage-tagged) URLs UTF-8 and joined by newlines."""
    return batch_frame(seq, len(urls), encode_urls(urls))


def encode_urls(urls: list[str]) -> bytes:
    """The body of a BATCH frame (the costly part, done before a sequence number is given).

    Canonical URLs contain no newline (nor space: the lineage fields are
    space-separated); one that does is refused here (the count check catches
    it without a per-URL loop).
    """
    text = "\n".join(urls)
    if text.count("\n") != max(len(urls) - 1, 0):
        raise ValueError("a URL contains a newline")
    return text.encode("utf-8")


def batch_frame(seq: int, count: int, body: bytes) -> bytes:
    """Frame a body from `encode_urls` under its sequence number."""
    return HEADER.pack(len(body) + BATCH_HEAD.size + 1, FrameType.BATCH) + BATCH_HEAD.pack(seq, count) + body


BATCH_OVERHEAD_BYTES = HEADER_BYTES + BATCH_HEAD.size


def decode_batch(payload: bytes) -> tuple[int, list[str]]:
    if len(payload) < BATCH_HEAD.size:
        raise FrameError(MALFORMED, "short BATCH")
    seq, count = BATCH_HEAD.unpack_from(payload)
    body = payload[BATCH_HEAD.size:]
    if count == 0:
        if body:
            raise FrameError(MALFORMED, "BATCH of 0 URLs with a body")
        return seq, []
    try:
        urls = body.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise FrameError(MALFORMED, "BATCH not UTF-8") from None
    if len(urls) != count:
        raise FrameError(MALFORMED, f"BATCH announces {count} URLs, holds {len(urls)}")
    spaces = body.count(b" ")
    if spaces and spaces != LINEAGE_FIELDS * count:
        raise FrameError(MALFORMED, f"BATCH of {count} URLs holds {spaces} lineage separators, expected "
                                    f"{LINEAGE_FIELDS * count} (or none)")
    return seq, urls


def batch_seq(frame: bytes) -> int:
    """The sequence number of an encoded BATCH frame (spool index, resends)."""
    return SEQ.unpack_from(frame, HEADER_BYTES)[0]


# --- ACK, PING, PONG -----------------------------------------------------------------

def encode_seq(ftype: FrameType, value: int) -> bytes:
    """ACK (of one sequence number), PING and PONG (a token echoed back)."""
    return encode_frame(ftype, SEQ.pack(value))


def decode_seq(payload: bytes) -> int:
    if len(payload) != SEQ.size:
        raise FrameError(MALFORMED, "expected 8 bytes")
    return SEQ.unpack(payload)[0]


# --- BYE, CONTROL --------------------------------------------------------------------

def encode_bye(reason: str = "") -> bytes:
    return encode_frame(FrameType.BYE, reason.encode("utf-8")[:MAX_BYE_REASON_BYTES])


def decode_bye(payload: bytes) -> str:
    if len(payload) > MAX_BYE_REASON_BYTES:
        raise FrameError(MALFORMED, "BYE reason too long")
    return payload.decode("utf-8", errors="replace")


def encode_control(message: dict, max_bytes: int) -> bytes:
    if not isinstance(message, dict):
        raise TypeError("a control message is a dict")
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(body) > max_bytes:
        raise ValueError(f"control message of {len(body)} bytes exceeds {max_bytes}")
    return encode_frame(FrameType.CONTROL, body)


def decode_control(payload: bytes, max_bytes: int) -> dict:
    if len(payload) > max_bytes:
        raise FrameError(OVERSIZED, "CONTROL too long")
    try:
        message = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise FrameError(MALFORMED, "CONTROL is not JSON") from None
    if not isinstance(message, dict):
        raise FrameError(MALFORMED, "CONTROL is not a JSON object")
    return message

"""The handshake: both ends prove they know the cluster secret, without sending it.

    client (sender of batches)               server (owner of the hosts)
    HELLO(from=c, to=s, stream, nonce_c) -->
                                         <-- HELLO(from=s, to=c, nonce_s)
    AUTH(mac("C", transcript))           -->   checked before anything else
                                         <-- AUTH(mac("S", transcript))

transcript = cluster name, client id, server id, stream id, nonce_c, nonce_s;
mac = HMAC-SHA256(secret, domain | role | transcript). The client proves
itself first, so an unauthenticated client never obtains a proof from the
server; the role byte stops a proof from being reflected back at its maker.
Nonces are fresh from os.urandom for every connection, so a recorded AUTH
frame is worthless on a later connection (replay), and each side checks the
other's proof with hmac.compare_digest.

The handshake authenticates the two ends; it does not encrypt or sign the
frames that follow (see docs/peers.md: run peers on a private network or a
VPN when the path between machines is not trusted).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import struct

from crawler.peers.frames import (
    MAC_BYTES,
    NONCE_BYTES,
    PROTOCOL_VERSION,
    FrameError,
    FrameType,
    Hello,
    decode_auth,
    decode_bye,
    decode_hello,
    encode_auth,
    encode_hello,
    read_frame,
)

DOMAIN = b"crawler-peers/1\0"
ROLE_CLIENT = b"C"
ROLE_SERVER = b"S"
HANDSHAKE_FRAME_BYTES = 4096   # HELLO and AUTH are tiny; nobody unauthenticated gets to announce more

# Rejection reasons (counter keys) beyond the frame-level ones.
BAD_AUTH = "bad_auth"          # proof does not verify: wrong secret, or a replayed AUTH
UNKNOWN_NODE = "unknown_node"  # node id not in the cluster (or our own id)
WRONG_NODE = "wrong_node"      # the HELLO is addressed to another node id
WRONG_CLUSTER = "wrong_cluster"
BAD_VERSION = "bad_version"
REFUSED = "refused"            # the other end said BYE during the handshake (its reason is the detail)
UNEXPECTED = "malformed"       # a frame of the wrong type during the handshake


class HandshakeError(FrameError):
    """The handshake failed; `reason` is the counter key."""


_IDS = struct.Struct(">IIQ")


def proof(secret: bytes, role: bytes, cluster: str, client_id: int, server_id: int,
          stream_id: int, client_nonce: bytes, server_nonce: bytes) -> bytes:
    """HMAC-SHA256 of the handshake transcript, tagged with the prover's role."""
    name = cluster.encode("utf-8")
    message = b"".join((DOMAIN, role, _IDS.pack(client_id, server_id, stream_id),
                        client_nonce, server_nonce, bytes([len(name) & 0xFF]), name))
    return hmac.new(secret, message, hashlib.sha256).digest()


def new_nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


async def _read(reader: asyncio.StreamReader, expected: FrameType) -> bytes:
    ftype, payload = await read_frame(reader, HANDSHAKE_FRAME_BYTES)
    if ftype == FrameType.BYE and expected != FrameType.BYE:
        raise HandshakeError(REFUSED, f"the peer refused the connection: {decode_bye(payload)}")
    if ftype != expected:
        raise HandshakeError(UNEXPECTED, f"expected {expected.name}, got {ftype.name}")
    return payload


def _check_hello(hello: Hello, cluster: str) -> None:
    if hello.version != PROTOCOL_VERSION:
        raise HandshakeError(BAD_VERSION, f"node {hello.from_id} speaks peer protocol version {hello.version}, this "
                                          f"node speaks version {PROTOCOL_VERSION}: run one crawler version on "
                                          "every node of the cluster")
    if hello.cluster != cluster:
        raise HandshakeError(WRONG_CLUSTER, f"cluster {hello.cluster!r}")


async def client_handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                           me_id: int, peer_id: int, cluster: str, secret: bytes,
                           stream_id: int) -> None:
    """Run the client side; returns when both ends are authenticated (caller sets the timeout)."""
    nonce_c = new_nonce()
    writer.write(encode_hello(Hello(me_id, peer_id, cluster, nonce_c, stream_id)))
    await writer.drain()
    hello = decode_hello(await _read(reader, FrameType.HELLO))
    _check_hello(hello, cluster)
    if hello.from_id != peer_id or hello.to_id != me_id:
        raise HandshakeError(WRONG_NODE, f"answered as node {hello.from_id} to {hello.to_id}")
    args = (cluster, me_id, peer_id, stream_id, nonce_c, hello.nonce)
    writer.write(encode_auth(proof(secret, ROLE_CLIENT, *args)))
    await writer.drain()
    theirs = decode_auth(await _read(reader, FrameType.AUTH))
    if not hmac.compare_digest(theirs, proof(secret, ROLE_SERVER, *args)):
        raise HandshakeError(BAD_AUTH, f"node {peer_id} does not know the cluster secret")


async def server_handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                           me_id: int, known_ids: frozenset[int], cluster: str,
                           secret: bytes) -> Hello:
    """Run the server side; returns the client's HELLO once it has proved itself."""
    hello = decode_hello(await _read(reader, FrameType.HELLO))
    _check_hello(hello, cluster)
    if hello.from_id not in known_ids or hello.from_id == me_id:
        raise HandshakeError(UNKNOWN_NODE, f"node id {hello.from_id}")
    if hello.to_id != me_id:
        raise HandshakeError(WRONG_NODE, f"addressed to node {hello.to_id}, this is {me_id}")
    nonce_s = new_nonce()
    writer.write(encode_hello(Hello(me_id, hello.from_id, cluster, nonce_s)))
    await writer.drain()
    theirs = decode_auth(await _read(reader, FrameType.AUTH))
    args = (cluster, hello.from_id, me_id, hello.stream_id, hello.nonce, nonce_s)
    if not hmac.compare_digest(theirs, proof(secret, ROLE_CLIENT, *args)):
        raise HandshakeError(BAD_AUTH, f"node {hello.from_id} failed the proof")
    writer.write(encode_auth(proof(secret, ROLE_SERVER, *args)))
    await writer.drain()
    return hello


__all__ = ["HandshakeError", "proof", "client_handshake", "server_handshake", "new_nonce",
           "HANDSHAKE_FRAME_BYTES", "MAC_BYTES", "BAD_AUTH", "UNKNOWN_NODE", "WRONG_NODE",
           "WRONG_CLUSTER", "BAD_VERSION", "REFUSED"]

"""Hostile or broken clients against a real peer server: each is closed, counted by reason, and delivers nothing."""

from __future__ import annotations

import asyncio
import random
import struct
import time

import pytest
from tests.support.ports import free_port

from crawler.config.schema import NodeConfig
from crawler.peers import PeerNetwork
from crawler.peers.auth import ROLE_CLIENT, ROLE_SERVER, proof
from crawler.peers.frames import (
    FrameError,
    FrameType,
    Hello,
    decode_hello,
    decode_seq,
    encode_auth,
    encode_batch,
    encode_frame,
    encode_hello,
    read_frame,
)

SECRET = b"cluster-secret-for-tests"
CLUSTER = "test"
MAX_FRAME_BYTES = 65536
OPTIONS = dict(handshake_timeout_s=0.3, connect_timeout_s=0.5, reconnect_min_s=0.02, reconnect_max_s=0.1,
               ping_interval_s=0.2, dead_after_s=1.0, spill_after_s=0.2, max_frame_bytes=MAX_FRAME_BYTES)
NONCE = b"n" * 32


@pytest.fixture
async def server(tmp_path):
    """Node 0 of a two-node cluster, listening on 127.0.0.1; node 1 is never started."""
    cfgs = [NodeConfig(id=0, host="127.0.0.1", peer_port=free_port("127.0.0.1")),
            NodeConfig(id=1, host="127.0.0.2", peer_port=free_port("127.0.0.2"))]
    received = []
    net = PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path / "spool", lambda src, urls: received.append(urls),
                      **OPTIONS)
    await net.start()
    net.received = received
    net.cfgs = cfgs
    yield net
    await net.close(timeout_s=0.5)


async def connect(net: PeerNetwork):
    return await asyncio.open_connection("127.0.0.1", net.port)


async def until_closed(reader: asyncio.StreamReader, timeout_s: float = 3.0) -> bytes:
    """Everything the server sends until it hangs up."""
    chunks = []
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            chunk = await asyncio.wait_for(reader.read(65536), max(0.01, end - time.monotonic()))
        except (ConnectionError, TimeoutError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


async def rejected_with(net: PeerNetwork, reason: str, timeout_s: float = 3.0) -> None:
    end = time.monotonic() + timeout_s
    while net.counts()["rejected"].get(reason, 0) < 1:
        assert time.monotonic() < end, f"no rejection for {reason}: {net.counts()['rejected']}"
        await asyncio.sleep(0.01)


async def handshake(reader, writer, *, secret=SECRET, me=1, to=0, stream_id=5, nonce=NONCE):
    """A hand-written client half: returns the HELLO and AUTH frames it sent (for replay)."""
    hello_frame = encode_hello(Hello(me, to, CLUSTER, nonce, stream_id))
    writer.write(hello_frame)
    ftype, payload = await read_frame(reader, 4096)
    assert ftype == FrameType.HELLO
    server_nonce = decode_hello(payload).nonce
    args = (CLUSTER, me, to, stream_id, nonce, server_nonce)
    auth_frame = encode_auth(proof(secret, ROLE_CLIENT, *args))
    writer.write(auth_frame)
    return hello_frame, auth_frame, args


def assert_nothing_delivered(net: PeerNetwork) -> None:
    assert net.received == [] and net.counts()["batches_received_total"] == 0


async def test_wrong_secret(server):
    reader, writer = await connect(server)
    await handshake(reader, writer, secret=b"not the secret")
    writer.write(encode_batch(1, ["http://evil.test/"]))                  # pipelined: must never be processed
    assert await until_closed(reader) == b""
    await rejected_with(server, "bad_auth")
    assert server.counts()["rejected"] == {"bad_auth": 1}
    assert_nothing_delivered(server)
    writer.close()


async def test_unknown_node_id(server):
    reader, writer = await connect(server)
    writer.write(encode_hello(Hello(9, 0, CLUSTER, NONCE)))
    assert await until_closed(reader) == b""                              # no HELLO back to strangers
    await rejected_with(server, "unknown_node")
    assert server.counts()["rejected"] == {"unknown_node": 1}
    writer.close()


async def test_truncated_frame(server):
    reader, writer = await connect(server)
    writer.write(struct.pack(">IB", 100, FrameType.HELLO) + b"x" * 10)
    writer.write_eof()
    await until_closed(reader)
    await rejected_with(server, "truncated")
    assert server.counts()["rejected"] == {"truncated": 1}
    writer.close()


async def test_oversized_frame_before_authentication(server):
    reader, writer = await connect(server)
    writer.write(struct.pack(">IB", 16 * 1024 * 1024 + 1, FrameType.HELLO) + b"x" * 100)
    await until_closed(reader)
    await rejected_with(server, "oversized")
    assert server.counts()["rejected"] == {"oversized": 1}
    writer.close()


async def test_random_bytes(server):
    reader, writer = await connect(server)
    writer.write(random.Random(1234).randbytes(3000))
    await until_closed(reader)
    end = time.monotonic() + 3
    while not server.counts()["rejected"] and time.monotonic() < end:
        await asyncio.sleep(0.01)
    rejected = server.counts()["rejected"]
    assert sum(rejected.values()) == 1 and set(rejected) <= {"oversized", "malformed"}
    assert_nothing_delivered(server)
    writer.close()


async def test_replayed_auth_does_not_authenticate(server):
    # A genuine client: its batch is delivered and ACKed.
    reader, writer = await connect(server)
    hello_frame, auth_frame, args = await handshake(reader, writer)
    ftype, payload = await read_frame(reader, 4096)
    assert ftype == FrameType.AUTH and payload == proof(SECRET, ROLE_SERVER, *args)
    writer.write(encode_batch(1, ["http://genuine.test/"]))
    ftype, payload = await read_frame(reader, 4096)
    assert (ftype, decode_seq(payload)) == (FrameType.ACK, 1)
    writer.close()
    # An eavesdropper replays both recorded frames on a new connection: the server's nonce is new.
    reader, writer = await connect(server)
    writer.write(hello_frame)
    ftype, _ = await read_frame(reader, 4096)
    assert ftype == FrameType.HELLO
    writer.write(auth_frame)
    writer.write(encode_batch(2, ["http://replayed.test/"]))
    assert await until_closed(reader) == b""
    await rejected_with(server, "bad_auth")
    assert server.counts()["rejected"] == {"bad_auth": 1}
    assert server.received == [["http://genuine.test/"]]
    writer.close()


async def test_silent_client_times_out(server):
    reader, writer = await connect(server)
    await until_closed(reader)
    await rejected_with(server, "handshake_timeout")
    assert server.counts()["rejected"] == {"handshake_timeout": 1}
    writer.close()


async def test_wrong_cluster_name(server):
    reader, writer = await connect(server)
    writer.write(encode_hello(Hello(1, 0, "another-crawl", NONCE)))
    await until_closed(reader)
    await rejected_with(server, "wrong_cluster")
    writer.close()


@pytest.mark.parametrize("frame, reason", [
    (struct.pack(">IB", MAX_FRAME_BYTES + 1, FrameType.BATCH) + b"x" * 1000, "oversized"),
    (encode_frame(FrameType.BATCH, struct.pack(">QI", 1, 5) + b"http://one.test/"), "malformed"),
    (encode_frame(FrameType.ACK, b"\0" * 8), "malformed"),                # a client never sends ACKs
])
async def test_bad_frames_after_authentication(server, frame, reason):
    reader, writer = await connect(server)
    await handshake(reader, writer)
    ftype, _ = await read_frame(reader, 4096)
    assert ftype == FrameType.AUTH
    writer.write(frame)
    writer.write(encode_batch(2, ["http://after.test/"]))
    await until_closed(reader)
    end = time.monotonic() + 3
    while not server.stats()["inbound"][1]["dropped"] and time.monotonic() < end:
        await asyncio.sleep(0.01)
    assert server.stats()["inbound"][1]["dropped"] == {reason: 1}
    assert_nothing_delivered(server)
    writer.close()


async def test_client_refuses_a_server_that_cannot_prove_the_secret(server):
    """An impostor listening at node 1's address: our link never authenticates it, never sends it a batch."""
    frame_types = []

    async def impostor(reader, writer):
        try:
            ftype, payload = await read_frame(reader, 4096)
            hello = decode_hello(payload)
            writer.write(encode_hello(Hello(1, hello.from_id, CLUSTER, NONCE)))
            ftype, _ = await read_frame(reader, 4096)                     # the client's proof
            writer.write(encode_auth(b"\0" * 32))                         # a proof it cannot make
            while True:
                ftype, _ = await read_frame(reader, MAX_FRAME_BYTES)
                frame_types.append(ftype)
        except (FrameError, ConnectionError):
            pass
        writer.close()

    fake = await asyncio.start_server(impostor, server.cfgs[1].host, server.cfgs[1].peer_port)
    try:
        await server.send(1, ["http://secret-stuff.test/"])
        end = time.monotonic() + 3
        while server.stats()["links"][1]["connect_failures"].get("bad_auth", 0) < 1:
            assert time.monotonic() < end
            await asyncio.sleep(0.01)
        assert FrameType.BATCH not in frame_types and not server.connected(1)
    finally:
        fake.close()
        await fake.wait_closed()


async def test_silent_sender_is_dropped_by_the_server(tmp_path):
    """An authenticated sender that goes quiet (no frames, no PINGs) does not hold a connection forever."""
    cfgs = [NodeConfig(id=0, host="127.0.0.1", peer_port=free_port("127.0.0.1")),
            NodeConfig(id=1, host="127.0.0.2", peer_port=free_port("127.0.0.2"))]
    net = PeerNetwork(cfgs[0], cfgs, CLUSTER, SECRET, tmp_path, lambda src, urls: None,
                      **{**OPTIONS, "ping_interval_s": 0.05, "dead_after_s": 0.15})
    await net.start()
    try:
        reader, writer = await connect(net)
        await handshake(reader, writer)
        ftype, _ = await read_frame(reader, 4096)
        assert ftype == FrameType.AUTH
        await until_closed(reader)
        assert net.stats()["inbound"][1]["dropped"] == {"silent": 1}
        writer.close()
    finally:
        await net.close(timeout_s=0.5)


async def test_a_node_of_the_old_protocol_version_is_refused_naming_both_versions(server, caplog):
    """A version-1 node (bare-URL BATCH frames) says HELLO over real TCP: it gets a BYE naming its version and
    ours, is counted as bad_version, and nothing it sends is delivered."""
    from crawler.peers.frames import PROTOCOL_VERSION, decode_bye
    assert PROTOCOL_VERSION == 2
    reader, writer = await connect(server)
    writer.write(encode_hello(Hello(1, 0, CLUSTER, NONCE, 5, version=1)))
    writer.write(encode_batch(1, ["http://a.test/"]))
    await writer.drain()
    data = await until_closed(reader)
    writer.close()
    await rejected_with(server, "bad_version")
    length, ftype = struct.unpack_from(">IB", data)
    assert ftype == FrameType.BYE and len(data) == 4 + length
    message = decode_bye(data[5:])
    assert "version 1" in message and "version 2" in message, message
    assert any("version 1" in r.getMessage() and "version 2" in r.getMessage() for r in caplog.records)
    assert server.received == []


async def test_our_node_refuses_a_peer_that_answers_with_the_old_version():
    """The client side: a server answering HELLO with version 1 is refused with both versions named."""
    from crawler.peers.auth import BAD_VERSION, HandshakeError, client_handshake

    async def old_node(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_frame(reader, MAX_FRAME_BYTES)
        writer.write(encode_hello(Hello(1, 0, CLUSTER, NONCE, version=1)))
        await writer.drain()
        await reader.read()                  # until the client hangs up
        writer.close()

    old = await asyncio.start_server(old_node, "127.0.0.1", 0)
    port = old.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    with pytest.raises(HandshakeError) as err:
        await asyncio.wait_for(client_handshake(reader, writer, me_id=0, peer_id=1, cluster=CLUSTER, secret=SECRET,
                                                stream_id=1), 3)
    writer.close()
    old.close()
    await old.wait_closed()
    assert err.value.reason == BAD_VERSION
    assert "version 1" in str(err.value) and "version 2" in str(err.value)

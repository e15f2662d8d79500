"""The peer handshake: proofs bind every field, and both halves run over a real loopback socket."""

import asyncio

import pytest

from crawler.peers.auth import (
    BAD_AUTH,
    ROLE_CLIENT,
    ROLE_SERVER,
    UNKNOWN_NODE,
    WRONG_CLUSTER,
    WRONG_NODE,
    HandshakeError,
    client_handshake,
    new_nonce,
    proof,
    server_handshake,
)

SECRET = b"s3cret-for-tests"
N1, N2 = b"a" * 32, b"b" * 32


def test_proof_binds_every_field():
    base = proof(SECRET, ROLE_CLIENT, "c", 1, 2, 9, N1, N2)
    variants = [
        proof(b"other", ROLE_CLIENT, "c", 1, 2, 9, N1, N2),
        proof(SECRET, ROLE_SERVER, "c", 1, 2, 9, N1, N2),
        proof(SECRET, ROLE_CLIENT, "d", 1, 2, 9, N1, N2),
        proof(SECRET, ROLE_CLIENT, "c", 2, 1, 9, N1, N2),
        proof(SECRET, ROLE_CLIENT, "c", 1, 2, 8, N1, N2),
        proof(SECRET, ROLE_CLIENT, "c", 1, 2, 9, N2, N1),
    ]
    assert len(base) == 32 and base not in variants and len(set(variants)) == len(variants)


def test_nonces_are_fresh():
    assert len({new_nonce() for _ in range(100)}) == 100


async def handshake(client_kw: dict, server_kw: dict):
    """Run both halves over TCP on 127.0.0.1; returns (client outcome, server outcome)."""
    outcome = {}

    async def serve(reader, writer):
        try:
            outcome["server"] = await server_handshake(reader, writer, **server_kw)
        except HandshakeError as exc:
            outcome["server"] = exc
        except Exception as exc:             # the client hung up first
            outcome["server"] = exc
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await asyncio.wait_for(client_handshake(reader, writer, **client_kw), 5)
            outcome["client"] = "ok"
        except Exception as exc:
            outcome["client"] = exc
        writer.close()
        for _ in range(200):
            if "server" in outcome:
                break
            await asyncio.sleep(0.01)
    finally:
        server.close()
        await server.wait_closed()
    return outcome["client"], outcome["server"]


CLIENT = dict(me_id=1, peer_id=0, cluster="c", secret=SECRET, stream_id=77)
SERVER = dict(me_id=0, known_ids=frozenset({0, 1, 2}), cluster="c", secret=SECRET)


async def test_both_sides_authenticate():
    client, hello = await handshake(CLIENT, SERVER)
    assert client == "ok"
    assert (hello.from_id, hello.to_id, hello.stream_id) == (1, 0, 77)


@pytest.mark.parametrize("client_change, server_change, reason", [
    ({"secret": b"wrong"}, {}, BAD_AUTH),
    ({"me_id": 7}, {}, UNKNOWN_NODE),
    ({"me_id": 0}, {}, UNKNOWN_NODE),                  # claims to be the server itself
    ({"peer_id": 2}, {}, WRONG_NODE),
    ({"cluster": "other"}, {}, WRONG_CLUSTER),
])
async def test_server_refuses(client_change, server_change, reason):
    client, server = await handshake({**CLIENT, **client_change}, {**SERVER, **server_change})
    assert isinstance(server, HandshakeError) and server.reason == reason
    assert client != "ok"


async def test_client_refuses_a_server_without_the_secret():
    """The server proves itself too: a listener that lacks the secret never gets our batches."""
    client, server = await handshake(CLIENT, {**SERVER, "secret": b"wrong"})
    assert isinstance(server, HandshakeError) and server.reason == BAD_AUTH   # it cannot check our proof
    assert client != "ok"

"""Peer transport: batches of URLs from the host splitter of one node to the owner of their hosts.

Shape. Each node runs one `PeerNetwork`: a `PeerServer` on its peer port for
what others send it, and one `PeerLink` per other node for what it sends.
So between two nodes there are two TCP connections, one per direction; the
side that connects is the side that sends batches, and the other only ACKs.

    splitter --send(peer, urls)--> PeerLink --BATCH--> PeerServer --on_batch--> DUE
                                      ^  |                  |
                                      |  +--> spool/        +--ACK (after on_batch returns)
                                      +---------------------+

Wire (frames.py). ``u32 length | u8 type | payload``, big-endian, length =
type byte + payload. HELLO, AUTH, BATCH (u64 seq, u32 count, URLs joined by
newlines), ACK (u64 seq), PING/PONG (u64 token), BYE (reason text), CONTROL
(a small JSON object for the node's distributed termination). Byte-level
layout and the guarantees are in docs/peers.md.

Trust (auth.py). Both ends prove knowledge of the cluster secret with
HMAC-SHA256 over fresh nonces, the cluster name, both node ids and the
sender's stream id; the client proves first. A wrong secret, a replayed
AUTH, an unknown node id, a bad, truncated or oversized frame, random
bytes, or a handshake that does not finish in time close the connection and
are counted by reason in `counts()["rejected"]`; none of it reaches
`on_batch`.

Delivery (link.py, spool.py). At least once, in sequence order. A batch
stays with the sender until ACKed; a lost connection means resending from
the oldest unacknowledged batch after a reconnect with capped, jittered
exponential backoff. At most `window_batches` are on the wire and
`queue_batches` wait in memory per peer. Backpressure choice: while a peer
is up but slow, `send()` awaits (the splitter slows down); while a peer is
down, `send()` never waits: its queue and new batches spill to an append-only
spool on disk once the queue is full or the peer has been down
`spill_after_s`, and are replayed in order when it returns; spool files go
once drained and ACKed. A peer that accepts TCP but never answers fails the
handshake timeout; one that goes silent mid-session fails the PING watchdog.
Sequence numbers are leased from a file in the spool, so they never repeat
across restarts.

Dedupe (server.py). The receiver keeps, per sender stream, the highest
sequence number processed; a resend below it is ACKed but not passed on, so
`batches_received_total` counts distinct batches. `batches_sent_total`
counts each batch once, when `send()` accepts it (resends never), so the
sum over nodes of sent minus received is the number of batches in transit.

Close. `close()` flushes until its timeout, sends BYE, writes what is still
in memory to the spool for the next start, and stops the server after the
callbacks in progress have returned.
"""

from crawler.peers.network import PeerNetwork

__all__ = ["PeerNetwork"]

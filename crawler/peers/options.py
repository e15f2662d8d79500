"""Tunables of the peer transport, with their units and defaults.

`PeerNetwork(**options)` takes these as keyword arguments. They are meant to
become the `peers:` section of the configuration schema under the same names.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

MIB = 1024 * 1024


@dataclass(frozen=True)
class PeerOptions:
    listen_host: str | None = None
    """Address the peer server binds (e.g. 0.0.0.0 in a container); None = the node's own `host`."""
    queue_batches: int = 64
    """Batches per peer held in memory waiting to be sent; send() awaits (backpressure) when full and the peer is up."""
    window_batches: int = 8
    """Batches per peer on the wire without an ACK yet (memory per peer is at most queue_batches + window_batches)."""
    max_frame_bytes: int = 16 * MIB
    """Largest frame accepted or sent; bigger batches are split before sending."""
    max_control_bytes: int = 65536
    """Largest CONTROL message (JSON), in bytes."""
    connect_timeout_s: float = 5.0
    """Time allowed to open the TCP connection to a peer."""
    handshake_timeout_s: float = 5.0
    """Time allowed for the HELLO/AUTH exchange (both directions)."""
    ping_interval_s: float = 5.0
    """A link that has heard nothing for this long sends a PING."""
    dead_after_s: float = 15.0
    """A link waiting for an ACK or a PONG that hears nothing for this long is dropped and reconnected."""
    ack_timeout_s: float = 60.0
    """A batch unacknowledged this long drops the link (peer alive but not processing)."""
    reconnect_min_s: float = 0.1
    """First delay before reconnecting; doubles per failed attempt, with jitter."""
    reconnect_max_s: float = 30.0
    """Cap of the reconnect delay."""
    spill_after_s: float = 10.0
    """A peer down this long gets its queued batches spilled to disk (earlier when its queue is full)."""
    spool_segment_bytes: int = 64 * MIB
    """A spool segment file is closed and a new one started beyond this size."""
    recv_buffer_batches: int = 32
    """Per incoming connection: frames read but not yet processed (the sender's window normally bounds it)."""
    max_handshakes: int = 64
    """Incoming connections allowed to be in the handshake at once; more are closed at once."""

    def __post_init__(self) -> None:
        for name in ("queue_batches", "window_batches", "recv_buffer_batches", "max_handshakes"):
            if getattr(self, name) < 1:
                raise ValueError(f"peers.{name} must be at least 1")
        if self.max_frame_bytes < 4096:
            raise ValueError("peers.max_frame_bytes must be at least 4096")
        for f in fields(self):
            if f.name.endswith("_s") and not getattr(self, f.name) > 0:
                raise ValueError(f"peers.{f.name} must be positive")
        if self.dead_after_s <= self.ping_interval_s:
            raise ValueError("peers.dead_after_s must exceed peers.ping_interval_s")
        if self.reconnect_max_s < self.reconnect_min_s:
            raise ValueError("peers.reconnect_max_s must be at least peers.reconnect_min_s")

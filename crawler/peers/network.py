"""PeerNetwork: the one object the node talks to (server + one link per peer + spool)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from crawler.config.schema import NodeConfig, PeersConfig
from crawler.peers.frames import BATCH_OVERHEAD_BYTES, encode_urls
from crawler.peers.link import PeerLink
from crawler.peers.options import peer_options
from crawler.peers.server import PeerServer

LOCK_FILE = "LOCK"


class PeerNetwork:
    """Authenticated, at-least-once batch transport between the nodes of one cluster."""

    def __init__(self, me: NodeConfig, nodes: list[NodeConfig], cluster_name: str, secret: bytes,
                 spool_dir: str | Path, on_batch: Callable[[int, list[str]], Awaitable[None] | None],
                 on_control: Callable[[int, dict], None] | None = None, options: PeersConfig | None = None,
                 **overrides: Any) -> None:
        """`options` is the config's `peers:` section (the defaults when None); `overrides` change single
        keys of it (tests and benches set a few)."""
        ids = [n.id for n in nodes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"cluster.nodes: duplicate node ids in {ids}")
        if me.id not in ids:
            raise ValueError(f"node {me.id} is not among cluster.nodes {ids}")
        if not secret:
            raise ValueError("the cluster secret is empty; set cluster.secret_env or cluster.secret_file")
        self.me = me
        self.nodes = {n.id: n for n in nodes}
        self.cluster_name = cluster_name
        self.spool_dir = Path(spool_dir)
        self.opts = peer_options(options, **overrides)
        self._secret = bytes(secret)
        self._on_batch = on_batch
        self._on_control = on_control
        self._server: PeerServer | None = None
        self._links: dict[int, PeerLink] = {}
        self._port = 0
        self._lock_fd: int | None = None
        self._started = False
        self._closed = False

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on the peer port, then connect to every other node in the background."""
        if self._started:
            raise RuntimeError("PeerNetwork already started")
        self._started = True
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        self._lock_spool()
        try:
            self._server = PeerServer(self.me.id, frozenset(self.nodes), self.cluster_name, self._secret,
                                      self.opts, self._on_batch, self._on_control)
            self._port = await self._server.start(self.opts.listen_host or self.me.host, self.me.peer_port)
            for peer_id, node in self.nodes.items():
                if peer_id != self.me.id:
                    self._links[peer_id] = PeerLink(self.me.id, node, self.cluster_name, self._secret,
                                                    self.spool_dir, self.opts)
        except BaseException:
            await self.abort()
            raise
        for link in self._links.values():
            link.start()

    def _lock_spool(self) -> None:
        """One process per spool directory: two senders sharing sequence numbers would lose batches."""
        fd = os.open(self.spool_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise RuntimeError(f"spool directory {self.spool_dir} is in use by another process") from None
        self._lock_fd = fd

    async def close(self, timeout_s: float = 5.0) -> None:
        """Flush for up to `timeout_s`, say BYE, spool what is left, stop the server."""
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        assert self._server is not None    # started
        try:
            await asyncio.gather(self._server.close(deadline), *(link.close(deadline) for link in self._links.values()))
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    async def abort(self) -> None:
        """Simulate a crash (tests): drop every connection without BYE or flush; keep the spool as it is."""
        self._closed = True
        if self._server is not None:
            self._server.abort()
        await asyncio.gather(*(link.abort() for link in self._links.values()))
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- sending -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound peer port."""
        return self._port

    async def send(self, peer_id: int, urls: list[str]) -> None:
        """Queue one batch for `peer_id`; awaits while that peer is up and its queue is full."""
        if not urls:
            return
        link = self._link(peer_id)
        for body, count in self._encode(urls):
            await link.put(body, count)

    def _encode(self, urls: list[str]) -> list[tuple[bytes, int]]:
        """One batch body, or several when the frame would exceed max_frame_bytes."""
        body = encode_urls(urls)
        if len(body) + BATCH_OVERHEAD_BYTES <= self.opts.max_frame_bytes:
            return [(body, len(urls))]
        if len(urls) == 1:
            raise ValueError(f"a URL of {len(body)} bytes does not fit in a frame of {self.opts.max_frame_bytes}")
        half = len(urls) // 2
        return self._encode(urls[:half]) + self._encode(urls[half:])

    def send_control(self, peer_id: int, message: dict) -> None:
        """Best effort, not spooled; dropped (and counted) if the link is not up."""
        self._link(peer_id).send_control(message)

    def broadcast_control(self, message: dict) -> None:
        for link in self._links.values():
            link.send_control(message)

    def _link(self, peer_id: int) -> PeerLink:
        if self._closed:
            raise RuntimeError("PeerNetwork is closed")
        link = self._links.get(peer_id)
        if link is None:
            if not self._started:
                raise RuntimeError("PeerNetwork.start() has not been awaited")
            raise ValueError(f"node {peer_id} is not a peer of node {self.me.id} (peers: {sorted(self._links)})")
        return link

    # --- state ---------------------------------------------------------------------------

    def connected(self, peer_id: int) -> bool:
        """Our link to `peer_id` is up (authenticated)."""
        link = self._links.get(peer_id)
        return link is not None and link.up

    def marks(self) -> dict[int, int]:
        """The newest batch number per peer: what `durable` is later asked about."""
        return {pid: link.last_seq for pid, link in self._links.items()}

    def durable(self, marks: dict[int, int]) -> bool:
        """Every batch up to each peer's mark is ACKed or spooled (survives our being killed)."""
        return all(self._links[pid].durable_through(seq) for pid, seq in marks.items())

    def delivered(self, peer_id: int) -> bool:
        """Every batch queued for `peer_id` so far is ACKed (nothing queued, unacked or spooled)."""
        return self._link(peer_id).drained()

    def idle(self) -> bool:
        """Nothing queued, unacked or spooled for any peer, and no received batch being processed."""
        return all(link.drained() for link in self._links.values()) and not (self._server and self._server.busy())

    def counts(self) -> dict:
        """Exact counters: totals for termination, per-peer figures, rejected connections by reason."""
        peers = {}
        for peer_id, link in self._links.items():
            assert self._server is not None    # links exist only once the server does
            out = link.outbox.counters
            inc = self._server.inbound[peer_id]
            peers[peer_id] = {
                "batches_sent": out.batches_sent, "urls_sent": out.urls_sent, "bytes_sent": out.bytes_sent,
                "batches_acked": out.batches_acked, "urls_acked": out.urls_acked, "batches_resent": out.batches_resent,
                "batches_received": inc.batches_received, "urls_received": inc.urls_received,
                "bytes_received": inc.bytes_received, "batches_duplicate": inc.batches_duplicate,
                "spooled": link.outbox.spool.live, "batches_spilled": out.batches_spilled,
                "queued": len(link.outbox.pending), "unacked": len(link.outbox.unacked) + len(link.outbox.resend),
            }
        return {
            "batches_sent_total": sum(p["batches_sent"] for p in peers.values()),
            "batches_received_total": self._server.batches_received_total if self._server else 0,
            "peers": peers,
            "rejected": dict(self._server.rejected) if self._server else {},
        }

    def stats(self) -> dict:
        """Everything in counts() plus link states, spool sizes, failures and the options in force."""
        result = self.counts()
        result["node"] = self.me.id
        result["port"] = self._port
        result["idle"] = self.idle() if self._started else True
        result["links"] = {peer_id: link.stats() for peer_id, link in self._links.items()}
        if self._server is not None:
            result["inbound"] = {
                peer_id: {
                    "connected": self._server.connected(peer_id), "connects": c.connects,
                    "controls_received": c.controls_received, "callback_errors": c.callback_errors,
                    "dropped": dict(c.dropped),
                } for peer_id, c in self._server.inbound.items()
            }
            result["accepted"] = self._server.accepted
        result["options"] = dict(vars(self.opts))
        return result

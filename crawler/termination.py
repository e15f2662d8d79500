"""Distributed termination: the crawl ends when the whole cluster has no work left.

No node can tell alone: an idle node may be handed work by a batch still in
flight from a peer. Node 0 coordinates rounds over the peers' CONTROL
channel (Mattern's counting idea, adapted to acknowledged batches):

- each round the coordinator asks every node for its status: `idle` (its
  frontier is empty, nothing is in flight, its DUE and splitter hold nothing,
  and its peer links hold no batch that the receiver has not acknowledged)
  and `activity`, counters that change whenever it sends or processes a batch;
- a batch is acknowledged only after the receiver has put its URLs through its
  DUE, so "every node idle" means no URL is anywhere in transit or in a queue;
- statuses are gathered at slightly different moments, so one round could
  miss a batch that moved between two answers. The crawl is over only when
  two consecutive rounds both find every node idle *and* every node's
  activity counters unchanged between them: then no batch moved in between.

A node that restarts comes back with new counters or does not answer a
round; either only delays the decision, never makes it wrong. When the
coordinator decides, it broadcasts DONE and every node stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger("crawler.termination")

PROBE = "probe"
BUSY_BACKOFF = 8          # rounds that find a busy node space out to this many times round_s
STATUS = "status"
DONE = "done"


class Termination:
    """One per node; node 0's `run_coordinator()` decides, the others answer probes."""

    def __init__(self, node_id: int, nodes: int, status: Callable[[], dict],
                 send: Callable[[int, dict], None], broadcast: Callable[[dict], None],
                 on_done: Callable[[], None], round_s: float) -> None:
        self.node_id = node_id
        self.nodes = nodes
        self._status = status
        self._send = send
        self._broadcast = broadcast
        self._on_done = on_done
        self.round_s = round_s
        self.reply_timeout_s = max(1.0, 10 * round_s)
        self._round = 0
        self._replies: dict[int, dict] = {}
        self._all_in = asyncio.Event()
        self.rounds = 0
        self.done = False

    def on_control(self, peer: int, message: dict) -> None:
        kind = message.get("t")
        if kind == PROBE:
            reply = {"t": STATUS, "round": message.get("round"), **self._status()}
            self._send(peer, reply)
        elif kind == STATUS and self.node_id == 0:
            if message.get("round") == self._round:
                self._replies[peer] = message
                if len(self._replies) == self.nodes:
                    self._all_in.set()
        elif kind == DONE:
            self.done = True
            self._on_done()

    async def _poll(self) -> dict[int, dict] | None:
        """One round: every node's status, or None if some node did not answer in time."""
        self._round += 1
        self._replies = {self.node_id: self._status()}
        self._all_in.clear()
        if self.nodes == 1:
            return self._replies
        self._broadcast({"t": PROBE, "round": self._round})
        try:
            await asyncio.wait_for(self._all_in.wait(), self.reply_timeout_s)
        except TimeoutError:
            return None
        return dict(self._replies)

    async def run_coordinator(self) -> None:
        """Node 0 only: poll until two consecutive quiet, unchanged rounds; then DONE.

        A round that finds another node busy doubles the wait before the next one, up to
        BUSY_BACKOFF rounds' time: a coordinator whose own hosts are done would otherwise
        wake every busy node ten times a second, each time for nothing, until the last
        of them finishes. The end is then seen up to that much later.
        """
        previous: dict[int, list] | None = None
        wait_s = self.round_s
        while not self.done:
            await asyncio.sleep(wait_s)
            if self.nodes > 1 and not self._status().get("idle"):
                # The cluster cannot be done while this node works: no round, so the other
                # nodes are not woken ten times a second for the whole crawl.
                previous, wait_s = None, self.round_s
                continue
            replies = await self._poll()
            self.rounds += 1
            if replies is None or not all(r.get("idle") for r in replies.values()):
                previous = None
                if replies is not None:
                    wait_s = min(wait_s * 2, self.round_s * BUSY_BACKOFF)
                continue
            wait_s = self.round_s
            activity = {node: list(r.get("activity", ())) for node, r in replies.items()}
            if previous == activity:
                log.info("termination: cluster idle in rounds %d and %d; done", self._round - 1, self._round)
                self.done = True
                self._broadcast({"t": DONE})
                self._on_done()
                return
            previous = activity

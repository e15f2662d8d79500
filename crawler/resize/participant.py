"""One participant of a resize: check its data_dir, exchange records over the peer protocol, apply.

The exchange, for participant p of run R:

- p listens on its peer address and connects to every other participant
  (authenticated with the cluster secret, as a crawl does);
- as a sender, p sends each receiver its records (outgoing.py); once a
  receiver has ACKed every batch, p sends it DONE(R, count, control
  settings) every half second until the receiver answers GOT;
- as a receiver, p stages every batch durably before its ACK
  (records.py) and answers a sender's DONE with GOT once all the records it
  names are staged;
- p is through when every receiver answered GOT and every sender's records
  are complete; it keeps answering for `LINGER_S` more (a GOT may have been
  lost), then applies (apply.py).

A participant that already applied this run (its `state.json` says so) only
answers: a rerun of the others, after one of them failed, needs its GOTs
and nothing else from it; when every participant has applied, a rerun ends
at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

from crawler.cache import cache_from_config
from crawler.config import ConfigError
from crawler.control.settings import ControlSettings
from crawler.due import DiskDUE
from crawler.node.identity import STATE_DIRS, STATE_FILE
from crawler.peers import PeerNetwork
from crawler.resize.apply import SWAPPED, apply_dropped, apply_receiver
from crawler.resize.outgoing import Kept, Outgoing, hand_over, spooled
from crawler.resize.plan import ResizePlan
from crawler.resize.records import RecordError, Staging
from crawler.urls import host_of
from crawler.urls.lineage import bare

log = logging.getLogger("crawler.resize")

DONE_EVERY_S = 0.5
LINGER_S = 2.0
CLOSE_S = 1.0                  # everything was ACKed: closing only says BYE
ANSWER_ONLY_S = 10.0           # an applied participant answers a rerun's DONEs this long after the last


class ResizeError(RuntimeError):
    """The resize cannot go on (a participant does not answer in time); the message says who."""


def _state(data_dir: Path) -> dict | None:
    try:
        return json.loads((data_dir / STATE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{data_dir / STATE_FILE}: unreadable ({exc})") from None


def check_data_dir(plan: ResizePlan, node_id: int) -> bool:
    """True when this participant already applied this resize; a ConfigError when its data_dir holds
    anything but the old crawl (a sender) or nothing (a new node)."""
    data_dir = plan.data_dir(node_id)
    state = _state(data_dir)
    where = f"node {node_id}: {data_dir}"
    run = plan.run_id
    if state is not None and (state.get("resized", {}).get("run") == run
                              or state.get("handed_over", {}).get("run") == run):
        return True
    # An earlier run of this resize that did not finish left its staging directory; the DUE and frontier
    # directories beside it may be that run's (a node that never crawled opens its DUE to receive).
    unfinished = (data_dir / "resize").exists()
    if plan.is_sender(node_id):
        c = plan.old.cluster
        if state is None:
            if not unfinished and any((data_dir / d).exists() for d in STATE_DIRS):
                raise ConfigError(f"{where} holds crawl state but no {STATE_FILE}: not a crawl to resize")
            return False              # the node never crawled: it has nothing to send
        want = {"cluster": c.name, "node": node_id, "nodes": plan.old_nodes, "partition": c.partition}
        have = {k: state.get(k) for k in want}
        if have != want:
            raise ConfigError(f"{where} holds {have}, not node {node_id} of {plan.old_source} ({want})")
        if state.get("finished"):
            raise ConfigError(f"{where}: the crawl finished at {state.get('finished_at', '?')}; nothing to resize")
        return False
    if state is not None or (not unfinished and any((data_dir / d).exists() for d in ("due", "frontier"))):
        raise ConfigError(f"{where}: a node the resize adds needs an empty data_dir (it holds a crawl)")
    return False


class Participant:
    """Participant `node_id` of `plan`: `await run()` returns its figures."""

    def __init__(self, plan: ResizePlan, node_id: int, *, timeout_s: float) -> None:
        if not 0 <= node_id < plan.participants:
            raise ConfigError(f"--node {node_id}: the resize has nodes 0..{plan.participants - 1}")
        self.plan = plan
        self.node_id = node_id
        self.timeout_s = timeout_s
        self.run_id = plan.run_id
        self.data_dir = plan.data_dir(node_id)
        self.staging = Staging(self.data_dir / "resize", self.run_id)
        self.applied = False
        self.got: set[int] = set()
        self.applied_peers: set[int] = set()
        self.last_done = time.monotonic()
        self.net: PeerNetwork | None = None

    # --- the peer protocol's callbacks -------------------------------------------------------------
    def _on_batch(self, peer: int, lines: list[str]) -> None:
        if not self.applied:
            self.staging.append(peer, lines)

    def _on_control(self, peer: int, message: dict) -> None:
        if message.get("resize") != self.run_id or self.net is None:
            return
        kind = message.get("kind")
        if kind == "got":
            self.got.add(peer)
        elif kind == "applied":
            self.applied_peers.add(peer)
        elif kind == "done":
            self.last_done = time.monotonic()
            if self.applied or self.staging.finish(peer, int(message.get("records", -1)), message.get("control")):
                self.net.send_control(peer, {"resize": self.run_id, "kind": "got"})

    # --- the run ------------------------------------------------------------------------------------
    async def run(self) -> dict:
        t0 = time.monotonic()
        plan, me = self.plan, self.node_id
        log.info("resize: node %d: start", me)
        self.applied = check_data_dir(plan, me)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        nodes = plan.nodes()
        self.net = PeerNetwork(nodes[me], nodes, plan.new.cluster.name, plan.secret, self.data_dir / "resize" / "peers",
                               self._on_batch, self._on_control, options=plan.new.peers)
        await self.net.start()
        try:
            if self.applied:
                await self._answer_only()
                return {"node": me, "already_applied": True, "seconds": round(time.monotonic() - t0, 3)}
            return await self._exchange_and_apply(t0)
        finally:
            await self.net.close(timeout_s=CLOSE_S)
            log.info("resize: node %d: closed", me)

    async def _answer_only(self) -> None:
        """Answer DONEs until none came for ANSWER_ONLY_S, or until every other participant said it
        applied this resize too (then nobody can need us)."""
        assert self.net is not None
        log.warning("resize: node %d applied this resize before; answering the others", self.node_id)
        self.last_done = time.monotonic()
        others = set(range(self.plan.participants)) - {self.node_id}
        while time.monotonic() - self.last_done < ANSWER_ONLY_S:
            self.net.broadcast_control({"resize": self.run_id, "kind": "applied"})
            if self.applied_peers >= others:
                await asyncio.sleep(DONE_EVERY_S)        # one more round: they hear ours as we heard theirs
                self.net.broadcast_control({"resize": self.run_id, "kind": "applied"})
                return
            await asyncio.sleep(DONE_EVERY_S)

    async def _exchange_and_apply(self, t0: float) -> dict:
        plan, me = self.plan, self.node_id
        assert self.net is not None
        receiver = plan.is_receiver(me)
        due = None
        swapped = (self.data_dir / "resize" / SWAPPED).exists()
        kept = Kept()
        out = Outgoing(self.run_id, self.net.send)
        tell: list[int] = []
        if plan.is_sender(me) and not swapped:
            c = plan.old
            due = DiskDUE(self.data_dir / "due", c.due, cache=cache_from_config(c.due.cache))
            ready = due.flush()       # found new, never queued (a kill between a merge and its release)
            kept = await hand_over(plan, me, ready, out)
            tell = [r for r in plan.receivers() if r != me]
        elif receiver:
            if swapped:         # a rerun after the swap: what was sent is staged there; ours is still spooled
                owner = plan.new_owner().owner
                kept.transit = [u for u in spooled(self.data_dir) if owner(host_of(bare(u))) == me]
            c = plan.new
            due = DiskDUE(self.data_dir / "due", c.due, cache=cache_from_config(c.due.cache))
        control = ControlSettings.load(self.data_dir / "state").to_json() if plan.is_sender(me) else None
        expect = [s for s in plan.senders() if s != me] if receiver else []
        deadline = time.monotonic() + self.timeout_s
        next_done = 0.0
        while True:
            waiting_got = [r for r in tell if r not in self.got]
            missing = [s for s in expect if not self.staging.complete(s)]
            if not waiting_got and not missing:
                break
            now = time.monotonic()
            if now > deadline:
                raise ResizeError(f"resize: node {me}: no answer within {self.timeout_s:.0f} s from nodes "
                                  f"{sorted(set(waiting_got) | set(missing))} (is `crawler resize` running there?)")
            if now >= next_done:
                next_done = now + DONE_EVERY_S
                for r in waiting_got:
                    if self.net.connected(r) and self.net.delivered(r):
                        self.net.send_control(r, {"resize": self.run_id, "kind": "done",
                                                  "records": out.sent.records.get(r, 0), "control": control})
            await asyncio.sleep(0.05)
        exchanged = time.monotonic()
        linger_until = exchanged + LINGER_S
        while time.monotonic() < linger_until:
            await asyncio.sleep(0.1)
        sent = out.sent
        result: dict = {"node": me, "role": ("kept" if receiver and plan.is_sender(me) else
                                             "added" if receiver else "dropped"),
                        "sent_hosts": sent.hosts, "sent_queued": sent.queued, "sent_seen": sent.seen,
                        "sent_transit": sent.transit, "sent_robots": sent.robots}
        if receiver:
            assert due is not None
            try:
                result.update(apply_receiver(plan, me, due, kept, self.staging.received(expect)))
            except RecordError as exc:
                due.close()
                raise ResizeError(f"resize: node {me}: cannot apply what was handed over: {exc} (the staged "
                                  f"records in {self.data_dir / 'resize'} are damaged)") from None
        else:
            if due is not None:
                due.close()
            apply_dropped(plan, me)
        self.net.broadcast_control({"resize": self.run_id, "kind": "applied"})    # a rerun's others may wait
        result["exchange_s"] = round(exchanged - t0, 3)
        result["seconds"] = round(time.monotonic() - t0, 3)
        return result

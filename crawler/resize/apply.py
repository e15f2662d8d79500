"""A participant's last, local step: turn what it kept and what it received into its state for M nodes.

Ordered so that a participant killed in the middle is run again and ends in
the same state (a marker in `resize/` after each step says it is done):

1. the new frontier (kept hosts, received hosts, and the URLs the DUE had
   found new but never queued) is written to `frontier.resized/` (the kept
   hosts as they are read, while sending), then
   swapped in (a marker in `resize/` says the swap is decided; a rerun only
   finishes it);
2. the DUE learns the received seen URLs and the received hosts' queued URLs
   as seen (inserting twice is harmless), which also releases the URLs of
   step 1 (the DUE hands out again what it released after no durable
   record: now there is one);
3. the URLs in transit go into the DUE's journaled buffer, unmerged: the
   node's first merge decides which are new, and the usual path queues them;
4. the moved hosts' robots.txt entries join the saved robots cache, seen
   URLs received are appended to `seen-moved.log` (a later resize moves
   them on), the operator's control settings are merged, the old peer
   spools are removed (their streams belong to the old cluster), and
   `state.json` names the new cluster (last: a node refuses to start before).

A dropped node only records in `state.json` that its crawl was handed over,
so starting it again is refused.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterable
from itertools import chain
from pathlib import Path

from crawler.config import Config
from crawler.control.settings import ControlSettings
from crawler.due import DiskDUE
from crawler.fetch.robots import STATE_VERSION as ROBOTS_STATE_VERSION
from crawler.fetch.robots import RobotsCache
from crawler.frontier.handoff import HostHandoff
from crawler.fsutil import atomic_write, fsync_dir
from crawler.node.identity import DataDir
from crawler.resize.outgoing import SEEN_MOVED, STAGED_FRONTIER, Kept, staged_frontier
from crawler.resize.plan import ResizePlan
from crawler.resize.records import HOST, QUEUED, ROBOTS, SEEN, TRANSIT, Received
from crawler.state import StateStore
from crawler.urls import fingerprints, host_of
from crawler.urls.lineage import bare, bare_all

log = logging.getLogger("crawler.resize")

SWAPPED = "swapped"            # under resize/: the new frontier is complete; the swap is decided
DUE_SEEN = "due-seen"          # under resize/: the DUE knows the received seen URLs (step 2 done)
DUE_TRANSIT = "due-transit"    # under resize/: the URLs in transit are in the DUE's buffer (step 3 done)
SUBMIT_CHUNK = 100_000


def _ready_hosts(ready: list[str], seq: int) -> list[HostHandoff]:
    """URLs found new but never queued, as host queues numbered after everything else."""
    hosts: dict[str, HostHandoff] = {}
    for url in ready:
        name = host_of(bare(url))
        host = hosts.get(name)
        if host is None:
            host = hosts[name] = HostHandoff(name)
        seq += 1
        host.entries.append((seq, 0.0, url))
    return list(hosts.values())


def _swap_frontier(data_dir: Path, work: Path, kept: Kept, received: Received, chunk_urls: int) -> int:
    """Step 1: kept hosts (written while sending), received hosts, then the URLs found new but never
    queued, at the end of their host; returns the URLs queued (-1: a rerun found it written)."""
    frontier, staged = data_dir / "frontier", data_dir / STAGED_FRONTIER
    before = data_dir / "frontier.before-resize"
    queued = -1
    if not (work / SWAPPED).exists():
        writer = kept.writer or staged_frontier(data_dir, chunk_urls)
        for host in received.hosts():
            writer.add(host)
        for host in _ready_hosts(kept.ready, writer.seq):
            writer.add(host)
        queued = writer.close()
        atomic_write(work / SWAPPED, "")
    if staged.exists():
        if frontier.exists():
            shutil.rmtree(before, ignore_errors=True)
            os.rename(frontier, before)
        os.rename(staged, frontier)
        fsync_dir(data_dir)
    shutil.rmtree(before, ignore_errors=True)
    return queued


def _submit(due: DiskDUE, urls: Iterable[str]) -> None:
    part: list[str] = []
    for url in urls:
        part.append(url)
        if len(part) == SUBMIT_CHUNK:
            due.submit(fingerprints(bare_all(part)), part)
            part = []
    if part:
        due.submit(fingerprints(bare_all(part)), part)


def _merge_controls(state_dir: Path, controls: list[dict]) -> None:
    """The operator's blocks and delays hold cluster-wide: a new node takes them from the old ones."""
    mine = ControlSettings.load(state_dir)
    for data in controls:
        other = ControlSettings.from_json(data)
        mine.paused = mine.paused or other.paused
        mine.blocked = sorted(set(mine.blocked) | set(other.blocked))
        for pattern, seconds in other.delays.items():
            mine.delays[pattern] = max(seconds, mine.delays.get(pattern, 0.0))
    mine.save(state_dir)


def _merge_robots(state_dir: Path, received: Received) -> None:
    """The moved hosts' robots.txt entries join this node's saved robots cache (read at its start)."""
    if not received.counts[ROBOTS]:
        return
    store = StateStore(state_dir)
    mine = {r.get("origin"): r for r in store.read(RobotsCache.name, ROBOTS_STATE_VERSION) or ()}
    for entry in received.robots():
        mine.setdefault(entry.get("origin"), entry)
    store.write(RobotsCache.name, ROBOTS_STATE_VERSION, mine.values())


def apply_receiver(plan: ResizePlan, node_id: int, due: DiskDUE, kept: Kept, received: Received) -> dict:
    """Steps 1-4 for a node of the new cluster; returns its figures."""
    data_dir = plan.data_dir(node_id)
    work = data_dir / "resize"
    queued = _swap_frontier(data_dir, work, kept, received, plan.new.frontier.chunk_urls)
    # Steps 2 and 3, each once: a flush after the transit is in the buffer would merge it and drop it
    # with the seen URLs, so a rerun that finds the seen URLs in goes straight to the transit (submitting
    # that twice only repeats it in the buffer, which the merge counts once).
    if not (work / DUE_SEEN).exists():
        _submit(due, (bare(url) for url in received.urls(SEEN + QUEUED)))
        due.flush()                  # all seen already: nothing new comes out that is not queued
        atomic_write(work / DUE_SEEN, "")
    if not (work / DUE_TRANSIT).exists():
        _submit(due, chain(received.urls(TRANSIT), kept.transit))
        due.close()                  # the transit stays buffered in the DUE's journal, unmerged
        atomic_write(work / DUE_TRANSIT, "")
    else:
        due.close()
    if received.counts[SEEN]:
        with (data_dir / SEEN_MOVED).open("a", encoding="utf-8", errors="surrogatepass") as f:
            f.writelines(url + "\n" for url in received.urls(SEEN))
            f.flush()
            os.fsync(f.fileno())
    _merge_controls(data_dir / "state", received.controls)
    _merge_robots(data_dir / "state", received)
    shutil.rmtree(data_dir / "peers", ignore_errors=True)
    DataDir(data_dir, plan.new, node_id, plan.new_source).write_state(
        finished=False, resized={"run": plan.run_id, "from_nodes": plan.old_nodes,
                                 "from_partition": plan.old.cluster.partition,
                                 "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    shutil.rmtree(work, ignore_errors=True)
    counts = received.counts
    return {"queued": queued, "hosts": kept.hosts + counts[HOST],
            "received_hosts": counts[HOST], "received_seen": counts[SEEN],
            "received_transit": counts[TRANSIT], "received_robots": counts[ROBOTS]}


def apply_dropped(plan: ResizePlan, node_id: int) -> None:
    """A node the new cluster does not have: its crawl is over here, never to be resumed."""
    data_dir = plan.data_dir(node_id)
    old: Config = plan.old
    DataDir(data_dir, old, node_id, plan.old_source).write_state(
        finished=True, finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        handed_over={"run": plan.run_id, "to_nodes": plan.new_nodes})
    shutil.rmtree(data_dir / "resize", ignore_errors=True)

"""A sender's half of a resize: which of its hosts move, and the records that carry them to their new owners.

Four sources, each read once:

- the frontier (crawler/frontier/handoff.py): a host whose new owner is
  another node goes with its queue and politeness state (H and Q records);
  the others stay (`retained`);
- the crawl log, and `seen-moved.log` (the seen URLs earlier resizes handed
  this node): every URL of a moving host that was fetched or refused is
  seen, and the new owner's DUE must know it (S records). The DUE's own
  files hold only fingerprints, which do not say their host; the crawl log
  does, and every URL the DUE passed is either still queued (it moves with
  its queue) or has a line there (fetched, failed or refused);
- the robots cache's saved entries (state/robots): a moved host's rules go
  with it (R records);
- the peer spools: batches for old owners that were never ACKed (T records
  to the new owner of each URL; ours stay as `transit`);
- URLs the DUE found new that never reached the frontier (a node killed
  between a merge and its release): queued here if we still own their host
  (`ready`), else T records.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from crawler.fetch.robots import STATE_VERSION as ROBOTS_STATE_VERSION
from crawler.fetch.robots import RobotsCache
from crawler.frontier.handoff import FrontierWriter, HostHandoff, read_hosts
from crawler.peers.spool import spooled_urls
from crawler.resize.plan import ResizePlan
from crawler.resize.records import ROBOTS, SEEN, TRANSIT, host_line, queued_line, url_line
from crawler.state import StateStore
from crawler.urls import host_of
from crawler.urls.lineage import bare

log = logging.getLogger("crawler.resize")

SEEN_MOVED = "seen-moved.log"       # under data_dir: seen URLs of hosts an earlier resize moved here
CRAWL_LOG = "crawl.log.jsonl"
STAGED_FRONTIER = "frontier.resized"
BATCH_LINES = 2000


@dataclass
class Sent:
    """What one sender handed over (the participant's summary)."""
    hosts: int = 0
    queued: int = 0
    seen: int = 0
    transit: int = 0
    robots: int = 0
    records: dict[int, int] = field(default_factory=dict)      # per receiver: the count DONE names


class Outgoing:
    """Batches records per receiver and sends each batch when it is full (`send` awaits the peer's room)."""

    def __init__(self, run: str, send: Callable[[int, list[str]], Awaitable[None]]) -> None:
        self.run = run
        self._send = send
        self._buffers: dict[int, list[str]] = {}
        self.sent = Sent()

    def _next(self, dest: int) -> int:
        n = self.sent.records.get(dest, 0)
        self.sent.records[dest] = n + 1
        return n

    async def _put(self, dest: int, line: str) -> None:
        buf = self._buffers.setdefault(dest, [])
        buf.append(line)
        if len(buf) >= BATCH_LINES:
            self._buffers[dest] = []
            await self._send(dest, buf)

    async def host(self, dest: int, host: HostHandoff) -> None:
        self.sent.hosts += 1
        await self._put(dest, host_line(self.run, self._next(dest), host))
        for seq, quality, url in host.entries:
            self.sent.queued += 1
            await self._put(dest, queued_line(self.run, self._next(dest), host.name, seq, quality, url))

    async def robots(self, dest: int, entry: dict) -> None:
        self.sent.robots += 1
        text = json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
        await self._put(dest, url_line(self.run, self._next(dest), ROBOTS, text))

    async def url(self, dest: int, kind: str, url: str) -> None:
        if kind == SEEN:
            self.sent.seen += 1
        else:
            self.sent.transit += 1
        await self._put(dest, url_line(self.run, self._next(dest), kind, url))

    async def flush(self) -> None:
        for dest, buf in self._buffers.items():
            if buf:
                await self._send(dest, buf)
        self._buffers = {}


def staged_frontier(data_dir: Path, chunk_urls: int) -> FrontierWriter:
    """The new frontier, written beside the old one (`frontier.resized`, swapped in by apply.py)."""
    staged = data_dir / STAGED_FRONTIER
    shutil.rmtree(staged, ignore_errors=True)
    return FrontierWriter(staged, chunk_urls)


def seen_urls(data_dir: Path) -> Iterator[str]:
    """Every URL this node's crawl log says was fetched or refused (robots.txt fetches are not URLs of the
    crawl), then those earlier resizes handed it."""
    path = data_dir / CRAWL_LOG
    if path.exists():
        with path.open(encoding="utf-8", errors="surrogatepass") as f:
            for number, line in enumerate(f, 1):
                try:
                    record = json.loads(line)
                except ValueError:
                    log.warning("%s:%d: not a JSON line (torn by a crash?); skipped", path, number)
                    continue
                if record.get("kind") != "robots" and isinstance(record.get("url"), str):
                    yield record["url"]
    moved = data_dir / SEEN_MOVED
    if moved.exists():
        with moved.open(encoding="utf-8", errors="surrogatepass") as f:
            for line in f:
                if line.endswith("\n"):
                    yield line[:-1]


def spooled(data_dir: Path) -> list[str]:
    """The URLs of every batch this node spooled for a peer of the old cluster and never had ACKed."""
    urls: list[str] = []
    peers_dir = data_dir / "peers"
    if peers_dir.exists():
        for peer_dir in sorted(peers_dir.glob("peer-*")):
            urls += spooled_urls(peer_dir)
    return urls


@dataclass
class Kept:
    """What a sender keeps: its hosts that stay (already written to the new frontier, `writer`), URLs to
    queue, URLs in transit for its own DUE."""
    writer: FrontierWriter | None = None
    hosts: int = 0
    ready: list[str] = field(default_factory=list)
    transit: list[str] = field(default_factory=list)


async def hand_over(plan: ResizePlan, node_id: int, ready: list[str], out: Outgoing) -> Kept:
    """Read this sender's state and send every record; returns what stays here. The hosts that stay
    go straight into the new frontier's staging directory (apply.py), so the resize holds no queue in
    memory but the one host it is reading."""
    data_dir = plan.data_dir(node_id)
    owner = plan.new_owner().owner
    kept = Kept()
    if plan.is_receiver(node_id):
        kept.writer = staged_frontier(data_dir, plan.new.frontier.chunk_urls)
    c = plan.old
    frontier_dir = data_dir / "frontier"
    if frontier_dir.exists():
        max_delay_s = max(c.politeness.max_delay_s, c.politeness.min_delay_s)
        for host in read_hosts(frontier_dir, c.frontier, c.workers, max_delay_s):
            dest = owner(host.name)
            if dest == node_id:
                assert kept.writer is not None, "a dropped node keeps no host"
                kept.writer.add(host)
                kept.hosts += 1
            else:
                await out.host(dest, host)
    for entry in StateStore(data_dir / "state").read(RobotsCache.name, ROBOTS_STATE_VERSION) or ():
        dest = owner(host_of(str(entry.get("origin", "")) + "/"))
        if dest != node_id:
            await out.robots(dest, entry)
    for url in seen_urls(data_dir):
        dest = owner(host_of(url))
        if dest != node_id:
            await out.url(dest, SEEN, url)
    for url in spooled(data_dir):
        dest = owner(host_of(bare(url)))
        if dest == node_id:
            kept.transit.append(url)
        else:
            await out.url(dest, TRANSIT, url)
    for url in ready:
        dest = owner(host_of(bare(url)))
        if dest == node_id:
            kept.ready.append(url)
        else:
            await out.url(dest, TRANSIT, url)
    await out.flush()
    log.info("resize: node %d sends %d hosts (%d queued URLs), %d seen URLs, %d robots.txt entries, %d in transit; "
             "keeps %d hosts", node_id, out.sent.hosts, out.sent.queued, out.sent.seen, out.sent.robots,
             out.sent.transit, kept.hosts)
    return kept

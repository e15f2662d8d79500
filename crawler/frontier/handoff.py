"""A frontier's hosts as whole records, read out of a stopped node's directory and written into a new one.

`crawler resize` (crawler/resize) moves hosts between nodes when the node
count changes. A host moves with everything the frontier knows of it: its
queued URLs in the order they would be taken, when it may next be contacted
(wall clock, so the new owner keeps the old owner's politeness), its address
and its response-time estimates. This module is the frontier's side of that:
`read_hosts` opens the directory the way a restarting node does (newest
checkpoint, then the journals after it: a killed node's last records count)
and yields one `HostHandoff` per host; `write_frontier` writes a directory a
node then resumes from like any other, each host's URLs as one chunk.

The formats stay the frontier's own (journal.py, segments.py): nothing
outside this package reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from crawler.config.schema import FrontierConfig
from crawler.frontier.frontier import Frontier
from crawler.frontier.journal import HostRecord, latest_checkpoint, read_checkpoint, write_checkpoint
from crawler.frontier.segments import ChunkFile, ChunkRef, Entry, SegmentStore
from crawler.fsutil import fsync_dir


@dataclass
class HostHandoff:
    """One host as it moves: its queue (in taking order) and its politeness state."""
    name: str
    next_ok_wall: float = 0.0          # wall-clock time before which it must not be contacted (0 = now)
    ip: str | None = None
    stats: list | None = None          # [connect_s, response_s, fetches, connections] (frontier/policy.py)
    entries: list[Entry] = field(default_factory=list)     # (seq, quality, lineage-tagged URL)

    def header(self) -> dict:
        """Everything but the queue, as JSON-ready fields."""
        return {"h": self.name, "n": self.next_ok_wall, "ip": self.ip, "st": self.stats}

    @classmethod
    def from_header(cls, row: dict) -> HostHandoff:
        return cls(str(row["h"]), float(row.get("n") or 0.0), row.get("ip"), row.get("st"))


def read_hosts(directory: Path, config: FrontierConfig, workers: int, max_delay_s: float) -> Iterator[HostHandoff]:
    """Every host of a stopped node's frontier, its queue read back from the chunks it spilled.

    A URL whose fetch was cut by a crash comes first (it is fetched again, as
    a restart would); URLs recorded as done but still queued are left out.
    """
    # Opening the frontier replays its journals and writes a checkpoint of the result: then the
    # newest checkpoint holds the whole frontier.
    Frontier(config, workers, directory=directory, max_delay_s=max_delay_s).shutdown()
    path = latest_checkpoint(directory)
    if path is None:
        return
    cp = read_checkpoint(path)
    done = set(cp.done)
    live: dict[int, tuple[int, int]] = {}
    for rec in cp.hosts:
        for row in rec.chunks:
            count, size = live.get(int(row[0]), (0, 0))
            live[int(row[0])] = (count + 1, size + int(row[2]))
    store = SegmentStore(directory, referenced=live)
    try:
        for rec in cp.hosts:
            entries: list[Entry] = [(int(seq), float(q), url) for seq, q, url, _ in rec.ram]
            for row in rec.chunks:
                entries += store.read(ChunkRef.from_list(row))
            if done:
                entries = [e for e in entries if e[2] not in done]
            yield HostHandoff(rec.name, rec.next_ok_wall, rec.ip, rec.stats, entries)
    finally:
        store.close()


def write_frontier(directory: Path, hosts: Iterable[HostHandoff]) -> int:
    """A new frontier directory holding `hosts` (written durably; the directory must be new or empty);
    returns the URLs it holds. A node resumes from it as from its own last checkpoint."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise FileExistsError(f"{directory} is not empty")
    chunks = ChunkFile(directory, 1)
    records: list[HostRecord] = []
    seq = 0
    queued = 0
    try:
        for host in hosts:
            refs = []
            if host.entries:
                refs.append(chunks.write(host.entries).as_list())
                seq = max(seq, max(e[0] for e in host.entries))
                queued += len(host.entries)
            records.append(HostRecord(host.name, host.next_ok_wall, host.ip, host.stats, refs))
    finally:
        chunks.close()
    fsync_dir(directory)
    write_checkpoint(directory, 1, seq + 1, [], iter(records))
    return queued

"""A frontier's hosts as whole records, read out of a stopped node's directory and written into a new one.

`crawler resize` (crawler/resize) moves hosts between nodes when the node
count changes. A host moves with everything the frontier knows of it: its
queued URLs in the order they would be taken, when it may next be contacted
(wall clock, so the new owner keeps the old owner's politeness), its address
and its response-time estimates. This module is the frontier's side of that:
`read_hosts` opens the directory the way a restarting node does (newest
checkpoint, then the journals after it: a killed node's last records count)
and yields one `HostHandoff` per host; `FrontierWriter` writes a directory a
node then resumes from like any other, each host's URLs as chunks.

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


class FrontierWriter:
    """Writes a new frontier directory host by host, each host's URLs as chunks on disk as they come (only
    one line per host stays in memory); `close` writes the checkpoint that names them. A host added twice
    gets the second queue after the first. A node resumes from the directory as from its own checkpoint."""

    def __init__(self, directory: Path, chunk_urls: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        if any(directory.iterdir()):
            raise FileExistsError(f"{directory} is not empty")
        self.directory = directory
        self._chunks = ChunkFile(directory, 1)
        self._chunk_urls = max(1, chunk_urls)          # frontier.chunk_urls: what a refill reads at once
        self._records: dict[str, HostRecord] = {}
        self.seq = 0
        self.queued = 0

    def add(self, host: HostHandoff) -> None:
        record = self._records.get(host.name)
        if record is None:
            record = self._records[host.name] = HostRecord(host.name, host.next_ok_wall, host.ip, host.stats, [])
        # In arrival order (sequence numbers): a restart's order puts a host's RAM tail before its spilled
        # chunks; the new owner takes the queue as it came, a chunk at a time.
        entries = sorted(host.entries)
        for i in range(0, len(entries), self._chunk_urls):
            record.chunks.append(self._chunks.write(entries[i:i + self._chunk_urls]).as_list())
        if host.entries:
            self.seq = max(self.seq, max(e[0] for e in host.entries))
            self.queued += len(host.entries)

    def close(self) -> int:
        """Make it durable; returns the URLs it holds."""
        self._chunks.close()
        fsync_dir(self.directory)
        write_checkpoint(self.directory, 1, self.seq + 1, [], iter(self._records.values()))
        return self.queued


def write_frontier(directory: Path, hosts: Iterable[HostHandoff], chunk_urls: int) -> int:
    """A new frontier directory holding `hosts` (see FrontierWriter); returns the URLs it holds."""
    writer = FrontierWriter(directory, chunk_urls)
    for host in hosts:
        writer.add(host)
    return writer.close()

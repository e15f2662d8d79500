"""URLs still queued per host in a stopped node's frontier, read without changing a file.

A node's own restore (crawler/frontier/checkpoint.py) writes a new
checkpoint, so the report cannot use it on another node's data_dir. This
counts what that restore would queue: the newest checkpoint's hosts (URLs in
RAM rows and in chunk references), plus the URLs the journals after it
added, less the URLs they record as done (a done URL still in a queue is
skipped when its turn comes, frontier.py `_take`). After a clean stop the
last checkpoint holds everything and the journal after it is empty.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from crawler.frontier.journal import journals_from, latest_checkpoint, read_checkpoint, read_journal
from crawler.frontier.segments import ChunkRef
from crawler.urls import host_of


def queued_by_host(frontier_dir: Path) -> Counter:
    """Host -> URLs a restart of this frontier would still fetch (empty when there is no frontier)."""
    queued: Counter = Counter()
    if not frontier_dir.is_dir():
        return queued
    done: set[str] = set()
    gen = 0
    path = latest_checkpoint(frontier_dir)
    if path is not None:
        cp = read_checkpoint(path)
        gen = cp.gen
        done.update(cp.done)
        for rec in cp.hosts:
            queued[rec.name] += len(rec.ram) + sum(ChunkRef.from_list(row).count for row in rec.chunks)
    for journal in journals_from(frontier_dir, gen):
        for row in read_journal(journal):
            if row[0] == "a" and len(row) == 5:
                queued[row[3]] += 1
            elif row[0] == "d" and len(row) == 4 and row[3]:
                done.add(row[3])
            elif row[0] == "c" and len(row) == 2:
                done.add(row[1])
    for url in done:
        host = host_of(url)
        if host is not None and queued[host] > 0:
            queued[host] -= 1
    return +queued

"""Checkpoint and restore: how a node's frontier survives a restart (file formats: journal.py).

A checkpoint is a snapshot taken on the event loop (cheap copies only; the
journal switches to a new generation at that instant, so snapshot + new
journal is exact), then serialised and written by a writer thread: the
segments it names are fsynced, the URLs held in RAM become one chunk per host
in a segment of its own, and the checkpoint file is replaced atomically. Only
then are the older checkpoints and journals deleted.

A restore loads the newest checkpoint and replays the journals after it into
the queues: added URLs are queued again, finished ones remembered as done,
and the hosts whose fetch was in flight wait `resume_wait_s` first.

`FrontierCheckpoints` is the frontier's durable half: `Frontier` inherits it
and provides the queue operations it replays into (`_insert`, `_schedule`,
`_spill`, `_open_store`).
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from crawler.config.schema import FrontierConfig
from crawler.frontier.hostqueue import FIRST, WAITING, HeadEntry, HostQueue
from crawler.frontier.journal import (
    FrontierJournal,
    HostRecord,
    journal_generation,
    journals_from,
    latest_checkpoint,
    read_checkpoint,
    read_journal,
    remove_before,
    write_checkpoint,
)
from crawler.frontier.policy import GlobalEstimates, HostStats
from crawler.frontier.segments import ChunkFile, ChunkRef, Entry, SegmentStore
from crawler.frontier.stats import FrontierStats
from crawler.fsutil import fsync_and_close

log = logging.getLogger(__name__)

# One host as the snapshot copies it on the loop: name, next contact (wall clock, 0 = now), address,
# estimates, chunk references, unconfirmed URLs, the URL in flight, the RAM head and the RAM tail.
HostSnapshot = tuple[str, float, str | None, list | None, list[list], list[list] | None, Entry | None,
                     list[HeadEntry], list[Entry]]


class FrontierCheckpoints:
    """Checkpoints (synchronous and in a writer thread), journal fsyncs, shutdown, restore."""

    # The frontier's state this half reads and rebuilds (set by Frontier.__init__).
    config: FrontierConfig
    resume_wait_s: float
    directory: Path | None
    resumed: bool
    queued: int
    counts: FrontierStats
    on_storage_error: Callable[[OSError], None] | None
    _hosts: dict[str, HostQueue]
    _estimates: GlobalEstimates
    _key: Callable[[int, float], float]
    _memory_urls: int
    _segment_bytes: int
    _seq: int
    _ram: int
    _nonempty: int
    _done: set[str]
    _unconfirmed: deque[tuple[str, int, float, str]]
    _gen: int
    _journal: FrontierJournal | None
    _store: SegmentStore
    _pending: CheckpointPlan | None
    _executor: ThreadPoolExecutor | None
    _syncing: Future | None

    # The queue operations a restore replays into (Frontier's).
    def _now(self) -> float:
        raise NotImplementedError

    def _insert(self, name: str, seq: int, quality: float, url: str) -> None:
        raise NotImplementedError

    def _schedule(self, h: HostQueue) -> None:
        raise NotImplementedError

    def _spill(self) -> None:
        raise NotImplementedError

    def _open_store(self, store: SegmentStore) -> None:
        raise NotImplementedError

    def checkpoint(self) -> None:
        """Write the whole frontier as checkpoint g+1 and start journal g+1; older files go.
        Synchronous: used at start, at shutdown and by tests (see `checkpoint_async`)."""
        if self.directory is None:
            return
        self._finish_pending()
        plan = self._snapshot()
        _write_plan(plan)
        self._finish(plan)

    async def checkpoint_async(self) -> None:
        """The periodic checkpoint: the snapshot is taken on the loop (the journal switches at
        that instant, so snapshot + new journal is exact); serialising, writing and the fsyncs
        run in a thread, so a large frontier does not stall fetching for seconds."""
        if self.directory is None or self._pending is not None:
            return
        plan = self._snapshot()
        self._pending = plan
        future = plan.future = self._writer().submit(_write_plan, plan)
        try:
            await asyncio.wrap_future(future)
        finally:
            if self._pending is plan and future.done():
                self._finish_pending()

    def _writer(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="frontier-checkpoint")
        return self._executor

    def _snapshot(self) -> CheckpointPlan:
        # The copies below are acyclic, but allocating them sets off collections that walk the
        # whole heap (most of the snapshot's time on the loop); the collector waits until after.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._take_snapshot()
        finally:
            if collecting:
                gc.enable()

    def _take_snapshot(self) -> CheckpointPlan:
        t0 = time.perf_counter()
        directory = self.directory
        assert directory is not None            # a frontier without a directory takes no checkpoints
        gen = self._gen = self._gen + 1         # used up even if writing the checkpoint fails
        old = self._journal
        self._journal = FrontierJournal(directory, gen, self._journal_failed)
        # The old journal is fsynced and closed by the writer, before the checkpoint is written.
        old_fd = old.detach() if old is not None else None
        mono, wall = self._now(), time.time()
        unconfirmed: dict[str, list[list]] = {}
        for host, seq, q, url in self._unconfirmed:
            unconfirmed.setdefault(host, []).append([seq, q, url, 1])
        referenced: set[int] = set()
        hosts: list[HostSnapshot] = []
        for h in self._hosts.values():
            extra = unconfirmed.get(h.name)
            if not h.queued and h.inflight is None and h.ready_at <= mono and not extra:
                continue
            for c in h.chunks:
                referenced.add(c.seg)
            s = h.stats
            # Only cheap copies here, on the loop: heap and tail entries are immutable tuples
            # the writer thread may share; chunk references are not (compaction moves them).
            hosts.append((h.name, wall + (h.ready_at - mono) if h.ready_at > mono else 0.0, h.ip,
                          None if s is None else [s.connect_s, s.response_s, s.fetches, s.connections],
                          [c.as_list() for c in h.chunks], extra, h.inflight, list(h.head), list(h.tail)))
        # The queues held in RAM go to a segment of the checkpoint's own (written by the writer).
        ram_seg = self._store.reserve()
        referenced.add(ram_seg)
        # Until the new checkpoint is durable the old one is the recovery point: keep both
        # their segments (a chunk named by the snapshot may be consumed while it is written).
        self._store.pin(self._store.pinned | referenced)
        fds = self._store.dirty_fds() + ([old_fd] if old_fd is not None else [])
        return CheckpointPlan(directory, gen, self._seq, sorted(self._done), hosts,
                              [u for _, _, _, u in self._unconfirmed], referenced, fds, t0, ram_seg)

    def _journal_failed(self, exc: OSError) -> None:
        if self.on_storage_error is None:
            raise exc
        log.error("frontier: cannot write its journal in %s: %s", self.directory, exc)
        self.on_storage_error(exc)

    def _finish(self, plan: CheckpointPlan) -> None:
        self._store.pin(plan.referenced)
        remove_before(plan.directory, plan.gen)
        self.counts.checkpoints += 1
        self.counts.checkpoint_seconds += time.perf_counter() - plan.t0

    def _finish_pending(self) -> None:
        """Complete a background checkpoint (waiting for its thread if needed); re-raises its error."""
        plan, self._pending = self._pending, None
        if plan is not None:
            if plan.future is not None:
                plan.future.result()
            self._finish(plan)

    def sync(self) -> None:
        """fsync the journal (bounds what a power cut can take)."""
        if self._journal is not None:
            self._journal.sync()

    def stop_journal(self, exc: OSError) -> None:
        """Record nothing more (the node hit a storage error elsewhere). A small record can still
        fit in a full file system (the journal's last page has room), and a page recorded as done
        whose links the node could no longer keep would never be fetched again after a resume:
        its links would be lost."""
        if self._journal is not None and self._journal.failed is None:
            self._journal.failed = exc

    def sync_soon(self) -> None:
        """`sync` in the writer thread, for the node's periodic fsync: on the loop it stalls every
        fetch in flight, and the stall counts in their fetch times (so in politeness delays).
        An error of the previous one is raised here (the caller treats it as a storage error)."""
        prev = self._syncing
        if prev is not None:
            if not prev.done():
                return
            self._syncing = None
            prev.result()
        if self._journal is None:
            return
        fd = self._journal.dup_if_dirty()
        if fd is not None:
            self._syncing = self._writer().submit(fsync_and_close, fd)

    def shutdown(self) -> None:
        """Final checkpoint (when durable) and close the files."""
        try:
            if self.directory is not None:
                self.checkpoint()
                if self._journal is not None:
                    self._journal.close()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            self._store.close()

    def _restore(self, directory: Path) -> None:
        """Rebuild from the newest checkpoint and the journals after it (see journal.py)."""
        path = latest_checkpoint(directory)
        mono, wall = self._now(), time.time()
        crashed: dict[str, str] = {}
        unconfirmed: set[str] = set()
        if path is not None:
            cp = read_checkpoint(path)
            unconfirmed.update(cp.unconfirmed)
            self._gen = cp.gen
            self._seq = cp.seq
            self._done = set(cp.done)
            live: dict[int, tuple[int, int]] = {}
            for rec in cp.hosts:
                for row in rec.chunks:
                    count, size = live.get(int(row[0]), (0, 0))
                    live[int(row[0])] = (count + 1, size + int(row[2]))
            self._open_store(SegmentStore(directory, segment_bytes=self._segment_bytes, referenced=live))
            for rec in cp.hosts:
                self._load_host(rec, mono, wall)
                if rec.inflight:
                    crashed[rec.name] = rec.inflight
        else:
            self._open_store(SegmentStore(directory, segment_bytes=self._segment_bytes))
        replayed = 0
        journals = journals_from(directory, self._gen)
        for journal in journals:
            for row in read_journal(journal):
                kind = row[0]
                if kind == "a" and len(row) == 5:
                    seq = int(row[1])
                    self._insert(row[3], seq, float(row[2]), row[4])
                    self._seq = max(self._seq, seq + 1)
                    self.counts.added += 1
                    replayed += 1
                elif kind == "s" and len(row) == 3:
                    crashed[row[1]] = row[2]
                elif kind == "c" and len(row) == 2:
                    self._done.add(row[1])
                    unconfirmed.discard(row[1])
                elif kind == "d" and len(row) == 4:
                    started = crashed.pop(row[1], None)
                    if started and not row[3]:
                        unconfirmed.add(started)         # or put back: an upper bound either way
                    h = self._hosts.get(row[1])
                    next_wall = float(row[2])
                    if h is not None and next_wall > wall:
                        h.ready_at = max(h.ready_at, mono + next_wall - wall)
                    if row[3]:
                        self._done.add(row[3])
                if self._ram > self._memory_urls:
                    self._spill()
        if journals:
            # A snapshot whose checkpoint was never written still used up its generation, and its
            # journal holds records: the next checkpoint must not reuse that number and append a
            # second copy of them to the file it would then start.
            self._gen = max(self._gen, max(journal_generation(j) for j in journals))
        wait = self.resume_wait_s
        for name in crashed:
            h = self._hosts.get(name)
            if h is not None:
                h.ready_at = max(h.ready_at, mono + wait)
                if h.state == WAITING:
                    self._schedule(h)
        self.counts.resumed_inflight = len(crashed)
        self.counts.resumed_unconfirmed = len(unconfirmed - self._done)
        self.counts.recovered_urls = self.queued
        self.resumed = path is not None or replayed > 0
        if self.resumed:
            log.info("frontier: resumed %d URLs on %d hosts from %s (%d journal records, %d fetches were in flight)",
                     self.queued, self._nonempty, directory, replayed, len(crashed))
        self.checkpoint()

    def _load_host(self, rec: HostRecord, mono: float, wall: float) -> None:
        h = self._hosts.get(rec.name)
        if h is None:
            h = self._hosts[rec.name] = HostQueue(rec.name)
        if rec.next_ok_wall > wall:
            h.ready_at = mono + rec.next_ok_wall - wall
        h.ip = rec.ip
        if rec.stats:
            c, r, fetches, connections = rec.stats
            h.stats = HostStats(c, r, int(fetches), int(connections))
            self._estimates.replace(None, h.stats)
        key = self._key
        if rec.ram:
            h.head += [(FIRST if first else key(seq, q), seq, q, url) for seq, q, url, first in rec.ram]
            heapq.heapify(h.head)
            h.qsum += sum(row[1] for row in rec.ram)
        h.queued += len(rec.ram)
        self._ram += len(rec.ram)
        for row in rec.chunks:
            ref = ChunkRef.from_list(row)
            h.chunks.append(ref)
            h.queued += ref.count
            h.qsum += ref.qsum
        self.queued += h.queued
        if h.queued:
            self._nonempty += 1
            self._schedule(h)


@dataclass(slots=True)
class CheckpointPlan:
    """A snapshot of the frontier, ready to be written by any thread (it shares nothing mutable)."""
    directory: Path
    gen: int
    seq: int
    done: list[str]
    hosts: list[HostSnapshot]
    unconfirmed: list[str]
    referenced: set[int]
    segment_fds: list[int]          # duplicates of the segments written since the last sync; closed here
    t0: float
    ram_seg: int                    # the segment number the RAM queues are written to (see _write_plan)
    future: Future | None = None


def _write_plan(plan: CheckpointPlan) -> None:
    """fsync the segments the snapshot may name, then write the checkpoint file atomically."""
    try:
        for fd in plan.segment_fds:
            os.fsync(fd)
    finally:
        for fd in plan.segment_fds:
            os.close(fd)
        plan.segment_fds = []
    # The RAM queues' segment is complete and fsynced before the checkpoint that names it is.
    # Should the checkpoint fail, the segment is deleted with the next one's `pin` (or at restore).
    ram = ChunkFile(plan.directory, plan.ram_seg)
    try:
        records = list(_host_records(plan.hosts, ram))
    finally:
        ram.close()
    write_checkpoint(plan.directory, plan.gen, plan.seq, plan.done, iter(records), unconfirmed=plan.unconfirmed)


def _host_records(hosts: list[HostSnapshot], ram: ChunkFile) -> Iterator[HostRecord]:
    """A snapshot's hosts as checkpoint records: what is in flight, unconfirmed or put back first
    (fetched first again after a crash) in the record itself; the rest of the RAM head and the tail
    as one chunk in `ram`, named before the host's spilled chunks (the order they are taken in).

    As a chunk, a restore reads a host's RAM queue when the host's turn comes: parsed as JSON
    rows at restore, the ~10M URLs refilled heads hold at 30M queued took ~45 s to load."""
    for name, next_ok_wall, ip, stats, chunks, extra, inflight, head, tail in hosts:
        first = list(extra or ())
        url = None
        if inflight is not None:
            seq, q, url = inflight
            first.insert(0, [seq, q, url, 1])
        queued = []
        put_back = []
        for entry in head:
            if entry[0] == FIRST:
                put_back.append(entry)
            else:
                queued.append(entry[1:])
        first += [[seq, q, u, 1] for _, seq, q, u in sorted(put_back)]
        queued += tail
        if queued:
            chunks = [ram.write(queued).as_list()] + chunks
        yield HostRecord(name, next_ok_wall, ip, stats, chunks, first, url)

"""Bounded memory: host queues spilled to segment files, read back in turn, segments compacted.

When the URLs held in RAM pass `memory_urls`, the frontier asks for half the
budget back: first whole chunks from the longest tails (few, full chunks: a
chunk reference costs RAM too), then, only if that is not enough, everything
of the hosts holding most. A host's next run comes back into its head when
the head runs dry: its next chunk from disk, else its tail. Segments that
long-queued chunks keep mostly dead are compacted (their live chunks copied,
byte for byte, to the current segment), so disk use stays about twice what is
queued.

The spiller changes host queues only; the frontier keeps its totals from what
the calls return (URLs moved out of or into RAM) and from `lost`, called with
a chunk that could not be read back (its URLs are gone).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Collection

from crawler.frontier.hostqueue import FIRST, HostQueue
from crawler.frontier.segments import ChunkError, ChunkRef, Entry, SegmentStore
from crawler.frontier.stats import FrontierStats

log = logging.getLogger(__name__)

COMPACT_LIVE_FRACTION = 0.5      # segments less full than this are compacted


class Spiller:
    """Moves runs of host queues between RAM and the segment store."""

    def __init__(self, store: SegmentStore, chunk_urls: int, key: Callable[[int, float], float],
                 counts: FrontierStats, lost: Callable[[HostQueue, ChunkRef], None]) -> None:
        self.store = store
        self._chunk = chunk_urls
        self._key = key
        self._counts = counts
        self._lost = lost

    def spill(self, hosts: Collection[HostQueue], ram: int, target: int) -> int:
        """Write RAM queues to disk until at most `target` of the `ram` URLs held are left; returns
        how many were moved. Whole chunks of the longest tails first, then the hosts holding most."""
        chunk, store, moved = self._chunk, self.store, 0
        for h in sorted((h for h in hosts if len(h.tail) >= chunk), key=lambda h: len(h.tail), reverse=True):
            if ram - moved <= target:
                return moved
            full = len(h.tail) - len(h.tail) % chunk
            refs = [store.write(h.tail[i:i + chunk]) for i in range(0, full, chunk)]
            h.chunks.extend(refs)
            h.tail = h.tail[full:]
            h.tail_qmax = max((q for _, q, _ in h.tail), default=0.0)
            moved += full
            self._counts.spilled_urls += full
        for h in sorted(hosts, key=lambda h: h.ram, reverse=True):
            if ram - moved <= target or h.ram == 0:
                break
            moved += self._spill_host(h)
        self.compact(hosts)
        return moved

    def compact(self, hosts: Collection[HostQueue]) -> None:
        """Move the live chunks out of mostly-dead segments once dead bytes pass the live ones
        (and one segment's worth): bounds disk use to about twice what is queued, whatever a
        few long-queued chunks would otherwise hold on to. Copies are byte for byte."""
        store = self.store
        if store.dead_bytes() < max(store.live_bytes(), store.segment_bytes):
            return
        victims = set(store.sparse_segments(COMPACT_LIVE_FRACTION))
        if not victims:
            return
        for h in hosts:
            for ref in h.chunks:
                if ref.seg in victims:
                    try:
                        store.relocate(ref)
                    except (ChunkError, OSError) as exc:
                        log.warning("frontier: could not move a chunk of %s out of segment %d: %s", h.name,
                                    ref.seg, exc)
                        return
        self._counts.compactions += 1

    def _spill_host(self, h: HostQueue) -> int:
        """Everything of the host's RAM queue but the URLs put back first goes to disk; returns how many."""
        chunk = self._chunk
        keep = [e for e in h.head if e[0] == FIRST]
        run = sorted(e for e in h.head if e[0] != FIRST)
        front = [self.store.write([(seq, q, url) for _, seq, q, url in run[i:i + chunk]])
                 for i in range(0, len(run), chunk)]
        moved = len(run) + len(h.tail)
        h.chunks.extendleft(reversed(front))
        if h.tail:
            self._append_run(h, h.tail)
        h.head = keep
        h.tail = []
        h.tail_qmax = 0.0
        self._counts.spilled_urls += moved
        return moved

    def _append_run(self, h: HostQueue, run: list[Entry]) -> None:
        """Write a run at the end of the host's disk queue, first merging it with the small
        chunks before it while they hold at most twice as many URLs (a binary counter).

        A long-tail host is spilled a few URLs at a time; kept as is, every such spill
        would be one more chunk reference in RAM, so RAM would grow with the frontier.
        Merged, a host holds at most ~log2(chunk_urls) partial chunks and each URL is
        rewritten about that many times at most (reads of recent writes, from the page cache).
        """
        chunk, chunks = self._chunk, h.chunks
        while chunks and chunks[-1].count < chunk and chunks[-1].count <= 2 * len(run):
            ref = chunks.pop()
            entries = self.read_chunk(h, ref)
            if entries is not None:
                run = entries + run
                self._counts.rewritten_urls += len(entries)
        for i in range(0, len(run), chunk):
            chunks.append(self.store.write(run[i:i + chunk]))

    def refill(self, h: HostQueue) -> int | None:
        """Move the next run of the host's queue into its empty head: a chunk from disk, else the
        tail. Returns how many URLs came into RAM from disk (0 from the tail); None: nothing left."""
        key = self._key
        while h.chunks:
            ref = h.chunks.popleft()
            entries = self.read_chunk(h, ref)
            if entries is None:
                continue
            h.head = [(key(seq, q), seq, q, url) for seq, q, url in entries]
            heapq.heapify(h.head)
            self._counts.loaded_urls += len(entries)
            return len(entries)
        if h.tail:
            h.head = [(key(seq, q), seq, q, url) for seq, q, url in h.tail]
            heapq.heapify(h.head)
            h.tail = []
            h.tail_qmax = 0.0
            return 0
        return None

    def read_chunk(self, h: HostQueue, ref: ChunkRef) -> list[Entry] | None:
        """A chunk's entries (the chunk is consumed); None if it cannot be read: its URLs are lost,
        logged and counted, and the frontier is told (`lost`)."""
        try:
            return self.store.read(ref)
        except (ChunkError, OSError) as exc:
            log.error("frontier: %s: %d URLs of host %s are lost: %s", self.store.directory, ref.count,
                      h.name, exc)
            self._counts.chunk_errors += 1
            self._counts.lost_urls += ref.count
            self._lost(h, ref)
            return None

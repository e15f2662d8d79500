"""One host's queue and its place in the frontier's state machine.

A host's queue is a heap `head` in RAM (ordered by the URL policy), then
`chunks` spilled to segment files, then a RAM `tail` that new URLs join once
anything is spilled (so arrival order is kept across the three). A host is in
exactly one state:

    IDLE     nothing queued (remembered a while for its next-contact time)
    WAITING  queued, on the frontier's waiting heap until its next-contact time
    READY    queued and allowed now, on the ready heap ranked by the host policy
    BUSY     a worker holds it: no other request to it can start
    BLOCKED  per-IP politeness: another host on its address is busy

`version` is bumped on every state change, so heap entries carrying an older
one are skipped when popped (lazy deletion).
"""

from __future__ import annotations

from collections import deque

from crawler.frontier.policy import HostStats
from crawler.frontier.segments import ChunkRef, Entry

IDLE, WAITING, READY, BUSY, BLOCKED = range(5)
FIRST = float("-inf")            # head key of a URL put back: it is taken next

HeadEntry = tuple[float, int, float, str]     # (URL policy key, seq, quality, url)


class HostQueue:
    """The URLs queued for one host (RAM head, spilled chunks, RAM tail) and its scheduling state."""

    __slots__ = ("name", "head", "chunks", "tail", "tail_qmax", "queued", "qsum", "ready_at", "state", "version",
                 "stats", "ip", "inflight")

    def __init__(self, name: str) -> None:
        self.name = name
        self.head: list[HeadEntry] = []
        self.chunks: deque[ChunkRef] = deque()
        self.tail: list[Entry] = []
        self.tail_qmax = 0.0
        self.queued = 0
        self.qsum = 0.0
        self.ready_at = 0.0            # monotonic time it may next be contacted
        self.state = IDLE
        self.version = 0
        self.stats: HostStats | None = None
        self.ip: str | None = None
        self.inflight: Entry | None = None

    @property
    def ram(self) -> int:
        return len(self.head) + len(self.tail)

    def oldest_seq(self, fifo: bool) -> int:
        if fifo:
            seqs = [self.head[0][1]] if self.head else []
        else:
            seqs = [min(e[1] for e in self.head)] if self.head else []
        if self.chunks:
            seqs.append(min(c.first_seq for c in self.chunks))
        if self.tail:
            seqs.append(self.tail[0][0])
        return min(seqs) if seqs else 0

    def quality_max(self, fifo: bool) -> float:
        """Best queued quality. In a quality-keyed heap the best is the root or, when the root is
        a URL put back first, one of its two children; a FIFO-keyed head is scanned."""
        head = self.head if fifo else self.head[:3]
        best = max((e[2] for e in head), default=0.0)
        if self.chunks:
            best = max(best, max(c.qmax for c in self.chunks))
        return max(best, self.tail_qmax) if self.tail else best

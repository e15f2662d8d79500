"""Plain reference models of the modern cache policies, straight from their papers' pseudocode.

Written apart from crawler/cache and for reading, not speed: plain lists
(index 0 = the tail: the oldest, or least recently used, entry), linear
searches, no shared code with the implementations. Each model is a function
from a request sequence and a capacity to the hit (True) or miss (False) of
every request. Where a paper leaves a choice open (rounding of segment
sizes, whether a ghost entry is dropped when its key is readmitted), the
model makes the same documented choice as the implementation; the choices
are stated in the policy's module docstring and in docs/caches.md.
"""

from __future__ import annotations

from tests.support.mixing import fmix64


def sieve_model(trace: list[int], capacity: int) -> list[bool]:
    """SIEVE (NSDI '24, Algorithm 1): queue[0] is the tail, queue[-1] the head; the hand an index or None."""
    queue: list[int] = []
    visited: list[bool] = []
    hand: int | None = None
    hits = []
    for x in trace:
        if x in queue:
            visited[queue.index(x)] = True
            hits.append(True)
            continue
        hits.append(False)
        if len(queue) == capacity:
            o = hand if hand is not None else 0
            while visited[o]:
                visited[o] = False
                o = o + 1 if o + 1 < len(queue) else 0
            del queue[o], visited[o]
            hand = o if o < len(queue) else None  # the entry that was just newer than the victim
        queue.append(x)
        visited.append(False)
    return hits


def s3fifo_model(trace: list[int], capacity: int) -> list[bool]:
    """S3-FIFO (SOSP '23, Algorithm 1); small = ceil(C/10), main = C - small, ghost = main entries.

    A key moves from small to main when freq > 1; a ghost hit drops the ghost entry."""
    small_size = -(-capacity // 10)
    main_size = ghost_size = capacity - small_size
    small: list[int] = []
    main: list[int] = []
    ghost: list[int] = []
    freq: dict[int, int] = {}

    def evict_main() -> None:
        while main:
            t = main.pop(0)
            if freq[t] > 0:
                main.append(t)
                freq[t] -= 1
            else:
                del freq[t]
                return

    def evict_small() -> None:
        while small:
            t = small.pop(0)
            if freq[t] > 1:
                main.append(t)
                if len(main) >= main_size:
                    evict_main()
            else:
                ghost.append(t)
                if len(ghost) > ghost_size:
                    ghost.pop(0)
                del freq[t]
                return

    hits = []
    for x in trace:
        if x in small or x in main:
            freq[x] = min(freq[x] + 1, 3)
            hits.append(True)
            continue
        hits.append(False)
        while len(small) + len(main) >= capacity:
            if len(small) >= 0.1 * capacity:
                evict_small()
            else:
                evict_main()
        if x in ghost:
            ghost.remove(x)
            main.append(x)
        else:
            small.append(x)
        freq[x] = 0
    return hits


def arc_model(trace: list[int], capacity: int) -> list[bool]:
    """ARC (FAST '03, Figure 4), lists LRU first; p is real."""
    c = capacity
    t1: list[int] = []
    t2: list[int] = []
    b1: list[int] = []
    b2: list[int] = []
    p = 0.0

    def replace(x: int) -> None:
        if len(t1) >= 1 and ((x in b2 and len(t1) == p) or len(t1) > p):
            b1.append(t1.pop(0))
        else:
            b2.append(t2.pop(0))

    hits = []
    for x in trace:
        if x in t1 or x in t2:
            (t1 if x in t1 else t2).remove(x)
            t2.append(x)
            hits.append(True)
            continue
        hits.append(False)
        if x in b1:
            delta = 1.0 if len(b1) >= len(b2) else len(b2) / len(b1)
            p = min(p + delta, float(c))
            replace(x)
            b1.remove(x)
            t2.append(x)
        elif x in b2:
            delta = 1.0 if len(b2) >= len(b1) else len(b1) / len(b2)
            p = max(p - delta, 0.0)
            replace(x)
            b2.remove(x)
            t2.append(x)
        else:
            if len(t1) + len(b1) == c:
                if len(t1) < c:
                    b1.pop(0)
                    replace(x)
                else:
                    t1.pop(0)
            elif len(t1) + len(t2) + len(b1) + len(b2) >= c:
                if len(t1) + len(t2) + len(b1) + len(b2) == 2 * c:
                    b2.pop(0)
                replace(x)
            t1.append(x)
    return hits


def twoq_model(trace: list[int], capacity: int) -> list[bool]:
    """2Q, full version (VLDB '94); Kin = floor(C/4), Kout = floor(C/2); lists oldest first.

    A key readmitted from A1out leaves A1out before its slot is reclaimed."""
    kin, kout = capacity // 4, capacity // 2
    a1in: list[int] = []
    a1out: list[int] = []
    am: list[int] = []

    def reclaimfor() -> None:
        if len(a1in) + len(am) < capacity:  # a free page slot
            return
        if len(a1in) > kin:
            a1out.append(a1in.pop(0))
            if len(a1out) > kout:
                a1out.pop(0)
        else:
            am.pop(0)

    hits = []
    for x in trace:
        if x in am:
            am.remove(x)
            am.append(x)
            hits.append(True)
        elif x in a1out:
            a1out.remove(x)
            reclaimfor()
            am.append(x)
            hits.append(False)
        elif x in a1in:
            hits.append(True)
        else:
            reclaimfor()
            a1in.append(x)
            hits.append(False)
    return hits


ROW_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93)


def wtinylfu_model(trace: list[int], capacity: int) -> list[bool]:
    """W-TinyLFU: window LRU ceil(1%), SLRU main (protected floor(80%), probation the rest), and a
    count-min sketch (4 rows of 4-bit counters, width = C rounded up to a power of two, halved with its
    addition count after 10 C additions) deciding whether the window's victim replaces probation's."""
    window_size = -(-capacity // 100)
    main_size = capacity - window_size
    protected_size = main_size * 80 // 100
    width = 1
    while width < capacity:
        width *= 2
    bits = width.bit_length() - 1
    rows = [[0] * width for _ in range(4)]
    additions = 0

    def indexes(x: int) -> list[int]:
        h = fmix64(x)
        return [((h * m) % 2**64) // 2 ** (64 - bits) for m in ROW_MULTIPLIERS]

    def estimate(x: int) -> int:
        return min(rows[r][i] for r, i in enumerate(indexes(x)))

    window: list[int] = []
    probation: list[int] = []
    protected: list[int] = []
    hits = []
    for x in trace:
        for r, i in enumerate(indexes(x)):
            rows[r][i] = min(rows[r][i] + 1, 15)
        additions += 1
        if additions == 10 * capacity:
            rows = [[c // 2 for c in row] for row in rows]
            additions //= 2
        if x in window:
            window.remove(x)
            window.append(x)
            hits.append(True)
        elif x in protected:
            protected.remove(x)
            protected.append(x)
            hits.append(True)
        elif x in probation:
            probation.remove(x)
            protected.append(x)
            if len(protected) > protected_size:
                probation.append(protected.pop(0))
            hits.append(True)
        else:
            hits.append(False)
            window.append(x)
            if len(window) > window_size:
                candidate = window.pop(0)
                if len(probation) + len(protected) < main_size:
                    probation.append(candidate)
                elif probation and estimate(candidate) > estimate(probation[0]):
                    probation.pop(0)
                    probation.append(candidate)
    return hits

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

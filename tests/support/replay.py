"""Plain reference simulations for the replay tests, and the inputs they replay.

The replay tests (unit and property) compare crawler.replay against these:
each is the textbook algorithm on Python lists and dicts, written for
clarity, one request at a time, sharing no code with crawler.replay
(tests/unit/test_replay_models.py pins them on hand-worked examples).
`write_node_log` writes a node's splitter stream log with the real StreamLog.
"""

from __future__ import annotations

from collections import Counter, OrderedDict

import numpy as np

from crawler.cache import make_cache
from crawler.splitter.streamlog import FLAG_CACHE_HIT, FLAG_CROSS, NO_WORKER, RECORD, StreamLog

WAYS = 32


def lru_misses(trace: list[int], capacity: int) -> int:
    entries: OrderedDict[int, None] = OrderedDict()
    misses = 0
    for fp in trace:
        if fp in entries:
            entries.move_to_end(fp)
            continue
        misses += 1
        if len(entries) == capacity:
            entries.popitem(last=False)
        entries[fp] = None
    return misses


def lru_distances(trace: list[int]) -> list[int | None]:
    """Mattson's stack distance of each request (1 = top), None for a first request."""
    stack: list[int] = []
    out: list[int | None] = []
    for fp in trace:
        if fp in stack:
            i = stack.index(fp)
            out.append(i + 1)
            stack.pop(i)
        else:
            out.append(None)
        stack.insert(0, fp)
    return out


def min_misses(trace: list[int], capacity: int) -> int:
    """Belady's MIN: on a miss in a full cache, evict the entry asked farthest ahead (or never)."""
    never = len(trace) + 1
    next_at = [never] * len(trace)
    seen: dict[int, int] = {}
    for t in range(len(trace) - 1, -1, -1):
        next_at[t] = seen.get(trace[t], never)
        seen[trace[t]] = t
    cache: dict[int, int] = {}           # fingerprint -> time of its next request
    misses = 0
    for t, fp in enumerate(trace):
        if fp not in cache:
            misses += 1
            if len(cache) == capacity:
                del cache[max(cache, key=cache.__getitem__)]
        cache[fp] = next_at[t]
    return misses


def infinite_misses(trace: list[int]) -> int:
    return len(set(trace))


def static_misses(trace: list[int], k: int) -> int:
    """Requests outside the k most frequent fingerprints of the trace itself."""
    ranked = sorted(Counter(trace).items(), key=lambda item: (-item[1], item[0]))
    held = {fp for fp, _ in ranked[:k]}
    return sum(fp not in held for fp in trace)


def clock_ring_misses(trace: list[int], capacity: int) -> int:
    """The paper's CLOCK on one ring (new entries unmarked): crawler.cache's `clock` at every size,
    and its `clock-sets` up to 32 entries (one set)."""
    keys: list[int] = []
    marks: list[bool] = []
    hand = misses = 0
    for fp in trace:
        if fp in keys:
            marks[keys.index(fp)] = True
            continue
        misses += 1
        if len(keys) < capacity:
            keys.append(fp)
            marks.append(False)
            continue
        while marks[hand]:
            marks[hand] = False
            hand = (hand + 1) % capacity
        keys[hand], marks[hand] = fp, False
        hand = (hand + 1) % capacity
    return misses


def single_call_misses(policy: str, trace: list[int], capacity: int, **options) -> int:
    """The crawler's cache asked one request at a time (check_and_add), as the splitter's hot path does."""
    cache = make_cache(policy, capacity, **options)
    for fp in trace:
        cache.check_and_add(fp)
    return cache.misses


def locality_trace(n: int, seed: int, universe: int = 5000) -> np.ndarray:
    """A crawl-like stream: pages of links that repeat on the page, go back to recent
    links, pick popular URLs (1/x ranks) or are new."""
    rng = np.random.default_rng(seed)
    out: list[int] = []
    fresh = universe
    while len(out) < n:
        page: list[int] = []
        for _ in range(int(rng.integers(1, 40))):
            u = rng.random()
            if page and u < 0.3:
                page.append(page[int(rng.integers(len(page)))])
            elif out and u < 0.65:
                back = int(np.exp(rng.random() * np.log(len(out) + 1)))
                page.append(out[max(0, len(out) - back)])
            elif u < 0.85:
                page.append(int(np.exp(rng.random() * np.log(universe))))
            else:
                fresh += 1
                page.append(fresh * 0x9E3779B97F4A7C15 % 2**64)
        out += page
    return np.array(out[:n], dtype=np.uint64)


def random_trace(n: int, seed: int, distinct: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2**64, size=distinct, dtype=np.uint64)
    return pool[rng.integers(0, distinct, size=n)]


NODES = 3


def write_node_log(directory, node: int, pages: list[np.ndarray], rotate_bytes: int = 1 << 20,
                   workers: list[int] | None = None) -> np.ndarray:
    """Logs `pages` as node `node` would (dest = fp mod NODES, a hit flag on every third cross
    record, page i by worker workers[i], NO_WORKER without `workers`); returns the records written, in order."""
    log = StreamLog(directory, node, NODES, rotate_bytes)
    written = []
    for i, fps in enumerate(pages):
        worker = NO_WORKER if workers is None else workers[i]
        dest = (fps % NODES).astype(np.uint16)
        cross = dest != node
        hit = cross & (np.arange(len(fps)) % 3 == 0)
        flags = cross.astype(np.uint16) * FLAG_CROSS + hit.astype(np.uint16) * FLAG_CACHE_HIT
        log.append(fps, dest, flags, worker)
        rec = np.zeros(len(fps), dtype=RECORD)
        rec["fp"], rec["dest"], rec["flags"], rec["worker"] = fps, dest, flags, worker
        written.append(rec)
    log.close()
    return np.concatenate(written)

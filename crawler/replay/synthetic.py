"""The paper's model of a crawler's URL stream, as a trace generator (`crawler synth`).

Why. Broder, Najork & Wiener (2003) found a *critical region* in every miss
rate curve: a narrow range of cache sizes over which the miss rate drops
steeply. In section 5.2 they explain it with a model of the stream, and
conjecture that the region moves with the number of crawling threads. This
module writes streams from that model, so replay can show both on demand.

The model, as we read section 5.2. A crawler runs T threads. Each thread
crawls a host for a run of pages, then moves on to a new host; each page
yields a run of links. Each link a thread emits is, independently:
- with probability alpha, a URL of the global set G of popular URLs, the
  same set for every thread; rank r of 1..|G| with probability
  proportional to 1/r^s (Zipf-like, s = `zipf_exponent`);
- with probability beta, a URL of the thread's *local* sets: with
  probability `page_share` a repeat of a link already emitted on the page
  being processed (L'(p): a uniformly chosen earlier link of the page), else
  a uniformly chosen URL of the host being crawled (L''(h): `host_urls`
  URLs per host, a fresh set for each host);
- with probability gamma = 1 - alpha - beta, a URL drawn uniformly from a
  universe of `universe` URLs (with the default 2^62, almost always new).
The T threads' streams are interleaved into the stream the host splitter
sees: round robin, one link per thread in turn (the default), or with
`interleave="random"` each request from a uniformly random thread.

Where this departs from the paper (or from our reading of it):
- The run lengths are fixed (`links_per_page` links per page,
  `pages_per_host` pages per host), not random. So that the threads do not
  all change host at the same moment, thread t starts
  floor(t * pages_per_host / T) pages into its first host.
- Real threads run at uneven, correlated speeds; here they take strict
  turns, or are drawn independently per request. With round robin a repeat
  of the link b places back on a page is exactly b * T requests back, so
  the page repeats' knee at small sizes is sharper than with random
  interleaving.
- The first link of a page cannot repeat an earlier link of the page; when
  the draw asks for L'(p) there, it takes a URL of L''(h) instead (still a
  local request, so beta is kept, but the page share is a little lower:
  the kinds reported count it as a host request).
- L''(h) is a fixed set of `host_urls` URLs per host drawn uniformly, not
  the links of the host's pages; a page repeat (L'(p)) may repeat a global
  or random link of the page, as on a real page.
- One stream, one node: the records carry `dest` 0 and no flags, so the
  log's `cross` trace is empty; replay it with `--trace full`.

Fingerprints. A URL is a 64-bit pre-image (kind in the top two bits: 0
random, 1 global, 2 host; then the rank, the random id, or host * host_urls
+ index) passed through the splitmix64 finalizer, a bijection of 64-bit
words: distinct URLs never share a fingerprint, and the fingerprints are as
evenly spread as the crawler's own hashes. The random draws are counter
based (splitmix64 of the seed, the request's position and the draw's
purpose), so request i is the same whatever the block size it is made in.

Memory. The generator holds G's cumulative distribution (8 bytes per URL of
G), each thread's link count and the links of the page each thread is on
(8 bytes per link, T * `links_per_page`): nothing grows with the stream.
Blocks of `BLOCK_REQUESTS` are made with numpy (hot path: no per-request
Python).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from crawler.config.schema import SplitterLogConfig
from crawler.replay.traces import LOG_GLOB
from crawler.splitter.streamlog import NO_WORKER, StreamLog

BLOCK_REQUESTS = 1 << 18          # requests made per numpy block (2 MiB of fingerprints)
MAX_HOST_URLS = 1 << 20           # keeps host * host_urls + index below 2^62 for 2^42 hosts
KIND_NAMES = ("random", "global", "page", "host")
RANDOM, GLOBAL, PAGE, HOST = range(4)
_KIND_BITS = 62
_ID_MASK = (1 << _KIND_BITS) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_DRAWS = 4                        # random words per request: kind, pick, random id, thread
INTERLEAVES = ("round-robin", "random")


@dataclass(frozen=True)
class ModelParams:
    """The model's parameters; gamma = 1 - alpha - beta."""

    # Threads.
    threads: int = 16
    """Crawling threads whose streams are interleaved (T)."""
    interleave: str = "round-robin"
    """How their streams are interleaved: "round-robin" (one link per thread in turn) or "random"
    (each request from a uniformly random thread)."""

    # Where each request comes from.
    alpha: float = 0.2
    """Probability of a URL of the global set G."""
    beta: float = 0.6
    """Probability of a URL of the thread's local sets (L'(p) or L''(h))."""
    page_share: float = 0.3
    """Of the local requests, the share that repeat a link of the current page (L'(p)); the rest, L''(h)."""

    # The sets.
    global_urls: int = 1000
    """|G|, popular URLs shared by all threads."""
    zipf_exponent: float = 1.0
    """Popularity of G's URL of rank r is proportional to 1 / r^zipf_exponent."""
    host_urls: int = 64
    """|L''(h)|, the URLs of one host a thread draws from while it crawls that host."""
    links_per_page: int = 20
    """Page run length: links a thread emits per page."""
    pages_per_host: int = 50
    """Host run length: pages a thread crawls per host before it moves on to a new host."""
    universe: int = 1 << 62
    """URLs the gamma requests are drawn from, uniformly (at most 2^62)."""

    # The stream.
    requests: int = 1_000_000
    """Requests in the whole (interleaved) stream."""
    seed: int = 0
    """Seed of every random draw: the same seed and parameters give the same stream."""

    @property
    def gamma(self) -> float:
        """Probability of a uniformly random URL."""
        return 1.0 - self.alpha - self.beta

    def check(self) -> None:
        """Raises ValueError naming the first parameter out of range."""
        for name in ("threads", "global_urls", "host_urls", "links_per_page", "pages_per_host", "universe"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("alpha", "beta", "page_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.gamma < -1e-9:
            raise ValueError(f"alpha + beta must be at most 1, got {self.alpha + self.beta:g}")
        if self.requests < 1:
            raise ValueError(f"requests must be at least 1, got {self.requests}")
        if self.universe > 1 << _KIND_BITS:
            raise ValueError(f"universe must be at most 2^{_KIND_BITS}, got {self.universe}")
        if self.global_urls > 1 << _KIND_BITS or self.host_urls > MAX_HOST_URLS:
            raise ValueError(f"global_urls must be at most 2^{_KIND_BITS} and host_urls at most {MAX_HOST_URLS}")
        if self.interleave not in INTERLEAVES:
            raise ValueError(f"interleave must be one of {', '.join(INTERLEAVES)}, got {self.interleave!r}")
        if not 0 <= self.seed < 1 << 64:
            raise ValueError(f"seed must be in 0..2^64-1, got {self.seed}")
        if self.zipf_exponent < 0:
            raise ValueError(f"zipf_exponent must not be negative, got {self.zipf_exponent}")

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"gamma": round(self.gamma, 12)}


def mix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer on uint64 words (a bijection: distinct inputs, distinct outputs)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def url_fingerprints(kind: int, ids: np.ndarray) -> np.ndarray:
    """Fingerprints of the URLs `ids` (< 2^62) of a kind (RANDOM, GLOBAL or HOST)."""
    return mix64((np.uint64(kind) << np.uint64(_KIND_BITS)) | ids.astype(np.uint64))


def global_fingerprints(count: int) -> np.ndarray:
    """The fingerprints of G's URLs, by rank (rank 1 first)."""
    return url_fingerprints(GLOBAL, np.arange(1, count + 1, dtype=np.uint64))


def host_fingerprints(host: int, host_urls: int) -> np.ndarray:
    """The fingerprints of L''(h) of host number `host` (as Block.hosts numbers them)."""
    return url_fingerprints(HOST, np.arange(host_urls, dtype=np.uint64) + np.uint64(host * host_urls))


@dataclass
class Block:
    """One block of the stream, and where each request came from."""

    fps: np.ndarray
    """Fingerprints (uint64), in stream order."""
    kinds: np.ndarray
    """Kind of each request (uint8: RANDOM, GLOBAL, PAGE, HOST)."""
    threads: np.ndarray
    """The thread that emitted each request (int64)."""
    steps: np.ndarray
    """Each request's link count in its thread, head start included (int64): link steps % links_per_page
    of page steps // links_per_page, host steps // (links_per_page * pages_per_host)."""
    hosts: np.ndarray
    """The host each request's thread is crawling (int64, unique across threads; host_fingerprints)."""


class SyntheticTrace:
    """Makes the model's stream block by block; its state is G's distribution, each thread's link count
    and the links of the page each thread is on."""

    def __init__(self, params: ModelParams) -> None:
        params.check()
        self.params = params
        weights = 1.0 / np.arange(1, params.global_urls + 1, dtype=np.float64) ** params.zipf_exponent
        self._cdf = np.cumsum(weights)
        self._cdf /= self._cdf[-1]
        seeds = mix64(np.arange(_DRAWS, dtype=np.uint64) + mix64(np.array([params.seed], dtype=np.uint64)))
        self._salts = [np.uint64(s) for s in seeds]
        threads = np.arange(params.threads, dtype=np.int64)
        # Thread t starts floor(t * pages_per_host / T) pages into its first host.
        self._steps = (threads * params.pages_per_host // params.threads) * params.links_per_page
        # The resolved fingerprint of each thread's link at step s, at [t, s % links_per_page]: a page
        # repeat looks back at most links_per_page - 1 steps of its thread.
        self._page = np.zeros((params.threads, params.links_per_page), dtype=np.uint64)
        self.position = 0
        """Requests made so far."""
        self.kind_counts = np.zeros(len(KIND_NAMES), dtype=np.int64)
        """Requests made so far of each kind (KIND_NAMES order)."""

    def state_bytes(self) -> int:
        """Bytes the generator holds between blocks (independent of the stream's length)."""
        return int(self._cdf.nbytes + self._steps.nbytes + self._page.nbytes + self.kind_counts.nbytes)

    def _uniform(self, positions: np.ndarray, draw: int) -> np.ndarray:
        """A uniform float in [0, 1) per position, for one purpose: a pure function of (seed, position)."""
        return (self._words(positions, draw) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def _words(self, positions: np.ndarray, draw: int) -> np.ndarray:
        return mix64(positions * _GOLDEN + self._salts[draw])

    def _interleave(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(thread, step) per position, and the block's indices sorted by thread (stable): round
        robin, or a uniformly random thread per position."""
        p = self.params
        if p.interleave == "round-robin":
            threads = (pos % np.uint64(p.threads)).astype(np.int64)
        else:
            threads = (self._words(pos, 3) % np.uint64(p.threads)).astype(np.int64)
        order = np.argsort(threads, kind="stable")           # the block's requests, thread by thread
        counts = np.bincount(threads, minlength=p.threads)
        first = np.cumsum(counts) - counts                   # where each thread's run starts in `order`
        rank = np.empty(len(pos), dtype=np.int64)
        rank[order] = np.arange(len(pos), dtype=np.int64) - np.repeat(first, counts)
        return threads, self._steps[threads] + rank, order

    def next_block(self, count: int) -> Block:
        """The next `count` requests (fewer at the end of the stream).

        Hot path: numpy over the whole block, no Python per request."""
        p = self.params
        count = max(0, min(count, p.requests - self.position))
        pos = np.arange(self.position, self.position + count, dtype=np.uint64)
        threads, steps, order = self._interleave(pos)
        u_kind = self._uniform(pos, 0)
        u_pick = self._uniform(pos, 1)
        link = steps % p.links_per_page
        hosts = steps // (p.links_per_page * p.pages_per_host) * p.threads + threads
        kinds = np.full(count, RANDOM, dtype=np.uint8)
        kinds[u_kind < p.alpha] = GLOBAL
        local = (u_kind >= p.alpha) & (u_kind < p.alpha + p.beta)
        # Within the local band, the first `page_share` of it asks for a page repeat.
        page = local & (u_kind < p.alpha + p.beta * p.page_share) & (link > 0)
        kinds[local] = HOST
        kinds[page] = PAGE

        fps = np.empty(count, dtype=np.uint64)
        sel = kinds == GLOBAL
        fps[sel] = url_fingerprints(GLOBAL, np.searchsorted(self._cdf, u_pick[sel], side="right") + 1)
        sel = kinds == HOST
        index = np.minimum((u_pick[sel] * p.host_urls).astype(np.int64), p.host_urls - 1)
        fps[sel] = url_fingerprints(HOST, (hosts[sel] * p.host_urls + index).astype(np.uint64))
        sel = kinds == RANDOM
        fps[sel] = url_fingerprints(RANDOM, self._words(pos[sel], 2) % np.uint64(p.universe))

        # Page repeats copy an earlier link of the same page: step s - back of the same thread, in this
        # block (at `order`) or in the thread's page before it (`_page`). Chains (a repeat of a repeat)
        # resolve by pointer jumping over [the threads' pages, this block].
        carried = self._page.size
        both = np.concatenate([self._page.reshape(-1), fps])
        source = np.arange(len(both), dtype=np.int64)
        sel = np.flatnonzero(kinds == PAGE)
        back = link[sel] - np.minimum((u_pick[sel] * link[sel]).astype(np.int64), link[sel] - 1)
        t, target = threads[sel], steps[sel] - back
        before = self._steps[t]                               # the thread's first step in this block
        counts = np.bincount(threads, minlength=p.threads)
        first = np.cumsum(counts) - counts
        inside = target >= before
        source[carried + sel] = np.where(
            inside, carried + order[np.clip(first[t] + target - before, 0, count - 1)],
            t * p.links_per_page + target % p.links_per_page)
        while True:
            jumped = source[source]
            if np.array_equal(jumped, source):
                break
            source = jumped
        fps = both[source][carried:]
        # Keep each thread's last links_per_page links for the next block.
        last = steps >= (self._steps + counts)[threads] - p.links_per_page
        self._page[threads[last], link[last]] = fps[last]
        self._steps += counts
        self.position += count
        self.kind_counts += np.bincount(kinds, minlength=len(KIND_NAMES))
        return Block(fps, kinds, threads, steps, hosts)

    def blocks(self, block_requests: int = BLOCK_REQUESTS) -> Iterator[Block]:
        """The rest of the stream in blocks of `block_requests` requests."""
        while self.position < self.params.requests:
            yield self.next_block(block_requests)


def write_log(params: ModelParams, directory: str | os.PathLike, rotate_bytes: int | None = None,
              block_requests: int = BLOCK_REQUESTS) -> dict:
    """Writes the model's stream as node 0's splitter stream log in `directory` (the files
    `crawler replay` reads); returns what was written: files, requests, kind counts. A new
    file starts at the first block past `rotate_bytes` (default: the splitter's).

    Refuses (ValueError) a directory that already holds splitter logs: replay would join them
    to the new one as one node's stream."""
    out = Path(directory)
    if out.is_dir() and any(out.glob(LOG_GLOB)):
        raise ValueError(f"{out}: already holds splitter-*.log files, which replay would read as one "
                         f"stream with the new trace; remove them or choose another directory")
    trace = SyntheticTrace(params)
    log = StreamLog(out, 0, 1, rotate_bytes or SplitterLogConfig().rotate_bytes)
    try:
        for block in trace.blocks(block_requests):
            zeros = np.zeros(len(block.fps), dtype=np.uint16)
            # The thread as the record's worker: `crawler replay --per-worker` gives each its own cache.
            log.append(block.fps, zeros, zeros, np.minimum(block.threads, NO_WORKER).astype(np.uint16))
    finally:
        log.close()
    return {"files": [str(f) for f in log.files], "requests": trace.position,
            "kinds": dict(zip(KIND_NAMES, trace.kind_counts.tolist())), "params": params.as_dict()}

"""URL caches: "have we sent / seen this URL recently?" answered from RAM.

Where they sit. Every URL a page links to is fingerprinted (64-bit mmh3 of
the canonical URL, crawler.urls) and asked of two caches: the host splitter's
(a hit means the URL was already sent to its owner node, so it is dropped)
and the DUE's front cache (a hit is a known duplicate; only misses reach the
disk-backed seen-set). Broder, Najork & Wiener (2003) measured that a cache
of a few hundred entries per crawling thread catches most repeats, which is
what makes a distributed crawl affordable. `crawler replay` runs the same
classes offline over logged streams to compare policies and sizes.

The interface (base.Cache), the same for every policy:
    check_and_add(fp) -> bool          True = hit; a miss inserts fp
    check_and_add_many(fps) -> bool[]  the same for a uint64 array, in order
                                       (repeats inside one batch included)
    capacity, size, hits, misses, stats(), close()
and `make_cache(policy, capacity, **options)` builds one by its config name.

The policies (one module each, registered in base._REGISTRY):
    clock-sets
              default. The paper's CLOCK (a mark bit per entry, a hand that
              sweeps clearing marks to the first unmarked victim) run in sets
              of 32 entries chosen by hash, one ring per set: 8.2 bytes per
              entry, everything counted; about as many misses as `clock` on
              crawler-like streams, and faster (docs/caches.md).
    clock     the paper's CLOCK exactly: one ring over the whole capacity and
              a hash index to it, 16-24 bytes per entry. New entries start
              unmarked in both.
    lru       exact least-recently-used.
    random    random victim; option `seed` (reproducible).
    static    holds `preload` (e.g. static.top_k of an earlier trace); never
              inserts, never evicts.
    min       offline: Belady's clairvoyant MIN; option `trace`, then asked
              that trace in order.
    infinite  offline: never evicts (misses = distinct fingerprints).
    sieve, s3fifo, arc, 2q, wtinylfu
              the later policies (SIEVE, S3-FIFO, ARC, 2Q, W-TinyLFU), each
              pinned by a plain model of its paper: docs/caches.md. SIEVE has
              a compiled kernel; the other four are pure Python.
ONLINE_POLICIES are the ones the splitter and the DUE may use; PAPER_POLICIES
(the 2003 paper's, both CLOCKs, with MIN and infinite) are what `crawler replay`
runs unless told otherwise.

Speed. The hot path is one call per link, so each policy class is a C
kernel type plus the Cache base (crawler/_native/, built by setup.py with plain
gcc, no numpy headers): a single check_and_add is a METH_O call, and
check_and_add_many loops over the array in C (MIN precomputes its answers
with a compiled Belady simulation). Without the compiled module every policy falls back to a
pure-Python kernel in its own module with identical results (tests pin this;
CRAWLER_CACHE_PURE_PYTHON=1 forces the fallback). Memory layouts, figures
and how to add a policy: docs/caches.md; numbers: bench/cache_bench.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from crawler._native import NATIVE
from crawler.cache.base import (
    DEFAULT_POLICY,
    ONLINE_POLICIES,
    PAPER_POLICIES,
    POLICY_NAMES,
    Cache,
    cache_from_config,
    make_cache,
    policy_class,
)

COMPILED: bool = NATIVE is not None
POLICIES: Mapping[str, type[Cache]] = MappingProxyType({name: policy_class(name) for name in POLICY_NAMES})

__all__ = [
    "COMPILED",
    "Cache",
    "DEFAULT_POLICY",
    "ONLINE_POLICIES",
    "PAPER_POLICIES",
    "POLICIES",
    "POLICY_NAMES",
    "cache_from_config",
    "make_cache",
]

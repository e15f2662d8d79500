"""The one interface every URL cache policy implements, and the registry.

A policy is a class with a `name` (the word used in config, `policy: clock-sets`)
and the `Cache` interface below. The registry maps each name to the module and
class that implement it; `make_cache` builds one by name and checks the
capacity and options first, so a bad config fails with the policy, the
option and what is allowed.

Adding a policy is one new file with a `Cache` subclass and one line in
`_REGISTRY` below.
"""

from __future__ import annotations

import importlib
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

# name in config -> "module:Class" (imported on first use, so no cycles).
_REGISTRY: Mapping[str, str] = MappingProxyType({
    "clock": "crawler.cache.clock:ClockCache",
    "clock-sets": "crawler.cache.clock_sets:ClockSetsCache",
    "lru": "crawler.cache.lru:LruCache",
    "random": "crawler.cache.random_policy:RandomCache",
    "static": "crawler.cache.static:StaticCache",
    "min": "crawler.cache.min:MinCache",
    "infinite": "crawler.cache.infinite:InfiniteCache",
    "sieve": "crawler.cache.sieve:SieveCache",
    "s3fifo": "crawler.cache.s3fifo:S3FifoCache",
    "arc": "crawler.cache.arc:ArcCache",
    "2q": "crawler.cache.twoq:TwoQCache",
    "wtinylfu": "crawler.cache.wtinylfu:WTinyLfuCache",
})

POLICY_NAMES: tuple[str, ...] = tuple(_REGISTRY)
# The policies Broder, Najork & Wiener compare (their CLOCK exactly, and the set-associative variant the
# crawler runs by default), with the floor and the ceiling: what `crawler replay` runs unless told
# otherwise. The later policies (sieve, s3fifo, arc, 2q, wtinylfu) are asked for by name (`--policies`):
# all but sieve (compiled) are pure Python, 4-75x slower than the compiled ones.
PAPER_POLICIES: tuple[str, ...] = ("clock", "clock-sets", "lru", "random", "static", "min", "infinite")
ONLINE_POLICIES: tuple[str, ...] = ("clock", "clock-sets", "lru", "random", "static", "sieve", "s3fifo", "arc", "2q",
                                     "wtinylfu")
DEFAULT_POLICY = "clock-sets"   # the config schema's default (CacheConfig.policy); why: docs/caches.md
# Positions in the kernels' arrays are 32-bit; 2**31 entries is 16 GiB of keys.
MAX_CAPACITY = (1 << 31) - 1


class Cache(ABC):
    """A set of at most `capacity` URL fingerprints with a replacement policy.

    `check_and_add(fp)` is True when fp is cached (a hit; the policy may note
    the use); on a miss fp is inserted, evicting per the policy when full.
    `check_and_add_many(fps)` does the same for each element of a uint64 array
    in order (repeats inside one batch included) and returns the hits.
    """

    __slots__ = ()

    name: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()
    compiled: ClassVar[bool] = False

    @abstractmethod
    def check_and_add(self, fp: int) -> bool:
        """True if fp is cached (a hit); a miss inserts it (hot path)."""

    @abstractmethod
    def check_and_add_many(self, fps: np.ndarray) -> np.ndarray:
        """check_and_add on each fingerprint in order; the hits as a bool array."""

    @property
    @abstractmethod
    def capacity(self) -> int:
        """Most entries the cache holds."""

    @property
    @abstractmethod
    def size(self) -> int:
        """Entries held now."""

    @property
    @abstractmethod
    def hits(self) -> int:
        """Requests that found their fingerprint."""

    @property
    @abstractmethod
    def misses(self) -> int:
        """Requests that did not."""

    @property
    @abstractmethod
    def buffer_bytes(self) -> int:
        """Bytes of the cache's arrays and contained objects (not the instance itself)."""

    def memory_bytes(self) -> int:
        """Everything the cache holds in memory: the instance plus its arrays."""
        return sys.getsizeof(self) + self.buffer_bytes

    def stats(self) -> dict[str, Any]:
        """Counters and memory, for metrics, the summary line and replay."""
        hits, misses, capacity = self.hits, self.misses, self.capacity
        lookups = hits + misses
        memory = self.memory_bytes()
        return {
            "policy": self.name,
            "capacity": capacity,
            "size": self.size,
            "hits": hits,
            "misses": misses,
            "lookups": lookups,
            "hit_rate": hits / lookups if lookups else 0.0,
            "memory_bytes": memory,
            "bytes_per_entry": memory / capacity,
            "compiled": self.compiled,
        }

    def close(self) -> None:  # noqa: B027 - a default on purpose: most policies hold only memory
        """Nothing to release: memory goes with the object."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} size={self.size}/{self.capacity}>"


def check_capacity(capacity: object) -> int:
    """The capacity as an int, or ValueError saying what is allowed."""
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
        raise ValueError(f"cache capacity must be an integer, got {capacity!r}")
    value = int(capacity)
    if not 1 <= value <= MAX_CAPACITY:
        raise ValueError(f"cache capacity must be between 1 and {MAX_CAPACITY} entries, got {value}")
    return value


def policy_class(policy: str) -> type[Cache]:
    """The class registered under `policy`, or ValueError naming the known ones."""
    target = _REGISTRY.get(policy) if isinstance(policy, str) else None
    if target is None:
        raise ValueError(f"unknown cache policy {policy!r}; known policies: {', '.join(POLICY_NAMES)}")
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)


def make_cache(policy: str, capacity: int, **options: Any) -> Cache:
    """A cache of the named policy holding `capacity` entries.

    Options: `random` takes `seed`; `static` takes `preload` (fingerprints, or
    a .npy file of them); `min` takes `trace` (the whole request sequence).
    """
    cls = policy_class(policy)
    capacity = check_capacity(capacity)
    unknown = sorted(set(options) - set(cls.options))
    if unknown:
        allowed = ", ".join(cls.options) if cls.options else "none"
        raise ValueError(f"cache policy {policy!r} does not take option(s) {', '.join(unknown)}; "
                         f"its options: {allowed}")
    build: Callable[..., Cache] = cls      # each policy's own constructor takes its options
    return build(capacity, **options)


def cache_from_config(config: Any) -> Cache:
    """A cache from a config section with policy, size, seed and preload_file
    (crawler.config.schema.CacheConfig); each policy gets only its options."""
    policy = config.policy
    options: dict[str, Any] = {}
    if policy == "random":
        options["seed"] = config.seed
    elif policy == "static" and getattr(config, "preload_file", None):
        options["preload"] = Path(config.preload_file)
    return make_cache(policy, config.size, **options)

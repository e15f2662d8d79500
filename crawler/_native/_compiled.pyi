"""Type stub of crawler._native._compiled, the compiled kernels (C sources: crawler/_native/*.c).

Each name here has a pure-Python twin in the module that uses it; `crawler._native.native_or`
picks one or the other at import. Fingerprints are uint64; `fps` may be any array-like of them
(a C-contiguous numpy uint64 array takes the fast path, anything else is converted).
"""

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

_Fingerprints = npt.ArrayLike
_BoolArray = npt.NDArray[np.bool_]
_SizeError = tuple[bytes, int, int]     # (path, size in bytes, expected size) of a bucket file of the wrong size

# --- the URL caches' kernels (crawler/cache/) -------------------------------------------------

class _CacheKernel:
    """What the five cache kernels share (the interface of crawler/cache/base.py's Cache).
    A name of this stub only: at run time each kernel is its own type, with no common base."""

    def check_and_add(self, fp: int, /) -> bool: ...
    def check_and_add_many(self, fps: _Fingerprints, /) -> _BoolArray: ...
    def keys(self) -> list[int]: ...
    @property
    def capacity(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def hits(self) -> int: ...
    @property
    def misses(self) -> int: ...
    @property
    def buffer_bytes(self) -> int: ...

class ClockKernel(_CacheKernel):
    """The paper's CLOCK: one ring over the whole capacity and a position index (crawler/cache/clock.py)."""

    def __init__(self, capacity: int) -> None: ...
    def ring_state(self) -> tuple[list[int], list[bool], int]: ...

class ClockSetsKernel(_CacheKernel):
    """Set-associative CLOCK: a CLOCK ring per set of `ways` entries (crawler/cache/clock_sets.py)."""

    def __init__(self, capacity: int, ways: int) -> None: ...
    def set_state(self, b: int, /) -> tuple[list[int], list[bool], int]: ...
    @property
    def nsets(self) -> int: ...
    @property
    def ways(self) -> int: ...

class LruKernel(_CacheKernel):
    """Exact LRU: entries with list links and a position index (crawler/cache/lru.py)."""

    def __init__(self, capacity: int) -> None: ...

class RandomKernel(_CacheKernel):
    """Random victim drawn by splitmix64 from `seed` (crawler/cache/random_policy.py)."""

    def __init__(self, capacity: int, seed: int = 0) -> None: ...

class SetKernel(_CacheKernel):
    """Hash set: every miss inserts (`insert`, INFINITE) or frozen after add_many (STATIC)."""

    def __init__(self, capacity: int, insert: bool) -> None: ...
    def add_many(self, fps: _Fingerprints, /) -> None: ...

class SieveKernel(_CacheKernel):
    """SIEVE: a FIFO queue, a visited bit per entry and a hand (crawler/cache/sieve.py)."""

    def __init__(self, capacity: int) -> None: ...
    def visited(self) -> list[bool]: ...

class LruStackKernel:
    """LRU stack distances up to `capacity`, fed chunk by chunk (crawler/replay/streaming.py)."""

    def __init__(self, capacity: int, window: int = 0) -> None: ...
    def depths(self, fps: _Fingerprints, out: npt.NDArray[np.uint32], /) -> None: ...
    def histogram(self, fps: _Fingerprints, hist: npt.NDArray[np.int64], /) -> None: ...
    @property
    def capacity(self) -> int: ...
    @property
    def window(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def requests(self) -> int: ...
    @property
    def compactions(self) -> int: ...
    @property
    def buffer_bytes(self) -> int: ...

def belady(next_use: npt.NDArray[np.int64], capacity: int, out: npt.NDArray[np.uint8] | npt.NDArray[np.bool_],
           /) -> None:
    """MIN's hit (1) / miss (0) per request into `out`, from each request's next use (crawler/cache/min.py)."""

class BeladyKernel:
    """MIN fed a trace's next-use times chunk by chunk, memory O(capacity) (crawler/replay/min_streaming.py)."""

    def __init__(self, capacity: int, never: int) -> None: ...
    def hits(self, next_use: npt.NDArray[np.int64], out: npt.NDArray[np.uint8] | npt.NDArray[np.bool_], /) -> None: ...
    @property
    def capacity(self) -> int: ...
    @property
    def never(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def requests(self) -> int: ...
    @property
    def misses(self) -> int: ...
    @property
    def buffer_bytes(self) -> int: ...

class NextUseKernel:
    """Next-use times of a trace fed backwards in chunks (crawler/replay/min_streaming.py)."""

    def __init__(self, never: int) -> None: ...
    def back(self, fps: npt.NDArray[np.uint64], positions: npt.NDArray[np.int64], out: npt.NDArray[np.int64],
             /) -> None: ...
    @property
    def never(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def buffer_bytes(self) -> int: ...

# --- the DUE (crawler/due/) -------------------------------------------------------------------

def crc32(data: Buffer, crc: int = 0, /) -> int:
    """zlib's CRC-32, as the DUE's journal records are checksummed."""

def due_submit(cache: object, fps: _Fingerprints, urls: list[str], buf: npt.NDArray[np.uint64], n: int,
               buf_urls: list[str], window: Buffer | None, pos: int, /) -> tuple[int, int]:
    """(misses, record_bytes): the submit pass (crawler/due/submit_pass.py)."""

class DueFront:
    """DiskDUE.submit's hot path and the state it touches (crawler/due/front.py)."""

    cache: object
    buf: npt.NDArray[np.uint64]
    urls: list[str]
    window: Buffer | None
    slow: Callable[[_Fingerprints, list[str]], list[str]] | None
    finish: Callable[[int | tuple[int, int]], list[str]] | None
    n: int
    window_at: int
    active_bytes: int
    look_at: int
    checks: int
    fsync_at: float
    dirty: bool
    merge_done: bool
    hooked: bool
    attention: bool
    def __init__(self, cache: object, buf: npt.NDArray[np.uint64]) -> None: ...
    def submit(self, fps: _Fingerprints, urls: list[str], /) -> list[str]: ...
    def accept(self, fps: _Fingerprints, urls: list[str], /) -> list[str] | tuple[int, int] | int: ...

def due_sort_unique(fps: npt.NDArray[np.uint64], keys: npt.NDArray[np.uint64], first: npt.NDArray[np.int64],
                    /) -> int:
    """Fills keys[:u] and first[:u]; returns u (crawler/due/merge_pass.py)."""

def due_find_new(keys: npt.NDArray[np.uint64], bounds: npt.NDArray[np.int64], base_paths: list[bytes | None],
                 base_counts: npt.NDArray[np.int64], delta_paths: list[bytes | None],
                 delta_counts: npt.NDArray[np.int64], window_entries: int, new_mask: npt.NDArray[np.uint8],
                 new_counts: npt.NDArray[np.int64], /) -> _SizeError | None: ...
def due_write_buckets(keys: npt.NDArray[np.uint64], new_mask: npt.NDArray[np.uint8], bounds: npt.NDArray[np.int64],
                      base_paths: list[bytes | None], base_counts: npt.NDArray[np.int64],
                      delta_paths: list[bytes | None], delta_counts: npt.NDArray[np.int64],
                      buckets: npt.NDArray[np.int64], out_paths: list[bytes], folds: npt.NDArray[np.uint8],
                      window_entries: int, /) -> _SizeError | None: ...
def due_pick(urls: list[str], positions: npt.NDArray[np.int64], /) -> list[str]: ...
def due_fsync_files(paths: list[bytes], threads: int, /) -> None: ...
def due_remove_files(paths: list[bytes | None], /) -> None: ...
def due_populate_write(mapping: Buffer, /) -> bool:
    """Faults a shared mapping's pages in writable now; False where the kernel cannot."""

# --- the host splitter (crawler/splitter/) ----------------------------------------------------

def split_owners(urls: list[str], memo: dict[str, int], resolve: Callable[[str, str], int], me: int, start: int,
                 counts: list[int], /) -> tuple[list[int], list[int], list[int] | None, list[str] | None]:
    """(owners, cross, keep, keep_urls): the splitter's per-page pass (crawler/splitter/owner_pass.py)."""

"""One-pass cache algorithms: every cache size from one look at the trace.

LRU, STATIC and INFINITE are *stack algorithms* (Mattson, Gecsei, Slutz &
Traiger 1970): for each request there is a depth such that the request hits
in every cache at least that large and misses in every smaller one. So one
pass that finds each request's depth gives the misses of all sizes at once:
misses(k) = #{requests with depth > k}. Depths here are 1-based and
`COLD` (larger than any size) marks a request that misses at every size.

- LRU: the depth is the stack distance, 1 + the number of distinct
  fingerprints requested since the previous request of the same one. It is
  an offline 2-d dominance count (`lru_depths_numpy`), done in numpy with a
  wavelet matrix: O(n log n) work in about log2(n) vectorized passes. When
  numba is installed, a compiled Fenwick-tree twin (_jit) gives the same
  depths about ten times faster.
- STATIC (pre-loaded with the k most frequent fingerprints of the trace
  itself): the depth is 1 + the fingerprint's frequency rank, in the order
  of crawler.cache.static.top_k (`frequency_ranks`).
- INFINITE: the first request of a fingerprint is COLD, every other is 1.

MIN is a stack algorithm too, but its depths need a priority stack that is
O(n x depth); instead `min_hits` runs the crawler's own Belady simulation
(crawler.cache.min, compiled) once per size on shared next-use times, which
measured faster, and `min_saturation` gives the size from which MIN provably
only has cold misses, so those sizes need no simulation.

The hot paths here are whole-array numpy passes; nothing loops per request
in Python.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from crawler._native import NATIVE
from crawler.cache import min as min_policy
from crawler.cache.clock_sets import WAYS as CLOCK_SETS_WAYS

# Depth of a request that misses in a cache of any size.
COLD = np.iinfo(np.int64).max
_U64 = np.uint64
_FMIX_C1 = _U64(0xFF51AFD7ED558CCD)
_FMIX_C2 = _U64(0xC4CEB9FE1A85EC53)
_FMIX_SHIFT = _U64(33)
_INT32_LIMIT = 2**31 - 2   # positions (and n + 1) must fit an int32 to use int32 arrays


def fmix64_array(fps: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer on an array: a bijection, so equal outputs mean equal inputs."""
    x = np.array(fps, dtype=_U64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> _FMIX_SHIFT
        x *= _FMIX_C1
        x ^= x >> _FMIX_SHIFT
        x *= _FMIX_C2
        x ^= x >> _FMIX_SHIFT
    return x


def grouped_order(trace: np.ndarray, position_bits: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(order, mixed): request indices grouped by fingerprint, ascending inside each group,
    and the mixed fingerprints `fmix64(trace)[order]` (equal neighbours = same fingerprint).

    The same grouping as a stable argsort, but built on numpy's (much faster)
    plain sort: each request becomes one uint64 key, the top bits of its mixed
    fingerprint above its position. Fingerprints whose top bits collide are
    regrouped exactly with a lexsort of just those requests. `position_bits`
    (default: enough for len(trace)) exists so tests can force collisions.
    """
    n = len(trace)
    if n == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=_U64)
    bits = max(1, (n - 1).bit_length()) if position_bits is None else position_bits
    if (1 << bits) < n or bits >= 64:
        raise ValueError(f"position_bits={bits} cannot number {n} requests")
    shift = _U64(bits)
    mixed = fmix64_array(trace)
    key = (mixed >> shift) << shift
    key |= np.arange(n, dtype=_U64)
    key.sort()
    order = (key & _U64((1 << bits) - 1)).astype(np.int64)
    top = key >> shift
    del key
    grouped = mixed[order]
    same_top = top[1:] == top[:-1]
    collided = same_top & (grouped[1:] != grouped[:-1])
    if collided.any():
        run = np.concatenate(([0], np.cumsum(~same_top)))
        idx = np.flatnonzero(np.isin(run, run[1:][collided]))
        fix = np.lexsort((order[idx], grouped[idx]))
        order[idx] = order[idx][fix]
        grouped[idx] = grouped[idx][fix]
    return order, grouped


def next_use(trace: np.ndarray) -> np.ndarray:
    """For each request, the index of the next request of the same fingerprint, or len(trace).

    Identical to crawler.cache.min.next_use (tests pin it), only faster.
    """
    return next_use_from_groups(*grouped_order(trace))


def next_use_from_groups(order: np.ndarray, grouped: np.ndarray) -> np.ndarray:
    """next_use from grouped_order's result."""
    n = len(order)
    result = np.full(n, n, dtype=np.int64)
    same = grouped[1:] == grouped[:-1]
    result[order[:-1][same]] = order[1:][same]
    return result


def distinct_mixed(grouped: np.ndarray) -> np.ndarray:
    """The distinct mixed fingerprints, from grouped_order's second result."""
    if len(grouped) == 0:
        return grouped
    return grouped[np.concatenate(([True], grouped[1:] != grouped[:-1]))]


def fastrange_array(mixed: np.ndarray, n: int) -> np.ndarray:
    """floor(mixed * n / 2**64) for n < 2**32, exactly (crawler.cache._mix.fastrange on an array)."""
    if not 1 <= n < (1 << 32):
        raise ValueError("fastrange_array needs 1 <= n < 2**32")
    count = _U64(n)
    high = (mixed >> _U64(32)) * count
    low = ((mixed & _U64(0xFFFFFFFF)) * count) >> _U64(32)
    return ((high + low) >> _U64(32)).astype(np.int64)


def clock_sets_never_evicts(mixed: np.ndarray, capacity: int, ways: int = CLOCK_SETS_WAYS) -> bool:
    """True when a crawler.cache CLOCK-SETS cache of `capacity` entries never evicts on a
    stream with these distinct mixed fingerprints (`distinct_mixed`), so its only
    misses are the first requests.

    It follows the set geometry of crawler.cache.clock_sets (docs/caches.md):
    nsets = ceil(capacity / ways), fingerprint to set fastrange(fmix64(fp), nsets),
    set b holding base + (b < extra) entries with base, extra = divmod(capacity,
    nsets). It never evicts iff no set is asked to hold more than that. Tests
    compare the answer with the cache itself, so a change of geometry shows.
    """
    if len(mixed) > capacity:
        return False
    nsets = -(-capacity // ways)
    base, extra = divmod(capacity, nsets)
    counts = np.bincount(fastrange_array(mixed, nsets), minlength=nsets)
    return bool((counts[:extra] <= base + 1).all() and (counts[extra:] <= base).all())


def cold_requests(next_uses: np.ndarray) -> np.ndarray:
    """True for each request that is the first of its fingerprint (a miss at every size)."""
    n = len(next_uses)
    first = np.ones(n, dtype=bool)
    first[next_uses[next_uses < n]] = False
    return first


def _index_dtype(n: int) -> np.dtype[np.signedinteger[Any]]:
    return np.dtype(np.int32) if n <= _INT32_LIMIT else np.dtype(np.int64)


ENGINES = ("auto", "numpy", "numba")


def lru_depths(next_uses: np.ndarray, engine: str = "auto") -> np.ndarray:
    """LRU stack distance of every request (1 = the most recent fingerprint), COLD for first requests.

    `engine`: "numpy" (lru_depths_numpy, always available), "numba" (the
    compiled twin in _jit, when numba is installed) or "auto" (numba if
    available). Both give identical depths; tests pin it.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    if engine != "numpy":
        from crawler.replay import _jit

        if _jit.AVAILABLE:
            return _jit.lru_depths(next_uses, COLD)
        if engine == "numba":
            raise RuntimeError("engine 'numba' asked for, but numba is not installed "
                               f"(or {_jit.PURE_NUMPY_ENV} is set)")
    return lru_depths_numpy(next_uses)


def lru_depths_numpy(next_uses: np.ndarray) -> np.ndarray:
    """LRU stack distances in pure numpy (see lru_depths).

    For request t whose fingerprint was last asked at p, the distance is
    1 + #{s in (p, t): next_use[s] > t} (the fingerprints whose last request
    before t lies in between). With D(t) = distinct fingerprints before t,
    that is D(t) - #{s <= p: next_use[s] > t}, an offline dominance count:
    requests never asked again (next_use = n) count by a prefix sum, the
    others by `_count_above`. An immediate repeat (p = t - 1) is 1.
    """
    n = len(next_uses)
    depths = np.full(n, COLD, dtype=np.int64)
    if n == 0:
        return depths
    idx = _index_dtype(n + 1)
    values = next_uses.astype(idx)
    reused = values < n
    prev = np.full(n, -1, dtype=idx)
    prev[values[reused]] = np.flatnonzero(reused).astype(idx)
    first = prev < 0
    distinct_before = np.cumsum(first, dtype=idx)
    distinct_before -= first
    times = np.flatnonzero(~first).astype(idx)
    del first
    before = prev[times]
    del prev
    immediate = before == times - 1
    depths[times[immediate]] = 1
    times, before = times[~immediate], before[~immediate]
    if len(times) == 0:
        return depths
    never_upto = np.cumsum(~reused, dtype=idx)         # requests never asked again, in [0, i]
    reused_upto = np.cumsum(reused, dtype=idx)         # the others: the prefix length among them
    points = values[reused]
    del values, reused
    above = never_upto[before].astype(np.int64)
    above += _count_above(points, times, reused_upto[before])
    depths[times] = distinct_before[times] - above
    return depths


def _count_above(values: np.ndarray, thresholds: np.ndarray, prefix_end: np.ndarray) -> np.ndarray:
    """#{s < prefix_end[i]: values[s] > thresholds[i]} for every i (thresholds ascending).

    A wavelet matrix over `values`, most significant bit first. A query's
    range [lo, hi) starts as [0, prefix_end). At bit b the level's values are
    split stably into those with bit b = 0 (first) and = 1, and rank0[i]
    counts the zeros before i. If the threshold's bit b is 0, every value in
    range with bit 1 is above it: count them and follow the zeros; if it is
    1, follow the ones. Queries that agree on the threshold's leading bits
    share `lo`, so lo lives in a table indexed by that prefix (read in order,
    because the thresholds are ascending) and only `hi` is gathered per
    query. Hot path: about 20 whole-array numpy passes per level, log2(n)
    levels, nothing per element in Python.
    """
    n, m = len(values), len(thresholds)
    idx = values.dtype.type
    cur = values.copy()
    nxt = np.empty_like(cur)
    positions = np.arange(n, dtype=idx)
    rank0 = np.zeros(n + 1, dtype=idx)
    zero = np.empty(n, dtype=bool)
    tmp = np.empty(n, dtype=idx)
    tmp2 = np.empty(n, dtype=idx)
    hi = np.ascontiguousarray(prefix_end, dtype=idx)
    rank_hi = np.empty(m, dtype=idx)
    ones_hi = np.empty(m, dtype=idx)
    q_tmp = np.empty(m, dtype=idx)
    q_one = np.empty(m, dtype=bool)
    q_zero = np.empty(m, dtype=bool)
    counted = np.zeros(m, dtype=idx)
    lo_table = np.zeros(1, dtype=idx)           # lo for each prefix of the thresholds' bits
    top = max(int(values.max()) if n else 0, int(thresholds.max()))
    for b in range(max(1, top.bit_length()) - 1, -1, -1):
        one = idx(1) << idx(b)
        np.bitwise_and(cur, one, out=tmp)
        np.equal(tmp, 0, out=zero)
        np.cumsum(zero, out=rank0[1:])
        zeros = rank0[-1]
        # Stable partition: a zero goes to rank0[i], a one to zeros + (i - rank0[i]).
        below = rank0[:-1]
        np.subtract(positions, below, out=tmp)
        tmp += zeros
        np.subtract(tmp, below, out=tmp2)
        tmp2 *= zero
        tmp -= tmp2
        nxt[tmp] = cur
        # Queries.
        lo = lo_table[thresholds >> idx(b + 1)]
        ones_lo = lo - rank0[lo]
        np.take(rank0, hi, out=rank_hi)
        np.bitwise_and(thresholds, one, out=q_tmp)
        np.not_equal(q_tmp, 0, out=q_one)
        np.logical_not(q_one, out=q_zero)
        np.subtract(hi, rank_hi, out=ones_hi)            # ones before hi
        np.subtract(ones_hi, ones_lo, out=q_tmp)         # ones in [lo, hi)
        q_tmp *= q_zero
        counted += q_tmp
        ones_hi += zeros                                 # hi among the ones ...
        ones_hi -= rank_hi
        ones_hi *= q_one
        np.add(rank_hi, ones_hi, out=hi)                 # ... or among the zeros
        rank_lo = rank0[lo_table]
        new_table = np.empty(2 * len(lo_table), dtype=idx)
        new_table[0::2] = rank_lo
        new_table[1::2] = zeros + lo_table - rank_lo
        lo_table = new_table
        cur, nxt = nxt, cur
    return counted.astype(np.int64)


def frequency_ranks(trace: np.ndarray) -> np.ndarray:
    """0-based rank of each request's fingerprint by frequency in the trace, in
    crawler.cache.static.top_k order (most frequent first, ties by smaller value):
    a STATIC cache pre-loaded with top_k(trace, k) hits exactly the requests of rank < k."""
    n = len(trace)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    order, grouped = grouped_order(trace)
    starts = np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1])))
    counts = np.diff(np.append(starts, n))
    values = np.asarray(trace)[order[starts]]
    rank_of_group = np.empty(len(starts), dtype=np.int64)
    rank_of_group[np.lexsort((values, -counts))] = np.arange(len(starts))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.repeat(rank_of_group, counts)
    return ranks


def static_depths(trace: np.ndarray) -> np.ndarray:
    """STATIC's depth per request: 1 + frequency rank (the paper's pre-load, not charged)."""
    return frequency_ranks(trace) + 1


def infinite_depths(next_uses: np.ndarray) -> np.ndarray:
    """INFINITE's depth per request: COLD for a fingerprint's first request, else 1."""
    return np.where(cold_requests(next_uses), COLD, 1).astype(np.int64)


def min_hits(next_uses: np.ndarray, capacity: int) -> np.ndarray:
    """MIN's hit (True) per request at one capacity: crawler.cache.min's Belady
    simulation (the compiled kernel when built), given the next-use times."""
    uses = np.ascontiguousarray(next_uses, dtype=np.int64)
    if NATIVE is None:
        return min_policy.belady_hits_py(uses, capacity)
    out = np.zeros(len(uses), dtype=bool)
    NATIVE.belady(uses, capacity, out)
    return out


def min_saturation(next_uses: np.ndarray) -> int:
    """A size from which MIN misses only first requests.

    At a miss at time t the cache holds at most L(t) fingerprints that are
    asked again after t, L(t) = #{s < t: t < next_use[s] < n}. With capacity
    > max L, a full cache always holds one fingerprint never asked again,
    which MIN evicts first, so no later request misses.
    """
    n = len(next_uses)
    if n == 0:
        return 1
    reused = next_uses < n
    delta = np.zeros(n + 1, dtype=np.int64)
    delta[1:][reused] += 1                   # live from s + 1 ...
    delta[next_uses[reused]] -= 1            # ... to its next use (next-use times are all distinct)
    live = np.cumsum(delta[:n])
    return int(live.max()) + 1


def misses_by_size(depths: np.ndarray, sizes: np.ndarray, window: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray | None]:
    """(misses per size, misses per size and window) from per-request depths.

    A request misses at size k when its depth exceeds k. `sizes` must be
    ascending; windows are `window` consecutive requests (the last may be short).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    count = len(sizes)
    # bucket = number of sizes below the depth = the sizes at which the request misses.
    bucket = np.searchsorted(sizes, depths, side="left")
    hist = np.bincount(bucket, minlength=count + 1)
    totals = np.cumsum(hist[::-1])[::-1][1:]
    if window is None:
        return totals.astype(np.int64), None
    n_windows = -(-len(depths) // window)
    win = np.arange(len(depths), dtype=np.int64) // window
    grid = np.bincount(win * (count + 1) + bucket, minlength=n_windows * (count + 1)).reshape(n_windows, count + 1)
    per_window = np.cumsum(grid[:, ::-1], axis=1)[:, ::-1][:, 1:]
    return totals.astype(np.int64), np.ascontiguousarray(per_window.T, dtype=np.int64)


def window_misses(hits: np.ndarray, window: int) -> np.ndarray:
    """Misses in each window of `window` consecutive requests."""
    n_windows = -(-len(hits) // window)
    return np.bincount(np.flatnonzero(~hits) // window, minlength=n_windows).astype(np.int64)

"""SIEVE, S3-FIFO, ARC, 2Q and W-TinyLFU pinned against plain models of their papers (hypothesis).

For each policy: the per-request hits equal the model's (modern_cache_models)
on random traces and on traces with locality (recent repeats, runs, a hot
set), batches equal single calls, the cache never holds more than its
capacity, and Belady's MIN of the same capacity misses no more.

Why MIN bounds all five. MIN is optimal among demand-paging policies: every
miss brings the requested key in, and at most `capacity` keys are held. All
five do that; W-TinyLFU included, because a new key always enters its window
and the admission filter only decides which of two resident keys leaves (the
window's victim or the main region's), which is an eviction choice. A policy
that may bypass the cache on a miss (TinyLFU admission in front of the
whole cache, without a window) is not bounded by this MIN; MIN with bypass
allowed is its floor. STATIC, which starts full, is not bounded either
(tests/property/test_cache_properties.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.property.modern_cache_models import (
    arc_model,
    s3fifo_model,
    sieve_model,
    twoq_model,
    wtinylfu_model,
)

from crawler.cache import make_cache
from crawler.cache._mix import MASK64

# 60 examples a policy and property: the planted bugs (a SIEVE hand reset, an S3-FIFO threshold, a 2Q bound)
# were each caught within the first few dozen; more only lengthens the suite.
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MODELS: dict[str, Callable[[list[int], int], list[bool]]] = {
    "sieve": sieve_model,
    "s3fifo": s3fifo_model,
    "arc": arc_model,
    "2q": twoq_model,
    "wtinylfu": wtinylfu_model,
}
POLICIES = sorted(MODELS)
capacities = st.integers(1, 24)


# --- inputs ----------------------------------------------------------------------

@st.composite
def random_traces(draw, max_len: int = 150) -> list[int]:
    """Uniform picks from a small pool that mixes small ints, 0, 2**64 - 1 and arbitrary 64-bit values."""
    pool = draw(st.lists(st.one_of(st.integers(0, 60), st.sampled_from([0, 1, MASK64, MASK64 - 1]),
                                   st.integers(0, MASK64)), min_size=1, max_size=60, unique=True))
    n = draw(st.integers(0, max_len))  # the length drawn first: hypothesis's own lists are mostly short
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=n, max_size=n))
    return [pool[i] for i in picks]


@st.composite
def locality_traces(draw, max_len: int = 150) -> list[int]:
    """New keys, repeats of a recent key, runs of one key, and picks from a hot set, mixed."""
    n = draw(st.integers(0, max_len))
    steps = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40)), min_size=n, max_size=n))
    fresh = draw(st.integers(1000, MASK64 - 1000))
    trace: list[int] = []
    for kind, n in steps:
        if kind == 0 or not trace:  # a key never asked before
            trace.append(fresh)
            fresh += 1
        elif kind == 1:  # a recent key, up to 40 requests back
            trace.append(trace[-1 - n % len(trace)])
        elif kind == 2:  # a run of the last key
            trace.extend([trace[-1]] * (1 + n % 4))
        else:  # a popular key
            trace.append(n % 6)
    return trace


traces = st.one_of(random_traces(), locality_traces())


@st.composite
def batch_splits(draw, trace: list[int]) -> list[list[int]]:
    cuts = sorted(draw(st.lists(st.integers(0, len(trace)), max_size=6)))
    edges = [0, *cuts, len(trace)]
    return [trace[a:b] for a, b in zip(edges, edges[1:])]


def run_batches(cache, batches: list[list[int]]) -> list[bool]:
    out: list[bool] = []
    for batch in batches:
        out += cache.check_and_add_many(np.array(batch, dtype=np.uint64)).tolist()
    return out


# --- properties --------------------------------------------------------------------

@pytest.mark.parametrize("policy", POLICIES)
@SETTINGS
@given(trace=traces, capacity=capacities)
def test_matches_the_papers_model(policy, trace, capacity):
    cache = make_cache(policy, capacity)
    assert [cache.check_and_add(fp) for fp in trace] == MODELS[policy](trace, capacity)
    assert cache.hits + cache.misses == len(trace)


@pytest.mark.parametrize("policy", POLICIES)
@SETTINGS
@given(trace=traces, capacity=st.integers(1, 12))
def test_every_miss_inserts_within_capacity(policy, trace, capacity):
    cache = make_cache(policy, capacity)
    for fp in trace:
        cache.check_and_add(fp)
        keys = cache.keys()
        assert fp in keys, "the requested key is resident after every request"
        assert len(keys) == len(set(keys)) == cache.size <= capacity


@pytest.mark.parametrize("policy", POLICIES)
@SETTINGS
@given(data=st.data(), trace=traces, capacity=capacities)
def test_batches_equal_sequential_calls(policy, data, trace, capacity):
    batches = data.draw(batch_splits(trace))
    one, many = make_cache(policy, capacity), make_cache(policy, capacity)
    assert run_batches(many, batches) == [one.check_and_add(fp) for fp in trace]
    assert (one.hits, one.misses, one.size, one.keys()) == (many.hits, many.misses, many.size, many.keys())


@pytest.mark.parametrize("policy", POLICIES)
@SETTINGS
@given(trace=traces, capacity=st.integers(1, 16))
def test_min_bounds_the_misses(policy, trace, capacity):
    arr = np.array(trace, dtype=np.uint64)
    floor = make_cache("min", capacity, trace=arr)
    floor.check_and_add_many(arr)
    cache = make_cache(policy, capacity)
    cache.check_and_add_many(arr)
    assert floor.misses <= cache.misses


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1), capacity=st.integers(90, 260), distinct=st.integers(100, 500))
def test_matches_the_model_at_capacities_with_wider_segments(policy, seed, capacity, distinct):
    """Capacities past 100 give W-TinyLFU a window of 2-3 entries and the others wide segments; traces of
    a few thousand requests, skewed, drawn from a seeded generator (too long for hypothesis to shrink)."""
    rng = np.random.default_rng(seed)
    trace = (rng.zipf(1.3, size=3000) % distinct).tolist()
    cache = make_cache(policy, capacity)
    assert cache.check_and_add_many(np.array(trace, dtype=np.uint64)).tolist() == MODELS[policy](trace, capacity)

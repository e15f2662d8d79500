"""DiskDUE against a set-based model, for any interleaving of submissions,
merges (flush, or start_merge and poll without waiting), prompt lookups
(a submit followed by a peek of its misses) and clean restarts: every
distinct URL comes out exactly once."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.support.due import batch, url_of

from crawler.config.schema import CacheConfig, DueConfig
from crawler.due.disk import DiskDUE
from crawler.due.memory import MemoryDUE

DOMAIN = 60          # distinct URLs an example can draw from: small, so repeats are common


operation = st.one_of(
    st.tuples(st.just("submit"), st.lists(st.integers(0, DOMAIN - 1), max_size=12)),
    st.tuples(st.just("submit+peek"), st.lists(st.integers(0, DOMAIN - 1), max_size=12)),
    st.tuples(st.just("flush"), st.none()),
    st.tuples(st.just("start_merge"), st.none()),
    st.tuples(st.just("poll"), st.none()),
    st.tuples(st.just("restart"), st.none()),
    st.tuples(st.just("checkpoint"), st.none()),
)

layout = st.fixed_dictionaries({
    "buffer_size": st.integers(1, 9),
    "cache_size": st.integers(1, 5),
    "cache_policy": st.sampled_from(["clock", "lru", "random"]),
    "buckets": st.sampled_from([1, 2, 4, 16]),
    "delta_ratio": st.sampled_from([0.0, 0.125, 1.0, 8.0]),
    "background": st.booleans(),
    "window_entries": st.sampled_from([1, 3, 1 << 20]),
})


def make(directory: Path, p: dict) -> DiskDUE:
    cfg = DueConfig(cache=CacheConfig(policy=p["cache_policy"], size=p["cache_size"]), buffer_size=p["buffer_size"])
    return DiskDUE(directory, cfg, buckets=p["buckets"], delta_ratio=p["delta_ratio"],
                   background=p["background"], window_entries=p["window_entries"], journal_fsync_s=None,
                   durable=False)   # fsync is for power loss; these examples test the logic


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=layout, ops=st.lists(operation, max_size=25))
# A synchronous start_merge leaves its new URL waiting to come out: the next one has nothing to start.
@example(p={"buffer_size": 2, "cache_size": 1, "cache_policy": "clock", "buckets": 1, "delta_ratio": 0.0,
            "background": False, "window_entries": 1},
         ops=[("submit", [0]), ("start_merge", None), ("start_merge", None)])
# A peek during a background merge of the same URL: the merge's release marker must drop it too.
@example(p={"buffer_size": 4, "cache_size": 1, "cache_policy": "clock", "buckets": 1, "delta_ratio": 0.0,
            "background": True, "window_entries": 1},
         ops=[("submit", [0, 1]), ("submit+peek", [0]), ("restart", None), ("submit", [])])
def test_every_distinct_url_comes_out_exactly_once(p: dict, ops: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        due = make(directory, p)
        submitted: set[str] = set()
        emitted: list[str] = []
        try:
            for op, arg in ops:
                if op == "submit":
                    emitted += due.submit(*batch(arg))
                    submitted |= {url_of(i) for i in arg}
                elif op == "submit+peek":
                    start = due.buffered
                    emitted += due.submit(*batch(arg))
                    submitted |= {url_of(i) for i in arg}
                    peeked = due.peek(start)
                    assert set(peeked) <= {url_of(i) for i in arg}
                    emitted += peeked
                elif op == "flush":
                    emitted += due.flush()
                    assert due.pending == 0
                elif op == "start_merge":
                    started = due.start_merge()
                    # Not started: nothing buffered (new URLs waiting to come out do not count) or
                    # a merge still running.
                    assert started or due.merging or due.stats()["buffer"] == 0
                elif op == "poll":
                    emitted += due.poll()
                elif op == "checkpoint":
                    due.checkpoint()
                else:
                    due.close()
                    due = make(directory, p)
                assert len(emitted) == len(set(emitted)), "a URL came out twice"
                assert set(emitted) <= submitted, "a URL came out that was never submitted"
            emitted += due.flush()
            assert sorted(emitted) == sorted(submitted)
            stats = due.stats()
            assert stats["duplicates_emitted"] == 0
            assert stats["disk_fingerprints"] == len(submitted) == stats["new"]
        finally:
            due.close()


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(st.integers(0, DOMAIN - 1), max_size=12), max_size=20),
       cache_size=st.integers(1, 5), buckets=st.sampled_from([1, 4, 16]))
def test_with_a_one_url_buffer_it_answers_like_the_memory_due(batches: list, cache_size: int, buckets: int) -> None:
    """Buffer of 1, merges in the caller's thread: call for call the same answers as a set."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = DueConfig(cache=CacheConfig(size=cache_size), buffer_size=1)
        disk = DiskDUE(Path(tmp), cfg, buckets=buckets, background=False, journal_fsync_s=None, durable=False)
        model = MemoryDUE()
        try:
            for ids in batches:
                fps, urls = batch(ids)
                assert disk.submit(fps, urls) == model.submit(fps, urls)
                assert disk.pending == 0
        finally:
            disk.close()

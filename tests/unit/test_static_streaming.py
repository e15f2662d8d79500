"""STATIC out of core: the table of each stream's most frequent fingerprints, built from hash buckets, and
the one-pass run over it equal the in-memory frequency ranks (stack.static_depths), ties included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.replay import locality_trace

from crawler.replay import stack, static_streaming
from crawler.replay.chunks import open_sources
from crawler.replay.static_streaming import StaticRun, build_static_table
from crawler.replay.streaming import _Windows


def streamed_static(tmp_path, trace: np.ndarray, sizes: np.ndarray, window: int | None, *, chunk: int,
                    bucket_requests: int) -> tuple[np.ndarray, np.ndarray | None]:
    path = tmp_path / "t.npy"
    np.save(path, trace)
    (source,) = open_sources([path])
    table = build_static_table(source, "full", tmp_path, chunk, int(sizes[-1]), bucket_requests=bucket_requests)
    run = StaticRun(sizes, table, None if window is None else _Windows(len(sizes), window))
    for start in range(0, len(trace), chunk):
        run.feed(trace[start:start + chunk], start)
    return run.misses(), None if run.windows is None else run.windows.trimmed(len(trace))


@pytest.mark.parametrize(("bucket_requests", "chunk", "count_requests"),
                         [(50, 13, 7), (1000, 1000, 1 << 24), (1 << 24, 97, 64)])
def test_static_out_of_core_equals_the_in_memory_ranks(tmp_path, monkeypatch, bucket_requests, chunk,
                                                         count_requests):
    monkeypatch.setattr(static_streaming, "COUNT_REQUESTS", count_requests)   # buckets counted in parts
    trace = np.concatenate([locality_trace(3000, 4), np.full(300, 7, dtype=np.uint64),
                            np.repeat(np.arange(100, 160, dtype=np.uint64), 3)])       # many ties
    sizes = np.array([1, 2, 5, 17, 64, 300], dtype=np.int64)        # the largest below the distinct count
    assert len(np.unique(trace)) > sizes[-1]
    misses, windows = streamed_static(tmp_path, trace, sizes, 250, chunk=chunk, bucket_requests=bucket_requests)
    want, want_windows = stack.misses_by_size(stack.static_depths(trace), sizes, 250)
    assert misses.tolist() == want.tolist()
    assert windows.tolist() == want_windows.tolist()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("static-table-")) == ["t.npy"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=st.lists(st.integers(0, 40), min_size=0, max_size=400),
       largest=st.integers(1, 60), chunk=st.integers(1, 64), bucket_requests=st.integers(1, 200))
def test_static_out_of_core_on_random_traces(tmp_path_factory, trace, largest, chunk, bucket_requests):
    tmp = tmp_path_factory.mktemp("static")
    arr = np.array(trace, dtype=np.uint64)
    sizes = np.unique(np.array([1, max(1, largest // 3), largest], dtype=np.int64))
    misses, _ = streamed_static(tmp, arr, sizes, None, chunk=chunk, bucket_requests=bucket_requests)
    want, _ = stack.misses_by_size(stack.static_depths(arr), sizes)
    assert misses.tolist() == want.tolist()

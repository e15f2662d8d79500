"""MIN out of core (crawler/replay/min_streaming.py): next uses built through bucket files equal the
in-memory sort's, the chunk-fed BeladyKernel (compiled and twin) equals belady() and a plain MIN, its
memory does not grow with the trace, and the streaming replay's MIN equals the in-memory replay's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.replay import locality_trace, min_misses, write_node_log

from crawler._native import NATIVE
from crawler.replay import ReplayOptions, stack
from crawler.replay.chunks import open_sources
from crawler.replay.min_streaming import (
    MinRun,
    NextUseReader,
    PyBelady,
    PyNextUse,
    bucket_count,
    build_next_use,
)
from crawler.replay.simulate import replay
from crawler.replay.streaming import replay_streaming
from crawler.replay.synthetic import ModelParams, SyntheticTrace
from crawler.replay.traces import load_streams

needs_compiled = pytest.mark.skipif(NATIVE is None, reason="the compiled extension is not built")
BELADY = [pytest.param(PyBelady, id="twin"),
          pytest.param(getattr(NATIVE, "BeladyKernel", None), id="compiled", marks=needs_compiled)]
NEXT_USE = [pytest.param(PyNextUse, id="twin"),
            pytest.param(getattr(NATIVE, "NextUseKernel", None), id="compiled", marks=needs_compiled)]


def paper_trace(n: int, threads: int = 8, seed: int = 2) -> np.ndarray:
    params = ModelParams(threads=threads, global_urls=256, alpha=0.2, beta=0.6, seed=seed, requests=n)
    return np.concatenate([b.fps for b in SyntheticTrace(params).blocks(1 << 12)]).astype(np.uint64)


def fed_in_chunks(kernel_type, next_use: np.ndarray, capacity: int, cuts: list[int]) -> np.ndarray:
    kernel = kernel_type(capacity, max(1, len(next_use)))
    hits = np.empty(len(next_use), dtype=np.uint8)
    bounds = [0, *sorted(c % (len(next_use) + 1) for c in cuts), len(next_use)]
    for a, b in zip(bounds, bounds[1:]):
        if b > a:
            kernel.hits(next_use[a:b], hits[a:b])
    assert kernel.requests == len(next_use) and kernel.misses == int((hits == 0).sum())
    return hits


@pytest.mark.parametrize("kernel_type", BELADY)
@settings(max_examples=60, deadline=None)
@given(trace=st.lists(st.integers(0, 30), min_size=1, max_size=300), capacity=st.integers(1, 40),
       cuts=st.lists(st.integers(0, 300), max_size=5))
def test_chunk_fed_min_equals_belady_and_a_plain_min(kernel_type, trace, capacity, cuts):
    arr = np.array(trace, dtype=np.uint64)
    next_use = stack.next_use(arr)
    hits = fed_in_chunks(kernel_type, next_use, capacity, cuts)
    assert hits.astype(bool).tolist() == stack.min_hits(next_use, capacity).astype(bool).tolist()
    assert int((hits == 0).sum()) == min_misses(trace, capacity)


@pytest.mark.parametrize("kernel_type", BELADY)
@pytest.mark.parametrize("capacity", [1, 3, 64, 1000, 1 << 16])
def test_chunk_fed_min_on_the_papers_model_and_a_locality_trace(kernel_type, capacity):
    for arr in (paper_trace(6000 if kernel_type is PyBelady else 40_000), locality_trace(20_000, 9)):
        next_use = stack.next_use(arr)
        hits = fed_in_chunks(kernel_type, next_use, capacity, [17, 1000, 1001, 15_000])
        assert hits.astype(bool).tolist() == stack.min_hits(next_use, capacity).astype(bool).tolist()


@needs_compiled
def test_min_memory_is_its_capacity_not_the_trace_length():
    short, long = NATIVE.BeladyKernel(1000, 10**4), NATIVE.BeladyKernel(1000, 10**15)
    assert short.buffer_bytes == long.buffer_bytes <= 1000 * 40
    assert NATIVE.BeladyKernel(10**6, 10**3).buffer_bytes < 10**3 * 40     # never more than the trace holds


@pytest.mark.parametrize("kernel_type", BELADY)
def test_feeding_past_the_trace_length_is_refused(kernel_type):
    kernel = kernel_type(4, 3)
    with pytest.raises(ValueError, match="more than never"):
        kernel.hits(np.array([3, 3, 3, 3], dtype=np.int64), np.empty(4, dtype=np.uint8))


@pytest.mark.parametrize("kernel_type", NEXT_USE)
@settings(max_examples=60, deadline=None)
@given(trace=st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 9), max_size=200),
       chunk=st.integers(1, 50))
def test_next_uses_fed_backwards_equal_the_sort(kernel_type, trace, chunk):
    arr = np.array(trace, dtype=np.uint64)
    kernel = kernel_type(len(arr))
    out = np.empty(len(arr), dtype=np.int64)
    positions = np.arange(len(arr), dtype=np.int64)
    for end in range(len(arr), 0, -chunk):
        start = max(0, end - chunk)
        kernel.back(arr[start:end], positions[start:end], out[start:end])
    assert out.tolist() == stack.next_use(arr).tolist()
    assert kernel.size == len(set(trace))


@pytest.mark.parametrize(("bucket_requests", "chunk"), [(50, 13), (1000, 1), (1000, 4096), (1 << 24, 97)])
def test_out_of_core_next_uses_equal_the_in_memory_sort(tmp_path, bucket_requests, chunk):
    arr = np.concatenate([locality_trace(3000, 4), np.full(500, 7, dtype=np.uint64), paper_trace(2000)])
    np.save(tmp_path / "t.npy", arr)
    (source,) = open_sources([tmp_path / "t.npy"])
    built = build_next_use(source, "full", tmp_path, chunk, bucket_requests=bucket_requests)
    assert built.requests == len(arr)
    assert np.fromfile(built.path, dtype=np.int64).tolist() == stack.next_use(arr).tolist()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["t.npy", built.path.name])   # buckets removed
    assert bucket_count(len(arr), bucket_requests) == -(-len(arr) // bucket_requests)


def test_out_of_core_next_uses_of_a_logs_cross_trace(tmp_path):
    rng = np.random.default_rng(5)
    trace = locality_trace(4000, 12)
    cuts = np.cumsum(rng.integers(1, 40, size=400))
    pages = [p for p in np.split(trace, cuts[cuts < len(trace)]) if len(p)]
    write_node_log(tmp_path / "logs", 0, pages, rotate_bytes=9_000)
    (source,) = open_sources([tmp_path / "logs"])
    (stream,) = load_streams([tmp_path / "logs"])
    cross = stream.trace("cross")
    assert 0 < len(cross) < len(trace)
    built = build_next_use(source, "cross", tmp_path, 257, bucket_requests=300)
    reader = NextUseReader(built)
    run = MinRun(32, reader)
    for start in range(0, len(cross), 500):
        run.feed(cross[start:start + 500], start)
    reader.close()
    assert np.fromfile(built.path, dtype=np.int64).tolist() == stack.next_use(cross).tolist()
    assert int(run.misses()[0]) == min_misses(cross.tolist(), 32)


def test_streaming_replay_min_equals_the_in_memory_replay(tmp_path):
    for node in range(2):
        trace = paper_trace(5000, seed=node + 1)
        write_node_log(tmp_path / f"node-{node}", node, np.array_split(trace, 700), rotate_bytes=15_000)
    options = ReplayOptions(policies=("min", "lru"), sizes=(1, 4, 32, 256, 4096), window=900,
                            spill_dir=str(tmp_path / "spill"), engine="numpy")
    (tmp_path / "spill").mkdir()
    memory = replay(load_streams([tmp_path]), options)
    for jobs in (1, 2):
        streamed = replay_streaming(open_sources([tmp_path]), ReplayOptions(**{**options.__dict__, "jobs": jobs}),
                                    chunk_requests=611)
        for key in (("full", "min"), ("cross", "min")):
            assert streamed.tallies[key].misses.tolist() == memory.tallies[key].misses.tolist(), (jobs, key)
            assert streamed.tallies[key].windows.tolist() == memory.tallies[key].windows.tolist(), (jobs, key)
        assert list((tmp_path / "spill").iterdir()) == []

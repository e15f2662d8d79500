"""crawler.replay.traces: splitter logs written by the real StreamLog, and .npy arrays."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.replay import NODES, write_node_log

from crawler.replay.traces import InputError, find_inputs, load_streams
from crawler.splitter.streamlog import FLAG_CACHE_HIT, FLAG_CROSS, RECORD


def pages(seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 500, size=int(rng.integers(1, 60))).astype(np.uint64) for _ in range(count)]


def test_each_node_is_one_stream_with_its_files_in_sequence_order(tmp_path):
    expected = {}
    for node in range(NODES):
        # A tiny rotation size makes every page start a new file: many files per node.
        expected[node] = write_node_log(tmp_path / f"node-{node}" / "splitter-log", node, pages(node, 40), 200)
    files = sorted(tmp_path.rglob("splitter-0-*.log"))
    assert len(files) > 10
    streams = load_streams([tmp_path])
    assert [s.name for s in streams] == ["node-0", "node-1", "node-2"]
    for stream in streams:
        rec = expected[stream.node]
        assert stream.node_count == NODES
        assert list(stream.files) == sorted(stream.files, key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        assert np.array_equal(stream.trace("full"), rec["fp"])
        cross = (rec["flags"] & FLAG_CROSS) != 0
        assert np.array_equal(stream.trace("cross"), rec["fp"][cross])
        assert np.all(rec["dest"][cross] != stream.node)
        assert stream.logged_cache_hits("cross") == int(((rec["flags"] & FLAG_CACHE_HIT) != 0).sum())
        assert stream.logged_cache_hits("full") == stream.logged_cache_hits("cross")
        assert stream.trace("full").dtype == np.uint64 and stream.trace("full").flags.c_contiguous


def test_sequence_numbers_sort_as_numbers(tmp_path):
    log_dir = tmp_path / "splitter-log"
    first = write_node_log(log_dir, 1, pages(5, 3))
    (log_dir / "splitter-1-00000.log").rename(log_dir / "splitter-1-99999.log")
    second = write_node_log(log_dir, 1, pages(6, 3))         # continues at 100000
    assert (log_dir / "splitter-1-100000.log").exists()
    (stream,) = load_streams([log_dir])
    assert np.array_equal(stream.fps, np.concatenate([first["fp"], second["fp"]]))


def test_files_named_one_by_one_and_duplicates(tmp_path):
    write_node_log(tmp_path, 2, pages(1, 5))
    (path,) = sorted(tmp_path.glob("*.log"))
    (stream,) = load_streams([path, path, tmp_path])
    assert stream.files == (path,)


def test_plain_and_structured_npy_arrays(tmp_path):
    fps = np.array([5, 6, 5, 2**64 - 1], dtype=np.uint64)
    np.save(tmp_path / "a.npy", fps)
    np.save(tmp_path / "b.npy", np.array([1, 2, 3], dtype=np.int64))
    rec = np.zeros(3, dtype=RECORD)
    rec["fp"], rec["flags"] = [9, 8, 9], [0, FLAG_CROSS, FLAG_CROSS]
    np.save(tmp_path / "c.npy", rec)
    a, b, c = load_streams([tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "c.npy"])
    assert (a.name, a.node, a.has_flags()) == ("a.npy", None, False)
    assert np.array_equal(a.trace("full"), fps) and len(a.trace("cross")) == 0
    assert a.logged_cache_hits("full") is None
    assert b.trace("full").tolist() == [1, 2, 3] and b.trace("full").dtype == np.uint64
    assert c.has_flags() and c.trace("cross").tolist() == [8, 9]


def test_a_directory_prefers_logs_over_arrays(tmp_path):
    write_node_log(tmp_path / "logs", 0, pages(2, 3))
    np.save(tmp_path / "preload.npy", np.arange(3, dtype=np.uint64))
    logs, arrays = find_inputs([tmp_path])
    assert len(logs) == 1 and arrays == []
    only_arrays = tmp_path / "arrays"
    only_arrays.mkdir()
    np.save(only_arrays / "t.npy", np.arange(3, dtype=np.uint64))
    assert find_inputs([only_arrays]) == ([], [only_arrays / "t.npy"])


def test_same_node_in_two_directories_are_two_streams(tmp_path):
    write_node_log(tmp_path / "crawl-a", 0, pages(1, 2))
    write_node_log(tmp_path / "crawl-b", 0, pages(2, 2))
    streams = load_streams([tmp_path])
    assert len(streams) == 2 and all(s.name.startswith("node-0 (") for s in streams)


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.log", "no such file"),
    (lambda d: _write(d / "x.log", b"hello world, not a log"), "neither a splitter"),
    (lambda d: np.save(d / "m.npy", np.zeros((2, 2), dtype=np.uint64)) or d / "m.npy", "1-d array"),
    (lambda d: np.save(d / "f.npy", np.zeros(3)) or d / "f.npy", "1-d array of uint64"),
    (lambda d: np.save(d / "n.npy", np.array([1, -1])) or d / "n.npy", "negative"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "no splitter-"),
])
def test_unreadable_inputs_name_the_file(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(InputError, match=message) as info:
        load_streams([path])
    assert str(path) in str(info.value)


def test_a_log_of_another_version_is_refused(tmp_path):
    write_node_log(tmp_path, 0, pages(1, 2))
    (path,) = tmp_path.glob("*.log")
    raw = bytearray(path.read_bytes())
    raw[8] = 99                                  # version field
    path.write_bytes(bytes(raw))
    with pytest.raises(InputError, match="version"):
        load_streams([path])


def test_unknown_trace_name():
    from crawler.replay.traces import Stream

    stream = Stream("s", None, (), np.zeros(1, dtype=np.uint64), None)
    with pytest.raises(ValueError, match="unknown trace"):
        stream.trace("local")

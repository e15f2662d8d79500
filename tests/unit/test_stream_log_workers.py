"""The splitter stream log's version 2 (a worker per record), version 1 still read, and replay's
one cache per worker (`--per-worker`) against plain per-worker reference simulations."""

from __future__ import annotations

import asyncio
import csv
import json
import struct

import numpy as np
import pytest
from tests.support.replay import NODES, locality_trace, lru_misses, min_misses, write_node_log

from crawler.config.schema import SplitterConfig
from crawler.replay.cli import main
from crawler.replay.simulate import ReplayOptions, replay
from crawler.replay.traces import InputError, load_streams, per_worker_streams
from crawler.splitter import HostSplitter, Partitioner
from crawler.splitter.streamlog import (
    HEADER_SIZE,
    MAGIC,
    NO_WORKER,
    RECORD,
    RECORD_V1,
    StreamLog,
    read_header,
    read_records,
    record_dtype,
)
from crawler.urls import fingerprints

WORKERS = 4


def write_v1_log(path, node: int, records: np.ndarray) -> None:
    """A version-1 file as the crawler wrote it before workers were logged (12-byte records)."""
    header = struct.pack("<8sHHHHHHd", MAGIC, 1, HEADER_SIZE, RECORD_V1.itemsize, node, NODES, 0, 1.0e9)
    with open(path, "wb") as fh:
        fh.write(header.ljust(HEADER_SIZE, b"\0"))
        fh.write(records.astype(RECORD_V1).tobytes())
        fh.write(b"\1\2\3")                                     # a torn last record: ignored


def v1_records(fps: list[int]) -> np.ndarray:
    rec = np.zeros(len(fps), dtype=RECORD_V1)
    rec["fp"], rec["dest"], rec["flags"] = fps, 1, 1
    return rec


def test_version_2_layout_is_16_bytes_with_the_worker(tmp_path):
    assert RECORD.itemsize == 16 and RECORD_V1.itemsize == 12
    assert RECORD.names == ("fp", "dest", "flags", "worker", "reserved")
    assert record_dtype(2) == RECORD and record_dtype(1) == RECORD_V1
    with pytest.raises(ValueError, match="unsupported stream log version 3"):
        record_dtype(3)
    log = StreamLog(tmp_path, 1, NODES, rotate_bytes=1 << 20)
    log.append(np.array([5, 6], np.uint64), np.array([0, 1], np.uint16), np.array([1, 0], np.uint16), 7)
    log.append(np.array([9], np.uint64), np.array([2], np.uint16), np.array([1], np.uint16))
    log.close()
    (path,) = log.files
    raw = path.read_bytes()
    version, header_size, record_size = struct.unpack_from("<HHH", raw, 8)
    assert (version, header_size, record_size) == (2, 64, 16) and len(raw) == 64 + 3 * 16
    assert read_header(path).version == 2
    rec = read_records(path)
    assert rec.dtype == RECORD
    assert rec["worker"].tolist() == [7, 7, NO_WORKER] and rec["reserved"].tolist() == [0, 0, 0]
    # The bytes outside tools read: worker at offset 12, reserved at 14, little-endian.
    assert struct.unpack_from("<QHHHH", raw, 64) == (5, 0, 1, 7, 0)


def test_version_1_files_still_read_without_workers(tmp_path):
    path = tmp_path / "splitter-1-00000.log"
    write_v1_log(path, 1, v1_records([3, 4, 3]))
    assert read_header(path).version == 1
    rec = read_records(path)
    assert rec.dtype == RECORD_V1 and rec["fp"].tolist() == [3, 4, 3]
    (stream,) = load_streams([tmp_path])
    assert stream.fps.tolist() == [3, 4, 3] and stream.trace("cross").tolist() == [3, 4, 3]
    assert stream.workers is None
    with pytest.raises(InputError, match="--per-worker needs version-2"):
        per_worker_streams([stream])


def test_a_node_with_both_versions_reads_in_order_without_workers(tmp_path):
    """An upgrade mid-crawl: the old files are version 1, the new ones version 2."""
    write_v1_log(tmp_path / "splitter-1-00000.log", 1, v1_records([1, 2]))
    log = StreamLog(tmp_path, 1, NODES, rotate_bytes=1 << 20)      # continues at sequence 1
    log.append(np.array([3], np.uint64), np.array([1], np.uint16), np.array([0], np.uint16), 0)
    log.close()
    (stream,) = load_streams([tmp_path])
    assert stream.fps.tolist() == [1, 2, 3] and stream.flags.tolist() == [1, 1, 0]
    assert stream.workers is None


def test_the_splitter_logs_the_worker_of_the_page(tmp_path):
    async def send(peer, urls):
        pass

    for nodes in (1, 3):                              # one node: the short path; three: the split
        log = StreamLog(tmp_path / str(nodes), 0, nodes, rotate_bytes=1 << 20)
        s = HostSplitter(SplitterConfig(), 0, Partitioner(nodes), None, send, log)
        urls = [f"http://h{i}.test/" for i in range(10)]
        asyncio.run(s.route(urls[:6], fingerprints(urls[:6]), 3))
        asyncio.run(s.route(urls[6:], fingerprints(urls[6:])))
        log.close()
        rec = read_records(log.files[0])
        assert rec["worker"].tolist() == [3] * 6 + [NO_WORKER] * 4
        assert rec["fp"].tolist() == fingerprints(urls).tolist()


def pages_and_workers(node: int) -> tuple[list[np.ndarray], list[int]]:
    rng = np.random.default_rng(node)
    trace = locality_trace(3000, 40 + node)
    cuts = np.cumsum(rng.integers(1, 40, size=300))
    pages = [p for p in np.split(trace, cuts[cuts < len(trace)]) if len(p)]
    return pages, [int(w) for w in rng.integers(0, WORKERS, size=len(pages))]


@pytest.fixture(scope="module")
def worker_logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("worker-logs")
    written = {}
    for node in range(2):
        pages, workers = pages_and_workers(node)
        written[node] = write_node_log(root / f"node-{node}", node, pages, 4096, workers)
    return root, written


def test_by_worker_splits_each_node_in_order(worker_logs):
    root, written = worker_logs
    streams = load_streams([root])
    parts = per_worker_streams(streams)
    assert [p.name for p in parts] == [f"node-{n} worker {w}" for n in range(2) for w in range(WORKERS)]
    for part in parts:
        rec = written[part.node]
        mine = rec["worker"] == part.worker
        assert part.fps.tolist() == rec["fp"][mine].tolist()
        assert part.trace("cross").tolist() == rec["fp"][mine & ((rec["flags"] & 1) != 0)].tolist()
    assert sum(len(p.fps) for p in parts) == sum(len(s.fps) for s in streams)


def test_per_worker_replay_sums_one_cache_per_worker(worker_logs):
    root, written = worker_logs
    sizes = (1, 8, 64)
    result = replay(per_worker_streams(load_streams([root])),
                    ReplayOptions(traces=("full",), policies=("lru", "min"), sizes=sizes, engine="numpy"))
    for policy, model in (("lru", lru_misses), ("min", min_misses)):
        expected = [sum(model(rec["fp"][rec["worker"] == w].tolist(), k) for rec in written.values()
                        for w in range(WORKERS)) for k in sizes]
        assert result.tallies[("full", policy)].misses.tolist() == expected
    # One global cache of WORKERS times the size is a different cache: it is not the same sum.
    node_lru = [sum(lru_misses(rec["fp"].tolist(), k * WORKERS) for rec in written.values()) for k in sizes]
    assert node_lru != result.tallies[("full", "lru")].misses.tolist()


def test_cli_per_worker(worker_logs, tmp_path, capsys):
    root, _ = worker_logs
    out = tmp_path / "out"
    assert main([str(root), "--per-worker", "--policies", "lru,clock", "--sizes", "1,16", "--engine", "numpy",
                 "--no-plots", "--quiet", "--out", str(out)]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["per_worker"] is True
    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["threads"] for r in rows} == {str(WORKERS)}
    assert all(float(r["entries_per_thread"]) == int(r["size"]) for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["per_worker"] is True and len(summary["traces"]["full"]["streams"]) == 2 * WORKERS


def test_cli_per_worker_refuses_logs_without_workers(tmp_path, capsys):
    write_v1_log(tmp_path / "splitter-0-00000.log", 0, v1_records([1, 2]))
    assert main([str(tmp_path), "--per-worker", "--no-plots", "--quiet", "--out", str(tmp_path / "o")]) == 2
    assert "--per-worker needs version-2 splitter logs" in capsys.readouterr().err

"""The streaming replay end to end: chunked readers of logs, .npy and raw files, `crawler replay --streaming`
equal to the in-memory replay on a stream log and a .npy, the automatic switch, and its refusals."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest
from tests.support.replay import locality_trace, write_node_log

from crawler.cache import POLICY_NAMES
from crawler.replay import ReplayOptions, replay, streaming
from crawler.replay.chunks import SourceFile, StreamSource, open_sources, record_dtype
from crawler.replay.cli import main
from crawler.replay.traces import InputError, load_streams
from crawler.splitter.streamlog import FLAG_CROSS, HEADER_SIZE, RECORD

POLICIES = "lru,clock,sieve,clock-sets,min,infinite,static"


def read_rows(path) -> list[tuple[str, str, str, str]]:
    with open(path, newline="") as fh:
        return [(r["trace"], r["policy"], r["size"], r["misses"]) for r in csv.DictReader(fh)]


def read_over_time(path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Two nodes' stream logs (rotated into several files) and a .npy trace."""
    root = tmp_path_factory.mktemp("streaming")
    rng = np.random.default_rng(3)
    for node in range(2):
        trace = locality_trace(5000, 40 + node)
        cuts = np.cumsum(rng.integers(1, 50, size=300))
        pages = [p for p in np.split(trace, cuts[cuts < len(trace)]) if len(p)]
        write_node_log(root / "logs" / f"node-{node}", node, pages, rotate_bytes=12_000)
    np.save(root / "trace.npy", locality_trace(7000, 50))
    return root


@pytest.mark.parametrize("which", ["logs", "trace.npy"])
def test_cli_streaming_equals_in_memory(inputs, tmp_path, capsys, which):
    common = [str(inputs / which), "--policies", POLICIES, "--sizes", "2^0..2^9,1000", "--over-time", "700",
              "--no-plots", "--quiet", "--jobs", "1"]
    assert main([*common, "--out", str(tmp_path / "mem"), "--no-streaming", "--engine", "numpy"]) == 0
    memory_line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    spill = tmp_path / "spill"
    spill.mkdir()
    assert main([*common, "--out", str(tmp_path / "stream"), "--streaming", "--chunk-requests", "333",
                 "--spill-dir", str(spill)]) == 0
    assert list(spill.iterdir()) == []              # MIN's next-use files are removed at the end
    stream_line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert read_rows(tmp_path / "stream" / "results.csv") == read_rows(tmp_path / "mem" / "results.csv")
    assert read_over_time(tmp_path / "stream" / "over_time.csv") == read_over_time(tmp_path / "mem" / "over_time.csv")
    traces = ("full", "cross") if which == "logs" else ("full",)
    assert set(stream_line["traces"]) == set(traces)
    for trace in traces:
        assert stream_line["traces"][trace]["requests"] == memory_line["traces"][trace]["requests"]
        # counted by the next-use build (min and infinite ask for it), as in memory
        assert stream_line["traces"][trace]["distinct"] == memory_line["traces"][trace]["distinct"] > 0
    summary = json.loads((tmp_path / "stream" / "summary.json").read_text())
    mem_summary = json.loads((tmp_path / "mem" / "summary.json").read_text())
    for trace in traces:
        assert summary["traces"][trace]["logged_cache_hits"] == mem_summary["traces"][trace]["logged_cache_hits"]
    assert main([*common, "--out", str(tmp_path / "x"), "--streaming", "--spill-dir", str(tmp_path / "none")]) == 2
    assert "--spill-dir" in capsys.readouterr().err and not (tmp_path / "none").exists()


def test_jobs_split_the_sizes_across_processes_with_the_same_result(inputs, tmp_path):
    sources = open_sources([inputs / "logs"])
    options = ReplayOptions(policies=("lru", "clock", "sieve", "min"), sizes=(1, 8, 64, 512))
    one = streaming.replay_streaming(sources, options, chunk_requests=1000)
    two = streaming.replay_streaming(sources, dataclasses.replace(options, jobs=2), chunk_requests=1000)
    for key, tally in one.tallies.items():
        assert tally.misses.tolist() == two.tallies[key].misses.tolist(), key


def test_sources_group_logs_like_the_in_memory_reader(inputs):
    sources = open_sources([inputs / "logs", inputs / "trace.npy"])
    streams = load_streams([inputs / "logs", inputs / "trace.npy"])
    assert [s.name for s in sources] == [s.name for s in streams]
    assert [s.requests for s in sources] == [len(s.fps) for s in streams]
    assert [s.has_flags() for s in sources] == [s.has_flags() for s in streams]
    for source, stream in zip(sources, streams):
        fps = np.concatenate([c.fps.copy() for c in source.chunks(777)])
        assert fps.tolist() == stream.fps.tolist()
        cross = np.concatenate([c.trace("cross").copy() for c in source.chunks(500)])
        assert cross.tolist() == stream.trace("cross").tolist()


def test_longer_records_of_a_later_log_version_are_read_by_their_size(tmp_path):
    dtype = record_dtype(20)                   # v1's fields at their offsets, 8 more bytes at the end
    records = np.zeros(1000, dtype=dtype)
    records["fp"] = np.arange(1000, dtype=np.uint64) * 7919
    records["flags"] = np.arange(1000) % 2 * FLAG_CROSS
    path = tmp_path / "v2.log"
    path.write_bytes(b"\0" * HEADER_SIZE + records.tobytes())
    source = StreamSource("v2", 0, (SourceFile(path, HEADER_SIZE, dtype, 1000),))
    assert np.concatenate([c.fps.copy() for c in source.chunks(64)]).tolist() == records["fp"].tolist()
    assert np.concatenate([c.trace("cross").copy() for c in source.chunks(64)]).tolist() \
        == records["fp"][1::2].tolist()
    assert record_dtype(RECORD.itemsize).itemsize == RECORD.itemsize
    with pytest.raises(ValueError, match="record size 10"):
        record_dtype(10)


def test_raw_u64_files_stream_and_are_refused_in_memory(tmp_path, capsys):
    trace = locality_trace(3000, 60)
    trace.astype("<u8").tofile(tmp_path / "t.u64")
    np.save(tmp_path / "t.npy", trace)
    for name in ("t.u64", "t.npy"):
        assert main([str(tmp_path / name), "--policies", "lru,clock", "--sizes", "1,16,256", "--no-plots", "--quiet",
                     "--out", str(tmp_path / name.replace(".", "-"))]) == 0
    capsys.readouterr()
    assert read_rows(tmp_path / "t-u64" / "results.csv") == read_rows(tmp_path / "t-npy" / "results.csv")
    summary = json.loads((tmp_path / "t-u64" / "summary.json").read_text())
    assert summary["traces"]["full"]["distinct"] is None          # chosen automatically: streamed
    assert json.loads((tmp_path / "t-npy" / "summary.json").read_text())["traces"]["full"]["distinct"] > 0
    assert main([str(tmp_path / "t.u64"), "--no-streaming", "--out", str(tmp_path / "x")]) == 2
    assert "read by the streaming replay only" in capsys.readouterr().err
    (tmp_path / "odd.u64").write_bytes(b"\1" * 12)
    with pytest.raises(InputError, match="whole uint64"):
        open_sources([tmp_path / "odd.u64"])


def test_every_policy_streams(inputs, tmp_path):
    options = ReplayOptions(policies=tuple(POLICY_NAMES), sizes=(1, 16, 256), spill_dir=str(tmp_path))
    result = streaming.replay_streaming(open_sources([inputs / "trace.npy"]), options, chunk_requests=1000)
    for policy in POLICY_NAMES:
        misses = result.tallies[("full", policy)].misses
        assert 0 <= misses[-1] <= misses[0] <= 7000, (policy, misses)


def test_long_inputs_stream_automatically(inputs, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(streaming, "AUTO_STREAMING_REQUESTS", 6999)
    assert streaming.choose_streaming([inputs / "trace.npy"], None).sources is not None
    assert streaming.choose_streaming([inputs / "trace.npy"], False).sources is None
    monkeypatch.setattr(streaming, "AUTO_STREAMING_REQUESTS", 7000)
    choice = streaming.choose_streaming([inputs / "trace.npy"], None)
    assert choice.sources is None and choice.requests == 7000
    monkeypatch.setattr(streaming, "AUTO_STREAMING_REQUESTS", 6999)
    # The paper's default policies (static, min and infinite among them) stream, and match in memory.
    common = [str(inputs / "trace.npy"), "--no-plots", "--quiet", "--sizes", "2^0..2^8"]
    assert main([*common, "--out", str(tmp_path / "out")]) == 0
    assert main([*common, "--out", str(tmp_path / "mem"), "--no-streaming"]) == 0
    streamed = json.loads((tmp_path / "out" / "summary.json").read_text())
    memory = json.loads((tmp_path / "mem" / "summary.json").read_text())
    assert streamed["lru_engine"] == "stream" and memory["lru_engine"] != "stream"
    assert read_rows(tmp_path / "out" / "results.csv") == read_rows(tmp_path / "mem" / "results.csv")


def test_bad_arrays_and_truncated_files_say_what_is_wrong(tmp_path):
    np.save(tmp_path / "f.npy", np.zeros(10, dtype=np.float64))
    with pytest.raises(InputError, match="64-bit fingerprints"):
        open_sources([tmp_path / "f.npy"])
    np.save(tmp_path / "neg.npy", np.array([1, -2, 3], dtype=np.int64))
    (source,) = open_sources([tmp_path / "neg.npy"])
    with pytest.raises(InputError, match="must not be negative"):
        list(source.chunks(2))
    np.save(tmp_path / "cut.npy", np.arange(100, dtype=np.uint64))
    (source,) = open_sources([tmp_path / "cut.npy"])
    with open(tmp_path / "cut.npy", "r+b") as fh:
        fh.truncate(source.files[0].offset + 80 * 8)
    with pytest.raises(InputError, match="shorter than its header said"):
        list(source.chunks(30))


def test_infinite_alone_streams_its_first_requests_and_counts_distinct(inputs, tmp_path):
    """INFINITE runs no cache: the next-use build counts each stream's first requests, per window too;
    they equal the in-memory replay's, and the spill directory is left empty."""
    spill = tmp_path / "spill"
    spill.mkdir()
    options = ReplayOptions(policies=("infinite",), sizes=(1, 64, 4096), window=333, spill_dir=str(spill))
    streamed = streaming.replay_streaming(open_sources([inputs / "logs"]), options, chunk_requests=500)
    memory = replay(load_streams([inputs / "logs"]), dataclasses.replace(options, engine="numpy"))
    for trace in ("full", "cross"):
        got, want = streamed.tallies[(trace, "infinite")], memory.tallies[(trace, "infinite")]
        assert got.misses.tolist() == want.misses.tolist() and got.windows.tolist() == want.windows.tolist()
        assert streamed.stats[trace].distinct == memory.stats[trace].distinct == int(want.misses[0])
        assert [s["distinct"] for s in streamed.stats[trace].streams] == \
            [s["distinct"] for s in memory.stats[trace].streams]
    assert list(spill.iterdir()) == []

"""`crawler replay` from the command line: arguments, output files, errors, progress."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pytest
from tests.support.replay import NODES, locality_trace, lru_misses, static_misses, write_node_log

from crawler.cache import PAPER_POLICIES
from crawler.replay.cli import main, parse_sizes
from crawler.replay.progress import ReplayProgress
from crawler.replay.results import RESULT_COLUMNS

MAX_PNG_BYTES = 200_000


def read_csv(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_parse_sizes():
    assert parse_sizes("2^0..2^3") == (1, 2, 4, 8)
    assert parse_sizes("1000, 2^4..2^5,3,3") == (3, 16, 32, 1000)
    assert parse_sizes("2^10") == (1024,)
    assert parse_sizes("2^0..2^25")[-1] == 1 << 25 and len(parse_sizes("2^0..2^25")) == 26


@pytest.mark.parametrize("text, message", [
    ("", "no cache sizes"), ("0", "outside"), ("2^31", "outside"), ("2^5..2^3", "A <= B"),
    ("ten", "expected an integer"), ("2^a..2^3", "2^A..2^B"), ("-4", "expected an integer"),
])
def test_parse_sizes_errors(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_sizes(text)


@pytest.fixture(scope="module")
def logged_crawl(tmp_path_factory):
    """Three nodes' splitter logs of crawl-like pages."""
    root = tmp_path_factory.mktemp("logs")
    rng = np.random.default_rng(1)
    for node in range(NODES):
        trace = locality_trace(6000, 20 + node)
        cuts = np.cumsum(rng.integers(1, 60, size=400))
        pages = [p for p in np.split(trace, cuts[cuts < len(trace)]) if len(p)]
        write_node_log(root / f"node-{node}" / "splitter-log", node, pages, rotate_bytes=20_000)
    return root


@pytest.mark.slow
def test_end_to_end_on_logs(logged_crawl, tmp_path, capsys):
    out = tmp_path / "out"
    code = main([str(logged_crawl), "--out", str(out), "--sizes", "2^0..2^14", "--threads", "4",
                 "--over-time", "1500", "--quiet", "--jobs", "1"])
    assert code == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["out"] == str(out) and line["rows"] == 2 * len(PAPER_POLICIES) * 15
    rows = read_csv(out / "results.csv")
    assert tuple(rows[0]) == RESULT_COLUMNS
    assert {r["trace"] for r in rows} == {"full", "cross"}
    summary = json.loads((out / "summary.json").read_text())
    assert [s["stream"] for s in summary["traces"]["full"]["streams"]] == ["node-0", "node-1", "node-2"]
    assert summary["traces"]["full"]["requests"] == 3 * 6000
    cross_requests = summary["traces"]["cross"]["requests"]
    assert 0 < cross_requests < 3 * 6000
    assert summary["traces"]["cross"]["logged_cache_hits"] > 0
    # LRU and STATIC are summed per node stream: check against the references on each node's trace.
    traces = [locality_trace(6000, 20 + node) for node in range(NODES)]
    for row in rows:
        size = int(row["size"])
        if row["trace"] == "full" and row["policy"] in ("lru", "static") and size in (1, 64, 4096):
            model = lru_misses if row["policy"] == "lru" else static_misses
            assert int(row["misses"]) == sum(model(t.tolist(), size) for t in traces)
        assert float(row["entries_per_thread"]) == size / 4
        assert row["relative_to_min"] != ""
    over_time = read_csv(out / "over_time.csv")
    # 6000 requests per node in windows of 1500; the cross trace is shorter.
    assert sum(r["trace"] == "full" for r in over_time) == len(PAPER_POLICIES) * 15 * 4
    assert 0 < sum(r["trace"] == "cross" for r in over_time) < len(PAPER_POLICIES) * 15 * 4
    assert sum(int(r["misses"]) for r in over_time if (r["trace"], r["policy"], r["size"]) == ("full", "lru", "64")) \
        == int(next(r["misses"] for r in rows if (r["trace"], r["policy"], r["size"]) == ("full", "lru", "64")))
    for name in ("miss_rate", "relative", "per_thread", "over_time"):
        for trace in ("full", "cross"):
            png = out / f"{name}_{trace}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert png.stat().st_size < MAX_PNG_BYTES
    assert sorted(summary["files"]["plots"]) == sorted(str(p) for p in out.glob("*.png"))


def test_npy_input_defaults_to_the_full_trace(tmp_path, capsys):
    np.save(tmp_path / "t.npy", locality_trace(2000, 30))
    out = tmp_path / "out"
    assert main([str(tmp_path / "t.npy"), "--out", str(out), "--policies", "lru,min", "--sizes", "1,10,100",
                 "--no-plots", "--quiet"]) == 0
    rows = read_csv(out / "results.csv")
    assert [(r["trace"], r["policy"], r["size"]) for r in rows] == [
        ("full", p, s) for p in ("lru", "min") for s in ("1", "10", "100")]
    assert rows[0]["threads"] == "" and rows[0]["entries_per_thread"] == ""
    assert not list(out.glob("*.png"))


@pytest.mark.parametrize("extra, message", [
    (["--trace", "cross"], "needs splitter logs"),
    (["--trace", "local"], "unknown trace"),
    (["--policies", "clock,lfu"], "unknown cache policy lfu"),
    (["--sizes", "2^40"], "outside"),
    (["--over-time-sizes", "x"], "expected an integer"),
])
def test_usage_errors_exit_2(tmp_path, capsys, extra, message):
    np.save(tmp_path / "t.npy", np.arange(10, dtype=np.uint64))
    assert main([str(tmp_path / "t.npy"), "--out", str(tmp_path / "o"), "--quiet", *extra]) == 2
    assert message in capsys.readouterr().err


def test_missing_input_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "nothing.log"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_argparse_rejects_bad_numbers(tmp_path):
    with pytest.raises(SystemExit) as info:
        main([str(tmp_path), "--threads", "0"])
    assert info.value.code == 2


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal_and_quiet_in_short_logged_runs():
    tty = FakeTerminal()
    bar = ReplayProgress(10.0, stream=tty)
    bar.advance(5.0, "lru full node-0")
    bar.advance(5.0, "clock full node-0 size 64")
    bar.close()
    text = tty.getvalue()
    assert "\rreplay " in text and "100%" in text and "clock full node-0 size 64" in text and text.endswith("\n")
    log = io.StringIO()
    quiet = ReplayProgress(10.0, stream=log)
    quiet.advance(10.0, "done")
    assert log.getvalue() == ""                          # under QUIET_FOR_S: nothing in logs
    off = ReplayProgress(10.0, enabled=False, stream=tty)
    off.advance(10.0)
    off.add_total(-20.0)
    assert off.total >= off.done

"""`crawler demo`'s closing replay (demo_replay) on splitter logs written by the real StreamLog:
the table of miss rates, results.csv and the PNG, and without matplotlib the table and a hint."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from tests.support.replay import NODES, locality_trace, lru_misses, write_node_log

import crawler.replay.plots as plots
from crawler.demo import REPLAY_POLICIES, REPLAY_SIZES, demo_replay


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    for node in range(NODES):
        trace = locality_trace(1500, 60 + node)
        write_node_log(root / f"node-{node}" / "splitter-log", node, np.array_split(trace, 50), 1 << 20,
                       [i % 8 for i in range(50)])
    return root


def test_table_results_and_png(data_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    written = demo_replay(data_dir, tmp_path / "replay")
    text = capsys.readouterr().out
    assert written["png"] == str(tmp_path / "replay" / "miss_rate_cross.png")
    assert (tmp_path / "replay" / "miss_rate_cross.png").read_bytes()[:4] == b"\x89PNG"
    assert f"figure: {written['png']}" in text
    with open(written["results"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["policy"] for r in rows} == set(REPLAY_POLICIES)
    # The table's LRU row of the full trace is the reference LRU, summed over the nodes' caches.
    streams = [np.concatenate(np.array_split(locality_trace(1500, 60 + n), 50)).tolist() for n in range(NODES)]
    expected = [f"{100 * sum(lru_misses(s, k) for s in streams) / (1500 * NODES):.1f}%" for k in REPLAY_SIZES]
    line = next(x for x in text.splitlines() if x.startswith("full   lru"))
    assert line.split()[2:] == expected


def test_without_matplotlib_the_table_and_how_to_get_the_png(data_dir, tmp_path, capsys, monkeypatch):
    def missing() -> None:
        raise plots.PlotsUnavailable("no matplotlib")

    monkeypatch.setattr(plots, "require_matplotlib", missing)
    written = demo_replay(data_dir, tmp_path / "replay")
    text = capsys.readouterr().out
    assert written["png"] is None and (tmp_path / "replay" / "results.csv").exists()
    assert "cross  min" in text and "pip install -e '.[replay]'" in text
    assert not list((tmp_path / "replay").glob("*.png"))

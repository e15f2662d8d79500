"""A logged 3-node crawl of the test web, replayed end to end (full and cross traces).

The cluster crawls with `splitter.log.enabled: true`; `crawler replay` then
reads the nodes' data directories (both run as `python -m crawler ...`). Checked from outside: the replayed
request counts are the logged records and the nodes' own splitter counters;
replaying the cross trace through the splitter's policy (CLOCK-SETS by
default) at its configured size reproduces exactly the hits the online cache logged (the same code, the
same stream); MIN is below every policy and INFINITE below MIN at every
size; every figure is written.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from tests.support.configs import NODES, SECRET, cluster_config, write_config
from tests.support.processes import run_crawler

from crawler.cache import DEFAULT_POLICY, PAPER_POLICIES
from crawler.splitter import FLAG_CROSS, read_records
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow
SPLITTER_CACHE_SIZE = 65536          # the config default of splitter.cache.size
MAX_PNG_BYTES = 200_000


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replay-crawl")
    with TestWebProcess(tmp / "web", ["--hosts", "40", "--pages", "2000", "--no-slow-host"]) as web:
        # Politeness is not what this test is about: a small delay factor keeps the crawl short.
        config = write_config(tmp / "crawl.yaml",
                              cluster_config(tmp, web.info["seeds"], politeness={"delay_factor": 1}))
        code, out, err = run_crawler(["cluster", "-c", str(config), "--progress-interval", "0"], timeout_s=300,
                                     env=SECRET)
        assert code == 0, err[-3000:]
    nodes = [json.loads(line) for line in out if line.startswith("{")][:-1]
    code, out, err = run_crawler(["replay", str(tmp / "data"), "--out", str(tmp / "replay"), "--threads", "32",
                                  "--over-time", "2000", "--quiet"], timeout_s=300)
    assert code == 0, err[-3000:]
    with open(tmp / "replay" / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {"tmp": tmp, "nodes": nodes, "rows": rows, "line": json.loads(out[-1]),
            "summary": json.loads((tmp / "replay" / "summary.json").read_text())}


def misses(rows, trace: str, policy: str) -> np.ndarray:
    return np.array([int(r["misses"]) for r in rows if r["trace"] == trace and r["policy"] == policy])


def test_requests_are_the_logged_records_and_the_nodes_counters(replayed):
    tmp, summary = replayed["tmp"], replayed["summary"]
    records = {n: np.concatenate([read_records(f) for f in sorted((tmp / "data" / f"node-{n}" / "splitter-log")
                                                                   .glob("*.log"))]) for n in range(NODES)}
    full = summary["traces"]["full"]
    cross = summary["traces"]["cross"]
    assert [s["stream"] for s in full["streams"]] == [f"node-{n}" for n in range(NODES)]
    assert [s["requests"] for s in full["streams"]] == [len(records[n]) for n in range(NODES)]
    assert [s["requests"] for s in cross["streams"]] == [
        int(((records[n]["flags"] & FLAG_CROSS) != 0).sum()) for n in range(NODES)]
    by_node = {s["node"]: s["splitter"] for s in replayed["nodes"]}
    assert full["requests"] == sum(sp["local"] + sp["cross"] for sp in by_node.values())
    assert cross["requests"] == sum(sp["cross"] for sp in by_node.values())
    assert cross["logged_cache_hits"] == sum(sp["cache_hits"] for sp in by_node.values())
    assert 1000 < cross["requests"] < full["requests"]
    # Version 2: every record names the worker whose page held it (no seeds or peer URLs pass the splitter).
    workers = np.concatenate([r["worker"] for r in records.values()])
    assert int(workers.max()) < 32 and len(np.unique(workers)) > 8       # cluster_config's 32 workers
    assert replayed["line"]["rows"] == len(replayed["rows"]) == 2 * len(PAPER_POLICIES) * 26


def test_replay_reproduces_the_online_splitter_cache(replayed):
    """Same cache code (the default policy), same per-node cross stream, same size: the same misses."""
    row = next(r for r in replayed["rows"]
               if (r["trace"], r["policy"], r["size"]) == ("cross", DEFAULT_POLICY, str(SPLITTER_CACHE_SIZE)))
    sent = sum(s["splitter"]["urls_sent"] for s in replayed["nodes"])
    assert int(row["misses"]) == sent


@pytest.mark.parametrize("trace", ["full", "cross"])
def test_the_papers_orderings_hold_at_every_size(replayed, trace):
    rows = replayed["rows"]
    floor, infinite = misses(rows, trace, "min"), misses(rows, trace, "infinite")
    distinct = replayed["summary"]["traces"][trace]["distinct"]
    assert np.all(infinite == distinct)
    assert np.all(infinite <= floor)
    for policy in ("clock", "clock-sets", "lru", "random"):
        assert np.all(floor <= misses(rows, trace, policy)), policy
    for policy in ("lru", "min", "static"):
        assert np.all(np.diff(misses(rows, trace, policy)) <= 0), policy
    assert misses(rows, trace, "lru")[0] > 2 * floor[-1]       # small caches miss much more
    rel = [float(r["relative_to_min"]) for r in rows if r["trace"] == trace and r["policy"] in ("clock", "lru")]
    assert min(rel) >= 1.0


def test_figures_and_over_time_are_written(replayed):
    out = replayed["tmp"] / "replay"
    for name in ("miss_rate", "relative", "per_thread", "over_time"):
        for trace in ("full", "cross"):
            png = out / f"{name}_{trace}.png"
            assert png.exists() and 0 < png.stat().st_size < MAX_PNG_BYTES, png
    with open(out / "over_time.csv", newline="") as fh:
        windows = [r for r in csv.DictReader(fh) if (r["trace"], r["policy"], r["size"]) == ("full", "lru", "256")]
    lru_256 = next(r for r in replayed["rows"] if (r["trace"], r["policy"], r["size"]) == ("full", "lru", "256"))
    assert sum(int(w["misses"]) for w in windows) == int(lru_256["misses"])
    assert sum(int(w["requests"]) for w in windows) == int(lru_256["requests"])

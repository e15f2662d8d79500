"""A cluster stops at its limits as one node does: `crawl.max_pages` and `crawl.max_duration_s`.

Each node of a cluster stops fetching at its own limit and keeps serving its
peers (their batches go into its DUE, for a restart) until the distributed
termination check finds every node quiet; then every node prints its
summary and `crawler cluster` exits 0. Checked from outside: the exit code,
the wall time after the limit, every node's summary line, and the web
server's access log (no fetch after the nodes said they stopped).
"""

from __future__ import annotations

import json
import time

import pytest
from tests.support.configs import write_config
from tests.support.ports import free_port
from tests.support.processes import run_crawler

from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow
SECRET = {"TEST_CLUSTER_SECRET": "a-test-secret-of-some-length"}
WORKERS = 16
MAX_PAGES = 300
MAX_DURATION_S = 3.0
END_WITHIN_S = 15.0          # from the limit to the launcher's exit: a few termination rounds and the final saves
WEB = ["--hosts", "200", "--pages", "20000", "--stall-s", "2"]     # far more than the limits let the nodes fetch


def cluster_config(tmp, seeds: str, nodes: int, crawl: dict) -> dict:
    return {
        "cluster": {"name": "limits", "secret_env": "TEST_CLUSTER_SECRET", "nodes": [
            {"id": i, "host": "127.0.0.1", "peer_port": free_port(), "metrics_port": free_port(),
             "source_address": f"127.0.0.{i + 1}"} for i in range(nodes)]},
        "crawl": {"seeds_file": seeds, "data_dir": str(tmp / "data" / "node-{node}"), **crawl},
        "workers": WORKERS,
        "fetch": {"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
        "metrics": {"progress_interval_s": 0},
    }


def run_limited(tmp, nodes: int, crawl: dict) -> tuple[list[dict], dict, float, list]:
    with TestWebProcess(tmp / "web", WEB) as web:
        config = write_config(tmp / "crawl.yaml", cluster_config(tmp, web.info["seeds"], nodes, crawl))
        started = time.monotonic()
        code, out, err = run_crawler(["cluster", "-c", str(config), "--progress-interval", "0"], timeout_s=120,
                                     env=SECRET)
        took = time.monotonic() - started
        assert code == 0, err[-3000:]
        requests = web.requests()
    lines = [json.loads(line) for line in out if line.startswith("{")]
    return lines[:-1], lines[-1], took, requests


@pytest.mark.parametrize("nodes", [2, 3])
def test_cluster_ends_at_max_pages(tmp_path, nodes):
    summaries, cluster, took, requests = run_limited(tmp_path, nodes, {"max_pages": MAX_PAGES})
    assert sorted(s["node"] for s in summaries) == list(range(nodes))
    assert cluster["failed_nodes"] == [] and set(cluster["stop"]) == {"max_pages"}
    for s in summaries:
        # A node stops taking URLs at its limit; the fetches already running finish (at most one per worker).
        assert MAX_PAGES <= s["fetches"] <= MAX_PAGES + WORKERS, s
    by_peer = {f"127.0.0.{i + 1}": 0 for i in range(nodes)}
    for r in requests:
        by_peer[r.peer] += 1
    # What each node says it fetched reached the server, but for fetches that never connected (errors).
    for s in summaries:
        sent = by_peer[f"127.0.0.{s['node'] + 1}"]
        assert s["fetches"] + s["robots_fetches"] - s["errors"] <= sent <= s["fetches"] + s["robots_fetches"], s
    # The whole run (start, a crawl of a few seconds, the end) takes seconds, not the 120 s of the timeout.
    assert took < END_WITHIN_S + 20, took


@pytest.mark.parametrize("nodes", [2, 3])
def test_cluster_ends_at_max_duration(tmp_path, nodes):
    summaries, cluster, took, requests = run_limited(tmp_path, nodes, {"max_duration_s": MAX_DURATION_S})
    assert sorted(s["node"] for s in summaries) == list(range(nodes))
    assert cluster["failed_nodes"] == [] and set(cluster["stop"]) == {"max_duration"}
    assert all(s["fetches"] > 0 for s in summaries)
    # No request started after the limit plus one fetch's time; the launcher ended soon after.
    first = min(r.start for r in requests)
    assert max(r.start for r in requests) - first < MAX_DURATION_S + 2.0
    assert took < MAX_DURATION_S + END_WITHIN_S + 10, took

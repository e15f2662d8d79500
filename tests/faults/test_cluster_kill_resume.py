"""SIGKILL a random node of a 3-node crawl at random moments, several rounds, and restart it.

Each node runs as its own `crawler run --node I` process, bound to its own
127.0.0.x address. Checked from the server's log: the crawl completes (every
node exits 0 by the distributed termination check), every expected page is
fetched, nothing unexpected, every host only from its owner, no overlapping
requests to a host, and page re-fetches are bounded by what the restarted
nodes report as in flight or fetched-but-unconfirmed at the kill (plus what
the DUE counted as emitted twice). One round keeps the node down for longer
than the peers' spill threshold, so batches for it spill to disk and drain
when it returns.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import time
from collections import defaultdict

import pytest
from tests.support.configs import NODES, SECRET, cluster_config, write_config
from tests.support.crawls import page_requests
from tests.support.processes import start_crawler

from crawler.splitter import Partitioner
from crawler.testweb.audit import ROBOTS_PATH, compare, overlaps
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

ROUNDS = 3
WORKERS = 8
RUN_LIMIT_S = 300
RESTART_LIMIT_S = 60
RESUMED = re.compile(r"resumed: .* (\d+) fetches were in flight, (\d+) done but unconfirmed")


def start(config, node: int, tmp) -> subprocess.Popen:
    err = (tmp / f"node-{node}.stderr").open("ab")
    out = (tmp / f"node-{node}.stdout").open("ab")
    return start_crawler(["run", "-c", str(config), "--node", str(node)], stdout=out, stderr=err, env=SECRET)


def resumed_count(tmp, node: int) -> int:
    path = tmp / f"node-{node}.stderr"
    return len(RESUMED.findall(path.read_text())) if path.exists() else 0


def test_random_node_kills_and_restarts_lose_nothing(tmp_path):
    rng = random.Random(20261122)
    with TestWebProcess(tmp_path / "web", ["--hosts", "45", "--pages", "2400", "--no-bad-host",
                                           "--no-slow-host"]) as web:
        total = len(web.manifest().fetched)
        config = write_config(tmp_path / "crawl.yaml", cluster_config(
            tmp_path, web.info["seeds"], workers=WORKERS, politeness={"min_delay_s": 0.03},
            frontier={"checkpoint_interval_s": 0.5, "resume_wait_s": 0.3, "confirm_interval_s": 0.2},
            peers={"spill_after_s": 0.5}))
        procs = {i: start(config, i, tmp_path) for i in range(NODES)}
        kills = []
        try:
            for k in range(ROUNDS):
                target = total * (k + 1) // (ROUNDS + 2) + rng.randrange(0, max(total // 20, 1))
                deadline = time.monotonic() + RUN_LIMIT_S
                while page_requests(web) < target and time.monotonic() < deadline:
                    assert all(p.poll() is None for p in procs.values()), "a node ended early"
                    time.sleep(0.02)
                victim = rng.randrange(NODES)
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait(10)
                kills.append((victim, page_requests(web)))
                time.sleep(2.0 if k == 1 else rng.uniform(0.1, 0.5))       # round 2: long enough to spill
                before = resumed_count(tmp_path, victim)
                procs[victim] = start(config, victim, tmp_path)
                # The next kill must hit a running crawl, not a process still starting up (the
                # next round's page target may already be reached).
                deadline = time.monotonic() + RESTART_LIMIT_S
                while resumed_count(tmp_path, victim) == before and time.monotonic() < deadline:
                    assert procs[victim].poll() is None, "a restarted node ended early"
                    time.sleep(0.02)
            codes = {i: p.wait(RUN_LIMIT_S) for i, p in procs.items()}
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    p.wait(10)
        requests = web.requests()
        result = compare(requests, web.manifest())
    errs = {i: (tmp_path / f"node-{i}.stderr").read_text() for i in range(NODES)}
    assert codes == {i: 0 for i in range(NODES)}, {i: e[-1500:] for i, e in errs.items()}
    summaries = [json.loads((tmp_path / f"node-{i}.stdout").read_text().splitlines()[-1]) for i in range(NODES)]
    assert not result.missing, sorted(result.missing)[:10]
    assert not result.unexpected and not result.forbidden
    part = Partitioner(NODES)
    peers_by_host = defaultdict(set)
    for r in requests:
        peers_by_host[r.host].add(r.peer)
    assert {h: p for h, p in peers_by_host.items() if p != {f"127.0.0.{part.owner(h) + 1}"}} == {}
    assert not overlaps(requests)
    resumed = [tuple(map(int, m)) for e in errs.values() for m in RESUMED.findall(e)]
    assert len(resumed) == ROUNDS, resumed
    repeats = sum(n - 1 for url, n in result.duplicates.items() if not url.endswith(ROBOTS_PATH))
    bound = sum(a + b for a, b in resumed) + sum(s["due"]["duplicates_emitted"] for s in summaries)
    print(f"kills {kills} of {total} pages; resumed (in flight, unconfirmed) {resumed}; "
          f"page re-fetches {repeats} (bound {bound})")
    assert repeats <= bound, (repeats, bound, list(result.duplicates.items())[:10])

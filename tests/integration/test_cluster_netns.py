"""Three nodes on three hosts: separate network namespaces joined by veth pairs and a bridge.

The test web runs in a fourth namespace. Every node is its own process inside
its own namespace with its own address, and the peers talk over the bridge:
what crosses the network really crosses an (isolated, virtual) network.
Skips, saying why, where `ip netns` cannot be used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from tests.integration import netns
from tests.support.configs import write_config
from tests.support.fixtures import REPO

from crawler.splitter import Partitioner
from crawler.testweb.audit import compare, overlaps
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow
NODES = 3
TIMEOUT_S = 400


@pytest.fixture
def switch():
    reason = netns.available()
    if reason:
        print(reason)
        pytest.skip(reason)
    sw = netns.Switch()
    try:
        yield sw
    finally:
        sw.close()


def test_three_nodes_in_three_namespaces(tmp_path, switch):
    switch.add_host("web", 1)
    nodes = [switch.add_host(f"n{i}", 10 + i) for i in range(NODES)]
    web_addr = switch.hosts["web"][1]
    env = dict(os.environ, PYTHONPATH=str(REPO), CRAWLER_TEST_SECRET="netns-test-secret-0123456789")
    args = ["--bind", web_addr, "--port", "8080", "--hosts", "40", "--pages", "2000", "--no-slow-host",
            "--stall-s", "3"]
    with TestWebProcess(tmp_path / "web", args, command_prefix=switch.prefix("web")) as web:
        config = write_config(tmp_path / "crawl.yaml", {
            "cluster": {"name": "netns", "secret_env": "CRAWLER_TEST_SECRET", "nodes": [
                {"id": i, "host": addr, "peer_port": 7400, "metrics_port": 9400, "source_address": addr}
                for i, (_, addr) in enumerate(nodes)]},
            "crawl": {"seeds_file": web.info["seeds"], "data_dir": str(tmp_path / "data" / "node-{node}")},
            "workers": 16,
            "fetch": {"dns": {"overrides": {"*.web.test": web_addr}}, "read_timeout_s": 2, "total_timeout_s": 10},
            "splitter": {"batch_ms": 50},
            "metrics": {"bind": "0.0.0.0", "progress_interval_s": 0},
        })
        procs = [subprocess.Popen([*switch.prefix(f"n{i}"), sys.executable, "-m", "crawler", "run", "-c", str(config),
                                   "--node", str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                  text=True) for i in range(NODES)]
        outputs = []
        deadline = time.monotonic() + TIMEOUT_S
        try:
            for p in procs:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
                assert p.returncode == 0, err[-2000:]
                outputs.append(json.loads(out.splitlines()[-1]))
        finally:
            for p in procs:                        # by PID, whatever happened
                if p.poll() is None:
                    p.kill()
                    p.wait(timeout=10)
        requests, manifest = web.requests(), web.manifest()
    result = compare(requests, manifest)
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], list(result.duplicates)[:5])
    assert overlaps(requests) == []
    assert all(s["stop"] == "done" for s in outputs)
    assert sum(s["urls_received"] for s in outputs) == sum(s["splitter"]["urls_sent"] for s in outputs) > 0
    part = Partitioner(NODES)
    for r in requests:
        assert r.peer == nodes[part.owner(r.host)][1], (r.host, r.peer)

"""Three nodes on three hosts: separate network namespaces joined by veth pairs and a bridge.

The test web runs in a fourth namespace. Every node is its own process inside
its own namespace with its own address, and the peers talk over the bridge:
what crosses the network really crosses an (isolated, virtual) network.
Skips, saying why, where `ip netns` cannot be used.
"""

from __future__ import annotations

import json
import os
import sys

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
        config = write_config(tmp_path / "crawl.yaml", netns.cluster_config(
            "netns", "CRAWLER_TEST_SECRET", nodes, web_addr, web.info["seeds"], tmp_path / "data"))
        run = [sys.executable, "-m", "crawler", "run", "-c", str(config)]
        outputs = [json.loads(out.splitlines()[-1])
                   for out in switch.run_each([f"n{i}" for i in range(NODES)], run, env, TIMEOUT_S)]
        requests, manifest = web.requests(), web.manifest()
    result = compare(requests, manifest)
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], list(result.duplicates)[:5])
    assert overlaps(requests) == []
    assert all(s["stop"] == "done" for s in outputs)
    assert sum(s["urls_received"] for s in outputs) == sum(s["splitter"]["urls_sent"] for s in outputs) > 0
    part = Partitioner(NODES)
    for r in requests:
        assert r.peer == nodes[part.owner(r.host)][1], (r.host, r.peer)

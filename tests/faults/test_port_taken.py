"""A node whose port is taken says so and exits 2 (no traceback), and leaves nothing that would make
the next run refuse its data_dir."""

from __future__ import annotations

import socket

import pytest
from tests.support.configs import write_config
from tests.support.crawls import last_json
from tests.support.processes import run_crawler

from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("key", ["metrics_port", "peer_port"])
def test_a_taken_port_is_a_clear_error_and_the_next_run_starts(tmp_path, key):
    with TestWebProcess(tmp_path / "web", ["--hosts", "5", "--pages", "60", "--no-bad-host", "--no-slow-host",
                                           "--no-trap"]) as web, socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        nodes = [{"id": 0, "host": "127.0.0.1", "peer_port": 0, "metrics_port": 0},
                 {"id": 1, "host": "127.0.0.1", "peer_port": 0, "metrics_port": 0}]
        nodes[0][key] = port
        config = {"cluster": {"secret_env": "PORT_TEST_SECRET", "nodes": nodes},
                  "crawl": {"seeds_file": web.info["seeds"], "data_dir": str(tmp_path / "data" / "node-{node}")},
                  "fetch": {"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
                  "metrics": {"progress_interval_s": 0}}
        path = write_config(tmp_path / "crawl.yaml", config)
        env = {"PORT_TEST_SECRET": "a-port-test-secret"}
        code, _, err = run_crawler(["run", "-c", str(path), "--node", "0"], timeout_s=60, env=env)
        assert code == 2, err[-2000:]
        assert "cannot listen for" in err and f"127.0.0.1:{port} (cluster.nodes, node 0: {key})" in err, err[-2000:]
        assert "Traceback" not in err
        assert not web.requests()                       # it stopped before fetching anything

        taken.close()
        config["cluster"]["nodes"] = nodes[:1]           # now alone, on the port that is free again
        write_config(path, config)
        code, out, err = run_crawler(["run", "-c", str(path), "--node", "0"], timeout_s=120, env=env)
    assert code == 0, err[-2000:]
    assert last_json(out)["pages"] > 0

"""A node says which kernels it runs: the compiled ones, or the pure-Python twins and how to get the others.

The twins give the same results 10-50x slower, so a node that runs them warns
at start (with the reason and the way to build the extension), and carries it
in its summary (`kernels`) and in `crawler_node_info{kernels=...}`. The
compiled kernels are forced off as a user without a compiler would have them:
CRAWLER_CACHE_PURE_PYTHON=1 in the node's environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.support.configs import one_node_config, write_config
from tests.support.fixtures import REPO
from tests.support.ports import free_port

from crawler._native import BUILD_HINT, NATIVE, PURE_PYTHON_ENV
from crawler.testweb.process import TestWebProcess

SCRAPE_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 120.0
LINGER_S = 30.0               # the node keeps /metrics up after its crawl; SIGTERM ends the wait early


def node_info(port: int) -> dict:
    """crawler_node_info's labels, scraped as soon as the node serves /metrics."""
    deadline = time.monotonic() + SCRAPE_TIMEOUT_S
    while True:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read().decode()
            for family in text_string_to_metric_families(text):
                if family.name == "crawler_node_info":
                    return family.samples[0].labels
        except OSError:
            pass
        assert time.monotonic() < deadline, "the node never served /metrics"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("forced_off", [True, False], ids=["python-twins", "as-built"])
def test_a_node_says_which_kernels_it_runs(tmp_path, forced_off):
    if not forced_off and NATIVE is None:
        pytest.skip("the compiled extension is not built here")
    port = free_port()
    with TestWebProcess(tmp_path / "web", ["--hosts", "5", "--pages", "100", "--no-bad-host", "--no-slow-host",
                                           "--no-trap"]) as web:
        config = write_config(tmp_path / "crawl.yaml", one_node_config(
            tmp_path / "data" / "node-{node}", seeds_file=web.info["seeds"], metrics_port=port,
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            metrics={"progress_interval_s": 0, "linger_s": LINGER_S},
        ))
        env = dict(os.environ, PYTHONPATH=str(REPO))
        env[PURE_PYTHON_ENV] = "1" if forced_off else "0"
        proc = subprocess.Popen([sys.executable, "-m", "crawler", "run", "-c", str(config)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            labels = node_info(port)
        finally:
            proc.terminate()                       # ends the linger (or the crawl: the summary comes either way)
            out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out.splitlines()[-1])
    if forced_off:
        assert labels["kernels"] == "python" and summary["kernels"] == "python"
        assert "WARNING" in err and "pure-Python twins" in err and PURE_PYTHON_ENV in err and BUILD_HINT in err
    else:
        assert labels["kernels"] == "compiled" and summary["kernels"] == "compiled"
        assert "pure-Python" not in err

"""deploy/entrypoint.sh, the image's entrypoint, run for real with `sh` and the installed `crawler`.

Each test starts the script as a child (the node it runs crawls a local test
server) and stops it by PID; the static checks of deploy/ are
tests/unit/test_deploy.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from tests.support.fixtures import REPO
from tests.support.ports import free_port
from tests.support.processes import wait_until

ENTRYPOINT = REPO / "deploy" / "entrypoint.sh"
PROCESS_TIMEOUT_S = 60
WAIT_STEP_S = 0.05


def crawler_bin_dir() -> Path:
    here = Path(sys.executable).parent
    if (here / "crawler").exists():
        return here
    found = shutil.which("crawler")
    if found is None:
        pytest.skip("the crawler console script is not installed (pip install -e .)")
    return Path(found).parent


@pytest.fixture
def run_env(tmp_path):
    """Environment for the entrypoint: the real crawler, a one-node cluster file, a state dir."""
    if shutil.which("sh") is None:
        pytest.skip("no POSIX sh")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLER_")}
    env.update({
        "PATH": f"{crawler_bin_dir()}{os.pathsep}{env.get('PATH', '')}",
        "CRAWLER_PYTHON": sys.executable,
        "CRAWLER_CONFIG": str(tmp_path / "cluster.yaml"),
        "CRAWLER_STATE_DIR": str(tmp_path / "state"),
        "HOSTNAME": "crawler-0",
    })
    return env


def write_config(path: Path, **sections: dict) -> None:
    """A one-node cluster file with its state beside it; `sections` are merged into its sections."""
    data: dict = {"crawl": {"data_dir": str(path.parent / "data" / "node-{node}")},
                  "metrics": {"enabled": False, "progress_interval_s": 0}, "workers": 4}
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")


def entrypoint(env: dict, *args: str, timeout_s: float = PROCESS_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(ENTRYPOINT), *args], env=env, capture_output=True, text=True,
                          timeout=timeout_s)


def test_finished_crawl_leaves_a_marker_and_is_not_run_again(run_env, tmp_path):
    write_config(Path(run_env["CRAWLER_CONFIG"]))      # no seeds: the crawl is over at once
    first = entrypoint(run_env)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout.strip().splitlines()[-1])
    assert summary["stop"] == "done" and summary["node"] == 0
    marker = tmp_path / "state" / "finished-node-0.json"
    assert json.loads(marker.read_text(encoding="utf-8")) == summary
    again = entrypoint(run_env)
    assert again.returncode == 0
    assert again.stdout == "", "the node must not run a second time"
    assert "finished its crawl before" in again.stderr
    assert entrypoint(run_env, "health").returncode == 0, "a finished node is healthy"


@pytest.mark.slow
def test_node_id_comes_from_the_host_name(run_env):
    write_config(Path(run_env["CRAWLER_CONFIG"]))      # one node: id 0 only
    result = entrypoint(dict(run_env, HOSTNAME="crawler-7.crawler.crawl.svc.cluster.local"))
    assert result.returncode == 2
    assert "--node 7: no such node in cluster.nodes" in result.stderr
    result = entrypoint(dict(run_env, HOSTNAME="crawler-7", CRAWLER_NODE="0"))
    assert result.returncode == 0, result.stderr
    for bad in ("crawler", "crawler-x"):
        result = entrypoint(dict(run_env, HOSTNAME=bad))
        assert result.returncode == 2
        assert "cannot tell the node id" in result.stderr


def test_other_arguments_go_to_the_crawler(run_env):
    result = entrypoint(run_env, "run", "--help")
    assert result.returncode == 0 and "--node" in result.stdout


class _EndlessSite(BaseHTTPRequestHandler):
    """Page /n links to /n+1: a crawl that never ends by itself."""

    def do_GET(self) -> None:
        self.server.hits += 1
        match = re.fullmatch(r"/(\d+)", self.path)
        if match is None:
            self.send_error(404)
            return
        body = f'<html><body><a href="/{int(match[1]) + 1}">next</a></body></html>'.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def endless_site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessSite)
    server.daemon_threads = True
    server.hits = 0
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": WAIT_STEP_S}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(PROCESS_TIMEOUT_S)


def start(env: dict, tmp_path: Path, name: str) -> tuple[subprocess.Popen, Path, Path]:
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(["sh", str(ENTRYPOINT)], env=env, stdout=stdout, stderr=stderr)
    return proc, out, err


def stop(proc: subprocess.Popen) -> int:
    """SIGTERM, then wait; kills it (by pid) if it does not end in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(PROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(PROCESS_TIMEOUT_S)
        raise


def test_sigterm_reaches_the_node_and_leaves_no_marker(run_env, tmp_path, endless_site):
    port = endless_site.server_address[1]
    metrics_port = free_port()
    write_config(Path(run_env["CRAWLER_CONFIG"]),
                 crawl={"seeds": [f"http://endless.test:{port}/0"]},
                 fetch={"dns": {"overrides": {"endless.test": "127.0.0.1"}}},
                 politeness={"delay_factor": 0, "min_delay_s": 0.01},
                 metrics={"enabled": True, "bind": "127.0.0.1"},
                 cluster={"nodes": [{"id": 0, "metrics_port": metrics_port}]},
                 store={"warc": {"enabled": False}})
    env = dict(run_env, CRAWLER_METRICS_PORT=str(metrics_port))
    proc, out, err = start(env, tmp_path, "node")
    try:
        wait_until(lambda: endless_site.hits >= 3 or proc.poll() is not None, PROCESS_TIMEOUT_S, "the crawl to start")
        assert proc.poll() is None, err.read_text()
        assert entrypoint(env, "health").returncode == 0, "a crawling node is healthy"
    finally:
        status = stop(proc)
    assert status == 0, err.read_text()
    summary = json.loads(out.read_text().strip().splitlines()[-1])
    assert summary["stop"] == "SIGTERM" and summary["fetches"] >= 2
    assert not (tmp_path / "state" / "finished-node-0.json").exists(), "an interrupted crawl is not finished"
    assert entrypoint(env, "health").returncode == 1, "no marker and no /healthz: unhealthy"


def test_finished_node_idles_until_stopped(run_env, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "finished-node-0.json").write_text('{"stop": "done"}\n', encoding="utf-8")
    env = dict(run_env, CRAWLER_ON_FINISH="idle")
    proc, out, err = start(env, tmp_path, "idle")
    try:
        wait_until(lambda: "idle;" in err.read_text() or proc.poll() is not None, PROCESS_TIMEOUT_S, "idling")
        assert proc.poll() is None, "an idle node keeps its container up"
    finally:
        status = stop(proc)
    assert status == 0
    assert out.read_text() == ""

"""`crawler cluster` when a node dies: the others stop cleanly (they could never finish alone) and
the same command resumes the crawl; when the supervisor itself dies, no node is left running."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from tests.support.configs import SECRET, cluster_config, write_config
from tests.support.crawls import page_requests
from tests.support.processes import run_crawler, start_crawler

from crawler.cluster import run_cluster
from crawler.state import StateStore
from crawler.testweb.audit import compare
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

WEB_ARGS = ["--hosts", "30", "--pages", "1500", "--no-bad-host", "--no-slow-host", "--no-trap"]
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 60
CRAWL_TIMEOUT_S = 300
POLL_S = 0.05
STARTED = re.compile(r"cluster: started \d+ node\(s\): (.*)")
NODE_PID = re.compile(r"(\d+) \(pid (\d+)\)")


def start_cluster(config: Path, stderr: Path) -> subprocess.Popen:
    with stderr.open("wb") as err:
        return start_crawler(["cluster", "-c", str(config), "--progress-interval", "0"], stdout=subprocess.PIPE,
                             stderr=err, env=SECRET)


def node_pids(stderr: Path, proc: subprocess.Popen) -> dict[int, int]:
    """The node pids the supervisor announced, once it has."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        m = STARTED.search(stderr.read_text(errors="replace"))
        if m:
            return {int(node): int(pid) for node, pid in NODE_PID.findall(m.group(1))}
        time.sleep(POLL_S)
    raise AssertionError(f"the cluster did not start its nodes: {stderr.read_text()[-2000:]}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for this purpose (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def wait_pages(web: TestWebProcess, count: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + CRAWL_TIMEOUT_S
    while proc.poll() is None and time.monotonic() < deadline:
        if page_requests(web) >= count:
            return
        time.sleep(POLL_S)
    raise AssertionError("the crawl did not get going")


def test_a_failed_node_stops_the_others_and_the_crawl_resumes(tmp_path):
    # The killed node's hosts with a fetch in flight wait frontier.resume_wait_s after the restart: by
    # default politeness.max_delay_s (60 s), as a real server may still be running the cut request.
    # Here that wait would be most of the test's time and says nothing of the supervisor; the kill
    # tests (tests/faults/test_*kill*) and bench/kill_bench.py check the resume itself.
    with TestWebProcess(tmp_path / "web", WEB_ARGS) as web:
        manifest = web.manifest()
        config = write_config(tmp_path / "crawl.yaml", cluster_config(
            tmp_path, web.info["seeds"], politeness={"min_delay_s": 0.05}, frontier={"resume_wait_s": 1.0}))
        stderr = tmp_path / "cluster.stderr"
        proc = start_cluster(config, stderr)
        try:
            pids = node_pids(stderr, proc)
            wait_pages(web, len(manifest.fetched) // 4, proc)
            os.kill(pids[1], signal.SIGKILL)
            code = proc.wait(STOP_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err = stderr.read_text(errors="replace")
        assert code == 1, err[-3000:]
        assert "node 1 exited with code -9; stopping the other nodes" in err, err[-3000:]
        assert not any(alive(pid) for pid in pids.values())
        summaries = [line for line in proc.stdout.read().decode().splitlines() if line.startswith("{")]
        assert '"failed_nodes": [1]' in summaries[-1]
        assert page_requests(web) < len(manifest.fetched)

        code, out, err = run_crawler(["cluster", "-c", str(config), "--progress-interval", "0"],
                                     timeout_s=CRAWL_TIMEOUT_S, env=SECRET)
        assert code == 0, err[-3000:]
        result = compare(web.requests(), manifest)
    assert not result.missing and not result.unexpected and not result.forbidden, \
        (sorted(result.missing)[:5], sorted(result.unexpected)[:5])


def test_nodes_do_not_outlive_a_killed_supervisor(tmp_path):
    with TestWebProcess(tmp_path / "web", WEB_ARGS) as web:
        config = write_config(tmp_path / "crawl.yaml", cluster_config(
            tmp_path, web.info["seeds"], politeness={"min_delay_s": 0.2}))
        stderr = tmp_path / "cluster.stderr"
        proc = start_cluster(config, stderr)
        pids: dict[int, int] = {}
        try:
            pids = node_pids(stderr, proc)
            # The nodes were forked by one launcher, the supervisor's child (crawler/launcher.py).
            launchers = {parent_of(pid) for pid in pids.values()}
            assert len(launchers) == 1 and parent_of(next(iter(launchers))) == proc.pid, (launchers, proc.pid)
            pids[-1] = next(iter(launchers))
            for node, pid in pids.items():       # each node names itself (ps -o comm, top)
                if node >= 0:
                    # The launcher says `started` right after the fork; the child names itself next.
                    assert comm_becomes(pid, f"crawler-node-{node}"), Path(f"/proc/{pid}/comm").read_text()
            wait_pages(web, 20, proc)
            proc.kill()
            proc.wait()
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while any(alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
                time.sleep(POLL_S)
            left = [pid for pid in pids.values() if alive(pid)]
        finally:
            for pid in pids.values():            # never leave one behind, whatever failed above
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    assert not left, f"nodes (or their launcher, -1) still running after their supervisor died: {pids}, {left}"


def comm_becomes(pid: int, name: str) -> bool:
    """Whether the process takes `name` (its /proc comm) within START_TIMEOUT_S."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if Path(f"/proc/{pid}/comm").read_text().strip() == name:
            return True
        time.sleep(POLL_S)
    return False


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])


def test_on_started_gets_each_running_node_pid_and_a_failing_callback_stops_nothing(tmp_path):
    """run_cluster's `on_started` (the cluster bench pins each node to a CPU with it) gets every
    node's pid while the nodes run: children of the launcher this process started. A callback
    that raises is reported and the crawl still ends normally."""
    seen: dict[int, int] = {}
    parents: dict[int, int] = {}
    grandparents: set[int] = set()

    def on_started(pids: dict[int, int]) -> None:
        seen.update(pids)
        parents.update({node: parent_of(pid) for node, pid in pids.items()})
        grandparents.update(parent_of(launcher) for launcher in parents.values())
        raise RuntimeError("a broken callback")

    with TestWebProcess(tmp_path / "web", ["--hosts", "6", "--pages", "60", "--no-bad-host", "--no-slow-host",
                                           "--no-trap"]) as web:
        config = write_config(tmp_path / "crawl.yaml", cluster_config(tmp_path, web.info["seeds"]))
        out = io.StringIO()
        code = asyncio.run(asyncio.wait_for(
            run_cluster(str(config), progress_interval_s=0, out=out, extra_env=SECRET, on_started=on_started),
            CRAWL_TIMEOUT_S))
    assert code == 0, out.getvalue()[-2000:]
    assert sorted(seen) == [0, 1, 2]
    launchers = set(parents.values())
    assert len(launchers) == 1 and len(set(seen.values())) == 3
    assert os.getpid() not in seen.values() and os.getpid() not in launchers
    assert grandparents == {os.getpid()}             # the launcher is this process's child
    assert not any(alive(pid) for pid in seen.values())


def test_nodes_killed_with_their_launcher_report_the_totals_they_saved(tmp_path):
    """The supervisor's summary when no node could print one: from each node's last checkpoint, not zeros."""
    with TestWebProcess(tmp_path / "web", WEB_ARGS) as web:
        config = write_config(tmp_path / "crawl.yaml", cluster_config(
            tmp_path, web.info["seeds"], politeness={"min_delay_s": 0.05},
            frontier={"checkpoint_interval_s": 0.5}))
        stderr = tmp_path / "cluster.stderr"
        proc = start_cluster(config, stderr)
        pids: dict[int, int] = {}
        try:
            pids = node_pids(stderr, proc)
            launcher = parent_of(next(iter(pids.values())))
            wait_pages(web, 200, proc)
            time.sleep(1.0)                      # a checkpoint or two after that
            for pid in [launcher, *pids.values()]:
                os.kill(pid, signal.SIGKILL)
            code = proc.wait(STOP_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pid in pids.values():
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    err = stderr.read_text(errors="replace")
    lines = [json.loads(line) for line in proc.stdout.read().decode().splitlines() if line.startswith("{")]
    nodes, cluster = lines[:-1], lines[-1]
    assert code == 1 and cluster["failed_nodes"] == sorted(pids), err[-3000:]
    assert sorted(s["node"] for s in nodes) == sorted(pids) and all(s["from_saved_state"] for s in nodes)
    saved = {s["node"]: s["pages"] for s in nodes}
    for node in pids:
        records = StateStore(tmp_path / "data" / f"node-{node}" / "state").read("counters", 1)
        pages = sum(n for (_, kind), n in records[0]["counters"]["pages"] if kind == "page")
        assert saved[node] == pages > 0, (node, saved, pages)
    assert cluster["pages"] == sum(saved.values()) > 0
    assert "printed no summary" in err

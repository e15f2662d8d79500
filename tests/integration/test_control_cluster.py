"""`crawler ctl` steering a running 3-node crawl, checked from the test web's access log.

The nodes fetch from 127.0.0.1, .2 and .3, so the log tells which node sent
each request. One crawl carries the whole sequence, to keep the time down:
a change without the token is refused; `block HOST` returns, then no request
to that host; `pause` returns, then no request for PAUSE_S and the crawl
does not end; `resume`, then `seeds add` of new hosts owned by each node:
each fetched by its owner within SEED_S; the crawl then completes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import aiohttp
import pytest
import yaml
from tests.support.configs import NODES, SECRET, cluster_config, one_node_config, write_config
from tests.support.ports import free_port
from tests.support.processes import run_crawler, start_crawler, stop_process, wait_until

from crawler.config import from_dict
from crawler.control import control_token
from crawler.node import Node
from crawler.splitter import Partitioner
from crawler.testweb import TestWebServer, WebParams
from crawler.testweb.audit import ROBOTS_PATH, read_access_log
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

PAUSE_S = 10.0            # the figure: no request for this long after `pause` returns
SEED_S = 5.0              # a seed added by `seeds add` is fetched by its owner within this
CTL_TIMEOUT_S = 30.0      # one `crawler ctl` run (a Python start and one request per node)
CRAWL_TIMEOUT_S = 120.0
WEB = ["--hosts", "12", "--pages", "300", "--stall-s", "1", "--no-trap", "--no-slow-host",
       "--crawl-delay-hosts", "0", "--no-bad-host"]
MIN_DELAY_S = 0.15        # the biggest hosts' pages take several seconds to crawl: the commands land mid-crawl
SECRET_ENV, SECRET_VALUE = next(iter(SECRET.items()))
DOMAIN = "web.test"       # the test web's (cluster_config resolves *.web.test to 127.0.0.1)


def ctl(config: Path, *args: str, env: dict | None = None) -> tuple[int, list[str], str]:
    return run_crawler(["ctl", "-c", str(config), *args], timeout_s=CTL_TIMEOUT_S, env=SECRET if env is None else env)


def post(url: str, token: str | None) -> int:
    """The HTTP status of a bare POST (urllib: no crawler code on the client side)."""
    request = urllib.request.Request(url, data=b"{}", method="POST",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def accepting_control(ports: list[int]) -> bool:
    """Every node answers GET /control/status (open: no token)."""
    for port in ports:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/control/status", timeout=1) as resp:
                json.loads(resp.read())
        except (OSError, ValueError):
            return False
    return True


def owned_hosts(domain: str) -> dict[int, str]:
    """A new host name (not in the test web) owned by each node."""
    part, out = Partitioner(NODES), {}
    for k in range(1000):
        name = f"ctl-seed-{k}.{domain}"
        out.setdefault(part.owner(name), name)
        if len(out) == NODES:
            return out
    raise AssertionError("no host name for some node in 1000 tries")


def test_pause_block_seeds_and_auth_during_a_cluster_crawl(tmp_path):
    with TestWebProcess(tmp_path / "web", WEB) as web:
        manifest = web.manifest()
        port = web.info["port"]
        config = write_config(tmp_path / "crawl.yaml", cluster_config(
            tmp_path, web.info["seeds"], politeness={"min_delay_s": MIN_DELAY_S}))
        metrics = [n["metrics_port"] for n in yaml.safe_load(config.read_text())["cluster"]["nodes"]]
        with (tmp_path / "cluster.err").open("wb") as err:
            proc = start_crawler(["cluster", "-c", str(config), "--progress-interval", "0"],
                                 stdout=subprocess.PIPE, stderr=err, env=SECRET)
        try:
            wait_until(lambda: accepting_control(metrics), 30, "the nodes' control endpoints")

            wait_until(lambda: len(web.requests()) >= 20, 30, "the crawl's first requests")

            # Pause: nothing for PAUSE_S and the crawl does not end. In the window: changes without the
            # token are refused, and the host with the most pages is blocked.
            code, out, err_text = ctl(config, "pause")
            t_pause = time.time()
            assert code == 0 and len(out) == NODES, (out, err_text)
            url = f"http://127.0.0.1:{metrics[1]}/control/resume"
            assert post(url, None) == 401
            assert post(url, "0" * 64) == 403
            code, out, _ = ctl(config, "resume", env={"TEST_CLUSTER_SECRET": "not-the-cluster-secret"})
            assert code == 1 and len(out) == NODES and all("HTTP 403" in line for line in out), out
            left = Counter(u.split("/")[2].split(":")[0] for u in manifest.fetched)
            host = max(left, key=lambda h: left[h])
            assert sum(1 for r in web.requests() if r.host == host) < left[host] // 2     # most still to fetch
            code, out, err_text = ctl(config, "block", host)
            t_block = time.time()
            assert code == 0, (out, err_text)
            code, out, _ = ctl(config, "status")
            assert code == 0 and sum("PAUSED" in line for line in out) == NODES, out
            assert sum(f"blocked: {host}" in line for line in out) == NODES, out
            time.sleep(max(0.0, t_pause + PAUSE_S - time.time()))
            late = [r for r in web.requests() if r.start >= t_pause]
            assert late == [], late[:5]
            assert proc.poll() is None, "the crawl ended while paused"

            # Resume, and seeds on a new host owned by each node.
            code, out, _ = ctl(config, "resume")
            assert code == 0, out
            hosts = owned_hosts(DOMAIN)
            seeds = {i: f"http://{h}:{port}/ctl/seed-{i}" for i, h in hosts.items()}
            code, out, err_text = ctl(config, "seeds", "add", *seeds.values())
            t_seeds = time.time()
            assert code == 0, (out, err_text)

            def seeds_fetched() -> bool:
                paths = {(r.host, r.path) for r in web.requests()}
                return all((hosts[i], f"/ctl/seed-{i}") in paths for i in hosts)
            wait_until(seeds_fetched, SEED_S + 5, "the added seeds' fetches")
            by_seed = {(r.host, r.path): r for r in web.requests() if r.path.startswith("/ctl/")}
            for i, h in hosts.items():
                r = by_seed[(h, f"/ctl/seed-{i}")]
                assert r.peer == f"127.0.0.{i + 1}", (h, r.peer)
                assert r.start - t_seeds <= SEED_S, (h, r.start - t_seeds)

            out_text, _ = proc.communicate(timeout=CRAWL_TIMEOUT_S)
            assert proc.returncode == 0, (tmp_path / "cluster.err").read_text()[-3000:]
        finally:
            stop_process(proc)
        requests = web.requests()

    assert [r for r in requests if r.host == host and r.start >= t_block] == []
    lines = [json.loads(line) for line in out_text.decode().splitlines() if line.startswith("{")]
    summary, nodes = lines[-1], lines[:-1]
    assert summary["stop"] == ["done"]
    blocked = sum(n["control"]["blocked_urls"]["dropped"] + n["control"]["blocked_urls"]["rejected"] for n in nodes)
    assert blocked > 0
    assert all(n["control"]["blocked"] == [host] and not n["control"]["paused"] for n in nodes)
    # Every other page of the web was fetched once: the pause and the seeds lost and repeated nothing.
    pages = Counter((r.host, r.path) for r in requests if r.path != ROBOTS_PATH)
    assert [k for k, n in pages.items() if n > 1] == []
    wanted = {(u.split("/")[2].split(":")[0], "/" + u.split("/", 3)[3]) for u in manifest.fetched}
    missing = {k for k in wanted - set(pages) if k[0] != host}
    assert missing == set()


# --- across a restart (one node, in this process: no start-up cost) ------------------------------------
RESTART_WEB = WebParams(hosts=5, pages=60, seed=11, crawl_delay_hosts=0.0, bad_host=False, slow_host=False,
                        trap=False)
HOST_DELAY_S = 0.25       # `delay` of one host: its requests after the restart are at least this far apart
STEP_TIMEOUT_S = 30.0


async def _command(session: aiohttp.ClientSession, port: int, path: str, body: dict | None = None,
                   token: str = control_token(SECRET_VALUE.encode())) -> dict:
    async with session.post(f"http://127.0.0.1:{port}/control/{path}", json=body,
                            headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def _until(predicate, what: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _status_when_up(session: aiohttp.ClientSession, port: int) -> dict:
    """GET /control/status once the node serves it (the node runs on this loop: no blocking client here)."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while True:
        try:
            async with session.get(f"http://127.0.0.1:{port}/control/status") as resp:
                return await resp.json()
        except aiohttp.ClientConnectionError:
            assert time.monotonic() < deadline, "timed out waiting for the restarted node's endpoint"
            await asyncio.sleep(0.05)


async def test_block_delay_pause_and_new_seeds_hold_across_a_restart(tmp_path, monkeypatch):
    """`stop` drains like SIGTERM; the restarted node is still paused, still blocks and delays, keeps the
    block counts, and takes the seed added to the seeds file meanwhile, and only that one. The node has
    no cluster secret: it keeps its own in its data_dir, and `crawler ctl` on this machine reads it."""
    monkeypatch.delenv(SECRET_ENV, raising=False)
    log_path = tmp_path / "access.log.jsonl"
    async with TestWebServer(RESTART_WEB, log_path) as server:
        web = server.web
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(f"http://{h.name}:{server.port}/\n" for h in web.hosts[:3]))
        port = free_port()
        raw = one_node_config(tmp_path / "node-{node}", seeds_file=seeds, metrics_port=port, workers=8,
                              fetch={"dns": {"overrides": {f"*.{RESTART_WEB.domain}": "127.0.0.1"}}},
                              politeness={"min_delay_s": 0.05}, metrics={"progress_interval_s": 0})
        raw["cluster"]["secret_env"] = SECRET_ENV                          # not set: no cluster secret
        config = from_dict(raw)
        config_path = write_config(tmp_path / "crawl.yaml", raw)
        blocked, delayed = web.hosts[1].name, web.hosts[2].name
        pages = lambda: [r for r in read_access_log(log_path) if r.path != ROBOTS_PATH]  # noqa: E731
        async with aiohttp.ClientSession() as session:
            first = Node(config, 0)
            run = asyncio.create_task(first.run())
            await _until(lambda: len(pages()) >= 10, "the first pages")
            token = control_token((tmp_path / "node-0" / "state" / "control.secret").read_text().strip().encode())
            answer = await _command(session, port, "block", {"pattern": blocked}, token)
            dropped, inflight = answer["dropped"], answer["inflight"]
            t_block = time.time()
            await _command(session, port, "delay", {"pattern": delayed, "seconds": HOST_DELAY_S}, token)
            await _command(session, port, "pause", None, token)
            await _command(session, port, "stop", None, token)
            summary = await asyncio.wait_for(run, STEP_TIMEOUT_S)
            assert summary["stop"] == "ctl_stop" and summary["control"]["paused"]
            assert summary["control"]["blocked_urls"]["dropped"] == dropped

            new_seed = f"http://ctl-new.{RESTART_WEB.domain}:{server.port}/added-while-stopped"
            seeds.write_text(seeds.read_text() + new_seed + "\n")
            t_restart = time.time()
            second = Node(config, 0)
            run = asyncio.create_task(second.run())
            status = await _status_when_up(session, port)
            assert status["paused"] and status["blocked"] == [blocked] and status["delays"] == {delayed: HOST_DELAY_S}
            await asyncio.sleep(1.0)
            assert [r for r in pages() if r.start >= t_restart] == []          # still paused
            code, out, err = await asyncio.to_thread(ctl, config_path, "resume", env={})   # the node's own secret
            assert code == 0, (out, err)
            summary2 = await asyncio.wait_for(run, STEP_TIMEOUT_S)
    assert summary2["stop"] == "done" and summary2["resumed"]
    assert summary2["control"]["blocked_urls"]["dropped"] >= dropped           # crawl totals, restored
    requests = pages()
    # A fetch in flight at the block finishes (its request may reach the server after the answer): at
    # most that one, and nothing else.
    assert inflight in (0, 1)
    assert len([r for r in requests if r.host == blocked and r.start >= t_block]) <= inflight
    assert [(r.host, r.path) for r in requests if r.host == f"ctl-new.{RESTART_WEB.domain}"] == \
        [(f"ctl-new.{RESTART_WEB.domain}", "/added-while-stopped")]
    once = Counter((r.host, r.path) for r in requests)
    assert [k for k, n in once.items() if n > 1] == []                         # the old seeds not again
    starts = sorted(r.start for r in requests if r.host == delayed and r.start >= t_restart)
    assert len(starts) >= 3
    assert min(b - a for a, b in zip(starts, starts[1:])) >= HOST_DELAY_S - 0.01

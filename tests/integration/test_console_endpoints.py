"""The console's endpoints on a real node, in this process: the page and its files, the cluster view with a
peer that is down, the token checks, a change relayed to every node; and `crawler ctl token`.

Node 0 of a two-node cluster runs alone (node 1's ports answer nothing): the
console must show node 1 down with the reason and still serve and steer
node 0; a change reports node 1 as failed. The browser side is
test_console_browser.py.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
from tests.support.configs import SECRET, write_config
from tests.support.ports import free_port
from tests.support.processes import run_crawler

from crawler.config import from_dict
from crawler.control import control_token
from crawler.node import Node
from crawler.testweb import TestWebServer, WebParams
from crawler.testweb.audit import ROBOTS_PATH, read_access_log

WEB = WebParams(hosts=4, pages=60, seed=5, crawl_delay_hosts=0.0, bad_host=False, slow_host=False, trap=False)
STEP_TIMEOUT_S = 20.0
SECRET_ENV, SECRET_VALUE = next(iter(SECRET.items()))
TOKEN = control_token(SECRET_VALUE.encode())


def two_node_config(tmp_path, seeds: list[str]) -> dict:
    return {"cluster": {"name": "console", "secret_env": SECRET_ENV, "nodes": [
                {"id": i, "host": "127.0.0.1", "peer_port": free_port(), "metrics_port": free_port()}
                for i in range(2)]},
            "crawl": {"seeds": seeds, "data_dir": str(tmp_path / "node-{node}")},
            "workers": 4, "fetch": {"dns": {"overrides": {f"*.{WEB.domain}": "127.0.0.1"}}},
            "politeness": {"min_delay_s": 0.05}, "metrics": {"progress_interval_s": 0}}


async def _until(predicate, what: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_console_serves_the_page_the_cluster_view_and_relays_changes(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET_VALUE)
    log_path = tmp_path / "access.log.jsonl"
    async with TestWebServer(WEB, log_path) as server:
        seeds = [f"http://{h.name}:{server.port}/" for h in server.web.hosts]
        raw = two_node_config(tmp_path, seeds)
        config = from_dict(raw)
        node = Node(config, 0)
        run = asyncio.create_task(node.run())
        base = f"http://127.0.0.1:{raw['cluster']['nodes'][0]['metrics_port']}"
        pages = lambda: [r for r in read_access_log(log_path) if r.path != ROBOTS_PATH]  # noqa: E731
        try:
            await _until(lambda: len(pages()) >= 5, "node 0's first pages")
            async with aiohttp.ClientSession() as session:
                # The page and its files, with the policy that keeps anything else out.
                for path, kind in (("/", "text/html"), ("/console/console.js", "text/javascript"),
                                   ("/console/console.css", "text/css")):
                    async with session.get(base + path) as resp:
                        assert resp.status == 200 and resp.content_type == kind
                        assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
                        assert len(await resp.read()) > 500

                async with session.get(base + "/console/cluster") as resp:
                    view = await resp.json()
                assert view["cluster"] == "console" and view["here"] == 0
                up, down = view["nodes"]
                assert up["up"] and up["pages"] > 0 and not up["console_error"]
                assert not down["up"] and "refused" in down["reason"], down
                assert view["total"]["reason"] == "1/2 up" and view["state"] == "running"
                assert view["busiest"] and all(h["node"] == 0 for h in view["busiest"])
                assert len(view["rate"]["total"]) == len(view["rate"]["nodes"]["0"]) > 0

                # Changes: no token, a wrong one, an unknown command; then pause, relayed to both nodes.
                url = base + "/console/cluster/pause"
                async with session.post(url) as resp:
                    assert resp.status == 401
                async with session.post(url, headers={"Authorization": "Bearer " + "0" * 64}) as resp:
                    assert resp.status == 403
                auth = {"Authorization": f"Bearer {TOKEN}"}
                async with session.post(base + "/console/cluster/stop", headers=auth) as resp:
                    assert resp.status == 404                       # not from the page
                async with session.post(url, headers=auth) as resp:
                    assert resp.status == 200
                    answer = await resp.json()
                assert [(a["node"], a["ok"]) for a in answer["nodes"]] == [(0, True), (1, False)]
                assert "refused" in answer["nodes"][1]["error"]
                assert node.control.paused
                async with session.get(base + "/console/cluster") as resp:
                    assert (await resp.json())["state"] == "paused"      # no stale view after a change
                seed = f"http://{server.web.hosts[0].name}:{server.port}/console-seed"
                async with session.post(base + "/console/cluster/seeds", headers=auth, json={"urls": [seed]}) as resp:
                    assert (await resp.json())["nodes"][0]["result"]["received"] == 1
                async with session.post(base + "/console/cluster/block", headers=auth,
                                        json={"pattern": "not a host"}) as resp:
                    assert "not a host name" in (await resp.json())["nodes"][0]["error"]
                async with session.post(base + "/console/cluster/resume", headers=auth) as resp:
                    assert (await resp.json())["nodes"][0]["ok"]
                assert not node.control.paused
        finally:
            node.stop("SIGTERM")
            await asyncio.wait_for(run, STEP_TIMEOUT_S)


def test_ctl_token_prints_the_token_the_nodes_expect(tmp_path):
    config = write_config(tmp_path / "c.yaml", {"cluster": {"secret_env": SECRET_ENV, "nodes": [
        {"id": 0, "peer_port": free_port(), "metrics_port": free_port()}]},
        "crawl": {"seeds": ["http://a.test/"], "data_dir": str(tmp_path / "d")}})
    code, out, err = run_crawler(["ctl", "-c", str(config), "token"], timeout_s=30, env=SECRET)
    assert (code, out) == (0, [TOKEN]), err
    code, out, err = run_crawler(["ctl", "-c", str(config), "token"], timeout_s=30, env={SECRET_ENV: ""})
    assert code == 2 and "secret" in err

"""A crawl changes its node count twice, 2 -> 3 -> 2 (`crawler resize`), and is judged from outside.

Each phase crawls until `crawl.max_pages` stops it (the last runs to the
end), then `crawler resize` runs while nothing crawls. Two shapes: on this
machine's loopback (`crawler cluster` and `crawler resize` run every node),
and with every node in a network namespace of its own, each node's
`crawler run` and `crawler resize` started there with only its own data_dir
(nothing reaches another node but over the virtual network). The nodes fetch
from their own addresses, so the test web's access log tells which node
fetched what: across the phases the crawl fetches exactly the manifest,
nothing twice (robots.txt included: it moves with its host); within each
phase every host only from its owner under that phase's partition; never
two requests to a host at once, and the politeness delays hold across the
changes (the new owner waits what the old owner's last response earned).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from tests.integration import netns
from tests.support.configs import SECRET, cluster_config, write_config
from tests.support.crawls import crawl_log, politeness_shortfalls
from tests.support.fixtures import REPO
from tests.support.processes import run_crawler

from crawler.splitter import Partitioner
from crawler.testweb.audit import Request, compare, overlaps
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

MAX_PAGES = 35            # per node and phase: the first two phases stop midway
WEB = ["--hosts", "40", "--pages", "400", "--no-slow-host", "--stall-s", "0.3"]   # a short stall: a short wait after it
RUN_TIMEOUT_S = 300
SHAPES = (2, 3, 2)


def _with_nodes(base: dict, nodes: int, max_pages: int) -> dict:
    config = copy.deepcopy(base)
    config["cluster"]["nodes"] = config["cluster"]["nodes"][:nodes]
    config["crawl"]["max_pages"] = max_pages
    return config


def _chain(tmp: Path, web: TestWebProcess, base: dict, crawl: Callable[[Path], list[dict]],
           resize: Callable[[Path, Path], dict]) -> dict:
    """The three phases and the two resizes between them; what the test web and the nodes recorded."""
    base["cluster"]["partition"] = "rendezvous"
    configs = [write_config(tmp / f"phase{i}.yaml", _with_nodes(base, n, MAX_PAGES if i < 2 else 0))
               for i, n in enumerate(SHAPES)]
    phases, resizes, bounds = [], [], []
    for i, config in enumerate(configs):
        t0 = time.monotonic()
        if i:
            resizes.append(resize(config, configs[i - 1]))
        t1 = time.monotonic()
        bounds.append(len(web.requests()))
        phases.append(crawl(config))
        print(f"phase {i}: resize {t1 - t0:.1f} s, crawl {time.monotonic() - t1:.1f} s")      # shown with -s
    requests = web.requests()
    bounds.append(len(requests))
    records = [r for i in range(3) for r in crawl_log(tmp / "data" / f"node-{i}" / "crawl.log.jsonl")]
    states = [json.loads((tmp / "data" / f"node-{i}" / "state.json").read_text()) for i in range(3)]
    return {"phases": phases, "resizes": resizes, "requests": requests, "bounds": bounds,
            "manifest": web.manifest(), "records": records, "states": states}


def _loopback(tmp: Path) -> dict:
    def crawl(config: Path) -> list[dict]:
        code, out, err = run_crawler(["cluster", "-c", str(config), "--progress-interval", "0"],
                                     timeout_s=RUN_TIMEOUT_S, env=SECRET)
        assert code == 0, err[-3000:]
        lines = [json.loads(line) for line in out if line.startswith("{")]
        return lines[:-1]

    def resize(new: Path, old: Path) -> dict:
        code, out, err = run_crawler(["resize", "-c", str(new), "--from", str(old)], timeout_s=RUN_TIMEOUT_S,
                                     env=SECRET)
        assert code == 0, err[-3000:]
        return json.loads(out[-1])

    with TestWebProcess(tmp / "web", WEB) as web:
        return _chain(tmp, web, cluster_config(tmp, web.info["seeds"]), crawl, resize)


def _in_namespaces(tmp: Path, switch: netns.Switch) -> dict:
    switch.add_host("web", 1)
    hosts = [switch.add_host(f"n{i}", 10 + i) for i in range(max(SHAPES))]
    web_addr = switch.hosts["web"][1]
    env = dict(os.environ, PYTHONPATH=str(REPO), **SECRET)

    def each(config: Path, args: list[str]) -> list[str]:
        """`crawler ARGS --node I` for every node of `config`, each in its own namespace; their last lines."""
        names = [f"n{i}" for i in range(len(yaml.safe_load(config.read_text())["cluster"]["nodes"]))]
        outs = switch.run_each(names, [sys.executable, "-m", "crawler", *args], env, RUN_TIMEOUT_S)
        return [out.splitlines()[-1] for out in outs]

    def crawl(config: Path) -> list[dict]:
        return [json.loads(line) for line in each(config, ["run", "-c", str(config)])]

    def resize(new: Path, old: Path) -> dict:
        n_old = len(yaml.safe_load(old.read_text())["cluster"]["nodes"])
        n_new = len(yaml.safe_load(new.read_text())["cluster"]["nodes"])
        widest = new if n_new >= n_old else old           # every participant: the dropped ones too
        rows = [json.loads(line) for line in each(widest, ["resize", "-c", str(new), "--from", str(old)])]
        return {"from_nodes": n_old, "to_nodes": n_new, "failed": [],
                **{f"moved_{k}": sum(r[f"sent_{k}"] for r in rows) for k in ("hosts", "queued", "seen", "robots")}}

    args = ["--bind", web_addr, "--port", "8080", *WEB]
    with TestWebProcess(tmp / "web", args, command_prefix=switch.prefix("web")) as web:
        base = netns.cluster_config("netns", next(iter(SECRET)), hosts, web_addr, web.info["seeds"], tmp / "data")
        result = _chain(tmp, web, base, crawl, resize)
    result["addresses"] = [addr for _, addr in hosts]
    return result


@pytest.fixture(scope="module", params=["loopback", "namespaces"])
def resized_crawl(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"resize-{request.param}")
    if request.param == "loopback":
        result = _loopback(tmp)
        result["addresses"] = [f"127.0.0.{i + 1}" for i in range(max(SHAPES))]
        yield result
        return
    reason = netns.available()
    if reason:
        print(reason)
        pytest.skip(reason)
    switch = netns.Switch()
    try:
        yield _in_namespaces(tmp, switch)
    finally:
        switch.close()


def test_the_crawl_fetches_exactly_the_manifest_once_across_both_changes(resized_crawl):
    stops = [{n["stop"] for n in phase} for phase in resized_crawl["phases"]]
    assert stops == [{"max_pages"}, {"max_pages"}, {"done"}]
    result = compare(resized_crawl["requests"], resized_crawl["manifest"])
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], list(result.duplicates)[:5])


def test_each_phase_fetches_a_host_only_from_its_owner(resized_crawl):
    requests: list[Request] = resized_crawl["requests"]
    bounds, addresses = resized_crawl["bounds"], resized_crawl["addresses"]
    for phase, nodes in enumerate(SHAPES):
        owner = Partitioner(nodes, "rendezvous").owner
        window = requests[bounds[phase]:bounds[phase + 1]]
        assert window, f"phase {phase} fetched nothing"
        wrong = [(r.host, r.peer) for r in window if r.peer != addresses[owner(r.host)]]
        assert wrong == [], (phase, wrong[:5])
    assert {r.peer for r in requests[bounds[1]:bounds[2]]} == set(addresses)


def test_politeness_holds_across_the_changes(resized_crawl):
    requests, manifest = resized_crawl["requests"], resized_crawl["manifest"]
    assert overlaps(requests) == []
    assert politeness_shortfalls(requests, manifest, resized_crawl["records"], delay_factor=10) == []


def test_what_moved_and_what_the_data_dirs_say(resized_crawl):
    grow, shrink = resized_crawl["resizes"]
    assert (grow["from_nodes"], grow["to_nodes"], shrink["from_nodes"], shrink["to_nodes"]) == (2, 3, 3, 2)
    assert grow["failed"] == [] and shrink["failed"] == []
    for moved in (grow, shrink):
        assert moved["moved_hosts"] > 0 and moved["moved_seen"] > 0 and moved["moved_robots"] > 0
    states = resized_crawl["states"]
    assert [s["nodes"] for s in states] == [2, 2, 3]
    assert states[2]["finished"] and states[2]["handed_over"]["to_nodes"] == 2      # dropped: never resumed
    assert states[0]["resized"]["from_nodes"] == 3 and states[0]["finished"]

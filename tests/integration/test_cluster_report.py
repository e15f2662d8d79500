"""`crawler report` on a 3-node crawl of the test web, checked against the server's access log and /metrics.

One crawl runs to its end (the nodes linger with /metrics up): during it the
live report (`GET /control/report` of every node) is read again and again and
must never go down; at its end the live report, each node's `/metrics`
(`crawler_crawl_pages`), the nodes' summaries and `crawler report` from the
data_dirs must all give the access log's per-host page and status counts.
A second crawl SIGKILLs one node mid-crawl (its last checkpoint long past,
so its totals must come back from its crawl log) and resumes it: the same
equalities, except that a request the kill cut (reached the server, no
answer recorded) is in the access log and in no count of the crawler.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import yaml
from tests.support.configs import NODES, SECRET, cluster_config, write_config
from tests.support.crawls import page_requests
from tests.support.processes import run_crawler, start_crawler, stop_process, wait_until

from crawler.config import load
from crawler.frontier.journal import journals_from, latest_checkpoint, read_checkpoint, read_journal
from crawler.reports.build import ClusterReport
from crawler.reports.collect import live_nodes
from crawler.testweb.audit import ROBOTS_PATH
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

WEB = ["--hosts", "8", "--pages", "160", "--no-trap", "--no-slow-host", "--no-bad-host", "--crawl-delay-hosts", "0",
       "--stall-s", "1"]
CRAWL_TIMEOUT_S = 90.0
REPORT_TIMEOUT_S = 30.0
LINGER_S = 60.0               # the nodes keep /metrics up after the crawl; the test stops them
SAMPLE = re.compile(r'^crawler_crawl_pages\{kind="page",status_class="(\w+)"\} ([0-9.e+]+)$', re.M)


def start(config: Path, node: int, tmp: Path) -> subprocess.Popen:
    out = (tmp / f"node-{node}.stdout").open("ab")
    err = (tmp / f"node-{node}.stderr").open("ab")
    return start_crawler(["run", "-c", str(config), "--node", str(node)], stdout=out, stderr=err, env=SECRET)


def get_json(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return json.loads(resp.read())


def all_done(ports: list[int]) -> bool:
    try:
        return all(get_json(p, "/control/status")["stop"] == "done" for p in ports)
    except OSError:
        return False


def metrics_pages(port: int) -> Counter:
    """crawler_crawl_pages{kind="page"} by status class: the crawl's totals across restarts."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return Counter({cls: int(float(n)) for cls, n in SAMPLE.findall(text)})


def access_counts(web: TestWebProcess) -> tuple[Counter, Counter, Counter]:
    """From the server's log: page requests per host, robots.txt requests per host, page requests per
    (host, status class)."""
    pages: Counter = Counter()
    robots: Counter = Counter()
    classes: Counter = Counter()
    for r in web.requests():
        if r.path == ROBOTS_PATH:
            robots[r.host] += 1
        else:
            pages[r.host] += 1
            classes[(r.host, f"{r.status // 100}xx")] += 1
    return pages, robots, classes


def report_counts(rows: list[dict]) -> tuple[Counter, Counter, Counter]:
    pages = Counter({r["host"]: r["fetched"] for r in rows if r["fetched"]})
    robots = Counter({r["host"]: r["robots_fetches"] for r in rows if r["robots_fetches"]})
    classes = Counter({(r["host"], c): r[f"status_{c}"] for r in rows for c in ("1xx", "2xx", "3xx", "4xx", "5xx")
                       if r[f"status_{c}"]})
    return pages, robots, classes


def live_report(config_path: Path) -> ClusterReport:
    nodes, missing = live_nodes(load(config_path), 5.0)
    assert not missing, missing
    return ClusterReport.of(nodes, [], "live")


def cut_by_kill(frontier_dir: Path) -> Counter:
    """Host -> fetches in flight when the node was killed (journaled as started, not as finished): the
    server may have answered them while the crawler recorded nothing."""
    inflight: dict[str, str] = {}
    gen = 0
    path = latest_checkpoint(frontier_dir)
    if path is not None:
        cp = read_checkpoint(path)
        gen = cp.gen
        inflight.update({rec.name: rec.inflight for rec in cp.hosts if rec.inflight})
    for journal in journals_from(frontier_dir, gen):
        for row in read_journal(journal):
            if row[0] == "s":
                inflight[row[1]] = row[2]
            elif row[0] == "d":
                inflight.pop(row[1], None)
    return Counter(inflight)


def crawl(tmp: Path, kill: bool) -> None:
    with TestWebProcess(tmp / "web", WEB) as web:
        config = write_config(tmp / "crawl.yaml", cluster_config(
            tmp, web.info["seeds"], workers=8, politeness={"min_delay_s": 0.03},
            frontier={"checkpoint_interval_s": 3600 if kill else 0.5, "resume_wait_s": 0.2,
                      "confirm_interval_s": 0.2},
            metrics={"progress_interval_s": 0, "linger_s": LINGER_S}))
        ports = [n["metrics_port"] for n in yaml.safe_load(config.read_text())["cluster"]["nodes"]]
        procs = {i: start(config, i, tmp) for i in range(NODES)}
        cut: Counter = Counter()
        try:
            total = len(web.manifest().fetched)
            # The running crawl: the live report never goes down, and never says more than the server saw.
            last = 0
            wait_until(lambda: page_requests(web) >= total // 5, CRAWL_TIMEOUT_S, "a fifth of the pages")
            for _ in range(3):
                fetched = live_report(config).tally.pages_fetched()
                assert last <= fetched <= page_requests(web), (last, fetched)
                last = fetched
                time.sleep(0.3)
            if kill:
                victim = 1
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait(10)
                cut = cut_by_kill(tmp / "data" / f"node-{victim}" / "frontier")
                procs[victim] = start(config, victim, tmp)
            wait_until(lambda: all_done(ports), CRAWL_TIMEOUT_S, "the crawl's end")
            live = live_report(config)
            by_metrics: Counter = Counter()
            for port in ports:
                by_metrics.update(metrics_pages(port))
            for p in procs.values():
                p.send_signal(signal.SIGTERM)
            codes = {i: p.wait(30) for i, p in procs.items()}
        finally:
            for p in procs.values():
                stop_process(p)
        access_pages, access_robots, access_classes = access_counts(web)
    errs = {i: (tmp / f"node-{i}.stderr").read_text()[-2000:] for i in range(NODES)}
    assert codes == {i: 0 for i in range(NODES)}, errs
    if kill:       # its checkpoint was never due: what it fetched before the kill came back from its crawl log
        assert "crawl-log lines after the last checkpoint counted again" in errs[1], errs[1]
    summaries = [json.loads((tmp / f"node-{i}.stdout").read_text().splitlines()[-1]) for i in range(NODES)]

    code, out, err = run_crawler(["report", "-c", str(config), "--out", str(tmp / "report"), "--from", "data"],
                                 timeout_s=REPORT_TIMEOUT_S)
    assert code == 0, err
    rows = json.loads((tmp / "report" / "hosts.json").read_text())
    summary = json.loads(out[-1])
    pages, robots, classes = report_counts(rows)

    # The crawler's own counts agree with each other, whatever the kill did.
    assert summary["fetched"] == sum(s["pages"] for s in summaries) == live.tally.pages_fetched() \
        == sum(by_metrics.values()), (summary["fetched"], [s["pages"] for s in summaries], by_metrics)
    assert summary["status"] == dict(by_metrics)
    assert summary["fetches"] == sum(s["fetches"] for s in summaries)
    assert summary["robots_fetches"] == sum(s["robots_fetches"] for s in summaries)
    assert summary["bytes"] == sum(s["bytes"] for s in summaries)
    assert pages == Counter({h: r.fetched for h, r in live.tally.hosts.items() if r.fetched})
    assert summary["queued"] == 0 and all(r["queued"] == 0 for r in rows)
    # And with the server's log: equal, but for the requests a kill cut (answered, never recorded).
    assert sum(cut.values()) <= 8                     # at most one per worker
    # A robots.txt request to a name that does not resolve is counted and never reaches the server.
    unresolved = {r["host"] for r in rows if r["failures_by_reason"] and not r["fetched"]}
    robots = Counter({h: n for h, n in robots.items() if h not in unresolved})
    for counted, seen in ((pages, access_pages), (robots, access_robots)):
        short = {h: seen[h] - counted[h] for h in set(seen) | set(counted) if seen[h] != counted[h]}
        assert all(0 < n <= cut[h] for h, n in short.items()), (short, cut)
    if not kill:
        assert classes == access_classes
        assert pages == access_pages and robots == access_robots
    # The tables are all there, in both formats.
    for name in ("hosts", "status_codes", "mime_types", "seeds"):
        assert (tmp / "report" / f"{name}.csv").read_text().count("\n") == \
            len(json.loads((tmp / "report" / f"{name}.json").read_text())) + 1
    codes_rows = json.loads((tmp / "report" / "status_codes.json").read_text())
    assert sum(r["responses"] for r in codes_rows) == summary["fetched"]
    seeds = json.loads((tmp / "report" / "seeds.json").read_text())
    assert seeds and all(s["fetched"] == pages[s["seed"].split("/")[2].split(":")[0]] for s in seeds)


def test_report_equals_access_log_and_metrics(tmp_path):
    crawl(tmp_path, kill=False)


def test_report_after_sigkill_and_resume(tmp_path):
    crawl(tmp_path, kill=True)

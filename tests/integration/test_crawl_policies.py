"""Every host policy crawls the test web to exactly its manifest, politely (issue: two-level scheduling).

A policy only orders hosts that politeness already allows, so whatever it
ranks by -- oldest URL, expected pages per second, best quality, quality per
second -- the crawl must fetch the same set, nothing twice, never two requests
at once to a host and never sooner than its delay. Checked from the server's
access log. Some hosts are slow servers, so the estimates that `performance`
and `capability` rank by really differ between hosts; `quality` and
`capability` run once on the test web's oracle file and once on in-link
counts.
"""

from __future__ import annotations

import pytest
from tests.support.configs import one_node_config, write_config
from tests.support.crawls import crawl_log, last_json, politeness_shortfalls
from tests.support.processes import run_crawler

from crawler.testweb.audit import compare, overlaps
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

WEB_ARGS = ["--hosts", "24", "--pages", "900", "--no-bad-host", "--no-slow-host", "--no-nxdomain-links",
            "--host-latency-share", "0.3", "--host-slow-latency-min-s", "0.01", "--host-slow-latency-max-s", "0.04",
            "--quality-exponent", "1.0"]
DELAY_FACTOR = 3.0                      # Mercator's k, smaller than the default to keep the test short
CASES = [  # (host policy, URL policy, quality source)
    ("bfs", "fifo", "inlinks"),
    ("performance", "fifo", "inlinks"),
    ("quality", "quality", "oracle"),
    ("capability", "quality", "oracle"),
    ("capability", "quality", "inlinks"),
]


@pytest.mark.parametrize("host_policy,url_policy,quality", CASES, ids=["-".join(c) for c in CASES])
def test_policy_crawl_fetches_exactly_the_manifest_politely(tmp_path, host_policy, url_policy, quality):
    with TestWebProcess(tmp_path / "web", WEB_ARGS) as web:
        frontier = {"host_policy": host_policy, "url_policy": url_policy, "quality": quality}
        if quality == "oracle":
            frontier["quality_file"] = web.info["quality"]
        config = write_config(tmp_path / "crawl.yaml", one_node_config(
            tmp_path / "data" / "node-{node}", seeds_file=web.info["seeds"],
            workers=16,
            frontier=frontier,
            politeness={"delay_factor": DELAY_FACTOR},
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            metrics={"progress_interval_s": 0},
        ))
        code, out, err = run_crawler(["run", "-c", str(config)], timeout_s=300)
        assert code == 0, err[-2000:]
        summary = last_json(out)
        requests, manifest = web.requests(), web.manifest()
    result = compare(requests, manifest)
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], list(result.duplicates)[:5])
    assert summary["stop"] == "done" and summary["worker_errors"] == 0
    assert overlaps(requests) == []
    records = crawl_log(tmp_path / "data" / "node-0" / "crawl.log.jsonl")
    assert politeness_shortfalls(requests, manifest, records, delay_factor=DELAY_FACTOR) == []

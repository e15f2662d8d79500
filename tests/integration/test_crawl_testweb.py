"""One node crawls the synthetic test web (>= 100 hosts, >= 5,000 pages) end to end.

Everything is checked from outside: the server's access log against the web's
manifest (exact set, nothing twice, nothing robots.txt forbids, trap bounded,
politeness), the crawl log and WARC files on disk, the summary line.
"""

from __future__ import annotations

from collections import Counter

import pytest
from tests.support.configs import one_node_config, write_config
from tests.support.crawls import crawl_log, last_json, politeness_shortfalls
from tests.support.processes import run_crawler
from warcio.archiveiterator import ArchiveIterator

from crawler.config.schema import RobotsConfig
from crawler.testweb.audit import compare, overlaps
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crawl")
    web_args = ["--hosts", "100", "--pages", "5000", "--private-links", "--stall-s", "5",
                "--big-body-bytes", str(3 << 20)]
    with TestWebProcess(tmp / "web", web_args) as web:
        config = write_config(tmp / "crawl.yaml", one_node_config(
            tmp / "data" / "node-{node}", seeds_file=web.info["seeds"],
            workers=64,
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}},
                   "read_timeout_s": 2, "total_timeout_s": 15,
                   "max_connections": 16,          # well below the workers: fetches queue for a connection
                   "max_body_bytes": 2 << 20, "max_decoded_bytes": 8 << 20},
            metrics={"progress_interval_s": 0},
        ))
        code, out, err = run_crawler(["run", "-c", str(config)], timeout_s=400)
        assert code == 0, err[-3000:]
        yield {"summary": last_json(out), "requests": web.requests(), "manifest": web.manifest(),
               "log": crawl_log(tmp / "data" / "node-0" / "crawl.log.jsonl"), "data": tmp / "data" / "node-0"}


def test_fetches_exactly_the_manifest(crawl):
    manifest, requests = crawl["manifest"], crawl["requests"]
    assert len(manifest.hosts) >= 100 and len(manifest.fetched) >= 5000
    result = compare(requests, manifest)
    assert not result.missing, sorted(result.missing)[:10]
    assert not result.unexpected, sorted(result.unexpected)[:10]
    assert not result.duplicates, list(result.duplicates.items())[:10]
    assert not result.forbidden, sorted(result.forbidden)[:10]
    trap_requests = [r for r in requests if r.host.startswith("trap.")]
    assert 0 < len(trap_requests) <= manifest.trap_bound + 1      # + its robots.txt
    assert crawl["summary"]["fetches"] == len(manifest.fetched)
    assert crawl["summary"]["stop"] == "done"


def test_politeness_from_the_server_side(crawl):
    requests = crawl["requests"]
    assert overlaps(requests) == []
    problems = politeness_shortfalls(requests, crawl["manifest"], crawl["log"], delay_factor=10)
    assert problems == [], problems[:10]


def test_bad_input_is_counted_and_logged_never_fatal(crawl):
    summary, log, manifest = crawl["summary"], crawl["log"], crawl["manifest"]
    assert summary["worker_errors"] == 0
    fetched = [r for r in log if "dropped" not in r]
    reasons = Counter(r["reason"] for r in fetched)
    for reason in ("body_too_large", "decoded_too_large", "read_timeout", "dns_nxdomain", "private_address"):
        assert reasons[reason] >= 1, (reason, reasons)
    assert summary["errors_by_reason"] == {k: v for k, v in reasons.items()
                                           if k != "ok" and not k.startswith("robots_")}
    # A permanent failure (no such name, a private address) drops the origin's other URLs without a request,
    # each logged with the reason and counted apart from the fetches.
    dropped = Counter(r["reason"] for r in log if r.get("dropped") == "origin")
    assert summary["dropped"] == dict(dropped) and set(dropped) <= {"dns_nxdomain", "private_address"}
    assert all(r["status"] == 0 for r in log if "dropped" in r)
    # URLs the crawler must never send are in its log, never in the server's.
    logged_origins = {r["url"].rsplit("/", 1)[0] for r in log if r["reason"] in ("dns_nxdomain", "private_address")}
    for url in manifest.refused:
        assert any(url.startswith(o) for o in logged_origins), url
    # robots.txt answering 500 means: nothing else fetched on that host; its URLs wait (parked) until robots.txt
    # answers again (here after one 500, with Disallow: /), at the default back-off.
    robots500 = [r for r in crawl["requests"] if r.host.startswith("robots500.")]
    assert [(r.path, r.status) for r in robots500] == [("/robots.txt", 500), ("/robots.txt", 200)]
    assert robots500[1].start - robots500[0].end >= RobotsConfig().error_retry_s
    assert summary["robots_parked"] >= 1
    assert any(r["reason"] == "robots_fetched_disallowed" and "robots500." in r["url"] for r in log)
    # every fetch has one crawl-log line
    assert (sum(1 for r in fetched if r["kind"] == "page" and not r["reason"].startswith("robots_"))
            == summary["fetches"])


def test_warc_holds_every_response(crawl):
    responses = 0
    for path in sorted((crawl["data"] / "warc").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            responses += sum(1 for rec in ArchiveIterator(fh) if rec.rec_type == "response")
    with_status = sum(1 for r in crawl["log"] if r.get("status"))
    assert responses == with_status


def test_bad_config_stops_with_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("fetch:\n  read_timeout_s: soon\n")
    code, out, err = run_crawler(["run", "-c", str(bad)], timeout_s=60)
    assert code == 2
    assert "fetch.read_timeout_s" in err and str(bad) in err and "a number" in err

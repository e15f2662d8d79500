"""One node crawls the test web served over HTTPS too, with and without certificate verification.

The web (crawler/testweb) has HTTPS-only hosts, hosts that answer every
http:// URL with a 301 to https:// (robots.txt included), and three hosts
whose certificates fail: self-signed, expired, for another name. Its CA is
made per run and given to the crawler as an operator would, with
`fetch.tls.ca_file`. Judged from outside:

- verified: exactly the manifest (robots.txt once per origin: the answer a
  redirect leads to is cached for the target origin too), politely, no HTTP
  request ever reaches a bad-certificate host, and each of them is in the
  crawl log with its own reason (tls_untrusted, tls_expired,
  tls_hostname_mismatch), its later URLs dropped without a request;
- `fetch.tls.verify: false`: the bad-certificate hosts are crawled like any
  other (the manifest computed with --no-tls-verify).

The 3-node cluster crawls the same kind of web in test_cluster.py.
"""

from __future__ import annotations

from collections import Counter

import pytest
from tests.support.configs import one_node_config, write_config
from tests.support.crawls import crawl_log, last_json, politeness_shortfalls
from tests.support.processes import run_crawler

from crawler.testweb.audit import compare, overlaps
from crawler.testweb.process import TestWebProcess
from crawler.urls import origin_of

pytestmark = pytest.mark.slow
# The hostile bad and slow hosts are test_crawl_testweb's and test_cluster's (the cluster's web is HTTPS too):
# here they only added a 20-25 s tail of polite waiting to each crawl.
HTTPS_WEB = ["--hosts", "25", "--pages", "800", "--https-share", "0.25", "--https-redirect-share", "0.25",
             "--tls-bad-hosts", "--stall-s", "2", "--no-bad-host", "--no-slow-host"]
TLS_REASONS = {"tls_untrusted", "tls_expired", "tls_hostname_mismatch"}


def crawl(tmp, web_args: list[str], tls: dict) -> dict:
    with TestWebProcess(tmp / "web", web_args) as web:
        tls = {k: (web.info["ca_file"] if v == "CA" else v) for k, v in tls.items()}
        config = write_config(tmp / "crawl.yaml", one_node_config(
            tmp / "data" / "node-{node}", seeds_file=web.info["seeds"],
            workers=32,
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}, "tls": tls},
            metrics={"progress_interval_s": 0},
        ))
        code, out, err = run_crawler(["run", "-c", str(config)], timeout_s=400)
        assert code == 0, err[-3000:]
        return {"summary": last_json(out), "requests": web.requests(), "manifest": web.manifest(),
                "log": crawl_log(tmp / "data" / "node-0" / "crawl.log.jsonl"), "info": web.info}


def test_verified_https_crawl_is_exact_polite_and_refuses_bad_certificates(tmp_path):
    got = crawl(tmp_path, HTTPS_WEB, {"ca_file": "CA"})
    requests, manifest, log, summary = got["requests"], got["manifest"], got["log"], got["summary"]
    result = compare(requests, manifest)
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], result.duplicates,
                       sorted(result.forbidden)[:5])
    assert {r.scheme for r in requests} == {"http", "https"}
    assert overlaps(requests) == []
    assert politeness_shortfalls(requests, manifest, log, delay_factor=10) == []
    # No HTTP request reached a bad-certificate host; each is logged with its own reason.
    assert not [r for r in requests if r.host.startswith("tls-")]
    tls_lines = [r for r in log if r["reason"] in TLS_REASONS]
    by_host = {r["url"].split("/")[2].split(":")[0]: r["reason"] for r in tls_lines}
    assert by_host == {"tls-self-signed.web.test": "tls_untrusted", "tls-expired.web.test": "tls_expired",
                       "tls-wrong-name.web.test": "tls_hostname_mismatch"}
    assert all(r.get("detail") for r in tls_lines if "dropped" not in r)       # the library's message
    logged = {(origin_of(r["url"]), r["reason"]) for r in tls_lines}
    for url, reason in manifest.refusals.items():
        if reason in TLS_REASONS:
            assert (origin_of(url), reason) in logged, url
    assert set(summary["errors_by_reason"]) >= TLS_REASONS
    assert summary["fetches"] == len(manifest.fetched) and summary["worker_errors"] == 0
    assert summary["stop"] == "done"


def test_unverified_https_crawl_fetches_the_bad_certificate_hosts(tmp_path):
    got = crawl(tmp_path, [*HTTPS_WEB, "--no-tls-verify"], {"verify": False})
    requests, manifest, log = got["requests"], got["manifest"], got["log"]
    assert not manifest.rules.tls_verify
    result = compare(requests, manifest)
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], result.duplicates)
    hosts = Counter(r.host for r in requests if r.host.startswith("tls-"))
    assert set(hosts) == {"tls-self-signed.web.test", "tls-expired.web.test", "tls-wrong-name.web.test"}
    assert not [r for r in log if r["reason"] in TLS_REASONS]
    assert got["summary"]["stop"] == "done"

"""Three nodes crawl the test web as one cluster (`crawler cluster`), checked from outside.

The nodes bind their fetches to 127.0.0.1, 127.0.0.2 and 127.0.0.3, so the
server's access log tells which node fetched what: every host must be fetched
only from its owner's address, nothing twice across the cluster, exactly the
manifest, politely. The splitter's stream logs must round-trip through numpy
and agree with the nodes' own accounting. The web is served over HTTPS too
(HTTPS-only hosts, http -> https redirects, three bad certificates), its CA
given by `fetch.tls.ca_file`: robots.txt once per origin across the cluster,
each bad certificate refused by its owner with its own reason.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yaml
from tests.support.configs import NODES, SECRET, cluster_config, write_config
from tests.support.crawls import crawl_log, politeness_shortfalls
from tests.support.fixtures import REPO
from tests.support.ports import free_port
from tests.support.processes import run_crawler

from crawler.splitter import FLAG_CACHE_HIT, FLAG_CROSS, Partitioner, read_header, read_records
from crawler.testweb.audit import compare, overlaps
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster_crawl(tmp_path_factory):
    import json
    tmp = tmp_path_factory.mktemp("cluster")
    with TestWebProcess(tmp / "web", ["--hosts", "100", "--pages", "5000", "--private-links", "--stall-s", "4",
                                      "--https-share", "0.2", "--https-redirect-share", "0.2",
                                      "--tls-bad-hosts"]) as web:
        config = write_config(tmp / "crawl.yaml", cluster_config(tmp, web.info["seeds"], web.info["ca_file"]))
        code, out, err = run_crawler(["cluster", "-c", str(config), "--progress-interval", "0"], timeout_s=500,
                                     env=SECRET)
        assert code == 0, err[-3000:]
        lines = [json.loads(line) for line in out if line.startswith("{")]
        yield {"nodes": lines[:-1], "cluster": lines[-1], "requests": web.requests(), "manifest": web.manifest(),
               "tmp": tmp}


def test_cluster_fetches_exactly_the_manifest_once(cluster_crawl):
    manifest, requests = cluster_crawl["manifest"], cluster_crawl["requests"]
    result = compare(requests, manifest)
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], list(result.duplicates)[:5])
    summary = cluster_crawl["cluster"]
    assert summary["nodes"] == NODES and summary["failed_nodes"] == [] and summary["stop"] == ["done"]
    assert summary["fetches"] == len(manifest.fetched)
    assert all(s["fetches"] > 0 for s in cluster_crawl["nodes"])        # the work is really split


def test_bad_certificates_are_refused_by_their_owners_with_their_reasons(cluster_crawl):
    tmp, part = cluster_crawl["tmp"], Partitioner(NODES)
    assert not [r for r in cluster_crawl["requests"] if r.host.startswith("tls-")]
    expected = {"tls-self-signed.web.test": "tls_untrusted", "tls-expired.web.test": "tls_expired",
                "tls-wrong-name.web.test": "tls_hostname_mismatch"}
    for host, reason in expected.items():
        owner = part.owner(host)
        log = crawl_log(tmp / "data" / f"node-{owner}" / "crawl.log.jsonl")
        assert any(r["reason"] == reason and f"//{host}:" in r["url"] for r in log), (host, owner)
    assert {r.scheme for r in cluster_crawl["requests"]} == {"http", "https"}


def test_every_host_fetched_only_from_its_owner(cluster_crawl):
    part = Partitioner(NODES)
    peers_by_host = defaultdict(set)
    for r in cluster_crawl["requests"]:
        peers_by_host[r.host].add(r.peer)
    wrong = {h: p for h, p in peers_by_host.items() if p != {f"127.0.0.{part.owner(h) + 1}"}}
    assert wrong == {}


def test_cluster_politeness(cluster_crawl):
    requests, manifest, tmp = cluster_crawl["requests"], cluster_crawl["manifest"], cluster_crawl["tmp"]
    assert overlaps(requests) == []
    records = [rec for i in range(NODES) for rec in crawl_log(tmp / "data" / f"node-{i}" / "crawl.log.jsonl")]
    assert politeness_shortfalls(requests, manifest, records, delay_factor=10) == []


def test_splitter_accounting_and_stream_logs(cluster_crawl):
    tmp = cluster_crawl["tmp"]
    total_sent, total_received = 0, 0
    for s in cluster_crawl["nodes"]:
        sp = s["splitter"]
        # URLs sent to peers = cross-host URLs - splitter-cache hits
        assert sp["urls_sent"] == sp["cross"] - sp["cache_hits"]
        assert sp["largest_batch"] <= 50
        total_sent += sp["urls_sent"]
        total_received += s["urls_received"]
        files = sorted((tmp / "data" / f"node-{s['node']}" / "splitter-log").glob("*.log"))
        assert files
        header = read_header(files[0])
        assert (header.node_id, header.node_count) == (s["node"], NODES)
        rec = np.concatenate([read_records(f) for f in files])
        assert len(rec) == sp["local"] + sp["cross"]
        cross = (rec["flags"] & FLAG_CROSS) > 0
        assert int(cross.sum()) == sp["cross"]
        assert int(((rec["flags"] & FLAG_CACHE_HIT) > 0).sum()) == sp["cache_hits"]
        assert np.all((rec["dest"] != s["node"]) == cross)
    assert total_received == total_sent          # at-least-once, and no resends in a healthy run


def test_the_shipped_local_cluster_file_crawls_a_test_web(tmp_path):
    """config/cluster-local.yaml as docs/cluster.md runs it (only its ports made free for the test)."""
    shipped = yaml.safe_load((REPO / "config" / "cluster-local.yaml").read_text())
    for node in shipped["cluster"]["nodes"]:
        node["peer_port"], node["metrics_port"] = free_port(), free_port()
    shipped["metrics"]["progress_interval_s"] = 0
    config = tmp_path / "cluster-local.yaml"
    config.write_text(yaml.safe_dump(shipped))
    with TestWebProcess(tmp_path / "web", ["--hosts", "30", "--pages", "600", "--stall-s", "2"]) as web:
        assert Path(web.info["seeds"]) == tmp_path / shipped["crawl"]["seeds_file"]
        code, out, err = run_crawler(["cluster", "-c", str(config)], timeout_s=300,
                                     env={shipped["cluster"]["secret_env"]: "a-local-secret-0123456789"})
        assert code == 0, err[-3000:]
        requests, manifest = web.requests(), web.manifest()
    result = compare(requests, manifest)
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], list(result.duplicates)[:5])
    part = Partitioner(len(shipped["cluster"]["nodes"]))
    assert {r.peer for r in requests} == {"127.0.0.1", "127.0.0.2", "127.0.0.3"}
    assert all(r.peer == f"127.0.0.{part.owner(r.host) + 1}" for r in requests)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["node-0", "node-1", "node-2"]

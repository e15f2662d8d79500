"""Crawl scope across a 3-node cluster, checked from the test web's access log (docs/scope.md).

With `scope.max_hops: 2` the cluster fetches exactly the manifest's pages
within 2 links of the seeds (the manifest's BFS levels; redirects count as
links), less those an `exclude` pattern names (leaves of the crawl, so the
rest stays reachable), none of which is requested. A seed of scope `host`
leads to no other host, although its pages link to others. The crawl log
carries each fetch's `hops` and `via`.
"""

from __future__ import annotations

import json
import re

import pytest
from tests.support.configs import NODES, SECRET, cluster_config, write_config
from tests.support.crawls import crawl_log
from tests.support.processes import run_crawler

from crawler.testweb.audit import ROBOTS_PATH
from crawler.testweb.process import TestWebProcess
from crawler.urls import fingerprint

pytestmark = pytest.mark.slow

# Some hosts redirect http:// to https:// (each such link is one more hop to the page it names).
WEB = ["--hosts", "12", "--pages", "300", "--no-bad-host", "--no-slow-host", "--no-trap", "--stall-s", "1",
       "--https-share", "0.2", "--https-redirect-share", "0.2"]
MAX_HOPS = 2
EXCLUDE = r"/static/"                      # every page's script and hero image: leaves of the crawl
CRAWL_TIMEOUT_S = 120


def crawl(tmp, web, seeds_file, scope: dict) -> tuple[list[dict], list]:
    """Run the cluster to its end; its summary lines and the requests it made (the web serves both tests)."""
    before = len(web.requests())
    config = write_config(tmp / "crawl.yaml", cluster_config(tmp, str(seeds_file), web.info["ca_file"], scope=scope,
                                                             politeness={"delay_factor": 1}))
    code, out, err = run_crawler(["cluster", "-c", str(config), "--progress-interval", "0"],
                                 timeout_s=CRAWL_TIMEOUT_S, env=SECRET)
    assert code == 0, err[-3000:]
    return [json.loads(line) for line in out if line.startswith("{")], web.requests()[before:]


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with TestWebProcess(tmp_path_factory.mktemp("scope-web"), WEB) as w:
        yield w


def test_max_hops_and_exclude_fetch_exactly_the_manifest_within_the_hops(web, tmp_path):
    manifest = web.manifest()
    summaries, requests = crawl(tmp_path, web, web.info["seeds"], {"max_hops": MAX_HOPS, "exclude": [EXCLUDE]})
    excluded = {u for u in manifest.within(MAX_HOPS) if re.search(EXCLUDE, u)}
    expected = manifest.within(MAX_HOPS) - excluded
    assert excluded and len(manifest.fetched) > len(manifest.within(MAX_HOPS))   # both limits cut something
    assert any(s == 301 and manifest.hops[u] < MAX_HOPS for u, s in manifest.statuses.items())   # redirects inside
    pages = [r.url(manifest.port, manifest.tls_port) for r in requests if r.path != ROBOTS_PATH]
    assert len(pages) == len(set(pages))                                           # nothing fetched twice
    assert set(pages) == expected, (sorted(set(pages) - expected)[:5], sorted(expected - set(pages))[:5])
    assert summaries[-1]["stop"] == ["done"]
    nodes = summaries[:-1]
    assert sum(s["filter_rejected_by_reason"].get("hops", 0) for s in nodes) > 0
    assert sum(s["filter_rejected_by_reason"].get("exclude", 0) for s in nodes) > 0
    records = [r for i in range(NODES) for r in crawl_log(tmp_path / "data" / f"node-{i}" / "crawl.log.jsonl")
               if r["kind"] == "page"]
    by_url = {r["url"]: r for r in records}
    # Each page is logged at its link distance, except one fetched at the limit before a nearer path
    # reached it (docs/scope.md, same URL by two paths, 3): its line keeps the limit, its cut links went on.
    late = {u for u in expected if by_url[u]["hops"] != manifest.hops[u]}
    assert all(by_url[u]["hops"] == MAX_HOPS > manifest.hops[u] for u in late), \
        {u: (by_url[u]["hops"], manifest.hops[u]) for u in late}
    for r in records:
        if r["hops"]:           # the page that first linked it was fetched (a nearer path may have lowered hops)
            parents = [p for p in records if f"{fingerprint(p['url']):016x}" == r["via"]]
            assert parents and parents[0]["hops"] + 1 >= r["hops"], r
        else:
            assert r["via"] is None and r["url"] in manifest.seeds


def test_a_seed_of_scope_host_leads_to_no_other_host(web, tmp_path):
    manifest = web.manifest()
    seed = manifest.seeds[0]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{seed} scope=host\n")
    host = seed.split("/")[2].split(":")[0]
    links_out = {u for u in manifest.fetched if manifest.hops[u] == 1 and f"//{host}:" not in u}
    assert links_out                                   # the seed's own page links to other hosts
    summaries, requests = crawl(tmp_path, web, seeds, {})
    assert requests and {r.host for r in requests} == {host}
    assert sum(s["filter_rejected_by_reason"].get("scope", 0) for s in summaries[:-1]) > 0

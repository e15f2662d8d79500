"""One node crawls a web served by a real nginx, names resolved by aiodns through a real dnsmasq, at the defaults.

The web is the test web's static export (name-based virtual hosts); nginx
and dnsmasq run on loopback ports and are stopped by their PIDs. The checks
are the same as against the project's own server, from nginx's access log.

It is also the crawl that meets transient failures that never clear, at the
crawler's defaults: nginx answers 500 to robots500's robots.txt for ever, a
seed names a host dnsmasq refuses (REFUSED), another a port where nothing
listens. Each origin's URLs wait on the robots.txt back-off and are then
dropped; the crawl must end by itself within 3 minutes of its last
successful fetch.
"""

from __future__ import annotations

import time

import pytest
from tests.support.configs import one_node_config, write_config
from tests.support.crawls import crawl_log, last_json, politeness_shortfalls
from tests.support.ports import free_port
from tests.support.processes import require_binary, run_crawler
from tests.support.servers import Dnsmasq, Nginx

from crawler.config.schema import RobotsConfig
from crawler.testweb import CrawlRules, WebParams, build_web, expected_crawl
from crawler.testweb.audit import compare, overlaps, read_access_log
from crawler.testweb.static import export_static, nginx_command, nginx_conf

pytestmark = pytest.mark.slow
TRANSIENT_END_S = 180.0      # the bound: a crawl at the defaults ends within 3 minutes of its last page


def test_crawl_nginx_through_dnsmasq(tmp_path):
    nginx_bin = require_binary("nginx", "nginx")
    port = free_port()
    web = build_web(WebParams(hosts=100, pages=5000, seed=11, private_links=False))
    root = tmp_path / "root"
    export_static(web, root, port)
    logs = tmp_path / "logs"
    logs.mkdir()
    access, error = logs / "access.log.jsonl", logs / "error.log"
    conf = root / "nginx.conf"
    conf.write_text(nginx_conf(root, port, access, error, logs / "nginx.pid"))
    manifest = expected_crawl(web, port, CrawlRules(private_guard=False), static=True)
    seeds = tmp_path / "seeds.txt"
    never = [f"http://refused.example:{port}/", f"http://h000.web.test:{free_port()}/"]   # REFUSED; nobody listens
    seeds.write_text("\n".join(manifest.seeds + never) + "\n")

    with Dnsmasq(tmp_path, ["--address=/web.test/127.0.0.1"]) as dns, \
            Nginx(nginx_command(conf, root, error, nginx=nginx_bin), port):
        config = write_config(tmp_path / "crawl.yaml", one_node_config(
            tmp_path / "data" / "node-{node}", seeds_file=str(seeds),
            workers=64,
            # Names come from dnsmasq (no overrides), so the loopback answers must be allowed.
            fetch={"allow_private_networks": True, "read_timeout_s": 5,
                   "dns": {"nameservers": [dns.nameserver], "timeout_s": 1, "tries": 2}},
            metrics={"progress_interval_s": 0},
        ))
        code, out, err = run_crawler(["run", "-c", str(config)], timeout_s=400)
        ended = time.time()
        assert code == 0, err[-3000:]
        queried = dns.query_lines()
    summary = last_json(out)
    requests = read_access_log(access)
    last_ok = max(r.end for r in requests if 200 <= r.status < 300)
    assert ended - last_ok < TRANSIENT_END_S, (ended - last_ok, summary["robots_parked"])
    result = compare(requests, manifest)
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], list(result.duplicates)[:5],
                       sorted(result.forbidden)[:5])
    assert overlaps(requests) == []
    log = crawl_log(tmp_path / "data" / "node-0" / "crawl.log.jsonl")
    problems = politeness_shortfalls(requests, manifest, log, delay_factor=10, resolution_s=0.002)
    assert problems == [], problems[:10]
    assert summary["fetches"] == len(manifest.fetched) and summary["worker_errors"] == 0
    # The origins that never answered were tried 1 + robots.error_max_retries times, then dropped.
    records = [r for r in log if r["kind"] == "robots"]
    tries = 1 + RobotsConfig().error_max_retries
    for origin in [u.rstrip("/") for u in never] + [f"http://robots500.web.test:{port}"]:
        assert sum(1 for r in records if r["url"] == origin + "/robots.txt") == tries, origin
        assert any(r["reason"] == "robots_error_disallowed" and r["url"].startswith(origin + "/") for r in log), origin
    # Every host name went through dnsmasq, and the resolver's cache kept it to about one query per name.
    names = {line.split("] ", 1)[1].split(" from")[0] for line in queried}
    hosts = {r.host for r in requests}
    assert hosts <= names
    assert len(queried) <= 3 * len(names)

"""A real Prometheus scrapes a real 3-node crawl; its recording rules agree with the nodes' summaries.

The Prometheus configuration is generated from the project's own
`deploy/prometheus/prometheus.yml` (only the targets, the intervals and the
rules path are replaced) with the project's `rules.yml`, so what is tested is
what is deployed. The nodes linger (`metrics.linger_s`) after the crawl so
Prometheus scrapes their final values; the test then asks Prometheus's HTTP
API for the recorded series at a moment inside that window, when every node
had finished and was still up, and compares them with the JSON summaries the
nodes printed: pages exactly, hit rates to 1e-3.

`promtool` checks the configuration, the rules, the commented Kubernetes
example, and that every dashboard and docs query parses.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time

import pytest
import yaml
from tests.support.configs import NODES, SECRET, cluster_config, write_config
from tests.support.metrics_docs import (
    SAMPLE_SUFFIXES,
    dashboard_exprs,
    docs_promql_examples,
    documented_metrics,
    grafana_to_promql,
    recording_rules,
)
from tests.support.processes import require_binary, run_crawler
from tests.support.prometheus import CONFIG, JOB, RULES, Prometheus, moment_of_final_values, prometheus_config

from crawler.testweb.process import TestWebProcess

PROMTOOL = "promtool"
CLUSTER = "test"

LINGER_S = 8.0                  # a node serves /metrics this long after the crawl: ~8 scrapes
MIN_DELAY_S = 0.4               # per-host wait: the crawl lasts several scrapes even on an idle machine
CRAWL_TIMEOUT_S = 180.0
PROMTOOL_TIMEOUT_S = 30.0
HIT_RATE_TOLERANCE = 1e-3
# The test web: many small hosts, none slow or stalling, so the crawl takes seconds.
WEB_ARGS = ["--hosts", "60", "--pages", "600", "--no-slow-host", "--no-bad-host", "--no-trap",
            "--crawl-delay-hosts", "0"]
# Dashboard queries allowed to be empty after this crawl: nothing of the kind happened in it.
MAY_BE_EMPTY = ("crawler_filter_rejected_total", "crawler_peer_rejected_connections_total")


# --- promtool --------------------------------------------------------------------------------

def promtool(*args: str) -> subprocess.CompletedProcess:
    binary = require_binary(PROMTOOL, "prometheus")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=PROMTOOL_TIMEOUT_S)


def test_promtool_accepts_config_and_rules():
    for args in (("check", "config", str(CONFIG)), ("check", "rules", str(RULES))):
        result = promtool(*args)
        assert result.returncode == 0, result.stdout + result.stderr


def kubernetes_example() -> str:
    """The commented kubernetes_sd job of prometheus.yml, uncommented, in place of the static job."""
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "# - job_name: crawler")
    job = [re.sub(r"^  # ?", "  ", line) for line in lines[start:] if line.startswith("  #")]
    head = lines[:next(i for i, line in enumerate(lines) if line.strip() == "- job_name: crawler")]
    return "\n".join(head + job) + "\n"


def test_promtool_accepts_the_kubernetes_example(tmp_path):
    text = kubernetes_example()
    assert "kubernetes_sd_configs" in text
    data = yaml.safe_load(text)
    assert [j["job_name"] for j in data["scrape_configs"]] == [JOB]
    relabel = data["scrape_configs"][0]["relabel_configs"]
    node_rule = next(r for r in relabel if r.get("target_label") == "node")
    match = re.fullmatch(node_rule["regex"], "crawler-12")          # Prometheus anchors regexes
    assert match and match.expand(node_rule["replacement"].replace("$1", r"\1")) == "12"
    path = tmp_path / "prometheus.yml"
    path.write_text(text.replace("rules.yml", str(RULES)))
    result = promtool("check", "config", str(path))
    if "field kubernetes_sd_configs not found" in result.stdout + result.stderr:
        # Debian builds Prometheus without Kubernetes service discovery; the YAML was checked above.
        reason = f"{PROMTOOL} of this system has no kubernetes_sd_configs (Debian's build drops it)"
        print(reason)
        pytest.skip(reason)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_dashboard_and_docs_query_parses(tmp_path):
    """Each query becomes a recording rule of a scratch file, so promtool's PromQL parser judges it."""
    queries = [(f"dashboard: {title}", grafana_to_promql(expr)) for title, expr in dashboard_exprs()]
    queries += [(f"docs/metrics.md: {expr}", expr) for expr in docs_promql_examples()]
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "queries", "rules": [
        {"record": f"check:query_{i}:x", "expr": expr} for i, (_, expr) in enumerate(queries)]}]}))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(queries)} rules found" in result.stdout


# --- a real Prometheus scraping a real crawl --------------------------------------------------

@pytest.fixture(scope="module")
def scraped_crawl(tmp_path_factory):
    """Prometheus, then a 3-node crawl it scrapes; yields (prometheus, node summaries, cluster summary, t)."""
    require_binary("prometheus", "prometheus")
    tmp = tmp_path_factory.mktemp("prometheus")
    with TestWebProcess(tmp / "web", WEB_ARGS) as web:
        config = cluster_config(tmp, web.info["seeds"], politeness={"delay_factor": 2, "min_delay_s": MIN_DELAY_S},
                                metrics={"progress_interval_s": 0, "linger_s": LINGER_S})
        config["cluster"]["name"] = CLUSTER
        crawl_config = write_config(tmp / "crawl.yaml", config)
        prom = Prometheus(tmp, prometheus_config(config["cluster"]["nodes"], CLUSTER)).start()
        try:
            code, out, err = run_crawler(["cluster", "-c", str(crawl_config), "--progress-interval", "0"],
                                         timeout_s=CRAWL_TIMEOUT_S, env=SECRET)
            ended = time.time()
            assert code == 0, err[-3000:]
            lines = [json.loads(line) for line in out if line.startswith("{")]
            nodes, cluster = lines[:-1], lines[-1]
            assert len(nodes) == NODES and cluster["failed_nodes"] == []
            yield prom, nodes, cluster, moment_of_final_values(prom, ended, LINGER_S, NODES)
        finally:
            prom.stop()


@pytest.mark.slow
def test_every_node_was_up_and_scraped(scraped_crawl):
    prom, nodes, _, at = scraped_crawl
    assert prom.values(f'up{{job="{JOB}"}}', at, "node") == {str(i): 1.0 for i in range(NODES)}


@pytest.mark.slow
def test_pages_rules_equal_the_summaries(scraped_crawl):
    prom, nodes, cluster, at = scraped_crawl
    assert cluster["pages"] > 300
    assert prom.values("crawler:pages:sum", at, "node") == {str(s["node"]): s["pages"] for s in nodes}
    assert prom.values("crawler_cluster:pages:sum", at, "cluster") == {CLUSTER: cluster["pages"]}
    for s in nodes:                                  # pages by status class, and their shares
        shares = prom.values(f'crawler:status_class_share:ratio{{node="{s["node"]}"}}', at, "status_class")
        assert shares == pytest.approx({c: n / s["pages"] for c, n in s["status"].items()}, abs=1e-9)
    rates = prom.values("crawler:pages:rate1m", at, "node")
    assert set(rates) == {str(i) for i in range(NODES)}
    peak = prom.values("max_over_time(crawler_cluster:pages:rate1m[2m])", at, "cluster")
    assert peak[CLUSTER] > 0


@pytest.mark.slow
def test_hit_rate_rules_equal_the_summaries(scraped_crawl):
    prom, nodes, cluster, at = scraped_crawl
    measured = prom.values("crawler:cache_hit_rate:ratio", at, ("node", "cache"))
    expected = {(str(s["node"]), cache): hits / (hits + misses)
                for s in nodes for cache, (hits, misses) in s["cache_lookups"].items()}
    assert {k for k, _ in expected} == {str(i) for i in range(NODES)}
    assert {c for _, c in expected} == {"due", "splitter"}          # a cluster has cross-host traffic
    assert measured == pytest.approx(expected, abs=HIT_RATE_TOLERANCE)
    for node, cache in expected:                     # the rounded figures the summary prints
        assert round(measured[(node, cache)], 4) == pytest.approx(nodes[int(node)]["cache_hit_rates"][cache],
                                                                  abs=1e-4)
    totals = prom.values("crawler_cluster:cache_hit_rate:ratio", at, "cache")
    assert totals == pytest.approx(cluster["cache_hit_rates"], abs=HIT_RATE_TOLERANCE)
    # Over the last 5 minutes: a series per node and cache; NaN (0/0) where a counter had not moved
    # between two scrapes, as when all of a node's lookups of a cache came before its first scrape.
    recent = prom.values("crawler:cache_hit_rate:ratio_rate5m", at, ("node", "cache"))
    assert set(recent) == set(expected), recent
    assert all(math.isnan(v) or 0 <= v <= 1 for v in recent.values()), recent


@pytest.mark.slow
def test_error_ratio_rule_equals_the_summaries(scraped_crawl):
    prom, nodes, _, at = scraped_crawl
    measured = prom.values("crawler:fetch_errors:ratio", at, "node")
    expected = {str(s["node"]): s["errors"] / (s["fetches"] + s["robots_fetches"]) for s in nodes}
    assert measured == pytest.approx(expected, abs=1e-9)


@pytest.mark.slow
def test_peer_traffic_is_scraped(scraped_crawl):
    prom, nodes, _, at = scraped_crawl
    sent = prom.values("sum by (node) (crawler_peer_bytes_sent_total)", at, "node")
    assert sent == {str(s["node"]): s["peer_bytes_sent"] for s in nodes}
    received = prom.values("sum by (node) (crawler_peer_urls_received_total)", at, "node")
    assert received == {str(s["node"]): s["urls_received"] for s in nodes}


@pytest.mark.slow
def test_every_dashboard_query_answers(scraped_crawl):
    """Each panel's query runs on the real data; all but the kinds of event this crawl had none of return series."""
    prom, _, _, at = scraped_crawl
    empty = []
    for title, expr in dashboard_exprs():
        # Grafana's $__rate_interval is at least 4 scrape intervals; 1 minute covers the crawl here.
        if not prom.query(grafana_to_promql(expr), at):
            empty.append((title, expr))
    assert [e for e in empty if not any(name in e[1] for name in MAY_BE_EMPTY)] == []


@pytest.mark.slow
def test_documented_labels_match_the_cluster_series(scraped_crawl):
    """With peers, the per-peer families have series too: their labels are what docs/metrics.md says."""
    prom, _, _, at = scraped_crawl
    labels: dict[str, set[str]] = {}
    for r in prom.query('{__name__=~"crawler_.+", job="crawler"}', at):
        name = r["metric"]["__name__"]
        labels.setdefault(name, set()).update(r["metric"])
    scrape_labels = {"__name__", "job", "instance", "cluster", "node", "le", "quantile"}
    for doc in documented_metrics().values():
        for suffix in SAMPLE_SUFFIXES[doc.type]:
            if doc.name + suffix in labels:
                # A label the node sets itself that the scrape also adds is kept by Prometheus as exported_<name>.
                own = {k.removeprefix("exported_") for k in labels[doc.name + suffix] - scrape_labels}
                assert own == doc.labels, doc.name
    assert labels.get("crawler_peer_bytes_sent_total", set()) >= {"peer"}
    assert set(recording_rules()) >= {"crawler:pages:sum", "crawler:cache_hit_rate:ratio"}

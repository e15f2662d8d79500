"""docs/metrics.md, the recording rules and the Grafana dashboard agree with what a node exposes.

The exposed set comes from a real node: a small in-process crawl of the test
web, its /metrics read over HTTP while the node lingers. Families that have
no series on a single node (per-peer, per-reason) still show their
`# HELP`/`# TYPE` lines, so the set of names is complete even without peers.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import aiohttp
import pytest
from tests.support.crawls import LINGER_STOP_TIMEOUT_S, lingering_node
from tests.support.metrics_docs import (
    DOCS,
    PROMETHEUS_SERIES,
    SAMPLE_SUFFIXES,
    Exposed,
    dashboard,
    dashboard_exprs,
    docs_promql_examples,
    documented_metrics,
    documented_rules,
    parse_exposition,
    promql_metric_names,
    recording_rules,
)

from crawler.testweb import WebParams

# --- the exposed set, from a real node ----------------------------------------------------

async def _crawl_and_scrape(tmp: Path) -> str:
    params = WebParams(hosts=6, pages=80, seed=7, crawl_delay_hosts=0.0, bad_host=False, slow_host=False, trap=False)
    async with lingering_node(tmp, params, config_extra={"politeness": {"delay_factor": 1}}) as (node, _run):
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{node.metrics_server.port}/metrics",
                                   timeout=aiohttp.ClientTimeout(total=LINGER_STOP_TIMEOUT_S)) as resp:
                assert resp.status == 200
                return await resp.text()


@pytest.fixture(scope="module")
def exposed(tmp_path_factory) -> Exposed:
    text = asyncio.run(_crawl_and_scrape(tmp_path_factory.mktemp("metrics_docs")))
    result = parse_exposition(text)
    assert "crawler_pages_total" in result.types, text[:2000]
    return result


def _created_is_documented(name: str, types: dict[str, str], text: str) -> bool:
    """prometheus-client's `X_created` gauge of a counter or histogram X counts as documented if named."""
    return name.endswith("_created") and name[: -len("_created")] in types and name in text


# --- docs/metrics.md <-> the node ---------------------------------------------------------

def test_every_exposed_metric_is_documented(exposed):
    text = DOCS.read_text(encoding="utf-8")
    docs = documented_metrics(text)
    missing = sorted(n for n in exposed.types if n not in docs and not _created_is_documented(n, exposed.types, text))
    assert missing == [], f"exposed by a node but not documented in docs/metrics.md: {missing}"


def test_every_documented_metric_is_exposed(exposed):
    absent = sorted(set(documented_metrics()) - set(exposed.types))
    assert absent == [], f"documented in docs/metrics.md but not exposed by a node: {absent}"


def test_documented_types_and_labels_match(exposed):
    for name, doc in documented_metrics().items():
        assert doc.type == exposed.types.get(name), f"{name}: documented type {doc.type!r}"
        if name in exposed.labels:                  # labels are visible only on families with series
            assert doc.labels == exposed.labels[name], f"{name}: documented labels {sorted(doc.labels)}"


def test_every_metric_has_a_promql_example_that_reads_it(exposed):
    for name, doc in documented_metrics().items():
        assert doc.examples, f"{name}: no ```promql example"
        series = {name + suffix for suffix in SAMPLE_SUFFIXES[doc.type]}
        assert any(series & promql_metric_names(e) for e in doc.examples), f"{name}: examples do not read it"


def test_docs_examples_read_only_exposed_metrics_or_rules(exposed):
    known = exposed.sample_names() | set(recording_rules()) | PROMETHEUS_SERIES
    for expr in docs_promql_examples():
        assert promql_metric_names(expr) <= known, (expr, promql_metric_names(expr) - known)


# --- recording rules --------------------------------------------------------------------

def test_recording_rules_are_documented():
    assert documented_rules() == set(recording_rules())


def test_recording_rules_read_only_exposed_metrics(exposed):
    known = exposed.sample_names() | PROMETHEUS_SERIES
    for name, expr in recording_rules().items():
        assert promql_metric_names(expr) <= known, (name, promql_metric_names(expr) - known)


def test_recording_rule_names_follow_level_metric_operations():
    for name in recording_rules():
        level, metric, ops = name.split(":")
        assert level in ("crawler", "crawler_cluster") and metric and ops, name


# --- the Grafana dashboard -----------------------------------------------------------------

def test_dashboard_has_a_prometheus_datasource_variable_used_by_every_panel():
    dash = dashboard()
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", p["title"]


def test_dashboard_covers_the_issue():
    titles = " | ".join(title.lower() for title, _ in dashboard_exprs())
    for topic in ("pages/s", "bytes/s", "status class", "hit rate", "frontier", "due", "peer", "dns", "robots"):
        assert topic in titles, topic


def test_dashboard_reads_only_exposed_metrics_or_rules(exposed):
    known = exposed.sample_names() | set(recording_rules()) | PROMETHEUS_SERIES
    dash = dashboard()
    queries = [(title, expr) for title, expr in dashboard_exprs(dash)]
    queries += [(v["name"], v["definition"]) for v in dash["templating"]["list"] if v.get("definition")]
    for title, expr in queries:
        expr = re.sub(r"label_values\((.*),\s*\w+\)$", r"\1", expr)      # Grafana's variable query
        unknown = promql_metric_names(expr) - known
        assert not unknown, f"panel {title!r}: {sorted(unknown)} in {expr}"


def test_promql_name_extraction():
    assert promql_metric_names('sum by (node, le) (rate(a_total{x="b c"}[$__rate_interval])) / on (node) b') \
        == {"a_total", "b"}
    assert promql_metric_names("histogram_quantile(0.95, sum by (le) (rate(h_bucket[5m] offset 1m)))") == {"h_bucket"}
    assert promql_metric_names("x:y:ratio > 0.8 and ignoring (a) group_left z") == {"x:y:ratio", "z"}

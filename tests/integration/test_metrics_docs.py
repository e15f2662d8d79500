"""docs/metrics.md, the recording rules and the Grafana dashboard agree with what a node exposes.

The exposed set comes from a real node: a small in-process crawl of the test
web, its /metrics read over HTTP while the node lingers. Families that have
no series on a single node (per-peer, per-reason) still show their
`# HELP`/`# TYPE` lines, so the set of names is complete even without peers.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from tests.support.crawls import LINGER_STOP_TIMEOUT_S, lingering_node
from tests.support.fixtures import REPO

from crawler.testweb import WebParams

DOCS = REPO / "docs" / "metrics.md"
RULES = REPO / "deploy" / "prometheus" / "rules.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "dashboard.json"
PROMETHEUS_SERIES = {"up"}          # series Prometheus itself adds to every scrape
# Sample names a metric family of each type exposes (suffixes of the family name).
SAMPLE_SUFFIXES = {"counter": ("",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum"),
                   "summary": ("", "_count", "_sum"), "untyped": ("",)}
# Grafana's variables, replaced by something PromQL accepts.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$cluster": ".*", "$node": ".*"}


@dataclass
class Exposed:
    """What one node's /metrics said: family name -> type, and the label names seen per family."""
    types: dict[str, str]
    labels: dict[str, set[str]] = field(default_factory=dict)

    def sample_names(self) -> set[str]:
        return {name + suffix for name, kind in self.types.items() for suffix in SAMPLE_SUFFIXES[kind]}


def parse_exposition(text: str) -> Exposed:
    """Family names and types from the `# TYPE` lines (present even for families with no samples)."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    exposed = Exposed(types)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            family = next((n for n in types if s.name == n or s.name.startswith(n + "_")
                           and s.name[len(n):] in ("_bucket", "_count", "_sum")), s.name)
            exposed.labels.setdefault(family, set()).update(k for k in s.labels if k not in ("le", "quantile"))
    return exposed


@dataclass
class DocumentedMetric:
    name: str
    type: str
    labels: set[str]
    examples: list[str]


def documented_metrics(text: str | None = None) -> dict[str, DocumentedMetric]:
    """The `### \\`name\\`` sections of docs/metrics.md with their type, labels and PromQL examples."""
    text = DOCS.read_text(encoding="utf-8") if text is None else text
    out = {}
    for section in re.split(r"^### ", text, flags=re.MULTILINE)[1:]:
        head, _, body = section.partition("\n")
        name = head.strip().strip("`")
        body = re.split(r"^#{1,2} ", body, flags=re.MULTILINE)[0]
        kind = re.search(r"\*\*Type:\*\*\s*(\w+)", body)
        labels = re.search(r"\*\*Labels:\*\*(.*)", body)
        out[name] = DocumentedMetric(
            name=name, type=kind.group(1) if kind else "",
            labels=set(re.findall(r"`(\w+)`", labels.group(1))) if labels else set(),
            examples=[e.strip() for e in re.findall(r"```promql\n(.*?)```", body, re.DOTALL)])
    return out


def documented_rules(text: str | None = None) -> set[str]:
    text = DOCS.read_text(encoding="utf-8") if text is None else text
    return set(re.findall(r"^\| `([a-z_]+:[a-z_0-9:]+)` \|", text, re.MULTILINE))


def docs_promql_examples(text: str | None = None) -> list[str]:
    """Every ```promql block of the page, one expression per non-comment line group."""
    text = DOCS.read_text(encoding="utf-8") if text is None else text
    exprs = []
    for block in re.findall(r"```promql\n(.*?)```", text, re.DOTALL):
        for chunk in re.split(r"\n\s*\n", block):
            expr = "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("#")).strip()
            if expr:
                exprs.append(expr)
    return exprs


def recording_rules() -> dict[str, str]:
    """record name -> expr, from deploy/prometheus/rules.yml."""
    data = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return {r["record"]: r["expr"] for g in data["groups"] for r in g["rules"]}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def dashboard_exprs(dash: dict | None = None) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel (rows' nested panels included)."""
    dash = dashboard() if dash is None else dash
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", ""), t["expr"]))
            walk(p.get("panels", []))

    walk(dash["panels"])
    return out


def grafana_to_promql(expr: str) -> str:
    """A dashboard expression with Grafana's variables replaced, so Prometheus can parse it."""
    for var, value in sorted(GRAFANA_VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace("${" + var[1:] + "}", value).replace(var, value)
    return expr


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
             "unless", "inf", "nan", "atan2"}


def promql_metric_names(expr: str) -> set[str]:
    """The metric (and recording rule) names an expression reads: not functions, labels or keywords."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)                     # string literals
    e = grafana_to_promql(e)
    e = re.sub(r"\{[^}]*\}", " ", e)                                  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)                                 # range and subquery windows
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.:])[A-Za-z_:][A-Za-z0-9_:]*", e):
        if e[m.end():].lstrip().startswith("(") or m.group().lower() in _KEYWORDS:
            continue                                                  # a function or a keyword
        names.add(m.group())
    return names


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

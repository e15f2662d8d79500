"""What docs/metrics.md, the recording rules and the Grafana dashboard name, and what a node exposes.

Readers shared by the metrics-docs test (one node's /metrics against the
page) and the Prometheus test (a real Prometheus evaluating the page's and
the dashboard's expressions).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import yaml
from prometheus_client.parser import text_string_to_metric_families
from tests.support.fixtures import REPO

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

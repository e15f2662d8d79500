"""A real Prometheus (the Debian `prometheus` binary) scraping test crawls with the project's own configuration.

`prometheus_config` starts from `deploy/prometheus/prometheus.yml` and replaces only the crawler
job's targets, the intervals and the rules path, so what the tests scrape with is what is deployed.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
from pathlib import Path

import yaml
from tests.support.configs import write_config
from tests.support.fixtures import REPO
from tests.support.netns import command_in, http_get
from tests.support.ports import free_port
from tests.support.processes import require_binary, stop_process

PROM_DIR = REPO / "deploy" / "prometheus"
CONFIG = PROM_DIR / "prometheus.yml"
RULES = PROM_DIR / "rules.yml"
JOB = "crawler"
SCRAPE_INTERVAL = "1s"
START_TIMEOUT_S = 20.0
QUERY_TIMEOUT_S = 5.0
POLL_S = 0.1


def prometheus_config(nodes: list[dict], cluster: str, rules: Path = RULES) -> dict:
    """The project's prometheus.yml with these nodes (id, host, metrics_port) as the crawler job's targets,
    labelled with `cluster`, and 1 s intervals."""
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config["global"].update(scrape_interval=SCRAPE_INTERVAL, scrape_timeout=SCRAPE_INTERVAL,
                            evaluation_interval=SCRAPE_INTERVAL)
    config["rule_files"] = [str(rules)]
    jobs = [j for j in config["scrape_configs"] if j["job_name"] == JOB]
    assert len(jobs) == 1, "prometheus.yml must have exactly one crawler job"
    jobs[0]["static_configs"] = [
        {"targets": [f"{n['host']}:{n['metrics_port']}"], "labels": {"cluster": cluster, "node": str(n["id"])}}
        for n in nodes]
    return config


class Prometheus:
    """The Debian `prometheus` binary on a free loopback port, storage in tmp; stopped by its PID.

    With `netns` it runs, scrapes and is queried inside that network namespace (its loopback),
    where targets published only there are reachable.
    """

    def __init__(self, tmp: Path, config: dict, netns: str | None = None) -> None:
        self.binary = require_binary("prometheus", "prometheus")
        self.netns = netns
        self.port = free_port()
        self.config_path = write_config(tmp / "prometheus.yml", config)
        self.log_path = tmp / "prometheus.log"
        self.args = [*command_in(netns), self.binary, f"--config.file={self.config_path}",
                     f"--storage.tsdb.path={tmp / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Prometheus:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                http_get(f"{self.url}/-/ready", 1.0, self.netns)
                return self
            except OSError:
                time.sleep(POLL_S)
        self.stop()
        raise RuntimeError(f"prometheus did not get ready: {self.log_path.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        stop_process(self.proc)

    def query(self, expr: str, at: float) -> list[dict]:
        """An instant query at Unix time `at`; the result vector (raises on an API error)."""
        qs = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
        body = json.loads(http_get(f"{self.url}/api/v1/query?{qs}", QUERY_TIMEOUT_S, self.netns))
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def values(self, expr: str, at: float, key: str | tuple[str, ...]) -> dict:
        """{label value (or tuple of them): float} of an instant query."""
        keys = (key,) if isinstance(key, str) else key
        out = {}
        for r in self.query(expr, at):
            k = tuple(r["metric"].get(k, "") for k in keys)
            out[k[0] if isinstance(key, str) else k] = float(r["value"][1])
        return out


def moment_of_final_values(prom: Prometheus, ended: float, linger_s: float, nodes: int) -> float:
    """A time when every node had finished its crawl, was up, and had been scraped and ruled on since.

    Every node finished at least `linger_s` before `ended` (the cluster's exit) and served /metrics
    until about then. Two intervals (a scrape, then a rule evaluation) after the last finish, the
    recorded series hold final values; the first such moment at which every target was up is taken
    (a scrape may time out on a busy machine). Falls back to the middle of the window.
    """
    interval_s = float(SCRAPE_INTERVAL.rstrip("s"))
    first, last = ended - linger_s + 2.5 * interval_s, ended - interval_s
    at = first
    while at <= last:
        if prom.values(f'count(up{{job="{JOB}"}} == 1)', at, "job") == {"": nodes}:
            return at
        at += interval_s / 2
    return ended - linger_s / 2

"""What the tests read of a crawl (its summary line, crawl log, access log) and in-process lingering nodes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml
from tests.support.configs import SECRET, cluster_config, one_node_config, write_config
from tests.support.processes import start_crawler

from crawler.config import from_dict
from crawler.node import Node
from crawler.testweb import TestWebServer, WebParams, build_web
from crawler.testweb.audit import END_LAG_TOLERANCE_S, ROBOTS_PATH, fetch_durations
from crawler.testweb.audit import politeness_shortfalls as audit_shortfalls
from crawler.testweb.process import TestWebProcess

LINGER_CRAWL_TIMEOUT_S = 60.0   # a lingering node's small crawl must finish within this
LINGER_STOP_TIMEOUT_S = 10.0    # and it must leave this soon after SIGTERM
LINGER_WORKERS = 8
LINGER_SEED_HOSTS = 3


def last_json(lines: list[str]) -> dict:
    assert lines, "no output"
    return json.loads(lines[-1])


def crawl_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def politeness_shortfalls(requests, manifest, crawl_records: list[dict], delay_factor: float,
                          min_delay_s: float = 0.0, end_tolerance_s: float = END_LAG_TOLERANCE_S,
                          resolution_s: float = 0.0) -> list[str]:
    """`crawler.testweb.audit.politeness_shortfalls` with the fetch times from crawl log records."""
    return audit_shortfalls(requests, manifest, fetch_durations(crawl_records), delay_factor, min_delay_s,
                            end_tolerance_s, resolution_s)


def page_requests(web: TestWebProcess) -> int:
    """Requests the test web has logged so far, robots.txt not counted."""
    return sum(1 for r in web.requests() if r.path != ROBOTS_PATH)


def start_test_cluster(tmp: Path, seeds: str, **extra: Any) -> tuple[Path, list[int], subprocess.Popen]:
    """The test cluster (`cluster_config`, `extra` its sections) as `crawler cluster` in the background, with
    its secret: stdout piped (the summary lines), stderr in tmp/cluster.err. (config, metrics ports, process);
    the caller stops the process (`stop_process`)."""
    config = write_config(tmp / "crawl.yaml", cluster_config(tmp, seeds, **extra))
    ports = [n["metrics_port"] for n in yaml.safe_load(config.read_text())["cluster"]["nodes"]]
    with (tmp / "cluster.err").open("wb") as err:
        proc = start_crawler(["cluster", "-c", str(config), "--progress-interval", "0"],
                             stdout=subprocess.PIPE, stderr=err, env=SECRET)
    return config, ports, proc


@contextlib.asynccontextmanager
async def lingering_node(tmp: Path, params: WebParams, *, config_extra: dict | None = None,
                         crawl_timeout_s: float = LINGER_CRAWL_TIMEOUT_S,
                         stop_timeout_s: float = LINGER_STOP_TIMEOUT_S) -> AsyncIterator[tuple[Node, asyncio.Task]]:
    """A single in-process node that crawled the test web `params` to the end and still serves /metrics.

    Yields (node, run task) once the crawl is finished; the node lingers (metrics.linger_s) until
    the block ends, when it is stopped by SIGTERM and awaited. A test may stop it earlier itself
    and await the task for the run's summary. `config_extra` adds top-level config keys.
    """
    web = build_web(params)
    async with TestWebServer(web, tmp / "access.log.jsonl") as server:
        seeds = tmp / "seeds.txt"
        seeds.write_text("".join(f"http://{h.name}:{server.port}/\n" for h in web.hosts[:LINGER_SEED_HOSTS]))
        sections = {"workers": LINGER_WORKERS, "fetch": {"dns": {"overrides": {f"*.{params.domain}": "127.0.0.1"}}},
                    "metrics": {"progress_interval_s": 0, "linger_s": crawl_timeout_s}, **(config_extra or {})}
        config = from_dict(one_node_config(tmp / "node-{node}", seeds_file=seeds, **sections))
        node = Node(config, 0)
        run = asyncio.create_task(node.run())
        try:
            await asyncio.wait_for(node.finished.wait(), crawl_timeout_s)
            yield node, run
        finally:
            node.stop("SIGTERM")
            await asyncio.wait_for(run, stop_timeout_s)

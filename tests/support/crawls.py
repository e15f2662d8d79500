"""What the tests read of a crawl (its summary line, crawl log, access log) and in-process lingering nodes."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

from tests.support.configs import one_node_config

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

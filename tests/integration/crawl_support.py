"""Helpers for integration tests that crawl a real test web with real nodes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import yaml

from crawler.config import from_dict
from crawler.node import Node
from crawler.testweb import TestWebServer, WebParams, build_web
from crawler.testweb.audit import END_LAG_TOLERANCE_S, fetch_durations
from crawler.testweb.audit import politeness_shortfalls as audit_shortfalls

REPO = Path(__file__).resolve().parents[2]
LINGER_CRAWL_TIMEOUT_S = 60.0   # a lingering node's small crawl must finish within this
LINGER_STOP_TIMEOUT_S = 10.0    # and it must leave this soon after SIGTERM
LINGER_WORKERS = 8
LINGER_SEED_HOSTS = 3


def write_config(path: Path, config: dict) -> Path:
    """Write a config file (the crawls of these tests run at the crawler's defaults but for what they set)."""
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_crawler(args: list[str], *, timeout_s: float, env: dict | None = None,
                cwd: Path | None = None) -> tuple[int, list[str], str]:
    """Run `python -m crawler ARGS` to completion; (exit code, stdout lines, stderr)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), full_env.get("PYTHONPATH", "")) if p)
    full_env.update(env or {})
    try:
        proc = subprocess.run([sys.executable, "-m", "crawler", *args], capture_output=True, text=True,
                              timeout=timeout_s, env=full_env, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        # subprocess shows only a clipped repr of what was read; the end of stderr says why.
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise AssertionError(f"crawler {' '.join(args)} did not end within {timeout_s} s; "
                             f"end of its stderr:\n{err[-6000:]}") from None
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


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
        config = from_dict({
            "cluster": {"nodes": [{"id": 0, "peer_port": 0, "metrics_port": 0}]},
            "crawl": {"seeds_file": str(seeds), "data_dir": str(tmp / "node-{node}")},
            "workers": LINGER_WORKERS, "fetch": {"dns": {"overrides": {f"*.{params.domain}": "127.0.0.1"}}},
            "metrics": {"progress_interval_s": 0, "linger_s": crawl_timeout_s},
            **(config_extra or {}),
        })
        node = Node(config, 0)
        run = asyncio.create_task(node.run())
        try:
            await asyncio.wait_for(node.finished.wait(), crawl_timeout_s)
            yield node, run
        finally:
            node.stop("SIGTERM")
            await asyncio.wait_for(run, stop_timeout_s)

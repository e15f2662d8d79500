"""SIGTERM mid-crawl: the node drains, checkpoints and exits 0; a restart finishes the crawl with
no page fetched twice; a third start on the finished crawl is refused until --fresh."""

from __future__ import annotations

import json
import signal
import time

import pytest
from tests.support.configs import one_node_config, write_config
from tests.support.crawls import last_json, page_requests
from tests.support.processes import run_crawler, start_node

from crawler.testweb.audit import ROBOTS_PATH, compare, overlaps
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

STOP_LIMIT_S = 30


def test_sigterm_drains_checkpoints_and_resumes_without_refetching(tmp_path):
    with TestWebProcess(tmp_path / "web", ["--hosts", "20", "--pages", "800", "--no-bad-host",
                                           "--no-slow-host"]) as web:
        total = len(web.manifest().fetched)
        config = write_config(tmp_path / "crawl.yaml", one_node_config(
            tmp_path / "data" / "node-{node}", seeds_file=web.info["seeds"], crawl={"drain_timeout_s": 10},
            workers=8,
            politeness={"min_delay_s": 0.03},
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            metrics={"progress_interval_s": 0},
        ))
        data = tmp_path / "data" / "node-0"
        proc = start_node(config, tmp_path / "node.stderr")
        deadline = time.monotonic() + 120
        while page_requests(web) < total // 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, (tmp_path / "node.stderr").read_text()[-2000:]
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(STOP_LIMIT_S)
        stop_s = time.monotonic() - t0
        assert code == 0, (tmp_path / "node.stderr").read_text()[-2000:]
        assert list((data / "frontier").glob("checkpoint-*.jsonl"))
        assert json.loads((data / "state.json").read_text())["finished"] is False
        stopped_at = page_requests(web)
        assert stopped_at < total

        code, out, err = run_crawler(["run", "-c", str(config)], timeout_s=300)
        assert code == 0, err[-3000:]
        summary = last_json(out)
        requests = web.requests()
        result = compare(requests, web.manifest())
        again, _, refusal = run_crawler(["run", "-c", str(config)], timeout_s=60)
    print(f"SIGTERM after {stopped_at} of {total} pages; stopped in {stop_s:.2f} s")
    assert not result.missing and not result.unexpected and not result.forbidden
    page_repeats = {url: n for url, n in result.duplicates.items() if not url.endswith(ROBOTS_PATH)}
    assert not page_repeats, list(page_repeats.items())[:10]      # a clean stop repeats nothing
    assert not overlaps(requests)
    assert summary["stop"] == "done"
    assert json.loads((data / "state.json").read_text())["finished"] is True
    assert again == 2 and "finished" in refusal and "--fresh" in refusal

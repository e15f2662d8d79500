"""A node killed with SIGKILL and restarted on its data_dir resumes its frontier.

Checked from the test web's access log: in the end every expected page is
fetched, nothing unexpected or forbidden, page re-fetches are bounded by the
fetches in flight at each kill (workers per kill) plus what the DUE counted
as emitted twice, and politeness held across the restarts (no overlapping
requests to a host, gaps at least min_delay_s).
"""

from __future__ import annotations

import signal
import time

import pytest
from tests.support.configs import one_node_config, write_config
from tests.support.crawls import last_json, page_requests
from tests.support.processes import run_crawler, start_node

from crawler.testweb.audit import ROBOTS_PATH, compare, overlaps, short_gaps
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

WORKERS = 8
MIN_DELAY_S = 0.03
KILLS = 3
WAIT_LIMIT_S = 120


def test_sigkill_and_restart_resumes_the_frontier(tmp_path):
    with TestWebProcess(tmp_path / "web", ["--hosts", "30", "--pages", "1500", "--no-bad-host",
                                           "--no-slow-host"]) as web:
        total = len(web.manifest().fetched)
        config = write_config(tmp_path / "crawl.yaml", one_node_config(
            tmp_path / "data" / "node-{node}", seeds_file=web.info["seeds"],
            workers=WORKERS,
            politeness={"min_delay_s": MIN_DELAY_S},
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            due={"buffer_size": 256, "flush_interval_s": 0.05},
            frontier={"checkpoint_interval_s": 0.5, "resume_wait_s": 0.3, "memory_urls": 200, "chunk_urls": 16},
            metrics={"progress_interval_s": 0},
        ))
        stderr_log = tmp_path / "node.stderr"
        killed_at = []
        for k in range(KILLS):
            target = total * (k + 1) // (KILLS + 2)
            proc = start_node(config, stderr_log)
            deadline = time.monotonic() + WAIT_LIMIT_S
            try:
                while page_requests(web) < target and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert proc.poll() is None, f"the node ended before the kill: {stderr_log.read_text()[-2000:]}"
                assert time.monotonic() < deadline, "the crawl made no progress"
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
            killed_at.append(page_requests(web))
        code, out, err = run_crawler(["run", "-c", str(config)], timeout_s=300)
        assert code == 0, err[-3000:]
        summary = last_json(out)
        requests = web.requests()
        result = compare(requests, web.manifest())
    assert killed_at == sorted(killed_at) and killed_at[-1] < total, killed_at
    assert not result.missing, sorted(result.missing)[:10]
    assert not result.unexpected and not result.forbidden
    page_repeats = sum(n - 1 for url, n in result.duplicates.items() if not url.endswith(ROBOTS_PATH))
    bound = KILLS * WORKERS + summary["due"]["duplicates_emitted"]
    print(f"kills after {killed_at} of {total} pages; page re-fetches {page_repeats} (bound {bound})")
    assert page_repeats <= bound, (page_repeats, bound, list(result.duplicates.items())[:10])
    assert "resumed" in err
    assert not overlaps(requests)
    assert not short_gaps(requests, MIN_DELAY_S, 0.0, tolerance_s=0.01)

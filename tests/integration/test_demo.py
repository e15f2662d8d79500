"""`crawler demo`, the README's first command, on a smaller web: it crawls the whole manifest with
3 nodes, finds politeness kept from the server's log, and says so with exit 0 and `"demo": "ok"`."""

from __future__ import annotations

import json

import pytest

from tests.integration.crawl_support import run_crawler

pytestmark = pytest.mark.slow


def test_demo_crawls_the_test_web_correctly(tmp_path):
    code, out, err = run_crawler(["demo", "--hosts", "30", "--pages", "1200", "--dir", str(tmp_path)],
                                 timeout_s=300)
    assert code == 0, err[-3000:]
    report = json.loads(out[-1])
    assert report["demo"] == "ok", report
    assert report["nodes"] == 3 and report["pages"] == report["expected_pages"] > 0
    assert report["missing"] == report["unexpected"] == report["fetched_twice"] == 0
    assert report["overlapping_requests"] == report["politeness_violations"] == 0
    assert any(line.startswith("node") and "splitter hits" in line for line in out)     # the table
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["node-0", "node-1", "node-2"]

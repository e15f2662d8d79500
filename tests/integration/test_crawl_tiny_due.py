"""A crawl with a tiny DUE buffer and a tiny front cache (many merges) still fetches exactly the manifest."""

from __future__ import annotations

import pytest
from tests.support.configs import one_node_config, write_config
from tests.support.crawls import last_json
from tests.support.processes import run_crawler

from crawler.testweb.audit import compare
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow


def test_tiny_buffer_and_cache_force_merges_and_lose_nothing(tmp_path):
    with TestWebProcess(tmp_path / "web", ["--hosts", "30", "--pages", "1500", "--no-bad-host",
                                           "--no-slow-host"]) as web:
        config = write_config(tmp_path / "crawl.yaml", one_node_config(
            tmp_path / "data" / "node-{node}", seeds_file=web.info["seeds"],
            workers=32,
            fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
            due={"buffer_size": 64, "flush_interval_s": 0.05, "cache": {"policy": "clock", "size": 16}},
            metrics={"progress_interval_s": 0},
        ))
        code, out, err = run_crawler(["run", "-c", str(config)], timeout_s=300)
        assert code == 0, err[-2000:]
        summary = last_json(out)
        result = compare(web.requests(), web.manifest())
    assert result.ok, (sorted(result.missing)[:5], sorted(result.unexpected)[:5], list(result.duplicates)[:5])
    assert summary["due"]["merges"] >= 20
    assert summary["due"]["disk_fingerprints"] == summary["new_urls"]
    assert summary["cache_hit_rates"]["due"] < 0.9        # the tiny cache really misses; the disk set decides

"""A node's /metrics endpoint, scraped for real over HTTP, agrees with its own summary."""

from __future__ import annotations

import asyncio

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from tests.support.crawls import LINGER_STOP_TIMEOUT_S, lingering_node

from crawler.testweb import WebParams


def samples(text: str) -> dict:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(values: dict, name: str, **labels) -> float:
    want = set(labels.items())
    return sum(v for (n, lab), v in values.items() if n == name and want <= set(lab))


async def test_metrics_endpoint_matches_summary(tmp_path):
    params = WebParams(hosts=8, pages=150, seed=5, bad_host=False, slow_host=False, trap=False)
    async with lingering_node(tmp_path, params) as (node, run):
        url = f"http://127.0.0.1:{node.metrics_server.port}/metrics"
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as resp:
                assert resp.status == 200
                assert resp.headers["Content-Type"].startswith("text/plain")
                values = samples(await resp.text())
            async with session.get(f"http://127.0.0.1:{node.metrics_server.port}/healthz") as resp:
                assert resp.status == 200
        node.stop("SIGTERM")                      # ends the linger early
        summary = await asyncio.wait_for(run, LINGER_STOP_TIMEOUT_S)
    assert summary["pages"] > 50
    assert total(values, "crawler_pages_total", kind="page") == summary["pages"]
    assert total(values, "crawler_bytes_total") == summary["bytes"]
    assert total(values, "crawler_fetch_duration_seconds_count") == summary["fetches"] + summary["robots_fetches"]
    hits = total(values, "crawler_cache_lookups_total", cache="due", result="hit")
    lookups = total(values, "crawler_cache_lookups_total", cache="due")
    assert round(hits / lookups, 4) == summary["cache_hit_rates"]["due"]
    assert total(values, "crawler_links_extracted_total") == summary["links"]
    assert total(values, "crawler_frontier_urls") == 0
    assert total(values, "crawler_splitter_urls_total", destination="0", kind="local") > 0
    # Where the CPU went: the phases add up to the whole, and crawling is most of it.
    phases = summary["cpu_phases_s"]
    assert set(phases) == {"start", "crawl", "finish"} and min(phases.values()) >= 0
    assert abs(sum(phases.values()) - summary["cpu_s"]) <= 0.005
    assert phases["crawl"] > phases["start"]
    assert 0 <= summary["due"]["merge_cpu_seconds"] <= summary["cpu_s"]

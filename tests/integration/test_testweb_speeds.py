"""Test-web servers of different speeds: per-host latency in the model, the server and the CLI."""

from __future__ import annotations

import time

import aiohttp
import numpy as np
import pytest

from crawler.testweb import TestWebServer, WebParams, build_web, read_access_log
from crawler.testweb.manifest import WebManifest
from crawler.testweb.model import MAX_HOST_LATENCY_S, Role
from crawler.testweb.pages import Renderer
from crawler.testweb.process import TestWebProcess
from crawler.testweb.quality import page_quality, read_oracle

SMALL = dict(hosts=12, pages=300, seed=9)
LATENT = dict(host_latency_share=0.25, host_slow_latency_min_s=0.2, host_slow_latency_max_s=1.0,
              host_fast_latency_min_s=0.01, host_fast_latency_max_s=0.02)
PORT = 8080


def test_default_web_delays_only_the_slow_host():
    web = build_web(WebParams(**SMALL))
    slow = web.special(Role.SLOW)
    assert web.latencies() == {slow.name: web.params.slow_delay_s}
    assert not build_web(WebParams(**SMALL, slow_host=False)).latencies()


def test_latency_changes_no_host_page_or_link():
    plain, latent = build_web(WebParams(**SMALL)), build_web(WebParams(**SMALL, **LATENT))
    assert [h.name for h in plain.hosts] == [h.name for h in latent.hosts]
    assert plain.url_path == latent.url_path
    for name in ("url_host", "url_kind", "link_off", "link_tgt", "link_form", "link_elem", "link_flags"):
        assert np.array_equal(getattr(plain, name), getattr(latent, name)), name
    a, b = Renderer(plain), Renderer(latent)
    for uid in range(0, plain.urls, 17):
        host = plain.hosts[int(plain.url_host[uid])]
        ra, rb = a.respond(host, plain.url_path[uid], PORT), b.respond(host, plain.url_path[uid], PORT)
        assert ra.body == rb.body and ra.status == rb.status
        assert rb.delay_s == latent.host_latency_s[host.index]


def test_latencies_are_drawn_from_the_seed_within_their_ranges():
    params = WebParams(hosts=40, pages=400, seed=3, slow_host=False, **LATENT)
    web = build_web(params)
    lat = web.host_latency_s[: params.hosts]
    slow = lat >= params.host_slow_latency_min_s
    assert slow.sum() == 10
    assert np.all((lat[slow] >= 0.2) & (lat[slow] <= 1.0))
    assert np.all((lat[~slow] >= 0.01) & (lat[~slow] <= 0.02))
    assert np.all(web.host_latency_s[params.hosts:] == 0.0)  # special hosts: none
    assert np.array_equal(build_web(params).host_latency_s, web.host_latency_s)
    other = build_web(WebParams(hosts=40, pages=400, seed=4, slow_host=False, **LATENT)).host_latency_s[:40]
    assert not np.array_equal(other >= 0.2, slow)


@pytest.mark.parametrize("bad", [
    dict(host_latency_share=1.5),
    dict(host_slow_latency_min_s=0.5, host_slow_latency_max_s=0.4),
    dict(host_fast_latency_min_s=-0.1),
    dict(host_slow_latency_max_s=MAX_HOST_LATENCY_S + 1),
])
def test_bad_latency_params_are_refused(bad):
    with pytest.raises(ValueError, match="latency"):
        build_web(WebParams(**SMALL, **bad))


async def _get(session: aiohttp.ClientSession, port: int, host: str, path: str) -> float:
    t = time.monotonic()
    async with session.get(f"http://127.0.0.1:{port}{path}", headers={"Host": f"{host}:{port}"},
                           allow_redirects=False) as resp:
        await resp.read()
        assert resp.status == 200
    return time.monotonic() - t


async def test_server_delays_every_response_of_a_slow_host(tmp_path):
    params = WebParams(hosts=6, pages=60, seed=2, slow_host=False, bad_host=False, trap=False,
                       host_latency_share=0.5, host_slow_latency_min_s=0.3, host_slow_latency_max_s=0.4)
    web = build_web(params)
    lat = web.latencies()
    assert len(lat) == 3 and all(0.3 <= v <= 0.4 for v in lat.values())
    slow = min(lat)
    fast = next(h.name for h in web.hosts[: params.hosts] if h.name not in lat)
    timeout = aiohttp.ClientTimeout(total=10)
    async with TestWebServer(web, tmp_path / "access.log.jsonl") as server:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            took = {(h, p): await _get(session, server.port, h, p)
                    for h in (slow, fast) for p in ("/robots.txt", "/")}
    for p in ("/robots.txt", "/"):
        assert took[(slow, p)] >= lat[slow] * 0.95
        assert took[(fast, p)] < 0.2
    log = {(r.host, r.path): r for r in read_access_log(tmp_path / "access.log.jsonl")}
    assert log[(slow, "/")].duration_s >= lat[slow] * 0.95 and log[(fast, "/")].duration_s < 0.2


def test_cli_writes_the_oracle_and_the_latencies(tmp_path):
    args = ["--hosts", "8", "--pages", "150", "--seed", "6", "--no-bad-host", "--no-trap", "--no-slow-host",
            "--host-latency-share", "0.5", "--host-slow-latency-min-s", "0.3", "--host-slow-latency-max-s", "0.5",
            "--quality-exponent", "1.5"]
    with TestWebProcess(tmp_path / "web", args) as tw:
        info = dict(tw.info)
        manifest = tw.manifest()
    params = WebParams(hosts=8, pages=150, seed=6, bad_host=False, trap=False, slow_host=False,
                       host_latency_share=0.5, host_slow_latency_min_s=0.3, host_slow_latency_max_s=0.5)
    web = build_web(params)
    assert manifest.host_latency_s == {h: v for h, v in web.latencies().items() if h in manifest.hosts}
    assert len(manifest.host_latency_s) == 4
    assert WebManifest.from_json(manifest.to_json()).host_latency_s == manifest.host_latency_s
    oracle = read_oracle(info["quality"])
    assert oracle == page_quality(web, manifest, exponent=1.5).as_dict()
    assert max(oracle.values()) == 1.0 and len(oracle) > 100

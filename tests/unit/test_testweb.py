"""Unit tests of the synthetic test web: generator statistics, determinism, rendering, manifest rules, audit."""

from __future__ import annotations

import gzip
import json
import re
import time
from collections import Counter
from urllib.parse import urlsplit

import numpy as np
import pytest
from protego import Protego

from crawler.testweb import audit, trap
from crawler.testweb.build import build_web
from crawler.testweb.cli import main as cli_main
from crawler.testweb.hostile import gzip_bomb
from crawler.testweb.manifest import CrawlRules, WebManifest, expected_crawl
from crawler.testweb.model import (
    CASE_PATHS,
    LOOP_PATHS,
    NOFOLLOW,
    Case,
    Kind,
    Role,
    WebParams,
)
from crawler.testweb.pages import TEMPLATE_PATHS, Renderer
from crawler.testweb.reference import extract_links, reference_crawl, renderer_fetch
from crawler.testweb.robots import OTHER_AGENT, RobotsPolicy
from crawler.testweb.server import decode_unreserved, split_host
from crawler.testweb.static import SIDECAR, export_static, nginx_conf

PORT = 8765
UA_TOKEN = "ExampleCrawler"


@pytest.fixture(scope="module")
def web5k():
    return build_web(WebParams())


@pytest.fixture(scope="module")
def small():
    return build_web(WebParams(hosts=20, pages=500, seed=11))


@pytest.fixture(scope="module")
def manifest5k(web5k):
    return expected_crawl(web5k, PORT, CrawlRules())


# --- generator ----------------------------------------------------------------------


def test_link_statistics_follow_the_paper(web5k):
    s = web5k.link_stats()
    assert s.pages >= 4900
    assert 50 <= s.mean <= 72, s
    assert 18 <= s.median <= 30, s
    assert 0.25 <= s.repeat_share <= 0.35, s
    assert 0.75 <= s.same_host_share <= 0.85, s


def test_links_per_page_are_heavy_tailed(web5k):
    pages = web5k.stat_pages
    counts = web5k.link_off[pages + 1] - web5k.link_off[pages]
    assert counts.max() > 10 * np.median(counts)
    assert (counts >= 1).all()


def test_cross_host_targets_follow_a_power_law(web5k):
    src = np.repeat(np.arange(web5k.urls), np.diff(web5k.link_off))
    tgt = web5k.link_tgt.astype(np.int64)
    cross = web5k.url_host[src] != web5k.url_host[tgt]
    per_host = np.bincount(web5k.url_host[tgt[cross]], minlength=web5k.params.hosts)[: web5k.params.hosts]
    top = np.sort(per_host)[::-1]
    assert top[0] > 5 * np.median(top), top[:10]
    assert per_host[0] == top[0]  # h000 is the most popular host


def test_generation_and_manifest_of_5k_pages_take_well_under_2s():
    t = time.process_time()
    web = build_web(WebParams(seed=3))
    expected_crawl(web, PORT, CrawlRules())
    assert time.process_time() - t < 2.0


def test_same_seed_same_web_and_manifest():
    a = build_web(WebParams(hosts=30, pages=900, seed=5))
    b = build_web(WebParams(hosts=30, pages=900, seed=5))
    assert a.url_path == b.url_path
    for name in ("url_host", "url_kind", "link_off", "link_tgt", "link_form", "link_elem", "link_flags",
                 "meta_nofollow", "noncrawlable"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    ra, rb = Renderer(a), Renderer(b)
    for uid in range(0, a.urls, 37):
        ha = a.hosts[int(a.url_host[uid])]
        assert ra.respond(ha, a.url_path[uid], PORT).body == rb.respond(ha, b.url_path[uid], PORT).body
    assert expected_crawl(a, PORT).to_json() == expected_crawl(b, PORT).to_json()
    c = build_web(WebParams(hosts=30, pages=900, seed=6))
    assert not np.array_equal(a.link_tgt[: min(a.link_tgt.size, c.link_tgt.size)],
                              c.link_tgt[: min(a.link_tgt.size, c.link_tgt.size)])


def test_host_names_and_special_hosts(web5k):
    names = {h.name for h in web5k.hosts}
    assert {"h000.web.test", "h099.web.test", "slow.web.test", "bad.web.test", "trap.web.test",
            "norobots.web.test", "robots500.web.test"} <= names
    assert web5k.seeds(PORT) == [f"http://h00{i}.web.test:{PORT}/" for i in range(3)]
    assert sum(1 for h in web5k.hosts if h.role is Role.ORDINARY) == 100
    ordinary_pages = sum(1 for u in range(web5k.urls) if web5k.url_kind[u] == Kind.PAGE
                         and web5k.hosts[int(web5k.url_host[u])].role is Role.ORDINARY)
    assert ordinary_pages == 5000


def test_paths_are_ascii_and_within_the_trap_rules(web5k):
    rules = CrawlRules()
    for uid, path in enumerate(web5k.url_path):
        assert path.isascii() and path.startswith("/")
        host = web5k.hosts[int(web5k.url_host[uid])]
        assert rules.admits(host.origin(PORT) + path, host.name, path), path


# --- rendering ------------------------------------------------------------------------


def test_rendered_links_are_exactly_the_model_links(small):
    """Parse every page as a crawler would: the canonical links equal the link table's targets, plus the
    template's script and inline-style image (pages.TEMPLATE_PATHS), once each on every non-frameset page."""
    r = Renderer(small)
    pages = [u for u in range(small.urls) if small.url_kind[u] == Kind.PAGE]
    for uid in pages:
        url = small.url(uid, PORT)
        links = extract_links(r.page(uid, PORT), url, follow_nofollow=True)
        template = sorted(urlsplit(u).path for u in links if urlsplit(u).path in TEMPLATE_PATHS)
        assert template == ([] if uid in small.frameset else sorted(TEMPLATE_PATHS)), url
        got = Counter(u for u in links if urlsplit(u).path not in TEMPLATE_PATHS)
        rows = small.links(uid)
        want = Counter(small.url(int(small.link_tgt[i]), PORT) for i in rows)
        assert got == want, url
        followed = Counter(u for u in extract_links(r.page(uid, PORT), url) if urlsplit(u).path not in TEMPLATE_PATHS)
        if small.meta_nofollow[uid]:
            assert not followed
        else:
            want_followed = Counter(small.url(int(small.link_tgt[i]), PORT) for i in rows
                                    if not small.link_flags[i] & NOFOLLOW)
            assert followed == want_followed, url


def test_link_forms_vary_and_pages_look_real(small):
    r = Renderer(small)
    bodies = b"".join(r.page(u, PORT) for u in range(0, 400) if small.url_kind[u] == Kind.PAGE)
    text = bodies.decode()
    port = f":{PORT}/"
    for needle in ("<!DOCTYPE html>", '<meta charset="utf-8">', "<title>", 'rel="stylesheet"', "<nav",
                   "<article", "<footer", "&mdash;", "<!--", "<script", 'href="./', 'href="../', "HTTP://",
                   "#", "<base href=", 'rel="nofollow', "mailto:", "javascript:", "<img src",
                   "<iframe src", "<form action", "<area ", "<embed src", "<source src", "//h0", port):
        assert needle in text, needle
    assert re.search(r"""href=["']?[^"' >]*%[0-9A-Fa-f]{2}""", text)  # escaped unreserved characters
    assert any(m in text for m in ('content="nofollow"', 'content="noindex, nofollow"', 'content="noarchive,nofollow"'))


def test_render_is_fast_enough(web5k):
    r = Renderer(web5k, cache_entries=1)
    pages = [u for u in range(0, web5k.urls, 7) if web5k.url_kind[u] == Kind.PAGE]
    r.page(pages[0], PORT)  # builds the anchor texts once
    t = time.process_time()
    for u in pages:
        r.page(u, PORT)
    per_page_s = (time.process_time() - t) / len(pages)
    assert per_page_s < 1e-3  # about 0.15 ms on a slow CI core; the bound leaves room


def test_port_comes_from_the_render_call(small):
    r = Renderer(small)
    root = small.seed_ids[0]
    a, b = r.page(root, 1111), r.page(root, 2222)
    assert b":1111/" in a and b":2222/" not in a and b":2222/" in b


def test_robots_text_agrees_with_protego(web5k):
    """The policy the manifest uses gives the same verdicts and delays as a real parser of the file."""
    r = Renderer(web5k)
    by_host: dict[int, list[str]] = {}
    for uid, h in enumerate(web5k.url_host.tolist()):
        by_host.setdefault(h, []).append(web5k.url_path[uid])
    seen_override = seen_delay = 0
    for host in web5k.hosts:
        if host.robots.status != 200 or host.role in (Role.NXDOMAIN, Role.PRIVATE):
            continue
        text = r.robots(host).body.decode()
        assert f"User-agent: {OTHER_AGENT}".lower() in text.lower()
        parser = Protego.parse(text)
        for path in by_host[host.index] + ["/private/x.html", "/private/open/y.html"]:
            url = host.origin(PORT) + path
            assert parser.can_fetch(url, UA_TOKEN) == host.robots.allowed(path), (host.name, path)
        assert parser.crawl_delay(UA_TOKEN) == host.robots.crawl_delay_s
        seen_override += bool(host.robots.allow)
        seen_delay += host.robots.crawl_delay_s is not None
    assert seen_override and seen_delay


def test_robots_policy_longest_match():
    p = RobotsPolicy(disallow=("/private/",), allow=("/private/open/",))
    assert p.allowed("/") and not p.allowed("/private/a.html") and p.allowed("/private/open/a.html")
    assert RobotsPolicy(status=404).allowed("/private/a.html")
    assert not RobotsPolicy(status=500).allowed("/")


def test_gzip_bomb_inflates_to_its_size():
    size = 8 * (1 << 20) + 123
    bomb = gzip_bomb(size)
    assert len(bomb) < size // 500
    assert gzip.decompress(bomb) == bytes(size)


def test_trap_families():
    assert trap.trap_children("/") == list(trap.ENTRIES)
    assert trap.trap_children("/t/x/") == ["/t/x/x/", "/"]
    assert trap.trap_children("/d/l1/l2/") == ["/d/l1/l2/l3/", "/"]
    assert trap.trap_children("/cal/2026/11/next/") == ["/cal/2026/11/next/next/", "/cal/2026/11/next/prev/", "/"]
    assert trap.is_trap_page("/t/x/x/x/x/x/x/")
    assert not trap.is_trap_page("/t/y/") and not trap.is_trap_page("/d/l2/") and not trap.is_trap_page("/t/x")


# --- manifest -------------------------------------------------------------------------


@pytest.mark.parametrize("params,rules,static", [
    (WebParams(hosts=20, pages=500, seed=11), CrawlRules(), False),
    (WebParams(hosts=20, pages=500, seed=12, private_links=True),
     CrawlRules(max_path_depth=8, max_repeated_segments=2), False),
    (WebParams(hosts=20, pages=500, seed=13), CrawlRules(follow_nofollow=True), False),
    (WebParams(hosts=20, pages=500, seed=14), CrawlRules(obey_robots=False, allow_domains=("web.test",)), False),
    (WebParams(hosts=20, pages=500, seed=15), CrawlRules(), True),
])
async def test_manifest_equals_an_independent_reference_crawl(params, rules, static):
    """A simple crawler (selectolax + ada + protego) over the rendered bytes requests exactly the manifest."""
    web = build_web(params)
    m = expected_crawl(web, PORT, rules, static=static)
    res = await reference_crawl(renderer_fetch(web, static=static), web.seeds(PORT), rules)
    assert len(res.fetched) == len(set(res.fetched))
    assert set(res.fetched) == m.fetched
    assert set(res.robots) == m.robots
    assert res.refused == m.refused
    assert res.disallowed == m.disallowed
    assert res.filtered == m.filtered
    assert res.statuses == m.statuses
    if not static:
        assert res.failed == set(m.failures)


def test_manifest_robots_rules(web5k, manifest5k):
    m = manifest5k
    private_blocked = private_open = 0
    for uid, path in enumerate(web5k.url_path):
        host = web5k.hosts[int(web5k.url_host[uid])]
        if host.role is not Role.ORDINARY or not path.startswith("/private/"):
            continue
        url = web5k.url(uid, PORT)
        if not host.robots.allowed(path):
            assert url not in m.fetched
            private_blocked += url in m.disallowed
        else:
            private_open += url in m.fetched
    assert private_blocked and private_open
    r500 = web5k.special(Role.ROBOTS500)
    assert r500.origin(PORT) + "/robots.txt" in m.robots
    assert not any(u.startswith(r500.origin(PORT) + "/") for u in m.fetched)
    assert r500.origin(PORT) + "/" in m.disallowed
    norobots = web5k.special(Role.NOROBOTS)
    assert norobots.origin(PORT) + "/robots.txt" in m.robots and norobots.origin(PORT) + "/p/3.html" in m.fetched
    assert m.crawl_delay_s and all(0.05 <= d <= 0.3 for d in m.crawl_delay_s.values())
    for name, delay in m.crawl_delay_s.items():
        assert web5k.host_named(name).robots.crawl_delay_s == delay
    assert m.hosts == sorted(u.split("//")[1].split(":")[0] for u in m.robots)


def test_manifest_nofollow(web5k, manifest5k):
    nf = [web5k.url(u, PORT) for u, p in enumerate(web5k.url_path) if p.startswith(("/nf/", "/mnf/"))]
    assert nf
    assert not set(nf) & manifest5k.fetched
    followed = expected_crawl(web5k, PORT, CrawlRules(follow_nofollow=True))
    assert set(nf) <= followed.fetched


def test_manifest_trap_bound(web5k, manifest5k):
    m = manifest5k
    t = web5k.special(Role.TRAP).origin(PORT)
    # root + /t/ x3 + /d/ down to depth 16 + the next/prev tree with each step at most 3 times.
    assert m.trap_bound == 1 + 4 + 15 + 69
    assert t + "/t/x/x/x/" in m.fetched and t + "/t/x/x/x/x/" in m.filtered
    deep = "/d/" + "".join(f"l{i}/" for i in range(1, 15))
    assert deep.count("/") == 16 and t + deep in m.fetched and t + deep + "l15/" in m.filtered
    assert t + "/cal/2026/11/next/prev/next/prev/next/prev/" in m.fetched
    assert t + "/cal/2026/11/next/prev/next/next/next/" in m.filtered
    tight = expected_crawl(web5k, PORT, CrawlRules(max_path_depth=6, max_repeated_segments=1))
    # depth <= 6: /t/ and /t/x/; /d/ .. /d/l1/l2/l3/l4/; the cal tree with at most one next and one prev.
    assert tight.trap_bound == 1 + 2 + 5 + 5


def test_manifest_redirects_and_errors(web5k, manifest5k):
    m = manifest5k
    moved = [web5k.url(u, PORT) for u, p in enumerate(web5k.url_path) if p.startswith("/moved/")]
    assert moved and set(moved) <= m.fetched  # reachable only through a redirect's Location
    for uid, r in web5k.redirects.items():
        url = web5k.url(uid, PORT)
        if url in m.fetched:
            assert m.statuses[url] == r.status
            target = web5k.url(r.target, PORT)
            assert target in m.fetched | m.disallowed | m.filtered
    bad = web5k.special(Role.BAD).origin(PORT)
    for path in LOOP_PATHS:
        assert m.statuses[bad + path] == 302
    assert {bad + CASE_PATHS[c] for c in (Case.ENDLESS, Case.TOO_LARGE, Case.GZIP_BOMB, Case.STALL)} == set(m.failures)
    for case in (Case.MALFORMED, Case.CP1252, Case.NOCHARSET, Case.SHIFT_JIS):
        assert f"{bad}/bad-ok/{case.value}-1.html" in m.fetched
    assert f"{bad}/bad-ok/inside-comment.html" not in m.fetched
    missing = [u for u, s in m.statuses.items() if s == 404]
    assert missing


def test_manifest_refused(web5k, manifest5k):
    assert manifest5k.refused and all(".gone.invalid" in u for u in manifest5k.refused)
    assert not any(".invalid" in u for u in manifest5k.robots)
    web = build_web(WebParams(hosts=10, pages=200, private_links=True))
    m = expected_crawl(web, PORT)
    assert f"http://127.0.0.1:{PORT}/" in m.refused and "http://169.254.169.254/latest/meta-data/" in m.refused
    with pytest.raises(ValueError):
        expected_crawl(web, PORT, CrawlRules(private_guard=False))


def test_manifest_static_has_no_hostile_hosts(web5k):
    m = expected_crawl(web5k, PORT, static=True)
    for role in (Role.SLOW, Role.BAD, Role.TRAP):
        origin = web5k.special(role).origin(PORT)
        urls = [u for u in m.fetched if u.startswith(origin + "/")]
        assert urls and all(m.statuses[u] == 404 for u in urls)
    assert not m.failures and m.trap_bound == 1


def test_manifest_json_round_trip(manifest5k, tmp_path):
    path = tmp_path / "manifest.json"
    manifest5k.save(path)
    back = WebManifest.load(path)
    assert back.to_json() == manifest5k.to_json()
    assert back.fetched == manifest5k.fetched and back.rules == manifest5k.rules
    assert json.loads(path.read_text())["summary"]["fetched"] == len(manifest5k.fetched)


@pytest.mark.slow
def test_50k_pages_generate_and_manifest_within_15s():
    t = time.process_time()
    web = build_web(WebParams(hosts=1000, pages=50_000))
    m = expected_crawl(web, PORT, CrawlRules())
    assert time.process_time() - t < 15.0
    assert len(m.fetched) > 50_000
    s = web.link_stats()
    assert 0.25 <= s.repeat_share <= 0.35 and 0.75 <= s.same_host_share <= 0.85


# --- server helpers, static export, CLI ------------------------------------------------


def test_split_host_and_decode():
    assert split_host("H001.Web.Test:8080", 1) == ("h001.web.test", 8080)
    assert split_host("h001.web.test", 99) == ("h001.web.test", 99)
    assert split_host("h001.web.test.:80", 1) == ("h001.web.test", 80)
    assert split_host("[::1]:81", 1) == ("::1", 81)
    assert decode_unreserved("/p/%7Euser.html") == "/p/~user.html"
    assert decode_unreserved("/a%2fb%41") == "/a%2FbA"


def test_static_export_writes_the_served_bytes(small, tmp_path):
    export = export_static(small, tmp_path / "root", PORT)
    r = Renderer(small)
    root0 = small.hosts[0]
    assert (export.root / root0.name / "index.html").read_bytes() == r.page(small.seed_ids[0], PORT)
    checked = 0
    for uid in range(0, small.urls, 11):
        host = small.hosts[int(small.url_host[uid])]
        path = small.url_path[uid]
        if host.role is not Role.ORDINARY or int(small.url_kind[uid]) not in (Kind.PAGE, Kind.IMAGE, Kind.CSS):
            continue
        file = export.root / host.name / (path.lstrip("/") + ("index.html" if path.endswith("/") else ""))
        assert file.read_bytes() == r.respond(host, path, PORT).body
        checked += 1
    assert checked > 20
    assert not (export.root / "bad.web.test").exists() and (export.root / SIDECAR).exists()
    conf = nginx_conf(export.root, PORT, tmp_path / "a.log", tmp_path / "e.log", tmp_path / "n.pid", user_root=False)
    assert "daemon off;" in conf and "worker_processes 1;" in conf and "$msec" in conf and "$request_time" in conf
    assert f"server_name {root0.name};" in conf and "return 500;" in conf and "return 30" in conf
    with pytest.raises(ValueError):
        nginx_conf(export.root, PORT + 1, "a", "e", "p")


def test_cli_export_static(tmp_path, capsys):
    code = cli_main(["--out", str(tmp_path / "out"), "--export-static", str(tmp_path / "root"), "--port", "18080",
                     "--hosts", "5", "--pages", "60"])
    assert code == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["port"] == 18080 and info["command"][0] == "nginx"
    m = WebManifest.load(info["manifest"])
    assert m.static and m.port == 18080
    assert (tmp_path / "out" / "seeds.txt").read_text().split() == m.seeds


def test_cli_rejects_bad_params(tmp_path, capsys):
    out = tmp_path / "never-created"
    assert cli_main(["--out", str(out), "--hosts", "10", "--pages", "5"]) == 2
    assert "pages" in capsys.readouterr().err and not out.exists()


# --- audit ------------------------------------------------------------------------------


def _req(host, path, start, end, status=200):
    return audit.Request(host=host, path=path, start=start, end=end, status=status)


def test_audit_overlaps_gaps_duplicates():
    rs = [
        _req("a", "/robots.txt", 0.0, 0.01),
        _req("a", "/", 0.2, 0.21),          # gap 0.19 >= 10 * 0.01
        _req("a", "/x", 0.25, 0.26),        # gap 0.04 < 10 * 0.01
        _req("b", "/", 0.0, 0.5),
        _req("b", "/y", 0.4, 0.6),          # overlaps the previous
        _req("c", "/", 0.0, 0.001),
        _req("c", "/", 0.1, 0.101),         # duplicate; gap 0.099 < min gap 0.15 for c
    ]
    ov = audit.overlaps(rs)
    assert [(o.host, o.second.path) for o in ov] == [("b", "/y")]
    gaps = audit.short_gaps(rs, {"c": 0.15}, delay_factor=10)
    assert {(g.host, g.next.path) for g in gaps} == {("a", "/x"), ("b", "/y"), ("c", "/")}
    assert not audit.short_gaps([_req("d", "/", 0, 0.01), _req("d", "/z", 0.1095, 0.11)], 0.0, 10)  # within 1 ms
    assert audit.duplicates(rs) == {("http", "c", "/"): 2}


def test_audit_reads_testweb_and_nginx_logs(tmp_path):
    log = tmp_path / "access.log.jsonl"
    lines = [
        {"host": "h001.web.test", "path": "/", "method": "GET", "status": 200, "start": 10.0, "end": 10.5,
         "bytes": 5, "peer": "127.0.0.2", "ua": "x"},
        {"host": "h001.web.test", "path": "/p/1.html", "method": "GET", "status": 200, "msec": 12.25,
         "request_time": 0.25, "bytes": 7, "peer": "127.0.0.1", "ua": "y"},
    ]
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n{\"torn\": ")
    rs = audit.read_access_log(log)
    assert len(rs) == 2
    assert (rs[0].start, rs[0].end, rs[0].peer) == (10.0, 10.5, "127.0.0.2")
    assert (rs[1].start, rs[1].end) == (12.0, 12.25)


def test_audit_compare_with_manifest(small):
    m = expected_crawl(small, PORT)
    rs = []
    for url in sorted(m.fetched | m.robots):
        host, path = url.split("//", 1)[1].split(":", 1)[0], "/" + url.split("/", 3)[3]
        rs.append(_req(host, path, 0, 0))
    assert audit.compare(rs, m).ok
    extra = rs + [rs[0], _req("h000.web.test", "/nf/0.html", 0, 0)]
    c = audit.compare(extra, m)
    assert not c.ok and c.duplicates and c.unexpected
    assert audit.compare(rs[1:], m).missing == {f"http://{rs[0].host}:{PORT}{rs[0].path}"}

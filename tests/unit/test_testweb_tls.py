"""Unit tests of the test web's HTTPS: hosts and schemes, rendering, the manifest's https fetches and
refusals, the static export for nginx, the audit's scheme handling, the CLI."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from urllib.parse import urlsplit

import numpy as np
import pytest

from crawler.fetch.result import PERMANENT, REASON_CODES
from crawler.testweb import audit
from crawler.testweb.build import build_web
from crawler.testweb.cli import main as cli_main
from crawler.testweb.manifest import REFUSAL_REASONS, TLS_REASONS, CrawlRules, WebManifest, expected_crawl
from crawler.testweb.model import TLS_BAD_ROLES, Form, Kind, Role, Tls, WebParams
from crawler.testweb.pages import TEMPLATE_PATHS, Renderer
from crawler.testweb.quality import page_quality
from crawler.testweb.reference import extract_links, reference_crawl, renderer_fetch
from crawler.testweb.static import SIDECAR, export_static, nginx_conf, prepare_nginx

PORT = 8765
TLS_PORT = 8443
HTTPS_PARAMS = {"https_share": 0.3, "https_redirect_share": 0.3, "tls_bad_hosts": True}
_ARRAYS = ("url_host", "url_kind", "link_off", "link_tgt", "link_form", "link_elem", "link_flags",
           "meta_nofollow", "noncrawlable")


@pytest.fixture(scope="module")
def web():
    return build_web(WebParams(hosts=20, pages=500, seed=11, **HTTPS_PARAMS))


@pytest.fixture(scope="module")
def manifest(web):
    return expected_crawl(web, PORT, CrawlRules(), tls_port=TLS_PORT)


def _hosts(web, tls):
    return [h for h in web.hosts if h.role is Role.ORDINARY and h.tls is tls]


# --- the model ------------------------------------------------------------------------


def test_https_is_off_by_default_and_the_default_web_is_unchanged():
    """The web without HTTPS is byte for byte what it was before HTTPS existed (digest pinned then)."""
    p = WebParams()
    assert (p.https_share, p.https_redirect_share, p.tls_bad_hosts) == (0.0, 0.0, False)
    web = build_web(WebParams(hosts=20, pages=500, seed=11))
    assert not web.has_tls and all(h.tls is Tls.NONE for h in web.hosts)
    h = hashlib.sha256()
    for name in _ARRAYS:
        h.update(np.ascontiguousarray(getattr(web, name)).tobytes())
    h.update("\n".join(web.url_path).encode())
    r = Renderer(web)
    for uid in range(web.urls):
        reply = r.respond(web.hosts[int(web.url_host[uid])], web.url_path[uid], PORT)
        h.update(reply.body)
    # Pinned from the web before HTTPS was added (the same then with its manifest; the manifest has changed
    # since, on purpose: a crawler now fetches what the page templates reference). Update it only on purpose.
    assert h.hexdigest()[:16] == "38470ab6b9ff61cf", h.hexdigest()


def test_shares_choose_schemes_and_change_no_link():
    plain = build_web(WebParams(hosts=30, pages=900, seed=5))
    https = build_web(WebParams(hosts=30, pages=900, seed=5, https_share=0.2, https_redirect_share=0.3))
    for name in _ARRAYS:
        assert np.array_equal(getattr(plain, name), getattr(https, name)), name
    assert plain.url_path == https.url_path
    counts = Counter(h.tls for h in https.hosts if h.role is Role.ORDINARY)
    assert counts == {Tls.NONE: 15, Tls.ONLY: 6, Tls.REDIRECT: 9}
    assert all(h.tls is Tls.NONE for h in https.hosts if h.role is not Role.ORDINARY)


def test_same_seed_same_https_web_and_manifest():
    a = build_web(WebParams(hosts=20, pages=400, seed=7, **HTTPS_PARAMS))
    b = build_web(WebParams(hosts=20, pages=400, seed=7, **HTTPS_PARAMS))
    assert [(h.name, h.tls, h.role) for h in a.hosts] == [(h.name, h.tls, h.role) for h in b.hosts]
    for name in _ARRAYS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    ra, rb = Renderer(a), Renderer(b)
    for uid in range(0, a.urls, 13):
        host = a.hosts[int(a.url_host[uid])]
        scheme = "https" if host.content_https else "http"
        assert (ra.respond(host, a.url_path[uid], PORT, TLS_PORT, scheme).body
                == rb.respond(host, b.url_path[uid], PORT, TLS_PORT, scheme).body)
    assert (expected_crawl(a, PORT, tls_port=TLS_PORT).to_json()
            == expected_crawl(b, PORT, tls_port=TLS_PORT).to_json())
    c = build_web(WebParams(hosts=20, pages=400, seed=8, **HTTPS_PARAMS))
    assert [h.tls for h in a.hosts] != [h.tls for h in c.hosts]


def test_bad_certificate_hosts_and_origins(web):
    names = {h.role: h.name for h in web.hosts}
    assert [names[r] for r in TLS_BAD_ROLES] == [f"{r.value}.web.test" for r in TLS_BAD_ROLES]
    for role in TLS_BAD_ROLES:
        host = web.special(role)
        assert host.tls is Tls.ONLY and host.origin(PORT, TLS_PORT) == f"https://{host.name}:{TLS_PORT}"
    only, redirect = _hosts(web, Tls.ONLY)[0], _hosts(web, Tls.REDIRECT)[0]
    assert only.origin(PORT, TLS_PORT) == only.content_origin(PORT, TLS_PORT) == f"https://{only.name}:{TLS_PORT}"
    assert redirect.origin(PORT, TLS_PORT) == f"http://{redirect.name}:{PORT}"     # linked as on the web
    assert redirect.content_origin(PORT, TLS_PORT) == f"https://{redirect.name}:{TLS_PORT}"
    # The bad hosts are linked from ordinary pages.
    for role in TLS_BAD_ROLES:
        root = web.lookup(web.special(role).index, "/")
        sources = np.flatnonzero(web.link_tgt == root)
        src_hosts = {web.hosts[int(web.url_host[np.searchsorted(web.link_off, i, side="right") - 1])].role
                     for i in sources.tolist()}
        assert Role.ORDINARY in src_hosts


@pytest.mark.parametrize("bad", [{"https_share": 1.1}, {"https_redirect_share": -0.1},
                                 {"https_share": 0.6, "https_redirect_share": 0.5}])
def test_bad_https_shares_are_refused(bad):
    with pytest.raises(ValueError, match="https"):
        WebParams(hosts=10, pages=100, **bad).validate()


# --- rendering ------------------------------------------------------------------------


def test_a_host_asked_in_a_scheme_it_does_not_serve(web):
    r = Renderer(web)
    redirect, only = _hosts(web, Tls.REDIRECT)[0], _hosts(web, Tls.ONLY)[0]
    plain = _hosts(web, Tls.NONE)[0]
    for path in ("/", "/robots.txt", "/no/such/page.html"):
        reply = r.respond(redirect, path, PORT, TLS_PORT, "http")
        assert reply.status == 301 and dict(reply.headers)["Location"] == f"https://{redirect.name}:{TLS_PORT}{path}"
    reply = r.respond(redirect, "/p/1.html", PORT, TLS_PORT, "http", "a=1&b=2")
    assert dict(reply.headers)["Location"] == f"https://{redirect.name}:{TLS_PORT}/p/1.html?a=1&b=2"
    assert r.respond(redirect, "/robots.txt", PORT, TLS_PORT, "https").status == 200
    for host, scheme in ((only, "http"), (plain, "https"), (web.special(Role.TLS_EXPIRED), "http")):
        reply = r.respond(host, "/", PORT, TLS_PORT, scheme)
        assert reply.status == 421 and b"<a " not in reply.body, (host.name, scheme)
    assert r.respond(only, "/", PORT, TLS_PORT, "https").status == 200
    assert r.respond(plain, "/", PORT, TLS_PORT, "http").status == 200


def test_rendered_links_resolve_where_the_manifest_says(web):
    """Every page's links, parsed from the bytes as served, are the link table's targets in the scheme
    Web.http_twin_links names (http:// twin of a redirecting host's page, else its URL)."""
    r = Renderer(web)
    twins = 0
    for uid in np.flatnonzero(web.url_kind == int(Kind.PAGE)).tolist():
        host = web.hosts[int(web.url_host[uid])]
        url = web.url(uid, PORT, TLS_PORT)
        body = r.page(uid, PORT, TLS_PORT)
        rows = np.array(list(web.links(uid)), dtype=np.int64)
        twin = web.http_twin_links(np.full(rows.size, uid), rows)
        want = Counter(web.link_url(int(web.link_tgt[i]), PORT, TLS_PORT) if t
                       else web.url(int(web.link_tgt[i]), PORT, TLS_PORT) for i, t in zip(rows.tolist(), twin.tolist()))
        got = Counter(u for u in extract_links(body, url, follow_nofollow=True)
                      if urlsplit(u).path not in TEMPLATE_PATHS)
        assert got == want, (host.name, uid)
        twins += int(twin.sum())
    assert twins > 50


def test_scheme_relative_links_take_the_base_scheme(web):
    r = Renderer(web)
    seen = Counter()
    for row in np.flatnonzero(web.link_form == int(Form.SCHEME_REL)).tolist():
        uid = int(np.searchsorted(web.link_off, row, side="right") - 1)
        th = web.hosts[int(web.url_host[int(web.link_tgt[row])])]
        page = web.hosts[int(web.url_host[uid])]
        if uid in web.bases or web.url_kind[uid] != Kind.PAGE:
            continue
        body = r.page(uid, PORT, TLS_PORT).decode()
        prefix = f"//{th.name}:{TLS_PORT if page.content_https else PORT}"
        if page.content_https and th.tls is not Tls.NONE or not page.content_https and th.tls is not Tls.ONLY:
            assert prefix in body, (page.name, th.name)
            seen["scheme-relative"] += 1
        else:  # the target does not speak the page's scheme: written absolute
            assert th.origin(PORT, TLS_PORT) in body
            seen["absolute"] += 1
    assert seen["scheme-relative"] and seen["absolute"], seen


# --- the manifest ---------------------------------------------------------------------


@pytest.mark.parametrize("params,rules", [
    (WebParams(hosts=20, pages=500, seed=11, **HTTPS_PARAMS), CrawlRules()),
    (WebParams(hosts=20, pages=500, seed=12, private_links=True, https_share=0.2, https_redirect_share=0.5,
               tls_bad_hosts=True), CrawlRules(max_path_depth=8, max_repeated_segments=2)),
    (WebParams(hosts=20, pages=500, seed=13, https_redirect_share=1.0), CrawlRules(follow_nofollow=True)),
    (WebParams(hosts=20, pages=500, seed=14, https_share=0.5, tls_bad_hosts=True),
     CrawlRules(obey_robots=False, tls_verify=False)),
    (WebParams(hosts=20, pages=500, seed=15, **HTTPS_PARAMS), CrawlRules(tls_verify=False)),
])
async def test_manifest_equals_an_independent_reference_crawl(params, rules):
    """A simple crawler over the rendered bytes (links parsed, robots redirects followed) requests exactly
    the manifest, robots.txt once per origin included."""
    web = build_web(params)
    m = expected_crawl(web, PORT, rules, tls_port=TLS_PORT)
    res = await reference_crawl(renderer_fetch(web, port=PORT, tls_port=TLS_PORT, tls_verify=rules.tls_verify),
                                web.seeds(PORT, TLS_PORT), rules)
    assert len(res.fetched) == len(set(res.fetched))
    assert set(res.fetched) == m.fetched
    assert Counter(res.robots) == {u: m.requests_of(u) for u in m.robots}
    assert res.refused == m.refused and res.refusals == m.refusals
    assert res.disallowed == m.disallowed
    assert res.filtered == m.filtered
    assert res.statuses == m.statuses
    assert res.failed == set(m.failures)


def test_manifest_https_fetches(web, manifest):
    m = manifest
    http_urls = {u for u in m.fetched if u.startswith("http://")}
    https_urls = m.fetched - http_urls
    assert https_urls and all(f":{TLS_PORT}/" in u for u in https_urls)
    assert all(f":{PORT}/" in u for u in http_urls)
    # Every redirecting host's http:// URL is a 301 whose https:// target is fetched (or forbidden).
    twins = 0
    for host in _hosts(web, Tls.REDIRECT):
        prefix = host.origin(PORT, TLS_PORT)
        for url in (u for u in http_urls if u.startswith(prefix + "/")):
            assert m.statuses[url] == 301
            target = host.content_origin(PORT, TLS_PORT) + url[len(prefix):]
            assert target in m.fetched | m.disallowed | m.filtered
            twins += 1
        assert f"{prefix}/robots.txt" in m.robots
        assert f"{host.content_origin(PORT, TLS_PORT)}/robots.txt" in m.robots
    assert twins
    for host in _hosts(web, Tls.ONLY):
        assert not any(u.startswith(f"http://{host.name}:") for u in m.fetched | m.robots)
    # No URL is ever asked in a scheme its host does not serve (those answer 421).
    assert 421 not in m.statuses.values()
    # One robots.txt per origin: http and https origins of a name are two, the crawl delay is the name's.
    assert m.hosts == sorted({u.split("//")[1].split(":")[0] for u in m.robots})


def test_manifest_refuses_bad_certificates_with_their_reasons(web, manifest):
    m = manifest
    for role in TLS_BAD_ROLES:
        host = web.special(role)
        urls = {u for u in m.refused if u.startswith(f"https://{host.name}:")}
        assert urls and {m.refusals[u] for u in urls} == {REFUSAL_REASONS[role]}
        assert not any(host.name in u for u in m.fetched | m.robots)
    assert set(m.refusals) == m.refused
    assert {m.refusals[u] for u in m.refused if ".gone.invalid" in u} == {"dns_nxdomain"}
    assert {r for r in m.refusals.values()} == {"dns_nxdomain", *TLS_REASONS}
    # Without verification the bad hosts are crawled like any other.
    loose = expected_crawl(web, PORT, CrawlRules(tls_verify=False), tls_port=TLS_PORT)
    for role in TLS_BAD_ROLES:
        host = web.special(role)
        assert f"https://{host.name}:{TLS_PORT}/robots.txt" in loose.robots
        assert f"https://{host.name}:{TLS_PORT}/p/1.html" in loose.fetched
    assert set(loose.refusals.values()) == {"dns_nxdomain"}


def test_refusal_reasons_are_crawl_log_reasons():
    assert set(REFUSAL_REASONS.values()) <= REASON_CODES
    assert TLS_REASONS <= PERMANENT


def test_manifest_needs_the_tls_port_and_round_trips(web, manifest, tmp_path):
    with pytest.raises(ValueError, match="tls_port"):
        expected_crawl(web, PORT)
    path = tmp_path / "manifest.json"
    manifest.save(path)
    back = WebManifest.load(path)
    assert back.to_json() == manifest.to_json()
    assert back.tls_port == TLS_PORT and back.refusals == manifest.refusals and back.rules.tls_verify is True


def test_quality_oracle_names_https_pages(web, manifest):
    pq = page_quality(web, manifest)
    https = [u for u in pq.urls if u.startswith("https://")]
    assert https and set(pq.urls) <= manifest.fetched


# --- audit ----------------------------------------------------------------------------


def _req(host, path, start, end, scheme="http", status=200):
    return audit.Request(host=host, path=path, start=start, end=end, status=status, scheme=scheme)


def test_audit_keeps_schemes_apart_in_urls_and_together_in_politeness(web, manifest):
    rs = [_req("a.web.test", "/", 0.0, 0.1, "http", 301), _req("a.web.test", "/", 0.05, 0.2, "https")]
    assert [(o.host, o.second.scheme) for o in audit.overlaps(rs)] == [("a.web.test", "https")]
    assert audit.short_gaps(rs, 0.0, 1.0)
    assert audit.duplicates(rs) == {}
    assert audit.duplicates(rs + [_req("a.web.test", "/", 1.0, 1.1, "https")]) == {("https", "a.web.test", "/"): 2}
    assert set(audit.requested_urls(rs, PORT, TLS_PORT)) == {f"http://a.web.test:{PORT}/",
                                                             f"https://a.web.test:{TLS_PORT}/"}
    # A crawl requesting exactly the manifest compares clean; the same path in the wrong scheme does not.
    crawl = []
    for url in sorted(manifest.fetched | manifest.robots):
        scheme, rest = url.split("://", 1)
        netloc, path = rest.split("/", 1)
        crawl.append(_req(netloc.split(":")[0], "/" + path, 0, 0, scheme))
    assert audit.compare(crawl, manifest).ok
    only = {h.name for h in _hosts(web, Tls.ONLY)}
    wrong = next(r for r in crawl if r.host in only and r.path != "/robots.txt")
    c = audit.compare(crawl + [_req(wrong.host, wrong.path, 0, 0, "http")], manifest)
    assert not c.ok and c.unexpected == {f"http://{wrong.host}:{PORT}{wrong.path}"}


def test_audit_reads_the_scheme(tmp_path):
    log = tmp_path / "access.log.jsonl"
    lines = [{"host": "h", "scheme": "https", "path": "/", "status": 200, "start": 1.0, "end": 2.0},
             {"host": "h", "path": "/x", "status": 200, "start": 3.0, "end": 4.0},
             {"host": "h", "scheme": "https", "path": "/y", "status": 200, "msec": 5.0, "request_time": 0.5}]
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert [r.scheme for r in audit.read_access_log(log)] == ["https", "http", "https"]


def test_politeness_shortfalls_find_https_fetch_times(manifest):
    host = next(u for u in manifest.fetched if u.startswith("https://")).split("//")[1].split(":")[0]
    rs = [_req(host, "/a", 0.0, 0.1, "https"), _req(host, "/b", 0.5, 0.6, "https")]
    durations = {f"https://{host}:{TLS_PORT}/a": 0.1}
    assert audit.politeness_shortfalls(rs, manifest, durations, delay_factor=10)   # 0.5 s < 10 * 0.1 s
    assert not audit.politeness_shortfalls(rs, manifest, durations, delay_factor=4)


def test_request_durations_judge_each_fetch_of_a_url_by_its_own_time(manifest):
    """A URL fetched twice (a restart): 0.02 s the first time, 0.2 s the second. Per URL the second time
    would be charged to the first fetch (a false shortfall); per request each pair gets its own."""
    host = next(u for u in manifest.fetched if u.startswith("https://")).split("//")[1].split(":")[0]
    url = f"https://{host}:{TLS_PORT}/a"
    rs = [_req(host, "/a", 0.0, 0.02, "https"), _req(host, "/b", 0.3, 0.31, "https"),
          _req(host, "/a", 10.0, 10.2, "https"), _req(host, "/c", 12.1, 12.2, "https")]
    log = [{"url": url, "status": 200, "duration_s": 0.02, "t": 0.021},
           {"url": url, "status": 200, "duration_s": 0.2, "t": 10.201}]
    per_url = {r["url"]: r["duration_s"] for r in log}
    assert audit.politeness_shortfalls(rs, manifest, per_url, delay_factor=10)       # 0.3 s < 10 * 0.2 s: false
    durations = audit.request_durations(rs, log, manifest)
    # /b and /c have no line (lost with a killed process): their time on the server, less the end-stamp lag.
    assert [durations(r) for r in rs] == pytest.approx([0.02, 0.0, 0.2, 0.1 - audit.END_LAG_TOLERANCE_S])
    assert not audit.politeness_shortfalls(rs, manifest, durations, delay_factor=10)
    late = [*rs[:3], _req(host, "/c", 11.0, 11.1, "https")]                          # 1 s < 10 * 0.2 s: real
    assert audit.politeness_shortfalls(late, manifest, durations, delay_factor=10)


# --- static export and CLI --------------------------------------------------------------


def test_static_export_serves_https_hosts_and_redirects(web, tmp_path):
    with pytest.raises(ValueError, match="TLS port"):
        export_static(web, tmp_path / "nope", PORT)
    export = export_static(web, tmp_path / "root", PORT, tls_port=TLS_PORT)
    assert export.tls_port == TLS_PORT and export.ca_file == export.root / "ca.crt" and export.ca_file.exists()
    r = Renderer(web)
    redirect, only = _hosts(web, Tls.REDIRECT)[0], _hosts(web, Tls.ONLY)[0]
    for host in (redirect, only):
        root = web.lookup(host.index, "/")
        assert (export.root / host.name / "index.html").read_bytes() == r.page(root, PORT, TLS_PORT)
    for role in TLS_BAD_ROLES:
        assert (export.root / web.special(role).name / "index.html").exists()
    meta = json.loads((export.root / SIDECAR).read_text())
    assert meta["tls"]["port"] == TLS_PORT and only.name in meta["tls"]["misdirected_http"]
    conf = nginx_conf(export.root, PORT, tmp_path / "a.log", tmp_path / "e.log", tmp_path / "n.pid", user_root=False)
    assert f"listen 127.0.0.1:{TLS_PORT} ssl default_server;" in conf
    assert f"return 301 https://{redirect.name}:{TLS_PORT}$request_uri;" in conf
    assert "return 421;" in conf and '"scheme":"$scheme"' in conf
    for role in TLS_BAD_ROLES:
        name = web.special(role).name
        assert f"ssl_certificate {export.root / 'tls' / name}.crt;" in conf
    site = prepare_nginx(web, tmp_path / "root2", tmp_path / "logs", PORT, tls_port=TLS_PORT)
    assert site.ca_file.exists() and site.conf.exists() and site.manifest.static and site.manifest.tls_port == TLS_PORT
    assert site.seeds_file.read_text().split() == site.manifest.seeds and site.command[0] == "nginx"


def test_cli_export_static_with_https(tmp_path, capsys):
    args = ["--out", str(tmp_path / "out"), "--export-static", str(tmp_path / "root"), "--port", "18080",
            "--hosts", "5", "--pages", "60", "--https-share", "0.4", "--tls-bad-hosts"]
    assert cli_main(args) == 2 and "--tls-port" in capsys.readouterr().err
    assert cli_main(args + ["--tls-port", "18443"]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["tls_port"] == 18443 and info["ca_file"] == str(tmp_path / "root" / "ca.crt")
    m = WebManifest.load(info["manifest"])
    assert m.tls_port == 18443 and any(u.startswith("https://") for u in m.fetched)


def test_cli_rejects_bad_https_options(tmp_path, capsys):
    assert cli_main(["--out", str(tmp_path / "o1"), "--https-share", "2"]) == 2
    assert "https_share" in capsys.readouterr().err
    assert cli_main(["--out", str(tmp_path / "o2"), "--https-share", "0.5", "--reuse-port"]) == 2
    assert "reuse-port" in capsys.readouterr().err

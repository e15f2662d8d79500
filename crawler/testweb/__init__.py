"""The synthetic test web: what the demo, the integration tests and the benchmarks crawl.

A deterministic web of many virtual hosts served on ONE port, with the link
statistics of Broder, Najork & Wiener's crawl (links per page lognormal, mean
~60, median ~23; ~30% of a page's links repeat an earlier one; ~80% stay on
the host; cross-host targets Zipf-popular), plus everything a crawler must get
right: robots.txt (Disallow, Allow overriding it, Crawl-delay, a named-bot
group to ignore, 404 = allow all, 500 = disallow all), relative/absolute/odd
link forms with known canonical targets, `<base href>`, rel=nofollow and meta
robots nofollow, redirects (301/302, relative and cross-host Locations, a
loop), 404s, a slow host, a trap, NXDOMAIN and private-address links, and a
bad host (malformed HTML, lying charsets, Shift-JIS, an endless body, a body
over the size limit, a gzip bomb, a stall). Opt-in (WebParams.https_share,
https_redirect_share, tls_bad_hosts): HTTPS-only hosts, hosts redirecting
every http:// URL to https:// with 301, and hosts whose certificates fail
verification (self-signed, expired, issued for another name).

How the pieces fit:

    model.py     WebParams and Web: hosts, URL ids, the link table (CSR), redirects,
                 robots policies, as plain data.
    build.py     build_web(WebParams) -> Web, generated with numpy, same seed -> same
                 web, in steps over one WebBuilder (build_state.py): hosts and URLs
                 (build_hosts.py), then the link table (build_links.py).
    robots.py    one policy object renders robots.txt and answers allowed(path).
    trap.py      the trap's infinite path families, as pure functions.
    pages.py     Renderer.respond(host, path, port): every body the web serves
                 (realistic markup; each link written in its stored form).
    hrefs.py     how each stored link form is written as an href.
    resources.py the bodies that are not pages: images, CSS, script, redirect and
                 error pages.
    hostile.py   the bad host's streamed cases (endless, too large, gzip bomb, stall).
    server.py    TestWebServer: aiohttp, Host-header virtual hosts (and a TLS port
                 choosing certificates by SNI), JSON-lines access log with
                 scheme and start/end per request.
    tls.py       the web's certificates (certs.py's per-run CA), the SNI server
                 context, OpenSSL verify codes -> crawl-log reasons.
    manifest.py  expected_crawl(web, port, CrawlRules, tls_port=) -> WebManifest:
                 exactly which URLs a correct crawler fetches, refuses (and
                 why), is forbidden, filters.
    audit.py     read access logs (testweb or nginx) and check politeness
                 (overlaps, short gaps: per host name, both schemes),
                 duplicates, and the manifest.
    static.py    export the ordinary hosts to files + an nginx.conf (real server),
                 HTTPS included; prepare_nginx() for crawl tests.
    reference.py a deliberately simple crawler that checks the manifest from the
                 served bytes (in-process, over HTTP(S), against nginx).
    cli.py       `crawler testweb` / `python -m crawler.testweb`.
    process.py   run the CLI as a child process for tests and benchmarks.

Ports: URLs carry the port (`http://h001.web.test:PORT/p/1.html`); the server
takes it from the request's Host header, so one model serves on any port. The
crawler reaches every `*.web.test` host at 127.0.0.1 through a static DNS
override (`fetch.dns.overrides: {"*.web.test": 127.0.0.1}`). HTTPS hosts are
served on a second port, written into https:// URLs
(`https://h004.web.test:TLS_PORT/`); the crawler trusts the run's CA
certificate (`server.ca_file`, `DIR/ca.crt` of the CLI) with
`fetch.tls.ca_file`.

Typical use in a test:

    web = build_web(WebParams(hosts=20, pages=500))
    async with TestWebServer(web) as server:
        manifest = expected_crawl(web, server.port, CrawlRules())
        ... crawl server.seeds() ...
        result = compare(read_access_log(server.access_log_path), manifest)
        assert result.ok and not overlaps(read_access_log(server.access_log_path))

This package is self-contained: it never reads ../shared/testdata.
"""

from .audit import Comparison, Request, compare, duplicates, overlaps, read_access_log, short_gaps
from .build import build_web
from .manifest import CrawlRules, WebManifest, expected_crawl
from .model import Role, Tls, Web, WebParams
from .server import TestWebServer

__all__ = [
    "Comparison", "CrawlRules", "WebManifest", "Request", "Role", "TestWebServer", "Tls", "Web", "WebParams",
    "build_web", "compare", "duplicates", "expected_crawl", "overlaps", "read_access_log", "short_gaps",
]

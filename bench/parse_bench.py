"""Benchmark of the per-page CPU path: link extraction, canonicalization, fingerprints.

The crawler's budget is about 0.9 CPU-ms per page with ~60 links, of which
link extraction + canonicalization + fingerprinting should take <= ~300 us
(DESIGN 2.13 figures: ada ~600k joins/s, Lexbor ~850 pages/s on the same
saved pages). This prints, on one core (CPU time, best of --rounds):

- LinkExtractor.parse over the 60 saved real pages (../shared/testdata/pages):
  pages/s, us per page, us per link, and the split between the Lexbor tree,
  the CSS query and the per-link work (attributes, srcset, CSS, joins);
- the same over pages of the built-in test web (`crawler.testweb`, small
  synthetic pages of ~60 links), and over its stylesheets as text/css bodies;
- the CSS part alone: `css_urls` over every `<style>` and style attribute of
  the saved pages, against tinycss2 tokenizing all of it;
- canonicalize joins/s on every href of those pages, with
  urllib.parse.urljoin in the same run as the baseline, and their ratio;
- fingerprint and fingerprints (numpy) rates.

`--summary` prints one line `saved_us_per_page=... testweb_us_per_page=...`
for before/after comparisons: run the bench of both trees in turns and take
medians (docs/parsing.md, "Speed"), since a shared machine makes single runs noisy.

Run from the repository root:  python bench/parse_bench.py [--rounds N] [--summary]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urljoin

REPO = Path(__file__).resolve().parents[1]
import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from crawler.config.schema import ParseConfig  # noqa: E402
from crawler.parse import LinkExtractor, ParsedPage  # noqa: E402
from crawler.urls import canonicalize, fingerprint, fingerprints  # noqa: E402

PAGES_DIR = REPO / ".." / "shared" / "testdata" / "pages"
PAGE_URL = "http://fakehost/test/page.html"  # readability's test pages were saved from here
TYPICAL_LINKS_PER_PAGE = 60  # Mercator's mean links per page (DESIGN 4)
DEFAULT_ROUNDS = 5
SMALL_PAGES = 10  # closest of the saved pages to a typical page
TESTWEB_PAGES = 300  # test-web pages parsed per round
TESTWEB_PORT = 8080  # any port: it only appears in the rendered absolute links
HTML_TYPE = "text/html; charset=utf-8"
CSS_TYPE = "text/css; charset=utf-8"


def best_of(rounds: int, work: Callable[[], object]) -> float:
    """Fastest of `rounds` timed runs of `work`, in CPU seconds."""
    best_s = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        work()
        best_s = min(best_s, time.process_time() - start)
    return best_s


def candidates(page: ParsedPage) -> int:
    """Every URL candidate a page had (taken, nofollow, dropped, truncated)."""
    return len(page.links) + page.nofollow_links + page.dropped_links + getattr(page, "truncated_links", 0)


def testweb_bodies(count: int) -> tuple[list[tuple[bytes, str]], list[tuple[bytes, str]]]:
    """(HTML pages, stylesheets) of the built-in test web, as (body, url)."""
    from crawler.testweb.build import build_web
    from crawler.testweb.model import Kind, Role, WebParams
    from crawler.testweb.pages import Renderer
    from crawler.testweb.resources import css_body
    web = build_web(WebParams())
    renderer = Renderer(web)
    pages, sheets = [], []
    for uid in range(web.urls):
        host = web.hosts[int(web.url_host[uid])]
        if host.role is not Role.ORDINARY:
            continue
        kind = int(web.url_kind[uid])
        url = web.url(uid, TESTWEB_PORT)
        if kind == Kind.PAGE and len(pages) < count and uid not in web.frameset:
            pages.append((renderer.page(uid, TESTWEB_PORT), url))
        elif kind == Kind.CSS and len(sheets) < count:
            sheets.append((css_body(host.name, web.url_path[uid]), url))
    return pages, sheets


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="timed runs per figure (best is kept)")
    args.add_argument("--summary", action="store_true", help="only the one-line whole-parse figures")
    benchkit.add_kernels_option(args)
    opts = args.parse_args()
    benchkit.check_kernels(opts)
    rounds = opts.rounds

    if not PAGES_DIR.is_dir():
        print(f"skipped: saved pages not found at {PAGES_DIR.resolve()}")
        return 0
    bodies = [p.read_bytes() for p in sorted(PAGES_DIR.glob("*.html"))]
    extractor = LinkExtractor(ParseConfig())
    parse = extractor.parse
    pages = [parse(body, PAGE_URL, HTML_TYPE) for body in bodies]
    n_pages = len(bodies)
    n_links = sum(map(candidates, pages))
    n_bytes = sum(map(len, bodies))
    web_pages, web_sheets = testweb_bodies(TESTWEB_PAGES)
    web_links = sum(candidates(parse(b, u, HTML_TYPE)) for b, u in web_pages)

    parse_s = best_of(rounds, lambda: [parse(body, PAGE_URL, HTML_TYPE) for body in bodies])
    web_s = best_of(rounds, lambda: [parse(b, u, HTML_TYPE) for b, u in web_pages])
    if opts.summary:
        print(f"saved_us_per_page={parse_s / n_pages * 1e6:.0f} testweb_us_per_page={web_s / len(web_pages) * 1e6:.0f}")
        return 0

    print(f"{n_pages} pages, {n_bytes / n_pages / 1024:.0f} KiB and {n_links / n_pages:.0f} URL candidates "
          f"per page on average")
    # Whole parse, then its parts: tree, CSS query, per-link work (attributes,
    # base/meta, srcset, CSS, canonicalization; `_scan` over ready node lists).
    trees = [LexborHTMLParser(body) for body in bodies]
    tree_s = best_of(rounds, lambda: [LexborHTMLParser(body) for body in bodies])
    query = extractor._query
    query_s = best_of(rounds, lambda: [t.css(query) for t in trees])
    node_lists = [t.css(query) for t in trees]
    page_url_b = PAGE_URL.encode()
    scan_s = best_of(rounds, lambda: [extractor._scan(nodes, PAGE_URL, page_url_b, ParsedPage())
                                      for nodes in node_lists])
    link_us = scan_s / n_links * 1e6
    tree_us_per_kib = tree_s / (n_bytes / 1024) * 1e6
    query_us_per_kib = query_s / (n_bytes / 1024) * 1e6
    print(f"LinkExtractor.parse: {n_pages / parse_s:,.0f} pages/s, {parse_s / n_pages * 1e6:,.0f} us/page, "
          f"{parse_s / n_links * 1e6:.2f} us per URL candidate (everything included)")
    print(f"  Lexbor tree {tree_s / n_pages * 1e6:,.0f} us/page ({tree_us_per_kib:.2f} us/KiB), "
          f"CSS query {query_s / n_pages * 1e6:,.0f} us/page ({query_us_per_kib:.2f} us/KiB), "
          f"per-link work {link_us:.2f} us/candidate")
    print(f"  a {TYPICAL_LINKS_PER_PAGE}-link page: {TYPICAL_LINKS_PER_PAGE * link_us:.0f} us of per-link work "
          f"+ {tree_us_per_kib + query_us_per_kib:.1f} us per KiB of HTML for tree and query")

    small = sorted(range(n_pages), key=lambda i: len(bodies[i]))[:SMALL_PAGES]
    small_bodies = [bodies[i] for i in small]
    small_links = sum(candidates(pages[i]) for i in small)
    small_s = best_of(rounds, lambda: [parse(body, PAGE_URL, HTML_TYPE) for body in small_bodies])
    print(f"  the {SMALL_PAGES} smallest pages ({sum(map(len, small_bodies)) / SMALL_PAGES / 1024:.0f} KiB, "
          f"{small_links / SMALL_PAGES:.0f} candidates each): {small_s / SMALL_PAGES * 1e6:,.0f} us/page")
    web_kib = sum(len(b) for b, _ in web_pages) / len(web_pages) / 1024
    print(f"test web: {len(web_pages)} pages ({web_kib:.0f} KiB, {web_links / len(web_pages):.0f} candidates each): "
          f"{web_s / len(web_pages) * 1e6:,.0f} us/page")
    if web_sheets:
        sheets_s = best_of(rounds, lambda: [parse(b, u, CSS_TYPE) for b, u in web_sheets])
        print(f"  its stylesheets as text/css: {sheets_s / len(web_sheets) * 1e6:,.1f} us per stylesheet")

    css_figures(rounds, trees)

    # Canonicalization against urljoin, on the raw hrefs of the same pages.
    hrefs = [(node.attrs.get("href") or node.attrs.get("src") or node.attrs.get("action") or "")
             for t in trees for node in t.css("a[href],link[href],img[src],script[src],iframe[src],form[action]")]
    ada_s = best_of(rounds, lambda: [canonicalize(h, PAGE_URL) for h in hrefs])
    urljoin_s = best_of(rounds, lambda: [urljoin(PAGE_URL, h) for h in hrefs])
    print(f"canonicalize: {len(hrefs) / ada_s / 1e3:,.0f}k joins/s ({ada_s / len(hrefs) * 1e9:,.0f} ns); "
          f"urllib.parse.urljoin: {len(hrefs) / urljoin_s / 1e3:,.0f}k joins/s; "
          f"ratio {urljoin_s / ada_s:.2f}x")

    urls = [u for p in pages for u in p.links]
    one_s = best_of(rounds, lambda: [fingerprint(u) for u in urls])
    many_s = best_of(rounds, lambda: [fingerprints(p.links) for p in pages])
    print(f"fingerprint: {len(urls) / one_s / 1e6:.2f}M URLs/s; fingerprints (per page, numpy): "
          f"{len(urls) / many_s / 1e6:.2f}M URLs/s")
    return 0


def css_figures(rounds: int, trees: list) -> None:
    """css_urls (prefilter + scan + slices) against tinycss2 over all of the saved pages' CSS."""
    try:
        from crawler.parse.css import css_urls, css_urls_reference
    except ImportError:  # an older tree without CSS links
        return
    texts = [n.text(deep=True) for t in trees for n in t.css("style")]
    texts += [n.attributes.get("style") or "" for t in trees for n in t.css("[style]")]
    size = sum(map(len, texts))
    fast_s = best_of(rounds, lambda: [css_urls(x) for x in texts])
    full_s = best_of(1, lambda: [css_urls_reference(x) for x in texts])
    print(f"CSS: {len(texts)} texts, {size / 1e6:.1f} MB: css_urls {size / fast_s / 1e6:,.0f} MB/s "
          f"({fast_s / len(trees) * 1e6:,.0f} us per saved page), tinycss2 on all of it "
          f"{size / full_s / 1e6:.1f} MB/s ({full_s / len(trees) * 1e6:,.0f} us per saved page)")


if __name__ == "__main__":
    sys.exit(main())

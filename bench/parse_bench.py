"""Benchmark of the per-page CPU path: link extraction, canonicalization, fingerprints.

The crawler's budget is about 0.9 CPU-ms per page with ~60 links, of which
link extraction + canonicalization + fingerprinting should take <= ~300 us
(DESIGN 2.13 figures: ada ~600k joins/s, Lexbor ~850 pages/s on the same
saved pages). This prints, on one core:

- LinkExtractor.parse over the 60 saved real pages (../shared/testdata/pages):
  pages/s, us per page, us per link, and the split between the Lexbor tree,
  the CSS query and the per-link work;
- canonicalize joins/s on every href of those pages, with
  urllib.parse.urljoin in the same run as the baseline, and their ratio;
- fingerprint and fingerprints (numpy) rates.

Run from the repository root:  python bench/parse_bench.py [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urljoin

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from crawler.config.schema import ParseConfig  # noqa: E402
from crawler.parse import LinkExtractor, ParsedPage  # noqa: E402
from crawler.urls import canonicalize, fingerprint, fingerprints  # noqa: E402

PAGES_DIR = REPO / ".." / "shared" / "testdata" / "pages"
PAGE_URL = "http://fakehost/test/page.html"  # readability's test pages were saved from here
TYPICAL_LINKS_PER_PAGE = 60  # Mercator's mean links per page (DESIGN 4)
DEFAULT_ROUNDS = 5
SMALL_PAGES = 10  # closest of the saved pages to a typical page


def best_of(rounds: int, work: Callable[[], object]) -> float:
    """Fastest of `rounds` timed runs of `work`, in seconds."""
    best_s = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        work()
        best_s = min(best_s, time.process_time() - start)
    return best_s


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="timed runs per figure (best is kept)")
    rounds = args.parse_args().rounds

    if not PAGES_DIR.is_dir():
        print(f"skipped: saved pages not found at {PAGES_DIR.resolve()}")
        return 0
    bodies = [p.read_bytes() for p in sorted(PAGES_DIR.glob("*.html"))]
    extractor = LinkExtractor(ParseConfig())
    parse = extractor.parse
    ctype = "text/html; charset=utf-8"
    pages = [parse(body, PAGE_URL, ctype) for body in bodies]
    n_pages = len(bodies)
    n_links = sum(len(p.links) + p.dropped_links + p.nofollow_links for p in pages)
    n_bytes = sum(map(len, bodies))
    print(f"{n_pages} pages, {n_bytes / n_pages / 1024:.0f} KiB and {n_links / n_pages:.0f} link elements per page on average")

    # Whole parse, then its parts: tree, CSS query, per-link work (attributes,
    # base/meta, canonicalization; `_scan` over ready node lists).
    parse_s = best_of(rounds, lambda: [parse(body, PAGE_URL, ctype) for body in bodies])
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
          f"{parse_s / n_links * 1e6:.2f} us per link element (everything included)")
    print(f"  Lexbor tree {tree_s / n_pages * 1e6:,.0f} us/page ({tree_us_per_kib:.2f} us/KiB), "
          f"CSS query {query_s / n_pages * 1e6:,.0f} us/page ({query_us_per_kib:.2f} us/KiB), "
          f"per-link work {link_us:.2f} us/link")
    print(f"  a {TYPICAL_LINKS_PER_PAGE}-link page: {TYPICAL_LINKS_PER_PAGE * link_us:.0f} us of per-link work "
          f"+ {tree_us_per_kib + query_us_per_kib:.1f} us per KiB of HTML for tree and query")

    small = sorted(range(n_pages), key=lambda i: len(bodies[i]))[:SMALL_PAGES]
    small_bodies = [bodies[i] for i in small]
    small_links = sum(len(pages[i].links) + pages[i].dropped_links + pages[i].nofollow_links for i in small)
    small_s = best_of(rounds, lambda: [parse(body, PAGE_URL, ctype) for body in small_bodies])
    print(f"  the {SMALL_PAGES} smallest pages ({sum(map(len, small_bodies)) / SMALL_PAGES / 1024:.0f} KiB, "
          f"{small_links / SMALL_PAGES:.0f} links each): {small_s / SMALL_PAGES * 1e6:,.0f} us/page")

    # Canonicalization against urljoin, on the raw hrefs of the same pages.
    hrefs = [(node.attrs.get("href") or node.attrs.get("src") or node.attrs.get("action") or "")
             for t in trees for node in t.css(extractor._selector)]
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


if __name__ == "__main__":
    sys.exit(main())

"""Parsing: from a fetched body to the canonical URLs it links to.

Where this sits (DESIGN 1, 2.8): a worker fetches a page and hands the body,
its URL and its Content-Type to `LinkExtractor.parse`. Out comes a
`ParsedPage`: the page's links as canonical absolute URLs (`crawler.urls`),
in document order with repeats kept (the splitter's and DUE's caches see the
true stream, as in Mercator), plus what governs them: `<base href>`,
`rel=nofollow`, `<meta name=robots>`, the charset used and the title, and
the counts of what was not taken (`dropped_links`, `truncated_links`).
HTML pages and `text/css` stylesheets go through the same call
(`parse_kind` says which a Content-Type is; `ParsedPage.kind` which was read).
`content_fingerprint` is the content-seen test: exact duplicate bodies are
recorded but their links are not processed again. docs/parsing.md explains
the link sources and every decision.

Steps, one module each:
- `mime.py`: HTML, CSS or neither (`parse_kind`; a missing Content-Type
  counts as HTML unless the body looks binary), and the header's charset;
- `charset.py`: BOM, then HTTP charset, then the HTML standard's `<meta>`
  prescan (HTML) or `@charset` (CSS), then UTF-8; WHATWG label mapping;
  decoding never raises;
- `sources.py`: `parse.link_sources` compiled: which attributes of which
  elements hold links, and how each is read;
- `links.py`: the Lexbor tree (selectolax), the link sources, base,
  nofollow, meta robots, `max_links_per_page`; `extract_links` is the
  stable one-call form (DESIGN 2.14);
- `srcset.py`, `refresh.py`: the HTML standard's parsers of `srcset` and of
  refresh values (`refresh_url` also reads an HTTP `Refresh` header);
- `css.py`: url(), image-set() and @import URLs of CSS (tinycss2 tokens);
- `content.py`: `content_fingerprint` (mmh3, 64 bits, raw bytes);
- `seen.py`: `ContentSeen`, the bounded set of fingerprints the test asks
  (it may forget a body, never claim one it was not given).

Speed: a page's whole path here (tree, query, canonicalization) is the
crawler's largest CPU cost per page; see `bench/parse_bench.py` for figures
and the module docstrings for the hot-path choices. One caveat, not ours to
fix: Lexbor's tree building is quadratic in nesting depth with no cap
(20,000 nested `<div>`s take seconds), so a hostile page can cost a lot of
CPU; the tree is built without the GIL, and the caller should run `parse`
off the event loop with a deadline where that matters.
"""

from crawler.parse.content import content_fingerprint
from crawler.parse.links import LinkExtractor, ParsedPage, extract_links
from crawler.parse.mime import is_css, is_html, parse_kind
from crawler.parse.refresh import refresh_url
from crawler.parse.seen import ContentSeen

__all__ = ["ContentSeen", "LinkExtractor", "ParsedPage", "content_fingerprint", "extract_links", "is_css", "is_html",
           "parse_kind", "refresh_url"]

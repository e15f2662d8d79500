"""Parsing: from a fetched body to the canonical URLs it links to.

Where this sits (DESIGN 1, 2.8): a worker fetches a page and hands the body,
its URL and its Content-Type to `LinkExtractor.parse`. Out comes a
`ParsedPage`: the page's links as canonical absolute URLs (`crawler.urls`),
in document order with repeats kept (the splitter's and DUE's caches see the
true stream, as in Mercator), plus what governs them: `<base href>`,
`rel=nofollow`, `<meta name=robots>`, the charset used and the title.
`content_fingerprint` is the content-seen test: exact duplicate bodies are
recorded but their links are not processed again.

Steps, one module each:
- `mime.py`: is the response HTML (`is_html`; a missing Content-Type counts
  as HTML unless the body looks binary), and the header's charset parameter;
- `charset.py`: BOM, then HTTP charset, then the HTML standard's `<meta>`
  prescan of the first 1024 bytes, then UTF-8; WHATWG label mapping;
  decoding never raises;
- `links.py`: the Lexbor tree (selectolax), link sources from
  `config.link_sources` (default a, area, link [href]; img, frame, iframe,
  embed, source [src]; form [action]), base, nofollow, meta robots,
  `max_links_per_page`; `extract_links` is the stable one-call form
  (DESIGN 2.14);
- `content.py`: `content_fingerprint` (mmh3, 64 bits, raw bytes).

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
from crawler.parse.mime import is_html

__all__ = ["LinkExtractor", "ParsedPage", "content_fingerprint", "extract_links", "is_html"]

"""crawler.parse against independent references on the 60 saved real pages.

- html5lib (a spec-compliant tree builder independent of Lexbor) with the
  default link sources written out again in tests/support/parse_reference.py, plain
  transcriptions of the srcset and refresh algorithms, and CSS read rule by
  rule (tinycss2's parse_stylesheet route, not our token scan): recall and
  precision of our links over all pages, as multisets of canonical URLs;
- the CSS fast path (`css_urls`) against tinycss2 tokenizing every byte
  (`css_urls_reference`) on every `<style>` and style attribute: equal.
"""

from __future__ import annotations

from collections import Counter

import pytest
from selectolax.lexbor import LexborHTMLParser
from tests.support.fixtures import testdata as public_testdata
from tests.support.parse_reference import Html5libReference, css_reference

from crawler.config.schema import ParseConfig
from crawler.parse import LinkExtractor
from crawler.parse.css import css_urls, css_urls_reference

PAGE_URL = "http://fakehost/test/page.html"  # where readability's saved pages claim to live
MIN_RECALL = 0.99
MIN_PRECISION = 0.97


@pytest.fixture(scope="module")
def bodies() -> list[tuple[str, bytes]]:
    pages = sorted(public_testdata("pages").glob("*.html"))
    if not pages:
        pytest.skip("no saved pages")
    return [(p.name, p.read_bytes()) for p in pages]


@pytest.fixture(scope="module")
def references(bodies) -> list[Html5libReference]:
    """html5lib's reading of each page, once for the module (html5lib is slow: ~10 s for all)."""
    # The files are saved as UTF-8 whatever their <meta> says (qq.html declares gb2312).
    return [Html5libReference(body.decode("utf-8", "replace")) for _, body in bodies]


@pytest.mark.slow
def test_links_against_html5lib_reference(bodies, references) -> None:
    """Recall and precision over all pages (multisets of canonical links).

    Where they differ (measured, all nine pages the same way): their `<style>`
    elements start with `<![CDATA[`, left by the tool that saved the pages as
    XHTML. In CSS that opens two [] blocks that never close, so a browser (and
    the rule-by-rule reference) drops the whole stylesheet, while our token
    scan still reads its url()s. For an archiving crawler the extra links are
    harmless (the files exist on the site); the figures say how much it matters.
    """
    extractor = LinkExtractor(ParseConfig())
    common = ours_total = ref_total = 0
    differ = []
    for (name, body), reference in zip(bodies, references):
        ours = Counter(extractor.parse(body, PAGE_URL, "text/html; charset=utf-8").links)
        ref = Counter(reference.links(PAGE_URL))
        common += sum((ours & ref).values())
        ours_total += sum(ours.values())
        ref_total += sum(ref.values())
        if ours != ref:
            differ.append(name)
    recall, precision = common / ref_total, common / ours_total
    print(f"html5lib reference, {len(bodies)} saved pages, {ref_total} reference links, {ours_total} ours: "
          f"recall {recall:.4f}, precision {precision:.4f}; pages that differ: {differ}")
    assert recall >= MIN_RECALL and precision >= MIN_PRECISION


@pytest.mark.slow
def test_reference_sees_what_the_old_sources_missed(references) -> None:
    """The reference is not a copy of the old behaviour: it finds CSS links and plenty of others."""
    total = Counter()
    for ref in references:
        total.update(kind for kind, _ in ref.items)
    assert total["css"] > 500 and total["link"] > 20000


@pytest.mark.slow
def test_css_fast_path_equals_full_tokenization(bodies) -> None:
    texts = []
    for _, body in bodies:
        tree = LexborHTMLParser(body)
        texts += [node.text(deep=True) for node in tree.css("style")]
        texts += [node.attributes.get("style") or "" for node in tree.css("[style]")]
    found = 0
    for text in texts:
        fast = css_urls(text)
        assert fast == css_urls_reference(text), text[:200]
        found += len(fast)
    print(f"CSS of the saved pages: {len(texts)} texts, {found} URLs, fast path == tinycss2 on every text")
    assert found > 1000


def test_css_rule_route_agrees_on_clean_stylesheets() -> None:
    css = ('@import "a.css"; @import url(b.css) screen; @namespace svg url(http://ns.example/);'
           '@media print { .x { background: url(c.png) } } @font-face { src: url(d.woff2) format("woff2") }'
           '.y { background-image: image-set("e.png" 1x, url(f.png) 2x) } /* url(g.png) */ .z{content:"url(h)"}')
    assert css_urls(css) == css_reference(css) == ["a.css", "b.css", "c.png", "d.woff2", "e.png", "f.png"]

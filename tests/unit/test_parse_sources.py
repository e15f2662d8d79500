"""crawler.parse: the link sources beyond hyperlinks (page requisites, srcset, refresh, CSS, forms),
truncation, fetched stylesheets, and the link_sources key."""

from __future__ import annotations

import pytest

from crawler.config.loader import ConfigError, from_dict
from crawler.config.schema import ParseConfig
from crawler.parse import LinkExtractor, ParsedPage, extract_links, is_css, parse_kind, refresh_url
from crawler.parse.charset import choose_css_encoding
from crawler.parse.srcset import srcset_urls

URL = "http://example.com/dir/page.html"
HTML = "text/html"
CSS = "text/css"
E = "http://example.com"


def parse(body: bytes | str, url: str = URL, content_type: str | None = HTML, charset: str | None = None,
          **config) -> ParsedPage:
    if isinstance(body, str):
        body = body.encode()
    return LinkExtractor(ParseConfig(**config)).parse(body, url, content_type, charset)


# --- page requisites -------------------------------------------------------------------

def test_page_requisites_in_document_order() -> None:
    page = parse("""<html><head><script src=/app.js></script><link rel=preload as=image href=/h.jpg
        imagesrcset="/h1.jpg 1x, /h2.jpg 2x"></head>
        <body background=/bg.png><table background=t.png><tr><th background=th.png>h<td background=td.png>d
        </table><object data=/o.swf></object><video src=v.mp4 poster=p.jpg><track src=sub.vtt></video>
        <audio src=a.mp3></audio><input type=image src=go.png><input type=IMAGE src=go2.png>
        <input type=text src=no.png><input src=no2.png></body></html>""")
    assert page.links == [
        f"{E}/app.js", f"{E}/h.jpg", f"{E}/h1.jpg", f"{E}/h2.jpg", f"{E}/bg.png", f"{E}/dir/t.png",
        f"{E}/dir/th.png", f"{E}/dir/td.png", f"{E}/o.swf", f"{E}/dir/v.mp4", f"{E}/dir/p.jpg", f"{E}/dir/sub.vtt",
        f"{E}/dir/a.mp3", f"{E}/dir/go.png", f"{E}/dir/go2.png",
    ]
    assert page.dropped_links == page.nofollow_links == page.truncated_links == 0


def test_img_src_then_srcset_and_picture_sources() -> None:
    page = parse('<picture><source srcset="a.webp 1x, b,c.webp 2x" type=image/webp>'
                 '<img src=d.jpg srcset="d-300.jpg 300w, d-600.jpg 600w, bad.jpg 2q, data:image/png;base64,AA 1x">'
                 '</picture>')
    assert page.links == [f"{E}/dir/{x}" for x in ("a.webp", "b,c.webp", "d.jpg", "d-300.jpg", "d-600.jpg")]
    assert page.dropped_links == 2  # bad.jpg (invalid descriptor), the data: candidate


@pytest.mark.parametrize(("value", "urls", "invalid"), [
    ("a.jpg 1x, b.jpg 2x", ["a.jpg", "b.jpg"], 0),
    ("a.jpg", ["a.jpg"], 0),
    ("a,b.jpg 2x", ["a,b.jpg"], 0),  # a comma inside a URL
    ("a.jpg,b.jpg", ["a.jpg,b.jpg"], 0),  # no whitespace: one URL
    ("a.jpg, b.jpg", ["a.jpg", "b.jpg"], 0),  # trailing comma ends the URL
    ("a.jpg,,, b.jpg 2x,", ["a.jpg", "b.jpg"], 0),
    ("  ,, a.jpg 100w 50h , b.jpg 1.5x", ["a.jpg", "b.jpg"], 0),
    ("a.jpg 50h", [], 1),  # a height needs a width
    ("a.jpg 1x 2x, b.jpg 0w, c.jpg -1x, d.jpg 1.x, e.jpg x, f.jpg 2", [], 6),
    ("a.jpg 1e1x, b.jpg .5x, c.jpg -0x", ["a.jpg", "b.jpg", "c.jpg"], 0),
    ("a.jpg (1x, 2x) 3x, b.jpg", ["b.jpg"], 1),  # parentheses keep the comma in the descriptor
    ("", [], 0), ("   ", [], 0),
])
def test_srcset_parser(value: str, urls: list[str], invalid: int) -> None:
    assert srcset_urls(value) == (urls, invalid)


@pytest.mark.parametrize(("value", "url"), [
    ("5; url=/next", "/next"),
    ("0;URL='/a b.html'", "/a b.html"),
    ('0; url="/q"ignored', "/q"),
    ("3,url = /x", "/x"),
    ("0 url=/y", "/y"),
    ("0; /plain", "/plain"),
    (".5; url=/half", "/half"),
    ("1.5.6; url=/dots", "/dots"),
    ("0; urlx=/z", "urlx=/z"),  # not 'url=': the whole rest is the URL
    ("0; u", "u"),
    ("0; url=", ""),
    ("  7  ", None),  # a refresh of the page itself
    ("", None), ("x; url=/no", None), ("5x; url=/no", None), ("-1; url=/no", None),
])
def test_refresh_parser(value: str, url: str | None) -> None:
    assert refresh_url(value) == url


def test_meta_refresh() -> None:
    page = parse('<head><meta http-equiv="Refresh" content="0; url=next.html"><base href="/b/"></head>'
                 '<meta http-equiv=refresh content="7"><a href=x></a>')
    assert page.links == [f"{E}/b/next.html", f"{E}/b/x"]  # the base applies to the refresh too
    assert page.refresh == f"{E}/b/next.html"
    assert parse('<meta http-equiv=refresh content="0; url=mailto:x@y">').dropped_links == 1
    assert parse('<meta name=refresh content="0; url=/no">').links == []
    assert parse('<meta http-equiv=refresh content="0; url=/x">', link_sources=["a"]).links == []


def test_forms_get_actions_only() -> None:
    page = parse('<form action=/search></form><form method=GET action=/g></form><form method=post action=/p>'
                 '</form><form method=POST action=/p2></form><form method=dialog action=/d></form>'
                 '<form method=bogus action=/invalid-is-get></form><form></form>')
    assert page.links == [f"{E}/search", f"{E}/g", f"{E}/invalid-is-get"]
    assert page.dropped_links == 0


def test_nofollow_covers_every_url_attribute_of_the_element() -> None:
    page = parse('<link rel="preload nofollow" href=/a imagesrcset="/b 1x, /c 2x"><a rel=nofollow href=/d '
                 'style="background:url(/e.png)"></a>')
    assert page.links == [f"{E}/e.png"]  # the style of a nofollow link still styles the page
    assert page.nofollow_links == 3


# --- CSS in pages ------------------------------------------------------------------------

def test_style_elements_and_attributes() -> None:
    page = parse("""<head><base href="/base/"><style>
        @import "print.css" print; @import url(screen.css);
        @font-face { font-family: X; src: url(f.woff2) format("woff2"), local("X"), url('f.woff') }
        .a { background: URL( "a b.png" ) } /* url(comment.png) */ .b::after { content: "url(string.png)" }
        .c { background-image: image-set("c1.png" 1x, url(c2.png) 2x, -webkit-image-set('c3.png' 1x)) }
        .d { mask: url(#frag) } .e { background: url() } .f { background: url(data:image/png;base64,AAAA) }
        </style></head><body><div style="background:url(div.png)"><span style="color:red">x</span>
        <p style='background-image:url("p.png")'>y</p><img src=i.png style="border-image:url(b.png)"></div>""")
    assert page.links == [f"{E}/base/{x}" for x in (
        "print.css", "screen.css", "f.woff2", "f.woff", "a%20b.png", "c1.png", "c2.png", "c3.png",
        "div.png", "p.png", "i.png", "b.png")]
    assert page.dropped_links == 2  # url(#frag) and url(): no resource; data: is skipped uncounted


def test_element_with_both_a_source_and_a_style_url_is_read_once() -> None:
    page = parse('<a href=/x style="background:url(/y)">t</a><div style="background:url(/z)"></div>')
    assert page.links == [f"{E}/x", f"{E}/y", f"{E}/z"]


def test_css_sources_can_be_turned_off() -> None:
    body = '<style>a{b:url(/s)}</style><p style="b:url(/p)">'
    assert parse(body).links == [f"{E}/s", f"{E}/p"]
    no_css = [s for s in ParseConfig().link_sources if s not in ("style", "*[style]")]
    assert parse(body, link_sources=no_css).links == []
    assert parse(body, link_sources=["*[style]"]).links == [f"{E}/p"]


def test_meta_nofollow_takes_css_links_too() -> None:
    page = parse('<meta name=robots content=nofollow><style>a{b:url(/s)}</style><img src=/i>')
    assert page.links == [] and page.nofollow_links == 2 and page.refresh is None


# --- truncation -------------------------------------------------------------------------

def test_truncated_links_apart_from_dropped() -> None:
    body = "".join(f'<a href="/{i}">' for i in range(5)) + '<a href="javascript:x">' + '<img srcset="/a 1x, /b 2x">'
    page = parse(body, max_links_per_page=3)
    assert page.links == [f"{E}/0", f"{E}/1", f"{E}/2"]
    assert (page.dropped_links, page.truncated_links) == (0, 5)  # past the limit nothing is canonicalized
    assert parse(body, max_links_per_page=10).truncated_links == 0
    assert parse(body, max_links_per_page=10).dropped_links == 1


# --- fetched stylesheets ------------------------------------------------------------------

def test_stylesheet_body_links_resolve_against_its_own_url() -> None:
    body = b'@import "base.css";\n.a{background:url(../img/a.png)}\n.b{background:url("//cdn.example/b.png")}'
    page = parse(body, url="http://example.com/css/site.css", content_type="text/css; charset=utf-8")
    assert page.kind == "css" and page.title is None
    assert page.links == ["http://example.com/css/base.css", "http://example.com/img/a.png", "http://cdn.example/b.png"]
    assert extract_links(body, "http://example.com/css/site.css", CSS) == page.links
    assert parse(body, url="http://example.com/x.html").kind == "html"


def test_stylesheet_charsets() -> None:
    text = '.a{background:url("caf\u00e9.png")}'
    expected = ["http://example.com/caf%C3%A9.png"]
    cases = [
        (text.encode("cp1252"), "text/css; charset=windows-1252", "cp1252"),
        (b'@charset "iso-8859-1";' + text.encode("cp1252"), CSS, "cp1252"),  # WHATWG: latin1 = cp1252
        (b"\xef\xbb\xbf" + text.encode(), "text/css; charset=iso-8859-1", "utf-8"),  # BOM wins
        (b'@charset "utf-16";' + text.encode(), CSS, "utf-8"),  # a stylesheet saying UTF-16 is not
        (text.encode(), CSS, "utf-8"),
        ("\ufeff".encode("utf-16-le") + text.encode("utf-16-le"), CSS, "utf-16-le"),
    ]
    for body, content_type, codec in cases:
        page = parse(body, url="http://example.com/s.css", content_type=content_type)
        assert (page.charset, page.links) == (codec, expected), (body[:30], content_type)
    assert choose_css_encoding(b'@charset "bogus"; a{}', None) == ("utf-8", 0)
    assert choose_css_encoding(b'@charset  "koi8-r";', None) == ("utf-8", 0)  # not exactly '@charset "'


def test_parse_kind() -> None:
    assert parse_kind("text/css; charset=utf-8") == "css" and is_css("TEXT/CSS")
    assert parse_kind(None) == parse_kind("text/html") == parse_kind("application/xhtml+xml") == "html"
    assert parse_kind("image/png") is None and not is_css("text/html")
    page = parse(b"a{b:url(x)}", content_type="image/png")
    assert page.kind is None and page.links == []


def test_stylesheet_never_raises() -> None:
    for body in (b"", b"url(", b"@import", b'@import "', b"\xff\xfe\x00", b"url(\\", b"a{b:url(x" * 1000,
                 b"/*", b'"', b"image-set(", b"@namespace url(", b"\x00url(a)"):
        page = parse(body, content_type=CSS)
        assert all(link.startswith("http") for link in page.links)


# --- the config key ---------------------------------------------------------------------------

def test_link_sources_errors_name_the_key_at_load() -> None:
    with pytest.raises(ConfigError, match=r"x\.yaml: parse\.link_sources: 'video\[poster'"):
        from_dict({"parse": {"link_sources": ["a", "video[poster", "img"]}}, "x.yaml")
    with pytest.raises(ConfigError, match="parse.link_sources.*second time"):
        from_dict({"parse": {"link_sources": ["img", "img[src]"]}}, "x.yaml")
    assert from_dict({"parse": {"link_sources": ["a", "video", "video[poster]", "*[style]"]}}, "x.yaml")

"""Properties of crawler.parse's small parsers against plain references (hypothesis).

- `srcset_urls` keeps exactly the candidates of a step-by-step transcription
  of the HTML standard's "parse a srcset attribute" (tests/support/parse_reference.py),
  on free text and on srcset-shaped text (URLs with commas, descriptors,
  parentheses, stray commas and whitespace);
- `refresh_url` equals the transcription of "parse a refresh value";
- `css_urls` (prefilter, jump-scan, slices) equals `css_urls_reference`
  (tinycss2 over every byte) on generated stylesheets full of what trips a
  hand-made scanner: comments, quoted and unquoted url()s with escapes,
  `url(` inside strings and comments, bad urls, @import / @namespace forms,
  image-set(), nested blocks, CR/LF/FF and NUL;
- generated url() tokens decode to the URL that was encoded, with a known
  number of comment/string decoys never read as URLs.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tests.support.parse_reference import refresh_reference, srcset_reference

from crawler.parse.css import css_urls, css_urls_reference
from crawler.parse.refresh import refresh_url
from crawler.parse.srcset import srcset_urls

EXAMPLES = 400
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- srcset -----------------------------------------------------------------------------

_WS = st.sampled_from([" ", "\t", "\n", "\x0c", "\r", "  "])
_URL_CHARS = st.text(alphabet="ab/.,()-_%?=&:1x", min_size=1, max_size=12)
_DESCRIPTOR = st.one_of(
    st.integers(-3, 3000).map(lambda n: f"{n}w"), st.integers(-3, 3000).map(lambda n: f"{n}h"),
    st.sampled_from(["1x", "1.5x", ".5x", "2.x", "-1x", "1e1x", "0x", "x", "w", "(1x,2x)", "1q", "3", "1X"]),
)


@st.composite
def srcsets(draw) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 5))):
        parts.append(draw(st.sampled_from(["", " ", ",", " , ", ",,"])))
        parts.append(draw(_URL_CHARS))
        for _ in range(draw(st.integers(0, 3))):
            parts.append(draw(_WS))
            parts.append(draw(_DESCRIPTOR))
        parts.append(draw(st.sampled_from([",", ", ", " ,", "", " "])))
    return "".join(parts)


@pytest.mark.slow
@SETTINGS
@given(st.one_of(srcsets(), st.text(alphabet=" \t,()xwh.0123456789ab-", max_size=40), st.text(max_size=30)))
def test_srcset_matches_the_standard(value: str) -> None:
    urls, invalid = srcset_urls(value)
    assert urls == srcset_reference(value)
    assert invalid >= 0


# --- refresh ------------------------------------------------------------------------------

@st.composite
def refreshes(draw) -> str:
    time = draw(st.sampled_from(["", "0", "5", ".5", "1.2.3", "10", "x", "-1"]))
    sep = draw(st.sampled_from(["", ";", ",", " ", " ; ", "\t,", ";;"]))
    key = draw(st.sampled_from(["", "url=", "URL =", "Url= ", "ur", "u", "urlx=", "url", " url = "]))
    quote = draw(st.sampled_from(["", "'", '"']))
    url = draw(st.text(alphabet="ab/.?=' \"#", max_size=10))
    return f"{draw(_WS) if draw(st.booleans()) else ''}{time}{sep}{key}{quote}{url}"


@SETTINGS
@given(st.one_of(refreshes(), st.text(max_size=30)))
def test_refresh_matches_the_standard(value: str) -> None:
    assert refresh_url(value) == refresh_reference(value)


# --- CSS ------------------------------------------------------------------------------------

_PIECES = st.sampled_from([
    "a{b:c}", " ", "\n", "\r\n", "\x0c", "\t", ";", "{", "}", "(", ")", "[", "]", ",", ":",
    "/*", "*/", "/* url(no.png) */", '"', "'", '"url(no)"', "'@import \"no\"'", "\\", "\\\"", "\\)", "\\\n",
    "url(", "URL(", "uRl(", "url( ", "url(a.png)", "url( b.png )", 'url("c d.png")', "url('e.png' )",
    "url(f\\)g.png)", "url(h\\ i.png)", "url(j\"k)", "url(l m)", "url(n(o))", 'url("p\\"q")', "url(\\72 s.png)",
    "url(data:image/png;base64,AAA)", 'url("data:x")', "url()", "url(#frag)", "xurl(no)", "-url(no)", "#url(no)",
    "@url(no)", "5url(no)", "image-set(", '-webkit-image-set("w.png" 1x)', 'image-set("v.png" 1x, url(u.png) 2x)',
    '@import "i.css";', "@import url(j.css) print;", "@import'k.css'", "@imports 'no'", "@IMPORT \"L.css\"",
    "@import /* c */ 'm.css'", '@namespace svg url(http://ns/)', '@namespace "ns"', "@namespace url(ns)",
    "@namespace x 'ns'", "é", "\x00", "<!--", "-->", "\"unterminated\n", "url(\n)", "é url(ü.png)",
])


@pytest.mark.slow
@SETTINGS
@given(st.one_of(st.lists(_PIECES, max_size=30).map("".join),
                 st.lists(st.one_of(_PIECES, st.text(max_size=5)), max_size=20).map("".join)))
def test_css_fast_path_equals_full_tokenization(css: str) -> None:
    # The fast path's one blind spot (css.py): a keyword spelled with an escape, e.g. `\\url(x)`.
    assume(_ESCAPED_KEYWORD.search(css) is None)
    assert css_urls(css) == css_urls_reference(css)
    assert css_urls(css.encode()) == css_urls_reference(css)


_ESCAPED_KEYWORD = re.compile(r"\\(?=url\(|image-set\(|-webkit-image-set\(|@import|@namespace)", re.I)

_SAFE = "abcdefghijklmnopqrstuvwxyz0123456789/._-?=&%é"
_NEEDS_ESCAPE = " ()\"'\\"


@st.composite
def encoded_urls(draw) -> tuple[str, str]:
    """(the URL, one way of writing it in CSS): unquoted with escapes, or quoted."""
    url = draw(st.text(alphabet=_SAFE + _NEEDS_ESCAPE, min_size=1, max_size=15).filter(
        lambda u: u.strip(" ") and not u.lower().startswith("data:") and not u.startswith("#")))
    form = draw(st.sampled_from(["unquoted", "double", "single", "hex"]))
    if form == "unquoted":
        body = "".join("\\" + c if c in _NEEDS_ESCAPE else c for c in url)
    elif form == "hex":
        body = "".join(f"\\{ord(c):x} " if c in _NEEDS_ESCAPE or c.isdigit() else c for c in url)
    else:
        q = '"' if form == "double" else "'"
        body = q + "".join("\\" + c if c in (q, "\\") else c for c in url) + q
    return url, f"url({body})"


@pytest.mark.slow
@SETTINGS
@given(st.lists(st.tuples(encoded_urls(), st.sampled_from(["/* url(no) */", '"url(no)"', "'url(no)'", ""]),
                          st.sampled_from(["a{background:", ".b{src:", "@media x{.c{d:", "--v:"])),
                max_size=8))
def test_css_urls_decode_what_was_encoded(items) -> None:
    css = ""
    expected = []
    for (url, token), decoy, prefix in items:
        css += f"{prefix}{token} {decoy};}}\n"
        expected.append(url)
    assert css_urls(css) == expected

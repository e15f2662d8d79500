"""LinkExtractor: the canonical URLs a page (HTML or CSS) links to, in document order.

Per fetched HTML page (DESIGN 2.8): choose the charset, build a Lexbor tree,
read `<base href>` and `<meta name=robots>`, then take the URLs of every link
source (`sources.py`, `config.link_sources`; by default the hyperlinks and
everything a browser fetches to show the page: scripts, images and their
srcset candidates, media, stylesheets and the URLs inside CSS, meta refresh,
GET form actions), skip `rel=nofollow`, and canonicalize each against the
effective base (`crawler.urls`). Per fetched stylesheet (`text/css`): its
url()/@import URLs against the stylesheet's own URL. docs/parsing.md has the
reasons for each source.

Rules, decided here and kept:
- a valueless attribute (`<a href>`) counts as empty, which resolves to the
  base itself (DESIGN 2.13); the same for `src`/`action`;
- the first `<base href>` anywhere in the document sets the base for all
  links (HTML standard); if it does not resolve to an http(s) URL, the page
  URL stays the base;
- `rel` tokens are matched case-insensitively, on `a`, `area` and `link`;
- `<meta name=robots content=...>`: `nofollow` or `none` -> no links at all
  (`meta_nofollow`, even with `follow_nofollow`, which only concerns
  `rel=nofollow`); `noindex` or `none` -> `meta_noindex`;
- `<template>` contents are inert in HTML and are not searched;
- a URL of an element comes in the order: its attributes as listed in
  `link_sources`, then its style attribute; a `<style>`'s URLs where it is;
- counts, so every URL candidate lands in exactly one of them:
  `links` (taken), `nofollow_links`, `dropped_links` (not a crawlable http(s)
  URL: `mailto:`, `javascript:`, `data:` in HTML, unparsable; a srcset
  candidate with invalid descriptors; an empty or fragment-only URL in CSS)
  and `truncated_links` (past `max_links_per_page`, not even
  canonicalized). `data:` URLs in CSS are skipped without being counted.
A body that is neither HTML nor CSS (`mime.parse_kind`), or has no
Content-Type and looks binary, yields no links. `parse` never raises on any
body (a tree Lexbor cannot build gives an empty page).

Speed (hot path, per page and per link): bodies decoded as UTF-8 go to Lexbor
as bytes (no decode/encode round trip); one CSS query, one tree walk in C,
finds the link elements, `<base>`, robots/refresh `<meta>`, `<style>` and
the elements whose style attribute mentions `url(` in document order; per
link element there is one tag read, one dict of its attributes, and for
values not yet seen on this page one ada call (a per-page memo catches the
~30% of repeated hrefs). CSS is tokenized only where it can hold a URL
(`css.py`).

Cost warning: like html5ever and gumbo, Lexbor builds trees in time
quadratic in nesting depth and caps nothing (browsers stop nesting at 512):
2,000 nested `<div>`s take milliseconds, 20,000 (100 KB) take seconds. Tree
building releases the GIL; callers that must bound CPU per page should run
`parse` off the event loop (thread or process) with a deadline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from crawler.config.schema import ParseConfig
from crawler.parse.charset import choose_css_encoding, choose_encoding, decode
from crawler.parse.css import css_urls
from crawler.parse.mime import CSS, HTML, charset_param, looks_binary, media_type, parse_kind
from crawler.parse.refresh import refresh_url
from crawler.parse.sources import (
    CONDITIONAL_ELEMENTS,
    CSS_TEXT,
    NOFOLLOW_ELEMENTS,
    SRCSET,
    STYLE_ATTR,
    URL,
    URL_ATTRIBUTE,
    Sources,
    compile_sources,
    condition_holds,
)
from crawler.parse.srcset import srcset_urls
from crawler.urls import resolve_canonical
from crawler.urls._ada import resolve

_TREE_ERRORS: tuple[type[BaseException], ...]    # Lexbor could not build a tree
try:
    from selectolax.lexbor import SelectolaxError
    _TREE_ERRORS = (SelectolaxError, RuntimeError, MemoryError)
except ImportError:  # pragma: no cover - selectolax < 0.4 raises RuntimeError
    _TREE_ERRORS = (RuntimeError, MemoryError)

__all__ = ["LinkExtractor", "ParsedPage", "URL_ATTRIBUTE", "extract_links"]

CRAWLABLE_BASE_PREFIXES = ("http://", "https://")
_C0_SPACE = "".join(map(chr, range(0x21)))  # what the URL parser strips from both ends
_MISSING: Any = object()  # typed Any: the hot loop's `.get(key, _MISSING)` keeps the value's type


@dataclass(slots=True)
class ParsedPage:
    """What one page yields for the rest of the pipeline."""
    links: list[str] = field(default_factory=list)
    """Canonical absolute URLs, document order, repeats kept; nofollow ones left out unless follow_nofollow."""
    nofollow_links: int = 0
    """URL candidates skipped as nofollow (rel=nofollow, or all of them under meta robots nofollow)."""
    meta_nofollow: bool = False
    """`<meta name=robots>` says nofollow or none (then `links` is empty)."""
    meta_noindex: bool = False
    """`<meta name=robots>` says noindex or none."""
    base: str | None = None
    """The effective `<base href>`, resolved absolute, if the page has one that was honoured."""
    charset: str = "utf-8"
    """Python codec name the body was decoded with."""
    title: str | None = None
    """`<title>` text with whitespace collapsed; None without a title element (and for CSS)."""
    dropped_links: int = 0
    """URL candidates that are not crawlable http(s) URLs (see the module doc); never truncation."""
    truncated_links: int = 0
    """URL candidates past `max_links_per_page`: not taken, not canonicalized. Non-zero = the page was cut."""
    refresh: str | None = None
    """Canonical URL of the first `<meta http-equiv=refresh>` with a URL (also in `links`)."""
    kind: str | None = None
    """What was parsed: "html", "css", or None (not a type we read: no links)."""


class LinkExtractor:
    """Extracts a page's canonical links by the rules of the module docstring."""

    def __init__(self, config: ParseConfig) -> None:
        sources: Sources = compile_sources(config.link_sources)
        self._specs = sources.by_tag
        # Elements read on the fast path: exactly one plain URL attribute, no condition.
        self._single = {tag: specs[0][0] for tag, specs in sources.by_tag.items()
                        if len(specs) == 1 and specs[0][1] == URL and tag not in CONDITIONAL_ELEMENTS}
        self._style_attributes = sources.style_attributes
        self._refresh = sources.refresh
        # One CSS query (one tree walk) finds every element that can hold a link, once, in document order.
        self._query = sources.query()
        self._nofollow_tags = NOFOLLOW_ELEMENTS & self._specs.keys()
        self._follow_nofollow = config.follow_nofollow
        self._max_links = config.max_links_per_page

    def parse(self, body: bytes, url: str, content_type: str | None = None,
              charset: str | None = None) -> ParsedPage:
        """Links and page facts of `body` (HTML or CSS), fetched from `url` (the base for relative links).

        `charset` is the HTTP header's charset; without it the Content-Type
        parameter is used, then the body's BOM/`<meta>` (HTML) or
        `@charset` (CSS), then UTF-8.
        """
        kind = parse_kind(content_type)
        if kind == CSS:
            return self._parse_css(body, url, charset or charset_param(content_type))
        codec, skip = choose_encoding(body, charset or charset_param(content_type))
        page = ParsedPage(charset=codec)
        if kind != HTML or (media_type(content_type) is None and looks_binary(body)):
            return page
        page.kind = HTML
        try:
            if codec == "utf-8":  # Lexbor reads UTF-8 bytes itself: no decode/encode round trip
                tree = LexborHTMLParser(body[skip:] if skip else body)
            else:
                tree = LexborHTMLParser(decode(body, codec, skip))
        except _TREE_ERRORS:  # Lexbor could not build a tree: no links
            return page

        title = tree.css_first("title")
        if title is not None:
            page.title = " ".join(title.text(deep=True).split())
        self._scan(tree.css(self._query), url, url.encode(), page)
        return page

    def _scan(self, nodes: list, url: str, base_b: bytes, page: ParsedPage) -> None:
        """One pass over the query's elements in document order.

        Hot path (per link): local names, one dict of the element's attributes,
        no per-link objects beyond the URL string. `<base>` sits in `<head>`
        before any link in practice; if the first one comes after links, the
        pass starts over with it as the base.
        """
        specs_of = self._specs
        single = self._single
        nofollow_tags = () if self._follow_nofollow else self._nofollow_tags
        style_attributes = self._style_attributes
        max_links = self._max_links
        links = page.links
        append = links.append
        missing = _MISSING
        memo: dict[str, str | None] = {}  # value -> canonical URL, for this page's repeats
        nofollow = dropped = truncated = 0
        for node in nodes:
            tag = node.tag
            # One dict of all attributes: cheaper than several lookups through
            # `node.attrs`, whose miss on an absent attribute raises KeyError inside.
            attrs = node.attributes
            attr = single.get(tag)
            if attr is not None:  # the common case, inline: one URL attribute, no condition (a, script, ...)
                value = attrs.get(attr, missing)
                if value is not missing:
                    if tag in nofollow_tags and (rel := attrs.get("rel")) and "nofollow" in rel.lower() \
                            and "nofollow" in rel.lower().split():
                        nofollow += 1
                    elif len(links) >= max_links:
                        truncated += 1
                    else:
                        if value is None:  # valueless attribute: empty, i.e. the base itself
                            value = ""
                        canon = memo.get(value, missing)
                        if canon is missing:
                            canon = memo[value] = resolve_canonical(value, base_b)
                        if canon is None:
                            dropped += 1
                        else:
                            append(canon)
            else:
                specs = specs_of.get(tag)
                if specs is not None:
                    nofollow, dropped, truncated = self._element(node, tag, attrs, specs, base_b, links, memo,
                                                                 nofollow, dropped, truncated)
                elif tag == "base":
                    if page.base is None and "href" in attrs:
                        base_b = self._read_base(attrs["href"], url, page).encode()
                        if links or nofollow or dropped or truncated:
                            links.clear()
                            page.refresh = None
                            return self._scan(nodes, url, base_b, page)
                elif tag == "meta":
                    if (attrs.get("name") or "").lower() == "robots":
                        self._read_robots(attrs.get("content"), page)
                    if self._refresh and (attrs.get("http-equiv") or "").lower() == "refresh":
                        target = refresh_url(attrs.get("content") or "")
                        if target is not None:
                            before = len(links)
                            dropped, truncated = self._add(target, base_b, links, memo, dropped, truncated)
                            if page.refresh is None and len(links) > before:
                                page.refresh = links[-1]
            if style_attributes:
                style = attrs.get(STYLE_ATTR)
                if style:
                    dropped, truncated = self._add_css(style, base_b, links, memo, dropped, truncated)
        if page.meta_nofollow:  # <meta name=robots content=nofollow>: no links at all
            nofollow += len(links) + dropped + truncated
            links.clear()
            dropped = truncated = 0
            page.refresh = None
        page.nofollow_links = nofollow
        page.dropped_links = dropped
        page.truncated_links = truncated

    def _element(self, node, tag: str, attrs: dict, specs: tuple, base_b: bytes, links: list[str], memo: dict,
                 nofollow: int, dropped: int, truncated: int) -> tuple[int, int, int]:
        """An element with several sources (img src + srcset), a condition (input, form) or CSS text."""
        if tag in CONDITIONAL_ELEMENTS and not condition_holds(tag, attrs):
            return nofollow, dropped, truncated  # input not of type image, a POST form
        if tag in self._nofollow_tags and not self._follow_nofollow:
            rel = attrs.get("rel")
            if rel and "nofollow" in rel.lower().split():
                return nofollow + sum(1 for attr, _ in specs if attr in attrs), dropped, truncated
        for attr, how in specs:
            value = attrs.get(attr, _MISSING)
            if value is _MISSING:
                if how is CSS_TEXT:  # <style>: its text
                    dropped, truncated = self._add_css(node.text(deep=True), base_b, links, memo, dropped, truncated)
            elif how is SRCSET:
                candidates, invalid = srcset_urls(value or "")
                dropped += invalid
                for candidate in candidates:
                    dropped, truncated = self._add(candidate, base_b, links, memo, dropped, truncated)
            else:
                dropped, truncated = self._add(value or "", base_b, links, memo, dropped, truncated)
        return nofollow, dropped, truncated

    def _add(self, value: str, base_b: bytes, links: list[str], memo: dict,
             dropped: int, truncated: int) -> tuple[int, int]:
        """One URL candidate (srcset, refresh): canonicalize and take it, or count it."""
        if len(links) >= self._max_links:
            return dropped, truncated + 1
        canon = memo.get(value, _MISSING)
        if canon is _MISSING:
            canon = memo[value] = resolve_canonical(value, base_b)
        if canon is None:
            return dropped + 1, truncated
        links.append(canon)
        return dropped, truncated

    def _add_css(self, css: str | bytes | None, base_b: bytes, links: list[str], memo: dict,
                 dropped: int, truncated: int) -> tuple[int, int]:
        """The URLs of a CSS text (a `<style>`, a style attribute, a stylesheet body) against `base_b`."""
        if not css:
            return dropped, truncated
        for value in css_urls(css):
            stripped = value.strip(_C0_SPACE)
            if not stripped or stripped[0] == "#":  # url("") and url(#id) name no resource
                dropped += 1
            else:
                dropped, truncated = self._add(value, base_b, links, memo, dropped, truncated)
        return dropped, truncated

    def _parse_css(self, body: bytes, url: str, transport_label: str | None) -> ParsedPage:
        """A fetched stylesheet: its URLs against its own URL (charset: BOM, HTTP, @charset, UTF-8)."""
        codec, skip = choose_css_encoding(body, transport_label)
        page = ParsedPage(charset=codec, kind=CSS)
        text: str | bytes = (body[skip:] if skip else body) if codec == "utf-8" else decode(body, codec, skip)
        links = page.links
        dropped, truncated = self._add_css(text, url.encode(), links, {}, 0, 0)
        page.dropped_links, page.truncated_links = dropped, truncated
        return page

    @staticmethod
    def _read_base(href: str | None, url: str, page: ParsedPage) -> str:
        """The effective base from the first `<base href>`; records it on the page."""
        resolved = resolve(href or "", url.encode())
        if resolved is None or not resolved.startswith(CRAWLABLE_BASE_PREFIXES):
            page.base = url  # honoured element, unusable value: the page URL stays the base
            return url
        page.base = resolved
        return resolved

    @staticmethod
    def _read_robots(content: str | None, page: ParsedPage) -> None:
        tokens = (content or "").lower().replace(",", " ").split()
        if "none" in tokens:
            page.meta_nofollow = page.meta_noindex = True
        else:
            page.meta_nofollow = page.meta_nofollow or "nofollow" in tokens
            page.meta_noindex = page.meta_noindex or "noindex" in tokens


def extract_links(body: bytes, url: str, content_type: str | None = None) -> list[str]:
    """The canonical absolute URLs `body` (fetched from `url`) links to (DESIGN 2.14).

    Default `ParseConfig`; repeats kept in document order; HTML or CSS by
    `content_type`. For many pages, build one `LinkExtractor` and call its `parse`.
    """
    return LinkExtractor(ParseConfig()).parse(body, url, content_type).links

"""LinkExtractor: the canonical URLs a page links to, in document order.

Per fetched page (DESIGN 2.8): choose the charset, build a Lexbor tree, read
`<base href>` and `<meta name=robots>`, then take the URL attribute of every
link-source element (`a/area/link[href]`, `img/frame/iframe/embed/source
[src]`, `form[action]` by default; `config.link_sources`), skip `rel=nofollow`,
and canonicalize each against the effective base (`crawler.urls`).

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
- `srcset` is not read: its candidates are size variants of an image whose
  `src` is already taken, and each would cost a join;
- `<template>` contents are inert in HTML and are not searched;
- links beyond `max_links_per_page` are counted in `dropped_links` without
  being canonicalized, as are links that are not crawlable http(s) URLs
  (`mailto:`, `javascript:`, `data:`, unparsable).
A non-HTML Content-Type, or no Content-Type and a body that looks binary,
yields no links. `parse` never raises on any body (a tree Lexbor cannot
build gives an empty page).

Speed: bodies decoded as UTF-8 go to Lexbor as bytes (no decode/encode
round trip); one CSS query, one tree walk in C, finds the link elements,
`<base>` and robots `<meta>` in document order; per link there is one tag
read, one attribute read (a/area/link: one dict of all attributes, so an
absent `rel` costs no exception) and, for hrefs not yet seen on this page,
one ada call (a per-page memo catches the ~30% of repeated hrefs).

Cost warning: like html5ever and gumbo, Lexbor builds trees in time
quadratic in nesting depth and caps nothing (browsers stop nesting at 512):
2,000 nested `<div>`s take milliseconds, 20,000 (100 KB) take seconds. Tree
building releases the GIL; callers that must bound CPU per page should run
`parse` off the event loop (thread or process) with a deadline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType

from selectolax.lexbor import LexborHTMLParser

try:
    from selectolax.lexbor import SelectolaxError
except ImportError:  # pragma: no cover - selectolax < 0.4 raises RuntimeError
    SelectolaxError = RuntimeError

from crawler.config.schema import ParseConfig
from crawler.parse.charset import choose_encoding, decode
from crawler.parse.mime import charset_param, is_html, looks_binary, media_type
from crawler.urls import resolve_canonical
from crawler.urls._ada import resolve

# The URL attribute of each element we know; `config.link_sources` picks some.
# An entry `name[attr]` in the config names its attribute explicitly.
URL_ATTRIBUTE = MappingProxyType({
    "a": "href", "area": "href", "link": "href",
    "img": "src", "frame": "src", "iframe": "src", "embed": "src", "source": "src",
    "form": "action",
    "script": "src", "audio": "src", "video": "src", "track": "src", "input": "src",
    "object": "data",
    "blockquote": "cite", "q": "cite", "del": "cite", "ins": "cite",
})
NOFOLLOW_ELEMENTS = frozenset(("a", "area", "link"))
CRAWLABLE_BASE_PREFIXES = ("http://", "https://")
_SOURCE_RE = re.compile(r"^([a-z][a-z0-9-]*)(?:\[([a-z][a-z0-9_-]*)\])?$")
_SPECIAL_SELECTOR = 'base[href],meta[name="robots" i]'
SPECIAL_ELEMENTS = frozenset(("base", "meta"))  # read for their own meaning, never as link sources
_MISSING = object()


@dataclass(slots=True)
class ParsedPage:
    """What one page yields for the rest of the pipeline."""
    links: list[str] = field(default_factory=list)
    """Canonical absolute URLs, document order, repeats kept; nofollow ones left out unless follow_nofollow."""
    nofollow_links: int = 0
    """Links skipped as nofollow (rel=nofollow, or all of them under meta robots nofollow)."""
    meta_nofollow: bool = False
    """`<meta name=robots>` says nofollow or none (then `links` is empty)."""
    meta_noindex: bool = False
    """`<meta name=robots>` says noindex or none."""
    base: str | None = None
    """The effective `<base href>`, resolved absolute, if the page has one that was honoured."""
    charset: str = "utf-8"
    """Python codec name the body was decoded with."""
    title: str | None = None
    """`<title>` text with whitespace collapsed; None without a title element."""
    dropped_links: int = 0
    """Link elements whose URL is not crawlable, or beyond max_links_per_page."""


def _compile_sources(link_sources: list[str]) -> dict[str, str]:
    """Element name -> URL attribute, from config entries like `a` or `video[poster]`."""
    sources: dict[str, str] = {}
    for entry in link_sources:
        match = _SOURCE_RE.match(entry.strip().lower())
        if match is None:
            raise ValueError(f"parse.link_sources: {entry!r} is not an element name (e.g. 'a' or 'video[poster]')")
        tag, attr = match.group(1), match.group(2) or URL_ATTRIBUTE.get(match.group(1))
        if attr is None:
            raise ValueError(
                f"parse.link_sources: no default URL attribute for {tag!r}; "
                f"write it as '{tag}[attribute]' or use one of {sorted(URL_ATTRIBUTE)}")
        if tag in SPECIAL_ELEMENTS:
            raise ValueError(f"parse.link_sources: {tag!r} cannot be a link source (it is read as <{tag}>)")
        if sources.get(tag, attr) != attr:
            raise ValueError(f"parse.link_sources: {tag!r} is listed with two attributes")
        sources[tag] = attr
    return sources


class LinkExtractor:
    """Extracts a page's canonical links by the rules of the module docstring."""

    def __init__(self, config: ParseConfig) -> None:
        self._attr_of = _compile_sources(config.link_sources)
        self._selector = ",".join(f"{tag}[{attr}]" for tag, attr in self._attr_of.items())
        # One CSS query (one tree walk) finds link elements, <base> and robots <meta>.
        self._query = ",".join(filter(None, (self._selector, _SPECIAL_SELECTOR)))
        self._nofollow_tags = NOFOLLOW_ELEMENTS & self._attr_of.keys()
        self._follow_nofollow = config.follow_nofollow
        self._max_links = config.max_links_per_page

    def parse(self, body: bytes, url: str, content_type: str | None = None,
              charset: str | None = None) -> ParsedPage:
        """Links and page facts of `body`, fetched from `url` (the base for relative links).

        `charset` is the HTTP header's charset; without it the Content-Type
        parameter is used, then the body's BOM/`<meta>`, then UTF-8.
        """
        codec, skip = choose_encoding(body, charset or charset_param(content_type))
        page = ParsedPage(charset=codec)
        if not is_html(content_type) or (media_type(content_type) is None and looks_binary(body)):
            return page
        try:
            if codec == "utf-8":  # Lexbor reads UTF-8 bytes itself: no decode/encode round trip
                tree = LexborHTMLParser(body[skip:] if skip else body)
            else:
                tree = LexborHTMLParser(decode(body, codec, skip))
        except (SelectolaxError, RuntimeError, MemoryError):  # Lexbor could not build a tree: no links
            return page

        title = tree.css_first("title")
        if title is not None:
            page.title = " ".join(title.text(deep=True).split())
        self._scan(tree.css(self._query), url, url.encode(), page)
        return page

    def _scan(self, nodes: list, url: str, base_b: bytes, page: ParsedPage) -> None:
        """One pass over link, `<base>` and robots `<meta>` elements in document order.

        Hot path (per link): local names, no per-link objects beyond the URL
        string. `<base>` sits in `<head>` before any link in practice; if the
        first one comes after links, the pass starts over with it as the base.
        """
        attr_of = self._attr_of
        nofollow_tags = () if self._follow_nofollow else self._nofollow_tags
        max_links = self._max_links
        links = page.links
        append = links.append
        memo: dict[str, str | None] = {}  # href -> canonical URL, for this page's repeats
        seen = nofollow = dropped = 0
        for node in nodes:
            tag = node.tag
            attr = attr_of.get(tag)
            if attr is None:  # <base href> or <meta name=robots>
                attrs = node.attributes
                if tag != "base":
                    self._read_robots(attrs.get("content"), page)
                elif page.base is None:
                    base_b = self._read_base(attrs.get("href"), url, page).encode()
                    if seen:
                        links.clear()
                        return self._scan(nodes, url, base_b, page)
                continue
            seen += 1
            if tag in nofollow_tags:
                # One dict of all attributes: cheaper than two lookups through
                # `node.attrs`, whose miss on an absent `rel` raises KeyError inside.
                attrs = node.attributes
                rel = attrs.get("rel")
                if rel and "nofollow" in rel.lower() and "nofollow" in rel.lower().split():
                    nofollow += 1
                    continue
                value = attrs.get(attr)
            else:
                value = node.attrs.get(attr)
            if len(links) >= max_links:
                dropped += 1
                continue
            if value is None:  # valueless attribute: empty, i.e. the base itself
                value = ""
            canon = memo.get(value, _MISSING)
            if canon is _MISSING:
                canon = memo[value] = resolve_canonical(value, base_b)
            if canon is None:
                dropped += 1
            else:
                append(canon)
        if page.meta_nofollow:  # <meta name=robots content=nofollow>: no links at all
            links.clear()
            nofollow, dropped = seen, 0
        page.nofollow_links = nofollow
        page.dropped_links = dropped

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

    Default `ParseConfig`; repeats kept in document order. For many pages,
    build one `LinkExtractor` and call its `parse`.
    """
    return LinkExtractor(ParseConfig()).parse(body, url, content_type).links

"""What the test web answers: HTML pages, robots.txt, redirects, images, CSS, errors.

`Renderer.respond(host, path, port)` is the one routing function; the aiohttp
server (server.py) and the static export for nginx (static.py) both call it,
so the two serve identical bytes.

Pages look like real markup (compare ../shared/testdata/pages, which the
product never reads): doctype, head with meta charset, viewport, description
and Open Graph tags, stylesheets, an external and an inline script, a nav,
an article with entities and inline tags, figures, a map, an iframe, a search
form, an aside, a footer, conditional comments. Traps for a careless link
extractor are built in and are NOT links: an `<a>` inside an HTML comment, an
`<a>` inside a script string, `url()` in inline CSS, `<script src>`,
`data-src`. Every real link comes from the page's row of the link table and
is written in the form stored there (model.Form); the renderer never adds a
crawlable link of its own.

The ports are render arguments (the request's own from its Host header, the
other scheme's from the server), so one model serves on any ports. Rendered
pages are cached per (url id, port, TLS port).

HTTPS (model.Tls): a host speaks http://, https://, or both with http://
answering 301 to the same path on https:// (robots.txt included). A request
in a scheme the host does not serve is answered 421 Misdirected Request
(RFC 9110 15.5.20) with no links: an HTTPS-only name has no HTTP site, and
sharing one port with every other host, the server cannot refuse the
connection as a real one would. Links to a redirecting host are written
http:// when absolute; relative links on its pages resolve against their
https:// URL; a scheme-relative link takes the scheme of the base and is
written absolute instead where the target does not speak that scheme.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass

from . import trap
from .hrefs import HrefWriter, mix, relative_ref
from .model import (
    FAILING_CASES,
    NOFOLLOW,
    WORDS,
    Case,
    Elem,
    Kind,
    Role,
    Tls,
    Web,
    WebHost,
)
from .resources import app_js, css_body, error_page, html_escape, moved_page, png_body

HTML = "text/html; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
CSS = "text/css; charset=utf-8"
JS = "application/javascript; charset=utf-8"
PNG = "image/png"
HTTP = "http"
HTTPS = "https"

APP_JS_PATH = "/static/app.js"
"""Every page's `<script src>` (path-absolute: resolved against the page's base); served on ordinary hosts."""
HERO_PATH = "/static/hero-bg.jpg"
"""Every page's inline `<style>` `url()` (path-absolute); no host serves it (404)."""
TEMPLATE_PATHS = (APP_JS_PATH, HERO_PATH)
"""What every page's template (not its link table) references: resources a crawler fetches (parse.link_sources
takes script[src] and style url()), leaves of the crawl (the manifest adds them per page)."""
DEFAULT_CACHE_ENTRIES = 4096
"""Rendered bodies kept per renderer (LRU); a crawl fetches each page once, tests and benchmarks more."""
PARAGRAPHS_IN_POOL = 64
NAV_LINKS = 6
LINKS_PER_SENTENCE = 6
_NONCRAWLABLE = (
    '<a href="mailto:webmaster@{host}">Contact</a>',
    '<a href="javascript:void(0)" onclick="return false">Share</a>',
    '<a href="tel:+1-555-0100">Call us</a>',
    '<a href="data:text/plain;base64,SGVsbG8sIHdvcmxkIQ==">Notice</a>',
    '<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" alt="" width="1" height="1">',
)
_NOFOLLOW_RELS = ("nofollow", "nofollow noopener", "noopener nofollow", "ugc nofollow")
_META_NOFOLLOW = ("nofollow", "noindex, nofollow", "noarchive,nofollow")
_E_A, _E_AREA, _E_IFRAME, _E_FORM, _E_LINK_ALT, _E_IMG, _E_EMBED, _E_SOURCE, _E_LINK_CSS, _E_LINK_ICON, \
    _E_FRAME = (int(e) for e in Elem)


@dataclass(frozen=True)
class Reply:
    """One response: either a complete body or a bad-host case to stream (`stream`)."""

    status: int
    content_type: str
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    stream: Case | None = None
    delay_s: float = 0.0


ROBOTS_PATH = "/robots.txt"
RECOVERED_ROBOTS = b"User-agent: *\nDisallow: /\n"
"""What robots500's robots.txt says once it answers again (WebParams.robots_error_answers)."""


class RobotsOutage:
    """robots500's robots.txt is down for its first `WebParams.robots_error_answers` requests, then
    answers `Disallow: /`: the one stateful answer of the web (the server and the reference's direct
    fetch keep one each; the static export cannot count and always answers 500)."""

    def __init__(self, web: Web) -> None:
        self._failures = web.params.robots_error_answers
        self._seen: dict[str, int] = {}

    def reply(self, host: WebHost, path: str) -> Reply | None:
        """The recovered answer, or None when the renderer's (500) stands."""
        if host.role is not Role.ROBOTS500 or path != ROBOTS_PATH or not self._failures:
            return None
        seen = self._seen.get(host.name, 0)
        self._seen[host.name] = seen + 1
        return Reply(200, TEXT, RECOVERED_ROBOTS) if seen >= self._failures else None


class Renderer:
    """Renders the web's resources; holds the text pools and the body cache."""

    def __init__(self, web: Web, cache_entries: int = DEFAULT_CACHE_ENTRIES) -> None:
        self.web = web
        self._cache: OrderedDict[tuple[int, int, int], bytes] = OrderedDict()
        self._cache_entries = cache_entries
        self._paragraphs = _paragraph_pool(web.params.seed)
        self._texts: list[str] | None = None
        self._plain: list[bool] = []
        # Plain lists: indexing them is faster than numpy scalars in the per-link loop.
        self._url_host = web.url_host.tolist()
        self._url_kind = web.url_kind.tolist()
        self._latency_s = web.host_latency_s.tolist()
        self._links = HrefWriter(web)

    # --- routing -----------------------------------------------------------------

    def respond(self, host: WebHost, path: str, port: int, tls_port: int = 0, scheme: str = HTTP,
                query: str = "") -> Reply:
        """The reply for GET `path` (and `query`, kept in a redirect to https://) on `host`, asked
        over `scheme`, when the web is served on `port` and HTTPS on `tls_port`."""
        delay = self._latency_s[host.index]
        reply = None
        if host.tls or scheme != HTTP:
            reply = self.scheme_reply(host, path, tls_port, scheme, query)
        if reply is None:
            reply = self._respond(host, path, port, tls_port)
        if delay:
            return Reply(reply.status, reply.content_type, reply.body, reply.headers, reply.stream, delay)
        return reply

    def scheme_reply(self, host: WebHost, path: str, tls_port: int, scheme: str, query: str = "") -> Reply | None:
        """301 to https:// or 421 when `host` serves no content over `scheme`; None when it does."""
        if (scheme == HTTPS) == host.content_https:
            return None
        if host.tls is Tls.REDIRECT:
            loc = host.content_origin(0, tls_port) + path + (f"?{query}" if query else "")
            return Reply(301, HTML, moved_page(301, loc, path), (("Location", loc),))
        return Reply(421, HTML, error_page(421, "Misdirected Request", path))

    def _respond(self, host: WebHost, path: str, port: int, tls_port: int) -> Reply:
        web = self.web
        if path == "/robots.txt":
            return self.robots(host)
        if host.role is Role.TRAP:
            if path == "/":
                return Reply(200, HTML, self.trap_page(host, path, port, tls_port))
            if trap.is_trap_page(path):
                return Reply(200, HTML, self.trap_page(host, path, port, tls_port))
            return self.not_found(path)
        uid = web.lookup(host.index, path)
        if uid is None:
            if path == APP_JS_PATH and host.role is Role.ORDINARY:
                return Reply(200, JS, app_js(host.name))
            return self.not_found(path)
        kind = self._url_kind[uid]
        if kind == Kind.PAGE:
            return Reply(200, HTML, self.page(uid, port, tls_port))
        if kind == Kind.IMAGE:
            return Reply(200, PNG, png_body(uid, path))
        if kind == Kind.CSS:
            return Reply(200, CSS, css_body(host.name, path))
        if kind == Kind.REDIRECT:
            return self.redirect(uid, port, tls_port)
        if kind == Kind.CASE:
            case = web.cases[uid]
            if case in FAILING_CASES:
                return Reply(200, HTML, stream=case)
            return self.case(uid, case, port, tls_port)
        return self.not_found(path)

    # --- simple resources --------------------------------------------------------

    def robots(self, host: WebHost) -> Reply:
        policy = host.robots
        if policy.status == 200:
            return Reply(200, TEXT, policy.render(host.name).encode())
        if policy.status >= 500:
            return Reply(policy.status, HTML, error_page(policy.status, "Internal Server Error", "/robots.txt"))
        return self.not_found("/robots.txt")

    def not_found(self, path: str) -> Reply:
        return Reply(404, HTML, error_page(404, "Not Found", path))

    def redirect(self, uid: int, port: int, tls_port: int = 0) -> Reply:
        """301/302 with a Location written absolute, path-absolute or relative to the request URL."""
        web = self.web
        r = web.redirects[uid]
        loc = self.location(uid, port, tls_port)
        return Reply(r.status, HTML, moved_page(r.status, loc, web.url_path[uid]), (("Location", loc),))

    def location(self, uid: int, port: int, tls_port: int = 0) -> str:
        """The Location header of redirect `uid`."""
        web = self.web
        r = web.redirects[uid]
        tgt = r.target
        th = self._url_host[tgt]
        tp = web.url_path[tgt]
        origins, upper, _, _ = self._links.origin_lists(port, tls_port)
        if th != self._url_host[uid] or r.form == 0:
            return origins[th] + tp
        if r.form == 3:
            return upper[th] + tp
        if r.form == 1:
            return tp
        here = web.url_path[uid]
        return relative_ref(here[: here.rfind("/") + 1], tp)

    # --- pages -------------------------------------------------------------------

    def page(self, uid: int, port: int, tls_port: int = 0) -> bytes:
        """HTML of page `uid` (cached)."""
        key = (uid, port, tls_port)
        cache = self._cache
        body = cache.get(key)
        if body is not None:
            cache.move_to_end(key)
            return body
        if uid in self.web.frameset:
            body = self._frameset(uid, port, tls_port)
        else:
            body = self._page(uid, port, tls_port)
        cache[key] = body
        if len(cache) > self._cache_entries:
            cache.popitem(last=False)
        return body

    def _plain_positions(self, n: int) -> list[bool]:
        """For link positions 0..n-1: True where the markup is not varied (no class, rel, odd quoting)."""
        if len(self._plain) < n:
            self._plain = [not (i % 5 == 1 or i % 9 == 2 or i % 11 == 4 or i % 13 == 6) for i in range(max(n, 256))]
        return self._plain

    def _anchor_texts(self) -> list[str]:
        """Anchor text of every URL id, built once."""
        if self._texts is None:
            self._texts = [_anchor(t) for t in range(self.web.urls)]
        return self._texts


    def _page(self, uid: int, port: int, tls_port: int) -> bytes:
        web = self.web
        host = web.hosts[self._url_host[uid]]
        seed = mix(web.params.seed, uid)
        title = _title(uid)
        site = host.name.split(".")[0].upper() + " " + WORDS[seed % len(WORDS)].capitalize()
        upper_tags = seed % 10 == 0
        head: list[str] = []
        anchors: list[str] = []
        blocks: list[str] = []
        figures: list[str] = []
        texts = self._anchor_texts()
        paths = web.url_path
        # Hot path of serving: one iteration per link, ints and local names only.
        hrefs, elems, flag_list, tgts = self._links.hrefs(uid, port, tls_port)
        plain = self._plain_positions(len(hrefs))
        e_a = _E_A
        add_anchor = anchors.append
        for i, href in enumerate(hrefs):
            elem = elems[i]
            # Fast path (most links): a plain <a href="..."> at a position without markup variation.
            if elem == e_a and plain[i] and href and not upper_tags and not flag_list[i]:
                add_anchor(f'<a href="{href}">{texts[tgts[i]]}</a>')
                continue
            flags = flag_list[i]
            tgt = tgts[i]
            # Quoting varied like real pages: mostly double quotes, some single, unquoted, valueless.
            q = _attr(href, i)
            text = texts[tgt]
            if elem == _E_A:
                if flags & NOFOLLOW:
                    rel = f' rel="{_NOFOLLOW_RELS[i % len(_NOFOLLOW_RELS)]}"'
                else:
                    rel = ' rel="noopener"' if i % 9 == 2 else ""
                if upper_tags:
                    anchors.append(f"<A HREF{q}{rel}>{text}</A>")
                elif i % 5 == 1:
                    anchors.append(f'<a class="more" href{q}{rel}>{text}</a>')
                else:
                    anchors.append(f"<a href{q}{rel}>{text}</a>")
            elif elem == _E_IMG:
                figures.append(f'<figure class="media"><img src{q} alt="{text}" width="640" height="360" '
                               f'loading="lazy"><figcaption>{text} &mdash; photo</figcaption></figure>')
            elif elem == _E_LINK_CSS:
                media = "print" if paths[tgt].endswith("print.css") else "all"
                head.append(f'<link rel="stylesheet" href{q} media="{media}">')
            elif elem == _E_LINK_ICON:
                head.append(f'<link rel="icon" type="image/png" href{q}>')
            elif elem == _E_LINK_ALT:
                head.append(f'<link rel="{("alternate", "next", "prev")[i % 3]}" href{q} title="{text}">')
            elif elem == _E_EMBED:
                blocks.append(f'<embed src{q} type="image/png" width="32" height="32">')
            elif elem == _E_SOURCE:
                blocks.append(f'<audio controls><source src{q} type="audio/ogg">'
                              'Your browser does not support audio.</audio>')
            elif elem == _E_AREA:
                blocks.append(f'<map name="m{uid}-{i}"><area shape="rect" coords="0,0,80,40" href{q} '
                              f'alt="{text}"></map>')
            elif elem == _E_IFRAME:
                blocks.append(f'<iframe src{q} title="{text}" width="300" height="150" loading="lazy"></iframe>')
            elif elem == _E_FORM:
                blocks.append(f'<form action{q} method="get" role="search"><label>Search '
                              f'<input type="search" name="q"></label><button type="submit">Go</button></form>')
            else:  # frames only mean something in a frameset; elsewhere an iframe keeps the link
                blocks.append(f'<iframe src{q} title="{text}"></iframe>')
        return self._document(uid, host, port, tls_port, seed, title, site, head, anchors, blocks, figures)

    def _document(self, uid: int, host: WebHost, port: int, tls_port: int, seed: int, title: str, site: str,
                  head: list[str], anchors: list[str], blocks: list[str], figures: list[str]) -> bytes:
        web = self.web
        pool = self._paragraphs
        out = [
            "<!DOCTYPE html>\n<html lang=\"en\" class=\"no-js\">\n<head>\n<meta charset=\"utf-8\">\n",
            "<meta http-equiv=\"X-UA-Compatible\" content=\"IE=edge\">\n",
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
            f"<title>{title} | {site}</title>\n",
        ]
        base = web.bases.get(uid)
        if base is not None:
            origins, upper, _, _ = self._links.origin_lists(port, tls_port)
            prefix = ("" if base.form == 1 else (upper if base.form == 2 else origins)[base.host])
            out.append(f'<base href="{prefix}{base.path}">\n')
        if web.meta_nofollow[uid]:
            out.append(f'<meta name="robots" content="{_META_NOFOLLOW[seed % len(_META_NOFOLLOW)]}">\n')
        elif seed % 7 == 0:
            out.append('<meta name="robots" content="index, follow">\n')
        out.append(f'<meta name="description" content="{title}: notes on {WORDS[(seed >> 8) % len(WORDS)]} '
                   f'and {WORDS[(seed >> 16) % len(WORDS)]}.">\n')
        out.append(f'<meta property="og:title" content="{title}">\n<meta property="og:type" content="article">\n')
        out.append(f'<meta property="og:site_name" content="{site}">\n')
        out.extend(h + "\n" for h in head)
        out.append("<style>/* critical */ body{margin:0;font:16px/1.5 Georgia,serif}"
                   f".hero{{background:url({HERO_PATH}) no-repeat center}}"
                   " a.more:after{content:\" \\2192\"}</style>\n")
        out.append(f'<script src="{APP_JS_PATH}" defer></script>\n')
        if seed % 3 == 0:
            out.append("<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments);}"
                       "var tpl='<a href=\"/js/generated-' + 'link.html\">more</a>';"
                       "if(1 < 2 && document.documentElement){document.documentElement.className='js';}</script>\n")
        out.append("</head>\n<body class=\"page-article\">\n"
                   "<!--[if lt IE 9]><p class=\"browserupgrade\">You are using an <strong>outdated</strong> "
                   "browser.</p><![endif]-->\n")
        out.append(f"<header class=\"site-header\" role=\"banner\"><div class=\"brand\">{site}</div>\n")
        nav = anchors[:NAV_LINKS]
        rest = anchors[NAV_LINKS:]
        out.append("<nav class=\"main-nav\" aria-label=\"Main\"><ul>\n")
        out.extend(f"<li>{a}</li>\n" for a in nav)
        out.append("</ul></nav></header>\n<main id=\"main\" role=\"main\">\n<article class=\"post\">\n")
        out.append(f"<h1>{title}</h1>\n<p class=\"byline\">By <span class=\"author\">"
                   f"{WORDS[(seed >> 24) % len(WORDS)].capitalize()} {WORDS[(seed >> 32) % len(WORDS)].capitalize()}"
                   f"</span> &middot; <time datetime=\"2025-03-{seed % 28 + 1:02d}\">"
                   f"March {seed % 28 + 1}, 2025</time></p>\n")
        paragraphs = 3 + seed % 7
        inline = max(0, len(rest) - len(rest) // 3)
        per = max(1, -(-inline // paragraphs))
        k = 0
        for j in range(paragraphs):
            out.append("<p>")
            out.append(pool[(seed >> (j % 8 * 4) ^ j) % len(pool)])
            chunk = rest[k: k + min(per, LINKS_PER_SENTENCE)]
            k += len(chunk)
            if chunk:
                out.append(" See also " + ", ".join(chunk) + ".")
            out.append("</p>\n")
            if j < len(figures):
                out.append(figures[j] + "\n")
            if j == 1 and uid % 4 == 0:
                out.append("<!-- related widget disabled: <a href=\"/old/commented-out.html\">old archive</a> -->\n")
        out.extend(f + "\n" for f in figures[paragraphs:])
        out.extend(b + "\n" for b in blocks)
        out.append("</article>\n<aside class=\"related\"><h2>Related</h2>\n<ul>\n")
        out.extend(f"<li>{a}</li>\n" for a in rest[k:])
        out.append("</ul>\n</aside>\n</main>\n<footer class=\"site-footer\">\n")
        extra = int(web.noncrawlable[uid])
        if extra:
            items = [_NONCRAWLABLE[(seed + t) % len(_NONCRAWLABLE)].format(host=host.name) for t in range(extra)]
            out.append("<p class=\"contact\">" + " &middot; ".join(items) + "</p>\n")
        out.append(f"<p>&copy; 2025 {site}. All rights reserved. "
                   f"<span class=\"path\">{html_escape(web.url_path[uid])}</span></p>\n")
        out.append("</footer>\n</body>\n</html>\n")
        return "".join(out).encode()

    def _frameset(self, uid: int, port: int, tls_port: int) -> bytes:
        title = _title(uid)
        frames = "".join(f'<frame src="{href}" name="f{i}">\n'
                         for i, href in enumerate(self._links.hrefs(uid, port, tls_port)[0]))
        return (f'<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Frameset//EN" "http://www.w3.org/TR/html4/frameset.dtd">\n'
                f'<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
                f'<frameset rows="20%,80%">\n{frames}<noframes>Your browser does not support frames.</noframes>\n'
                f'</frameset></html>\n').encode()

    # --- special hosts -----------------------------------------------------------

    def trap_page(self, host: WebHost, path: str, port: int, tls_port: int = 0) -> bytes:
        """A trap page: links to deeper trap pages (relative, ./ or absolute) and back to `/`."""
        origin = host.origin(port, tls_port)
        depth = path.count("/")
        items = []
        for i, child in enumerate(trap.trap_children(path)):
            if child == "/":
                href = "/"
            elif path == "/":
                href = child
            else:
                rel = child[len(path):]
                href = (rel, "./" + rel, origin + child)[(depth + i) % 3]
            items.append(f'<li><a href="{href}">{"home" if child == "/" else child}</a></li>')
        return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                f"<title>Archive {html_escape(path)}</title></head>\n"
                f"<body><h1>Archive {html_escape(path)}</h1>\n<p>Browse older and newer entries.</p>\n"
                f"<ul>\n{chr(10).join(items)}\n</ul>\n</body></html>\n").encode()

    def case(self, uid: int, case: Case, port: int, tls_port: int = 0) -> Reply:
        """The bad host's 200 cases with links: malformed markup and charset confusions."""
        texts = self._anchor_texts()
        hrefs, _, _, tgts = self._links.hrefs(uid, port, tls_port)
        links = [f'<a href="{href}">{texts[tgt]}</a>' for href, tgt in zip(hrefs, tgts)]
        if case is Case.MALFORMED:
            body = (b"<html><head><title>Malformed page</title><body bgcolor=white>\n"
                    b"<div class=\"x\"><p>Unclosed paragraph <b>bold <i>both</b> italic?</i>\n"
                    b"<table><tr><td>cell<td>cell two<div>div in a cell " + links[0].encode() + b"\n"
                    b"</td></tr></table></span></font></div></div></div></div>\n"
                    b"\x00\x01\x02 junk \xff\xfe\xfd \x80\x81\xc3( &#xZZ; &bogus; &amp <<>> </ >\n"
                    b"<ul><li>item one<li>item two " + b" ".join(x.encode() for x in links[1:]) + b"\n"
                    b"<p>Nested <a>garbage <b><i><u>deep</b></u></i> "
                    b"<form><form><select><option>x</select></p></p></p>\n"
                    b"<!-- a comment that never ends\n<a href=\"/bad-ok/inside-comment.html\">not a link</a>\n")
            return Reply(200, HTML, body)
        if case is Case.CP1252:
            text = ("<!DOCTYPE html>\n<html><head>"
                    "<title>Caf\u00e9 \u201cquoted\u201d \u2013 windows-1252</title></head>\n"
                    "<body><p>Na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u2014 \u20ac5, \u2018single\u2019 \u2026</p>\n"
                    + "\n".join(links) + "\n</body></html>\n")
            return Reply(200, "text/html; charset=utf-8", text.encode("cp1252"))
        if case is Case.NOCHARSET:
            text = ("<!DOCTYPE html>\n<html><head><title>No charset anywhere</title></head>\n"
                    "<body><p>Gr\u00fc\u00dfe aus K\u00f6ln, caf\u00e9 cr\u00e8me.</p>\n"
                    + "\n".join(links) + "\n</body></html>\n")
            return Reply(200, "text/html", text.encode("latin-1"))
        if case is Case.SHIFT_JIS:
            text = ("<!DOCTYPE html>\n<html><head><meta charset=\"shift_jis\">"
                    "<title>\u65e5\u672c\u8a9e\u306e\u30da\u30fc\u30b8</title></head>\n"
                    "<body><p>\u3053\u308c\u306f\u30b7\u30d5\u30c8JIS\u3067\u66f8\u304b\u308c\u305f\u30da\u30fc\u30b8\u3067\u3059\u3002"
                    "\u30ea\u30f3\u30af\u306f\u4e0b\u306b\u3042\u308a\u307e\u3059\u3002</p>\n"
                    + "\n".join(links) + "\n</body></html>\n")
            return Reply(200, "text/html", text.encode("shift_jis"))
        raise ValueError(f"case {case} is streamed, not rendered")


# --- helpers (pure functions) ----------------------------------------------------


def _attr(href: str, i: int) -> str:
    """`="href"` with quoting varied like real pages: double, single, unquoted, valueless when empty."""
    if not href:
        return "" if i % 2 else '=""'
    if i % 11 == 4:
        return f"='{href}'"
    if i % 13 == 6 and not any(c in href for c in " \t\n\"'=<>`"):
        return f"={href}"
    return f'="{href}"'


def _anchor(tgt: int) -> str:
    n = len(WORDS)
    return f"{WORDS[(tgt * 7) % n].capitalize()} {WORDS[(tgt * 13 + 3) % n]}"


def _title(uid: int) -> str:
    h = mix(uid, 0x7171)
    n = len(WORDS)
    words = [WORDS[(h >> (8 * k)) % n] for k in range(3 + h % 3)]
    return " ".join(words).capitalize() + f" #{uid}"


def _paragraph_pool(seed: int) -> list[str]:
    """Paragraph texts with inline tags and entities, chosen once per web."""
    rnd = random.Random(seed * 7919 + 17)
    entities = ("&amp;", "&mdash;", "&nbsp;", "caf&eacute;", "it&#8217;s", "&quot;quoted&quot;", "&hellip;",
                "&copy;", "&lt;tag&gt;", "na&iuml;ve", "&#x2013;")
    tags = ("em", "strong", "code", "span class=\"hl\"", "abbr title=\"also\"", "b", "i")
    pool = []
    for _ in range(PARAGRAPHS_IN_POOL):
        words = []
        for w in range(rnd.randint(30, 80)):
            word = rnd.choice(WORDS)
            r = rnd.random()
            if r < 0.06:
                tag = rnd.choice(tags)
                words.append(f"<{tag}>{word}</{tag.split()[0]}>")
            elif r < 0.10:
                words.append(rnd.choice(entities))
            else:
                words.append(word)
            if w % 11 == 10:
                words[-1] += "."
        text = " ".join(words)
        pool.append(text[0].upper() + text[1:] + ".")
    return pool



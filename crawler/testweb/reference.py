"""A deliberately simple reference crawler that checks the test web against its own manifest.

Not the product's crawler: one URL at a time, breadth-first, no frontier, no
DUE, no politeness beyond "one request at a time". It shares nothing with the
generator but the `CrawlRules.admits` filter: links come from parsing the
served bytes (selectolax), resolving them (ada, WHATWG), canonicalising them
(fragment dropped, unreserved %-escapes decoded); robots.txt is read with
protego. If its requests equal `expected_crawl(...)`, the web serves what the
manifest claims. The tests run it in-process (through `Renderer`) and over
HTTP and HTTPS (against the aiohttp server and against nginx), where a bad
certificate is found by the TLS handshake itself.

robots.txt is asked once per origin (scheme, host, port); a 3xx answer is
followed (at most MAX_ROBOTS_REDIRECTS, RFC 9309 2.3.1.2) and the target's
answer holds for every origin of the chain, so a target already known is not
asked again. A fetch that fails for a permanent reason (a certificate that
does not verify) refuses its origin's URLs from then on.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from urllib.parse import urlsplit

import ada_url
from protego import Protego
from selectolax.lexbor import LexborHTMLParser

from .manifest import DNS_NXDOMAIN, PRIVATE_ADDRESS, TLS_REASONS, CrawlRules
from .model import HOSTILE_ROLES, TLS_BAD_ROLES, Web
from .pages import HTTPS, Renderer, RobotsOutage
from .tls import verify_reason

USER_AGENT = "ExampleCrawler/1.0 (+https://example.org/crawler)"
LINK_SOURCES = MappingProxyType({"a": "href", "area": "href", "link": "href", "img": "src", "frame": "src",
                                 "iframe": "src", "embed": "src", "source": "src", "form": "action",
                                 "script": "src"})
# The test web's CSS (inline <style> and stylesheets) writes url() plainly: a pattern is reference enough here.
_CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]+)""", re.I)
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
MAX_ROBOTS_REDIRECTS = 5
"""Redirects of one robots.txt followed (RFC 9309: at least five); beyond, the file counts as unavailable."""
_ROLE_REASONS = dict(zip(TLS_BAD_ROLES, ("tls_untrusted", "tls_expired", "tls_hostname_mismatch")))


@dataclass
class Fetched:
    """What the reference crawler needs from one response; body None = failed (limit, timeout)."""

    status: int
    headers: dict[str, str]
    body: bytes | None
    error: str | None = None
    """Why nothing was sent (a TLS reason: the certificate failed verification), else None."""


Fetch = Callable[[str], Awaitable[Fetched]]


@dataclass
class CrawlResult:
    fetched: list[str] = field(default_factory=list)
    robots: list[str] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)
    disallowed: set[str] = field(default_factory=set)
    filtered: set[str] = field(default_factory=set)
    statuses: dict[str, int] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    refusals: dict[str, str] = field(default_factory=dict)
    """Refused URL -> reason (dns_nxdomain, private_address, tls_*)."""


def canonicalize(href: str, base: str | None) -> str | None:
    """Absolute canonical http(s) URL of `href` against `base`, or None."""
    try:
        url = ada_url.URL(href, base) if base else ada_url.URL(href)
    except ValueError:
        return None
    if url.protocol not in ("http:", "https:"):
        return None
    s = url.href.split("#", 1)[0]

    def sub(m: re.Match[str]) -> str:
        c = chr(int(m.group(1), 16))
        return c if c in _UNRESERVED else "%" + m.group(1).upper()
    return _PCT.sub(sub, s)


def extract_links(body: bytes, url: str, follow_nofollow: bool = False) -> list[str]:
    """Canonical links of an HTML body, honouring <base>, rel=nofollow and meta robots."""
    tree = LexborHTMLParser(body)
    if not follow_nofollow:
        for meta in tree.css("meta[name]"):
            if (meta.attributes.get("name") or "").lower() == "robots":
                tokens = re.split(r"[\s,]+", (meta.attributes.get("content") or "").lower())
                if "nofollow" in tokens or "none" in tokens:
                    return []
    base = url
    for b in tree.css("base"):
        if "href" in b.attributes:
            try:
                base = ada_url.URL(b.attributes.get("href") or "", url).href
            except ValueError:
                pass
            break
    out = []
    for node in tree.css(",".join(LINK_SOURCES)):
        attr = LINK_SOURCES[node.tag or ""]     # css() yields elements: tag is never None
        if attr not in node.attributes:
            continue
        if not follow_nofollow and "nofollow" in (node.attributes.get("rel") or "").lower().split():
            continue
        link = canonicalize(node.attributes.get(attr) or "", base)
        if link:
            out.append(link)
    for style in tree.css("style"):
        out += css_links(style.text(deep=True).encode(), base)
    return out


def css_links(body: bytes, base: str) -> list[str]:
    """Canonical url() targets of the test web's CSS, resolved against `base`."""
    text = body.decode("utf-8", "replace")
    return [link for link in (canonicalize(m.group(1), base) for m in _CSS_URL.finditer(text)) if link]


def _private(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_private or ip.is_loopback or ip.is_link_local


def _obeying(parser: Protego, token: str) -> Callable[[str], bool]:
    """A robots.txt verdict: what the parsed file says for `token`."""
    def allowed(url: str) -> bool:
        return bool(parser.can_fetch(url, token))
    return allowed


def _always(allow: bool) -> Callable[[str], bool]:
    """A robots.txt verdict for every URL alike (no file: allow; server error or unavailable: see callers)."""
    def allowed(url: str) -> bool:
        return allow
    return allowed


async def reference_crawl(fetch: Fetch, seeds: list[str], rules: CrawlRules | None = None,
                          user_agent: str = USER_AGENT, host_gap_s: float = 0.0) -> CrawlResult:
    """Crawl breadth-first from `seeds` through `fetch`, one request at a time.

    `rules`: CrawlRules() when None. `host_gap_s`: least time between the end of one request to a host
    name and the start of the next (a server notices a client that cut a body short a moment after the
    client moved on).
    """
    if rules is None:
        rules = CrawlRules()
    token = user_agent.split("/", 1)[0]
    last_end: dict[str, float] = {}
    loop = asyncio.get_running_loop()

    async def polite(url: str) -> Fetched:
        name = urlsplit(url).hostname or ""
        wait = last_end.get(name, -1e9) + host_gap_s - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            return await fetch(url)
        finally:
            last_end[name] = loop.time()

    queue = deque(seeds)
    seen: set[str] = set()
    robots: dict[str, Callable[[str], bool]] = {}
    dead: dict[str, str] = {}  # origin -> permanent failure reason
    res = CrawlResult()

    def refuse(url: str, reason: str) -> None:
        res.refused.add(url)
        res.refusals[url] = reason

    async def robots_for(origin: str) -> None:
        """Fill robots[origin] (and the origins it redirects to), or dead[origin]."""
        chain = [origin]
        target = origin + "/robots.txt"
        verdict: Callable[[str], bool] | None = None
        retries = rules.robots_error_retries
        for _ in range(MAX_ROBOTS_REDIRECTS + 1 + retries):
            got = await polite(target)
            if got.error is not None:
                for o in chain:
                    dead[o] = got.error
                return
            res.robots.append(target)
            if got.status >= 500 and retries:        # a server error: asked again (the waits do not matter here)
                retries -= 1
                continue
            location = got.headers.get("location") if 300 <= got.status < 400 else None
            if location is None:
                if got.status == 200 and got.body is not None:
                    verdict = _obeying(Protego.parse(got.body.decode("utf-8", "replace")), token)
                else:
                    verdict = _always(400 <= got.status < 500)
                break
            target = canonicalize(location, target) or ""
            parts = urlsplit(target)
            nxt = f"{parts.scheme}://{parts.netloc}"
            if nxt in robots:  # the target origin's answer is known: it holds for the chain too
                verdict = robots[nxt]
                break
            if nxt in dead:
                for o in chain:
                    dead[o] = dead[nxt]
                return
            chain.append(nxt)
        if verdict is None:  # too many redirects: unavailable, allow all
            verdict = _always(True)
        for o in chain:
            robots[o] = verdict

    while queue:
        url = queue.popleft()
        if url in seen:
            continue
        seen.add(url)
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path or "/"
        if not rules.admits(url, host, path):
            res.filtered.add(url)
            continue
        if host.endswith(".invalid"):
            refuse(url, DNS_NXDOMAIN)
            continue
        if rules.private_guard and _private(host):
            refuse(url, PRIVATE_ADDRESS)
            continue
        origin = f"{parts.scheme}://{parts.netloc}"
        if rules.obey_robots and origin not in robots and origin not in dead:
            await robots_for(origin)
        if origin in dead:
            refuse(url, dead[origin])
            continue
        if rules.obey_robots and not robots[origin](url):
            res.disallowed.add(url)
            continue
        got = await polite(url)
        if got.error is not None:
            dead[origin] = got.error
            refuse(url, got.error)
            continue
        res.fetched.append(url)
        res.statuses[url] = got.status
        if got.body is None:
            res.failed.add(url)
        content_type = got.headers.get("content-type", "")
        ok_body = got.body if 200 <= got.status < 300 else None
        if 300 <= got.status < 400 and "location" in got.headers:
            link = canonicalize(got.headers["location"], url)
            if link:
                queue.append(link)
        elif ok_body is not None and content_type.startswith("text/html"):
            queue.extend(extract_links(ok_body, url, rules.follow_nofollow))
        elif ok_body is not None and content_type.startswith("text/css"):
            queue.extend(css_links(ok_body, url))
    return res


def renderer_fetch(web: Web, *, static: bool = False, port: int = 0, tls_port: int = 0,
                   tls_verify: bool = True) -> Fetch:
    """A `Fetch` that asks the renderer directly (no HTTP); streamed cases count as failures.

    A request's port is its URL's; the other scheme's is `port` or `tls_port`. With `tls_verify`
    an https:// request to a bad-certificate host fails as its handshake would.
    """
    renderer = Renderer(web)
    outage = None if static else RobotsOutage(web)

    async def fetch(url: str) -> Fetched:
        parts = urlsplit(url)
        host = web.host_named(parts.hostname or "")
        if host is None or (static and host.role in HOSTILE_ROLES):
            return Fetched(404, {"content-type": "text/html"}, b"")
        recovered = outage.reply(host, parts.path or "/") if outage is not None else None
        if recovered is not None:
            return Fetched(recovered.status, {"content-type": recovered.content_type}, recovered.body)
        secure = parts.scheme == HTTPS
        if secure and tls_verify and host.role in _ROLE_REASONS:
            return Fetched(0, {}, None, _ROLE_REASONS[host.role])
        here = parts.port or (443 if secure else 80)
        reply = renderer.respond(host, parts.path or "/", port if secure else here, tls_port if not secure else here,
                                 parts.scheme)
        headers = {"content-type": reply.content_type}
        headers.update({k.lower(): v for k, v in reply.headers})
        return Fetched(reply.status, headers, None if reply.stream else reply.body)
    return fetch


def http_fetch(session, port: int, *, max_body_bytes: int = 1 << 20, max_decoded_bytes: int = 4 << 20,
               timeout_s: float = 2.0, address: str = "127.0.0.1", tls_port: int = 0, ssl_context=None) -> Fetch:
    """A `Fetch` over HTTP to `address:port` (HTTPS to `address:tls_port`, verified with `ssl_context`
    against the URL's host name, sent as SNI) with the URL's host in the Host header.

    `session` is an aiohttp.ClientSession created with auto_decompress=False;
    bodies over the limits, gzip bombs and stalls come back as failures, a
    certificate that fails verification as its reason (tls.verify_reason).
    """
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=timeout_s * 4, sock_read=timeout_s)

    async def fetch(url: str) -> Fetched:
        parts = urlsplit(url)
        extra = {}
        if parts.scheme == HTTPS:
            target = f"https://{address}:{tls_port}{parts.path or '/'}"
            extra = {"ssl": ssl_context, "server_hostname": parts.hostname}
        else:
            target = f"http://{address}:{port}{parts.path or '/'}"
        try:
            async with session.get(target, headers={"Host": parts.netloc, "User-Agent": USER_AGENT},
                                   allow_redirects=False, timeout=timeout, **extra) as resp:
                headers = {k.lower(): v for k, v in resp.headers.items()}
                chunks, size = [], 0
                while size <= max_body_bytes:
                    chunk = await resp.content.read(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                if size > max_body_bytes:
                    resp.close()
                    return Fetched(resp.status, headers, None)
                body = b"".join(chunks)
                if headers.get("content-encoding") == "gzip":
                    inflater = zlib.decompressobj(31)
                    body = inflater.decompress(body, max_decoded_bytes + 1)
                    if len(body) > max_decoded_bytes:
                        return Fetched(resp.status, headers, None)
                return Fetched(resp.status, headers, body)
        except aiohttp.ClientConnectorCertificateError as e:
            reason = verify_reason(e)
            return Fetched(0, {}, None, reason if reason in TLS_REASONS else None)
        except (TimeoutError, aiohttp.ClientError):
            return Fetched(0, {}, None)
    return fetch

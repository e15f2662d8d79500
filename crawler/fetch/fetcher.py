"""The HTTP fetcher: one GET, hard limits on everything, a FetchResult always.

One aiohttp ClientSession serves the whole node. Its connector keeps one idle
connection per host alive between polite requests (fetch.keepalive_s), has no
connection limits of its own (the frontier already guarantees at most one
request in flight per host), binds to the node's `source_address` when given,
and resolves names through our caching `Resolver` (aiohttp's DNS cache is
off), which also applies the private-network guard to resolved addresses.

Limits, each ending the fetch with its reason code (result.py):
- URL length and scheme are checked before anything is sent; so are IP-literal
  hosts, against the private-network guard (aiohttp never resolves them);
- connect (fetch.connect_timeout_s, per TCP+TLS attempt), read (the server
  silent for fetch.read_timeout_s) and total (fetch.total_timeout_s) timeouts;
- a floor on the body's rate (fetch.min_bytes_per_s over windows of
  fetch.min_rate_window_s, see `_RateFloor`): a server trickling a byte just
  often enough to dodge the read timeout is cut as too_slow;
- response header lines and fields (fetch.max_header_bytes, enforced by
  aiohttp's parser);
- body on the wire (fetch.max_body_bytes): reading stops at the limit, what was
  read is kept and the connection is closed;
- decoded body (fetch.max_decoded_bytes): aiohttp's decompression is off and
  the body (gzip, deflate, br, zstd) is decoded here incrementally and bounded
  (decode.py), which also keeps the body as received for WARC records.
Redirects are never followed: a 3xx comes back with its raw `location`.

TLS (tls.py): one SSL context per fetcher from fetch.tls, built when the
fetcher is made, so a bad ca_file or client key stops the node at start; a
certificate that fails verification ends the fetch as tls_untrusted,
tls_expired or tls_hostname_mismatch before any request is sent.

Proxies (proxy.py): fetch.proxy or the node's own, http:// (HTTPS through
CONNECT) or socks5h://. aiohttp never resolves a target behind a proxy, so the
fetcher resolves it through the Resolver itself (cached) and lets the guard
judge it before anything reaches the proxy; the proxy's own address is trusted.

A fetch never raises for what the network or the server does; cancellation
propagates.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
from aiohttp.http_exceptions import LineTooLong
from yarl import URL

from crawler.config.schema import FetchConfig
from crawler.fetch import result as R
from crawler.fetch import tls
from crawler.fetch.decode import ACCEPT_ENCODING, BadContentEncoding, BodyDecoder, DecodedTooLarge, parse_codings
from crawler.fetch.dns import Resolver
from crawler.fetch.guard import ip_literal, is_forbidden
from crawler.fetch.headers import parse_content_type, parse_retry_after
from crawler.fetch.proxy import HTTP, PROXY_ERRORS, PROXY_TIMEOUTS, ProxyTrustingResolver, parse_proxy, socks_connector
from crawler.fetch.result import FetchResult

log = logging.getLogger(__name__)

ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
_SCHEMES = ("http://", "https://")
_SCHEME_PREFIX_CHARS = len("https://")
_RETRY_AFTER_STATUSES = frozenset({429, 503})
_REDIRECT_MIN, _REDIRECT_MAX = 300, 399
_HEADER_LINE_OVERHEAD_BYTES = 4              # ": " and CRLF around each reconstructed header
_STATUS_LINE_FMT = "HTTP/{}.{} {} {}\r\n"
_END_OF_HEADERS_BYTES = 2
_TOO_MANY_HEADERS = "too many headers"
_TLS_REASONS = frozenset({R.TLS_UNTRUSTED, R.TLS_EXPIRED, R.TLS_HOSTNAME_MISMATCH, R.TLS_HANDSHAKE})
_RATE_TICKS_PER_WINDOW = 4                   # the rate floor's sweeps per min_rate_window_s: how late a cut may come


class _Transfer:
    """What one exchange has produced so far (kept when it fails half-way)."""

    __slots__ = ("parts", "decoder", "decode_error", "head_bytes", "stopped", "detail", "resp", "window_start",
                 "window_mark")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.decoder: BodyDecoder | None = None
        self.decode_error = ""
        self.head_bytes = 0
        self.stopped = ""                    # reason code when reading stopped at a limit
        self.detail = ""                     # why, when the limit's own words are not enough
        # The rate floor's view (_RateFloor): the response, when its current window began, bytes by then.
        self.resp: aiohttp.ClientResponse | None = None
        self.window_start = 0.0
        self.window_mark = 0


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, its causes and contexts, and aiohttp's wrapped os_error, without loops."""
    seen = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        cur = todo.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        todo.extend((cur.__cause__, cur.__context__, getattr(cur, "os_error", None)))


def classify(exc: BaseException, https: bool = False) -> str:
    """The reason code of an exception raised by aiohttp (or our resolver, a proxy, TLS) during a fetch.

    `https`: the URL was https, so a connection reset while connecting cut the
    TLS handshake (connect() itself is refused, never reset).
    """
    tls_reason = ""
    for cur in _chain(exc):
        reason = getattr(cur, "reason", None)
        if isinstance(reason, str) and reason in R.REASON_CODES and reason != R.OK:
            return reason                                   # DnsError, PrivateAddressError
        if isinstance(cur, LineTooLong):
            return R.HEADER_TOO_LARGE
        if isinstance(cur, PROXY_ERRORS):
            return R.PROXY_ERROR
        if isinstance(cur, PROXY_TIMEOUTS):
            return R.CONNECT_TIMEOUT
        if tls_reason in ("", R.TLS_HANDSHAKE):             # a verification failure says more than its wrapper
            tls_reason = tls.classify(cur) or tls_reason
    if tls_reason:
        return tls_reason
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return R.CONNECT_TIMEOUT
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return R.READ_TIMEOUT
    if isinstance(exc, aiohttp.ClientConnectorError):
        if https and isinstance(exc.os_error, (ConnectionResetError, BrokenPipeError)):
            return R.TLS_HANDSHAKE
        return R.CONNECT_ERROR
    if isinstance(exc, aiohttp.NonHttpUrlClientError):
        return R.UNSUPPORTED_SCHEME
    if isinstance(exc, aiohttp.InvalidURL):
        return R.INVALID_URL
    if isinstance(exc, aiohttp.ClientResponseError) and _TOO_MANY_HEADERS in str(exc.message).lower():
        return R.HEADER_TOO_LARGE
    if isinstance(exc, (aiohttp.ClientError, OSError)):
        return R.PROTOCOL_ERROR
    return ""


async def _connect_started(session, ctx, params) -> None:
    """aiohttp trace hook: a new connection is being opened for the request whose FetchResult is the ctx."""
    ctx.trace_request_ctx.connect_s = -time.monotonic()


async def _connect_ended(session, ctx, params) -> None:
    res = ctx.trace_request_ctx
    if res.connect_s is not None and res.connect_s < 0:
        res.connect_s += time.monotonic()


class _RateFloor:
    """Cuts bodies that arrive slower than min_bytes_per_s, judged over spans of at least min_rate_window_s.

    Hot path: one sweep timer for all fetches in flight instead of a timer per
    fetch (a TimerHandle made and cancelled per page costs about as much as ten
    dict operations), and nothing per chunk: the bytes received are what
    aiohttp counts anyway (`content.total_bytes`). A fetch joins when its
    headers have arrived and its body has not, and leaves when it ends.

    Every min_rate_window_s / _RATE_TICKS_PER_WINDOW the sweep looks at each
    fetch whose current window is over: if the bytes received since the
    window began are fewer than min_bytes_per_s times the time since, the
    response is closed at once (reason too_slow, truncated, what was read
    kept, the connection not pooled); else a new window begins. The first
    window begins with the response headers; a body that ends within a window
    is never judged on it.

    Bound: a body is cut at the first sweep after the first whole window it
    fails, so at most min_rate_window_s * (1 + 1/_RATE_TICKS_PER_WINDOW) after
    that window began, and at most 2.25 * min_rate_window_s after the body
    slows down (1.25 windows when it is slow from its first byte: 10-12.5 s at
    the defaults), whatever read_timeout_s is. A server sending a byte just
    before each read timeout is cut like any other; one that stops sending is
    cut by whichever comes first, this or read_timeout_s.
    """

    __slots__ = ("_rate", "_window_s", "_tick_s", "_watched", "_handle", "cuts")

    def __init__(self, min_bytes_per_s: int, window_s: float) -> None:
        self._rate = min_bytes_per_s
        self._window_s = window_s
        self._tick_s = window_s / _RATE_TICKS_PER_WINDOW
        self._watched: dict[_Transfer, None] = {}
        self._handle: asyncio.TimerHandle | None = None
        self.cuts = 0

    def watch(self, resp: aiohttp.ClientResponse, transfer: _Transfer) -> None:
        """Judge this body from now on. Hot path: once per page whose body is not complete with its headers."""
        loop = asyncio.get_running_loop()
        transfer.resp = resp
        transfer.window_start = loop.time()
        transfer.window_mark = 0                          # body bytes that came with the headers count too
        self._watched[transfer] = None
        if self._handle is None:
            self._handle = loop.call_later(self._tick_s, self._sweep)

    def unwatch(self, transfer: _Transfer) -> None:
        self._watched.pop(transfer, None)

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        window_s, rate = self._window_s, self._rate
        cut = []
        for transfer in self._watched:
            span = now - transfer.window_start
            if span < window_s:
                continue
            resp = transfer.resp
            assert resp is not None                       # watched transfers have their response
            total = resp.content.total_bytes
            got = total - transfer.window_mark
            if got >= rate * span:
                transfer.window_start, transfer.window_mark = now, total
                continue
            transfer.stopped = R.TOO_SLOW
            transfer.detail = f"{got} bytes in {span:.1f} s, under fetch.min_bytes_per_s {rate}"
            cut.append(transfer)
        for transfer in cut:
            del self._watched[transfer]
            self.cuts += 1
            if transfer.resp is not None:
                transfer.resp.close()                     # wakes the pending read with ClientConnectionError
        self._handle = loop.call_later(self._tick_s, self._sweep) if self._watched else None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._watched.clear()


class Fetcher:
    """GETs one URL at a time per call, never following redirects, never raising for network trouble."""

    def __init__(self, config: FetchConfig, resolver: Resolver, user_agent: str, *,
                 source_address: str | None = None, max_url_bytes: int = 2048, proxy: str | None = None) -> None:
        """`proxy`: this node's proxy URL; None means fetch.proxy, "" means none.

        Raises ConfigError (naming the key) for an unusable fetch.tls or proxy setting.
        """
        # What to send.
        self._config = config
        self._resolver = resolver
        self._user_agent = user_agent
        self._source_address = source_address
        # How: TLS and the way out.
        self._ssl = tls.make_context(config.tls)
        if not config.tls.verify:
            log.warning("fetch.tls.verify is false: server certificates are NOT verified (any certificate is "
                        "accepted; for test webs only)")
        key = "fetch.proxy" if proxy is None else "cluster.nodes[].proxy"
        self._proxy = parse_proxy(config.proxy if proxy is None else proxy, key)
        self._http_proxy = self._proxy.url if self._proxy is not None and self._proxy.scheme == HTTP else None
        if self._proxy is not None:
            log.info("fetching through the %s proxy %s:%d", self._proxy.scheme, self._proxy.host, self._proxy.port)
        # Per-URL limits.
        self._max_url_bytes = max_url_bytes
        self._allow_private = config.allow_private_networks
        self._rate_floor = _RateFloor(config.min_bytes_per_s, config.min_rate_window_s) \
            if config.min_bytes_per_s > 0 else None
        self._session: aiohttp.ClientSession | None = None
        # fetch.max_connections: a fetch waits for a slot *before* its clock starts, so the queue
        # never eats into its timeouts or its measured duration (aiohttp's own connector limit
        # would count the wait against total_timeout_s and the politeness timings).
        self._slots = asyncio.Semaphore(config.max_connections) if config.max_connections > 0 else None
        self.slot_waits = 0                       # fetches that had to wait for a slot
        self._closed = False
        # Counters for stats().
        self._fetches = 0
        self._by_reason: dict[str, int] = {}
        self._by_status_class: dict[str, int] = {}
        self._wire_bytes = 0
        self._body_bytes = 0
        self._duration_s_sum = 0.0
        self._unexpected_errors = 0

    def _get_session(self) -> aiohttp.ClientSession:
        """The session, created on first use inside the running event loop."""
        if self._session is None:
            if self._closed:
                raise RuntimeError("Fetcher is closed")
            cfg = self._config
            keepalive = cfg.keepalive_s > 0
            options: dict[str, Any] = dict(
                use_dns_cache=False,
                limit=0,                                  # the cap is self._slots; per host the frontier allows one
                limit_per_host=0,
                force_close=not keepalive,
                keepalive_timeout=cfg.keepalive_s if keepalive else None,
                local_addr=(self._source_address, 0) if self._source_address else None,
                ssl=self._ssl,
            )
            proxy = self._proxy
            if proxy is None:
                connector = aiohttp.TCPConnector(resolver=self._resolver, **options)
            elif proxy.scheme == HTTP:
                connector = aiohttp.TCPConnector(resolver=ProxyTrustingResolver(self._resolver, proxy.host), **options)
            else:
                del options["local_addr"]                 # aiohttp-socks opens the proxy connection itself
                connector = socks_connector(proxy, **options)
            trace = aiohttp.TraceConfig()
            trace.on_connection_create_start.append(_connect_started)
            trace.on_connection_create_end.append(_connect_ended)
            self._session = aiohttp.ClientSession(
                connector=connector,
                trace_configs=[trace],
                timeout=aiohttp.ClientTimeout(total=None, connect=None,
                                              sock_connect=cfg.connect_timeout_s,
                                              sock_read=cfg.read_timeout_s),
                headers={"User-Agent": self._user_agent, "Accept": ACCEPT,
                         "Accept-Encoding": ACCEPT_ENCODING},
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                max_line_size=cfg.max_header_bytes,
                max_field_size=cfg.max_header_bytes,
                trust_env=False,
            )
        return self._session

    def _precheck(self, url: str) -> tuple[URL | None, str, str]:
        """(parsed URL, "", "") if the URL may be requested, else (None, reason, detail)."""
        max_bytes = self._max_url_bytes
        if len(url) > max_bytes or (not url.isascii() and len(url.encode("utf-8", "surrogatepass")) > max_bytes):
            return None, R.URL_TOO_LONG, f"longer than {self._max_url_bytes} bytes"
        if not url[:_SCHEME_PREFIX_CHARS].lower().startswith(_SCHEMES):
            return None, R.UNSUPPORTED_SCHEME, url.partition(":")[0]
        try:
            # Canonical URLs are already percent-encoded: send them byte for byte.
            if url.isascii() and url.isprintable() and " " not in url:
                yurl = URL(url, encoded=True)
            else:
                yurl = URL(url)
            host = yurl.raw_host
            yurl.port                                     # noqa: B018 - validates the port
        except (ValueError, TypeError) as exc:
            return None, R.INVALID_URL, str(exc)
        if not host:
            return None, R.INVALID_URL, "no host"
        if not self._allow_private:
            literal = ip_literal(host)
            if literal is not None and is_forbidden(literal):
                return None, R.PRIVATE_ADDRESS, f"{literal} is not a public address"
        return yurl, "", ""

    async def fetch(self, url: str, *, max_body_bytes: int | None = None) -> FetchResult:
        """GET `url` without following redirects. Hot path: once per page.

        `max_body_bytes` lowers both body limits (wire and decoded) for this call (robots.txt uses it).
        """
        slots = self._slots
        if slots is None:
            return await self._fetch(url, max_body_bytes)
        if slots.locked():
            self.slot_waits += 1
        async with slots:
            return await self._fetch(url, max_body_bytes)

    async def _fetch(self, url: str, max_body_bytes: int | None) -> FetchResult:
        started = time.time()
        t0 = time.monotonic()
        res = FetchResult(url=url, started=started)
        yurl, reason, detail = self._precheck(url)
        if yurl is None:
            res.reason, res.detail = reason, detail
            return self._done(res, t0)
        limit = self._config.max_body_bytes
        decoded_limit = self._config.max_decoded_bytes
        if max_body_bytes is not None:
            limit, decoded_limit = min(limit, max_body_bytes), min(decoded_limit, max_body_bytes)
        session = self._get_session()                     # raises only if the fetcher was closed
        transfer = _Transfer()
        deadline = None
        try:
            async with asyncio.timeout(self._config.total_timeout_s) as deadline:
                if self._proxy is not None:
                    res.ip = await self._judge_target(yurl)
                await self._exchange(session, yurl, res, transfer, limit, decoded_limit)
        except Exception as exc:                          # noqa: BLE001 - classified below; CancelledError passes
            if isinstance(exc, TimeoutError) and deadline is not None and deadline.expired():
                res.reason = R.TOTAL_TIMEOUT
            elif isinstance(exc, DecodedTooLarge):
                res.reason = R.DECODED_TOO_LARGE
                exc = DecodedTooLarge(f"decoded body over {decoded_limit} bytes")
            else:
                res.reason = classify(exc, yurl.scheme == "https")
                if not res.reason:
                    self._unexpected_errors += 1
                    log.warning("unexpected error fetching %s", url, exc_info=True)
                    res.reason = R.PROTOCOL_ERROR
                elif res.status and res.reason in _TLS_REASONS:
                    res.reason = R.PROTOCOL_ERROR         # TLS broke after the handshake, mid-response
            res.detail = f"{type(exc).__name__}: {exc}"
            if res.status:
                res.truncated = True                      # the body is incomplete
        else:
            if transfer.stopped:
                res.reason, res.truncated = transfer.stopped, True
                res.detail = transfer.detail or f"body over {limit} bytes"
            elif transfer.decode_error:
                res.reason, res.detail = R.BAD_CONTENT_ENCODING, transfer.decode_error
        self._finish_body(res, transfer)
        return self._done(res, t0)

    async def _judge_target(self, yurl: URL) -> str:
        """The target's address, resolved here because nothing else does behind a proxy.

        The Resolver's aiohttp hook applies the guard (PrivateAddressError) and
        keeps DNS failures' reasons (DnsError); answers are cached, so this costs
        a dict lookup per fetch once a host is known. Nothing has been sent to
        the proxy yet.
        """
        assert yurl.raw_host is not None                  # fetched URLs are absolute http(s) URLs
        results = await self._resolver.resolve(yurl.raw_host, yurl.port or 0, socket.AF_UNSPEC)
        return results[0]["host"]

    async def _exchange(self, session: aiohttp.ClientSession, yurl: URL, res: FetchResult, transfer: _Transfer,
                        limit: int, decoded_limit: int) -> None:
        """Send the request and read the response into `res` and `transfer`."""
        async with session.get(yurl, allow_redirects=False, trace_request_ctx=res, proxy=self._http_proxy) as resp:
            self._take_head(resp, res, transfer)
            codings = parse_codings(resp.headers.get("Content-Encoding"))
            if codings is None:
                transfer.decode_error = f"unsupported Content-Encoding {resp.headers.get('Content-Encoding')!r}"
            elif codings:
                transfer.decoder = BodyDecoder(codings, decoded_limit)
            floor = self._rate_floor
            if floor is not None and not resp.content.is_eof():
                floor.watch(resp, transfer)
            try:
                await self._read_body(resp, transfer, limit)
            except aiohttp.ClientConnectionError:
                resp.close()                              # never return a half-read connection to the pool
                if transfer.stopped != R.TOO_SLOW:        # else: the rate floor closed it, and that is the result
                    raise
            except BaseException:
                resp.close()
                raise
            finally:
                if floor is not None and transfer.resp is not None:
                    floor.unwatch(transfer)
            if transfer.stopped:
                resp.close()

    def _take_head(self, resp: aiohttp.ClientResponse, res: FetchResult, transfer: _Transfer) -> None:
        """Copy status line and headers into the result."""
        res.status = status = resp.status
        res.http_reason = resp.reason or ""
        headers = resp.headers
        res.headers = list(headers.items())
        res.request_headers = list(resp.request_info.headers.items())
        res.content_type, res.charset = parse_content_type(headers.get("Content-Type"))
        if _REDIRECT_MIN <= status <= _REDIRECT_MAX:
            res.location = headers.get("Location")
        if status in _RETRY_AFTER_STATUSES:
            res.retry_after_s = parse_retry_after(headers.get("Retry-After"), res.started)
        if res.ip is None:                                # through a proxy: the target's address, judged
            res.ip = _peer_ip(resp)
        version = resp.version
        head = len(_STATUS_LINE_FMT.format(version.major if version else 1, version.minor if version else 1,
                                           status, res.http_reason))
        for name, value in resp.raw_headers:
            head += len(name) + len(value) + _HEADER_LINE_OVERHEAD_BYTES
        transfer.head_bytes = head + _END_OF_HEADERS_BYTES

    async def _read_body(self, resp: aiohttp.ClientResponse, transfer: _Transfer, limit: int) -> None:
        """Read the body up to `limit` bytes, feeding the decoder as it comes. Hot path: once per chunk."""
        readany = resp.content.readany
        parts = transfer.parts
        decoder = transfer.decoder
        size = 0
        while True:
            chunk = await readany()
            if not chunk:
                break
            room = limit - size
            if len(chunk) > room:
                chunk = chunk[:room]
                transfer.stopped = R.BODY_TOO_LARGE
            if chunk:
                parts.append(chunk)
                size += len(chunk)
                if decoder is not None:
                    try:
                        decoder.feed(chunk)               # raises DecodedTooLarge past the limit
                    except BadContentEncoding as exc:
                        transfer.decode_error = f"bad {resp.headers.get('Content-Encoding')} data: {exc}"
                        decoder = None                    # keep reading the raw body for the record
            if transfer.stopped:
                return
        if decoder is not None:
            try:
                decoder.finish()
            except BadContentEncoding as exc:
                transfer.decode_error = f"bad {resp.headers.get('Content-Encoding')} data: {exc}"

    def _finish_body(self, res: FetchResult, transfer: _Transfer) -> None:
        """raw_body, body and wire_bytes from what was read."""
        parts = transfer.parts
        raw = parts[0] if len(parts) == 1 else b"".join(parts)
        res.raw_body = raw
        if transfer.decoder is not None:
            res.body = transfer.decoder.decoded()
        elif transfer.decode_error:
            res.body = b""
        else:
            res.body = raw
        res.wire_bytes = transfer.head_bytes + len(raw)

    def _done(self, res: FetchResult, t0: float) -> FetchResult:
        """Stamp the duration and count the fetch."""
        res.duration_s = time.monotonic() - t0
        if res.connect_s is not None and res.connect_s < 0:      # the connection never opened
            res.connect_s = None
        self._fetches += 1
        self._by_reason[res.reason] = self._by_reason.get(res.reason, 0) + 1
        status_class = f"{res.status // 100}xx" if res.status else "none"
        self._by_status_class[status_class] = self._by_status_class.get(status_class, 0) + 1
        self._wire_bytes += res.wire_bytes
        self._body_bytes += len(res.body)
        self._duration_s_sum += res.duration_s
        return res

    def stats(self) -> dict:
        """Fetches by reason and status class, bytes, time."""
        return {
            "fetches": self._fetches,
            "by_reason": dict(self._by_reason),
            "by_status_class": dict(self._by_status_class),
            "wire_bytes": self._wire_bytes,
            "body_bytes": self._body_bytes,
            "duration_s_sum": self._duration_s_sum,
            "unexpected_errors": self._unexpected_errors,
            "connection_waits": self.slot_waits,
            "too_slow_cuts": self._rate_floor.cuts if self._rate_floor is not None else 0,
        }

    async def close(self) -> None:
        """Close the session and its connections (the resolver belongs to the caller)."""
        self._closed = True
        if self._rate_floor is not None:
            self._rate_floor.close()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


def _peer_ip(resp: aiohttp.ClientResponse) -> str | None:
    """The address the response came from."""
    conn = resp.connection
    transport = conn.transport if conn is not None else None
    if transport is None:
        # A response without body has already released its connection; its protocol still knows.
        protocol = getattr(resp, "_protocol", None)
        transport = getattr(protocol, "transport", None)
    peer = transport.get_extra_info("peername") if transport is not None else None
    return peer[0] if peer else None

"""The test web's HTTP server: every virtual host on one port, with an access log.

aiohttp's low-level `web.Server` (no router: one handler sees every request).
The Host header picks the host (unknown -> 404) and its port is the port
written into absolute links, so the same model serves on any port. Every
response is written inside the handler, so the access log can record when its
last byte went out:

    {"host": "h001.web.test", "scheme": "http", "path": "/p/1.html", "method": "GET",
     "status": 200, "start": 1700000000.123456, "end": 1700000000.124001, "bytes": 8123,
     "peer": "127.0.0.2", "ua": "ExampleCrawler/1.0 (...)"}

one JSON line per request, written when the request ends (also when the client
goes away mid-body), line-buffered so tests can read it at any time. `start`
is `time.time()` when the handler began, `end` when the last byte was handed
to the socket or the client was found gone; audit.py checks politeness from
these two times. A host with a response delay (the slow host, or ordinary
hosts given a latency by `WebParams.host_latency_share` and friends) sleeps
before answering, inside the logged interval, so `end - start` includes it.

HTTPS: when the web has HTTPS hosts (model.Tls; or with `tls=True`) the same
handler also listens on a TLS port (`.tls_port`), presenting one CA-signed
certificate for `*.<domain>` and, chosen by SNI, each bad-certificate host's
own (tls.py). The CA certificate is written beside the access log
(`.ca_file`, `ca.crt`; what a crawler's `fetch.tls.ca_file` names), the
server's certificates and keys under `tls/` there. A request's scheme is the
listener's; its port, from the Host header, is written into links of its
scheme, the other listener's port into links of the other. What a host
answers in a scheme it does not serve (301 to https://, or 421) is in
pages.py. A client whose handshake fails sends no request: nothing is logged.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TextIO

from aiohttp import web

from .build import build_web
from .certs import CertAuthority
from .hostile import Hostile, HostileProgress
from .model import MAX_HOST_LATENCY_S, REMOTE_ROLES, Web, WebParams
from .pages import DEFAULT_CACHE_ENTRIES, HTTP, HTTPS, Renderer, RobotsOutage
from .tls import CA_FILE, WebCerts, server_context, write_certs

SHUTDOWN_TIMEOUT_S = 2.0
"""How long stop() lets in-flight handlers finish before they are cancelled."""
TLS_DIR = "tls"
"""Directory (beside the access log) of the server's certificates and keys."""

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")


class TestWebServer:
    """Serves a `Web` on one port for every virtual host; usable as `async with`."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, web_or_params: Web | WebParams | None = None, access_log_path: str | Path | None = None,
                 *, cache_entries: int = DEFAULT_CACHE_ENTRIES, shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
                 tls: bool | None = None, ca: CertAuthority | None = None) -> None:
        if web_or_params is None:
            web_or_params = WebParams()
        self.web = web_or_params if isinstance(web_or_params, Web) else build_web(web_or_params)
        self.renderer = Renderer(self.web, cache_entries)
        if access_log_path is None:
            access_log_path = Path(tempfile.mkdtemp(prefix="testweb-")) / "access.log.jsonl"
        self.access_log_path = Path(access_log_path)
        self.host = "127.0.0.1"
        self.port = 0
        self.tls = self.web.has_tls if tls is None else tls
        """Listen on a TLS port too (default: when the web has HTTPS hosts)."""
        self.tls_port = 0
        self.ca_file: Path | None = None
        """The CA certificate (PEM) of the TLS port's certificates, once started with TLS."""
        self.certs: WebCerts | None = None
        self._ca = ca
        self.requests = 0
        """Requests answered so far (all hosts)."""
        self._shutdown_timeout_s = shutdown_timeout_s
        self._stopping = False
        self._runner: web.ServerRunner | None = None
        self._log: TextIO | None = None
        self._hostile = Hostile(self.web.params, lambda: self._stopping)
        self._robots_outage = RobotsOutage(self.web)

    # --- lifecycle ---------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0, *, tls_port: int = 0,
                    reuse_port: bool = False) -> None:
        """Listen on host:port (0 = a free port; see `.port`), and with TLS on host:tls_port (`.tls_port`)."""
        self.access_log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.access_log_path, "a", buffering=1, encoding="utf-8")
        self._stopping = False
        # handler_cancellation: a client that goes away ends its handler at once, so a cut
        # response's log line says when the client left, not when a later write failed.
        server = web.Server(self._handle, access_log=None, handler_cancellation=True)
        self._runner = web.ServerRunner(server, shutdown_timeout=self._shutdown_timeout_s)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_port=reuse_port or None)
        await site.start()
        self.host = host
        self.port = int(self._runner.addresses[0][1])
        if self.tls:
            directory = self.access_log_path.parent
            self.certs = write_certs(self.web, directory / TLS_DIR, self._ca, directory / CA_FILE)
            self.ca_file = self.certs.ca_file
            tls_site = web.TCPSite(self._runner, host, tls_port, ssl_context=server_context(self.certs),
                                   reuse_port=reuse_port or None)
            await tls_site.start()
            self.tls_port = int(self._runner.addresses[-1][1])

    async def stop(self) -> None:
        """Stop listening, end long responses (stall, endless) and close the access log."""
        self._stopping = True
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._log is not None:
            self._log.close()
            self._log = None

    async def __aenter__(self) -> TestWebServer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    # --- convenience -------------------------------------------------------------

    def seeds(self) -> list[str]:
        return self.web.seeds(self.port, self.tls_port)

    def url(self, host_name: str, path: str = "/") -> str:
        """`path` on `host_name` as links write it (https:// for an HTTPS-only host)."""
        host = self.web.host_named(host_name)
        origin = host.origin(self.port, self.tls_port) if host is not None else f"http://{host_name}:{self.port}"
        return origin + path

    # --- the handler -------------------------------------------------------------

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        start = time.time()
        self.requests += 1
        scheme = HTTPS if request.secure else HTTP
        if scheme == HTTPS:
            name, tls_port = split_host(request.headers.get("Host", ""), self.tls_port)
            port = self.port
        else:
            name, port = split_host(request.headers.get("Host", ""), self.port)
            tls_port = self.tls_port
        raw_path = request.raw_path
        path, _, query = raw_path.partition("?")
        if "%" in path:
            path = decode_unreserved(path)
        progress = HostileProgress(status=0)
        resp: web.Response | None = None
        try:
            host = self.web.host_named(name)
            if request.method not in ("GET", "HEAD"):
                reply = None
                resp = web.Response(status=405, text="method not allowed\n", headers={"Allow": "GET, HEAD"})
                progress.status = 405
            elif host is None or host.role in REMOTE_ROLES:
                reply = self.renderer.not_found(path)
            else:
                reply = (self._robots_outage.reply(host, path)
                         or self.renderer.respond(host, path, port, tls_port, scheme, query))
            if reply is not None:
                if reply.delay_s:  # the slow host, or an ordinary host with a latency (model.WebParams)
                    await asyncio.sleep(min(reply.delay_s, MAX_HOST_LATENCY_S))
                if reply.stream is not None:
                    progress.status = reply.status
                    return await self._hostile.serve(request, reply.stream, progress)
                progress.status = reply.status
                headers = {"Content-Type": reply.content_type}
                headers.update(reply.headers)
                resp = web.Response(status=reply.status, body=reply.body, headers=headers)
            assert resp is not None      # every branch above answers or has returned
            await resp.prepare(request)
            await resp.write_eof()
            if request.method != "HEAD":
                body = reply.body if reply is not None else resp.body    # resp's own: the 405's text
                progress.bytes = len(body) if isinstance(body, (bytes, bytearray)) else 0
            return resp
        except ConnectionError:
            if resp is not None and resp.prepared:
                return resp
            raise
        finally:
            self._write_log(request, name, scheme, raw_path, progress, start)

    def _write_log(self, request: web.BaseRequest, name: str, scheme: str, raw_path: str, progress: HostileProgress,
                   start: float) -> None:
        if self._log is None:
            return
        record = {
            "host": name, "scheme": scheme, "path": raw_path, "method": request.method, "status": progress.status,
            "start": start, "end": time.time(), "bytes": progress.bytes,
            "peer": request.remote or "", "ua": request.headers.get("User-Agent", ""),
        }
        assert self._log is not None     # started
        self._log.write(json.dumps(record, separators=(",", ":")) + "\n")


def split_host(header: str, default_port: int) -> tuple[str, int]:
    """(lower-case host name, port) of a Host header value; the port defaults to ours."""
    header = header.strip().lower()
    if header.startswith("["):  # [v6]:port
        end = header.find("]")
        name, rest = header[1:end], header[end + 1:]
        port_s = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port_s = header.partition(":")
    try:
        port = int(port_s) if port_s else default_port
    except ValueError:
        port = default_port
    return name.rstrip("."), port


def decode_unreserved(path: str) -> str:
    """Decode %XX escapes of unreserved characters (the canonical form does the same)."""
    def sub(m: re.Match[str]) -> str:
        c = chr(int(m.group(1), 16))
        return c if c in _UNRESERVED else "%" + m.group(1).upper()
    return _PCT.sub(sub, path)

"""Real HTML sites nobody here wrote, served by nginx over HTTPS, and GNU wget as the reference crawler.

The synthetic test web checks what we thought of; these sites check what we
did not: documentation from Debian packages, each made by another generator
(Sphinx, DocBook XSL, AsciiDoc, Publican, and one written by hand), with the
stylesheets, scripts, images and odd links such generators produce.

Hosts. wget has no `--resolve` and nothing under /etc may change, so every
host is its own loopback address (`ADDRESS_PREFIX` + octet) and URLs carry the
address: `https://127.42.0.10:PORT/index.html`. Each certificate names its
address as an IP SAN, issued by a CA made for the run (crawler/testweb/certs.py)
that both crawlers are told to trust. Both crawlers therefore ask for the very
same URLs, with no resolver in between. Every site also answers plain HTTP on
another port with a 301 to the same path over HTTPS (robots.txt included), and
the seeds are the `http://` entry pages, so the first thing each crawler meets
is that redirect. Three more hosts hold a self-signed, an expired and a
wrong-name certificate; they are seeds too, and must get no HTTP request at all.

robots.txt is not the site's own (they have none): `Site.disallow` names a
part of the real site that its pages link to, so obeying it is checked, and
one site asks for a Crawl-delay. nginx serves it from the run's directory;
nothing is written under the document roots.

Judging is from outside, from nginx's JSON access log (`LOG_FORMAT`): per
request its start and end (`msec` is the end, `request_time` the duration, as
crawler/testweb/audit.py reads them), host, scheme, port, path, status,
content type, peer and user agent. The two crawlers run one after the other
against the same nginx and are told apart by user agent.

Runners start each crawler as a child process and wait for it with `wait4`,
so its CPU (user + system, threads and children included) is its own, not
this process's; its peak RSS comes from GNU time (see `GNU_TIME`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from protego import Protego
from tests.support.configs import one_node_config
from tests.support.fixtures import REPO
from tests.support.ports import free_ports
from tests.support.processes import accepting, find_binary, stop_process

from crawler.config.schema import CrawlConfig
from crawler.testweb import certs
from crawler.testweb.audit import Request, overlaps

ADDRESS_PREFIX = "127.42.0."
"""Every host is ADDRESS_PREFIX + an octet: a /24 of loopback no other test uses."""
FIRST_SITE_OCTET = 10
BAD_CERT_FIRST_OCTET = 200
WRONG_NAME = "elsewhere.invalid"
"""The name the wrong-name certificate is issued for (never the address it is served on)."""
PORT_ATTEMPTS = 20
START_TIMEOUT_S = 10.0
POLL_S = 0.05
NGINX_MIME_TYPES = Path("/etc/nginx/mime.types")
FALLBACK_TYPES = ("text/html html htm; text/css css; application/javascript js; image/png png; image/gif gif; "
                  "image/jpeg jpg jpeg; image/svg+xml svg; text/plain txt; application/pdf pdf;")
CRAWLER_UA = CrawlConfig().user_agent
"""The crawler runs at its default user agent; its requests are told apart by it."""
WGET_UA_PREFIX = "Wget/"
ROBOTS_PATH = "/robots.txt"
NGINX_TIME_RESOLUTION_S = 0.002
"""nginx stamps milliseconds, and start = end - duration carries two roundings."""
END_LAG_TOLERANCE_S = 0.025
"""How late a loaded server may stamp a response's end (crawler/testweb/audit.py)."""



# --- the catalog -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Site:
    """One real site: where a Debian package puts it, where a crawl starts, and what robots.txt keeps out."""

    name: str
    generator: str
    package: str
    root: Path
    entry: str                                  # path of the entry page, from the root
    disallow: tuple[str, ...] = ()              # robots.txt Disallow lines: real parts of the site
    crawl_delay_s: float | None = None
    note: str = ""
    more_entries: tuple[str, ...] = ()          # further seeds (a site whose parts nothing links together)

    @property
    def entries(self) -> tuple[str, ...]:
        return (self.entry, *self.more_entries)


DOC = Path("/usr/share/doc")
CATALOG: tuple[Site, ...] = (
    Site("requests", "Sphinx", "python-requests-doc", DOC / "python-requests-doc/html", "/index.html",
         disallow=("/_modules/",), note="Sphinx's highlighted-source pages, linked as [source] from the API page"),
    Site("debian-reference", "DocBook XSL", "debian-reference-en", Path("/usr/share/debian-reference"),
         "/index.en.html", disallow=("/ch12.en.html",), note="the programming chapter"),
    Site("git", "AsciiDoc", "git-doc", DOC / "git-doc", "/index.html",
         disallow=("/technical/",), note="git's design notes, linked from git-config.html and 11 other pages"),
    Site("debian-handbook", "Publican", "debian-handbook", DOC / "debian-handbook/html/en-US", "/index.html",
         disallow=("/sect.virtualization.html",),
         note="the en-US tree only (the package holds 27 languages, 8,000 files)"),
    Site("maint-guide", "DocBook XSL", "maint-guide", DOC / "maint-guide/html", "/index.en.html",
         disallow=("/upload.en.html",), crawl_delay_s=1.0, note="the one site with a Crawl-delay"),
    Site("postfix", "by hand", "postfix-doc", DOC / "postfix/html", "/index.html",
         disallow=("/postconf.5.html",),
         note="Postfix's documentation: README pages written in HTML 4 by hand; the disallowed page is the "
              "840 KB parameter reference 127 of its pages link to"),
)


def _handbook_languages() -> tuple[str, ...]:
    root = DOC / "debian-handbook/html"
    return tuple(sorted(f"/{d.name}/index.html" for d in root.glob("*-*") if (d / "index.html").is_file())) \
        if root.is_dir() else ()


HANDBOOK_ALL = Site("debian-handbook-all", "Publican", "debian-handbook", DOC / "debian-handbook/html",
                    "/en-US/index.html", disallow=("/en-US/sect.virtualization.html",),
                    note="every language of the handbook (about 3,300 pages): a corpus on which the crawler's "
                         "start-up cost is small per request, as in any real crawl (bench only)",
                    more_entries=tuple(e for e in _handbook_languages() if e != "/en-US/index.html"))
"""For bench/realsite_bench.py --sites debian-handbook-all (the tests crawl CATALOG)."""


def find_sites(catalog: Iterable[Site] = CATALOG) -> tuple[list[Site], list[str]]:
    """The catalog's sites present on this machine, and why each absent one is left out."""
    present, skipped = [], []
    for site in catalog:
        entry = site.root / site.entry.lstrip("/")
        if entry.is_file():
            present.append(site)
        else:
            skipped.append(f"site {site.name} ({site.generator}) left out: {entry} not found "
                           f"(Debian package {site.package}; scripts/test.sh installs it)")
    return present, skipped


# --- hosts, certificates, nginx ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BadHost:
    """A host whose certificate a crawler must refuse, with the crawl-log reason it must give."""

    name: str
    reason: str


BAD_HOSTS: tuple[BadHost, ...] = (
    BadHost("self-signed", "tls_untrusted"),
    BadHost("expired", "tls_expired"),
    BadHost("wrong-name", "tls_hostname_mismatch"),
)


@dataclass
class Host:
    """One address served by nginx: a site, or a host with a bad certificate."""

    address: str
    site: Site | None = None
    bad: BadHost | None = None


LOG_FORMAT = ("'{\"msec\":$msec,\"request_time\":$request_time,\"host\":\"$host\",\"scheme\":\"$scheme\","
              "\"port\":$server_port,\"addr\":\"$server_addr\",\"method\":\"$request_method\","
              "\"path\":\"$request_uri\",\"status\":$status,\"bytes\":$body_bytes_sent,"
              "\"type\":\"$sent_http_content_type\",\"peer\":\"$remote_addr\",\"conn\":$connection,"
              "\"ua\":\"$http_user_agent\"}'")


@dataclass
class RealWeb:
    """The sites and bad hosts behind one nginx, its files under `tmp`; a context manager that starts and stops it."""

    tmp: Path
    hosts: list[Host]
    http_port: int
    https_port: int
    ca_file: Path
    seeds_file: Path
    access_log: Path
    error_log: Path
    conf: Path
    nginx: str
    proc: subprocess.Popen | None = None

    @property
    def sites(self) -> list[Host]:
        return [h for h in self.hosts if h.site is not None]

    @property
    def bad_hosts(self) -> list[Host]:
        return [h for h in self.hosts if h.bad is not None]

    def host(self, address: str) -> Host | None:
        return next((h for h in self.hosts if h.address == address), None)

    def url(self, address: str, path: str, scheme: str = "https") -> str:
        port = self.https_port if scheme == "https" else self.http_port
        return f"{scheme}://{address}:{port}{path}"

    def write_seeds(self, path: Path, site_names: Iterable[str]) -> Path:
        """A seed file of the named sites' http:// entry pages alone (no bad hosts): a crawl of those sites."""
        names = set(site_names)
        path.write_text("".join(self.url(h.address, e, "http") + "\n" for h in self.sites for e in h.site.entries
                                if h.site.name in names))
        return path

    def start(self) -> RealWeb:
        self.proc = subprocess.Popen([self.nginx, "-c", str(self.conf), "-p", str(self.tmp), "-e", str(self.error_log)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if accepting(self.proc, self.https_port, self.hosts[0].address):
            return self
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else "timeout"
        self.stop()
        raise RuntimeError(f"nginx did not start ({self.conf}): {err}")

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> RealWeb:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_offset(self) -> int:
        """Where the access log ends now: `read_log(..., offset)` then reads only what comes after."""
        return self.access_log.stat().st_size if self.access_log.exists() else 0


def robots_txt(site: Site) -> str:
    lines = [f"# robots.txt for the {site.name} site ({site.generator}), from tests/integration/realsites.py",
             "User-agent: *"]
    lines += [f"Disallow: {path}" for path in site.disallow]
    if site.crawl_delay_s is not None:
        lines.append(f"Crawl-delay: {site.crawl_delay_s:g}")
    return "\n".join(lines) + "\n"


def _free_ports_on(addresses: list[str]) -> tuple[int, int]:
    """Two ports free on every address (the HTTP and HTTPS ports of all hosts)."""
    for _ in range(PORT_ATTEMPTS):
        ports = free_ports(2, addresses[0])
        if all(_bindable(a, p) for a in addresses[1:] for p in ports):
            return ports[0], ports[1]
    raise OSError(f"no two TCP ports free on all of {addresses[0]}..{addresses[-1]}")


def _bindable(address: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


def build_web(tmp: Path, sites: list[Site], *, nginx: str | None = None) -> RealWeb:
    """Certificates, robots files, seeds and nginx.conf for `sites` plus the bad hosts, under `tmp`."""
    nginx = nginx or find_binary("nginx")
    if nginx is None:
        raise FileNotFoundError("nginx not installed (Debian package nginx; scripts/test.sh installs it)")
    tmp = tmp.resolve()
    hosts = [Host(f"{ADDRESS_PREFIX}{FIRST_SITE_OCTET + i}", site=s) for i, s in enumerate(sites)]
    hosts += [Host(f"{ADDRESS_PREFIX}{BAD_CERT_FIRST_OCTET + i}", bad=b) for i, b in enumerate(BAD_HOSTS)]
    http_port, https_port = _free_ports_on([h.address for h in hosts])
    ca = certs.CertAuthority("realsites test CA")
    cert_dir, robots_dir, bad_root = tmp / "certs", tmp / "robots", tmp / "bad-root"
    bad_root.mkdir(parents=True, exist_ok=True)
    (bad_root / "index.html").write_text("<!doctype html><title>never</title><p>A crawler that reads this accepted "
                                         "a certificate it should have refused.\n")
    robots_dir.mkdir(exist_ok=True)
    web = RealWeb(tmp=tmp, hosts=hosts, http_port=http_port, https_port=https_port,
                  ca_file=ca.write_ca(cert_dir / "ca.pem"), seeds_file=tmp / "seeds.txt",
                  access_log=tmp / "access.log.jsonl", error_log=tmp / "nginx-error.log", conf=tmp / "nginx.conf",
                  nginx=nginx)
    servers = []
    for host in hosts:
        if host.site is not None:
            pair = ca.issue([host.address])
        elif host.bad.name == "self-signed":
            pair = certs.self_signed([host.address])
        elif host.bad.name == "expired":
            pair = ca.issue([host.address], expired=True)
        else:
            pair = ca.issue([WRONG_NAME])
        files = certs.write(cert_dir, host.address, pair)
        servers.append(_server_blocks(web, host, files, robots_dir, bad_root))
    web.seeds_file.write_text("".join(web.url(h.address, e, "http") + "\n" for h in web.sites for e in h.site.entries)
                              + "".join(web.url(h.address, "/") + "\n" for h in web.bad_hosts))
    web.conf.write_text(_nginx_conf(web, servers))
    return web


def _server_blocks(web: RealWeb, host: Host, files: certs.CertFiles, robots_dir: Path, bad_root: Path) -> str:
    tls = [f"        listen {host.address}:{web.https_port} ssl;",
           f"        ssl_certificate {files.cert};",
           f"        ssl_certificate_key {files.key};"]
    if host.bad is not None:
        return "\n".join(["    server {", *tls, f"        root {bad_root};", "    }"])
    robots = robots_dir / f"{host.site.name}.txt"
    robots.write_text(robots_txt(host.site))
    return "\n".join([
        "    server {",
        f"        listen {host.address}:{web.http_port};",
        f"        return 301 https://$host:{web.https_port}$request_uri;",
        "    }",
        "    server {",
        *tls,
        f"        root {host.site.root};",
        f"        location = {ROBOTS_PATH} {{ alias {robots}; }}",
        "    }",
    ])


def _nginx_conf(web: RealWeb, servers: list[str]) -> str:
    tmp = web.tmp / "nginx-temp"
    tmp.mkdir(exist_ok=True)
    types = f"include {NGINX_MIME_TYPES};" if NGINX_MIME_TYPES.is_file() else f"types {{ {FALLBACK_TYPES} }}"
    lines = [
        "# Real sites over HTTPS for the crawler's tests (tests/integration/realsites.py).",
        "daemon off;",
        "master_process on;",
        "worker_processes 1;",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        lines.append("user root;")          # workers must read the run's files under a private tmp
    lines += [
        f"pid {web.tmp / 'nginx.pid'};",
        f"error_log {web.error_log} warn;",
        "events { worker_connections 1024; }",
        "http {",
        f"    {types}",
        "    default_type application/octet-stream;",
        "    sendfile on;",
        "    server_tokens off;",
        f"    client_body_temp_path {tmp}/client_body;",
        f"    proxy_temp_path {tmp}/proxy;",
        f"    fastcgi_temp_path {tmp}/fastcgi;",
        f"    uwsgi_temp_path {tmp}/uwsgi;",
        f"    scgi_temp_path {tmp}/scgi;",
        f"    log_format realsites escape=json {LOG_FORMAT};",
        f"    access_log {web.access_log} realsites;",
        *servers,
        "}",
    ]
    return "\n".join(lines) + "\n"


# --- the access log ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Hit:
    """One request as nginx logged it."""

    host: str
    scheme: str
    port: int
    path: str
    status: int
    start: float
    end: float
    content_type: str
    peer: str
    ua: str
    method: str = "GET"
    bytes: int = 0

    def https_url(self, web: RealWeb) -> str:
        """The URL in its https form: http and https of one path are one resource."""
        return web.url(self.host, self.path)

    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"

    def request(self) -> Request:
        """As crawler/testweb/audit.py's record (host without port: http and https of a host are one host)."""
        return Request(host=self.host, path=self.path, start=self.start, end=self.end, status=self.status,
                       peer=self.peer, bytes=self.bytes, method=self.method, ua=self.ua)


def read_log(path: Path, offset: int = 0) -> list[Hit]:
    """The requests logged from byte `offset` on (a torn last line is skipped)."""
    hits = []
    if not path.exists():
        return hits
    with open(path, "rb") as f:
        f.seek(offset)
        for raw in f:
            try:
                d = json.loads(raw)
            except ValueError:
                continue
            end = float(d["msec"])
            hits.append(Hit(host=str(d["host"]).lower(), scheme=d["scheme"], port=int(d["port"]), path=d["path"],
                            status=int(d["status"]), start=end - float(d["request_time"]), end=end,
                            content_type=d.get("type", ""), peer=d.get("peer", ""), ua=d.get("ua", ""),
                            method=d.get("method", "GET"), bytes=int(d.get("bytes") or 0)))
    return hits


def by_crawler(hits: Iterable[Hit]) -> list[Hit]:
    return [h for h in hits if h.ua == CRAWLER_UA]


def by_wget(hits: Iterable[Hit]) -> list[Hit]:
    return [h for h in hits if h.ua.startswith(WGET_UA_PREFIX)]



# --- judging ---------------------------------------------------------------------------------------------------

KINDS = ("page", "stylesheet", "script", "image", "robots", "other")
_EXT_KINDS = {".html": "page", ".htm": "page", ".css": "stylesheet", ".js": "script", ".png": "image",
              ".gif": "image", ".jpg": "image", ".jpeg": "image", ".svg": "image", ".ico": "image"}


def kind_of(path: str, content_type: str = "") -> str:
    """What a URL is, for reporting misses: by its extension, else by the content type the server sent
    (a missing image's 404 page is text/html, yet what was linked is an image)."""
    bare = path.split("?", 1)[0]
    if bare == ROBOTS_PATH:
        return "robots"
    dot = bare.rfind(".")
    if dot > bare.rfind("/") and bare[dot:].lower() in _EXT_KINDS:
        return _EXT_KINDS[bare[dot:].lower()]
    ctype = content_type.split(";", 1)[0].strip().lower()
    if ctype in ("text/html", "application/xhtml+xml"):
        return "page"
    if ctype == "text/css":
        return "stylesheet"
    if "javascript" in ctype:
        return "script"
    if ctype.startswith("image/"):
        return "image"
    return "page" if bare.endswith("/") else "other"


@dataclass
class SiteRecall:
    site: str
    reference: int                               # URLs wget requested (https form)
    found: int                                   # of those, requested by the crawler too
    misses: dict[str, list[str]] = field(default_factory=dict)   # kind -> missed URLs
    extra: int = 0                               # URLs the crawler requested that wget did not

    @property
    def recall(self) -> float:
        return self.found / self.reference if self.reference else 1.0

    def line(self) -> str:
        kinds = ", ".join(f"{k} {len(v)}" for k, v in sorted(self.misses.items())) or "none"
        return (f"{self.site:18s} recall {self.recall:.4f} ({self.found}/{self.reference}), "
                f"crawler-only {self.extra}, missed by kind: {kinds}")


def recall_by_site(web: RealWeb, reference: list[Hit], crawl: list[Hit]) -> dict[str, SiteRecall]:
    """Per site: which of the URLs wget requested the crawler requested too, by https form."""
    ref_urls: dict[str, dict[str, Hit]] = defaultdict(dict)
    got_urls: dict[str, set[str]] = defaultdict(set)
    for hit in reference:
        host = web.host(hit.host)
        if host is not None and host.site is not None:
            ref_urls[host.site.name].setdefault(hit.https_url(web), hit)
    for hit in crawl:
        host = web.host(hit.host)
        if host is not None and host.site is not None:
            got_urls[host.site.name].add(hit.https_url(web))
    out = {}
    for host in web.sites:
        name = host.site.name
        ref, got = ref_urls.get(name, {}), got_urls.get(name, set())
        misses: dict[str, list[str]] = defaultdict(list)
        for url, hit in sorted(ref.items()):
            if url not in got:
                misses[kind_of(hit.path, hit.content_type)].append(url)
        out[name] = SiteRecall(name, len(ref), len(ref) - sum(map(len, misses.values())), dict(misses),
                               len(got - set(ref)))
    return out


def repeated(hits: Iterable[Hit]) -> dict[str, int]:
    """URLs (scheme, host, port, path: exactly as sent) requested more than once, with the count."""
    counts = Counter(h.url() for h in hits)
    return {url: n for url, n in counts.items() if n > 1}


def in_flight_together(hits: Iterable[Hit]) -> list:
    """Pairs of requests to one host (http and https of an address are one host) whose times overlap."""
    return overlaps(h.request() for h in hits)


def disallowed(web: RealWeb, hits: Iterable[Hit]) -> list[str]:
    """Requests to a path the host's robots.txt disallows (any product token: the rules are for `*`)."""
    parsers = {h.address: Protego.parse(robots_txt(h.site)) for h in web.sites}
    out = []
    for hit in hits:
        parser = parsers.get(hit.host)
        if parser is not None and hit.path != ROBOTS_PATH and not parser.can_fetch(hit.https_url(web), "*"):
            out.append(hit.url())
    return out


def crawl_delay_shortfalls(web: RealWeb, hits: Iterable[Hit]) -> list[str]:
    """Requests to a host with a Crawl-delay that came sooner than it after the previous one ended.

    The delay binds from the first robots.txt the host answered with 2xx on: the requests
    before it (an http:// robots.txt and its redirect) are made before the delay is known. A
    crawler that never read robots.txt is held to the delay from its first request.
    """
    delays = {h.address: h.site.crawl_delay_s for h in web.sites if h.site.crawl_delay_s}
    per_host: dict[str, list[Hit]] = defaultdict(list)
    for hit in hits:
        if hit.host in delays:
            per_host[hit.host].append(hit)
    out = []
    for address, rs in per_host.items():
        rs.sort(key=lambda h: (h.start, h.end))
        known = next((h.end for h in rs if h.path == ROBOTS_PATH and 200 <= h.status < 300), rs[0].start)
        need = delays[address] - END_LAG_TOLERANCE_S - NGINX_TIME_RESOLUTION_S
        for prev, nxt in zip(rs, rs[1:]):
            if prev.end >= known and nxt.start - prev.end < need:
                out.append(f"{address}: {prev.url()} -> {nxt.url()}: {nxt.start - prev.end:.3f}s "
                           f"< Crawl-delay {delays[address]:g}s")
    return out


# --- running the two crawlers ------------------------------------------------------------------------------------

@dataclass
class Run:
    """One crawler process: how it ended and what it cost (its own rusage, children and threads included)."""

    tool: str
    code: int
    wall_s: float
    cpu_s: float
    user_s: float
    sys_s: float
    max_rss_kib: int | None                     # None: GNU time is absent and no exact figure could be had
    stdout: Path
    stderr: Path
    timed_out: bool = False

    def tail(self, chars: int = 3000) -> str:
        return self.stderr.read_text(errors="replace")[-chars:]


GNU_TIME = Path("/usr/bin/time")
"""Peak RSS comes from GNU time's %M. A process forked from this one keeps this one's RSS high-water
mark across exec (Linux carries it in the signal struct), so a child's own ru_maxrss would say
~70 MiB for a 5 MiB wget; forked from the small `time` process, the figure is the tool's."""


def run_child(tool: str, argv: list[str], out_dir: Path, *, timeout_s: float,
              env: dict[str, str | None] | None = None) -> Run:
    """Run argv to its end (killed at timeout_s) with stdout/stderr in out_dir; measure it by wait4.

    The child leads its own process group, so a timeout kills the tool and whatever it started.
    `env` adds to this process's environment; a None value removes the variable.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    stdout, stderr, rss = (out_dir / f"{tool}.{ext}" for ext in ("stdout", "stderr", "rss"))
    if GNU_TIME.is_file():
        argv = [str(GNU_TIME), "--quiet", "-f", "%M", "-o", str(rss), *argv]
    full_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    timed_out = False
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=full_env, cwd=out_dir,
                                start_new_session=True)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > timeout_s:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(POLL_S)
        wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)   # reaped here: tell Popen, so it never waits again
    try:
        max_rss_kib = int(rss.read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        max_rss_kib = None
    return Run(tool, proc.returncode, wall, usage.ru_utime + usage.ru_stime, usage.ru_utime, usage.ru_stime,
               max_rss_kib, stdout, stderr, timed_out)


WGET_TIMEOUT_S = 10
"""wget's network timeout (-T); it retries nothing (--tries=1): the sites are local and never flaky."""


def wget_argv(web: RealWeb, out_dir: Path, *, warc: bool = False, wget: str = "wget",
              seeds_file: Path | None = None, wait_s: float = 0.0) -> list[str]:
    """GNU wget as the reference: recursive, unlimited depth, page requisites, robots.txt obeyed.

    Without -H it never leaves a seed's host, and it trusts the run's CA; no
    ~/.wgetrc or /etc/wgetrc changes what it does. `warc`: also write a WARC file
    (gzip per record, as the crawler's warcio does) for a fair CPU comparison.
    `seeds_file`: instead of the web's own (every site and the bad hosts). `wait_s`: wget's --wait between
    requests (wget crawls one request after another, so this spaces them as politeness spaces a crawler's).
    """
    argv = [wget, "--no-config", "-r", "-l", "inf", "-p", "-e", "robots=on", f"--ca-certificate={web.ca_file}",
            "--tries=1", f"--timeout={WGET_TIMEOUT_S}", "-nv", "-o", str(out_dir / "wget.log"),
            "-P", str(out_dir / "files"), "-i", str(seeds_file or web.seeds_file)]
    if warc:
        argv.append(f"--warc-file={out_dir / 'wget'}")
    if wait_s:
        argv.append(f"--wait={wait_s:g}")
    return argv


def run_wget(web: RealWeb, out_dir: Path, *, warc: bool = False, timeout_s: float = 300.0,
             seeds_file: Path | None = None, wait_s: float = 0.0, tool: str | None = None) -> Run:
    wget = shutil.which("wget")
    if wget is None:
        raise FileNotFoundError("wget not installed (Debian package wget; scripts/test.sh installs it)")
    return run_child(tool or ("wget-warc" if warc else "wget"),
                     wget_argv(web, out_dir, warc=warc, wget=wget, seeds_file=seeds_file, wait_s=wait_s), out_dir,
                     timeout_s=timeout_s)


def crawler_config(web: RealWeb, data_dir: Path, overrides: dict | None = None,
                   seeds_file: Path | None = None) -> dict:
    """One node at the defaults, but for what this local web needs; `overrides` merge per top-level section."""
    config: dict = one_node_config(
        data_dir, seeds_file=seeds_file or web.seeds_file,
        # The hosts are loopback addresses, which the private-network guard refuses by default.
        fetch={"allow_private_networks": True},
        # Like wget without -H: never leave the seeds' hosts (pages link to the real web, unreachable here).
        filter={"allow_domains": [h.address for h in web.hosts]},
    )
    config["fetch"]["tls"] = {"ca_file": str(web.ca_file)}        # the private CA, as an operator gives it
    for key, value in (overrides or {}).items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


def run_crawler(web: RealWeb, out_dir: Path, *, overrides: dict | None = None, timeout_s: float = 600.0,
                tool: str = "crawler", seeds_file: Path | None = None, wrapper: list[str] | None = None,
                env: dict[str, str | None] | None = None) -> Run:
    """`python -m crawler run` on one node. `wrapper` goes before the interpreter (a profiler:
    `["py-spy", "record", ..., "--"]`, or `[python, "-m", "cProfile", "-o", FILE]` with `python` then left out);
    `env` adds to the child's environment."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config_path = out_dir / "crawl.yaml"
    config = crawler_config(web, out_dir / "data", overrides, seeds_file)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
           **(env or {})}
    command = ["-m", "crawler", "run", "-c", str(config_path)]
    if wrapper and wrapper[0] == sys.executable:
        argv = [*wrapper, *command]
    else:
        argv = [*(wrapper or []), sys.executable, *command]
    return run_child(tool, argv, out_dir, timeout_s=timeout_s, env=env)


def crawl_log(out_dir: Path) -> list[dict]:
    """The crawler's data_dir/crawl.log.jsonl of a run_crawler() run (node 0)."""
    path = out_dir / "data" / "crawl.log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summary(run: Run) -> dict:
    """The crawler's last stdout line (its JSON summary), or {} when it printed none."""
    lines = run.stdout.read_text(errors="replace").strip().splitlines()
    try:
        return json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}

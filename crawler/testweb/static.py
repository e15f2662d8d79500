"""Static export of the test web, and an nginx.conf that serves it: the real-world server case.

`export_static(web, root_dir, port)` writes, for every ordinary host (and the
`norobots` and `robots500` hosts), the exact bytes the aiohttp server would
send: pages (a path ending in `/` becomes `index.html`), images, stylesheets,
`robots.txt`, under `root_dir/<host>/`. Redirects and the 500 robots.txt
cannot be files; they go to `root_dir/testweb-static.json`, from which
`nginx_conf(...)` writes `location = /r/N { return 301 "..."; }` blocks.
Missing pages are simply absent (nginx answers 404).

The hostile hosts (slow, bad, trap) are left out: nginx has no stall or gzip
bomb, and a real server should not be made to fake them. A default server
answers 404 to everything for them, robots.txt included (allow all), so the
crawl stays computable: `expected_crawl(web, port, rules, static=True)`.

HTTPS (a web with HTTPS hosts, exported for a `tls_port`): the certificates
are written under `ROOT/tls/` and the CA's to `ROOT/ca.crt` (tls.py), and
nginx gets `ssl` server blocks on the TLS port: an HTTPS-only host's content
there (421 on the HTTP port), a redirecting host's content there and
`return 301 https://host:TLS_PORT$request_uri` on the HTTP port, the
bad-certificate hosts with their own certificates (nginx picks by SNI), 421
for a plain host asked over HTTPS: what the aiohttp server answers.

nginx runs in the foreground from the generated file, with every path (pid,
temp dirs, logs) under directories the caller chooses:

    nginx -c ROOT/nginx.conf -p ROOT -e ROOT/nginx-error.log

and logs one JSON line per request with `$msec` (end, ms resolution),
`$request_time` (duration) and `$scheme`, so audit.py derives start = end -
duration. `prepare_nginx(...)` does all of it (export, nginx.conf, the
static manifest, seeds.txt) for a test that crawls the web under nginx.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .certs import CertAuthority
from .manifest import CrawlRules, WebManifest, expected_crawl
from .model import REMOTE_ROLES, TLS_BAD_ROLES, Kind, Role, Tls, Web
from .pages import APP_JS_PATH, HTTP, HTTPS, Renderer
from .tls import CA_FILE, write_certs

EXPORTED_ROLES = frozenset({Role.ORDINARY, Role.NOROBOTS, Role.ROBOTS500, *TLS_BAD_ROLES})
"""Hosts written to disk; the others answer 404 under nginx."""
TLS_DIR = "tls"
"""Directory (under the export root) of the certificates and keys nginx presents."""
_DEFAULT_RULES = CrawlRules()
SIDECAR = "testweb-static.json"
"""What nginx_conf needs besides the files: hosts, redirects, robots status."""
INDEX_FILE = "index.html"


@dataclass(frozen=True)
class StaticExport:
    root: Path
    port: int
    hosts: list[str]
    files: int
    bytes: int
    tls_port: int = 0
    ca_file: Path | None = None
    """The CA certificate a client must trust for the HTTPS hosts (None: the web has none)."""


def export_static(web: Web, root_dir: str | Path, port: int, renderer: Renderer | None = None, *,
                  tls_port: int = 0, ca: CertAuthority | None = None) -> StaticExport:
    """Write the exportable hosts' resources under `root_dir/<host>/` for a server on `port` (and,
    for a web with HTTPS hosts, on `tls_port`, with their certificates issued by `ca` or a new CA)."""
    if not 0 < port < 65536:
        raise ValueError(f"port must be the port nginx will listen on (1..65535), got {port}")
    if web.has_tls and not 0 < tls_port < 65536:
        raise ValueError(f"the web has HTTPS hosts: give the TLS port nginx will listen on (1..65535), got {tls_port}")
    root = Path(root_dir).resolve()
    renderer = renderer or Renderer(web, cache_entries=1)
    by_host: dict[int, list[int]] = {}
    for uid, h in enumerate(web.url_host.tolist()):
        by_host.setdefault(h, []).append(uid)
    hosts_meta: list[dict[str, Any]] = []
    files = total = 0
    for host in web.hosts:
        if host.role not in EXPORTED_ROLES:
            continue
        hdir = root / host.name
        scheme = HTTPS if host.content_https else HTTP
        redirects = []
        for uid in by_host.get(host.index, []):
            path = web.url_path[uid]
            kind = int(web.url_kind[uid])
            if kind == Kind.REDIRECT:
                r = web.redirects[uid]
                redirects.append([path, r.status, renderer.location(uid, port, tls_port)])
                continue
            if kind not in (Kind.PAGE, Kind.IMAGE, Kind.CSS):
                continue
            body = renderer.respond(host, path, port, tls_port, scheme).body
            total += _write(hdir, path, body)
            files += 1
        robots = renderer.robots(host)
        if host.robots.status == 200:
            total += _write(hdir, "/robots.txt", robots.body)
            files += 1
        if host.role is Role.ORDINARY:
            total += _write(hdir, APP_JS_PATH, renderer.respond(host, APP_JS_PATH, port, tls_port, scheme).body)
            files += 1
        hosts_meta.append({"name": host.name, "robots_status": host.robots.status, "redirects": redirects})
        if host.tls is not Tls.NONE:
            hosts_meta[-1]["tls"] = host.tls.name.lower()
    meta: dict = {"port": port, "hosts": hosts_meta}
    ca_file = None
    if web.has_tls:
        certs = write_certs(web, root / TLS_DIR, ca, root / CA_FILE)
        ca_file = certs.ca_file
        for h in hosts_meta:
            own = certs.by_host.get(h["name"])
            if own is not None:
                h["cert"], h["key"] = str(own.cert), str(own.key)
        served = [h for h in web.hosts if h.role not in REMOTE_ROLES]
        meta["tls"] = {
            "port": tls_port, "ca_file": str(ca_file), "cert": str(certs.shared.cert), "key": str(certs.shared.key),
            # Names asked in a scheme they do not serve: 421 Misdirected Request, as the aiohttp server answers.
            "misdirected_http": [h.name for h in served if h.tls is Tls.ONLY],
            "misdirected_https": [h.name for h in served if h.tls is Tls.NONE],
        }
    (root / SIDECAR).write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return StaticExport(root, port, [h["name"] for h in hosts_meta], files, total, tls_port if web.has_tls else 0,
                        ca_file)


def _write(hdir: Path, path: str, body: bytes) -> int:
    rel = path.lstrip("/")
    if not rel or rel.endswith("/"):
        rel += INDEX_FILE
    target = hdir / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(body)
    return len(body)


def nginx_conf(root_dir: str | Path, port: int, access_log_path: str | Path, error_log_path: str | Path,
               pid_path: str | Path, *, bind: str = "127.0.0.1", user_root: bool | None = None) -> str:
    """A complete nginx.conf serving the export in `root_dir` on bind:port (foreground, one worker),
    and its HTTPS hosts on bind:TLS_PORT (the port the export was written for).

    `user_root` adds `user root;` (needed when nginx is started as root so workers can read
    the files wherever they are); default: when this process runs as root.
    """
    root = Path(root_dir).resolve()
    meta = json.loads((root / SIDECAR).read_text(encoding="utf-8"))
    if meta["port"] != port:
        raise ValueError(f"{root} was exported for port {meta['port']}, not {port}: links would point elsewhere")
    tls = meta.get("tls")
    if user_root is None:
        user_root = hasattr(os, "geteuid") and os.geteuid() == 0
    tmp = root / ".nginx"
    lines = [
        "# nginx.conf for the static export of the crawler's synthetic test web (crawler/testweb/static.py).",
        f"# Run: nginx -c {root}/nginx.conf -p {root} -e {error_log_path}",
        "daemon off;",
        "master_process on;",
        "worker_processes 1;",
    ]
    if user_root:
        lines.append("user root;")
    lines += [
        f"pid {pid_path};",
        f"error_log {error_log_path} warn;",
        "events { worker_connections 1024; }",
        "http {",
        "    types { text/html html; text/css css; image/png png; text/plain txt; application/javascript js; }",
        "    default_type application/octet-stream;",
        "    charset utf-8;",
        "    charset_types text/html text/plain text/css application/javascript;",
        "    sendfile on;",
        "    keepalive_timeout 65;",
        "    keepalive_requests 100000;",
        "    server_tokens off;",
        "    absolute_redirect off;",
        f"    client_body_temp_path {tmp}/client_body;",
        f"    proxy_temp_path {tmp}/proxy;",
        f"    fastcgi_temp_path {tmp}/fastcgi;",
        f"    uwsgi_temp_path {tmp}/uwsgi;",
        f"    scgi_temp_path {tmp}/scgi;",
        "    log_format testweb escape=json '{\"host\":\"$host\",\"path\":\"$request_uri\","
        "\"method\":\"$request_method\","
        "\"status\":$status,\"msec\":$msec,\"request_time\":$request_time,\"bytes\":$body_bytes_sent,"
        "\"peer\":\"$remote_addr\",\"ua\":\"$http_user_agent\",\"scheme\":\"$scheme\"}';",
        f"    access_log {access_log_path} testweb;",
        "    server {",
        f"        listen {bind}:{port} default_server;",
        "        server_name _;",
        "        location / { return 404; }",
        "    }",
    ]
    if tls is not None:
        shared = [f"        ssl_certificate {tls['cert']};", f"        ssl_certificate_key {tls['key']};"]
        lines += ["    server {", f"        listen {bind}:{tls['port']} ssl default_server;", "        server_name _;",
                  *shared, "        location / { return 404; }", "    }"]
        for scheme_port, names, certs in ((f"{port}", tls["misdirected_http"], []),
                                          (f"{tls['port']} ssl", tls["misdirected_https"], shared)):
            if names:
                lines += ["    server {", f"        listen {bind}:{scheme_port};",
                          f"        server_name {' '.join(names)};", *certs, "        return 421;", "    }"]
    for host in meta["hosts"]:
        mode = host.get("tls", "none")
        if mode == "redirect":
            lines += ["    server {", f"        listen {bind}:{port};", f"        server_name {host['name']};",
                      f"        return 301 https://{host['name']}:{tls['port']}$request_uri;", "    }"]
        if mode == "none":
            listen = [f"        listen {bind}:{port};"]
        else:
            own = (shared if "cert" not in host else
                   [f"        ssl_certificate {host['cert']};", f"        ssl_certificate_key {host['key']};"])
            listen = [f"        listen {bind}:{tls['port']} ssl;", *own]
        lines += [
            "    server {",
            *listen,
            f"        server_name {host['name']};",
            f"        root {root / host['name']};",
            "        location ~ /$ { try_files ${uri}" + INDEX_FILE + " =404; }",
            "        location / { try_files $uri =404; }",
        ]
        if host["robots_status"] >= 500:
            lines.append(f"        location = /robots.txt {{ return {host['robots_status']}; }}")
        for path, status, location in host["redirects"]:
            lines.append(f'        location = {path} {{ return {status} "{location}"; }}')
        lines.append("    }")
    lines.append("}")
    (tmp).mkdir(parents=True, exist_ok=True)
    return "\n".join(lines) + "\n"


def nginx_command(conf_path: str | Path, prefix: str | Path, error_log_path: str | Path,
                  nginx: str = "nginx") -> list[str]:
    """argv that runs nginx in the foreground with everything under `prefix`."""
    return [nginx, "-c", str(conf_path), "-p", str(prefix), "-e", str(error_log_path)]


@dataclass(frozen=True)
class NginxSite:
    """Everything a test needs to crawl the static export under nginx (see `prepare_nginx`)."""

    root: Path
    conf: Path
    command: list[str]
    """argv of nginx in the foreground (stop it by its PID)."""
    port: int
    tls_port: int
    """0 when the web has no HTTPS host."""
    ca_file: Path | None
    """What the crawler's `fetch.tls.ca_file` must name (None: no HTTPS host)."""
    access_log: Path
    error_log: Path
    pid_file: Path
    manifest: WebManifest
    """The static manifest for the rules given."""
    seeds_file: Path


def prepare_nginx(web: Web, root_dir: str | Path, logs_dir: str | Path, port: int, *, tls_port: int = 0,
                  rules: CrawlRules = _DEFAULT_RULES, nginx: str = "nginx", bind: str = "127.0.0.1",
                  ca: CertAuthority | None = None) -> NginxSite:
    """Export `web` to `root_dir`, write its nginx.conf (logs and pid under `logs_dir`), the static
    manifest for `rules` and `logs_dir/seeds.txt`: what a crawl of the web under a real nginx needs,
    HTTPS included when the web has HTTPS hosts (then `tls_port` is required)."""
    export = export_static(web, root_dir, port, tls_port=tls_port, ca=ca)
    logs = Path(logs_dir).resolve()
    logs.mkdir(parents=True, exist_ok=True)
    access, error, pid = logs / "access.log.jsonl", logs / "error.log", logs / "nginx.pid"
    conf = export.root / "nginx.conf"
    conf.write_text(nginx_conf(export.root, port, access, error, pid, bind=bind), encoding="utf-8")
    manifest = expected_crawl(web, port, rules, static=True, tls_port=export.tls_port)
    seeds = logs / "seeds.txt"
    seeds.write_text("\n".join(manifest.seeds) + "\n", encoding="utf-8")
    return NginxSite(export.root, conf, nginx_command(conf, export.root, error, nginx=nginx), port, export.tls_port,
                     export.ca_file, access, error, pid, manifest, seeds)

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

nginx runs in the foreground from the generated file, with every path (pid,
temp dirs, logs) under directories the caller chooses:

    nginx -c ROOT/nginx.conf -p ROOT -e ROOT/nginx-error.log

and logs one JSON line per request with `$msec` (end, ms resolution) and
`$request_time` (duration), so audit.py derives start = end - duration.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .model import Kind, Role, Web
from .pages import APP_JS_PATH, Renderer

EXPORTED_ROLES = frozenset({Role.ORDINARY, Role.NOROBOTS, Role.ROBOTS500})
"""Hosts written to disk; the others answer 404 under nginx."""
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


def export_static(web: Web, root_dir: str | Path, port: int, renderer: Renderer | None = None) -> StaticExport:
    """Write the exportable hosts' resources under `root_dir/<host>/` for a server on `port`."""
    if not 0 < port < 65536:
        raise ValueError(f"port must be the port nginx will listen on (1..65535), got {port}")
    root = Path(root_dir).resolve()
    renderer = renderer or Renderer(web, cache_entries=1)
    by_host: dict[int, list[int]] = {}
    for uid, h in enumerate(web.url_host.tolist()):
        by_host.setdefault(h, []).append(uid)
    hosts_meta = []
    files = total = 0
    for host in web.hosts:
        if host.role not in EXPORTED_ROLES:
            continue
        hdir = root / host.name
        redirects = []
        for uid in by_host.get(host.index, []):
            path = web.url_path[uid]
            kind = int(web.url_kind[uid])
            if kind == Kind.REDIRECT:
                r = web.redirects[uid]
                redirects.append([path, r.status, renderer.location(uid, port)])
                continue
            if kind not in (Kind.PAGE, Kind.IMAGE, Kind.CSS):
                continue
            body = renderer.respond(host, path, port).body
            total += _write(hdir, path, body)
            files += 1
        robots = renderer.robots(host)
        if host.robots.status == 200:
            total += _write(hdir, "/robots.txt", robots.body)
            files += 1
        if host.role is Role.ORDINARY:
            total += _write(hdir, APP_JS_PATH, renderer.respond(host, APP_JS_PATH, port).body)
            files += 1
        hosts_meta.append({"name": host.name, "robots_status": host.robots.status, "redirects": redirects})
    (root / SIDECAR).write_text(json.dumps({"port": port, "hosts": hosts_meta}, indent=1), encoding="utf-8")
    return StaticExport(root, port, [h["name"] for h in hosts_meta], files, total)


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
    """A complete nginx.conf serving the export in `root_dir` on bind:port (foreground, one worker).

    `user_root` adds `user root;` (needed when nginx is started as root so workers can read
    the files wherever they are); default: when this process runs as root.
    """
    root = Path(root_dir).resolve()
    meta = json.loads((root / SIDECAR).read_text(encoding="utf-8"))
    if meta["port"] != port:
        raise ValueError(f"{root} was exported for port {meta['port']}, not {port}: links would point elsewhere")
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
        "    log_format testweb escape=json '{\"host\":\"$host\",\"path\":\"$request_uri\",\"method\":\"$request_method\","
        "\"status\":$status,\"msec\":$msec,\"request_time\":$request_time,\"bytes\":$body_bytes_sent,"
        "\"peer\":\"$remote_addr\",\"ua\":\"$http_user_agent\"}';",
        f"    access_log {access_log_path} testweb;",
        "    server {",
        f"        listen {bind}:{port} default_server;",
        "        server_name _;",
        "        location / { return 404; }",
        "    }",
    ]
    for host in meta["hosts"]:
        lines += [
            "    server {",
            f"        listen {bind}:{port};",
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

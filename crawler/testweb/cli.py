"""`crawler testweb`: serve the synthetic web, write its manifest and seeds.

    crawler testweb --port 0 --out DIR [--hosts 100 --pages 5000 --seed 1 ...]

binds first (port 0 = any free port), then writes `DIR/manifest.json` (the
expected crawl for the port actually bound and the rules given by
`--max-path-depth`/`--max-repeated-segments`/...), `DIR/seeds.txt`, logs
requests to `DIR/access.log.jsonl`, prints ONE JSON line to stdout

    {"port": 41234, "seeds": "DIR/seeds.txt", "manifest": "DIR/manifest.json",
     "access_log": "DIR/access.log.jsonl", "pid": 1234, ...}

and serves until SIGINT or SIGTERM, then exits 0. Everything else goes to
stderr. With `--quality-exponent S` it also writes `DIR/quality.tsv`, the page
quality oracle (quality.py), and names it in the ready line (`"quality"`).
With `--export-static ROOT --port P` it instead writes the static
export and an nginx.conf for port P (and the static manifest) and exits.

HTTPS (`--https-share`, `--https-redirect-share`, `--tls-bad-hosts`; all off
by default): the server also listens on `--tls-port` (0 = any free port) and
writes the CA certificate of its certificates to `DIR/ca.crt`; the ready line
gains `"tls_port"` and `"ca_file"`, and a crawler trusts the web with
`fetch.tls.ca_file: DIR/ca.crt`. The static export needs `--tls-port P2`
(the port nginx will listen on for HTTPS) and writes `ROOT/ca.crt`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

from .build import build_web
from .manifest import CrawlRules, expected_crawl
from .model import WebParams
from .pages import DEFAULT_CACHE_ENTRIES
from .quality import ORACLE_NAME, page_quality, write_oracle, zipf_quality
from .server import TestWebServer
from .static import export_static, nginx_command, nginx_conf

_DEFAULTS = WebParams()
_RULES = CrawlRules()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crawler testweb", description="Serve the synthetic test web "
                                "(many virtual hosts on one port) and write the manifest of a correct crawl.")
    where = p.add_argument_group("where")
    where.add_argument("--port", type=int, default=0, help="TCP port (0 = any free port; printed on stdout)")
    where.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    where.add_argument("--out", required=True, help="directory for manifest.json, seeds.txt, access.log.jsonl")
    where.add_argument("--reuse-port", action="store_true", help="SO_REUSEPORT, to run several servers on one port")
    where.add_argument("--tls-port", type=int, default=0,
                       help="TCP port of the HTTPS hosts (0 = any free port; printed on stdout); "
                            "used when the web has HTTPS hosts")
    web = p.add_argument_group("the web")
    web.add_argument("--seed", type=int, default=_DEFAULTS.seed)
    web.add_argument("--hosts", type=int, default=_DEFAULTS.hosts, help="ordinary hosts (default %(default)s)")
    web.add_argument("--pages", type=int, default=_DEFAULTS.pages, help="HTML pages on them (default %(default)s)")
    web.add_argument("--domain", default=_DEFAULTS.domain)
    web.add_argument("--seed-hosts", type=int, default=_DEFAULTS.seed_hosts)
    web.add_argument("--crawl-delay-hosts", type=float, default=_DEFAULTS.crawl_delay_hosts,
                     help="share of hosts with a robots Crawl-delay (default %(default)s)")
    web.add_argument("--no-slow-host", action="store_true")
    web.add_argument("--slow-delay-s", type=float, default=_DEFAULTS.slow_delay_s)
    web.add_argument("--no-bad-host", action="store_true")
    web.add_argument("--no-trap", action="store_true")
    web.add_argument("--private-links", action="store_true",
                     help="link private addresses (only for crawls with the private-network guard on)")
    web.add_argument("--no-nxdomain-links", action="store_true")
    web.add_argument("--robots-error-answers", type=int, default=WebParams.robots_error_answers,
                     help="times robots500's robots.txt answers 500 before it answers (0 = always 500)")
    web.add_argument("--stall-s", type=float, default=_DEFAULTS.stall_s)
    web.add_argument("--endless-max-s", type=float, default=_DEFAULTS.endless_max_s)
    web.add_argument("--big-body-bytes", type=int, default=_DEFAULTS.big_body_bytes)
    web.add_argument("--gzip-bomb-bytes", type=int, default=_DEFAULTS.gzip_bomb_bytes)
    https = p.add_argument_group("HTTPS (default: none; the CA certificate goes to DIR/ca.crt)")
    https.add_argument("--https-share", type=float, default=_DEFAULTS.https_share,
                       help="share of ordinary hosts served over HTTPS only (default %(default)s)")
    https.add_argument("--https-redirect-share", type=float, default=_DEFAULTS.https_redirect_share,
                       help="share of ordinary hosts redirecting http:// to https:// with 301 (default %(default)s)")
    https.add_argument("--tls-bad-hosts", action="store_true",
                       help="serve hosts whose certificates fail verification (self-signed, expired, wrong name)")
    speed = p.add_argument_group("per-host response times (default: none)")
    speed.add_argument("--host-latency-share", type=float, default=_DEFAULTS.host_latency_share,
                       help="share of ordinary hosts that are slow servers (default %(default)s)")
    for kind, which in (("slow", "a slow ordinary host"), ("fast", "the other ordinary hosts")):
        for end in ("min", "max"):
            name = f"host_{kind}_latency_{end}_s"
            speed.add_argument(f"--{name.replace('_', '-')}", type=float, default=getattr(_DEFAULTS, name),
                               help=f"{end} delay of every response of {which} (default %(default)s)")
    quality = p.add_argument_group("page quality oracle (default: none)")
    quality.add_argument("--quality-exponent", type=float, default=None, metavar="S",
                         help=f"write DIR/{ORACLE_NAME}: Zipf quality rank**-S over the crawl's pages")
    quality.add_argument("--quality-seed", type=int, default=None,
                         help="seed of the quality permutation (default --seed)")
    rules = p.add_argument_group("crawler rules the manifest assumes")
    rules.add_argument("--max-path-depth", type=int, default=_RULES.max_path_depth)
    rules.add_argument("--max-repeated-segments", type=int, default=_RULES.max_repeated_segments)
    rules.add_argument("--max-url-bytes", type=int, default=_RULES.max_url_bytes)
    rules.add_argument("--follow-nofollow", action="store_true")
    rules.add_argument("--no-private-guard", action="store_true", help="the crawler allows private networks")
    rules.add_argument("--ignore-robots", action="store_true", help="the crawler does not fetch robots.txt")
    rules.add_argument("--allow-domain", action="append", default=[], help="filter.allow_domains entry (repeatable)")
    rules.add_argument("--no-tls-verify", action="store_true",
                       help="the crawler does not verify certificates (fetch.tls.verify false)")
    other = p.add_argument_group("other")
    other.add_argument("--cache-entries", type=int, default=DEFAULT_CACHE_ENTRIES, help="rendered pages kept in memory")
    other.add_argument("--export-static", metavar="ROOT",
                       help="write the static export + nginx.conf for --port to ROOT and exit (no serving)")
    return p


def params_from_args(a: argparse.Namespace) -> WebParams:
    return WebParams(
        seed=a.seed, hosts=a.hosts, pages=a.pages, domain=a.domain, seed_hosts=a.seed_hosts,
        crawl_delay_hosts=a.crawl_delay_hosts, slow_host=not a.no_slow_host, slow_delay_s=a.slow_delay_s,
        bad_host=not a.no_bad_host, trap=not a.no_trap, private_links=a.private_links,
        nxdomain_links=not a.no_nxdomain_links, robots_error_answers=a.robots_error_answers, stall_s=a.stall_s,
        endless_max_s=a.endless_max_s,
        big_body_bytes=a.big_body_bytes, gzip_bomb_bytes=a.gzip_bomb_bytes,
        host_latency_share=a.host_latency_share, host_slow_latency_min_s=a.host_slow_latency_min_s,
        host_slow_latency_max_s=a.host_slow_latency_max_s, host_fast_latency_min_s=a.host_fast_latency_min_s,
        host_fast_latency_max_s=a.host_fast_latency_max_s,
        https_share=a.https_share, https_redirect_share=a.https_redirect_share, tls_bad_hosts=a.tls_bad_hosts,
    )


def rules_from_args(a: argparse.Namespace) -> CrawlRules:
    return CrawlRules(
        max_path_depth=a.max_path_depth, max_repeated_segments=a.max_repeated_segments,
        follow_nofollow=a.follow_nofollow, private_guard=not a.no_private_guard, obey_robots=not a.ignore_robots,
        allow_domains=tuple(a.allow_domain), max_url_bytes=a.max_url_bytes, tls_verify=not a.no_tls_verify,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        params = params_from_args(args)
        params.validate()
        rules = rules_from_args(args)
        if args.quality_exponent is not None:
            zipf_quality(0, args.quality_exponent)  # raises ValueError on a bad exponent, before serving
        if not 0 <= args.tls_port < 65536:
            raise ValueError(f"--tls-port must be in 0..65535, got {args.tls_port}")
        if args.reuse_port and _has_tls(params):
            raise ValueError("--reuse-port cannot serve HTTPS hosts: each process would make its own CA")
        if args.export_static:
            return _export(args, params, rules)
        return _run(_serve(args, params, rules))
    except ValueError as e:
        print(f"crawler testweb: {e}", file=sys.stderr)
        return 2


def _run(coro) -> int:
    try:
        import uvloop
        factory = uvloop.new_event_loop
    except ImportError:  # optional dependency (crawler[fast])
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


async def _serve(args: argparse.Namespace, params: WebParams, rules: CrawlRules) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    web = build_web(params)
    server = TestWebServer(web, out / "access.log.jsonl", cache_entries=args.cache_entries)
    await server.start(args.bind, args.port, tls_port=args.tls_port, reuse_port=args.reuse_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before the ready line: a caller may stop us right after it
        loop.add_signal_handler(sig, stop.set)
    try:
        manifest = expected_crawl(web, server.port, rules, tls_port=server.tls_port)
        manifest.save(out / "manifest.json")
        seeds = out / "seeds.txt"
        seeds.write_text("\n".join(manifest.seeds) + "\n", encoding="utf-8")
        extra: dict[str, object] = {}
        if args.quality_exponent is not None:
            pq = page_quality(web, manifest, exponent=args.quality_exponent, seed=args.quality_seed)
            extra["quality"] = str(write_oracle(out / ORACLE_NAME, pq))
        took = time.perf_counter() - t0
        print(f"crawler testweb: {len(web.hosts)} hosts, {web.urls} URLs on {args.bind}:{server.port} "
              f"(ready in {took:.1f} s); expected crawl: {manifest.summary()}", file=sys.stderr, flush=True)
        if server.tls:
            extra.update(tls_port=server.tls_port, ca_file=str(server.ca_file))
            print(f"crawler testweb: HTTPS on {args.bind}:{server.tls_port}; its CA certificate is {server.ca_file} "
                  f"(a crawler trusts it with fetch.tls.ca_file: {server.ca_file})", file=sys.stderr, flush=True)
        print(json.dumps({
            "port": server.port, "bind": args.bind, "pid": os.getpid(), "seeds": str(seeds),
            "manifest": str(out / "manifest.json"), "access_log": str(server.access_log_path),
            "hosts": len(manifest.hosts), "fetched": len(manifest.fetched), "requests": manifest.requests,
            **extra,
        }), flush=True)
        await stop.wait()
    finally:
        await server.stop()
    print(f"crawler testweb: stopped after {server.requests} requests", file=sys.stderr, flush=True)
    return 0


def _export(args: argparse.Namespace, params: WebParams, rules: CrawlRules) -> int:
    if not args.port:
        raise ValueError("--export-static needs the port nginx will listen on (--port P, P > 0)")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    root = Path(args.export_static).resolve()
    web = build_web(params)
    if web.has_tls and not args.tls_port:
        raise ValueError("--export-static of a web with HTTPS hosts needs the port nginx will serve them on "
                         "(--tls-port P, P > 0)")
    export = export_static(web, root, args.port, tls_port=args.tls_port)
    access, error, pid = out / "nginx-access.log.jsonl", out / "nginx-error.log", out / "nginx.pid"
    conf = root / "nginx.conf"
    conf.write_text(nginx_conf(root, args.port, access, error, pid, bind=args.bind), encoding="utf-8")
    manifest = expected_crawl(web, args.port, rules, static=True, tls_port=export.tls_port)
    manifest.save(out / "manifest.json")
    seeds = out / "seeds.txt"
    seeds.write_text("\n".join(manifest.seeds) + "\n", encoding="utf-8")
    print(json.dumps({
        "port": args.port, "static_root": str(root), "files": export.files, "bytes": export.bytes,
        "nginx_conf": str(conf), "command": nginx_command(conf, root, error), "seeds": str(seeds),
        "manifest": str(out / "manifest.json"), "access_log": str(access), "error_log": str(error),
        "pid_file": str(pid), "hosts": len(manifest.hosts), "fetched": len(manifest.fetched),
        **({"tls_port": export.tls_port, "ca_file": str(export.ca_file)} if export.ca_file else {}),
    }), flush=True)
    return 0


def _has_tls(params: WebParams) -> bool:
    return bool(params.https_share or params.https_redirect_share or params.tls_bad_hosts)

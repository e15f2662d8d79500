"""`crawler ctl -c FILE COMMAND`: one command to every node of the cluster file, one answer line per node.

    crawler ctl -c cluster.yaml pause | resume | stop | status
    crawler ctl -c cluster.yaml block HOST|.DOMAIN ... | unblock HOST|.DOMAIN ...
    crawler ctl -c cluster.yaml delay HOST|.DOMAIN SECONDS          (0 removes it)
    crawler ctl -c cluster.yaml seeds add URL ... | seeds add -f FILE
    crawler ctl -c cluster.yaml token          (prints the control token, for the console page)

Every node gets the command at once, at `http://<host>:<metrics_port>/control/...`
(server.py), with the control token computed from the cluster secret the
nodes read (the same `cluster.secret_env` or `secret_file`). A node that
does not answer, or refuses, is reported with the reason and makes the exit
code 1: the operator runs the command again when it is back (every command
is idempotent; seeds seen before are dropped by the DUE). `status` prints
`crawler status`'s table and each node's control state below it.

Exit codes: 0 every node carried it out, 1 some node did not, 2 bad config
or arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from crawler.config import Config, ConfigError, cluster_secret, load
from crawler.control.hosts import PatternError, parse_pattern
from crawler.control.token import control_token, local_secret_path

DEFAULT_TIMEOUT_S = 10.0
"""How long one node may take to answer one request (a seeds part waits for the DUE)."""
MAX_PARALLEL = 32                 # nodes asked at once
SEEDS_PER_REQUEST = 10_000        # a seeds list is sent in parts of this many URLs (the node caps a body's size)


@dataclass
class Answer:
    """One node's answer to one command."""
    node: int
    ok: bool
    result: dict = field(default_factory=dict)
    error: str = ""


def control_url(host: str, port: int, path: str) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/control/{path}"


def _send(url: str, method: str, body: dict | None, token: str | None, timeout_s: float) -> dict:
    """One request; the JSON answer, or RuntimeError saying why there is none."""
    data = json.dumps(body).encode("utf-8") if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            why = json.loads(exc.read()).get("error", "")
        except (ValueError, AttributeError, OSError):
            why = exc.reason
        raise RuntimeError(f"HTTP {exc.code}: {why}") from None
    except TimeoutError:
        raise RuntimeError(f"no answer in {timeout_s:g} s") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        raise RuntimeError(reason.strerror.lower() if isinstance(reason, OSError) and reason.strerror
                           else str(reason)) from None
    except (OSError, ValueError) as exc:
        raise RuntimeError(str(exc) or type(exc).__name__) from None


def _call(config: Config, node_id: int, method: str, path: str, bodies: list[dict | None], token: str | None,
          timeout_s: float) -> Answer:
    """Send one request per body to one node; the answers' counts are summed (the parts of a seed list)."""
    node = next(n for n in config.cluster.nodes if n.id == node_id)
    if not node.metrics_port:
        return Answer(node_id, False, error="metrics_port 0 (any free port): address unknown")
    url = control_url(node.host, node.metrics_port, path)
    merged: dict = {}
    for body in bodies:
        try:
            data = _send(url, method, body, token, timeout_s)
        except RuntimeError as exc:
            return Answer(node_id, False, merged, str(exc))
        for key, value in data.items():
            if isinstance(value, int) and not isinstance(value, bool) and key in merged and key != "node":
                merged[key] += value
            else:
                merged[key] = value
    return Answer(node_id, True, merged)


def broadcast(config: Config, method: str, path: str, bodies: list[dict | None], token: str | None,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Answer]:
    """The command to every node at once (a thread each, up to MAX_PARALLEL); answers in node order.
    Plain urllib: a command is a few requests, and the client starts faster without an event loop's
    HTTP stack (`status` reads /metrics with crawler status's own)."""
    ids = sorted(n.id for n in config.cluster.nodes)
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(ids))) as pool:
        return list(pool.map(lambda i: _call(config, i, method, path, bodies, token, timeout_s), ids))


def read_urls(args: argparse.Namespace) -> list[str]:
    """The URLs of `seeds add`: the arguments, then the file's lines (blank lines and # comments skipped)."""
    urls = list(args.urls)
    if args.file:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        urls += [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return urls


def _request(args: argparse.Namespace) -> tuple[str, list[dict | None]]:
    """(path, bodies) of a change command; raises ValueError for bad arguments."""
    if args.command in ("pause", "resume", "stop"):
        return args.command, [None]
    if args.command in ("block", "unblock"):
        return args.command, [{"pattern": parse_pattern(p)} for p in args.patterns]
    if args.command == "delay":
        if not args.seconds >= 0:
            raise ValueError(f"seconds must be >= 0, not {args.seconds}")
        return "delay", [{"pattern": parse_pattern(args.pattern), "seconds": args.seconds}]
    urls = read_urls(args)
    if not urls:
        raise ValueError("seeds add: no URL given (arguments or -f FILE)")
    return "seeds", [{"urls": urls[i:i + SEEDS_PER_REQUEST]} for i in range(0, len(urls), SEEDS_PER_REQUEST)]


def _line(a: Answer) -> str:
    if not a.ok:
        return f"node {a.node}: FAILED: {a.error}"
    details = ", ".join(f"{k} {json.dumps(v)}" for k, v in a.result.items() if k != "node")
    return f"node {a.node}: ok" + (f": {details}" if details else "")


def render_control(answers: list[Answer]) -> str:
    """The control state of every node, one line each."""
    lines = []
    for a in answers:
        if not a.ok:
            lines.append(f"node {a.node}: control: FAILED: {a.error}")
            continue
        r = a.result
        delays = ", ".join(f"{p} {s:g} s" for p, s in r.get("delays", {}).items()) or "-"
        counts = r.get("blocked_urls", {})
        lines.append(f"node {a.node}: {'PAUSED' if r.get('paused') else 'running'}"
                     f"{'; stopping (' + r['stop'] + ')' if r.get('stop') else ''}; "
                     f"blocked: {', '.join(r.get('blocked', [])) or '-'} "
                     f"({counts.get('dropped', 0)} dropped, {counts.get('rejected', 0)} rejected); delays: {delays}")
    return "\n".join(lines)


def _status(config: Config, timeout_s: float, as_json_object: bool) -> tuple[str, list[Answer]]:
    """`crawler status`'s table (or JSON) and every node's control state."""
    from crawler.status import as_json, read_cluster, render_table  # aiohttp: only status needs it

    with ThreadPoolExecutor(max_workers=1) as pool:
        control = pool.submit(broadcast, config, "GET", "status", [None], None, timeout_s)
        rows = asyncio.run(read_cluster(config, timeout_s))
        answers = control.result()
    if as_json_object:
        return json.dumps({**as_json(rows), "control": [a.__dict__ for a in answers]}, sort_keys=True), answers
    return render_table(rows) + "\n" + render_control(answers), answers


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawler ctl", description="Control a running cluster: every node of "
                                     "the cluster file gets the command; one line per node.")
    parser.add_argument("-c", "--config", required=True, help="cluster YAML file")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds each node may take to answer a request (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("pause", help="start no request until resume (fetches in flight finish); the crawl does not end")
    sub.add_parser("resume", help="go on after pause")
    sub.add_parser("stop", help="stop every node cleanly, as SIGTERM does (a later start resumes)")
    sub.add_parser("status", help="crawler status's table and each node's pause, blocks and delays")
    sub.add_parser("token", help="print the control token (paste it into the console page at / on a node's "
                                 "metrics port); asks no node")
    for name, what in (("block", "drop the queued URLs of these hosts and refuse new ones"),
                       ("unblock", "lift a block (URLs dropped meanwhile stay dropped)")):
        p = sub.add_parser(name, help=what)
        p.add_argument("patterns", nargs="+", metavar="HOST|.DOMAIN",
                       help="a host (example.org) or a domain and every host in it (.example.org)")
    delay = sub.add_parser("delay", help="least seconds between two requests to a host (0 removes it)")
    delay.add_argument("pattern", metavar="HOST|.DOMAIN")
    delay.add_argument("seconds", type=float)
    seeds = sub.add_parser("seeds", help="seeds add: new seeds, fetched by their owners unless seen before")
    seeds_sub = seeds.add_subparsers(dest="action", required=True)
    add = seeds_sub.add_parser("add", help="add seeds (URLs the crawl has seen are not fetched again)")
    add.add_argument("urls", nargs="*", metavar="URL")
    add.add_argument("-f", "--file", help="a file of URLs, one a line (- for standard input)")
    return parser


def _local_secret(config: Config, source: str) -> bytes:
    """A single node without a cluster secret keeps its own in its data_dir (token.py): read it there."""
    node = config.cluster.nodes[0]
    path = local_secret_path(Path(config.crawl.data_dir.replace("{node}", str(node.id))) / "state")
    try:
        return path.read_text(encoding="ascii").strip().encode("ascii")
    except OSError as exc:
        raise ConfigError(f"{source}: cluster: no cluster secret (cluster.secret_env or secret_file), and the "
                          f"node's own control secret {path} cannot be read ({exc.strerror or exc}): run this "
                          f"on the node's machine as its user, after the node has started") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        config = load(args.config)
        if not config.metrics.enabled:
            raise ConfigError(f"{args.config}: metrics.enabled is false, so the nodes serve no control endpoint")
        if args.command == "status":
            text, answers = _status(config, args.timeout, args.json)
            print(text)
            return 0 if all(a.ok for a in answers) else 1
        secret = cluster_secret(config, args.config) or _local_secret(config, args.config)
        if args.command == "token":
            print(control_token(secret))
            return 0
        path, bodies = _request(args)
    except ConfigError as exc:
        print(f"crawler ctl: configuration error: {exc}", file=sys.stderr)
        return 2
    except (PatternError, ValueError, OSError) as exc:
        print(f"crawler ctl: {exc}", file=sys.stderr)
        return 2
    answers = broadcast(config, "POST", path, bodies, control_token(secret), args.timeout)
    if args.json:
        print(json.dumps({"command": args.command, "nodes": [a.__dict__ for a in answers]}, sort_keys=True))
    else:
        for a in answers:
            print(_line(a))
    failed = [a.node for a in answers if not a.ok]
    if failed:
        print(f"crawler ctl: {args.command}: failed on node(s) {', '.join(map(str, failed))}", file=sys.stderr)
    return 1 if failed else 0

"""`crawler status -c FILE`: one table of the whole cluster, read from the nodes' /metrics.

An operator wants to know, without a Prometheus, whether every node is alive
and how far the crawl has come. Every node of the cluster file serves
Prometheus text at `http://<host>:<metrics_port>/metrics`; this command reads
them all at once (each with a short timeout), and prints one row per node and
a total row: up or down, pages (and per HTTP status class), fetch errors,
frontier URLs and active hosts, DUE and splitter cache hit rates, and peer
bytes sent and received. A node that does not answer is shown as down with
the reason; that is a state of the cluster, not an error of the command.

The figures are the same counters `crawler run` prints in its JSON summary,
so a finished node (kept up by `metrics.linger_s`) shows its final values.
Pages, status classes and errors are the crawl's totals (the
`crawler_crawl_*` gauges), which go on across restarts of a node; the
per-process counters are the fallback for a node that does not export them.
Hit rates of the total row are summed hits over summed lookups.

    crawler status -c cluster.yaml [--timeout S] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict, dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from crawler.config import Config, ConfigError, load

DEFAULT_TIMEOUT_S = 2.0
"""How long one node may take to answer before it is shown as down."""
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")
CACHES = ("due", "splitter")
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_BYTE_STEP = 1024.0


@dataclass
class NodeStatus:
    """One row of the table: what a node's /metrics said (or why it said nothing)."""
    node: str
    url: str
    up: bool
    reason: str = ""
    """Why the node is shown as down (connection refused, timeout, HTTP 404, ...)."""
    pages: int = 0
    """Page fetches that got an HTTP response (robots.txt excluded), as in the node's summary."""
    status_classes: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    """Fetches with no complete HTTP response (crawler_fetch_errors_total)."""
    frontier_urls: int = 0
    active_hosts: int = 0
    cache_lookups: dict[str, list[int]] = field(default_factory=dict)
    """cache -> [hits, misses]."""
    peer_bytes_sent: int = 0
    peer_bytes_received: int = 0

    def hit_rate(self, cache: str) -> float | None:
        hits, misses = self.cache_lookups.get(cache, (0, 0))
        return hits / (hits + misses) if hits + misses else None


def metrics_url(host: str, port: int) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/metrics"


def parse_status(node: str, url: str, text: str) -> NodeStatus:
    """A node's row from its Prometheus text (raises ValueError when it is not the crawler's)."""
    row = NodeStatus(node=node, url=url, up=True)
    seen = False
    crawl = NodeStatus(node=node, url=url, up=True)      # from the crawler_crawl_* gauges, when exported
    crawl_seen = False
    for family in text_string_to_metric_families(text):
        seen = seen or family.name == "crawler_pages"        # a node that has fetched nothing yet has no sample
        for s in family.samples:
            name, labels, value = s.name, s.labels, s.value
            if name == "crawler_pages_total":
                seen = True
                if labels.get("kind") == "page":
                    row.pages += int(value)
                    cls = labels.get("status_class", "")
                    row.status_classes[cls] = row.status_classes.get(cls, 0) + int(value)
            elif name == "crawler_fetch_errors_total":
                row.errors += int(value)
            elif name == "crawler_crawl_pages":
                crawl_seen = True
                if labels.get("kind") == "page":
                    crawl.pages += int(value)
                    cls = labels.get("status_class", "")
                    crawl.status_classes[cls] = crawl.status_classes.get(cls, 0) + int(value)
            elif name == "crawler_crawl_fetch_errors":
                crawl.errors += int(value)
            elif name == "crawler_frontier_urls":
                row.frontier_urls = int(value)
            elif name == "crawler_frontier_active_hosts":
                row.active_hosts = int(value)
            elif name == "crawler_cache_lookups_total":
                counts = row.cache_lookups.setdefault(labels.get("cache", ""), [0, 0])
                counts[0 if labels.get("result") == "hit" else 1] += int(value)
            elif name == "crawler_peer_bytes_sent_total":
                row.peer_bytes_sent += int(value)
            elif name == "crawler_peer_bytes_received_total":
                row.peer_bytes_received += int(value)
    if not seen:
        raise ValueError("no crawler_pages_total: not a crawler node's /metrics")
    if crawl_seen:
        row.pages, row.status_classes, row.errors = crawl.pages, crawl.status_classes, crawl.errors
    return row


async def read_node(session: aiohttp.ClientSession, node: str, url: str, timeout_s: float) -> NodeStatus:
    """Scrape one node; any failure makes a `down` row with the reason."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                return NodeStatus(node=node, url=url, up=False, reason=f"HTTP {resp.status}")
            text = await resp.text()
        return parse_status(node, url, text)
    except TimeoutError:
        return NodeStatus(node=node, url=url, up=False, reason=f"no answer in {timeout_s:g} s")
    except aiohttp.ClientConnectorError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        return NodeStatus(node=node, url=url, up=False, reason=reason)
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        return NodeStatus(node=node, url=url, up=False, reason=str(exc) or type(exc).__name__)


async def _unknown_port(node: str) -> NodeStatus:
    return NodeStatus(node=node, url="", up=False, reason="metrics_port 0 (any free port): address unknown")


async def read_cluster(config: Config, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[NodeStatus]:
    """One row per node of the cluster file, in node order, all scraped concurrently."""
    nodes = sorted(config.cluster.nodes, key=lambda n: n.id)
    async with aiohttp.ClientSession() as session:
        jobs = []
        for n in nodes:
            if not n.metrics_port:
                jobs.append(_unknown_port(str(n.id)))
            else:
                jobs.append(read_node(session, str(n.id), metrics_url(n.host, n.metrics_port), timeout_s))
        return list(await asyncio.gather(*jobs))


def total_row(rows: list[NodeStatus]) -> NodeStatus:
    """The sum over the nodes that answered; hit rates from summed hits and misses."""
    up = [r for r in rows if r.up]
    total = NodeStatus(node="total", url="", up=bool(up), reason=f"{len(up)}/{len(rows)} up")
    for r in up:
        total.pages += r.pages
        total.errors += r.errors
        total.frontier_urls += r.frontier_urls
        total.active_hosts += r.active_hosts
        total.peer_bytes_sent += r.peer_bytes_sent
        total.peer_bytes_received += r.peer_bytes_received
        for cls, n in r.status_classes.items():
            total.status_classes[cls] = total.status_classes.get(cls, 0) + n
        for cache, (hits, misses) in r.cache_lookups.items():
            acc = total.cache_lookups.setdefault(cache, [0, 0])
            acc[0] += hits
            acc[1] += misses
    return total


def human_bytes(n: float) -> str:
    for unit in _BYTE_UNITS:
        if abs(n) < _BYTE_STEP or unit == _BYTE_UNITS[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= _BYTE_STEP
    raise AssertionError("unreachable")


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.2f}%"


HEADER = ("node", "state", "pages", *STATUS_CLASSES, "errors", "frontier", "hosts",
          "due hit", "splitter hit", "peer sent", "peer recv", "note")


def _cells(r: NodeStatus) -> tuple[str, ...]:
    if not r.up and r.node != "total":
        return (r.node, "down", *("-" for _ in HEADER[2:-1]), r.reason)
    classes = r.status_classes
    others = sum(n for cls, n in classes.items() if cls not in STATUS_CLASSES)
    note = r.reason if r.node == "total" else ""
    if others:
        note = f"{note}; {others} other status" if note else f"{others} other status"
    return (r.node, "up" if r.up else "down", str(r.pages), *(str(classes.get(c, 0)) for c in STATUS_CLASSES),
            str(r.errors), str(r.frontier_urls), str(r.active_hosts),
            _percent(r.hit_rate("due")), _percent(r.hit_rate("splitter")),
            human_bytes(r.peer_bytes_sent), human_bytes(r.peer_bytes_received), note)


def render_table(rows: list[NodeStatus]) -> str:
    """Fixed-width text: node and state left-aligned, figures right-aligned, the note last."""
    lines = [HEADER] + [_cells(r) for r in rows] + [_cells(total_row(rows))]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    out = []
    for line in lines:
        cells = [cell.ljust(w) if i < 2 or i == len(HEADER) - 1 else cell.rjust(w)
                 for i, (cell, w) in enumerate(zip(line, widths))]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def as_json(rows: list[NodeStatus]) -> dict:
    """The table as one JSON object (for scripts): `nodes` and `total`, hit rates included."""
    def one(r: NodeStatus) -> dict:
        d = asdict(r)
        d["cache_hit_rates"] = {c: r.hit_rate(c) for c in r.cache_lookups}
        return d
    return {"nodes": [one(r) for r in rows], "total": one(total_row(rows))}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawler status",
                                     description="Read every node's /metrics and print one table for the cluster.")
    parser.add_argument("-c", "--config", required=True, help="cluster YAML file")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds each node may take to answer (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    return parser


def main(argv: list[str] | None = None) -> int:
    """`crawler status`: 0 when the table is printed (down nodes included), 2 on a bad config."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        config = load(args.config)
    except ConfigError as exc:
        print(f"crawler status: configuration error: {exc}", file=sys.stderr)
        return 2
    if not config.metrics.enabled:
        print(f"crawler status: {args.config}: metrics.enabled is false, so the nodes serve no /metrics to read",
              file=sys.stderr)
        return 2
    rows = asyncio.run(read_cluster(config, args.timeout))
    if args.json:
        print(json.dumps(as_json(rows), sort_keys=True))
    else:
        print(render_table(rows))
    return 0

"""Gathering one `NodeData` per node: from its data_dir (a stopped crawl) or its endpoint (a running one).

From a data_dir: the crawl log (`crawl.log.jsonl`, from where this crawl's
lines begin: `state/report.jsonl` says, else the whole file), the frontier's
checkpoint and journals for what is still queued (queued.py), and
`state/control.json` plus the control totals for the blocks. A stopped node's
numbers read so are what its `/metrics` showed at its end, and what it restores
at its next start (state.py). From the endpoint: `GET /control/report`
(endpoint.py) on each node's metrics port.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from crawler.config import Config
from crawler.config.schema import NodeConfig
from crawler.control.hosts import HostPatterns
from crawler.control.settings import ControlSettings, SettingsError
from crawler.reports.endpoint import PATH
from crawler.reports.queued import queued_by_host
from crawler.reports.state import CRAWL_LOG, read_lines, read_state
from crawler.reports.tally import Tally
from crawler.state import StateStore

MAX_PARALLEL = 32                    # nodes asked at once
CONTROL_TOTALS = ("control_totals", 1)   # crawler/control/controller.py ControlTotals' state file


class ReportError(Exception):
    """The report cannot be made: the message names the node, the file or the address, and why."""


@dataclass
class NodeData:
    """One node's share of the report."""
    node: int
    tally: Tally
    queued: Counter = field(default_factory=Counter)          # host -> URLs still queued
    blocked: list[str] = field(default_factory=list)          # host patterns (`crawler ctl block`)
    blocked_urls: dict[str, int] = field(default_factory=lambda: {"dropped": 0, "rejected": 0})
    source: str = ""                                          # the data_dir or the URL it was read from


def data_dir_of(config: Config, node_id: int) -> Path:
    return Path(config.crawl.data_dir.replace("{node}", str(node_id)))


def node_from_data_dir(node_id: int, data_dir: Path) -> NodeData:
    """A stopped node's figures from its files (nothing is written)."""
    if not data_dir.is_dir():
        raise ReportError(f"node {node_id}: no data_dir {data_dir} here (run the report where the nodes' "
                          f"data_dirs are, or against the running cluster: --from live)")
    state_dir = data_dir / "state"
    saved = read_state(state_dir)
    start = saved[0]["start"] if saved is not None else 0
    tally = Tally()
    read_lines(data_dir / CRAWL_LOG, start, tally)
    try:
        settings = ControlSettings.load(state_dir)
    except SettingsError as exc:
        raise ReportError(f"node {node_id}: {exc}") from None
    blocked = HostPatterns(dict.fromkeys(settings.blocked, 1.0))
    try:
        queued = queued_by_host(data_dir / "frontier")
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise ReportError(f"node {node_id}: cannot read the frontier in {data_dir / 'frontier'}: {exc}") from None
    # The node drops a blocked host's queue at its next start (crawler/control): nothing of it is left to fetch.
    queued = Counter({h: n for h, n in queued.items() if not (blocked and blocked.matches(h))})
    records = StateStore(state_dir).read(*CONTROL_TOTALS) or [{}]
    totals = {k: int(records[0].get(k, 0)) for k in ("dropped", "rejected")}
    return NodeData(node_id, tally, queued, sorted(settings.blocked), totals, str(data_dir))


def node_from_answer(answer: dict, source: str) -> NodeData:
    """A node's `/control/report` answer (endpoint.py); raises ReportError on one that is not."""
    try:
        return NodeData(int(answer["node"]), Tally.from_json(answer["tally"]),
                        Counter({str(h): int(n) for h, n in answer["queued"].items()}),
                        [str(p) for p in answer["blocked"]],
                        {k: int(answer["blocked_urls"][k]) for k in ("dropped", "rejected")}, source)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"{source}: not a node report ({type(exc).__name__}: {exc})") from None


def report_url(host: str, port: int) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}{PATH}"


def _ask(url: str, timeout_s: float) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise ReportError(f"{url}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ReportError(f"{url}: {getattr(reason, 'strerror', None) or reason}") from None


def live_nodes(config: Config, timeout_s: float) -> tuple[list[NodeData], dict[int, str]]:
    """Every node's answer, asked at once: (the answers, node -> why it gave none)."""
    nodes = sorted(config.cluster.nodes, key=lambda n: n.id)

    def one(n: NodeConfig) -> NodeData | str:
        if not n.metrics_port:
            return "metrics_port 0 (any free port): address unknown"
        url = report_url(n.host, n.metrics_port)
        try:
            return node_from_answer(_ask(url, timeout_s), url)
        except ReportError as exc:
            return str(exc)

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(nodes))) as pool:
        answers = list(pool.map(one, nodes))
    got = [a for a in answers if isinstance(a, NodeData)]
    missing = {n.id: a for n, a in zip(nodes, answers) if isinstance(a, str)}
    return got, missing


def offline_nodes(config: Config) -> list[NodeData]:
    return [node_from_data_dir(n.id, data_dir_of(config, n.id)) for n in sorted(config.cluster.nodes,
                                                                              key=lambda n: n.id)]

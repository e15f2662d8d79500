"""The console's data: one node's view (`/console/node`) and the cluster's, merged from every node's.

The cluster view is what the page draws: one row per node (the numbers of
`crawler status`, from the node's /metrics, with its pause state), the
total row, the cluster's pages/s over the last minutes (per node and
summed), the busiest and the failing hosts (each host is owned by one node,
so the lists merge without double counting), and fetch failures by reason
summed over the nodes. Everything here is pure: the server fetches, this
module merges, the tests feed it dicts.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from crawler.console.tally import TOP_HOSTS, HostTally
from crawler.status import NodeStatus, total_row

if TYPE_CHECKING:
    from crawler.node.node import Node

STEP_S = 5                        # one point of the pages/s chart averages this many seconds


def node_view(node: Node, tally: HostTally, now: int) -> dict:
    """GET /console/node: what this node adds to its /metrics for the console."""
    start, pages = tally.series(now)
    return {"node": node.node_id, "time": now, "rate": {"start": start, "pages": pages},
            **tally.top(), "hosts_counted": len(tally.hosts), "hosts_forgotten": tally.forgotten,
            "failures": dict(sorted(node.totals().errors.items())), "control": node.control.status()}


def _row(r: NodeStatus) -> dict:
    d = asdict(r)
    d["cache_hit_rates"] = {c: r.hit_rate(c) for c in sorted(r.cache_lookups)}
    return d


def rate_points(start: int, pages: list[int], end: int, window_s: int, step_s: int = STEP_S) -> list[float]:
    """Pages/s per step over [end - window_s, end), from per-second counts beginning at second `start`
    (seconds outside the node's series count 0: a node whose clock differs a little shifts a little)."""
    first = end - window_s
    out = []
    for p in range(window_s // step_s):
        total = 0
        for second in range(first + p * step_s, first + (p + 1) * step_s):
            i = second - start
            if 0 <= i < len(pages):
                total += pages[i]
        out.append(total / step_s)
    return out


def _state(up: list[dict], paused: int) -> str:
    """One word for the header: down (no node answers), paused, partly paused, done, stopping, running."""
    if not up:
        return "down"
    if paused == len(up):
        return "paused"
    if paused:
        return "partly paused"
    if all(n["stop"] for n in up):
        return "done" if all(n["stop"] == "done" for n in up) else "stopping"
    return "running"


def cluster_view(cluster: str, here: int, now: int, window_s: int, rows: list[NodeStatus],
                 views: dict[int, dict], errors: dict[int, str]) -> dict:
    """GET /console/cluster: `rows` from every node's /metrics (node order), `views` the /console/node
    answers of those that gave one, `errors` why the others did not."""
    nodes, busiest, failing = [], [], []
    failures: dict[str, int] = {}
    series: dict[str, list[float]] = {}
    for r in rows:
        i = int(r.node)
        view = views.get(i)
        row = _row(r)
        control = view["control"] if view else {}
        row.update(id=i, paused=bool(control.get("paused")), stop=control.get("stop", ""),
                   inflight=control.get("inflight", 0), blocked=control.get("blocked", []),
                   console_error="" if view else errors.get(i, "no answer"))
        nodes.append(row)
        if view is None:
            continue
        series[str(i)] = rate_points(view["rate"]["start"], view["rate"]["pages"], now, window_s)
        busiest += [{**h, "node": i} for h in view["busiest"]]
        failing += [{**h, "node": i} for h in view["failing"]]
        for reason, n in view["failures"].items():
            failures[reason] = failures.get(reason, 0) + n
    up = [n for n in nodes if n["up"] and not n["console_error"]]
    paused = sum(n["paused"] for n in up)
    total = [sum(points) for points in zip(*series.values())] if series else []
    return {
        "cluster": cluster, "here": here, "time": now,
        "state": _state(up, paused),
        "nodes": nodes, "total": _row(total_row(rows)),
        "rate": {"step_s": STEP_S, "end": now, "window_s": window_s, "total": total, "nodes": series},
        "busiest": sorted(busiest, key=lambda h: (-h["pages"], h["host"]))[:TOP_HOSTS],
        "failing": sorted(failing, key=lambda h: (-(h["errors"] + h["status_5xx"]), h["host"]))[:TOP_HOSTS],
        "failures": dict(sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))),
        "blocked": sorted({p for n in nodes for p in n["blocked"]}),
    }

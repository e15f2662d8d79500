"""`GET /control/report` on each node's metrics server: the node's per-host aggregates while it runs.

Open like `/metrics` and `/control/status` (it reads, it changes nothing).
The answer is one JSON object (`node_report`): the node's tally (the
crawl's, across restarts: what it restored plus this process), the URLs still
queued per host in its frontier, its blocked host patterns and the URLs blocks
removed. `crawler report` sums the nodes' answers. The tally is kept as the
node records each fetch, so an answer costs one pass over the node's hosts,
not a read of its crawl log; with millions of hosts it is a large answer, and
the loop is held while it is encoded (ask it once a minute, not once a second).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from crawler.node.node import Node

PATH = "/control/report"


def node_report(node: Node) -> dict[str, Any]:
    """What one node tells `crawler report` (the same shape `collect.node_from_data_dir` reads from disk)."""
    control = node.control
    return {"node": node.node_id, "stop": node.stop_reason, "tally": node.records.tally.to_json(),
            "queued": dict(node.frontier.queued_hosts()), "blocked": sorted(control.settings.blocked),
            "blocked_urls": control.totals()}


def routes(node: Node) -> list[web.RouteDef]:
    async def report(request: web.Request) -> web.Response:
        return web.json_response(node_report(node))

    return [web.get(PATH, report)]

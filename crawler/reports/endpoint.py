"""`GET /control/report` on each node's metrics server: the node's per-host aggregates while it runs.

Open like `/metrics` and `/control/status` (it reads, it changes nothing).
The answer is one JSON object: the node's tally (the
crawl's, across restarts: what it restored plus this process), the URLs still
queued per host in its frontier, its blocked host patterns and the URLs blocks
removed. `crawler report` sums the nodes' answers. The tally is kept as the
node records each fetch, so an answer reads no crawl log; the loop copies the
rows changed since the last answer, a thread encodes the answer (with
millions of hosts it is a large answer: ask it once a minute, not once a
second). The frontier's queue counts are read on the loop, one pass over its
hosts.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from crawler.reports.tally import HostRow

if TYPE_CHECKING:
    from crawler.node.node import Node

PATH = "/control/report"


class ReportEndpoint:
    """Answers GET /control/report. The rows are kept as copies updated with the hosts changed since the
    last answer (`Tally.watch`), and the answer is encoded in a thread: the loop is held for the changed
    rows and the frontier's queue counts, not for every host."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._rows: dict[str, tuple] = {}
        self._changed = node.records.tally.watch()
        self._lock = asyncio.Lock()                 # one answer at a time: the thread reads `_rows`

    async def handle(self, request: web.Request) -> web.Response:
        async with self._lock:
            hosts = self.node.records.tally.hosts
            for host in self._changed:
                self._rows[host] = hosts[host].frozen()
            self._changed.clear()
            node = self.node
            queued = dict(node.frontier.queued_hosts())
            control = node.control
            head = {"node": node.node_id, "stop": node.stop_reason, "totals": node.records.tally.totals_json(),
                    "queued": queued, "blocked": sorted(control.settings.blocked), "blocked_urls": control.totals()}
            body = await asyncio.get_running_loop().run_in_executor(None, _encode, head, self._rows)
        return web.Response(body=body, content_type="application/json")


def _encode(head: dict[str, Any], rows: dict[str, tuple]) -> bytes:
    """The answer as JSON (in a worker thread; reads `rows` only)."""
    thaw = HostRow.thaw
    tally = {**head.pop("totals"), "hosts": {h: thaw(r) for h, r in rows.items()}}
    return json.dumps({**head, "tally": tally}, separators=(",", ":")).encode()


def routes(node: Node) -> list[web.RouteDef]:
    return [web.get(PATH, ReportEndpoint(node).handle)]

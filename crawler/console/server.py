"""The console's routes on the node's metrics server (beside /metrics and /control/...).

    GET  /                          the page (static/console.html), its script and style
    GET  /console/node              open: this node's rate history, hosts, failures, control state
    GET  /console/cluster           open: the cluster view, gathered by this node from every node
    POST /console/cluster/COMMAND   pause | resume | block | unblock | seeds, with the control token:
                                    sent on to every node's /control/COMMAND, one answer per node

The page talks only to the node that served it: that node asks its peers
(their /metrics and /console/node, both open, as `crawler status` does),
so the browser needs no cross-origin request and no CORS header is served.
A change is checked against this node's token before it goes anywhere,
then relayed with the same `Authorization` header: each node checks it
again, as it does for `crawler ctl`. The page is served with a strict
Content-Security-Policy (its own script and style only): host names and
failure reasons come from the web and are shown as text, never as markup.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import asdict
from importlib import resources
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from prometheus_client import generate_latest

from crawler.console.tally import HostTally
from crawler.console.view import cluster_view, node_view
from crawler.control.client import DEFAULT_TIMEOUT_S as CHANGE_TIMEOUT_S
from crawler.control.client import Answer
from crawler.control.server import MAX_BODY_BYTES, PREFIX
from crawler.control.token import OK, token_status
from crawler.status import DEFAULT_TIMEOUT_S as READ_TIMEOUT_S
from crawler.status import NodeStatus, parse_status, read_node

if TYPE_CHECKING:
    from crawler.node.node import Node

COMMANDS = ("pause", "resume", "block", "unblock", "seeds")   # what the page can change
CACHE_S = 1.0                     # one gathering serves every page polling within this (several tabs)
STATIC = {"/": ("console.html", "text/html"), "/console/console.js": ("console.js", "text/javascript"),
          "/console/console.css": ("console.css", "text/css")}
HEADERS = {"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                                      "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
           "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
WILDCARDS = ("", "0.0.0.0", "::")
UNKNOWN_PORT = "metrics_port 0 (any free port): address unknown"


def _address(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class Console:
    """The node's console: the host tally it feeds, and the routes that serve and gather."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.tally = HostTally()
        self._files = {path: (resources.files("crawler.console").joinpath("static", name).read_bytes(), kind)
                       for path, (name, kind) in STATIC.items()}
        self._cached: tuple[float, dict] | None = None
        self._lock = asyncio.Lock()

    # --- addresses -------------------------------------------------------------------------------
    def _base(self, node_id: int) -> str | None:
        """http://host:port of a node's metrics server; None when the cluster file leaves it unknown."""
        node = self.node
        if node_id == node.node_id and node.metrics_server is not None:
            bind = node.config.metrics.bind
            host = "127.0.0.1" if bind in WILDCARDS else bind         # this node: where it listens
            return f"http://{_address(host)}:{node.metrics_server.port}"
        peer = next(n for n in node.config.cluster.nodes if n.id == node_id)
        return f"http://{_address(peer.host)}:{peer.metrics_port}" if peer.metrics_port else None

    # --- reading ---------------------------------------------------------------------------------
    def node_view(self) -> dict:
        return node_view(self.node, self.tally, int(time.time()))

    async def _peer(self, session: aiohttp.ClientSession, node_id: int) -> tuple[NodeStatus, dict | None, str]:
        """A peer's /metrics row and /console/node answer (None, with the reason, if it gave none)."""
        base = self._base(node_id)
        if base is None:
            return NodeStatus(node=str(node_id), url="", up=False, reason=UNKNOWN_PORT), None, UNKNOWN_PORT
        row = await read_node(session, str(node_id), f"{base}/metrics", READ_TIMEOUT_S)
        if not row.up:
            return row, None, row.reason
        try:
            async with session.get(f"{base}/console/node",
                                   timeout=aiohttp.ClientTimeout(total=READ_TIMEOUT_S)) as resp:
                if resp.status != 200:
                    return row, None, f"/console/node: HTTP {resp.status}"
                return row, await resp.json(), ""
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return row, None, f"/console/node: {exc or type(exc).__name__}"

    async def _gather(self) -> dict:
        node = self.node
        me = node.node_id
        ids = sorted(n.id for n in node.config.cluster.nodes)
        async with aiohttp.ClientSession() as session:
            answers = await asyncio.gather(*(self._peer(session, i) for i in ids if i != me))
        here = parse_status(str(me), f"{self._base(me)}/metrics", generate_latest(node.registry).decode())
        peers = {int(row.node): (row, view, why) for row, view, why in answers}
        peers[me] = (here, self.node_view(), "")
        rows = [peers[i][0] for i in ids]
        views = {i: v for i, (_, v, _) in peers.items() if v is not None}
        errors = {i: why for i, (_, _, why) in peers.items() if why}
        return cluster_view(node.config.cluster.name, me, int(time.time()), self.tally.window_s, rows, views,
                            errors)

    async def cluster(self) -> dict:
        """The cluster view, gathered at most once per CACHE_S whatever the number of pages polling."""
        async with self._lock:
            if self._cached is None or time.monotonic() - self._cached[0] >= CACHE_S:
                self._cached = (time.monotonic(), await self._gather())
            return self._cached[1]

    # --- changing --------------------------------------------------------------------------------
    async def _relay(self, session: aiohttp.ClientSession, node_id: int, command: str, body: bytes | None,
                     authorization: str) -> Answer:
        base = self._base(node_id)
        if base is None:
            return Answer(node_id, False, error=UNKNOWN_PORT)
        url = f"{base}{PREFIX}/{command}"
        headers = {"Authorization": authorization, "Content-Type": "application/json"}
        try:
            async with session.post(url, data=body, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=CHANGE_TIMEOUT_S)) as resp:
                data = await resp.json(content_type=None)
                if resp.status != 200:
                    return Answer(node_id, False, error=f"HTTP {resp.status}: {data.get('error', '')}")
                return Answer(node_id, True, {k: v for k, v in data.items() if k != "node"})
        except TimeoutError:
            return Answer(node_id, False, error=f"no answer in {CHANGE_TIMEOUT_S:g} s")
        except aiohttp.ClientConnectorError as exc:
            return Answer(node_id, False, error=os.strerror(exc.errno).lower() if exc.errno else str(exc))
        except (aiohttp.ClientError, OSError, ValueError, AttributeError) as exc:
            return Answer(node_id, False, error=str(exc) or type(exc).__name__)

    async def change(self, request: web.Request) -> web.Response:
        command = request.match_info["command"]
        if command not in COMMANDS:
            return web.json_response({"error": f"unknown command {command!r}; one of {', '.join(COMMANDS)}"},
                                     status=404)
        authorization = request.headers.get("Authorization", "")
        status = token_status(authorization, self.node.control.token)
        if status != OK:
            why = ("a change needs the control token (crawler ctl -c FILE token prints it)" if status == 401
                   else "wrong control token" if self.node.control.token is not None
                   else "this node has no cluster secret: changes are off")
            return web.json_response({"error": why}, status=status)
        body = await request.content.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            return web.json_response({"error": f"body over {MAX_BODY_BYTES} bytes"}, status=413)
        try:
            if body:
                json.loads(body)
        except ValueError:
            return web.json_response({"error": "the body is not JSON"}, status=400)
        ids = sorted(n.id for n in self.node.config.cluster.nodes)
        async with aiohttp.ClientSession() as session:
            answers = await asyncio.gather(*(self._relay(session, i, command, body or None, authorization)
                                             for i in ids))
        self._cached = None                     # the next poll shows the change
        return web.json_response({"command": command, "nodes": [asdict(a) for a in answers]})

    # --- routes ----------------------------------------------------------------------------------
    def routes(self) -> list[web.RouteDef]:
        async def static(request: web.Request) -> web.Response:
            body, kind = self._files[request.path]
            return web.Response(body=body, content_type=kind, charset="utf-8", headers=HEADERS)

        async def node(request: web.Request) -> web.Response:
            return web.json_response(self.node_view(), headers={"Cache-Control": "no-store"})

        async def cluster(request: web.Request) -> web.Response:
            return web.json_response(await self.cluster(), headers={"Cache-Control": "no-store"})

        return [*(web.get(path, static) for path in STATIC),
                web.get("/console/node", node), web.get("/console/cluster", cluster),
                web.post("/console/cluster/{command}", self.change)]


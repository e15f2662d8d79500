"""The control endpoint: `/control/...` on the node's metrics server (same port as /metrics).

    GET  /control/status                      open, like /metrics
    POST /control/pause | resume | stop       no body
    POST /control/block | unblock             {"pattern": "example.org" | ".example.org"}
    POST /control/delay                       {"pattern": "example.org", "seconds": 5}
    POST /control/seeds                       {"urls": ["http://...", ...]}

Every POST needs `Authorization: Bearer <token>` (token.py): 401 without a
bearer token, 403 with a wrong one or on a node without a cluster secret.
Answers are JSON: the command's result with 200, or {"error": "..."} with
400 (bad input), 409 (the node is stopping), 413 (body too large) or 503
(the node cannot write its state).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from crawler.control.controller import CommandError, Control
from crawler.control.token import MISSING, OK, token_status

PREFIX = "/control"
MAX_BODY_BYTES = 4 << 20          # one seeds request; `crawler ctl` sends long lists in parts (client.py)

Handler = Callable[[web.Request], Awaitable[web.Response]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def routes(control: Control) -> list[web.RouteDef]:
    """The control routes, for the metrics server's application."""
    async def body(request: web.Request) -> dict:
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            raise CommandError(413, f"body over {MAX_BODY_BYTES} bytes; send the seeds in parts")
        raw = await request.content.read(MAX_BODY_BYTES + 1)
        if len(raw) > MAX_BODY_BYTES:
            raise CommandError(413, f"body over {MAX_BODY_BYTES} bytes; send the seeds in parts")
        try:
            data = json.loads(raw or b"{}")
        except ValueError:
            raise CommandError(400, "the body is not JSON") from None
        if not isinstance(data, dict):
            raise CommandError(400, "the body must be a JSON object")
        return data

    def change(command: Callable[[dict], dict], needs_body: bool = False) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            status = token_status(request.headers.get("Authorization"), control.token)
            if status != OK:
                why = ("a change needs the control token (Authorization: Bearer ...)" if status == MISSING
                       else "wrong control token" if control.token is not None
                       else "this node has no cluster secret: changes are off")
                return _error(status, why)
            try:
                data = await body(request) if needs_body else {}
                return web.json_response({"node": control.node.node_id, **command(data)})
            except CommandError as exc:
                return _error(exc.status, str(exc))
        return handle

    def seeds(data: dict) -> dict:
        urls = data.get("urls")
        if not isinstance(urls, list):
            raise CommandError(400, 'expected {"urls": [...]}')
        return control.add_seeds(urls)

    async def status(request: web.Request) -> web.Response:
        return web.json_response(control.status())

    return [
        web.get(f"{PREFIX}/status", status),
        web.post(f"{PREFIX}/pause", change(lambda _: control.pause())),
        web.post(f"{PREFIX}/resume", change(lambda _: control.resume())),
        web.post(f"{PREFIX}/stop", change(lambda _: control.stop())),
        web.post(f"{PREFIX}/block", change(lambda d: control.block(d.get("pattern")), needs_body=True)),
        web.post(f"{PREFIX}/unblock", change(lambda d: control.unblock(d.get("pattern")), needs_body=True)),
        web.post(f"{PREFIX}/delay", change(lambda d: control.delay(d.get("pattern"), d.get("seconds")),
                                           needs_body=True)),
        web.post(f"{PREFIX}/seeds", change(seeds, needs_body=True)),
    ]

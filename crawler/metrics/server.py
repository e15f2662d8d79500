"""The /metrics (and /healthz) endpoint, on the node's event loop; other parts may add routes (the
control endpoint, crawler/control/server.py)."""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class MetricsServer:
    """Serves one registry; `port` is the bound port (useful when configured as 0)."""

    def __init__(self, registry: CollectorRegistry, bind: str, port: int,
                 routes: Iterable[web.RouteDef] = ()) -> None:
        self.registry = registry
        self.routes = list(routes)
        self.bind = bind
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._health)
        app.add_routes(self.routes)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.bind, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]        # the port chosen when it was 0

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

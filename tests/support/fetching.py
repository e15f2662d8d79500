"""Fetchers made by a test, each with its own resolver, all closed when the test ends."""

from __future__ import annotations

from typing import Any

from crawler.config.schema import FetchConfig
from crawler.fetch import Fetcher, Resolver

UA = "ExampleCrawler/1.0 (+https://example.org/crawler)"


class Fetchers:
    """What a fetcher fixture hands out: `make` builds a fetcher on the config's own DNS settings and
    private-network rule (as a node does); `close` ends them all, resolvers included."""

    def __init__(self) -> None:
        self._made: list[tuple[Fetcher, Resolver]] = []

    def make(self, config: FetchConfig, **fetcher_args: Any) -> Fetcher:
        resolver = Resolver(config.dns, allow_private_networks=config.allow_private_networks)
        fetcher = Fetcher(config, resolver, UA, **fetcher_args)
        self._made.append((fetcher, resolver))
        return fetcher

    async def close(self) -> None:
        for fetcher, resolver in self._made:
            await fetcher.close()
            await resolver.close()

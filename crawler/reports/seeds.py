"""Which hosts a seed's pages may come from: its scope, for the seeds table.

Today a seed's scope is its host (`HostScope`). Per-seed scopes (`host`,
`domain`, `prefix`, `any` in `crawl.seeds`) are being built elsewhere; one
plugs in here as another class with `hosts(known)` and a name in `SCOPES`,
and `seed_scopes` reads the seed's scope from the config. The seeds table sums
the per-host rows its scope covers, so a scope that is a set of hosts
(host, domain, any) needs nothing else; a URL-prefix scope would need the
counts kept per seed where the seed's id travels with its URLs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from crawler.config import Config
from crawler.urls import host_of


class Scope(Protocol):
    @property
    def name(self) -> str:
        """The scope's name in config (`host`, ...)."""

    def hosts(self, known: Mapping[str, object]) -> list[str]:
        """The hosts among `known` whose pages count for the seed."""


@dataclass(frozen=True)
class HostScope:
    """The seed's own host only."""
    host: str
    name: str = "host"

    def hosts(self, known: Mapping[str, object]) -> list[str]:
        """The covered hosts among `known` (one probe: the seed's host)."""
        return [self.host] if self.host in known else []


SCOPES = {"host": HostScope}


@dataclass(frozen=True)
class Seed:
    url: str
    scope: Scope


def seed_scopes(config: Config) -> list[Seed]:
    """The config's seeds (crawl.seeds and the seeds file), canonical, each with its scope."""
    from crawler.node.seeds import read_seeds  # crawler.node is heavy; the report needs only this
    out = []
    for url in read_seeds(config.crawl, 0):
        host = host_of(url)
        if host is not None:
            out.append(Seed(url, HostScope(host)))
    return out

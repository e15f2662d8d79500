"""Which hosts a seed's pages may come from: its scope, for the seeds table.

A seed's scope (`crawl.seeds`, the seeds file; docs/scope.md) is one of
`host`, `domain`, `prefix`, `any`. The seeds table sums the per-host rows a
scope covers: `host` its host, `domain` the hosts of its domain, `any` every
host. A `prefix` scope is narrower than a host but the tally is kept per
host, so its row counts the seed's whole host: an upper bound, and the
table says `prefix (host)` so nobody reads it as exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from crawler.config import Config
from crawler.filter.scope import Seed as ScopedSeed
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


@dataclass(frozen=True)
class DomainScope:
    """The seed's domain (its host without a leading www.) and every host under it."""
    domain: str
    name: str = "domain"

    def hosts(self, known: Mapping[str, object]) -> list[str]:
        tail = "." + self.domain
        return [h for h in known if h == self.domain or h.endswith(tail)]


@dataclass(frozen=True)
class AnyScope:
    """Every host: the seed sets no bound."""
    name: str = "any"

    def hosts(self, known: Mapping[str, object]) -> list[str]:
        return list(known)


def scope_of(seed: ScopedSeed) -> Scope | None:
    """The report's scope for a config seed; None for a URL without a host."""
    host = host_of(seed.url)
    if host is None:
        return None
    if seed.scope == "domain":
        return DomainScope(seed.bound() or host)
    if seed.scope == "any":
        return AnyScope()
    if seed.scope == "prefix":
        return HostScope(host, "prefix (host)")
    return HostScope(host)


@dataclass(frozen=True)
class Seed:
    url: str
    scope: Scope


def seed_scopes(config: Config) -> list[Seed]:
    """The config's seeds (crawl.seeds and the seeds file), canonical, each with its scope."""
    from crawler.node.seeds import read_seeds  # crawler.node is heavy; the report needs only this
    out = []
    for seed in read_seeds(config.crawl, 0):
        scope = scope_of(seed)
        if scope is not None:
            out.append(Seed(seed.url, scope))
    return out

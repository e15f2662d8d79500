"""The seed list: `crawl.seeds` and `crawl.seeds_file`, canonicalized; each node keeps the seeds it owns.

A seed may carry a scope (docs/scope.md): `{url: URL, scope: host}` in
`crawl.seeds`, or `URL scope=host` on a line of the seeds file (a URL alone
is scope `any`). A seed enters the DUE at hop 0, as its own seed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from crawler.config import ConfigError
from crawler.config.schema import SEED_SCOPES, CrawlConfig
from crawler.filter.scope import Seed
from crawler.urls import canonicalize, fingerprints, host_of
from crawler.urls.lineage import NO_FP, tag

if TYPE_CHECKING:
    from crawler.node.node import Node

log = logging.getLogger("crawler.node")


def parse_seed_line(line: str, where: str) -> tuple[str, str]:
    """(URL, scope) of a seeds-file line `URL [scope=KIND]`; a bad scope is a ConfigError naming the line."""
    url, _, rest = line.partition(" ")
    rest = rest.strip()
    if not rest:
        return url, "any"
    key, eq, kind = rest.partition("=")
    if key.strip() != "scope" or not eq or kind.strip() not in SEED_SCOPES:
        raise ConfigError(f"{where}: expected 'URL' or 'URL scope=KIND' with KIND one of "
                          f"{', '.join(SEED_SCOPES)}, got {line!r}")
    return url, kind.strip()


def read_seeds(crawl: CrawlConfig, node_id: int) -> list[Seed]:
    """Every seed of the config as a canonical URL and its scope; one that is not a crawlable URL is logged
    and skipped."""
    raw = [(s, "any") if isinstance(s, str) else (s.url, s.scope) for s in crawl.seeds]
    if crawl.seeds_file:
        lines = Path(crawl.seeds_file).read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if line and not line.startswith("#"):
                raw.append(parse_seed_line(line, f"{crawl.seeds_file}:{n}"))
    seeds = []
    for s, scope in raw:
        url = canonicalize(s)
        if url is None:
            log.warning("node %d: seed %r is not a crawlable http(s) URL; skipped", node_id, s)
        else:
            seeds.append(Seed(url, scope))
    return seeds


async def add_seeds(node: Node) -> None:
    """Every node reads the whole seed list and keeps the seeds it owns (into its DUE), at hop 0. At every
    start, a resumed crawl's too: the DUE drops the seeds seen before, so only those added to the config or
    the seeds file while the crawl was stopped are new (a large seeds file costs one DUE pass at start)."""
    submit_seeds(node, in_scope(node, node.filter.filter([s.url for s in node.seeds])))


def in_scope(node: Node, urls: list[str]) -> list[str]:
    """The seeds the crawl's scope admits; the others are counted by reason and logged."""
    scope = node.scope
    kept = []
    for url in urls:
        reason = scope.reason(url)
        if reason is None:
            kept.append(url)
        else:
            scope.rejected[reason] += 1
            log.warning("node %d: seed %s is refused by scope.%s", node.node_id, url, reason)
    return kept


def submit_seeds(node: Node, urls: list[str]) -> int:
    """The seeds this node owns into its DUE as their own seeds at hop 0, the new ones on to the frontier;
    returns how many it owns (those the DUE has seen are dropped there)."""
    owner = node.partitioner.owner
    mine = [u for u in urls if owner(host_of(u)) == node.node_id]
    if mine:
        fps = fingerprints(mine)
        node.enqueue(node.due.submit(fps, [tag(u, 0, fp, NO_FP) for u, fp in zip(mine, fps.tolist())]))
    return len(mine)

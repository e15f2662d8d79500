"""The seed list: `crawl.seeds` and `crawl.seeds_file`, canonicalized; each node keeps the seeds it owns."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from crawler.config.schema import CrawlConfig
from crawler.urls import canonicalize, fingerprints, host_of

if TYPE_CHECKING:
    from crawler.node.node import Node

log = logging.getLogger("crawler.node")


def read_seeds(crawl: CrawlConfig, node_id: int) -> list[str]:
    """Every seed of the config as a canonical URL; one that is not a crawlable URL is logged and skipped."""
    raw = list(crawl.seeds)
    if crawl.seeds_file:
        for line in Path(crawl.seeds_file).read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                raw.append(line)
    seeds = []
    for s in raw:
        url = canonicalize(s)
        if url is None:
            log.warning("node %d: seed %r is not a crawlable http(s) URL; skipped", node_id, s)
        else:
            seeds.append(url)
    return seeds


async def add_seeds(node: Node) -> None:
    """Every node reads the whole seed list and keeps the seeds it owns (into its DUE). At every start, a
    resumed crawl's too: the DUE drops the seeds seen before, so only those added to the config or the
    seeds file while the crawl was stopped are new (a large seeds file costs one DUE pass at start)."""
    seeds = node.filter.filter(read_seeds(node.config.crawl, node.node_id))
    owner = node.partitioner.owner
    mine = [u for u in seeds if owner(host_of(u)) == node.node_id]
    if mine:
        new = node.due.submit(fingerprints(mine), mine)
        node.enqueue(new)

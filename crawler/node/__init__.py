"""One crawling node: the pipeline of DESIGN 1 wired together and run by W workers.

The package is laid out by concern; `Node` (node.py) wires the parts and runs
the crawl, and holds a small object per concern that keeps a reference to it:

- node.py: `Node`: wiring (__init__, start), the pipeline's entry points
  (add_urls, enqueue, peer batches), the workers, stop, close and run.
- visit.py: `Visitor`, the worker's visit of one URL (robots.txt, fetch,
  retry, refuse or park, parse in threads, links).
- records.py: `Records`, counting a fetch and writing its crawl-log line and
  WARC records.
- housekeeping.py: `Housekeeping`, the watch loop (limits, checkpoints, early
  merges, the end), page confirmation in a cluster, the linger.
- merging.py: `EarlyMergePolicy` and `is_hungry`, the rules for when new URLs
  leave the DUE buffer before its flush interval.
- lookups.py: `PromptLookups`, the links looked up in the DUE at once while a
  worker waits, and their delays.
- totals.py: `PageCounts`, `CrawlTotals` (the counts across restarts) and
  `saved_summary`.
- report.py: `Report`, the summary and the /metrics snapshot.
- identity.py: `DataDir`, which crawl a data_dir holds, and `--fresh`.
- seeds.py: the seed list, and each node's share of it.
- errors.py: `ListenError` and the write errors that stop a node.

The names below load on first use: `crawler resize` reads and writes data
dirs (identity.py) and must not pay for importing the whole crawler
(aiohttp, the parsers, the console: about a second per process).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawler.node.errors import ListenError
    from crawler.node.node import Node, build_cache
    from crawler.node.totals import CrawlTotals, PageCounts, saved_summary

_WHERE = {"ListenError": "errors", "Node": "node", "build_cache": "node", "CrawlTotals": "totals",
          "PageCounts": "totals", "saved_summary": "totals"}
__all__ = ["CrawlTotals", "ListenError", "Node", "PageCounts", "build_cache", "saved_summary"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'crawler.node' has no attribute {name!r}")
    return getattr(importlib.import_module(f"crawler.node.{module}"), name)

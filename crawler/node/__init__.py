"""One crawling node: the pipeline of DESIGN 1 wired together and run by W workers (see `node.py`)."""

from crawler.node.node import ListenError, Node, build_cache
from crawler.node.totals import CrawlTotals, PageCounts, saved_summary

__all__ = ["CrawlTotals", "ListenError", "Node", "PageCounts", "build_cache", "saved_summary"]

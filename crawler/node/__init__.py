"""One crawling node: the pipeline of DESIGN 1 wired together and run by W workers (see `node.py`)."""

from crawler.node.node import Counters, CrawlTotals, ListenError, Node, build_cache, saved_summary

__all__ = ["Counters", "CrawlTotals", "ListenError", "Node", "build_cache", "saved_summary"]

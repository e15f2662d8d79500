"""What the crawl keeps: pages in WARC files and one crawl-log line per fetch.

- `WarcStore` writes a request and a response record per fetch (warcio, gzip
  per record, a warcinfo record opening each file, rotated by size). The
  response payload is the body as received on the wire (still gzip-encoded if
  the server sent it so), with the original headers, as archives expect.
- `CrawlLog` writes JSON Lines: time, URL, status, bytes, duration, content
  type, content fingerprint and, for failures, the reason. Every fetch the
  node makes, robots.txt included, and every URL it decided not to fetch
  after dequeuing it (robots denial), gets a line: the log is the crawl's
  ledger, and tests read it from outside.
"""

from crawler.store.crawllog import CrawlLog
from crawler.store.warc import WarcStore

__all__ = ["CrawlLog", "WarcStore"]

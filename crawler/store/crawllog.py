"""The crawl log: one JSON line per fetch or skip, each handed to the kernel at once (one write(2)): a
killed node loses no line, and the report and the totals a restart rebuilds (crawler/reports) read them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from crawler.fsutil import close_durably


class CrawlLog:
    """Append-only JSON Lines; `write()` is on the per-page path: it formats and makes one write(2)."""

    FLUSH_LINES = 1                  # a line per write(2): SIGKILL loses nothing (no fsync: power loss may)

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8", buffering=1 << 16)
        self._since_flush = 0
        self._end = 0
        self.lines = 0

    def write(self, record: dict) -> None:
        record.setdefault("t", round(time.time(), 3))
        self._file.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n")
        self.lines += 1
        self._since_flush += 1
        if self._since_flush >= self.FLUSH_LINES:
            self.flush()

    def offset(self) -> int:
        """The byte offset after the last line written (the report's checkpoint of what it counted)."""
        if self._file.closed:
            return self._end
        self.flush()
        return self._file.tell()        # after a flush, in write mode: the byte offset

    def flush(self) -> None:
        self._file.flush()
        self._since_flush = 0

    def close(self) -> None:
        if not self._file.closed:
            self._end = self.offset()
            close_durably(self._file)

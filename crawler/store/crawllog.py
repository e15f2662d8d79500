"""The crawl log: one JSON line per fetch or skip, buffered, flushed at intervals."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from crawler.fsutil import close_durably


class CrawlLog:
    """Append-only JSON Lines; `line()` is on the per-page path, so it only formats and buffers."""

    FLUSH_LINES = 256

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8", buffering=1 << 16)
        self._since_flush = 0
        self.lines = 0

    def write(self, record: dict) -> None:
        record.setdefault("t", round(time.time(), 3))
        self._file.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n")
        self.lines += 1
        self._since_flush += 1
        if self._since_flush >= self.FLUSH_LINES:
            self.flush()

    def flush(self) -> None:
        self._file.flush()
        self._since_flush = 0

    def close(self) -> None:
        if not self._file.closed:
            close_durably(self._file)

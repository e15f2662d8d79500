"""WARC output with warcio: request + response records, gzip per record, size rotation.

warcio builds the records (headers, digests); the compression is ours: each
record is written uncompressed into a buffer, then into the file as one gzip
member at `store.warc.gzip_level` (warcio itself compresses at level 9,
which cost ~1.3x the CPU of level 6 for ~0.5% smaller files on real
documentation pages; see docs/benchmarks.md). One member per record is what
WARC readers expect (random access by offset).
"""

from __future__ import annotations

import io
import os
import time
import zlib
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

import crawler
from crawler.config.schema import WarcConfig
from crawler.fsutil import close_durably

_GZIP_WBITS = 16 + zlib.MAX_WBITS      # a gzip header and trailer around the deflate stream
# Hop-by-hop framing that no longer describes the stored payload (chunks are decoded).
_DROP_HEADERS = {"transfer-encoding"}


class WarcStore:
    """Writes `<dir>/crawl-<node>-<start>-<seq>.warc.gz`, a new file past `rotate_bytes`."""

    def __init__(self, directory: str | os.PathLike, config: WarcConfig, node_id: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.node_id = node_id
        self._stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        self._seq = 0
        self._file: BinaryIO | None = None
        self._buf = io.BytesIO()                 # one record, uncompressed, before it becomes a gzip member
        self._writer = WARCWriter(self._buf, gzip=False)
        self._level = config.gzip_level
        self.records = 0
        self.files: list[Path] = []

    def _open(self) -> None:
        self.close()
        while True:
            path = self.dir / f"crawl-{self.node_id}-{self._stamp}-{self._seq:05d}.warc.gz"
            self._seq += 1
            if not path.exists():
                break
        self._file = open(path, "wb")
        self.files.append(path)
        info = self._writer.create_warcinfo_record(path.name, {
            "software": f"crawler/{crawler.__version__}",
            "format": "WARC File Format 1.1",
            "node": str(self.node_id),
        })
        self._put(info)

    def _put(self, record) -> None:
        """One record as one gzip member (hot path: twice per page)."""
        buf = self._buf
        buf.seek(0)
        buf.truncate()
        self._writer.write_record(record)
        assert self._file is not None, "_open() comes first"
        self._file.write(zlib.compress(buf.getbuffer(), self._level, wbits=_GZIP_WBITS))

    def write(self, result) -> None:
        """Store one fetch that got an HTTP response (a FetchResult with status > 0)."""
        if self._file is None or self._file.tell() >= self.config.rotate_bytes:
            self._open()
        w = self._writer
        parts = urlsplit(result.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        req_headers = list(result.request_headers) or [("Host", parts.netloc)]
        req = w.create_warc_record(result.url, "request", http_headers=StatusAndHeaders(
            f"GET {target} HTTP/1.1", req_headers, is_http_request=True))
        headers = [(k, v) for k, v in result.headers if k.lower() not in _DROP_HEADERS]
        status_line = f"{result.status} {result.http_reason or ''}".strip()
        warc_headers = {"WARC-IP-Address": result.ip} if result.ip else None
        if result.truncated:
            warc_headers = dict(warc_headers or {}, **{"WARC-Truncated": "length"})
        resp = w.create_warc_record(
            result.url, "response", payload=io.BytesIO(result.raw_body),
            length=len(result.raw_body), warc_headers_dict=warc_headers,
            http_headers=StatusAndHeaders(status_line, headers, protocol="HTTP/1.1"))
        req.rec_headers.add_header("WARC-Concurrent-To", resp.rec_headers.get_header("WARC-Record-ID"))
        self._put(resp)
        self._put(req)
        self.records += 2

    def close(self) -> None:
        if self._file is not None:
            close_durably(self._file)
            self._file = None

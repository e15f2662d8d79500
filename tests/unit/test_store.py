import gzip
import json

from warcio.archiveiterator import ArchiveIterator

from crawler.config.schema import WarcConfig
from crawler.fetch.result import FetchResult
from crawler.store import CrawlLog, WarcStore


def result(url, body=b"<html>hi</html>", **kw):
    return FetchResult(url=url, status=200, http_reason="OK", body=body, raw_body=body,
                       headers=[("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")],
                       content_type="text/html", ip="127.0.0.1", wire_bytes=len(body) + 50,
                       request_headers=[("Host", "a.test"), ("User-Agent", "T/1")], **kw)


def test_warc_records_roundtrip_and_rotate(tmp_path):
    store = WarcStore(tmp_path, WarcConfig(rotate_bytes=4096), node_id=3)
    bodies = {f"http://a.test/{i}": bytes([65 + i % 26]) * 3000 for i in range(6)}
    for url, body in bodies.items():
        store.write(result(url, body))
    compressed = gzip.compress(b"<p>zipped</p>")
    store.write(result("http://a.test/gz", compressed, truncated=True))
    store.close()
    assert len(store.files) >= 2                      # rotated by size
    seen = {}
    kinds = []
    for path in store.files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                kinds.append(rec.rec_type)
                if rec.rec_type == "response":
                    uri = rec.rec_headers.get_header("WARC-Target-URI")
                    seen[uri] = rec.content_stream().read()
                    assert rec.rec_headers.get_header("WARC-IP-Address") == "127.0.0.1"
                    assert rec.http_headers.get_header("Transfer-Encoding") is None
    assert kinds.count("warcinfo") == len(store.files)
    assert kinds.count("request") == kinds.count("response") == 7
    for url, body in bodies.items():
        assert seen[url] == body
    assert seen["http://a.test/gz"] == compressed     # raw payload kept as received


def test_each_record_is_one_gzip_member_at_the_configured_level(tmp_path):
    """Readers seek to a record's offset and inflate one member: the offsets warcio reports are the
    members' starts, each member inflates alone to one record with valid digests, and the level is ours."""
    body = b"".join(b"<p>paragraph %d of a page, with some words that repeat</p>\n" % i for i in range(400))
    sizes = {}
    for level in (1, 9):
        store = WarcStore(tmp_path / f"l{level}", WarcConfig(gzip_level=level), node_id=0)
        for i in range(5):
            store.write(result(f"http://a.test/{i}", body))
        store.close()
        path = store.files[0]
        sizes[level] = path.stat().st_size
        with open(path, "rb") as fh:
            offsets = [it.get_record_offset() for it in _records(fh)]
        data = path.read_bytes()
        for start, end in zip(offsets, offsets[1:] + [len(data)]):
            member = gzip.decompress(data[start:end])
            assert member.startswith(b"WARC/1.") and member.endswith(b"\r\n\r\n")
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests=True):
                rec.content_stream().read()
                assert rec.digest_checker.passed is not False
        assert len(offsets) == 1 + 2 * 5
    assert sizes[1] > sizes[9]


def _records(fh):
    it = ArchiveIterator(fh)
    for _ in it:
        yield it


def test_crawl_log_lines(tmp_path):
    log = CrawlLog(tmp_path / "node" / "crawl.log.jsonl")
    for i in range(300):
        log.write({"url": f"http://a.test/{i}", "status": 200, "reason": "ok"})
    log.write({"url": "http://a.test/é", "status": 0, "reason": "dns_nxdomain"})
    log.close()
    lines = [json.loads(x) for x in (tmp_path / "node" / "crawl.log.jsonl").read_text().splitlines()]
    assert len(lines) == 301 and lines[-1]["reason"] == "dns_nxdomain" and "t" in lines[0]

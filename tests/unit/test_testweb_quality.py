"""The page quality oracle of the test web: Zipf over a seeded permutation, every crawled page, a file that
round-trips."""

from __future__ import annotations

import numpy as np
import pytest

from crawler.testweb import CrawlRules, WebParams, build_web, expected_crawl
from crawler.testweb.model import Kind
from crawler.testweb.quality import (
    PageQuality,
    crawled_pages,
    page_quality,
    read_oracle,
    write_oracle,
    zipf_quality,
)
from crawler.urls import canonicalize

PORT = 8123


@pytest.fixture(scope="module")
def web():
    return build_web(WebParams(hosts=12, pages=400, seed=4))


@pytest.fixture(scope="module")
def manifest(web):
    return expected_crawl(web, PORT, CrawlRules())


def test_same_seed_same_quality_other_seed_other_order(web, manifest):
    a = page_quality(web, manifest)
    b = page_quality(web, manifest)
    assert a.urls == b.urls and np.array_equal(a.quality, b.quality)
    assert a.seed == web.params.seed
    c = page_quality(web, manifest, seed=web.params.seed + 1)
    assert sorted(c.urls) == sorted(a.urls) and c.urls != a.urls


def test_quality_is_zipf_in_rank(web, manifest):
    for s in (1.0, 0.5, 2.0):
        pq = page_quality(web, manifest, exponent=s)
        ranks = np.arange(1, len(pq.urls) + 1)
        assert pq.quality[0] == 1.0
        assert np.allclose(pq.quality, ranks ** -s)
        assert np.all(np.diff(pq.quality) < 0)
        # Zipf: log quality is linear in log rank with slope -s.
        slope = np.polyfit(np.log(ranks), np.log(pq.quality), 1)[0]
        assert slope == pytest.approx(-s)
    assert np.all(page_quality(web, manifest, exponent=0.0).quality == 1.0)


def test_permutation_is_not_the_id_order(web, manifest):
    pq = page_quality(web, manifest)
    by_id = [web.url(uid, PORT) for uid in crawled_pages(web, manifest)]
    rank_of = {u: i for i, u in enumerate(pq.urls)}
    ranks_in_id_order = [rank_of[u] for u in by_id]
    # A random permutation is far from sorted: the rank correlation with id order is small.
    assert abs(np.corrcoef(ranks_in_id_order, np.arange(len(by_id)))[0, 1]) < 0.3


def test_every_crawled_html_page_has_a_quality_under_its_canonical_url(web, manifest):
    pq = page_quality(web, manifest)
    assert len(set(pq.urls)) == len(pq.urls)
    expected = set()
    for url, status in manifest.statuses.items():
        host, _, path = url[len("http://"):].partition("/")
        h = web.host_named(host.rsplit(":", 1)[0])
        uid = None if h is None else web.lookup(h.index, "/" + path)
        if status == 200 and uid is not None and web.url_kind[uid] == Kind.PAGE:
            expected.add(url)
    assert set(pq.urls) == expected
    assert len(expected) > 300
    for url in pq.urls:  # the crawler looks URLs up in canonical form; the manifest's are already canonical
        assert canonicalize(url) == url and url in manifest.fetched and f":{PORT}/" in url


def test_oracle_file_round_trips(tmp_path, web, manifest):
    pq = page_quality(web, manifest, exponent=1.3)
    path = write_oracle(tmp_path / "quality.tsv", pq, header=["test web seed 4"])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# test web seed 4" and lines[1].startswith("# Zipf")
    assert lines[2] == f"{pq.urls[0]}\t1.0"
    back = read_oracle(path)
    assert back == pq.as_dict()
    assert sum(back.values()) == pytest.approx(pq.total())
    write_oracle(tmp_path / "m.tsv", {"http://a.test/x": 0.0, "http://a.test/y": 2.5})
    assert read_oracle(tmp_path / "m.tsv") == {"http://a.test/x": 0.0, "http://a.test/y": 2.5}


def test_oracle_reader_skips_comments_and_names_bad_lines(tmp_path):
    good = tmp_path / "good.tsv"
    good.write_text("# comment\n\nhttp://a.test:1/p\t0.25\r\n#http://b.test/\t9\n", encoding="utf-8")
    assert read_oracle(good) == {"http://a.test:1/p": 0.25}
    for bad_line in ("http://a.test/ 0.5", "http://a.test/\t-1", "http://a.test/\tnan", "\t0.5", "http://a.test/\tx"):
        bad = tmp_path / "bad.tsv"
        bad.write_text(f"# ok\n{bad_line}\n", encoding="utf-8")
        with pytest.raises(ValueError, match=r"bad\.tsv:2"):
            read_oracle(bad)


def test_writer_refuses_what_the_reader_could_not_read(tmp_path):
    with pytest.raises(ValueError):
        write_oracle(tmp_path / "x.tsv", {"http://a.test/\tx": 1.0})
    with pytest.raises(ValueError):
        write_oracle(tmp_path / "x.tsv", {"http://a.test/": -0.5})
    with pytest.raises(ValueError):
        zipf_quality(3, -1.0)


def test_page_quality_of_an_empty_crawl_is_empty(web, manifest):
    empty = type(manifest)(**{**manifest.__dict__, "fetched": set(), "statuses": {}})
    pq = page_quality(web, empty)
    assert isinstance(pq, PageQuality) and pq.urls == [] and pq.total() == 0.0

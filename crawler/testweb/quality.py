"""Page quality for scheduling experiments: a Zipf law over a seeded permutation of the pages.

Cao, Jiang & Singh measure a crawl schedule by how much *quality* it fetches
per unit of time. On the test web quality is not observed but given: every
HTML page a correct crawl fetches (the manifest's `fetched` URLs of kind
PAGE) gets a rank from a random permutation drawn from the seed, and

    quality(rank) = 1 / rank ** exponent        (rank 1 = the best page = 1.0)

so a few pages carry most of the quality, like in-link counts or PageRank on
the real web. The permutation is independent of the link structure and of
the host latencies on purpose: a scheduler only wins by using the quality it
is told (an oracle) or estimates, never by accident of the web's layout.

The oracle file is what the frontier reads with `frontier.quality: oracle`
and `frontier.quality_file`: UTF-8 text, one line per URL,

    <canonical URL>\\t<quality float >= 0>

lines starting with `#` ignored; a URL missing from the file has quality 0.
URLs are written as the crawler sees them (`crawler.urls.canonicalize` of
the manifest's URL, which carries the port the server is bound to).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crawler.frontier.quality import read_quality_file
from crawler.urls import canonicalize

from .manifest import WebManifest
from .model import Kind, Web

DEFAULT_EXPONENT = 1.0
"""Zipf exponent s of quality(rank) = rank^-s (Zipf's law proper)."""
ORACLE_NAME = "quality.tsv"
"""File name the testweb CLI writes the oracle under (in its --out directory)."""
_QUALITY_STREAM = 0x0A11CE
"""Second seed word of the permutation's generator: independent of the web's own draws."""
_COMMENT = "#"


@dataclass(frozen=True)
class PageQuality:
    """The quality of every page of a crawl, best first."""

    urls: list[str]
    """Canonical URLs in rank order (rank 1 first)."""
    quality: np.ndarray
    """float64, quality of urls[i]; non-increasing, quality[0] == 1.0."""
    exponent: float
    seed: int

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.urls, self.quality.tolist()))

    def total(self) -> float:
        """Quality of the whole crawl (what a crawl that fetched every page collects)."""
        return float(self.quality.sum())


def zipf_quality(n: int, exponent: float = DEFAULT_EXPONENT) -> np.ndarray:
    """quality of ranks 1..n: rank ** -exponent (best 1.0)."""
    if exponent < 0 or not math.isfinite(exponent):
        raise ValueError(f"quality exponent must be a finite number >= 0, got {exponent}")
    return np.arange(1, n + 1, dtype=np.float64) ** -float(exponent)


def crawled_pages(web: Web, manifest: WebManifest) -> list[int]:
    """URL ids of the HTML pages (kind PAGE) the manifest's crawl fetches, in id order."""
    port, tls_port, statuses = manifest.port, manifest.tls_port, manifest.statuses
    ids = np.flatnonzero(web.url_kind == int(Kind.PAGE)).tolist()
    return [uid for uid, url in zip(ids, (web.url(u, port, tls_port) for u in ids))
            if url in manifest.fetched and statuses.get(url) == 200]


def page_quality(web: Web, manifest: WebManifest, *, exponent: float = DEFAULT_EXPONENT,
                 seed: int | None = None) -> PageQuality:
    """Zipf quality over a permutation (from `seed`, default the web's seed) of the crawl's pages."""
    seed = web.params.seed if seed is None else seed
    ids = crawled_pages(web, manifest)
    quality = zipf_quality(len(ids), exponent)
    order = np.random.default_rng((seed, _QUALITY_STREAM)).permutation(len(ids))
    urls = []
    for i in order.tolist():
        url = web.url(ids[i], manifest.port, manifest.tls_port)
        canon = canonicalize(url)
        if canon is None:
            raise ValueError(f"test web URL {url!r} has no canonical form; the quality oracle cannot name it")
        urls.append(canon)
    return PageQuality(urls, quality, float(exponent), seed)


def write_oracle(path: str | Path, quality: PageQuality | Mapping[str, float], header: Iterable[str] = ()) -> Path:
    """Write `URL\\tquality` lines (best first for a PageQuality), atomically; returns the path."""
    path = Path(path)
    items = zip(quality.urls, quality.quality.tolist()) if isinstance(quality, PageQuality) else quality.items()
    lines = [f"{_COMMENT} {h}" for h in header]
    if isinstance(quality, PageQuality):
        lines.append(f"{_COMMENT} Zipf quality = rank ** -{quality.exponent:g}, permutation seed {quality.seed}, "
                     f"{len(quality.urls)} pages, total {quality.total():.6f}")
    for url, q in items:
        if "\t" in url or "\n" in url or not q >= 0:
            raise ValueError(f"cannot write quality {q!r} for {url!r}: URLs must not hold tabs/newlines, quality >= 0")
        lines.append(f"{url}\t{q!r}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_oracle(path: str | Path) -> dict[str, float]:
    """The oracle file as {canonical URL: quality}: the frontier's own reader of `frontier.quality_file`."""
    return read_quality_file(path)

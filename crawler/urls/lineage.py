"""A URL's lineage (hops from its seed, the seed, the page that linked it) carried in the URL's own string.

Scope decisions (`scope.max_hops`, per-seed scope) need to know, for every
queued URL, how far it is from a seed and which seed led to it; the crawl log
wants the page that linked it. That lineage must wait wherever the URL waits:
the DUE's buffer and journal, the frontier's RAM queues, spill segments,
journal and checkpoints, the peer links' outboxes and spools. All of these
already hold a URL as one string, so the lineage rides in the string:

    <canonical URL> SP <hops> SP <seed fp, hex> SP <via fp, hex>

A canonical URL never holds a space (canonicalization percent-encodes it), so
the first space ends the URL, and `host_of`/`origin_of`, the splitter's owner
slicing and every store that keeps URL strings work unchanged on the tagged
string; what needs the bare URL (fingerprints, fetching, robots.txt, the
crawl log) takes `bare`. A string without a tag (from files written before
lineage existed) reads as hops 0 and unknown seed and referrer (0): such a
URL is never refused for its distance.

Cost: ~20-40 bytes more per queued URL (RAM of the frontier and DUE buffer,
bytes on disk and on the wire), one f-string per accepted link.
"""

from __future__ import annotations

from typing import NamedTuple

SEP = " "
NO_FP = 0           # the seed or referrer is not known (a seed's own via; an untagged string)


class Lineage(NamedTuple):
    """Where a URL came from: `hops` links followed from seed `seed` (a fingerprint), found on page `via`."""
    hops: int
    seed: int
    via: int


UNKNOWN = Lineage(0, NO_FP, NO_FP)


def tag(url: str, hops: int, seed: int, via: int) -> str:
    """The tagged form of a bare canonical URL."""
    return f"{url} {hops} {seed:x} {via:x}"


def tag_all(urls: list[str], hops: int, seed: int, via: int) -> list[str]:
    """The links of one page, all at one distance from one seed (hot path: one suffix per page)."""
    suffix = f" {hops} {seed:x} {via:x}"
    return [url + suffix for url in urls]


def bare(item: str) -> str:
    """The canonical URL of a tagged (or bare) string."""
    cut = item.find(SEP)
    return item if cut < 0 else item[:cut]


def bare_all(items: list[str]) -> list[str]:
    return [item.partition(SEP)[0] for item in items]


def hops_and_vias(items: list[str]) -> tuple[list[int], list[int]]:
    """Hop counts and referrers of a peer's batch (hot path with `scope.max_hops`: no Lineage per URL);
    an untagged or malformed string counts as hop 0, referrer unknown."""
    hops, vias = [], []
    for item in items:
        parts = item.split(SEP)
        try:
            h, v = int(parts[1]), int(parts[3], 16)
        except (ValueError, IndexError):
            h, v = 0, NO_FP
        hops.append(h)
        vias.append(v)
    return hops, vias


def split(item: str) -> tuple[str, Lineage]:
    """(URL, lineage) of a tagged string; an untagged or malformed tag reads as `UNKNOWN`."""
    url, sep, rest = item.partition(SEP)
    if not sep:
        return url, UNKNOWN
    parts = rest.split(SEP)
    try:
        hops, seed, via = int(parts[0]), int(parts[1], 16), int(parts[2], 16)
    except (ValueError, IndexError):
        return url, UNKNOWN
    if len(parts) != 3 or hops < 0:
        return url, UNKNOWN
    return url, Lineage(hops, seed, via)

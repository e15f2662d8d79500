"""URLs and fingerprints: one canonical string and one 64-bit number per URL.

Where this sits (DESIGN 1, 2.1): the parser hands every href of a page to
`canonicalize` (resolved against the page URL or its `<base href>`), and from
then on a URL is the canonical string plus its `fingerprint`. The URL filter,
the host splitter, both URL caches, the DUE, the stream log and the replay tool
all key on that one fingerprint, so two spellings of one resource must give
one canonical string, and the canonical string must never change meaning.

Canonical form (`canonical.py`):
- resolution by the WHATWG URL standard through ada (891/891 conformance
  cases, DESIGN 2.13): lower-case scheme and host, IDN hosts in punycode,
  IPv4/IPv6 hosts normalized, default port dropped, dot segments removed,
  empty path -> `/`, backslashes -> `/`, tabs/newlines and surrounding
  whitespace stripped;
- then ours: only `http`/`https` kept (None otherwise), fragment dropped,
  percent-escapes with upper-case hex and unreserved characters
  (`A-Z a-z 0-9 - . _ ~`) decoded, never creating a `.`/`..` path segment or
  a new escape out of a stray `%` (those escapes stay encoded);
- userinfo, an empty query `?`, parameter order and trailing slashes are kept.
`canonicalize` is idempotent and its output parses with ada to itself.

Fingerprints (`fingerprint.py`): `mmh3.hash64(s.encode(), signed=False)[0]`,
the low 64 bits of MurmurHash3 x64/128 with seed 0, for URLs
(`fingerprint`, `fingerprints` for a page's links as a uint64 array) and for
host names (`host_fingerprint`; a node owns a host when `host_fp % N` is its
id). `host_of` and `origin_of` cut a canonical URL by string slicing.

Speed (per link, the crawler's hottest path): the C API of ada is called
directly (`_ada.py`), the `%`-normalization only runs when the URL has a `%`,
and `resolve_canonical` takes a base already encoded once per page.
Figures: `python bench/parse_bench.py`.
"""

from crawler.urls.canonical import canonicalize, normalize_percent, resolve_canonical
from crawler.urls.fingerprint import fingerprint, fingerprints, host_fingerprint
from crawler.urls.parts import host_of, origin_of

__all__ = [
    "canonicalize",
    "fingerprint",
    "fingerprints",
    "host_fingerprint",
    "host_of",
    "normalize_percent",
    "origin_of",
    "resolve_canonical",
]

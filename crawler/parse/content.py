"""Content-seen test: one 64-bit fingerprint per fetched body (DESIGN 2.8).

Exact duplicate documents (mirrors, the same page under many URLs) are
recorded, but their links are not processed again. The fingerprint is the
same hash as URL fingerprints (`crawler.urls.fingerprint`), over the raw body
bytes: `mmh3.hash64(body, signed=False)[0]`, the low 64 bits of MurmurHash3
x64/128 with seed 0. Raw bytes, not decoded text, so it is cheap (C speed,
no decode) and independent of charset detection.
"""

from __future__ import annotations

import mmh3

CONTENT_SEED = 0  # part of the definition above; crawl logs store these values


def content_fingerprint(body: bytes) -> int:
    """64-bit unsigned fingerprint of a response body."""
    return mmh3.hash64(body, CONTENT_SEED, signed=False)[0]

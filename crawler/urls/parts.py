"""Host and origin of a canonical URL by string slicing (no full parse).

The splitter asks for the host of every URL it routes and the frontier for
the origin of every URL it queues, so these run once per link. A canonical
URL (see `canonical.py`) always has the shape
`scheme://[userinfo@]host[:port]/path[?query]`, with a `/` after the
authority, so a few `find` calls are enough. The functions are not meant for
arbitrary strings: canonicalize first.
"""

from __future__ import annotations

SCHEME_SEP = "://"


def _authority_span(url: str) -> tuple[int, int, int]:
    """(scheme end, host start, authority end) of a canonical URL."""
    scheme_end = url.find(SCHEME_SEP)
    start = scheme_end + len(SCHEME_SEP)
    end = url.find("/", start)
    if end < 0:  # not canonical (no path); be lenient
        end = len(url)
    at = url.rfind("@", start, end)  # userinfo never holds a raw '@' or '/'
    return scheme_end, (at + 1 if at >= 0 else start), end


def _host_end(url: str, start: int, end: int) -> int:
    """End of the host name (before any `:port`); IPv6 hosts keep their brackets."""
    if url.startswith("[", start):
        return url.find("]", start, end) + 1
    colon = url.find(":", start, end)
    return colon if colon >= 0 else end


def host_of(url: str) -> str:
    """Host of a canonical URL, without port or userinfo (`[::1]` keeps brackets).

    Hot path (per routed link): slicing only.
    """
    _, start, end = _authority_span(url)
    return url[start:_host_end(url, start, end)]


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a canonical URL (userinfo left out).

    Hot path (per queued link): slicing only.
    """
    scheme_end, start, end = _authority_span(url)
    return url[:scheme_end + len(SCHEME_SEP)] + url[start:end]

"""The URL of a refresh value: `<meta http-equiv=refresh content="5; url=/next">` and the HTTP
`Refresh` header, by the HTML standard's "parse a refresh value".

The standard's algorithm, step by step (HTML, "Interaction with the page",
the shared declarative refresh steps): optional whitespace, a time (digits,
then digits and dots ignored; a value starting with neither is not a
refresh), then `;`, `,` or whitespace, then optionally `url` `=` (any case,
whitespace around `=`), then the URL, whose enclosing quote is cut at its
matching quote (`url='a b.html'`). Returns the URL string, or None when the
value is not a refresh or refreshes the page itself (no URL).

A crawler follows a refresh with its URL like a redirect; a refresh without
one reloads the same page and is not a link.
"""

from __future__ import annotations

_WS = "\t\n\x0c\r "  # ASCII whitespace
_DIGITS = "0123456789"


def refresh_url(value: str) -> str | None:
    """The URL a refresh value points to (unresolved), or None (not a refresh, or no URL)."""
    n = len(value)
    pos = 0
    while pos < n and value[pos] in _WS:
        pos += 1
    start = pos
    while pos < n and value[pos] in _DIGITS:
        pos += 1
    if pos == start and (pos >= n or value[pos] != "."):
        return None  # no time: not a refresh
    while pos < n and (value[pos] in _DIGITS or value[pos] == "."):
        pos += 1
    if pos < n:
        if value[pos] not in _WS and value[pos] not in ";,":
            return None
        while pos < n and value[pos] in _WS:
            pos += 1
        if pos < n and value[pos] in ";,":
            pos += 1
        while pos < n and value[pos] in _WS:
            pos += 1
    if pos >= n:
        return None  # a refresh of the page itself
    url_start = pos  # "parse": the rest as it is, when the url= prefix is not there
    if value[pos] in "Uu":
        pos += 1
        if pos < n and value[pos] in "Rr":
            pos += 1
            if pos < n and value[pos] in "Ll":
                pos += 1
                while pos < n and value[pos] in _WS:
                    pos += 1
                if pos < n and value[pos] == "=":
                    pos += 1
                    while pos < n and value[pos] in _WS:
                        pos += 1
                    return _skip_quotes(value, pos)
        return value[url_start:]
    return _skip_quotes(value, pos)


def _skip_quotes(value: str, pos: int) -> str:
    """The standard's "skip quotes" and truncation at the matching quote."""
    if pos < len(value) and value[pos] in "'\"":
        quote = value[pos]
        rest = value[pos + 1:]
        end = rest.find(quote)
        return rest if end < 0 else rest[:end]
    return value[pos:]

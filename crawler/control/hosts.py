"""Host patterns of the operator's commands: `HOST` names one host, `.DOMAIN` a domain and every host in it.

`block` and `delay` take the same patterns. A URL's host is the canonical
one (`crawler.urls.host_of`: lower case, no port), so a pattern is lowered
and checked to be a bare host: no scheme, port, path or wildcard, which a
user might type and which would silently match nothing. `.example.org`
matches `example.org` itself and `a.b.example.org`; `example.org` matches
only that host.
"""

from __future__ import annotations

import re

# A host as canonical URLs carry it: DNS labels (IDNs as punycode), an IPv4 address, or [IPv6].
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST = re.compile(rf"^(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9a-f:.]+\])$")


class PatternError(ValueError):
    """A pattern that is not `HOST` or `.DOMAIN`; the message says what was wrong."""


def parse_pattern(text: str) -> str:
    """The canonical form of a pattern (lower case, no trailing dot); raises PatternError."""
    p = text.strip().lower()
    if p.endswith(".") and len(p) > 1:
        p = p[:-1]
    host = p[1:] if p.startswith(".") else p
    if "://" in host or "/" in host:
        raise PatternError(f"{text!r}: give a host (example.org) or a domain (.example.org), not a URL")
    if ":" in host and not host.startswith("["):
        raise PatternError(f"{text!r}: give the host without a port (a block or delay holds for every port)")
    if "*" in host:
        raise PatternError(f"{text!r}: no wildcards; .example.org covers example.org and every host in it")
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        raise PatternError(f"{text!r}: not a host name") from None
    if not _HOST.match(host):
        raise PatternError(f"{text!r}: not a host name")
    return ("." + host) if p.startswith(".") else host


class HostPatterns:
    """Patterns with a value each (True for blocks, seconds for delays); the most specific one that matches
    a host wins: the host itself, then its nearest enclosing domain."""

    def __init__(self, patterns: dict[str, float] | None = None) -> None:
        self._hosts: dict[str, float] = {}
        self._domains: dict[str, float] = {}        # without the leading dot
        for pattern, value in (patterns or {}).items():
            self.set(pattern, value)

    def set(self, pattern: str, value: float) -> None:
        """Add or change a pattern given in canonical form (`parse_pattern`)."""
        if pattern.startswith("."):
            self._domains[pattern[1:]] = value
        else:
            self._hosts[pattern] = value

    def remove(self, pattern: str) -> bool:
        """Whether the pattern was there."""
        if pattern.startswith("."):
            return self._domains.pop(pattern[1:], None) is not None
        return self._hosts.pop(pattern, None) is not None

    def lookup(self, host: str) -> float | None:
        """The value of the most specific pattern matching `host`, None if none does. Cost: one dict probe,
        plus one per label of the host when there are domain patterns."""
        value = self._hosts.get(host)
        if value is not None or not self._domains:
            return value
        name = host
        while True:
            value = self._domains.get(name)
            if value is not None:
                return value
            dot = name.find(".")
            if dot < 0:
                return None
            name = name[dot + 1:]

    def matches(self, host: str) -> bool:
        return self.lookup(host) is not None

    def __bool__(self) -> bool:
        return bool(self._hosts or self._domains)

    def as_dict(self) -> dict[str, float]:
        """pattern -> value, sorted (JSON and the status table)."""
        out = dict(self._hosts)
        out.update(("." + d, v) for d, v in self._domains.items())
        return dict(sorted(out.items()))

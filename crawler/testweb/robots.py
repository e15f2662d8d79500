"""robots.txt of the test web: the file each host serves and the verdict it implies.

The same `RobotsPolicy` renders the text the server sends and answers
`allowed(path)` for the manifest, so the two cannot disagree. The evaluation
is RFC 9309 restricted to what the test web writes (plain path prefixes, no
`*` or `$`): the longest matching rule wins, `Allow` wins a tie, no match
allows. A 4xx robots.txt allows everything, a 5xx disallows everything
(RFC 9309 2.3.1.3/2.3.1.4).

Every served file also carries a group for a named bot the crawler does not
match (`OTHER_AGENT`) that disallows everything, so a crawler that picks the
wrong group fetches nothing from that host and the test notices.
"""

from __future__ import annotations

from dataclasses import dataclass

OTHER_AGENT = "SomeOtherBot"
"""A product token no crawler of this project uses: its group must be ignored."""

OTHER_AGENT_DELAY_S = 7.0
"""Crawl-delay of the named group: a crawler obeying it is reading the wrong group."""

LAYOUTS = 3
"""Number of textual layouts (group order, key case, comments) robots files cycle through."""


@dataclass(frozen=True)
class RobotsPolicy:
    """What one host answers at /robots.txt and what that means for a crawler."""

    status: int = 200
    """HTTP status of /robots.txt: 200 (the file below), 404 (allow all) or 500 (disallow all)."""
    disallow: tuple[str, ...] = ()
    """Path prefixes disallowed for `User-agent: *`."""
    allow: tuple[str, ...] = ()
    """Path prefixes allowed for `User-agent: *` (override a shorter Disallow)."""
    crawl_delay_s: float | None = None
    """Crawl-delay of the `*` group, or None."""
    layout: int = 0
    """Which textual layout the file uses (0..LAYOUTS-1); the meaning is the same."""

    def allowed(self, path: str) -> bool:
        """True if a crawler using the `*` group may fetch `path` (RFC 9309 longest match)."""
        if self.status >= 500:
            return False
        if self.status != 200:
            return True
        best_len = -1
        verdict = True
        for prefix in self.disallow:
            if path.startswith(prefix) and len(prefix) > best_len:
                best_len, verdict = len(prefix), False
        for prefix in self.allow:
            if path.startswith(prefix) and len(prefix) >= best_len:
                best_len, verdict = len(prefix), True
        return verdict

    def render(self, host_name: str) -> str:
        """The robots.txt text (only meaningful when status == 200)."""
        star = ["User-agent: *"]
        star += [f"Disallow: {p}" for p in self.disallow]
        star += [f"Allow: {p}" for p in self.allow]
        if self.crawl_delay_s is not None:
            star.append(f"Crawl-delay: {self.crawl_delay_s:g}")
        if not self.disallow and not self.allow:
            star.append("Disallow:")
        other = [f"User-agent: {OTHER_AGENT}", "Disallow: /", f"Crawl-delay: {OTHER_AGENT_DELAY_S:g}"]
        head = [f"# robots.txt for {host_name}", "# synthetic test web; see crawler/testweb"]
        if self.layout == 0:
            lines = head + other + [""] + star
        elif self.layout == 1:
            lines = head + star + [""] + other
        else:  # lower-case keys, a comment inside the group, blank lines around
            lines = head + [""] + [_lower_key(x) for x in other] + ["", "# everyone else"]
            lines += [_lower_key(x) for x in star] + [""]
        return "\n".join(lines) + "\n"


def _lower_key(line: str) -> str:
    key, _, value = line.partition(":")
    return f"{key.lower()}:{value}"

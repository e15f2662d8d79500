"""The crawler trap: pages on trap.<domain> that link ever deeper, forever.

Three families, each infinite, each bounded by one of the crawler's two
path rules (DESIGN 2.1 filter; `CrawlRules` in manifest.py):

- `/t/x/x/x/...`: one child `x/`. Only the repeated-segment rule stops it.
- `/d/l1/l2/.../lk/`: one child `l{k+1}/`, every segment distinct. Only the
  depth rule stops it.
- `/cal/2026/11/` then any sequence of `next/` and `prev/`: two children,
  a binary tree. The repeated-segment rule bounds each of `next` and `prev`
  separately, so a crawler that counts only adjacent repeats fetches far
  more than the manifest says.

Every trap page also links back to `/`. Paths are pure functions of the
request path, so the server needs no state and the manifest enumerates the
bounded part with the same functions.
"""

from __future__ import annotations

REPEAT_PREFIX = "/t/"
DEEP_PREFIX = "/d/"
CAL_PREFIX = "/cal/2026/11/"
ENTRIES = (REPEAT_PREFIX, DEEP_PREFIX, CAL_PREFIX)
"""Trap pages the trap host's root links to."""

_CAL_STEPS = ("next", "prev")


def is_trap_page(path: str) -> bool:
    """True if `path` is one of the trap's infinitely many pages (the root excluded)."""
    return _children(path) is not None


def trap_children(path: str) -> list[str]:
    """Absolute paths `path` links to, deeper first, then the root `/`."""
    if path == "/":
        return list(ENTRIES)
    children = _children(path)
    if children is None:
        return []
    return children + ["/"]


def _children(path: str) -> list[str] | None:
    if not path.endswith("/"):
        return None
    if path.startswith(REPEAT_PREFIX):
        rest = path[len(REPEAT_PREFIX):]
        if all(s == "x" for s in rest.split("/")[:-1]):
            return [path + "x/"]
        return None
    if path.startswith(DEEP_PREFIX):
        segs = path[len(DEEP_PREFIX):].split("/")[:-1]
        if all(s == f"l{i + 1}" for i, s in enumerate(segs)):
            return [path + f"l{len(segs) + 1}/"]
        return None
    if path.startswith(CAL_PREFIX):
        segs = path[len(CAL_PREFIX):].split("/")[:-1]
        if all(s in _CAL_STEPS for s in segs):
            return [path + f"{s}/" for s in _CAL_STEPS]
        return None
    return None

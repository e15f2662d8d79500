"""A nearer path to a page counts: what `scope.max_hops` cut from a page reached far is followed when the page
is found nearer, without fetching it again (docs/scope.md, "Same URL by two paths").

The DUE lets a URL through once: the first path that reaches it gives its hop
count. Where that matters is the hop limit m (`scope.max_hops`): a page
queued or fetched at hop m has its links cut (hop m + 1), but would have them
followed had it been found at hop m - 1 or less. So, at the owner node:

- a URL refused for hops is not offered to the DUE (never marked seen): a
  nearer path brings it back as a new URL;
- a URL queued at hop m (`nearest`, fingerprint -> smallest hop count seen
  and the page that linked it there): an arrival of the same URL at a
  smaller count lowers it, and the page is fetched with that smaller count
  and referrer (`settle`);
- a page fetched at hop m whose links were cut (`cut`, fingerprint -> hop
  count, seed and the cut links): an arrival at a smaller count sends those
  links on again, at that count + 1, through filter, splitter and DUE, and
  the page is not fetched again.

Seeds are at hop 0 whatever path reaches them. Limits (docs/scope.md): both
maps are bounded (`scope.memory_urls`, `scope.memory_links`; the oldest
entries are forgotten first, counted in `forgotten_urls`/`forgotten_links`);
a nearer path to a page fetched below the limit is not propagated (its links
were all followed; only their own counts stay as first found); the maps are
saved with every checkpoint (state/scope_hops.jsonl), so a crash loses
what changed since the last one.

Hot path: `arrivals` is one or two dict lookups per URL entering the DUE, and
only when `scope.max_hops` is set.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import cast

from crawler.state import CacheState, StateStore
from crawler.urls.lineage import NO_FP, Lineage

STATE_VERSION = 1
Cut = tuple[int, int, list[str]]          # (hops, seed fp, the links cut) of one fetched page


class NearerPaths(CacheState):
    """The boundary's memory: smallest hop counts of URLs queued at the limit, links cut from pages fetched
    there."""

    name = "scope_hops"
    state_version = STATE_VERSION

    def __init__(self, max_hops: int | None, memory_urls: int, memory_links: int,
                 seed_fps: frozenset[int] = frozenset()) -> None:
        self.max_hops = max_hops
        self.memory_urls = memory_urls
        self.memory_links = memory_links
        self.seed_fps = seed_fps
        self.nearest: dict[int, tuple[int, int]] = {}     # fp -> (smallest hops, the page linking it there)
        self.cut: dict[int, Cut] = {}
        self.cut_links = 0
        self.lowered = 0            # queued URLs whose hop count a nearer path lowered
        self.resent_links = 0       # cut links sent on again after a nearer path
        self.forgotten_urls = 0
        self.forgotten_links = 0
        self._changes = 0
        self._saved_changes = 0

    @property
    def active(self) -> bool:
        return self.max_hops is not None

    def arrivals(self, fps: Iterable[int], hops: Iterable[int], vias: Iterable[int]
                 ) -> list[tuple[list[str], Lineage]]:
        """Note URLs about to be offered to the DUE (each with its hop count and referring page); returns
        the cut links to send on again, each group with its lineage (hop count, seed, the page holding them)."""
        limit = self.max_hops
        if limit is None:
            return []
        nearest, cut = self.nearest, self.cut
        resend: list[tuple[list[str], Lineage]] = []
        for fp, h, via in zip(fps, hops, vias):
            if h >= limit:
                if h == limit and fp not in nearest:
                    self._remember(fp, h, via)
                continue
            known = nearest.get(fp)
            if known is not None and h < known[0]:
                nearest[fp] = (h, via)
                self.lowered += 1
                self._changes += 1
            entry = cut.pop(fp, None) if cut else None
            if entry is not None:
                links = entry[2]
                self.cut_links -= len(links)
                self.resent_links += len(links)
                self._changes += 1
                resend.append((links, Lineage(h + 1, entry[1], fp)))
        return resend

    def settle(self, fp: int, lineage: Lineage) -> Lineage:
        """The lineage a page is fetched with: a seed's hop 0, or the smallest count any path brought (and
        that path's referrer); the page leaves `nearest` (its links are about to be sent on or cut)."""
        if fp in self.seed_fps:
            lineage = Lineage(0, fp, NO_FP)
        known = self.nearest.pop(fp, None)
        if known is not None:
            self._changes += 1
            if known[0] < lineage.hops:
                return lineage._replace(hops=known[0], via=known[1])
        return lineage

    def remember_cut(self, fp: int, hops: int, seed: int, links: list[str]) -> None:
        """A page fetched at `hops` had `links` cut for hops: keep them for a nearer path."""
        if not self.memory_links or len(links) > self.memory_links:
            self.forgotten_links += len(links)
            return
        old = self.cut.pop(fp, None)
        if old is not None:
            self.cut_links -= len(old[2])
        while self.cut and self.cut_links + len(links) > self.memory_links:
            oldest = next(iter(self.cut))
            gone = self.cut.pop(oldest)[2]
            self.cut_links -= len(gone)
            self.forgotten_links += len(gone)
        self.cut[fp] = (hops, seed, links)
        self.cut_links += len(links)
        self._changes += 1

    def _remember(self, fp: int, hops: int, via: int) -> None:
        if not self.memory_urls:
            self.forgotten_urls += 1
            return
        if len(self.nearest) >= self.memory_urls:
            del self.nearest[next(iter(self.nearest))]
            self.forgotten_urls += 1
        self.nearest[fp] = (hops, via)
        self._changes += 1

    def stats(self) -> dict:
        return {"boundary_urls": len(self.nearest), "cut_pages": len(self.cut), "cut_links": self.cut_links,
                "lowered": self.lowered, "resent_links": self.resent_links,
                "forgotten_urls": self.forgotten_urls, "forgotten_links": self.forgotten_links}

    # --- the state protocol (crawler/state.py) ---------------------------------------------
    def _snapshot(self) -> object:
        """Shallow copies: a cut entry is replaced, never changed in place."""
        return self.nearest.copy(), self.cut.copy()

    @staticmethod
    def _records(snapshot: object) -> Iterator[dict]:
        nearest, cut = cast(tuple[dict[int, tuple[int, int]], dict[int, Cut]], snapshot)
        for fp, (hops, via) in nearest.items():
            yield {"fp": f"{fp:x}", "hops": hops, "via": f"{via:x}"}
        for fp, (hops, seed, links) in cut.items():
            yield {"fp": f"{fp:x}", "hops": hops, "seed": f"{seed:x}", "links": links}

    def restore(self, store: StateStore) -> None:
        """Load the maps an earlier process saved (a record that makes no sense raises; the part starts empty)."""
        records = store.read(self.name, STATE_VERSION)
        if not records:
            return
        nearest: dict[int, tuple[int, int]] = {}
        cut: dict[int, Cut] = {}
        for r in records:
            fp, hops = int(r["fp"], 16), int(r["hops"])
            if "links" in r:
                links = r["links"]
                if not isinstance(links, list) or not all(isinstance(u, str) for u in links):
                    raise ValueError(f"links of {r['fp']} are not a list of URLs")
                cut[fp] = (hops, int(r["seed"], 16), links)
            else:
                nearest[fp] = (hops, int(r["via"], 16))
        self.nearest, self.cut = nearest, cut
        self.cut_links = sum(len(c[2]) for c in cut.values())
        self._changes = self._saved_changes = 0

"""The synthetic web as plain data: hosts, URLs, links, robots rules, redirects.

`build_web(WebParams)` returns a `Web`: every URL the server can answer gets an
integer id (its host, kind and canonical path), and every page's out-links are
rows of a CSR table (`link_off` into `link_tgt`/`link_form`/`link_elem`/
`link_flags`). Rendering (pages.py) turns a row into markup, choosing for each
link the string form stored with it; the manifest (manifest.py) walks the same
rows by id. So what a page says and what the manifest expects come from one
table and cannot drift.

Why generated and not files: the web must scale from a few pages to 50k+,
come out byte-identical for a seed, and know the canonical target of every
link string it prints. Generation is vectorised with numpy (one pass per
decision over all links), so 50k pages / 3M links take a few seconds.

Link statistics follow Broder, Najork & Wiener (2003): links per page are
lognormal (mean ~60, median ~23), ~30% of a page's links repeat an earlier
link of the same page, ~80% stay on the page's host, and cross-host targets
follow a Zipf popularity over hosts. Reachability is guaranteed by a spanning
tree of ordinary links: every regular page is linked from a regular page of
its host that is itself reachable, every host root from a reachable page of a
lower-numbered host, the first `seed_hosts` roots being the seeds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from types import MappingProxyType

import numpy as np

from .robots import LAYOUTS, RobotsPolicy

MIB = 1 << 20
MAX_HOST_LATENCY_S = 10.0
"""Bound of a host's response delay (the server sleeps that long per response)."""
_LATENCY_STREAM = 0x5EED1A7
"""Second seed word of the latency generator: its own stream, so turning latency on changes no link."""
_LATENCY_RESOLUTION_DIGITS = 3  # latencies are whole milliseconds
_TLS_STREAM = 0x7150
"""Second seed word of the generator choosing the HTTPS hosts: turning HTTPS on changes no link."""


@dataclass(frozen=True)
class WebParams:
    """Everything that decides the web: equal params give a byte-identical web."""

    # What to build.
    seed: int = 1
    """Seed of every random choice."""
    hosts: int = 100
    """Number of ordinary hosts h000.<domain> ..."""
    pages: int = 5000
    """Total HTML pages on the ordinary hosts (special hosts add a few dozen)."""
    domain: str = "web.test"
    """Suffix of every host name of the web."""
    seed_hosts: int = 3
    """Seeds are the roots `/` of the first this many ordinary hosts."""

    # robots.txt.
    crawl_delay_hosts: float = 0.1
    """Share of ordinary hosts whose robots.txt has a Crawl-delay (picked among the smaller hosts)."""
    crawl_delay_min_s: float = 0.05
    """Smallest Crawl-delay written."""
    crawl_delay_max_s: float = 0.3
    """Largest Crawl-delay written."""
    disallow_private_hosts: float = 0.5
    """Share of ordinary hosts whose robots.txt has `Disallow: /private/`."""
    allow_override_hosts: float = 0.5
    """Share of those that also have `Allow: /private/open/` (longest match wins)."""

    # Special hosts and links.
    slow_host: bool = True
    """Serve slow.<domain>, every response of which is delayed by `slow_delay_s`."""
    slow_delay_s: float = 0.3
    """Delay of every slow-host response."""
    bad_host: bool = True
    """Serve bad.<domain> with hostile responses (malformed, charsets, endless, huge, gzip bomb, stall, loop)."""
    trap: bool = True
    """Serve trap.<domain>, an infinite web bounded only by the crawler's path rules."""
    private_links: bool = False
    """Link to private addresses (127.0.0.1:PORT, 169.254.169.254): only for crawls with the private-network guard on."""
    nxdomain_links: bool = True
    """Link to hosts under .invalid that never resolve."""
    robots_error_answers: int = 1
    """robots500's robots.txt answers 500 this many times, then 200 with `Disallow: /`, as a server back
    from an outage (0 = always 500). The server counts; the static (nginx) export always answers 500."""

    # Hostile limits (bad host).
    big_body_bytes: int = 20 * MIB
    """Content-Length of the too-large body (streamed lazily)."""
    stall_s: float = 60.0
    """How long the stalling response waits after half its body."""
    endless_max_s: float = 60.0
    """Server-side bound of the endless body, in time."""
    endless_max_bytes: int = 256 * MIB
    """Server-side bound of the endless body, in bytes."""
    gzip_bomb_bytes: int = 1024 * MIB
    """Size the gzip bomb inflates to."""

    # Link statistics (Broder, Najork & Wiener 2003: mean 62.55, median 23, ~30% repeats, 81.5% local).
    links_median: float = 23.0
    """Median links per page."""
    links_mean: float = 60.0
    """Mean links per page."""
    links_max: int = 2000
    """No page has more links than this."""
    repeat_share: float = 0.30
    """Share of a page's links that repeat an earlier link of the same page."""
    same_host_share: float = 0.80
    """Share of links that point to the page's own host."""
    host_popularity_exponent: float = 1.0
    """Zipf exponent of cross-host target popularity over hosts (h000 most popular)."""
    host_size_exponent: float = 0.7
    """Zipf exponent of host sizes (h000 largest)."""
    min_host_pages: int = 5
    """Pages every ordinary host has at least (when `pages` allows)."""

    # Per-host response times (all zero by default: the web is served as fast as it can be).
    host_latency_share: float = 0.0
    """Share of ordinary hosts that are slow servers (chosen from the seed; see `Web.host_latency_s`)."""
    host_slow_latency_min_s: float = 0.2
    """Least delay of every response of a slow ordinary host."""
    host_slow_latency_max_s: float = 1.0
    """Largest delay of every response of a slow ordinary host (uniform between min and max)."""
    host_fast_latency_min_s: float = 0.0
    """Least delay of every response of the other (fast) ordinary hosts."""
    host_fast_latency_max_s: float = 0.0
    """Largest delay of every response of a fast ordinary host (uniform between min and max)."""

    # HTTPS (all off by default: the web is plain HTTP). The hosts are chosen from the seed by a
    # generator of their own, so the shares change which scheme a host speaks, never a link.
    https_share: float = 0.0
    """Share of ordinary hosts served over HTTPS only (linked as https://host:TLS_PORT/...)."""
    https_redirect_share: float = 0.0
    """Share of ordinary hosts that answer every http:// request with 301 to the same path on https://
    (linked as http://, as on the web; their pages are served over HTTPS)."""
    tls_bad_hosts: bool = False
    """Serve three HTTPS hosts whose certificates fail verification (self-signed, expired, issued for
    another name), linked from ordinary pages like the other special hosts."""

    def validate(self) -> None:
        """Raise ValueError naming the parameter if the web cannot be built."""
        _validate(self)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> WebParams:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class Role(str, Enum):
    """What a host is for."""

    ORDINARY = "ordinary"
    SLOW = "slow"
    BAD = "bad"
    TRAP = "trap"
    NOROBOTS = "norobots"
    ROBOTS500 = "robots500"
    NXDOMAIN = "nxdomain"
    PRIVATE = "private"
    TLS_SELF_SIGNED = "tls-self-signed"
    TLS_EXPIRED = "tls-expired"
    TLS_WRONG_NAME = "tls-wrong-name"


class Tls(IntEnum):
    """Which scheme a host speaks."""

    NONE = 0       # http:// only; an https:// request is answered 421
    ONLY = 1       # https:// only; an http:// request is answered 421 (nothing serves HTTP for the name)
    REDIRECT = 2   # http:// answers 301 to the same path on https://, where the content is


REMOTE_ROLES = frozenset({Role.NXDOMAIN, Role.PRIVATE})
"""Hosts whose URLs never reach the server (the crawler refuses or cannot resolve them)."""
HOSTILE_ROLES = frozenset({Role.SLOW, Role.BAD, Role.TRAP})
"""Hosts the static (nginx) export leaves out; there they answer 404."""
TLS_BAD_ROLES = (Role.TLS_SELF_SIGNED, Role.TLS_EXPIRED, Role.TLS_WRONG_NAME)
"""Hosts whose certificate a verifying client refuses (in this order in the web)."""
TLS_BAD_HOST_PAGES = 2
"""Pages of each bad-certificate host (`/` and /p/1.html), what a client that does not verify fetches."""


class Kind(IntEnum):
    """What a URL answers."""

    PAGE = 0       # 200 text/html with links
    IMAGE = 1      # 200 image/png
    CSS = 2        # 200 text/css
    REDIRECT = 3   # 301/302 with Location
    MISSING = 4    # 404 text/html without links
    CASE = 5       # a bad-host case (see Case)
    TRAP_ROOT = 6  # trap host root: links into trap.py's families
    REMOTE = 7     # never reaches the server


class Elem(IntEnum):
    """Element (and attribute) a link is written as: the crawler's link sources."""

    A = 0
    AREA = 1
    IFRAME = 2
    FORM = 3
    LINK_ALT = 4
    IMG = 5
    EMBED = 6
    SOURCE = 7
    LINK_CSS = 8
    LINK_ICON = 9
    FRAME = 10


class Form(IntEnum):
    """How a link's URL is written; every form resolves to the same canonical target."""

    PATH_ABS = 0     # /p/1.html
    REL = 1          # p/1.html, ../x/y.html (relative to the base)
    DOT_REL = 2      # ./p/1.html
    ABS = 3          # http://h001.web.test:PORT/p/1.html
    ABS_UPPER = 4    # HTTP://H001.WEB.TEST:PORT/p/1.html
    SCHEME_REL = 5   # //h001.web.test:PORT/p/1.html
    FRAGMENT = 6     # /p/1.html#comments
    PCT = 7          # /p/%7Euser.html (an unreserved character escaped)
    DOTSEG = 8       # /news/../p/1.html
    SPACES = 9       # "  /p/1.html  " (stripped by the URL parser)
    ENTITY = 10      # /p/&#49;.html (a character reference in the attribute)
    NO_SLASH = 11    # http://h001.web.test:PORT (root, empty path)
    SELF_FRAG = 12   # #main (the page itself)
    SELF_EMPTY = 13  # href="" or a valueless href (the page itself)


# Share of each random link form (PATH_ABS .. ENTITY); the self forms are only used for self links.
FORM_WEIGHTS = (0.33, 0.20, 0.05, 0.15, 0.03, 0.04, 0.07, 0.04, 0.03, 0.02, 0.02, 0.02)

NOFOLLOW = 1
"""`link_flags` bit: written as `<a rel="nofollow">`."""


class Case(str, Enum):
    """The bad host's hostile responses, one path each."""

    MALFORMED = "malformed"
    CP1252 = "cp1252"
    NOCHARSET = "nocharset"
    SHIFT_JIS = "sjis"
    ENDLESS = "endless"
    TOO_LARGE = "too-large"
    GZIP_BOMB = "gzip-bomb"
    STALL = "stall"


CASE_PATHS = MappingProxyType({
    Case.MALFORMED: "/malformed.html",
    Case.CP1252: "/cp1252.html",
    Case.NOCHARSET: "/nocharset.html",
    Case.SHIFT_JIS: "/sjis.html",
    Case.ENDLESS: "/endless.html",
    Case.TOO_LARGE: "/big.html",
    Case.GZIP_BOMB: "/bomb.html",
    Case.STALL: "/stall.html",
})
LINKING_CASES = (Case.MALFORMED, Case.CP1252, Case.NOCHARSET, Case.SHIFT_JIS)
"""Cases answered 200 text/html whose links the crawler must extract."""
FAILING_CASES = (Case.ENDLESS, Case.TOO_LARGE, Case.GZIP_BOMB, Case.STALL)
"""Cases a correct crawler requests once and records as failures (no links)."""
LOOP_PATHS = ("/loop/a", "/loop/b")

NX_HOSTS = 3
"""Number of nxN.gone.invalid hosts linked when nxdomain_links."""
NX_SUFFIX = "gone.invalid"
PRIVATE_URLS = (("127.0.0.1", True, "/"), ("169.254.169.254", False, "/latest/meta-data/"))
"""(host, carries the web's port, path) of the private-address links."""

# Words for paths, titles and text (ASCII only: URLs stay unambiguous).
DIRS = ("news", "blog", "docs", "shop", "about", "archive", "products", "help", "en", "people",
        "events", "media", "topics", "world", "tech", "science", "sport", "2024", "2025", "v2",
        "guides", "reference", "community", "press")
WORDS = ("river", "stone", "market", "garden", "signal", "harbor", "engine", "forest", "letter",
         "window", "paper", "silver", "bridge", "candle", "winter", "summer", "orbit", "pixel",
         "quartz", "meadow", "anchor", "canvas", "desert", "ember", "falcon", "glacier", "hollow",
         "island", "jungle", "kettle", "lantern", "mirror", "needle", "oasis", "pepper", "quiver",
         "ribbon", "saddle", "thunder", "valley", "walnut", "yonder", "zephyr", "atlas", "beacon",
         "cobalt", "delta", "echo", "fable", "granite", "harvest", "ivory", "jasper", "kernel",
         "lumen", "mosaic", "nectar", "opal", "prairie", "quill", "rampart", "sonnet", "timber")

# Generation shares (documented constants, not tuning knobs of the contract).
_SAME_HOST_MIX = (("page", 0.86), ("image", 0.07), ("redirect", 0.02), ("missing", 0.02),
                  ("private", 0.02), ("css", 0.01))
_ZIPF_SHARE_IN_HOST = 0.3      # same-host page picks that prefer popular (low-numbered) pages
_CROSS_ROOT_SHARE = 0.4        # cross-host links that go to the other host's root
_SIZE_NOISE = 0.5              # spread of log(host size) when matching link counts to hosts
_DEDUPE_ROUNDS = 2             # re-draws of accidental repeats (repeats are meant to be chosen)
_NOFOLLOW_SHARE = 0.02         # random <a> links to regular pages written rel=nofollow
_META_NOFOLLOW_SHARE = 0.02    # regular pages with <meta name=robots content=nofollow>
_BASE_SHARE = 0.04             # regular pages with <base href>
_SELF_LINK_SHARE = 0.15        # pages with a link to themselves (#main or href="")
_NX_LINK_SHARE = 0.005         # regular pages linking an NXDOMAIN host
_SPECIAL_LINKS = 3             # random pages linking each special host (besides h000's root)
_NONCRAWLABLE_MAX = 3          # mailto/javascript/tel/data links per page: 0..this
_PAGE_ELEMS = ((Elem.A, 0.93), (Elem.AREA, 0.02), (Elem.IFRAME, 0.02), (Elem.FORM, 0.015), (Elem.LINK_ALT, 0.015))
_IMAGE_ELEMS = ((Elem.IMG, 0.85), (Elem.EMBED, 0.04), (Elem.SOURCE, 0.04), (Elem.LINK_ICON, 0.03), (Elem.A, 0.04))
_REDIRECT_MIX = (("page", 0.5), ("cross", 0.15), ("missing", 0.15), ("chain", 0.2))
_FRAMES_MIN_PAGES = 30         # h000 gets a frameset page (and its two frames) when it has this many pages
_FRAME_PAGES = 3
# Composition of an ordinary host with n HTML pages (the rest are regular pages, root first).
_PAGES_PER_PRIVATE = 25        # pages under /private/ (half under /private/open/)
_MIN_PAGES_FOR_PRIVATE = 5
_PAGES_PER_NOFOLLOW_ONLY = 50  # /nf/N.html, linked only by rel=nofollow
_PAGES_PER_MOVED = 60          # /moved/N.html, reachable only through a redirect
_MIN_PAGES_FOR_META_NOFOLLOW = 30
_PAGES_PER_REDIRECT = 40       # /r/N besides those to moved pages
_PAGES_PER_MISSING = 40        # /gone/N.html, 404
_PAGES_PER_IMAGE = 8           # /img/N.png
_MIN_IMAGES = 2


@dataclass(frozen=True)
class Host:
    """One virtual host."""

    index: int
    name: str
    role: Role
    robots: RobotsPolicy
    with_port: bool = True
    """URLs carry the web's port (False for the remote hosts on default port 80)."""
    tls: Tls = Tls.NONE
    """The scheme(s) the host speaks."""

    def origin(self, port: int, tls_port: int = 0) -> str:
        """Origin of the host's URLs as other pages write them (http:// for a redirecting host)."""
        if self.tls is Tls.ONLY:
            return f"https://{self.name}:{tls_port}"
        return f"http://{self.name}:{port}" if self.with_port else f"http://{self.name}"

    def content_origin(self, port: int, tls_port: int = 0) -> str:
        """Origin the host's content is served from (https:// for a redirecting host)."""
        if self.tls is Tls.NONE:
            return self.origin(port)
        return f"https://{self.name}:{tls_port}"

    @property
    def content_https(self) -> bool:
        """True if the host's pages are served over HTTPS (their relative links resolve to https://)."""
        return self.tls is not Tls.NONE

    @property
    def link_https(self) -> bool:
        """True if absolute links to the host are written https://."""
        return self.tls is Tls.ONLY


@dataclass(frozen=True)
class Base:
    """A page's `<base href>`: the host and path relative links resolve against."""

    host: int
    path: str
    form: int  # 0 absolute, 1 path-absolute (same host only), 2 upper-case absolute

    @property
    def dir(self) -> str:
        return self.path[: self.path.rfind("/") + 1]


@dataclass(frozen=True)
class Redirect:
    target: int
    status: int
    form: int  # 0 absolute, 1 path-absolute, 2 relative, 3 upper-case absolute


@dataclass
class Web:
    """The generated web. Arrays are indexed by URL id; link rows by `link_off`."""

    params: WebParams
    hosts: list[Host]
    url_host: np.ndarray          # int32
    url_kind: np.ndarray          # int8 (Kind)
    url_path: list[str]           # canonical path
    link_off: np.ndarray          # int64, len = urls + 1
    link_tgt: np.ndarray          # int32
    link_form: np.ndarray         # uint8 (Form)
    link_elem: np.ndarray         # uint8 (Elem)
    link_flags: np.ndarray        # uint8 (NOFOLLOW)
    meta_nofollow: np.ndarray     # bool per URL
    noncrawlable: np.ndarray      # uint8 per URL: extra mailto/javascript/tel/data links
    bases: dict[int, Base]
    redirects: dict[int, Redirect]
    cases: dict[int, Case]
    frameset: frozenset[int]
    seed_ids: list[int]
    stat_pages: np.ndarray        # ids of the ordinary pages the link statistics describe
    paths: list[dict[str, int]] = field(repr=False)
    host_by_name: dict[str, int] = field(repr=False)
    host_latency_s: np.ndarray = field(repr=False)
    """float64 per host index: how long the server delays each response of the host
    (ordinary hosts from the latency params, the slow host `slow_delay_s`, others 0)."""

    @property
    def urls(self) -> int:
        return len(self.url_path)

    def url(self, uid: int, port: int, tls_port: int = 0) -> str:
        """Canonical URL of `uid` where it is answered, when the web is served on `port` (and HTTPS
        on `tls_port`): https:// for the pages of a redirecting host."""
        return self.hosts[int(self.url_host[uid])].content_origin(port, tls_port) + self.url_path[uid]

    def link_url(self, uid: int, port: int, tls_port: int = 0) -> str:
        """`uid` as pages write it absolutely: http:// for a redirecting host (answered with 301)."""
        return self.hosts[int(self.url_host[uid])].origin(port, tls_port) + self.url_path[uid]

    def seeds(self, port: int, tls_port: int = 0) -> list[str]:
        return [self.link_url(u, port, tls_port) for u in self.seed_ids]

    @property
    def has_tls(self) -> bool:
        """True if some host speaks HTTPS (the server then needs a TLS port)."""
        return any(h.tls is not Tls.NONE for h in self.hosts)

    @property
    def has_redirect_hosts(self) -> bool:
        return any(h.tls is Tls.REDIRECT for h in self.hosts)

    def http_twin_links(self, src: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """For link rows `rows` (on pages `src`): True where the link resolves to the http:// URL of a
        page on a redirecting host (a 301 to the https:// one), False where it resolves to the URL
        `url()` names.

        Mirrors how pages.py writes each link: an absolute link to a redirecting host is written
        http://; a relative one resolves against the base, whose scheme is the page's (https:// for a
        redirecting host's own pages) unless an absolute `<base href>` names another origin; a
        scheme-relative one takes the base's scheme; a self link is the page itself. The reference
        crawl (reference.py) parses the rendered bytes and checks this.
        """
        out = np.zeros(rows.size, dtype=bool)
        if not self.has_redirect_hosts or not rows.size:
            return out
        tls = np.array([int(h.tls) for h in self.hosts], dtype=np.int8)
        tgt = self.link_tgt[rows].astype(np.int64)
        th = self.url_host[tgt]
        to_redirect = tls[th] == int(Tls.REDIRECT)
        if not to_redirect.any():
            return out
        base_host, base_https = self._base_schemes()
        form = self.link_form[rows]
        bh = base_host[src]
        relative = (th == bh) & np.isin(form, _RELATIVE_FORMS)
        scheme_rel = form == int(Form.SCHEME_REL)   # both schemes reach a redirecting host
        selfish = form >= int(Form.SELF_FRAG)
        https = np.where(relative | scheme_rel, base_https[src], False)  # absolute: written http://
        https = np.where(selfish, tls[self.url_host[src]] != int(Tls.NONE), https)
        return to_redirect & ~https

    def _base_schemes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per URL: the host its relative links resolve against, and whether that base is https://."""
        cached = self.__dict__.get("_base_cache")
        if cached is None:
            content = np.array([h.content_https for h in self.hosts], dtype=bool)
            link = np.array([h.link_https for h in self.hosts], dtype=bool)
            base_host = self.url_host.astype(np.int64)
            base_https = content[base_host]
            for uid, base in self.bases.items():
                base_host[uid] = base.host
                if base.form != 1:  # an absolute <base href> carries its host's link scheme
                    base_https[uid] = link[base.host]
            cached = self.__dict__["_base_cache"] = (base_host, base_https)
        return cached

    def host_named(self, name: str) -> Host | None:
        i = self.host_by_name.get(name)
        return None if i is None else self.hosts[i]

    def special(self, role: Role) -> Host | None:
        """The host with `role` (the first one for roles with several)."""
        for h in self.hosts:
            if h.role is role:
                return h
        return None

    def latencies(self) -> dict[str, float]:
        """Host name -> response delay, for every host whose responses are delayed."""
        return {self.hosts[i].name: float(self.host_latency_s[i]) for i in np.flatnonzero(self.host_latency_s).tolist()}

    def lookup(self, host: int, path: str) -> int | None:
        """URL id served at `path` on host index `host`, or None."""
        return self.paths[host].get(path)

    def links(self, uid: int) -> range:
        """Row indices of `uid`'s out-links."""
        return range(int(self.link_off[uid]), int(self.link_off[uid + 1]))

    def link_stats(self) -> LinkStats:
        """Links per page, repeat and same-host shares over the ordinary pages."""
        pages = self.stat_pages
        start, end = self.link_off[pages], self.link_off[pages + 1]
        counts = end - start
        idx = _row_indices(start, counts)
        src = np.repeat(pages.astype(np.int64), counts)
        tgt = self.link_tgt[idx].astype(np.int64)
        distinct = np.unique(src * self.urls + tgt).size
        same = self.url_host[src] == self.url_host[tgt]
        total = int(counts.sum())
        return LinkStats(
            pages=int(pages.size),
            links=total,
            mean=float(counts.mean()),
            median=float(np.median(counts)),
            repeat_share=1.0 - distinct / total,
            same_host_share=float(same.mean()),
        )


@dataclass(frozen=True)
class LinkStats:
    pages: int
    links: int
    mean: float
    median: float
    repeat_share: float
    same_host_share: float


def host_name(index: int, params: WebParams) -> str:
    width = max(3, len(str(params.hosts - 1)))
    return f"h{index:0{width}d}.{params.domain}"


def build_web(params: WebParams = WebParams()) -> Web:
    """Generate the web for `params` (deterministic)."""
    _validate(params)
    return _Builder(params).build()


def _validate(p: WebParams) -> None:
    for name in ("https_share", "https_redirect_share"):
        if not 0.0 <= getattr(p, name) <= 1.0:
            raise ValueError(f"{name} must be in 0..1, got {getattr(p, name)}")
    if p.https_share + p.https_redirect_share > 1.0:
        raise ValueError(f"https_share + https_redirect_share must be <= 1, got {p.https_share} + "
                         f"{p.https_redirect_share}")
    if not 0.0 <= p.host_latency_share <= 1.0:
        raise ValueError(f"host_latency_share must be in 0..1, got {p.host_latency_share}")
    for kind in ("slow", "fast"):
        lo, hi = getattr(p, f"host_{kind}_latency_min_s"), getattr(p, f"host_{kind}_latency_max_s")
        if not 0.0 <= lo <= hi <= MAX_HOST_LATENCY_S:
            raise ValueError(f"host_{kind}_latency_min_s/max_s must satisfy 0 <= min <= max <= {MAX_HOST_LATENCY_S}, "
                             f"got {lo} and {hi}")
    if p.hosts < 1:
        raise ValueError(f"hosts must be >= 1, got {p.hosts}")
    if p.pages < p.hosts:
        raise ValueError(f"pages ({p.pages}) must be >= hosts ({p.hosts}): every host has a root page")
    if not 1 <= p.seed_hosts <= p.hosts:
        raise ValueError(f"seed_hosts must be in 1..hosts, got {p.seed_hosts}")
    if not 0 < p.links_median < p.links_mean:
        raise ValueError("links_median must be > 0 and below links_mean (a right-skewed distribution)")
    if p.domain != p.domain.lower() or not p.domain.isascii():
        raise ValueError(f"domain must be lower-case ASCII, got {p.domain!r}")


def _row_indices(start: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of range(start[i], start[i] + counts[i]) for all i, vectorised."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offs = np.cumsum(counts) - counts
    return np.arange(total, dtype=np.int64) - np.repeat(offs - start, counts)


def _zipf_ranks(u: np.ndarray, n: np.ndarray | int, exponent: float) -> np.ndarray:
    """Ranks 0..n-1 with P(rank k) ~ (k+1)^-exponent (continuous inverse CDF), vectorised."""
    n1 = np.asarray(n, dtype=np.float64) + 1.0
    if abs(exponent - 1.0) < 1e-9:
        x = np.exp(u * np.log(n1))
    else:
        e = 1.0 - exponent
        x = (1.0 + u * (n1 ** e - 1.0)) ** (1.0 / e)
    return np.minimum(np.floor(x).astype(np.int64) - 1, np.asarray(n, dtype=np.int64) - 1).clip(0)


def _choose(rng: np.random.Generator, table: tuple, size: int) -> np.ndarray:
    """Indices into `table` ((value, weight) pairs) drawn by weight."""
    weights = np.array([w for _, w in table], dtype=np.float64)
    return rng.choice(len(table), size=size, p=weights / weights.sum())


@dataclass
class _Blocks:
    """Per ordinary host: where each category of its URLs starts and how many there are."""

    reg_start: np.ndarray
    reg_n: np.ndarray
    priv_start: np.ndarray
    priv_n: np.ndarray
    img_start: np.ndarray
    img_n: np.ndarray
    css_start: np.ndarray
    redir_start: np.ndarray
    redir_n: np.ndarray
    miss_start: np.ndarray
    miss_n: np.ndarray
    nf_start: np.ndarray
    nf_n: np.ndarray
    mnf_start: np.ndarray
    mnf_n: np.ndarray
    moved_start: np.ndarray
    moved_n: np.ndarray


class _Builder:
    """One-shot builder: appends hosts and URLs, then the link table."""

    def __init__(self, params: WebParams) -> None:
        self.p = params
        self.rng = np.random.default_rng(params.seed)
        self.hosts: list[Host] = []
        self.url_host: list[int] = []
        self.url_kind: list[int] = []
        self.url_path: list[str] = []
        # Links given one by one: (src, tgt, flags, elem or -1, form or -1).
        self.explicit: list[tuple[int, int, int, int, int]] = []
        self.redirects: dict[int, Redirect] = {}
        self.cases: dict[int, Case] = {}
        self.bases: dict[int, Base] = {}
        self.frameset: set[int] = set()
        self.special_roots: list[int] = []

    # --- small helpers -----------------------------------------------------------

    def add_host(self, name: str, role: Role, robots: RobotsPolicy, with_port: bool = True,
                 tls: Tls = Tls.NONE) -> int:
        self.hosts.append(Host(len(self.hosts), name, role, robots, with_port, tls))
        return len(self.hosts) - 1

    def add_url(self, host: int, kind: Kind, path: str) -> int:
        self.url_host.append(host)
        self.url_kind.append(int(kind))
        self.url_path.append(path)
        return len(self.url_path) - 1

    def link(self, src: int, tgt: int, flags: int = 0, elem: int = -1, form: int = -1) -> None:
        self.explicit.append((src, tgt, flags, elem, form))

    # --- the build ---------------------------------------------------------------

    def build(self) -> Web:
        p = self.p
        sizes = self._host_sizes()
        blocks, meta_ids = self._ordinary_hosts(sizes)
        self._special_hosts()
        remote = self._remote_hosts()
        n_urls = len(self.url_path)
        url_host = np.array(self.url_host, dtype=np.int32)
        url_kind = np.array(self.url_kind, dtype=np.int8)
        meta = np.zeros(n_urls, dtype=bool)
        meta[meta_ids] = True
        elig = self._eligible(blocks, meta)
        forced = self._forced_links(blocks, elig, url_host, remote)
        stat_pages = self._stat_pages(blocks)
        rand = self._random_links(blocks, stat_pages, url_host, forced)
        self._redirect_targets(blocks)
        link_off, tgt, form, elem, flags = self._assemble(n_urls, elig["reg_ids"], url_kind, meta, forced, rand)
        paths: list[dict[str, int]] = [{} for _ in self.hosts]
        for uid, (h, path) in enumerate(zip(self.url_host, self.url_path)):
            paths[h][path] = uid
        noncrawl = np.zeros(n_urls, dtype=np.uint8)
        noncrawl[stat_pages] = self.rng.integers(0, _NONCRAWLABLE_MAX + 1, size=stat_pages.size)
        self._choose_tls()
        return Web(
            params=p,
            hosts=self.hosts,
            url_host=url_host,
            url_kind=url_kind,
            url_path=self.url_path,
            link_off=link_off,
            link_tgt=tgt,
            link_form=form,
            link_elem=elem,
            link_flags=flags,
            meta_nofollow=meta,
            noncrawlable=noncrawl,
            bases=self.bases,
            redirects=self.redirects,
            cases=self.cases,
            frameset=frozenset(self.frameset),
            seed_ids=[int(blocks.reg_start[i]) for i in range(p.seed_hosts)],
            stat_pages=stat_pages,
            paths=paths,
            host_by_name={h.name: h.index for h in self.hosts},
            host_latency_s=self._latencies(),
        )

    def _latencies(self) -> np.ndarray:
        """Per host: ordinary hosts fast or slow from the params, the slow host `slow_delay_s`.

        Drawn from a generator of its own (seed, _LATENCY_STREAM), not `self.rng`: the
        same seed gives the same hosts, pages and links whatever the latency params.
        """
        p = self.p
        rng = np.random.default_rng((p.seed, _LATENCY_STREAM))
        slow = np.zeros(p.hosts, dtype=bool)
        n_slow = int(round(p.host_latency_share * p.hosts))
        slow[rng.choice(p.hosts, size=n_slow, replace=False)] = True
        fast_s = rng.uniform(p.host_fast_latency_min_s, p.host_fast_latency_max_s, p.hosts)
        slow_s = rng.uniform(p.host_slow_latency_min_s, p.host_slow_latency_max_s, p.hosts)
        out = np.zeros(len(self.hosts), dtype=np.float64)
        out[: p.hosts] = np.round(np.where(slow, slow_s, fast_s), _LATENCY_RESOLUTION_DIGITS)
        for h in self.hosts:
            if h.role is Role.SLOW:
                out[h.index] = p.slow_delay_s
        return out

    def _choose_tls(self) -> None:
        """Make the chosen ordinary hosts HTTPS-only or redirecting, from a generator of their own
        (seed, _TLS_STREAM): the shares decide schemes only, so the link table stays the same."""
        p = self.p
        n_only = round(p.https_share * p.hosts)
        n_redirect = min(p.hosts - n_only, round(p.https_redirect_share * p.hosts))
        if not n_only + n_redirect:
            return
        order = np.random.default_rng((p.seed, _TLS_STREAM)).permutation(p.hosts).tolist()
        for i, h in enumerate(order[: n_only + n_redirect]):
            self.hosts[h] = dataclasses.replace(self.hosts[h], tls=Tls.ONLY if i < n_only else Tls.REDIRECT)

    def _host_sizes(self) -> np.ndarray:
        p = self.p
        base = min(p.min_host_pages, p.pages // p.hosts)
        rest = p.pages - base * p.hosts
        w = 1.0 / np.arange(1, p.hosts + 1, dtype=np.float64) ** p.host_size_exponent
        extra = np.floor(rest * w / w.sum()).astype(np.int64)
        extra[: rest - int(extra.sum())] += 1  # hand out the rounding remainder to the largest hosts
        return base + extra

    def _robots_for_ordinary(self, sizes: np.ndarray) -> list[RobotsPolicy]:
        p = self.p
        rng = self.rng
        n = p.hosts
        disallow = rng.random(n) < p.disallow_private_hosts
        override = disallow & (rng.random(n) < p.allow_override_hosts)
        # Crawl-delay only on the smaller half of the hosts, so a delay never multiplies a big host's page count.
        small = np.argsort(sizes, kind="stable")[: max(1, (n + 1) // 2)]
        want = int(round(p.crawl_delay_hosts * n))
        delayed = set(rng.choice(small, size=min(want, small.size), replace=False).tolist()) if want else set()
        delays = np.round(rng.uniform(p.crawl_delay_min_s, p.crawl_delay_max_s, n), 2)
        layouts = rng.integers(0, LAYOUTS, n)
        out = []
        for h in range(n):
            out.append(RobotsPolicy(
                disallow=("/private/",) if disallow[h] else (),
                allow=("/private/open/",) if override[h] else (),
                crawl_delay_s=float(delays[h]) if h in delayed else None,
                layout=int(layouts[h]),
            ))
        return out

    def _ordinary_hosts(self, sizes: np.ndarray) -> tuple[_Blocks, list[int]]:
        """Create the ordinary hosts' URLs, category by category, contiguous per host."""
        p = self.p
        rng = self.rng
        robots = self._robots_for_ordinary(sizes)
        cols: dict[str, list[int]] = {f.name: [] for f in dataclasses.fields(_Blocks)}
        meta_ids: list[int] = []
        for h in range(p.hosts):
            n = int(sizes[h])
            hi = self.add_host(host_name(h, p), Role.ORDINARY, robots[h])
            frames = _FRAME_PAGES if h == 0 and n >= _FRAMES_MIN_PAGES else 0
            priv = max(1, n // _PAGES_PER_PRIVATE) if n >= _MIN_PAGES_FOR_PRIVATE else 0
            nf = n // _PAGES_PER_NOFOLLOW_ONLY
            moved = n // _PAGES_PER_MOVED
            mnf = int(n * _META_NOFOLLOW_SHARE) if n >= _MIN_PAGES_FOR_META_NOFOLLOW else 0
            reg = n - priv - nf - moved - mnf - frames
            redir = moved + max(1, n // _PAGES_PER_REDIRECT)
            miss = max(1, n // _PAGES_PER_MISSING)
            img = max(_MIN_IMAGES, n // _PAGES_PER_IMAGE)
            # Regular pages: root first, then varied path styles, all unique by their number.
            styles = rng.integers(0, 7, reg).tolist()
            words = rng.integers(0, len(WORDS), reg).tolist()
            dir_draw = rng.integers(0, len(DIRS), (reg, 3)).tolist()
            cols["reg_start"].append(len(self.url_path))
            cols["reg_n"].append(reg)
            self.add_url(hi, Kind.PAGE, "/")
            # Hot loop of generation (one per page): plain list appends.
            self.url_path.extend(_page_path(j, styles[j], WORDS[words[j]], dir_draw[j]) for j in range(1, reg))
            self.url_host.extend([hi] * (reg - 1))
            self.url_kind.extend([int(Kind.PAGE)] * (reg - 1))
            cols["priv_start"].append(len(self.url_path))
            cols["priv_n"].append(priv)
            for i in range(priv):
                sub = "open/" if i % 2 else ""
                self.add_url(hi, Kind.PAGE, f"/private/{sub}{WORDS[(i * 7 + h) % len(WORDS)]}-{i}.html")
            cols["nf_start"].append(len(self.url_path))
            cols["nf_n"].append(nf)
            for i in range(nf):
                self.add_url(hi, Kind.PAGE, f"/nf/{i}.html")
            cols["mnf_start"].append(len(self.url_path))
            cols["mnf_n"].append(mnf)
            for i in range(mnf):
                self.add_url(hi, Kind.PAGE, f"/mnf/{i}.html")
            cols["moved_start"].append(len(self.url_path))
            cols["moved_n"].append(moved)
            for i in range(moved):
                self.add_url(hi, Kind.PAGE, f"/moved/{i}.html")
            cols["img_start"].append(len(self.url_path))
            cols["img_n"].append(img)
            for i in range(img):
                self.add_url(hi, Kind.IMAGE, f"/img/{i}.png")
            cols["css_start"].append(len(self.url_path))
            self.add_url(hi, Kind.CSS, "/static/site.css")
            self.add_url(hi, Kind.CSS, "/static/print.css")
            cols["redir_start"].append(len(self.url_path))
            cols["redir_n"].append(redir)
            for i in range(redir):
                self.add_url(hi, Kind.REDIRECT, f"/r/{i}")
            cols["miss_start"].append(len(self.url_path))
            cols["miss_n"].append(miss)
            for i in range(miss):
                self.add_url(hi, Kind.MISSING, f"/gone/{i}.html")
            if frames:
                self._frames(hi, cols["reg_start"][-1])
            # Meta-nofollow pages: mnf of the regular non-root pages, each with one exclusive target.
            if mnf:
                chosen = rng.choice(np.arange(1, reg), size=mnf, replace=False) + cols["reg_start"][-1]
                for i, page in enumerate(sorted(chosen.tolist())):
                    meta_ids.append(page)
                    self.link(page, cols["mnf_start"][-1] + i, elem=int(Elem.A))
        arrays = {k: np.array(v, dtype=np.int64) for k, v in cols.items()}
        return _Blocks(**arrays), meta_ids

    def _frames(self, host: int, root: int) -> None:
        """A frameset page on h000 whose two frames are linked from nowhere else."""
        index = self.add_url(host, Kind.PAGE, "/frames/index.html")
        self.frameset.add(index)
        self.link(root, index, elem=int(Elem.A))
        for name in ("top", "main"):
            frame = self.add_url(host, Kind.PAGE, f"/frames/{name}.html")
            self.link(index, frame, elem=int(Elem.FRAME))
            self.link(frame, root, elem=int(Elem.A))

    def _small_host(self, role: Role, robots: RobotsPolicy, pages: int, tls: Tls = Tls.NONE) -> list[int]:
        """A chain of `pages` pages: `/` -> /p/1.html -> ... each linking back to the previous."""
        hi = self.add_host(f"{role.value}.{self.p.domain}", role, robots, tls=tls)
        ids = [self.add_url(hi, Kind.PAGE, "/")]
        ids += [self.add_url(hi, Kind.PAGE, f"/p/{i}.html") for i in range(1, pages)]
        css = self.add_url(hi, Kind.CSS, "/static/site.css")
        for i, page in enumerate(ids):
            self.link(page, css, elem=int(Elem.LINK_CSS))
            if i + 1 < len(ids):
                self.link(page, ids[i + 1])
            if i:
                self.link(page, ids[i - 1])
        self.special_roots.append(ids[0])
        return ids

    def _special_hosts(self) -> None:
        p = self.p
        allow_all = RobotsPolicy()
        if p.slow_host:
            self._small_host(Role.SLOW, allow_all, 3)
        self._small_host(Role.NOROBOTS, RobotsPolicy(status=404), 4)
        self._small_host(Role.ROBOTS500, RobotsPolicy(status=500), 3)
        if p.bad_host:
            self._bad_host()
        if p.trap:
            hi = self.add_host(f"trap.{p.domain}", Role.TRAP, RobotsPolicy(layout=1))
            self.special_roots.append(self.add_url(hi, Kind.TRAP_ROOT, "/"))
        if p.tls_bad_hosts:
            for role in TLS_BAD_ROLES:
                self._small_host(role, allow_all, TLS_BAD_HOST_PAGES, tls=Tls.ONLY)

    def _bad_host(self) -> None:
        hi = self.add_host(f"bad.{self.p.domain}", Role.BAD, RobotsPolicy(layout=2))
        root = self.add_url(hi, Kind.PAGE, "/")
        self.special_roots.append(root)
        for case, path in CASE_PATHS.items():
            uid = self.add_url(hi, Kind.CASE, path)
            self.cases[uid] = case
            self.link(root, uid, elem=int(Elem.A), form=int(Form.PATH_ABS))
            if case in LINKING_CASES:
                for k in (1, 2):
                    leaf = self.add_url(hi, Kind.PAGE, f"/bad-ok/{case.value}-{k}.html")
                    self.link(uid, leaf, elem=int(Elem.A), form=int(Form.PATH_ABS))
                    self.link(leaf, root, elem=int(Elem.A))
        loop_a = self.add_url(hi, Kind.REDIRECT, LOOP_PATHS[0])
        loop_b = self.add_url(hi, Kind.REDIRECT, LOOP_PATHS[1])
        self.redirects[loop_a] = Redirect(loop_b, 302, 1)
        self.redirects[loop_b] = Redirect(loop_a, 302, 2)
        self.link(root, loop_a, elem=int(Elem.A))

    def _remote_hosts(self) -> list[int]:
        """URLs that never reach the server: NXDOMAIN hosts and private addresses."""
        p = self.p
        out: list[int] = []
        if p.nxdomain_links:
            for i in range(1, NX_HOSTS + 1):
                hi = self.add_host(f"nx{i}.{NX_SUFFIX}", Role.NXDOMAIN, RobotsPolicy(), with_port=False)
                out.append(self.add_url(hi, Kind.REMOTE, "/"))
                out.append(self.add_url(hi, Kind.REMOTE, "/index.html"))
        if p.private_links:
            for name, with_port, path in PRIVATE_URLS:
                hi = self.add_host(name, Role.PRIVATE, RobotsPolicy(), with_port=with_port)
                out.append(self.add_url(hi, Kind.REMOTE, path))
        return out

    # --- links -------------------------------------------------------------------

    def _eligible(self, b: _Blocks, meta: np.ndarray) -> dict[str, np.ndarray]:
        """Regular pages that may carry a spanning link: reachable and not meta-nofollow."""
        reg_ids = _row_indices(b.reg_start, b.reg_n)
        ok = ~meta[reg_ids]
        elig_ids = reg_ids[ok]
        # Per host: where its eligible pages start in elig_ids and how many.
        counts = np.add.reduceat(ok.astype(np.int64), np.cumsum(b.reg_n) - b.reg_n)
        starts = np.cumsum(counts) - counts
        # For each regular page, how many eligible pages of its host precede it.
        before = np.cumsum(ok) - ok
        host_first = np.repeat(np.cumsum(b.reg_n) - b.reg_n, b.reg_n)
        before_in_host = before - before[host_first]
        return {"reg_ids": reg_ids, "ids": elig_ids, "start": starts, "n": counts,
                "before": before_in_host}

    def _pick_eligible(self, elig: dict[str, np.ndarray], hosts: np.ndarray) -> np.ndarray:
        """A random eligible page of each host in `hosts`."""
        k = np.floor(self.rng.random(hosts.size) * elig["n"][hosts]).astype(np.int64)
        return elig["ids"][elig["start"][hosts] + k]

    def _forced_links(self, b: _Blocks, elig: dict[str, np.ndarray], url_host: np.ndarray,
                      remote: list[int]) -> dict[str, np.ndarray]:
        """Links that make the web what it is: reachability, stylesheets, exclusive targets."""
        p = self.p
        rng = self.rng
        H = p.hosts
        srcs: list[np.ndarray] = []
        tgts: list[np.ndarray] = []
        flags: list[np.ndarray] = []
        elems: list[np.ndarray] = []
        forms: list[np.ndarray] = []

        def add(src, tgt, flag=0, elem=-1, form=-1):
            src = np.asarray(src, dtype=np.int64)
            srcs.append(src)
            tgts.append(np.asarray(tgt, dtype=np.int64))
            flags.append(np.full(src.size, flag, dtype=np.int64) if np.isscalar(flag) else np.asarray(flag))
            elems.append(np.full(src.size, elem, dtype=np.int64) if np.isscalar(elem) else np.asarray(elem))
            forms.append(np.full(src.size, form, dtype=np.int64) if np.isscalar(form) else np.asarray(form))

        hosts_all = np.arange(H)
        all_pages = self._stat_pages(b)
        host_of = np.repeat(hosts_all, b.reg_n + b.priv_n + b.nf_n + b.mnf_n + b.moved_n)
        # Every page links its host's main stylesheet; the root also the print one.
        add(all_pages, b.css_start[host_of], elem=int(Elem.LINK_CSS))
        add(b.reg_start, b.css_start + 1, elem=int(Elem.LINK_CSS))
        # Spanning tree inside each host: regular page j from an eligible page before it.
        reg_ids = elig["reg_ids"]
        reg_host = np.repeat(hosts_all, b.reg_n)
        not_root = reg_ids != b.reg_start[reg_host]
        kids = reg_ids[not_root]
        kid_host = reg_host[not_root]
        before = elig["before"][not_root]
        k = np.floor(rng.random(kids.size) * before).astype(np.int64)
        add(elig["ids"][elig["start"][kid_host] + k], kids)
        # Spanning tree over hosts: each non-seed root from an eligible page of a lower host.
        later = np.arange(p.seed_hosts, H)
        if later.size:
            lower = np.floor(rng.random(later.size) * later).astype(np.int64)
            add(self._pick_eligible(elig, lower), b.reg_start[later])
        # Every private page, redirect, missing page and image linked at least once.
        for start, n, elem in ((b.priv_start, b.priv_n, -1), (b.redir_start, b.redir_n, int(Elem.A)),
                               (b.miss_start, b.miss_n, int(Elem.A)), (b.img_start, b.img_n, int(Elem.IMG))):
            ids = _row_indices(start, n)
            add(self._pick_eligible(elig, np.repeat(hosts_all, n)), ids, elem=elem)
        # Nofollow-only pages: twice each, only ever through rel=nofollow.
        nf_ids = np.repeat(_row_indices(b.nf_start, b.nf_n), 2)
        nf_host = np.repeat(np.repeat(hosts_all, b.nf_n), 2)
        add(self._pick_eligible(elig, nf_host), nf_ids, flag=NOFOLLOW, elem=int(Elem.A))
        # Self links (#main or href="") on some regular pages.
        selfers = reg_ids[rng.random(reg_ids.size) < _SELF_LINK_SHARE]
        add(selfers, selfers, elem=int(Elem.A),
            form=np.where(rng.random(selfers.size) < 0.5, int(Form.SELF_FRAG), int(Form.SELF_EMPTY)))
        # Special hosts: from h000's root and from a few random pages.
        root0 = int(b.reg_start[0])
        specials = np.array(self.special_roots, dtype=np.int64)
        if specials.size:
            add(np.full(specials.size, root0), specials, elem=int(Elem.A))
            many = np.repeat(specials, _SPECIAL_LINKS)
            add(self._pick_eligible(elig, rng.integers(0, H, many.size)), many, elem=int(Elem.A))
        # Remote URLs (NXDOMAIN, private addresses): from h000's root, and NXDOMAIN from a few pages.
        if remote:
            rem = np.array(remote, dtype=np.int64)
            add(np.full(rem.size, root0), rem, elem=int(Elem.A), form=int(Form.ABS))
            kinds = np.array([self.hosts[int(url_host[r])].role is Role.NXDOMAIN for r in remote])
            nx = rem[kinds]
            if nx.size:
                pages = elig["ids"][rng.random(elig["ids"].size) < _NX_LINK_SHARE]
                add(pages, nx[rng.integers(0, nx.size, pages.size)], elem=int(Elem.A), form=int(Form.ABS))
        # Explicit links gathered while building (meta-nofollow targets, frames, special hosts).
        if self.explicit:
            ex = np.array(self.explicit, dtype=np.int64)
            add(ex[:, 0], ex[:, 1], ex[:, 2], ex[:, 3], ex[:, 4])
        return {"src": np.concatenate(srcs), "tgt": np.concatenate(tgts), "flags": np.concatenate(flags),
                "elem": np.concatenate(elems), "form": np.concatenate(forms)}

    def _stat_pages(self, b: _Blocks) -> np.ndarray:
        """The ordinary hosts' pages that get random links (all but frames pages)."""
        per_host = [
            _row_indices(b.reg_start, b.reg_n), _row_indices(b.priv_start, b.priv_n),
            _row_indices(b.nf_start, b.nf_n), _row_indices(b.mnf_start, b.mnf_n),
            _row_indices(b.moved_start, b.moved_n),
        ]
        return np.sort(np.concatenate(per_host))

    def _random_links(self, b: _Blocks, pages: np.ndarray, url_host: np.ndarray,
                      forced: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per page a lognormal number of links: chosen targets, then chosen repeats.

        Hot path of generation: every step is one numpy pass over all links.
        """
        p = self.p
        rng = self.rng
        H = p.hosts
        n_urls = len(self.url_path)
        # Links per page: lognormal, shifted down by the forced links every page already has.
        f_src = forced["src"]
        on_pages = np.isin(f_src, pages)
        forced_per_page = on_pages.sum() / pages.size
        med = max(1.0, p.links_median - forced_per_page)
        mean = max(med * 1.01, p.links_mean - forced_per_page)
        sigma = math.sqrt(2.0 * math.log(mean / med))
        counts = np.rint(rng.lognormal(math.log(med), sigma, pages.size)).astype(np.int64)
        counts = counts.clip(1, p.links_max)
        # Big pages go preferentially to big hosts (portals), small ones to small sites: the
        # distribution of counts is unchanged, but a small host is not asked for more distinct
        # targets than it has.
        host_pages = np.bincount(url_host[pages], minlength=H)[url_host[pages]]
        key = np.log(host_pages) + rng.normal(0.0, _SIZE_NOISE, pages.size)
        counts = np.sort(counts)[np.argsort(np.argsort(key, kind="stable"), kind="stable")]
        total = int(counts.sum())
        src = np.repeat(pages.astype(np.int64), counts)
        h = url_host[src].astype(np.int64)
        first = np.cumsum(counts) - counts
        pos = np.arange(total, dtype=np.int64) - np.repeat(first, counts)
        # Cross-host share so that the whole table (forced links included) meets same_host_share.
        all_links = total + int(on_pages.sum())
        f_cross = int((url_host[forced["src"][on_pages]] != url_host[forced["tgt"][on_pages]]).sum())
        p_cross = ((1.0 - p.same_host_share) * all_links - f_cross) / total if H > 1 else 0.0
        tgt = self._fresh_targets(b, h, min(1.0, max(0.0, p_cross)))
        # Accidental repeats among fresh links: re-draw uniformly within the target's host.
        for _ in range(_DEDUPE_ROUNDS):
            dup = _dup_mask(src * n_urls + tgt)
            if not dup.any():
                break
            th = url_host[tgt[dup]].astype(np.int64)
            tgt[dup] = b.reg_start[th] + np.floor(rng.random(int(dup.sum())) * b.reg_n[th]).astype(np.int64)
        # Repeats left over (small hosts run out of targets; forced links coincide with random ones).
        keys = np.concatenate([src * n_urls + tgt, f_src[on_pages] * n_urls + forced["tgt"][on_pages]])
        dup_all = _dup_mask(keys)
        accidental = int(dup_all.sum())
        # Chosen repeats make up the rest: copy a uniformly chosen earlier non-repeat link of the page.
        room = (pos > 0) & ~dup_all[:total]
        wanted = p.repeat_share * all_links - accidental
        q = min(1.0, max(0.0, wanted / max(1, int(room.sum()))))
        rep = room & (rng.random(total) < q)
        fresh = ~rep
        fresh_idx = np.flatnonzero(fresh)
        seen_fresh = np.cumsum(fresh) - fresh                  # fresh links before each position, global
        page_base = np.repeat(seen_fresh[first], counts)       # ... at the first link of each position's page
        rep_idx = np.flatnonzero(rep)
        avail = seen_fresh[rep_idx] - page_base[rep_idx]
        pick = np.floor(rng.random(rep_idx.size) * avail).astype(np.int64)
        tgt[rep_idx] = tgt[fresh_idx[page_base[rep_idx] + pick]]
        return {"src": src, "tgt": tgt}

    def _fresh_targets(self, b: _Blocks, h: np.ndarray, p_cross: float) -> np.ndarray:
        """A target for each link of a page on host h[i]: same-host by category, or cross-host by Zipf."""
        p = self.p
        rng = self.rng
        H = p.hosts
        m = h.size
        cross = rng.random(m) < p_cross
        tgt = np.empty(m, dtype=np.int64)
        cat = _choose(rng, _SAME_HOST_MIX, m)
        names = [name for name, _ in _SAME_HOST_MIX]
        u = rng.random(m)
        zipf = rng.random(m) < _ZIPF_SHARE_IN_HOST
        reg_n = b.reg_n[h]
        rank = np.where(zipf, _zipf_ranks(u, reg_n, 1.0), np.floor(u * reg_n).astype(np.int64))
        tgt[:] = b.reg_start[h] + rank
        for name, start, n in (("image", b.img_start, b.img_n), ("redirect", b.redir_start, b.redir_n),
                               ("missing", b.miss_start, b.miss_n), ("private", b.priv_start, b.priv_n)):
            sel = (cat == names.index(name)) & (n[h] > 0)
            tgt[sel] = start[h[sel]] + np.floor(u[sel] * n[h[sel]]).astype(np.int64)
        sel = cat == names.index("css")
        tgt[sel] = b.css_start[h[sel]] + 1
        # Cross-host: a host by Zipf popularity (never the page's own), its root or one of its pages.
        if cross.any():
            c = int(cross.sum())
            g = _zipf_ranks(rng.random(c), H, p.host_popularity_exponent)
            own = g == h[cross]
            g[own] = (g[own] + 1 + np.floor(rng.random(int(own.sum())) * (H - 1)).astype(np.int64)) % H
            u2 = rng.random(c)
            zipf2 = rng.random(c) < _ZIPF_SHARE_IN_HOST
            rank2 = np.where(zipf2, _zipf_ranks(u2, b.reg_n[g], 1.0), np.floor(u2 * b.reg_n[g]).astype(np.int64))
            rank2[rng.random(c) < _CROSS_ROOT_SHARE] = 0
            tgt[cross] = b.reg_start[g] + rank2
        return tgt

    def _redirect_targets(self, b: _Blocks) -> None:
        """Where each /r/N points: first the moved pages (reachable only so), then a mix."""
        rng = self.rng
        H = self.p.hosts
        for h in range(H):
            start, n = int(b.redir_start[h]), int(b.redir_n[h])
            moved_start, moved_n = int(b.moved_start[h]), int(b.moved_n[h])
            cats = _choose(rng, _REDIRECT_MIX, n).tolist()
            draws = rng.random((n, 3)).tolist()
            for i in range(n):
                uid = start + i
                status = 301 if draws[i][0] < 0.5 else 302
                form = int(draws[i][1] * 4)
                kind = _REDIRECT_MIX[cats[i]][0]
                if i < moved_n:
                    target = moved_start + i
                elif kind == "cross" and H > 1:
                    target = int(b.reg_start[(h + 1 + int(draws[i][2] * (H - 1))) % H])
                    form = 0 if form < 2 else 3
                elif kind == "missing":
                    target = int(b.miss_start[h]) + int(draws[i][2] * int(b.miss_n[h]))
                elif kind == "chain" and i > moved_n:
                    target = start + moved_n + int(draws[i][2] * (i - moved_n))
                else:
                    target = int(b.reg_start[h]) + int(draws[i][2] * int(b.reg_n[h]))
                self.redirects[uid] = Redirect(target, status, form)

    def _assemble(self, n_urls: int, reg_ids: np.ndarray, url_kind: np.ndarray, meta: np.ndarray,
                  forced: dict[str, np.ndarray], rand: dict[str, np.ndarray]):
        """Merge forced and random links into the CSR table; draw forms, elements, nofollow."""
        rng = self.rng
        src = np.concatenate([rand["src"], forced["src"]])
        tgt = np.concatenate([rand["tgt"], forced["tgt"]])
        n_rand = rand["src"].size
        flags = np.concatenate([np.zeros(n_rand, np.int64), forced["flags"]])
        elem = np.concatenate([np.full(n_rand, -1, np.int64), forced["elem"]])
        form = np.concatenate([np.full(n_rand, -1, np.int64), forced["form"]])
        total = src.size
        # Forms.
        draw = rng.choice(len(FORM_WEIGHTS), size=total, p=np.array(FORM_WEIGHTS) / sum(FORM_WEIGHTS))
        form = np.where(form < 0, draw, form)
        # Elements by the target's kind.
        kind = url_kind[tgt]
        u = rng.random(total)
        drawn = np.full(total, int(Elem.A), dtype=np.int64)
        for k, table in ((Kind.PAGE, _PAGE_ELEMS), (Kind.IMAGE, _IMAGE_ELEMS)):
            sel = kind == int(k)
            edges = np.cumsum([w for _, w in table])
            drawn[sel] = np.array([int(e) for e, _ in table])[np.searchsorted(edges / edges[-1], u[sel], side="right").clip(0, len(table) - 1)]
        drawn[kind == int(Kind.CSS)] = int(Elem.LINK_CSS)
        elem = np.where(elem < 0, drawn, elem)
        # Pages only reachable conditionally (private, nf, mnf, moved) are only linked with <a>/<link>:
        # keeps every rule a question of <a> or robots.txt, never of the element.
        regular = np.zeros(n_urls, dtype=bool)
        regular[reg_ids] = True
        odd = (kind == int(Kind.PAGE)) & ~regular[tgt] & (elem != int(Elem.FRAME))
        elem[odd] = int(Elem.A)
        # Meta-nofollow pages: every link an <a> except the stylesheet, which every page links anyway.
        on_meta = meta[src] & (elem != int(Elem.LINK_CSS))
        elem[on_meta] = int(Elem.A)
        # Random rel=nofollow on some <a> links to regular pages (which have followed links elsewhere).
        nf = (elem == int(Elem.A)) & regular[tgt] & (rng.random(total) < _NOFOLLOW_SHARE) & (form < int(Form.SELF_FRAG))
        flags = flags | np.where(nf, NOFOLLOW, 0)
        nofollow = (flags & NOFOLLOW) != 0
        elem[nofollow] = int(Elem.A)
        # Self forms only where the target is the page itself; remote targets always absolute.
        selfish = form >= int(Form.SELF_FRAG)
        form[selfish & (src != tgt)] = int(Form.PATH_ABS)
        # <base href> on some regular pages (never with a self form; those resolve against the base).
        self._choose_bases(regular, np.unique(src[selfish & (src == tgt)]))
        order = np.argsort(src, kind="stable")
        src = src[order]
        counts = np.bincount(src, minlength=n_urls)
        link_off = np.zeros(n_urls + 1, dtype=np.int64)
        np.cumsum(counts, out=link_off[1:])
        return (link_off, tgt[order].astype(np.int32), form[order].astype(np.uint8),
                elem[order].astype(np.uint8), flags[order].astype(np.uint8))

    def _choose_bases(self, regular: np.ndarray, self_linked: np.ndarray) -> None:
        rng = self.rng
        H = self.p.hosts
        cand = np.flatnonzero(regular)
        cand = cand[np.array([self.url_path[c] != "/" for c in cand.tolist()], dtype=bool)] if cand.size else cand
        cand = np.setdiff1d(cand, self_linked)
        chosen = cand[rng.random(cand.size) < _BASE_SHARE]
        variants = rng.integers(0, 5, chosen.size).tolist()
        d = rng.integers(0, len(DIRS), (chosen.size, 2)).tolist()
        others = rng.integers(0, H, chosen.size).tolist()
        for uid, v, (d1, d2), other in zip(chosen.tolist(), variants, d, others):
            host = self.url_host[uid]
            if v == 0:
                self.bases[uid] = Base(host, f"/{DIRS[d1]}/", 0)
            elif v == 1:
                self.bases[uid] = Base(host, f"/{DIRS[d1]}/{DIRS[d2]}/", 1)
            elif v == 2:
                self.bases[uid] = Base(other, f"/{DIRS[d1]}/", 0)
            elif v == 3:
                self.bases[uid] = Base(host, f"/{DIRS[d1]}/index.html", 0)
            else:
                self.bases[uid] = Base(host, f"/{DIRS[d1]}/{DIRS[d2]}/", 2)


_EXCLUSIVE_PREFIXES = ("/private/", "/nf/", "/mnf/", "/moved/", "/frames/")
_RELATIVE_FORMS = np.array([int(f) for f in (Form.PATH_ABS, Form.REL, Form.DOT_REL, Form.FRAGMENT, Form.PCT,
                                              Form.DOTSEG, Form.SPACES, Form.ENTITY)], dtype=np.uint8)
"""Forms pages.py writes relative to the base when the target is on the base's host (absolute otherwise)."""


def _dup_mask(keys: np.ndarray) -> np.ndarray:
    """True at every position whose key occurred at an earlier position."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    dup = np.zeros(keys.size, dtype=bool)
    dup[order[1:]] = sk[1:] == sk[:-1]
    return dup


def _page_path(j: int, style: int, word: str, dirs: list[int]) -> str:
    """Path of regular page number j (>= 1) in one of seven styles; unique by j."""
    d1, d2, d3 = DIRS[dirs[0]], DIRS[dirs[1]], DIRS[dirs[2]]
    # Distinct directory names: a path never repeats a segment (the trap rule stays the trap's).
    if d2 == d1:
        d2 = DIRS[(dirs[1] + 1) % len(DIRS)]
    while d3 in (d1, d2):
        d3 = DIRS[(DIRS.index(d3) + 1) % len(DIRS)]
    if style == 0:
        return f"/p/{j}.html"
    if style == 1:
        return f"/{d1}/{word}-{j}.html"
    if style == 2:
        return f"/{d1}/{d2}/{d3}/page-{j}.html"
    if style == 3:
        return f"/{d1}/{j}/"
    if style == 4:
        return f"/p/~{word}{j}.html"
    if style == 5:
        return f"/{d1.capitalize()}/{word.capitalize()}-{j}.html"
    return f"/{d1}/{d2}/{word}_{j}.html"

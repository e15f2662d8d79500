"""The synthetic web as plain data: hosts, URLs, links, robots rules, redirects.

`build_web(WebParams)` (build.py) returns a `Web`: every URL the server can answer gets an
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
from dataclasses import dataclass, field
from enum import Enum, IntEnum, StrEnum
from types import MappingProxyType

import numpy as np

from .robots import RobotsPolicy

MIB = 1 << 20
MAX_HOST_LATENCY_S = 10.0
"""Bound of a host's response delay (the server sleeps that long per response)."""


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
    """Link to private addresses (127.0.0.1:PORT, 169.254.169.254): only for crawls with the private-network guard
    on."""
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


class Role(StrEnum):
    """What a host is for."""

    # str() and format() stay Enum's ("Role.SLOW"), as they were for the (str, Enum) this was: only .value is
    # the string used in host names and paths.
    __str__ = Enum.__str__
    __format__ = Enum.__format__

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


class Case(StrEnum):
    """The bad host's hostile responses, one path each."""

    # str() and format() stay Enum's ("Case.STALL"), as they were for the (str, Enum) this was: only .value is
    # the string used in host names and paths.
    __str__ = Enum.__str__
    __format__ = Enum.__format__

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


_EXCLUSIVE_PREFIXES = ("/private/", "/nf/", "/mnf/", "/moved/", "/frames/")
_RELATIVE_FORMS = np.array([int(f) for f in (Form.PATH_ABS, Form.REL, Form.DOT_REL, Form.FRAGMENT, Form.PCT,
                                              Form.DOTSEG, Form.SPACES, Form.ENTITY)], dtype=np.uint8)
"""Forms pages.py writes relative to the base when the target is on the base's host (absolute otherwise)."""


@dataclass(frozen=True)
class WebHost:
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
    hosts: list[WebHost]
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

    def host_named(self, name: str) -> WebHost | None:
        i = self.host_by_name.get(name)
        return None if i is None else self.hosts[i]

    def special(self, role: Role) -> WebHost | None:
        """The host with `role` (the first one for roles with several)."""
        for h in self.hosts:
            if h.role is role:
                return h
        return None

    def latencies(self) -> dict[str, float]:
        """WebHost name -> response delay, for every host whose responses are delayed."""
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
        idx = row_indices(start, counts)
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


def row_indices(start: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of range(start[i], start[i] + counts[i]) for all i, vectorised."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offs = np.cumsum(counts) - counts
    return np.arange(total, dtype=np.int64) - np.repeat(offs - start, counts)

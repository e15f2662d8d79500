"""The expected crawl: exactly which requests a correct crawler sends to the test web.

`expected_crawl(web, port, rules)` walks the web's link table breadth-first
from the seeds, as a correct crawler with `rules` would, and returns a
`WebManifest`. What a correct crawl does, precisely:

1. Seeds are the roots `/` of the first `seed_hosts` ordinary hosts.
2. Links are taken only from 2xx responses with an HTML content type: from
   `a`, `area`, `link`, `img`, `frame`, `iframe`, `embed`, `source` (their
   href/src) and `form` (action), resolved against the page URL or the first
   `<base href>`, in canonical form (scheme and host lower-case, default port
   dropped, dot segments removed, empty path `/`, fragment dropped,
   unreserved %-escapes decoded). Not links: anything inside comments or
   scripts, `script src`, CSS `url()`, `data-src`; non-http(s) hrefs
   (`mailto:`, `javascript:`, `tel:`, `data:`) are ignored.
3. `<a rel="nofollow">` links are dropped; a page with
   `<meta name="robots" content="...nofollow...">` contributes no links at
   all (unless `follow_nofollow`, which honours neither).
4. A 3xx response contributes exactly one link, its Location resolved
   against the request URL; redirects are not followed inline. 4xx/5xx
   responses and non-HTML bodies contribute nothing.
5. Each discovered URL passes the URL filter first (`CrawlRules`): length
   <= `max_url_bytes`, host within `allow_domains` (if any), path depth
   (number of '/' in the path) <= `max_path_depth`, no non-empty path
   segment more than `max_repeated_segments` times. A URL failing it is
   dropped (`filtered`) and never counts as discovered.
6. A discovered URL whose host cannot be resolved (`*.invalid`), is a
   private address while the private-network guard is on, or presents a
   certificate that fails verification (the bad-certificate hosts, while
   `tls_verify`) is never sent (`refused`; `refusals` gives the crawl-log
   reason: dns_nxdomain, private_address, tls_untrusted, tls_expired,
   tls_hostname_mismatch), and its host's robots.txt is not fetched: no
   HTTP request reaches such a host.
7. For every other origin (scheme, host, port) with a discovered URL the
   crawler requests `/robots.txt` once (`robots`); `User-agent: *` applies
   (the named bot group must be ignored), longest match wins, Allow wins
   ties; a 404 robots.txt allows everything, a 500 disallows everything.
   A URL robots.txt forbids is never sent (`disallowed`). A host that
   redirects http:// to https:// answers http://h/robots.txt with 301: the
   crawler follows it (RFC 9309 2.3.1.2) to https://h/robots.txt, whose
   answer holds for both origins, and requests that file once in all.
8. Every other discovered URL is requested exactly once (`fetched`),
   including the bad host's endless body, too-large body, gzip bomb and
   stall (`failures`: the crawler must record them as failed fetches) and
   both ends of the redirect loop. http:// and https:// URLs of one path
   are two URLs: a link written http:// to a redirecting host is fetched
   (301) and so is the https:// URL its Location names.

HTTPS hosts (model.Tls) are written with `tls_port`: https://h:TLS_PORT/.
`statuses` gives the status the server answers for each fetched URL.
`crawl_delay_s` gives the robots Crawl-delay of the hosts that have one; a
polite crawler waits at least that long between two requests to the host.
`host_latency_s` gives the response delay of the hosts the server slows down.
`hops` gives each fetched URL's link distance from the seeds (the BFS level
that first reaches it; a redirect's Location is one link further, as
`scope.max_hops` counts it; a template resource or stylesheet image is one
further than the nearest page or stylesheet that names it; a trap page one
further than its parent): `within(h)` is what a crawl with `scope.max_hops: h`
fetches.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from . import trap
from .model import (
    FAILING_CASES,
    HOSTILE_ROLES,
    NOFOLLOW,
    Case,
    Kind,
    Role,
    Tls,
    Web,
    WebHost,
    WebParams,
    row_indices,
)
from .pages import APP_JS_PATH, TEMPLATE_PATHS
from .resources import CSS_IMAGE_PATH

MAX_TRAP_PAGES = 1_000_000
"""Refuse rules so loose that the bounded trap would exceed this many pages."""
_FAILURE_REASONS = MappingProxyType({
    Case.ENDLESS: "endless-body",
    Case.TOO_LARGE: "too-large",
    Case.GZIP_BOMB: "gzip-bomb",
    Case.STALL: "stall",
})
# Crawl-log reasons of refused URLs (names of crawler/fetch/result.py; this package imports none of the crawler).
DNS_NXDOMAIN = "dns_nxdomain"
PRIVATE_ADDRESS = "private_address"
TLS_UNTRUSTED = "tls_untrusted"
TLS_EXPIRED = "tls_expired"
TLS_HOSTNAME_MISMATCH = "tls_hostname_mismatch"
REFUSAL_REASONS = MappingProxyType({
    Role.NXDOMAIN: DNS_NXDOMAIN,
    Role.PRIVATE: PRIVATE_ADDRESS,
    Role.TLS_SELF_SIGNED: TLS_UNTRUSTED,
    Role.TLS_EXPIRED: TLS_EXPIRED,
    Role.TLS_WRONG_NAME: TLS_HOSTNAME_MISMATCH,
})
"""Why a correct crawler never sends the URLs of a host with this role."""
TLS_REASONS = frozenset({TLS_UNTRUSTED, TLS_EXPIRED, TLS_HOSTNAME_MISMATCH})


@dataclass(frozen=True)
class CrawlRules:
    """The crawler settings the expected crawl depends on (defaults = the crawler's defaults)."""

    max_path_depth: int = 16
    """filter.max_path_depth: most '/' characters in a URL path."""
    max_repeated_segments: int = 3
    """filter.max_repeated_segments: most occurrences of one non-empty path segment."""
    follow_nofollow: bool = False
    """parse.follow_nofollow: also follow rel=nofollow links and meta-nofollow pages."""
    private_guard: bool = True
    """Refuse private/loopback/link-local addresses (fetch.allow_private_networks false)."""
    obey_robots: bool = True
    """robots.enabled."""
    allow_domains: tuple[str, ...] = ()
    """filter.allow_domains: host suffixes that may be crawled; empty = all."""
    max_url_bytes: int = 2048
    """filter.max_url_bytes."""
    tls_verify: bool = True
    """fetch.tls.verify: refuse the bad-certificate hosts (off: they are crawled like any other)."""
    robots_error_retries: int = 5
    """robots.error_max_retries: robots.txt fetches after the first that answered 500, before its origin's
    URLs are dropped (robots500 answers 500 `WebParams.robots_error_answers` times, always under nginx)."""

    def admits(self, url: str, host: str, path: str) -> bool:
        """True if the URL filter lets `url` (with `host` and `path`) through."""
        if len(url.encode()) > self.max_url_bytes:
            return False
        if self.allow_domains and not any(host == d or host.endswith("." + d) for d in self.allow_domains):
            return False
        if path.count("/") > self.max_path_depth:
            return False
        segments = [s for s in path.split("/") if s]
        return not segments or max(Counter(segments).values()) <= self.max_repeated_segments

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["allow_domains"] = list(self.allow_domains)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> CrawlRules:
        data = dict(data)
        data["allow_domains"] = tuple(data.get("allow_domains", ()))
        return cls(**data)


@dataclass
class WebManifest:
    """Exactly what a correct crawl of the test web requests (see the module docstring)."""

    port: int
    seeds: list[str]
    fetched: set[str]
    """Canonical URLs requested exactly once each (robots.txt excluded)."""
    robots: set[str]
    """http://host:port/robots.txt of every host with a discovered, non-refused URL."""
    refused: set[str]
    """Discovered URLs never sent: NXDOMAIN hosts, private addresses under the guard."""
    disallowed: set[str]
    """Discovered URLs robots.txt forbids."""
    filtered: set[str]
    """Linked URLs the URL filter drops (the trap's frontier, mostly)."""
    trap_bound: int
    """Trap-host URLs in `fetched` (the trap as bounded by the rules)."""
    hosts: list[str]
    """Host names the crawl contacts (those in `robots`)."""
    crawl_delay_s: dict[str, float]
    """robots.txt Crawl-delay of contacted hosts that have one."""
    statuses: dict[str, int]
    """HTTP status the server answers for each URL in `fetched`."""
    failures: dict[str, str]
    """URLs in `fetched` a correct crawler records as failed, with the reason."""
    rules: CrawlRules = field(default_factory=CrawlRules)
    params: dict = field(default_factory=dict)
    static: bool = False
    """Computed for the static (nginx) export: hostile hosts answer 404 there."""
    host_latency_s: dict[str, float] = field(default_factory=dict)
    """Response delay of contacted hosts that have one (the test-web server only; nginx does not delay)."""
    tls_port: int = 0
    """Port of the https:// URLs (0: the web has no HTTPS host)."""
    refusals: dict[str, str] = field(default_factory=dict)
    """The crawl-log reason of each URL in `refused` (REFUSAL_REASONS)."""
    robots_requests: dict[str, int] = field(default_factory=dict)
    """robots.txt URLs a correct crawler requests more than once (robots500's, retried after its 500s)."""
    hops: dict[str, int] = field(default_factory=dict)
    """Link distance of each URL in `fetched` from the nearest seed (redirects count as links)."""

    def within(self, max_hops: int) -> set[str]:
        """The URLs of `fetched` a crawl with `scope.max_hops: max_hops` requests."""
        return {u for u in self.fetched if self.hops[u] <= max_hops}

    def requests_of(self, url: str) -> int:
        """How many times a correct crawl requests `url` (1 for what it requests at all)."""
        return self.robots_requests.get(url, 1)

    @property
    def requests(self) -> int:
        """Requests the server sees in a correct crawl (pages and robots.txt)."""
        return len(self.fetched) + sum(self.requests_of(u) for u in self.robots)

    def summary(self) -> dict:
        by_class = Counter(f"{s // 100}xx" for s in self.statuses.values())
        return {"fetched": len(self.fetched), "robots": len(self.robots), "refused": len(self.refused),
                "disallowed": len(self.disallowed), "filtered": len(self.filtered), "trap_bound": self.trap_bound,
                "hosts": len(self.hosts), "failures": len(self.failures), **dict(sorted(by_class.items()))}

    def to_json(self) -> str:
        data = {
            "port": self.port, "seeds": self.seeds, "summary": self.summary(),
            "fetched": sorted(self.fetched), "robots": sorted(self.robots), "refused": sorted(self.refused),
            "disallowed": sorted(self.disallowed), "filtered": sorted(self.filtered),
            "trap_bound": self.trap_bound, "hosts": self.hosts, "crawl_delay_s": self.crawl_delay_s,
            "statuses": dict(sorted(self.statuses.items())), "failures": dict(sorted(self.failures.items())),
            "rules": self.rules.to_dict(), "params": self.params, "static": self.static,
            "host_latency_s": dict(sorted(self.host_latency_s.items())),
            "tls_port": self.tls_port, "refusals": dict(sorted(self.refusals.items())),
            "robots_requests": dict(sorted(self.robots_requests.items())),
            "hops": dict(sorted(self.hops.items())),
        }
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> WebManifest:
        d = json.loads(text)
        return cls(
            port=d["port"], seeds=list(d["seeds"]), fetched=set(d["fetched"]), robots=set(d["robots"]),
            refused=set(d["refused"]), disallowed=set(d["disallowed"]), filtered=set(d.get("filtered", ())),
            trap_bound=d["trap_bound"], hosts=list(d["hosts"]), crawl_delay_s=dict(d["crawl_delay_s"]),
            statuses=dict(d["statuses"]), failures=dict(d["failures"]),
            rules=CrawlRules.from_dict(d["rules"]), params=dict(d["params"]), static=bool(d.get("static", False)),
            host_latency_s=dict(d.get("host_latency_s", {})), tls_port=int(d.get("tls_port", 0)),
            refusals=dict(d.get("refusals", {})), robots_requests=dict(d.get("robots_requests", {})),
            hops=dict(d.get("hops", {})),
        )

    def save(self, path: str | Path) -> None:
        """Write atomically (readers never see half a manifest)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> WebManifest:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))


def expected_crawl(web: Web, port: int, rules: CrawlRules = CrawlRules(), *, static: bool = False,
                   tls_port: int = 0) -> WebManifest:
    """The manifest of a correct crawl of `web` served on `port` (and HTTPS on `tls_port`, needed
    when the web has HTTPS hosts), or of its static export if `static`."""
    return _Walk(web, port, rules, static, tls_port).run()


class _Walk:
    """Level-synchronous BFS over URL ids: each level is a few numpy passes over its links.

    With redirecting hosts (model.Tls.REDIRECT) a page has two URLs, https:// (its id, the
    content) and http:// (its id + web.urls, a 301 to the first): the walk's ids ("vids") run
    over both ranges. Without them they are the URL ids and the walk is what it always was.
    """

    def __init__(self, web: Web, port: int, rules: CrawlRules, static: bool, tls_port: int) -> None:
        if web.params.private_links and not rules.private_guard:
            raise ValueError("a web with private_links must be crawled with the private-network guard on "
                             "(the crawler would otherwise contact 169.254.169.254); set private_links=False")
        if web.has_tls and not 0 < tls_port < 65536:
            raise ValueError(f"the web has HTTPS hosts: give the port they are served on (tls_port), got {tls_port}")
        self.web, self.port, self.rules, self.static, self.tls_port = web, port, rules, static, tls_port
        roles = [h.role for h in web.hosts]
        self.dead = np.array([static and r in HOSTILE_ROLES for r in roles], dtype=bool)
        self.refusal = [REFUSAL_REASONS.get(r) if r in (Role.NXDOMAIN, Role.PRIVATE) or rules.tls_verify else None
                        for r in roles]
        refused = np.array([r is not None for r in self.refusal], dtype=bool)
        self.url_remote = refused[web.url_host]
        self.url_dead = self.dead[web.url_host]
        self.n = web.urls
        self.twins = web.has_redirect_hosts
        self.host_redirects = np.array([h.tls is Tls.REDIRECT for h in web.hosts], dtype=bool)

    def _uids(self, vids: np.ndarray) -> np.ndarray:
        return vids % self.n if self.twins else vids

    def url(self, vid: int) -> str:
        """The URL string of walk id `vid`."""
        web = self.web
        if vid >= self.n:
            return web.link_url(vid - self.n, self.port, self.tls_port)
        return web.url(vid, self.port, self.tls_port)

    def run(self) -> WebManifest:
        web, rules, port, n = self.web, self.rules, self.port, self.n
        size = 2 * n if self.twins else n
        seen = np.zeros(size, dtype=bool)
        kinds = web.url_kind
        contributes = np.zeros(size, dtype=bool)
        contributes[:n] = np.isin(kinds, (int(Kind.PAGE), int(Kind.CASE))) & ~self.url_dead
        if not rules.follow_nofollow:
            contributes[:n] &= ~web.meta_nofollow
        redirect_to = np.full(size, -1, dtype=np.int64)
        for uid, r in web.redirects.items():
            if not self.url_dead[uid]:
                redirect_to[uid] = r.target + (n if self._location_twin(uid, r.target, r.form) else 0)
        if self.twins:
            redirect_to[n:] = np.arange(n)   # http://h/path -> 301 https://h/path (only reached on redirecting hosts)
        fetched_ids: list[np.ndarray] = []
        level_of: dict[int, int] = {}          # walk id -> BFS level (link distance from the seeds)
        disallowed_ids: list[np.ndarray] = []
        refused_ids: list[np.ndarray] = []
        filtered_ids: list[np.ndarray] = []
        trap_roots: list[int] = []
        seeds = np.array(web.seed_ids, dtype=np.int64)
        frontier = seeds + n * self.host_redirects[web.url_host[seeds]]
        level = -1
        while frontier.size:
            level += 1
            frontier = np.unique(frontier)
            frontier = frontier[~seen[frontier]]
            seen[frontier] = True
            ok = self._admits(frontier)
            filtered_ids.append(frontier[~ok])
            frontier = frontier[ok]
            remote = self.url_remote[self._uids(frontier)]
            refused_ids.append(frontier[remote])
            frontier = frontier[~remote]
            allowed = self._allowed(frontier)
            disallowed_ids.append(frontier[~allowed])
            got = frontier[allowed]
            fetched_ids.append(got)
            level_of.update(dict.fromkeys(got.tolist(), level))
            content = got[got < n]
            trap_roots += content[(kinds[content] == int(Kind.TRAP_ROOT)) & ~self.url_dead[content]].tolist()
            # Links of the 2xx HTML pages fetched at this level, plus the Location of each redirect.
            pages = got[contributes[got]]
            start = web.link_off[pages]
            counts = web.link_off[pages + 1] - start
            idx = row_indices(start, counts)
            keep = None if rules.follow_nofollow else (web.link_flags[idx] & NOFOLLOW) == 0
            if keep is not None:
                idx = idx[keep]
            targets = web.link_tgt[idx].astype(np.int64)
            if self.twins:
                src = np.repeat(pages, counts)
                targets += n * web.http_twin_links(src if keep is None else src[keep], idx)
            loc = redirect_to[got]
            frontier = np.concatenate([targets, loc[loc >= 0]])
        fetched = np.concatenate(fetched_ids)
        disallowed = np.concatenate(disallowed_ids)
        refused = np.concatenate(refused_ids)
        url = self.url
        manifest = WebManifest(
            port=port, seeds=web.seeds(port, self.tls_port),
            fetched={url(v) for v in fetched.tolist()},
            robots=set(), refused={url(v) for v in refused.tolist()},
            disallowed={url(v) for v in disallowed.tolist()},
            filtered={url(v) for v in np.concatenate(filtered_ids).tolist()},
            trap_bound=0, hosts=[], crawl_delay_s={}, statuses={}, failures={},
            rules=rules, params=web.params.to_dict(), static=self.static, tls_port=self.tls_port,
        )
        for vid in refused.tolist():
            reason = self.refusal[int(web.url_host[vid % n])]
            assert reason is not None    # refused: its host has a reason
            manifest.refusals[url(vid)] = reason
        for vid in fetched.tolist():
            u = url(vid)
            manifest.hops[u] = level_of[vid]
            manifest.statuses[u] = self._status(vid)
            case = web.cases.get(vid)
            if case in FAILING_CASES and not self.url_dead[vid]:
                manifest.failures[u] = _FAILURE_REASONS[case]
        template_origins = self._template_resources(manifest, fetched[fetched < n], level_of)
        # Origins contacted, as (host index, https): an id >= n is the http:// URL of a redirecting host.
        both = np.concatenate([fetched, disallowed])
        hosts_of = web.url_host[self._uids(both)]
        https = np.array([web.hosts[h].content_https for h in range(len(web.hosts))], dtype=bool)[hosts_of] & (both < n)
        origins = set(zip(hosts_of.tolist(), https.tolist())) | template_origins
        for root in trap_roots:
            origins |= {(h, False) for h in self._trap(web.hosts[int(web.url_host[root])].index, manifest,
                                                       level_of[root])}
        contacted = {h for h, _ in origins}
        if rules.obey_robots:
            for h, secure in sorted(origins):
                host = web.hosts[h]
                if secure or host.tls is Tls.ONLY:
                    manifest.robots.add(host.content_origin(port, self.tls_port) + "/robots.txt")
                else:
                    manifest.robots.add(host.origin(port, self.tls_port) + "/robots.txt")
                    if host.tls is Tls.REDIRECT:   # its 301, followed: the https:// file, once for both origins
                        manifest.robots.add(host.content_origin(port, self.tls_port) + "/robots.txt")
            robots500 = web.special(Role.ROBOTS500)
            if robots500 is not None and robots500.index in contacted:
                answers = 0 if self.static else web.params.robots_error_answers
                tries = 1 + rules.robots_error_retries
                manifest.robots_requests[robots500.origin(port, self.tls_port) + "/robots.txt"] = \
                    min(answers + 1, tries) if answers else tries
            for h in sorted(contacted):
                host = web.hosts[h]
                delay = host.robots.crawl_delay_s
                if delay is not None and host.robots.status == 200 and not self.dead[h]:
                    manifest.crawl_delay_s[host.name] = delay
        manifest.hosts = sorted(web.hosts[h].name for h in contacted)
        if not self.static:
            manifest.host_latency_s = {web.hosts[h].name: float(web.host_latency_s[h]) for h in sorted(contacted)
                                       if web.host_latency_s[h] > 0}
        trap_host = web.special(Role.TRAP)
        if trap_host is not None:
            prefix = trap_host.origin(port) + "/"
            manifest.trap_bound = sum(1 for u in manifest.fetched if u.startswith(prefix))
        return manifest

    def _template_resources(self, manifest: WebManifest, content: np.ndarray,
                            level_of: dict[int, int]) -> set[tuple[int, bool]]:
        """What page templates and stylesheets reference outside the link table: every page's script and
        inline-style image (pages.TEMPLATE_PATHS, path-absolute, so against its base's origin), every
        stylesheet's image (pages.CSS_IMAGE_PATH). Leaves of the crawl: added as URL strings after the
        walk. Returns the (host, https) origins they make the crawl contact."""
        web, rules, port, tls_port = self.web, self.rules, self.port, self.tls_port
        kinds = web.url_kind
        pages = content[(kinds[content] == int(Kind.PAGE)) & ~self.url_dead[content]]
        if not rules.follow_nofollow:
            pages = pages[~web.meta_nofollow[pages]]
        # (host, written as http:// of a redirecting host, path) -> hops of the nearest page naming it, + 1
        wanted: dict[tuple[int, bool, str], int] = {}

        def want(key: tuple[int, bool, str], hops: int) -> None:
            wanted[key] = min(wanted.get(key, hops), hops)

        for uid in pages.tolist():
            if uid in web.frameset:
                continue
            base = web.bases.get(uid)
            if base is None or base.form == 1:
                h, twin = int(web.url_host[uid]), False     # the page's own (content) origin
            else:
                h = base.host
                twin = web.hosts[h].tls is Tls.REDIRECT     # written as the host's link origin: http://
            for path in TEMPLATE_PATHS:
                want((h, twin, path), level_of[uid] + 1)
        for uid in content[(kinds[content] == int(Kind.CSS)) & ~self.url_dead[content]].tolist():
            want((int(web.url_host[uid]), False, CSS_IMAGE_PATH), level_of[uid] + 1)
        contacted: set[tuple[int, bool]] = set()
        for (h, twin, path), hops in sorted(wanted.items()):
            host = web.hosts[h]
            if self.refusal[h] is not None:
                continue
            urls = [host.origin(port, tls_port) + path] if twin else []
            urls.append(host.content_origin(port, tls_port) + path)
            for i, url in enumerate(urls):
                if url in manifest.fetched:                  # in the link table too: the nearer path counts
                    manifest.hops[url] = min(manifest.hops[url], hops + i)
                    continue
                if url in manifest.disallowed or url in manifest.filtered:
                    continue
                if not rules.admits(url, host.name, path):
                    manifest.filtered.add(url)
                    break
                if rules.obey_robots and not self.dead[h] and not host.robots.allowed(path):
                    manifest.disallowed.add(url)
                    break
                manifest.fetched.add(url)
                manifest.hops[url] = hops + i           # the https:// one is behind the http:// one's 301
                manifest.statuses[url] = 301 if i + 1 < len(urls) else self._path_status(host, path)
            contacted.add((h, host.content_https and not twin))
        return contacted

    def _path_status(self, host: WebHost, path: str) -> int:
        """What the server answers for a path outside the link table (or in it: its URL's status)."""
        uid = self.web.lookup(host.index, path)
        if uid is not None:
            return self._status(uid)
        if path == APP_JS_PATH and host.role is Role.ORDINARY:     # the static export writes it too
            return 200
        return 404

    def _location_twin(self, uid: int, target: int, form: int) -> bool:
        """True if redirect `uid`'s Location names the http:// URL of a redirecting host's page:
        written absolute (pages.Renderer.location: another host, or forms 0 and 3) to such a host."""
        th = int(self.web.url_host[target])
        return bool(self.host_redirects[th]) and (th != int(self.web.url_host[uid]) or form in (0, 3))

    def _admits(self, ids: np.ndarray) -> np.ndarray:
        web, rules = self.web, self.rules
        out = np.empty(ids.size, dtype=bool)
        n = self.n
        for i, vid in enumerate(ids.tolist()):
            uid = vid % n
            host = web.hosts[int(web.url_host[uid])]
            path = web.url_path[uid]
            out[i] = rules.admits(self.url(vid), host.name, path)
        return out

    def _allowed(self, ids: np.ndarray) -> np.ndarray:
        if not self.rules.obey_robots:
            return np.ones(ids.size, dtype=bool)
        web = self.web
        n = self.n
        out = np.empty(ids.size, dtype=bool)
        for i, vid in enumerate(ids.tolist()):
            uid = vid % n
            h = int(web.url_host[uid])
            # A redirecting host's http:// origin is judged by the robots.txt its 301 leads to: the same policy.
            out[i] = True if self.dead[h] else web.hosts[h].robots.allowed(web.url_path[uid])
        return out

    def _status(self, vid: int) -> int:
        if vid >= self.n:
            return 301
        uid = vid
        if self.url_dead[uid]:
            return 404
        kind = int(self.web.url_kind[uid])
        if kind == Kind.REDIRECT:
            return self.web.redirects[uid].status
        if kind == Kind.MISSING:
            return 404
        return 200

    def _trap(self, host_index: int, manifest: WebManifest, root_hops: int) -> set[int]:
        """Walk the trap's infinite pages from its root (at `root_hops`) as far as the rules allow,
        breadth first (so each page's hops are its smallest)."""
        web, rules, port = self.web, self.rules, self.port
        host = web.hosts[host_index]
        origin = host.origin(port)
        seen = {"/"}
        queue = deque((c, root_hops + 1) for c in trap.trap_children("/"))
        while queue:
            path, hops = queue.popleft()
            if path in seen:
                continue
            seen.add(path)
            url = origin + path
            if not rules.admits(url, host.name, path):
                manifest.filtered.add(url)
                continue
            if rules.obey_robots and not host.robots.allowed(path):
                manifest.disallowed.add(url)
                continue
            manifest.fetched.add(url)
            manifest.hops[url] = hops
            manifest.statuses[url] = 200
            if len(seen) > MAX_TRAP_PAGES:
                raise ValueError(f"the trap has more than {MAX_TRAP_PAGES} pages under {rules}; tighten the rules")
            queue.extend((c, hops + 1) for c in trap.trap_children(path) if c not in seen)
        return {host_index}


def web_and_manifest(params: WebParams, port: int, rules: CrawlRules = CrawlRules(),
                     tls_port: int = 0) -> tuple[Web, WebManifest]:
    """Convenience: build the web and its manifest in one call."""
    from .build import build_web
    web = build_web(params)
    return web, expected_crawl(web, port, rules, tls_port=tls_port)

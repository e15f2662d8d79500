"""Build steps that create hosts and their URLs: the ordinary hosts (category by category), the special
hosts (slow, no robots.txt, robots.txt 500, bad, trap, bad certificates) and the remote URLs."""

from __future__ import annotations

import dataclasses

import numpy as np

from .build_state import Blocks, WebBuilder
from .model import (
    CASE_PATHS,
    DIRS,
    LINKING_CASES,
    LOOP_PATHS,
    NX_HOSTS,
    NX_SUFFIX,
    PRIVATE_URLS,
    TLS_BAD_HOST_PAGES,
    TLS_BAD_ROLES,
    WORDS,
    Elem,
    Form,
    Kind,
    Redirect,
    Role,
    Tls,
    host_name,
)
from .robots import LAYOUTS, RobotsPolicy

_META_NOFOLLOW_SHARE = 0.02    # regular pages with <meta name=robots content=nofollow>
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


def _robots_for_ordinary(wb: WebBuilder, sizes: np.ndarray) -> list[RobotsPolicy]:
    p = wb.p
    rng = wb.rng
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


def ordinary_hosts(wb: WebBuilder, sizes: np.ndarray) -> tuple[Blocks, list[int]]:
    """Create the ordinary hosts' URLs, category by category, contiguous per host."""
    p = wb.p
    rng = wb.rng
    robots = _robots_for_ordinary(wb, sizes)
    cols: dict[str, list[int]] = {f.name: [] for f in dataclasses.fields(Blocks)}
    meta_ids: list[int] = []
    for h in range(p.hosts):
        n = int(sizes[h])
        hi = wb.add_host(host_name(h, p), Role.ORDINARY, robots[h])
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
        cols["reg_start"].append(len(wb.url_path))
        cols["reg_n"].append(reg)
        wb.add_url(hi, Kind.PAGE, "/")
        # Hot loop of generation (one per page): plain list appends.
        wb.url_path.extend(_page_path(j, styles[j], WORDS[words[j]], dir_draw[j]) for j in range(1, reg))
        wb.url_host.extend([hi] * (reg - 1))
        wb.url_kind.extend([int(Kind.PAGE)] * (reg - 1))
        cols["priv_start"].append(len(wb.url_path))
        cols["priv_n"].append(priv)
        for i in range(priv):
            sub = "open/" if i % 2 else ""
            wb.add_url(hi, Kind.PAGE, f"/private/{sub}{WORDS[(i * 7 + h) % len(WORDS)]}-{i}.html")
        _category(wb, cols, hi, "nf", Kind.PAGE, [f"/nf/{i}.html" for i in range(nf)])
        _category(wb, cols, hi, "mnf", Kind.PAGE, [f"/mnf/{i}.html" for i in range(mnf)])
        _category(wb, cols, hi, "moved", Kind.PAGE, [f"/moved/{i}.html" for i in range(moved)])
        _category(wb, cols, hi, "img", Kind.IMAGE, [f"/img/{i}.png" for i in range(img)])
        cols["css_start"].append(len(wb.url_path))
        wb.add_url(hi, Kind.CSS, "/static/site.css")
        wb.add_url(hi, Kind.CSS, "/static/print.css")
        _category(wb, cols, hi, "redir", Kind.REDIRECT, [f"/r/{i}" for i in range(redir)])
        _category(wb, cols, hi, "miss", Kind.MISSING, [f"/gone/{i}.html" for i in range(miss)])
        if frames:
            _frames(wb, hi, cols["reg_start"][-1])
        # Meta-nofollow pages: mnf of the regular non-root pages, each with one exclusive target.
        if mnf:
            chosen = rng.choice(np.arange(1, reg), size=mnf, replace=False) + cols["reg_start"][-1]
            for i, page in enumerate(sorted(chosen.tolist())):
                meta_ids.append(page)
                wb.link(page, cols["mnf_start"][-1] + i, elem=int(Elem.A))
    arrays = {k: np.array(v, dtype=np.int64) for k, v in cols.items()}
    return Blocks(**arrays), meta_ids


def _category(wb: WebBuilder, cols: dict[str, list[int]], host: int, name: str, kind: Kind, paths: list[str]) -> None:
    """Append one category of a host's URLs, contiguous, and record in `cols` where it starts and its size."""
    cols[f"{name}_start"].append(len(wb.url_path))
    cols[f"{name}_n"].append(len(paths))
    for path in paths:
        wb.add_url(host, kind, path)


def _frames(wb: WebBuilder, host: int, root: int) -> None:
    """A frameset page on h000 whose two frames are linked from nowhere else."""
    index = wb.add_url(host, Kind.PAGE, "/frames/index.html")
    wb.frameset.add(index)
    wb.link(root, index, elem=int(Elem.A))
    for name in ("top", "main"):
        frame = wb.add_url(host, Kind.PAGE, f"/frames/{name}.html")
        wb.link(index, frame, elem=int(Elem.FRAME))
        wb.link(frame, root, elem=int(Elem.A))


def _small_host(wb: WebBuilder, role: Role, robots: RobotsPolicy, pages: int, tls: Tls = Tls.NONE) -> list[int]:
    """A chain of `pages` pages: `/` -> /p/1.html -> ... each linking back to the previous."""
    hi = wb.add_host(f"{role.value}.{wb.p.domain}", role, robots, tls=tls)
    ids = [wb.add_url(hi, Kind.PAGE, "/")]
    ids += [wb.add_url(hi, Kind.PAGE, f"/p/{i}.html") for i in range(1, pages)]
    css = wb.add_url(hi, Kind.CSS, "/static/site.css")
    for i, page in enumerate(ids):
        wb.link(page, css, elem=int(Elem.LINK_CSS))
        if i + 1 < len(ids):
            wb.link(page, ids[i + 1])
        if i:
            wb.link(page, ids[i - 1])
    wb.special_roots.append(ids[0])
    return ids


def special_hosts(wb: WebBuilder) -> None:
    p = wb.p
    allow_all = RobotsPolicy()
    if p.slow_host:
        _small_host(wb, Role.SLOW, allow_all, 3)
    _small_host(wb, Role.NOROBOTS, RobotsPolicy(status=404), 4)
    _small_host(wb, Role.ROBOTS500, RobotsPolicy(status=500), 3)
    if p.bad_host:
        _bad_host(wb)
    if p.trap:
        hi = wb.add_host(f"trap.{p.domain}", Role.TRAP, RobotsPolicy(layout=1))
        wb.special_roots.append(wb.add_url(hi, Kind.TRAP_ROOT, "/"))
    if p.tls_bad_hosts:
        for role in TLS_BAD_ROLES:
            _small_host(wb, role, allow_all, TLS_BAD_HOST_PAGES, tls=Tls.ONLY)


def _bad_host(wb: WebBuilder) -> None:
    hi = wb.add_host(f"bad.{wb.p.domain}", Role.BAD, RobotsPolicy(layout=2))
    root = wb.add_url(hi, Kind.PAGE, "/")
    wb.special_roots.append(root)
    for case, path in CASE_PATHS.items():
        uid = wb.add_url(hi, Kind.CASE, path)
        wb.cases[uid] = case
        wb.link(root, uid, elem=int(Elem.A), form=int(Form.PATH_ABS))
        if case in LINKING_CASES:
            for k in (1, 2):
                leaf = wb.add_url(hi, Kind.PAGE, f"/bad-ok/{case.value}-{k}.html")
                wb.link(uid, leaf, elem=int(Elem.A), form=int(Form.PATH_ABS))
                wb.link(leaf, root, elem=int(Elem.A))
    loop_a = wb.add_url(hi, Kind.REDIRECT, LOOP_PATHS[0])
    loop_b = wb.add_url(hi, Kind.REDIRECT, LOOP_PATHS[1])
    wb.redirects[loop_a] = Redirect(loop_b, 302, 1)
    wb.redirects[loop_b] = Redirect(loop_a, 302, 2)
    wb.link(root, loop_a, elem=int(Elem.A))


def remote_hosts(wb: WebBuilder) -> list[int]:
    """URLs that never reach the server: NXDOMAIN hosts and private addresses."""
    p = wb.p
    out: list[int] = []
    if p.nxdomain_links:
        for i in range(1, NX_HOSTS + 1):
            hi = wb.add_host(f"nx{i}.{NX_SUFFIX}", Role.NXDOMAIN, RobotsPolicy(), with_port=False)
            out.append(wb.add_url(hi, Kind.REMOTE, "/"))
            out.append(wb.add_url(hi, Kind.REMOTE, "/index.html"))
    if p.private_links:
        for name, with_port, path in PRIVATE_URLS:
            hi = wb.add_host(name, Role.PRIVATE, RobotsPolicy(), with_port=with_port)
            out.append(wb.add_url(hi, Kind.REMOTE, path))
    return out


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

"""Build steps that create the link table: the forced links (reachability, stylesheets, exclusive
targets), the random links with Broder et al.'s statistics, redirect targets, and the CSR assembly
with link forms, elements, nofollow and `<base href>`."""

from __future__ import annotations

import math

import numpy as np

from .build_state import Blocks, WebBuilder
from .model import DIRS, FORM_WEIGHTS, NOFOLLOW, Base, Elem, Form, Kind, Redirect, Role, row_indices

# Generation shares (documented constants, not tuning knobs of the contract).
_SAME_HOST_MIX = (("page", 0.86), ("image", 0.07), ("redirect", 0.02), ("missing", 0.02),
                  ("private", 0.02), ("css", 0.01))
_ZIPF_SHARE_IN_HOST = 0.3      # same-host page picks that prefer popular (low-numbered) pages
_CROSS_ROOT_SHARE = 0.4        # cross-host links that go to the other host's root
_SIZE_NOISE = 0.5              # spread of log(host size) when matching link counts to hosts
_DEDUPE_ROUNDS = 2             # re-draws of accidental repeats (repeats are meant to be chosen)
_NOFOLLOW_SHARE = 0.02         # random <a> links to regular pages written rel=nofollow
_BASE_SHARE = 0.04             # regular pages with <base href>
_SELF_LINK_SHARE = 0.15        # pages with a link to themselves (#main or href="")
_NX_LINK_SHARE = 0.005         # regular pages linking an NXDOMAIN host
_SPECIAL_LINKS = 3             # random pages linking each special host (besides h000's root)
_PAGE_ELEMS = ((Elem.A, 0.93), (Elem.AREA, 0.02), (Elem.IFRAME, 0.02), (Elem.FORM, 0.015), (Elem.LINK_ALT, 0.015))
_IMAGE_ELEMS = ((Elem.IMG, 0.85), (Elem.EMBED, 0.04), (Elem.SOURCE, 0.04), (Elem.LINK_ICON, 0.03), (Elem.A, 0.04))
_REDIRECT_MIX = (("page", 0.5), ("cross", 0.15), ("missing", 0.15), ("chain", 0.2))


def eligible(wb: WebBuilder, b: Blocks, meta: np.ndarray) -> dict[str, np.ndarray]:
    """Regular pages that may carry a spanning link: reachable and not meta-nofollow."""
    reg_ids = row_indices(b.reg_start, b.reg_n)
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


def _pick_eligible(wb: WebBuilder, elig: dict[str, np.ndarray], hosts: np.ndarray) -> np.ndarray:
    """A random eligible page of each host in `hosts`."""
    k = np.floor(wb.rng.random(hosts.size) * elig["n"][hosts]).astype(np.int64)
    return elig["ids"][elig["start"][hosts] + k]


def forced_links(wb: WebBuilder, b: Blocks, elig: dict[str, np.ndarray], url_host: np.ndarray,
                  remote: list[int]) -> dict[str, np.ndarray]:
    """Links that make the web what it is: reachability, stylesheets, exclusive targets."""
    p = wb.p
    rng = wb.rng
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
    all_pages = stat_page_ids(wb, b)
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
        add(_pick_eligible(wb, elig, lower), b.reg_start[later])
    # Every private page, redirect, missing page and image linked at least once.
    for start, n, elem in ((b.priv_start, b.priv_n, -1), (b.redir_start, b.redir_n, int(Elem.A)),
                           (b.miss_start, b.miss_n, int(Elem.A)), (b.img_start, b.img_n, int(Elem.IMG))):
        ids = row_indices(start, n)
        add(_pick_eligible(wb, elig, np.repeat(hosts_all, n)), ids, elem=elem)
    # Nofollow-only pages: twice each, only ever through rel=nofollow.
    nf_ids = np.repeat(row_indices(b.nf_start, b.nf_n), 2)
    nf_host = np.repeat(np.repeat(hosts_all, b.nf_n), 2)
    add(_pick_eligible(wb, elig, nf_host), nf_ids, flag=NOFOLLOW, elem=int(Elem.A))
    # Self links (#main or href="") on some regular pages.
    selfers = reg_ids[rng.random(reg_ids.size) < _SELF_LINK_SHARE]
    add(selfers, selfers, elem=int(Elem.A),
        form=np.where(rng.random(selfers.size) < 0.5, int(Form.SELF_FRAG), int(Form.SELF_EMPTY)))
    # Special hosts: from h000's root and from a few random pages.
    root0 = int(b.reg_start[0])
    specials = np.array(wb.special_roots, dtype=np.int64)
    if specials.size:
        add(np.full(specials.size, root0), specials, elem=int(Elem.A))
        many = np.repeat(specials, _SPECIAL_LINKS)
        add(_pick_eligible(wb, elig, rng.integers(0, H, many.size)), many, elem=int(Elem.A))
    # Remote URLs (NXDOMAIN, private addresses): from h000's root, and NXDOMAIN from a few pages.
    if remote:
        rem = np.array(remote, dtype=np.int64)
        add(np.full(rem.size, root0), rem, elem=int(Elem.A), form=int(Form.ABS))
        kinds = np.array([wb.hosts[int(url_host[r])].role is Role.NXDOMAIN for r in remote])
        nx = rem[kinds]
        if nx.size:
            pages = elig["ids"][rng.random(elig["ids"].size) < _NX_LINK_SHARE]
            add(pages, nx[rng.integers(0, nx.size, pages.size)], elem=int(Elem.A), form=int(Form.ABS))
    # Explicit links gathered while building (meta-nofollow targets, frames, special hosts).
    if wb.explicit:
        ex = np.array(wb.explicit, dtype=np.int64)
        add(ex[:, 0], ex[:, 1], ex[:, 2], ex[:, 3], ex[:, 4])
    return {"src": np.concatenate(srcs), "tgt": np.concatenate(tgts), "flags": np.concatenate(flags),
            "elem": np.concatenate(elems), "form": np.concatenate(forms)}


def stat_page_ids(wb: WebBuilder, b: Blocks) -> np.ndarray:
    """The ordinary hosts' pages that get random links (all but frames pages)."""
    per_host = [
        row_indices(b.reg_start, b.reg_n), row_indices(b.priv_start, b.priv_n),
        row_indices(b.nf_start, b.nf_n), row_indices(b.mnf_start, b.mnf_n),
        row_indices(b.moved_start, b.moved_n),
    ]
    return np.sort(np.concatenate(per_host))


def random_links(wb: WebBuilder, b: Blocks, pages: np.ndarray, url_host: np.ndarray,
                  forced: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per page a lognormal number of links: chosen targets, then chosen repeats.

    Hot path of generation: every step is one numpy pass over all links.
    """
    p = wb.p
    rng = wb.rng
    H = p.hosts
    n_urls = len(wb.url_path)
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
    tgt = _fresh_targets(wb, b, h, min(1.0, max(0.0, p_cross)))
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


def _fresh_targets(wb: WebBuilder, b: Blocks, h: np.ndarray, p_cross: float) -> np.ndarray:
    """A target for each link of a page on host h[i]: same-host by category, or cross-host by Zipf."""
    p = wb.p
    rng = wb.rng
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


def redirect_targets(wb: WebBuilder, b: Blocks) -> None:
    """Where each /r/N points: first the moved pages (reachable only so), then a mix."""
    rng = wb.rng
    H = wb.p.hosts
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
            wb.redirects[uid] = Redirect(target, status, form)


def assemble(wb: WebBuilder, n_urls: int, reg_ids: np.ndarray, url_kind: np.ndarray, meta: np.ndarray,
              forced: dict[str, np.ndarray], rand: dict[str, np.ndarray]):
    """Merge forced and random links into the CSR table; draw forms, elements, nofollow."""
    rng = wb.rng
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
        pick = np.searchsorted(edges / edges[-1], u[sel], side="right").clip(0, len(table) - 1)
        drawn[sel] = np.array([int(e) for e, _ in table])[pick]
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
    _choose_bases(wb, regular, np.unique(src[selfish & (src == tgt)]))
    order = np.argsort(src, kind="stable")
    src = src[order]
    counts = np.bincount(src, minlength=n_urls)
    link_off = np.zeros(n_urls + 1, dtype=np.int64)
    np.cumsum(counts, out=link_off[1:])
    return (link_off, tgt[order].astype(np.int32), form[order].astype(np.uint8),
            elem[order].astype(np.uint8), flags[order].astype(np.uint8))


def _choose_bases(wb: WebBuilder, regular: np.ndarray, self_linked: np.ndarray) -> None:
    rng = wb.rng
    H = wb.p.hosts
    cand = np.flatnonzero(regular)
    cand = cand[np.array([wb.url_path[c] != "/" for c in cand.tolist()], dtype=bool)] if cand.size else cand
    cand = np.setdiff1d(cand, self_linked)
    chosen = cand[rng.random(cand.size) < _BASE_SHARE]
    variants = rng.integers(0, 5, chosen.size).tolist()
    d = rng.integers(0, len(DIRS), (chosen.size, 2)).tolist()
    others = rng.integers(0, H, chosen.size).tolist()
    for uid, v, (d1, d2), other in zip(chosen.tolist(), variants, d, others):
        host = wb.url_host[uid]
        if v == 0:
            wb.bases[uid] = Base(host, f"/{DIRS[d1]}/", 0)
        elif v == 1:
            wb.bases[uid] = Base(host, f"/{DIRS[d1]}/{DIRS[d2]}/", 1)
        elif v == 2:
            wb.bases[uid] = Base(other, f"/{DIRS[d1]}/", 0)
        elif v == 3:
            wb.bases[uid] = Base(host, f"/{DIRS[d1]}/index.html", 0)
        else:
            wb.bases[uid] = Base(host, f"/{DIRS[d1]}/{DIRS[d2]}/", 2)


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


def _dup_mask(keys: np.ndarray) -> np.ndarray:
    """True at every position whose key occurred at an earlier position."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    dup = np.zeros(keys.size, dtype=bool)
    dup[order[1:]] = sk[1:] == sk[:-1]
    return dup

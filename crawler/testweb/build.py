"""`build_web`: the synthetic web generated from its params, step by step.

The steps run in a fixed order over one `WebBuilder` (build_state.py): host
sizes; the hosts and their URLs (build_hosts.py); the link table
(build_links.py: forced links, random links, redirect targets, assembly);
then the draws that must not move any link (HTTPS hosts, latencies) from
generators of their own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .build_hosts import ordinary_hosts, remote_hosts, special_hosts
from .build_links import assemble, eligible, forced_links, random_links, redirect_targets, stat_page_ids
from .build_state import WebBuilder
from .model import Role, Tls, Web, WebParams

_LATENCY_STREAM = 0x5EED1A7
"""Second seed word of the latency generator: its own stream, so turning latency on changes no link."""
_LATENCY_RESOLUTION_DIGITS = 3  # latencies are whole milliseconds
_TLS_STREAM = 0x7150
"""Second seed word of the generator choosing the HTTPS hosts: turning HTTPS on changes no link."""
_NONCRAWLABLE_MAX = 3          # mailto/javascript/tel/data links per page: 0..this


def build_web(params: WebParams | None = None) -> Web:
    """Generate the web for `params` (the defaults when None; deterministic)."""
    if params is None:
        params = WebParams()
    params.validate()
    wb = WebBuilder(params)
    p = wb.p
    sizes = _host_sizes(wb)
    blocks, meta_ids = ordinary_hosts(wb, sizes)
    special_hosts(wb)
    remote = remote_hosts(wb)
    n_urls = len(wb.url_path)
    url_host = np.array(wb.url_host, dtype=np.int32)
    url_kind = np.array(wb.url_kind, dtype=np.int8)
    meta = np.zeros(n_urls, dtype=bool)
    meta[meta_ids] = True
    elig = eligible(wb, blocks, meta)
    forced = forced_links(wb, blocks, elig, url_host, remote)
    stat_pages = stat_page_ids(wb, blocks)
    rand = random_links(wb, blocks, stat_pages, url_host, forced)
    redirect_targets(wb, blocks)
    link_off, tgt, form, elem, flags = assemble(wb, n_urls, elig["reg_ids"], url_kind, meta, forced, rand)
    paths: list[dict[str, int]] = [{} for _ in wb.hosts]
    for uid, (h, path) in enumerate(zip(wb.url_host, wb.url_path)):
        paths[h][path] = uid
    noncrawl = np.zeros(n_urls, dtype=np.uint8)
    noncrawl[stat_pages] = wb.rng.integers(0, _NONCRAWLABLE_MAX + 1, size=stat_pages.size)
    _choose_tls(wb)
    return Web(
        params=p,
        hosts=wb.hosts,
        url_host=url_host,
        url_kind=url_kind,
        url_path=wb.url_path,
        link_off=link_off,
        link_tgt=tgt,
        link_form=form,
        link_elem=elem,
        link_flags=flags,
        meta_nofollow=meta,
        noncrawlable=noncrawl,
        bases=wb.bases,
        redirects=wb.redirects,
        cases=wb.cases,
        frameset=frozenset(wb.frameset),
        seed_ids=[int(blocks.reg_start[i]) for i in range(p.seed_hosts)],
        stat_pages=stat_pages,
        paths=paths,
        host_by_name={h.name: h.index for h in wb.hosts},
        host_latency_s=_latencies(wb),
    )


def _latencies(wb: WebBuilder) -> np.ndarray:
    """Per host: ordinary hosts fast or slow from the params, the slow host `slow_delay_s`.

    Drawn from a generator of its own (seed, _LATENCY_STREAM), not `wb.rng`: the
    same seed gives the same hosts, pages and links whatever the latency params.
    """
    p = wb.p
    rng = np.random.default_rng((p.seed, _LATENCY_STREAM))
    slow = np.zeros(p.hosts, dtype=bool)
    n_slow = int(round(p.host_latency_share * p.hosts))
    slow[rng.choice(p.hosts, size=n_slow, replace=False)] = True
    fast_s = rng.uniform(p.host_fast_latency_min_s, p.host_fast_latency_max_s, p.hosts)
    slow_s = rng.uniform(p.host_slow_latency_min_s, p.host_slow_latency_max_s, p.hosts)
    out = np.zeros(len(wb.hosts), dtype=np.float64)
    out[: p.hosts] = np.round(np.where(slow, slow_s, fast_s), _LATENCY_RESOLUTION_DIGITS)
    for h in wb.hosts:
        if h.role is Role.SLOW:
            out[h.index] = p.slow_delay_s
    return out


def _choose_tls(wb: WebBuilder) -> None:
    """Make the chosen ordinary hosts HTTPS-only or redirecting, from a generator of their own
    (seed, _TLS_STREAM): the shares decide schemes only, so the link table stays the same."""
    p = wb.p
    n_only = round(p.https_share * p.hosts)
    n_redirect = min(p.hosts - n_only, round(p.https_redirect_share * p.hosts))
    if not n_only + n_redirect:
        return
    order = np.random.default_rng((p.seed, _TLS_STREAM)).permutation(p.hosts).tolist()
    for i, h in enumerate(order[: n_only + n_redirect]):
        wb.hosts[h] = dataclasses.replace(wb.hosts[h], tls=Tls.ONLY if i < n_only else Tls.REDIRECT)


def _host_sizes(wb: WebBuilder) -> np.ndarray:
    p = wb.p
    base = min(p.min_host_pages, p.pages // p.hosts)
    rest = p.pages - base * p.hosts
    w = 1.0 / np.arange(1, p.hosts + 1, dtype=np.float64) ** p.host_size_exponent
    extra = np.floor(rest * w / w.sum()).astype(np.int64)
    extra[: rest - int(extra.sum())] += 1  # hand out the rounding remainder to the largest hosts
    return base + extra

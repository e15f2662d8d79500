"""Crawl scope: the scope filter's reasons, per-seed scopes, config errors, seed lines, and the boundary's
memory of nearer paths (crawler/filter/scope.py, nearer.py, crawler/node/seeds.py)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.config import ConfigError, from_dict
from crawler.config.schema import ScopeConfig
from crawler.filter.nearer import NearerPaths
from crawler.filter.scope import ScopeFilter, Seed
from crawler.node.seeds import parse_seed_line, read_seeds
from crawler.state import StateStore
from crawler.urls import fingerprint
from crawler.urls.lineage import UNKNOWN, Lineage, bare, split, tag, tag_all

SEEDS = [Seed("http://www.a.test/docs/index.html", "host"), Seed("http://www.b.test/x/", "domain"),
         Seed("http://c.test/docs/guide/p.html?q=1", "prefix"), Seed("http://d.test/", "any")]
A, B, C, D = (s.fp for s in SEEDS)


def scope(**keys) -> tuple[ScopeFilter, Counter]:
    rejected: Counter = Counter()
    return ScopeFilter(ScopeConfig(**keys), SEEDS, rejected), rejected


def test_hops_past_the_limit_are_cut_and_counted_per_link():
    f, rejected = scope(max_hops=2)
    links = ["http://d.test/1", "http://e.test/2"]
    assert f.admit(links, 2, D) == (links, [])
    assert f.admit(links, 3, D) == ([], links)
    assert rejected == {"hops": 2}


@pytest.mark.parametrize(("seed", "inside", "outside"), [
    (A, ["http://www.a.test/", "http://www.a.test:8080/other"], ["http://a.test/", "http://x.www.a.test/"]),
    (B, ["http://b.test/", "http://www.b.test/y", "http://deep.sub.b.test/"], ["http://notb.test/", "http://b.test.x/"]),
    (C, ["http://c.test/docs/guide/", "http://c.test/docs/guide/more/p"], ["http://c.test/docs/", "http://c.test/docs/guid"]),
    (D, ["http://anything.test/"], []),
])
def test_per_seed_scopes(seed, inside, outside):
    f, rejected = scope()
    assert f.admit(inside + outside, 1, seed) == (inside, [])
    assert rejected == ({"scope": len(outside)} if outside else {})


def test_include_and_exclude_are_searched_in_the_canonical_url():
    f, rejected = scope(include=[r"\.test/docs/", r"^https://"], exclude=[r"\.pdf$", r"[?&]session="])
    urls = ["http://d.test/docs/a", "https://d.test/b", "http://d.test/c", "http://d.test/docs/x.pdf",
            "https://d.test/y?session=1"]
    assert f.admit(urls, 1, D) == (urls[:2], [])
    assert rejected == {"include": 1, "exclude": 2}


def test_an_unknown_seed_has_no_bound_and_an_idle_filter_passes_everything():
    f, rejected = scope(exclude=["zzz"])
    assert f.admit(["http://other.test/"], 1, 12345) == (["http://other.test/"], [])
    idle, _ = ScopeFilter(ScopeConfig(), [Seed("http://a.test/")], Counter()), None
    assert not idle.active and idle.admit(["http://x/"], 99, 0) == (["http://x/"], [])


def test_a_bad_regular_expression_is_a_config_error_naming_key_and_entry():
    with pytest.raises(ConfigError) as err:
        from_dict({"scope": {"exclude": [r"ok", r"(unclosed"]}})
    assert "scope.exclude[1]" in str(err.value) and "(unclosed" in str(err.value)


def test_seeds_with_scopes_from_the_config_and_the_seeds_file(tmp_path):
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text("# comment\nhttp://E.test/a  scope=prefix\nhttp://f.test/\n")
    config = from_dict({"crawl": {"seeds": ["http://g.test/", {"url": "http://H.test/", "scope": "domain"}],
                                  "seeds_file": str(seeds_file)}})
    assert read_seeds(config.crawl, 0) == [Seed("http://g.test/"), Seed("http://h.test/", "domain"),
                                           Seed("http://e.test/a", "prefix"), Seed("http://f.test/")]
    with pytest.raises(ConfigError, match="crawl.seeds\\[0\\].scope"):
        from_dict({"crawl": {"seeds": [{"url": "http://g.test/", "scope": "planet"}]}})
    with pytest.raises(ConfigError, match="seeds.txt:3"):
        parse_seed_line("http://g.test/ scope=planet", f"{tmp_path}/seeds.txt:3")
    assert parse_seed_line("http://g.test/", "x") == ("http://g.test/", "any")


def test_lineage_tags_round_trip_and_bare_strings_read_as_unknown():
    item = tag("http://a.test/p?q=1", 3, 2**64 - 1, 0xABC)
    assert split(item) == ("http://a.test/p?q=1", Lineage(3, 2**64 - 1, 0xABC))
    assert bare(item) == "http://a.test/p?q=1"
    assert tag_all(["http://a/", "http://b/"], 1, 2, 3) == [tag("http://a/", 1, 2, 3), tag("http://b/", 1, 2, 3)]
    assert split("http://a.test/") == ("http://a.test/", UNKNOWN)
    assert split("http://a.test/ 1 zz") == ("http://a.test/", UNKNOWN)


# --- nearer paths: against a model of "the smallest hop count wins" ------------------------------

def test_a_page_cut_at_the_limit_has_its_links_sent_again_when_found_nearer():
    near = NearerPaths(2, 100, 100)
    page = fingerprint("http://a.test/p")
    assert near.arrivals([page], [2], [11]) == []           # queued at the boundary
    assert near.settle(page, Lineage(2, 7, 11)) == Lineage(2, 7, 11)    # fetched there: its links are cut
    near.remember_cut(page, 2, 7, ["http://a.test/l1", "http://a.test/l2"])
    assert near.arrivals([page], [2], [12]) == []           # the same distance again: nothing changes
    assert near.arrivals([page], [1], [13]) == [(["http://a.test/l1", "http://a.test/l2"], Lineage(2, 7, page))]
    assert near.arrivals([page], [0], [14]) == [] and near.cut_links == 0     # sent once


def test_a_nearer_path_while_queued_lowers_the_fetch_distance_and_seeds_are_at_zero():
    seed = fingerprint("http://s.test/")
    near = NearerPaths(2, 100, 100, frozenset({seed}))
    page = fingerprint("http://a.test/p")
    near.arrivals([page], [2], [21])
    near.arrivals([page], [1], [22])
    assert near.settle(page, Lineage(2, 5, 21)) == Lineage(1, 5, 22) and near.lowered == 1
    assert near.settle(seed, Lineage(1, 5, 21)) == Lineage(0, seed, 0)


def test_memory_is_bounded_oldest_forgotten_first():
    near = NearerPaths(1, 2, 3)
    near.arrivals([1, 2, 3], [1, 1, 1], [0, 0, 0])
    assert list(near.nearest) == [2, 3] and near.forgotten_urls == 1
    near.remember_cut(10, 1, 0, ["u1", "u2"])
    near.remember_cut(11, 1, 0, ["u3", "u4"])
    assert list(near.cut) == [11] and near.cut_links == 2 and near.forgotten_links == 2
    near.remember_cut(12, 1, 0, ["a", "b", "c", "d"])      # larger than the whole budget: not kept
    assert 12 not in near.cut and near.forgotten_links == 6


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=30))
def test_links_cut_are_sent_on_at_the_smallest_distance_seen(arrivals):
    """Model: pages 0..5 fetched at their first arrival's distance (capped by nearer arrivals before the
    fetch); a page fetched at the limit whose links were cut gets them back once, at the smallest distance
    of any later arrival + 1; nothing is fetched twice."""
    limit = 2
    near = NearerPaths(limit, 100, 100)
    first: dict[int, int] = {}
    best: dict[int, int] = {}
    resent: dict[int, int] = {}
    for page, hops in arrivals:
        got = near.arrivals([page], [hops], [0])
        for links, lineage in got:
            assert page not in resent and links == [f"l{page}"] and lineage.via == page
            resent[page] = lineage.hops
        if hops <= limit:
            best[page] = min(best.get(page, hops), hops)
        if page not in first and hops <= limit:             # the DUE lets the first arrival through: fetch it
            first[page] = near.settle(page, Lineage(hops, 0, 0)).hops
            if first[page] == limit:
                near.remember_cut(page, limit, 0, [f"l{page}"])
    for page, fetched_at in first.items():
        if fetched_at == limit and best[page] < limit:
            assert resent.get(page) == best_after_fetch(arrivals, page, limit) + 1
        else:
            assert page not in resent


def best_after_fetch(arrivals, page, limit):
    """The smallest distance of an arrival of `page` after its first (fetched) one that is below the limit."""
    seen = False
    for p, h in arrivals:
        if p != page or h > limit:
            continue
        if seen and h < limit:
            return h
        seen = True
    raise AssertionError("no nearer arrival")


def test_the_memory_survives_a_save_and_restore(tmp_path):
    near = NearerPaths(2, 100, 100)
    near.arrivals([5, 6], [2, 2], [7, 8])
    near.remember_cut(9, 2, 2**64 - 1, ["http://a.test/x"])
    store = StateStore(tmp_path)
    asyncio.run(near.save(store))
    again = NearerPaths(2, 100, 100)
    again.restore(store)
    assert again.nearest == near.nearest and again.cut == near.cut and again.cut_links == 1


async def test_a_node_sends_on_the_links_it_cut_when_the_page_is_found_nearer(tmp_path):
    """Through a real node's pipeline (filter, scope, splitter, DUE, frontier): page P fetched at the limit
    has its links cut; when P is linked again from a page one hop nearer, its links are queued at the
    nearer distance with P as their referrer, and P itself is not queued again."""
    from tests.support.configs import one_node_config

    from crawler.node import Node
    seed = "http://s.test/"
    node = Node(from_dict(one_node_config(tmp_path / "node", seeds=[seed], scope={"max_hops": 2})), 0)
    s, p, q = fingerprint(seed), "http://p.test/", "http://q.test/"
    await node.add_urls([p], Lineage(1, s, 111), 111)                 # P found at hop 2, the limit
    await node.add_urls(["http://p.test/a", "http://p.test/b"], Lineage(2, s, 111), fingerprint(p))  # cut
    assert node.filter.rejected["hops"] == 2 and node.nearer.cut_links == 2
    await node.add_urls([p, q], Lineage(0, s, 0), s)                  # P again, from the seed: hop 1
    node.enqueue(node.due.flush())
    queued = {}
    while node.frontier.queued:
        host, item = await asyncio.wait_for(node.frontier.get(), 1)
        url, lineage = split(item)
        queued.setdefault(url, []).append(lineage)
        node.frontier.release(host, 0.0)
    assert queued == {p: [Lineage(2, s, 111)], q: [Lineage(1, s, s)],
                      "http://p.test/a": [Lineage(2, s, fingerprint(p))],
                      "http://p.test/b": [Lineage(2, s, fingerprint(p))]}
    assert node.nearer.stats()["resent_links"] == 2
    node.due.close()
    node.frontier.shutdown()

import asyncio
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.config.schema import SplitterConfig
from crawler.splitter import (
    FLAG_CACHE_HIT,
    FLAG_CROSS,
    HostSplitter,
    Partitioner,
    StreamLog,
    owner_pass,
    read_header,
    read_records,
    rendezvous_owner,
)
from crawler.urls import fingerprints, host_fingerprint


class SetCache:
    """Reference cache for tests: infinite, exact."""
    def __init__(self):
        self.seen = set()

    def check_and_add_many(self, fps):
        out = np.zeros(len(fps), dtype=bool)
        for i, fp in enumerate(fps.tolist()):
            out[i] = fp in self.seen
            self.seen.add(fp)
        return out


def test_modulo_owner_is_host_fp_mod_n():
    p = Partitioner(3)
    for host in ("a.test", "b.test", "www.example.org"):
        assert p.owner(host) == host_fingerprint(host) % 3


def test_rendezvous_moves_about_one_nth_of_hosts():
    hosts = [host_fingerprint(f"h{i}.test") for i in range(6000)]
    before = [rendezvous_owner(h, 4) for h in hosts]
    after = [rendezvous_owner(h, 5) for h in hosts]
    moved = sum(a != b for a, b in zip(before, after))
    assert all(b == 4 for a, b in zip(before, after) if a != b)   # only to the new node
    assert 0.15 < moved / len(hosts) < 0.25
    assert max(Counter(before).values()) < 1.15 * len(hosts) / 4


async def test_routing_accounting_and_batches(tmp_path):
    sent: list[tuple[int, list[str]]] = []

    async def send(peer, urls):
        sent.append((peer, urls))

    config = SplitterConfig(batch_size=7, batch_ms=10_000)
    part = Partitioner(3)
    log = StreamLog(tmp_path, node_id=0, node_count=3, rotate_bytes=1 << 20)
    s = HostSplitter(config, 0, part, SetCache(), send, log)
    urls = [f"http://h{i % 40}.test/p{i % 90}" for i in range(500)]
    fps = fingerprints(urls)
    local_urls = []
    for start in range(0, 500, 25):
        lf, lu = await s.route(urls[start:start + 25], fps[start:start + 25])
        assert list(lf) == list(fingerprints(lu))
        local_urls += lu
    await s.flush_all()
    owners = [part.owner(f"h{i % 40}.test") for i in range(500)]
    assert local_urls == [u for u, o in zip(urls, owners) if o == 0]
    cross = sum(o != 0 for o in owners)
    st = s.stats()
    assert st["cross"] == cross and st["local"] == 500 - cross
    assert st["urls_sent"] == cross - st["cache_hits"]                   # the splitter's accounting
    assert st["urls_sent"] == len({u for u, o in zip(urls, owners) if o != 0})
    assert all(len(b) <= 7 for _, b in sent) and sum(len(b) for _, b in sent) == st["urls_sent"]
    assert all(part.owner(u.split("/")[2]) == peer for peer, b in sent for u in b)
    log.close()
    (path,) = log.files
    header = read_header(path)
    assert (header.node_id, header.node_count) == (0, 3)
    rec = read_records(path)
    assert len(rec) == 500
    assert rec["fp"].tolist() == fps.tolist()
    assert rec["dest"].tolist() == owners
    assert int(((rec["flags"] & FLAG_CROSS) > 0).sum()) == cross
    assert int(((rec["flags"] & FLAG_CACHE_HIT) > 0).sum()) == st["cache_hits"]


async def test_batch_flushed_by_age():
    sent = []

    async def send(peer, urls):
        sent.append(urls)

    s = HostSplitter(SplitterConfig(batch_size=1000, batch_ms=30), 0, Partitioner(2), SetCache(), send)
    urls = [f"http://x{i}.test/" for i in range(40)]
    await s.route(urls, fingerprints(urls))
    timer = asyncio.create_task(s.run_timer())
    try:
        for _ in range(100):
            if sent:
                break
            await asyncio.sleep(0.01)
    finally:
        timer.cancel()
    assert sent and sum(map(len, sent)) == s.stats()["cross"]


def test_stream_log_rotates_and_rejects_foreign_files(tmp_path):
    log = StreamLog(tmp_path, 1, 2, rotate_bytes=4096)
    fps = np.arange(1000, dtype=np.uint64)
    for i in range(10):
        log.append(fps[i * 100:(i + 1) * 100], np.ones(100, np.uint16), np.zeros(100, np.uint16))
    log.close()
    assert len(log.files) > 1
    joined = np.concatenate([read_records(p)["fp"] for p in log.files])
    assert joined.tolist() == fps.tolist()
    bad = tmp_path / "bad.log"
    bad.write_bytes(b"not a log at all" * 8)
    with pytest.raises(ValueError, match="not a splitter stream log"):
        read_header(bad)


_TWINS = [pytest.param(owner_pass.py_split_owners, id="python"),
          pytest.param(owner_pass.split_owners, id="compiled",
                       marks=pytest.mark.skipif(not owner_pass.COMPILED,
                                                reason="the compiled extension is not built"))]


def _awkward_urls() -> list[str]:
    """http and https, ports, userinfo, one-letter hosts, IPv6 literals, and URLs with no path."""
    urls = []
    for i in range(300):
        host = f"h{i}.test"
        urls += [f"http://{host}/a", f"https://{host}/b?x=1", f"http://{host}:8080/c", f"https://u:pw@{host}/d",
                 f"http://{host[0]}/e", f"https://{host[0]}/f"]
    return urls + ["http://[::1]/x", "https://[2001:db8::1]:8443/y", "http://a.test", "https://b.test",
                   "http://\u00e9t\u00e9.test/caf\u00e9", "http://xn--tt-bja.test/"]


@pytest.mark.parametrize("memo_limit", [None, 50])
def test_owner_memo_by_origin_agrees_with_the_host_owner(monkeypatch, memo_limit):
    """The splitter's per-origin memo must give every URL its host's owner, also when the
    memo starts over (its limit, lowered to 50 in one run)."""
    from crawler.splitter import splitter as splitter_module
    from crawler.urls import host_of

    if memo_limit:
        monkeypatch.setattr(splitter_module, "_ORIGIN_MEMO_LIMIT", memo_limit)
    p = Partitioner(7)
    sent = []

    async def send(peer: int, batch: list[str]) -> None:
        sent.extend(batch)

    splitter = HostSplitter(SplitterConfig(), 0, p, None, send)
    urls = _awkward_urls()
    fps = fingerprints(urls)
    want = [p.owner(host_of(u)) for u in urls]
    for _ in range(2):                                                  # second pass: all from the memo
        kept_fps, kept = asyncio.run(splitter.route(urls, fps))
        assert kept == [u for u, o in zip(urls, want) if o == 0]
        assert kept_fps.tolist() == fingerprints(kept).tolist()
    assert len(set(want)) == 7
    assert splitter.by_destination == dict(Counter(want * 2))
    asyncio.run(splitter.flush_all())
    assert sorted(sent) == sorted(u for u, o in zip(urls * 2, want * 2) if o != 0)
    prefixes = {u[:u.find("/", 8)] if u.find("/", 8) > 0 else u for u in urls}
    if memo_limit is None:
        assert len(splitter._owner_by_origin) == len(prefixes)
    else:
        assert 0 < len(splitter._owner_by_origin) <= memo_limit < len(prefixes)


@pytest.mark.parametrize("split_owners", _TWINS)
def test_split_owners_against_a_per_url_model(split_owners):
    """Owners, cross and kept indexes, the kept URLs and the per-destination counts; `resolve` is
    called once per prefix the memo lacks (it fills the memo), and its answer is what counts."""
    from crawler.urls import host_of

    p = Partitioner(5)
    urls = _awkward_urls()
    for me in range(5):
        memo, calls = {}, []

        def resolve(origin: str, url: str, memo: dict = memo, calls: list = calls) -> int:
            calls.append(origin)
            owner = memo[origin] = p.owner(host_of(url))
            return owner

        counts = [10] * 5
        owners, cross, keep, keep_urls = split_owners(urls, memo, resolve, me, 8, counts)
        want = [p.owner(host_of(u)) for u in urls]
        assert owners == want
        assert cross == [i for i, o in enumerate(want) if o != me]
        assert keep == [i for i, o in enumerate(want) if o == me]
        assert keep_urls == [urls[i] for i in keep]
        assert counts == [10 + want.count(d) for d in range(5)]
        assert len(calls) == len(set(calls)) == len(memo)
        again = split_owners(urls, memo, resolve, me, 8, [0] * 5)
        assert again[0] == want and len(calls) == len(memo)            # the memo answered every URL


@pytest.mark.parametrize("split_owners", _TWINS)
def test_split_owners_edges(split_owners):
    """No cross URL: (None, None) for the kept part; no URL at all; a prefix-only URL; and
    an owner outside the cluster, or a bad `me`, is an error, not a silent miscount."""
    memo = {"http://a.test": 1}
    assert split_owners(["http://a.test/x", "http://a.test"], memo, None, 1, 8, [0, 0]) == ([1, 1], [], None, None)
    assert split_owners([], memo, None, 0, 8, [0, 0]) == ([], [], None, None)
    counts = [0, 0]
    assert split_owners(["http://a.test/x"], memo, None, 0, 8, counts) == ([1], [0], [], [])
    assert counts == [0, 1]
    with pytest.raises(ValueError):
        split_owners(["http://b.test/x"], {}, lambda origin, url: 2, 0, 8, [0, 0])
    with pytest.raises(ValueError):
        split_owners(["http://a.test/x"], memo, None, 2, 8, [0, 0])
    with pytest.raises(ZeroDivisionError):                             # resolve's own error comes out
        split_owners(["http://b.test/x"], {}, lambda origin, url: 1 // 0, 0, 8, [0, 0])


_link = st.tuples(st.integers(0, 11), st.integers(0, 15)).map(lambda hp: f"http://h{hp[0]}.test/p{hp[1]}")


@settings(max_examples=150, deadline=None)
@given(pages=st.lists(st.lists(_link, max_size=30), max_size=8), scope=st.sampled_from(["cross", "all"]),
       me=st.integers(0, 2), batch_size=st.integers(1, 9), logged=st.booleans())
def test_route_agrees_with_a_per_url_model(tmp_path_factory, pages, scope, me, batch_size, logged):
    """route() against the rule applied one URL at a time: the owner by host; the cache checks
    cross URLs (scope `cross`) or all URLs (scope `all`); a hit is dropped; a cross miss goes
    to its owner's batch, a local miss stays."""
    part = Partitioner(3)
    seen: set[int] = set()
    want_local, want_sent, want_flags, hits = [], {0: [], 1: [], 2: []}, [], 0
    for page in pages:
        for url, fp in zip(page, fingerprints(page).tolist()):
            owner = part.owner(url.split("/")[2])
            cross = owner != me
            hit = False
            if scope == "all" or cross:
                hit = fp in seen
                seen.add(fp)
            hits += hit
            want_flags.append(FLAG_CROSS * cross + FLAG_CACHE_HIT * hit)
            if not hit:
                (want_sent[owner] if cross else want_local).append(url)

    async def run():
        sent = {0: [], 1: [], 2: []}

        async def send(peer, urls):
            assert len(urls) <= batch_size
            sent[peer] += urls

        log = StreamLog(tmp_path_factory.mktemp("log"), node_id=me, node_count=3,
                        rotate_bytes=1 << 20) if logged else None
        s = HostSplitter(SplitterConfig(batch_size=batch_size, batch_ms=10_000, cache_scope=scope), me, part,
                         SetCache(), send, log)
        local = []
        for page in pages:
            fps = fingerprints(page)
            lf, lu = await s.route(page, fps)
            assert list(lf) == list(fingerprints(lu))
            local += lu
        await s.flush_all()
        return s, local, sent, log

    s, local, sent, log = asyncio.run(run())
    assert local == want_local
    assert sent == want_sent
    st_ = s.stats()
    n = sum(len(p) for p in pages)
    assert st_["cache_hits"] == hits
    assert st_["cross"] + st_["local"] == n
    assert sum(s.by_destination.values()) == n
    if logged:
        log.close()
        flags = [f for path in log.files for f in read_records(path)["flags"].tolist()]
        assert flags == want_flags

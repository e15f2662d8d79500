"""The state protocol: the store's atomic, versioned files; robots.txt and DNS caches saved and restored.

The robots.txt cache fetches from a real loopback aiohttp server (one server
plays several origins, told apart by Host) so that "restored, not fetched
again" is counted where the requests arrive. The DNS cache needs no server:
restored answers are served without a query, and its nameserver is a
loopback port where nothing listens.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import threading
import time

import pytest
from aiohttp import web
from tests.support.configs import one_node_config
from tests.support.ports import free_port

from crawler.config.schema import DnsConfig, FetchConfig, RobotsConfig
from crawler.fetch.dns import DnsError, Resolver, _Entry
from crawler.fetch.fetcher import Fetcher
from crawler.fetch.guard import PrivateAddressError
from crawler.fetch.robots import DEAD, ERROR, FETCHED, MISSING, RobotsCache
from crawler.node import PageCounts
from crawler.state import StateStore, restore_all, save_all

UA = "ExampleCrawler/1.0 (+https://example.org/crawler)"
ROBOTS = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"
VERSION = 1


# --- the store ------------------------------------------------------------------------------

def test_write_then_read_round_trip(tmp_path):
    store = StateStore(tmp_path / "state")
    records = [{"a": 1}, {"b": [1, 2], "c": "x"}]
    assert store.write("part", VERSION, iter(records)) == 2
    assert store.read("part", VERSION) == records
    lines = store.path("part").read_text().splitlines()
    header = json.loads(lines[0])
    assert header["name"] == "part" and header["version"] == VERSION and header["saved_at"] <= time.time()
    assert json.loads(lines[-1]) == {"end": "part", "records": 2}
    assert [p.name for p in (tmp_path / "state").iterdir()] == ["part.jsonl"]     # no temporary file left
    assert store.write("part", VERSION, []) == 0 and store.read("part", VERSION) == []


def test_a_failed_write_leaves_the_old_file(tmp_path):
    store = StateStore(tmp_path)
    store.write("part", VERSION, [{"n": 1}])

    def broken():
        yield {"n": 2}
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        store.write("part", VERSION, broken())
    assert store.read("part", VERSION) == [{"n": 1}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part.jsonl"]


def test_missing_file_is_an_empty_start(tmp_path):
    assert StateStore(tmp_path / "none").read("part", VERSION) is None


@pytest.mark.parametrize("damage", ["version", "name", "cut", "garbage", "not_object", "empty"])
def test_unusable_files_are_a_logged_skip(tmp_path, caplog, damage):
    store = StateStore(tmp_path)
    store.write("part", VERSION, [{"n": 1}, {"n": 2}])
    path = store.path("part")
    lines = path.read_text().splitlines()
    if damage == "version":
        lines[0] = json.dumps({"name": "part", "version": VERSION + 1, "saved_at": 0})
    elif damage == "name":
        lines[0] = json.dumps({"name": "other", "version": VERSION, "saved_at": 0})
    elif damage == "cut":
        lines = lines[:-2]                           # a record and the end line gone
    elif damage == "garbage":
        lines[1] = '{"n": 1'
    elif damage == "not_object":
        lines[1] = "[1]"
    else:
        lines = []
    path.write_text("".join(line + "\n" for line in lines))
    with caplog.at_level(logging.WARNING, logger="crawler.state"):
        assert store.read("part", VERSION) is None
    assert "not usable" in caplog.text and "part starts empty" in caplog.text and str(path) in caplog.text


class _Part:
    """A minimal Stateful for the protocol functions."""

    def __init__(self, name: str, value: int = 0) -> None:
        self.name, self.value = name, value

    def save(self, store, *, final=False):
        store.write(self.name, VERSION, [{"value": self.value, "final": final}])

    def restore(self, store):
        records = store.read(self.name, VERSION)
        if records:
            self.value = int(records[0]["value"])           # "x" -> ValueError: a skip, not a crash


async def test_save_all_and_restore_all_skip_an_unusable_part(tmp_path, caplog):
    store = StateStore(tmp_path)
    await save_all([_Part("a", 1), _Part("b", 2)], store, final=True)
    assert store.read("a", VERSION) == [{"value": 1, "final": True}]
    store.write("b", VERSION, [{"value": "x"}])
    a, b = _Part("a"), _Part("b")
    with caplog.at_level(logging.WARNING, logger="crawler.state"):
        restore_all([b, a], store)
    assert (a.value, b.value) == (1, 0)
    assert "b starts empty" in caplog.text


def test_counters_round_trip_and_sum():
    c = PageCounts(fetches=3, robots_fetches=1, robots_parked=2)
    c.pages[("2xx", "page")] += 3
    c.bytes["2xx"] += 100
    c.errors["read_timeout"] += 1
    back = PageCounts.from_json(json.loads(json.dumps(c.to_json())))
    assert back == c
    total = back + c
    assert (total.fetches, total.pages[("2xx", "page")], total.bytes["2xx"], total.robots_parked) == (6, 6, 200, 4)
    with pytest.raises(ValueError):
        PageCounts.from_json({"fetches": -1})


# --- robots.txt cache ---------------------------------------------------------------------------

@pytest.fixture
async def robots_site():
    """Origins by Host: ok (rules), missing (404), broken (503); counts /robots.txt requests."""
    hits: dict[str, int] = {}

    async def robots(request: web.Request) -> web.Response:
        name = request.host.split(".")[0]
        hits[name] = hits.get(name, 0) + 1
        if name == "ok":
            return web.Response(body=ROBOTS, content_type="text/plain")
        return web.Response(status=503 if name == "broken" else 404)

    app = web.Application()
    app.router.add_get("/robots.txt", robots)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1], hits
    finally:
        await runner.cleanup()


@pytest.fixture
async def make_robots():
    made = []

    def factory(**values) -> RobotsCache:
        max_entries = values.pop("max_entries", 1000)
        dns = DnsConfig(overrides={"*.robots.test": "127.0.0.1"})
        resolver = Resolver(dns)
        fetcher = Fetcher(FetchConfig(connect_timeout_s=1.0, total_timeout_s=5.0, dns=dns), resolver, UA)
        made.append((fetcher, resolver))
        config = RobotsConfig(**{"cache_s": 60.0, "error_retry_s": 60.0, **values})
        return RobotsCache(fetcher, config, UA, max_entries=max_entries)

    yield factory
    for fetcher, resolver in made:
        await fetcher.close()
        await resolver.close()


def origin(name: str, port: int) -> str:
    return f"http://{name}.robots.test:{port}"


async def test_robots_round_trip_makes_no_request(tmp_path, robots_site, make_robots):
    port, hits = robots_site
    store = StateStore(tmp_path)
    first = make_robots()
    for name in ("ok", "missing", "broken"):
        await first.fetch(origin(name, port))
    await first.save(store)
    assert hits == {"ok": 1, "missing": 1, "broken": 1}

    second = make_robots()
    second.restore(store)
    assert second.stats()["restored"] == 3
    ok, made = await second.fetch(origin("ok", port))
    assert made == []                                       # answered from the restored state
    assert ok.source == FETCHED and ok.crawl_delay_s == 2.0
    assert not ok.allowed(origin("ok", port) + "/private/x") and ok.allowed(origin("ok", port) + "/open")
    assert second.lookup(origin("ok", port)) is ok         # cached from now on
    missing, _ = await second.fetch(origin("missing", port))
    broken, _ = await second.fetch(origin("broken", port))
    assert (missing.source, broken.source, broken.failures) == (MISSING, ERROR, 1)
    assert not broken.allowed(origin("broken", port) + "/")
    assert hits == {"ok": 1, "missing": 1, "broken": 1}
    assert second.stats()["revived"] == 3
    # The wall-clock expiry survived: about 60 s left, not a new 60 s from the restore.
    assert 55 < second.remaining_s(ok) <= 60


async def test_robots_restore_drops_expired_and_keeps_the_bound(tmp_path, robots_site, make_robots):
    port, hits = robots_site
    store = StateStore(tmp_path)
    now = time.time()
    store.write("robots", 1, [
        {"origin": origin("ok", port), "source": FETCHED, "text": "User-agent: *\nDisallow: /\n",
         "expires_at": now - 1},                                        # expired: dropped
        {"origin": origin("a", port), "source": MISSING, "expires_at": now + 60},
        {"origin": origin("b", port), "source": MISSING, "expires_at": now + 60},
        {"origin": origin("c", port), "source": MISSING, "expires_at": now + 60},
    ])
    cache = make_robots(max_entries=2)
    cache.restore(store)
    assert cache.stats()["restored"] == 2 and cache.stats()["cache_size"] == 2     # a dropped: the oldest
    _, made = await cache.fetch(origin("c", port))
    assert made == []
    _, made = await cache.fetch(origin("a", port))
    assert len(made) == 1                                               # pushed out by the bound
    rules, made = await cache.fetch(origin("ok", port))
    assert len(made) == 1 and hits["ok"] == 1 and rules.allowed(origin("ok", port) + "/private/x") is False


async def test_robots_error_failures_carry_over_a_restart(tmp_path, robots_site, make_robots):
    port, hits = robots_site
    store = StateStore(tmp_path)
    expires_at = time.time() + 1.0      # room for a loaded machine to restore and look it up before it expires
    store.write("robots", 1, [{"origin": origin("broken", port), "source": ERROR, "failures": 2,
                               "expires_at": expires_at}])
    cache = make_robots()
    cache.restore(store)
    rules, made = await cache.fetch(origin("broken", port))
    assert made == [] and rules.failures == 2
    await asyncio.sleep(max(0.0, expires_at - time.time()) + 0.05)
    assert cache.lookup(origin("broken", port)) is None                # expired: fetch again
    rules, made = await cache.fetch(origin("broken", port))
    assert len(made) == 1 and rules.source == ERROR and rules.failures == 3
    await cache.save(store)
    saved = store.read("robots", 1)
    assert saved[0]["failures"] == 3 and "text" not in saved[0]


async def test_robots_dead_entries_and_reasons_survive_a_restart(tmp_path, robots_site, make_robots):
    """A dead origin stays dead across a restart, with its reason, and is not fetched again."""
    port, hits = robots_site
    store = StateStore(tmp_path)
    first = make_robots(dead_cache_s=60.0)
    dead, made = await first.fetch("http://127.0.0.1:9")          # only a private address: permanent
    broken, _ = await first.fetch(origin("broken", port))
    assert dead.source == DEAD and len(made) == 1
    await first.save(store)
    records = {r["origin"]: r for r in store.read("robots", 1)}
    assert records["http://127.0.0.1:9"]["reason"] == "private_address"
    assert records[origin("broken", port)]["reason"] == "http_503"
    second = make_robots(dead_cache_s=60.0)
    second.restore(store)
    rules, made = await second.fetch("http://127.0.0.1:9")
    assert made == [] and rules.source == DEAD and rules.reason == "private_address"
    assert not rules.allowed("http://127.0.0.1:9/x") and 55 < second.remaining_s(rules) <= 60
    rules, made = await second.fetch(origin("broken", port))
    assert made == [] and rules.reason == "http_503" and hits["broken"] == 1


async def test_robots_unusable_records_leave_the_cache_empty(tmp_path, make_robots, caplog):
    store = StateStore(tmp_path)
    store.write("robots", 1, [{"origin": "http://a.test", "source": MISSING, "expires_at": time.time() + 60},
                              {"origin": "http://b.test", "source": "maybe", "expires_at": time.time() + 60}])
    cache = make_robots()
    with caplog.at_level(logging.WARNING, logger="crawler.state"):
        restore_all([cache], store)
    assert cache.stats()["cache_size"] == 0 and "robots starts empty" in caplog.text


async def test_robots_save_is_skipped_when_nothing_changed(tmp_path, robots_site, make_robots):
    port, _ = robots_site
    store = StateStore(tmp_path)
    cache = make_robots()
    await cache.fetch(origin("ok", port))
    await cache.save(store)
    stamp = store.path("robots").stat().st_mtime_ns
    store.path("robots").write_text("stale")                 # would be replaced by a real write
    await cache.save(store)
    assert store.path("robots").read_text() == "stale"
    await cache.fetch(origin("missing", port))
    await cache.save(store)
    assert len(store.read("robots", 1)) == 2 and store.path("robots").stat().st_mtime_ns >= stamp


# --- DNS cache ----------------------------------------------------------------------------------

@pytest.fixture
async def make_resolver():
    made = []

    def factory(allow_private_networks: bool = False, **values) -> Resolver:
        # Nothing listens on this port: a query would time out, so an answer proves the cache served it.
        config = DnsConfig(nameservers=[f"127.0.0.1:{free_port()}"], timeout_s=0.2, tries=1, **values)
        resolver = Resolver(config, allow_private_networks=allow_private_networks)
        made.append(resolver)
        return resolver

    yield factory
    for resolver in made:
        await resolver.close()


async def test_dns_round_trip_serves_without_queries_and_reapplies_the_guard(tmp_path, make_resolver):
    store = StateStore(tmp_path)
    now = time.time()
    store.write("dns", 1, [
        {"name": "pub.test", "addresses": ["93.184.216.34"], "expires_at": now + 60},
        {"name": "mixed.test", "addresses": ["10.0.0.7", "93.184.216.35"], "expires_at": now + 60},
        {"name": "inside.test", "addresses": ["127.0.0.5"], "expires_at": now + 60},
        {"name": "gone.test", "reason": "dns_nxdomain", "detail": "no such name", "expires_at": now + 60},
        {"name": "old.test", "addresses": ["93.184.216.36"], "expires_at": now - 1},
    ])
    resolver = make_resolver()
    resolver.restore(store)
    assert resolver.stats()["restored"] == 4
    assert await resolver.resolve_host("pub.test") == ["93.184.216.34"]
    assert [r["host"] for r in await resolver.resolve("mixed.test", 80)] == ["93.184.216.35"]    # guard again
    with pytest.raises(PrivateAddressError):
        await resolver.resolve("inside.test", 80)
    with pytest.raises(DnsError) as err:
        await resolver.resolve_host("gone.test")
    assert err.value.reason == "dns_nxdomain"
    assert resolver.stats()["queries"] == 0
    with pytest.raises(DnsError):
        await resolver.resolve_host("old.test")              # expired: dropped, so it was queried (and failed)
    assert resolver.stats()["queries"] == 1

    await resolver.save(store)
    saved = {r["name"]: r for r in store.read("dns", 1)}
    assert saved["mixed.test"]["addresses"] == ["10.0.0.7", "93.184.216.35"]       # what the server said
    assert saved["gone.test"]["reason"] == "dns_nxdomain" and abs(saved["pub.test"]["expires_at"] - (now + 60)) < 1
    allowing = make_resolver(allow_private_networks=True)
    allowing.restore(store)
    assert [r["host"] for r in await allowing.resolve("inside.test", 80)] == ["127.0.0.5"]


async def test_dns_overrides_are_not_state_and_bad_records_are_a_skip(tmp_path, make_resolver, caplog):
    store = StateStore(tmp_path)
    resolver = make_resolver(overrides={"*.web.test": "127.0.0.1"})
    assert await resolver.resolve_host("a.web.test") == ["127.0.0.1"]
    await resolver.save(store)
    assert store.read("dns", 1) == []                         # overrides are never cached
    store.write("dns", 1, [{"name": "x.test", "addresses": ["not-an-address"], "expires_at": time.time() + 60}])
    fresh = make_resolver()
    with caplog.at_level(logging.WARNING, logger="crawler.state"):
        restore_all([fresh], store)
    assert fresh.stats()["cache_size"] == 0 and "dns starts empty" in caplog.text


# --- saves run off the event loop ------------------------------------------------------------------

class _GatedStore(StateStore):
    """A store whose write() waits, in its thread, until the test opens `gate` (or fails with `error`)."""

    def __init__(self, directory, error: OSError | None = None) -> None:
        super().__init__(directory)
        self.gate = threading.Event()
        self.started = threading.Event()
        self.error = error
        self.writing = 0                 # writes running now (never more than one)
        self.most_at_once = 0
        self.threads: list[int] = []

    def write(self, name, version, records):
        self.writing += 1
        self.most_at_once = max(self.most_at_once, self.writing)
        self.threads.append(threading.get_ident())
        self.started.set()
        try:
            assert self.gate.wait(10), "the loop never opened the gate: write() ran on it"
            if self.error is not None:
                raise self.error
            return super().write(name, version, records)
        finally:
            self.writing -= 1


def _fill(resolver: Resolver, n: int, first: int = 0) -> None:
    expires = time.monotonic() + 60
    for i in range(first, first + n):
        addr = (f"93.184.{i >> 8 & 255}.{i & 255}",)
        resolver._store(f"h{i}.test", _Entry(addr, addr, None, "", expires))


async def _open_gate_when_started(store: _GatedStore) -> int:
    """Runs on the loop while a save is in flight: ticks until the write started, then lets it go."""
    ticks = 0
    while not store.started.is_set():
        await asyncio.sleep(0.001)
        ticks += 1
    store.gate.set()
    return ticks


async def test_a_save_writes_in_a_thread_while_the_loop_runs(tmp_path, make_resolver):
    resolver = make_resolver()
    _fill(resolver, 1000)
    store = _GatedStore(tmp_path)
    saving = asyncio.create_task(resolver.save(store))
    # The write waits for this coroutine, on the loop: done at all means the loop ran during the save.
    await _open_gate_when_started(store)
    await saving
    assert store.threads and threading.get_ident() not in store.threads
    assert len(store.read("dns", 1)) == 1000


async def test_a_save_writes_the_cache_as_it_was_when_it_started(tmp_path, make_resolver):
    resolver = make_resolver()
    _fill(resolver, 10)
    store = _GatedStore(tmp_path)
    saving = asyncio.create_task(resolver.save(store))
    while not store.started.is_set():
        await asyncio.sleep(0.001)
    _fill(resolver, 5, first=10)                 # changed while the file is written
    store.gate.set()
    await saving
    assert len(store.read("dns", 1)) == 10
    await resolver.save(store)                   # the changes made meanwhile are written by the next save
    assert len(store.read("dns", 1)) == 15


async def test_a_failed_save_raises_in_the_caller_and_is_tried_again(tmp_path, make_resolver):
    resolver = make_resolver()
    _fill(resolver, 10)
    store = _GatedStore(tmp_path, error=OSError(28, "No space left on device"))
    store.gate.set()
    with pytest.raises(OSError) as err:
        await save_all([resolver], store)
    assert err.value.errno == 28
    store.error = None
    await resolver.save(store)                   # not counted as saved: written now
    assert len(store.read("dns", 1)) == 10


async def test_a_cancelled_save_is_waited_for_by_the_next_one_and_by_close(tmp_path, make_resolver):
    resolver = make_resolver()
    _fill(resolver, 10)
    store = _GatedStore(tmp_path)
    cut = asyncio.create_task(resolver.save(store))
    while not store.started.is_set():
        await asyncio.sleep(0.001)
    cut.cancel()                                 # a node stopping mid-checkpoint
    with pytest.raises(asyncio.CancelledError):
        await cut
    _fill(resolver, 1, first=10)
    store.started.clear()
    final = asyncio.create_task(resolver.save(store, final=True))
    await asyncio.sleep(0.05)
    assert not store.started.is_set()            # the second write waits for the first
    store.gate.set()
    await final
    await resolver.close()
    assert store.most_at_once == 1 and len(store.threads) == 2
    assert len(store.read("dns", 1)) == 11


# --- the node's use of the protocol ---------------------------------------------------------------

def test_fresh_removes_the_state_directory_and_resume_needs_state_json(tmp_path):
    from crawler.config import ConfigError, from_dict
    from crawler.node import Node

    config = from_dict(one_node_config(tmp_path / "node-{node}"))
    state = tmp_path / "node-0" / "state"
    StateStore(state).write("robots", 1, [])
    with pytest.raises(ConfigError, match="state"):          # state without state.json: not resumable
        Node(config, 0)
    node = Node(config, 0, fresh=True)
    assert not state.exists() and not node.resuming
    assert [p.name for p in node.parts] == ["due", "frontier", "control_totals", "counters", "report"]   # + caches
    node.due.close()


def test_a_short_write_is_a_storage_error_in_the_systems_words():
    from crawler.fsutil import short_write_error
    exc = short_write_error("/data/x.log", 32, 54)
    assert exc.errno == errno.ENOSPC and exc.filename == "/data/x.log"
    assert exc.strerror.startswith("No space left on device") and "32 of 54 bytes" in exc.strerror

"""crawler/control: the token, host patterns, the settings file, and the frontier's side of pause, block and
delay (a real Frontier, in RAM)."""

from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest

from crawler.config.schema import FrontierConfig
from crawler.control import ControlSettings, HostPatterns, PatternError, control_token, parse_pattern, token_status
from crawler.control.settings import FILE, SettingsError
from crawler.control.token import MISSING, OK, WRONG, local_secret, local_secret_path
from crawler.frontier import Frontier

SECRET = b"a-test-secret-of-some-length"


# --- the token ----------------------------------------------------------------------------------
def test_the_token_is_an_hmac_of_the_secret_and_differs_by_secret():
    token = control_token(SECRET)
    assert len(token) == 64 and int(token, 16) >= 0
    assert token == control_token(SECRET)
    assert token != control_token(SECRET + b"x")
    assert SECRET.decode() not in token


def test_token_status_tells_missing_from_wrong():
    token = control_token(SECRET)
    assert token_status(f"Bearer {token}", token) == OK
    assert token_status(None, token) == MISSING
    assert token_status("", token) == MISSING
    assert token_status(f"Basic {token}", token) == MISSING
    assert token_status("Bearer " + control_token(b"another secret"), token) == WRONG
    assert token_status("Bearer ", token) == WRONG
    assert token_status("Bearer \u00e9t\u00e9", token) == WRONG          # not ASCII: no crash, refused
    assert token_status(f"Bearer {token}", None) == WRONG                # a node without a secret refuses all


# --- host patterns ------------------------------------------------------------------------------
@pytest.mark.parametrize("text, canonical", [
    ("Example.ORG", "example.org"), ("example.org.", "example.org"), (".example.org", ".example.org"),
    ("  a-b.example.org ", "a-b.example.org"), ("127.0.0.2", "127.0.0.2"), ("[::1]", "[::1]"),
    ("b\u00fccher.example", "xn--bcher-kva.example"),
])
def test_patterns_are_canonical_hosts(text, canonical):
    assert parse_pattern(text) == canonical


@pytest.mark.parametrize("text, says", [
    ("http://example.org/", "not a URL"), ("example.org/path", "not a URL"), ("example.org:8080", "port"),
    ("*.example.org", "wildcards"), ("", "not a host"), (".", "not a host"), ("a..b", "not a host"),
    ("exa mple.org", "not a host"),
])
def test_bad_patterns_say_what_is_wrong(text, says):
    with pytest.raises(PatternError, match=says):
        parse_pattern(text)


def test_a_host_pattern_matches_that_host_and_a_domain_pattern_the_domain_and_below():
    p = HostPatterns({"a.test": 1.0, ".example.org": 1.0})
    assert p.matches("a.test") and not p.matches("b.a.test") and not p.matches("xa.test")
    assert p.matches("example.org") and p.matches("www.example.org") and p.matches("a.b.example.org")
    assert not p.matches("notexample.org") and not p.matches("example.org.evil") and not p.matches("org")
    assert p.remove(".example.org") and not p.remove(".example.org")
    assert not p.matches("www.example.org") and p
    assert p.remove("a.test") and not p


def test_the_most_specific_pattern_gives_the_value():
    p = HostPatterns({".example.org": 5.0, ".b.example.org": 2.0, "c.b.example.org": 9.0})
    assert p.lookup("example.org") == 5.0 and p.lookup("a.example.org") == 5.0
    assert p.lookup("x.b.example.org") == 2.0 and p.lookup("c.b.example.org") == 9.0
    assert p.lookup("other.test") is None
    assert p.as_dict() == {".b.example.org": 2.0, ".example.org": 5.0, "c.b.example.org": 9.0}


# --- the settings file --------------------------------------------------------------------------
def test_settings_round_trip_through_the_file(tmp_path):
    assert ControlSettings.load(tmp_path) == ControlSettings()          # no file: the defaults
    s = ControlSettings(paused=True, blocked=[".example.org", "a.test"], delays={"b.test": 2.5})
    s.save(tmp_path / "state")
    assert ControlSettings.load(tmp_path / "state") == s
    assert not list((tmp_path / "state").glob("*.tmp"))                # replaced atomically, nothing left over
    assert json.loads((tmp_path / "state" / FILE).read_text())["version"] == 1


@pytest.mark.parametrize("content, says", [
    ("{not json", "Expecting"), ('{"version": 99}', "version"),
    ('{"version": 1, "blocked": ["http://x/"]}', "not a URL"),
    ('{"version": 1, "delays": {"a.test": -1}}', ">= 0"), ('{"version": 1, "paused": "yes"}', "true or false"),
])
def test_a_bad_settings_file_is_an_error_naming_it(tmp_path, content, says):
    (tmp_path / FILE).write_text(content)
    with pytest.raises(SettingsError, match=says) as info:
        ControlSettings.load(tmp_path)
    assert str(tmp_path / FILE) in str(info.value)


# --- the frontier's side --------------------------------------------------------------------------
async def test_a_paused_frontier_hands_out_nothing_until_resumed():
    f = Frontier(FrontierConfig(), workers=2)
    f.add("http://a/0", "a")
    f.pause()
    waiter = asyncio.ensure_future(f.get())
    f.add("http://b/0", "b")
    await asyncio.sleep(0.05)
    assert not waiter.done() and f.paused and f.queued == 2
    f.resume()
    assert (await asyncio.wait_for(waiter, 1))[0] in ("a", "b")
    assert not f.paused


async def test_drop_hosts_removes_queued_urls_also_spilled_ones_and_keeps_the_others():
    f = Frontier(FrontierConfig(memory_urls=40, chunk_urls=8), workers=2)
    for i in range(30):
        for h in ("a.test", "x.a.test", "b.test"):
            f.add(f"http://{h}/{i}", h)
    assert f.stats()["spilled_urls"] > 0
    host, url = await f.get()                             # one host busy while its queue is dropped
    blocked = HostPatterns({".a.test": 1.0})
    dropped = f.drop_hosts(blocked.matches)
    assert f.busy_matching(blocked.matches) == (1 if blocked.matches(host) else 0)
    assert f.busy_matching(lambda name: name == host) == 1
    expected = 60 - (1 if blocked.matches(host) else 0)
    assert dropped == expected and f.queued == 90 - 1 - expected
    f.release(host, 0.0)
    out = []
    while f.queued:
        h, u = await asyncio.wait_for(f.get(), 1)
        out.append(h)
        f.release(h, 0.0)
    assert set(out) == {"b.test"} and f.idle() and f.active_hosts == 0


async def test_refused_requeue_and_least_delay():
    f = Frontier(FrontierConfig(), workers=1)
    f.refuse = lambda host: host == "a"
    f.min_delay_of = lambda host: 0.2 if host == "b" else 0.0
    f.add("http://a/0", "a")
    host, url = await f.get()
    f.requeue(host, url)                                   # a was blocked meanwhile: not put back
    f.release(host, 0.0)
    assert f.queued == 0 and f.idle()
    f.add("http://b/0", "b")
    f.add("http://b/1", "b")
    loop = asyncio.get_running_loop()
    await f.get()
    t0 = loop.time()
    f.release("b", 0.01)                                   # the operator's 0.2 s wins over the host's 0.01 s
    await asyncio.wait_for(f.get(), 1)
    assert loop.time() - t0 >= 0.19


def test_a_node_without_a_cluster_secret_keeps_its_own_readable_by_its_owner_only(tmp_path):
    state = tmp_path / "state"
    first = local_secret(state)
    mode = stat.S_IMODE(os.stat(local_secret_path(state)).st_mode)
    assert mode == 0o600 and len(first) == 64
    assert local_secret(state) == first                                   # kept: the same token after a restart
    assert local_secret(tmp_path / "other" / "state") != first            # random per node

"""Host and URL policies on constructed host statistics; EWMA against hand-computed values."""

import asyncio

import pytest

from crawler.config.schema import FrontierConfig
from crawler.frontier import Frontier, GlobalEstimates, HostPolicy, HostStats, HostView


def view(seq=0, queued=10, qsum=10.0, qmax=1.0, stats=None):
    return HostView(seq, queued, qsum, qmax, stats or HostStats())


def policy(name, estimates=None):
    return HostPolicy(name, requests_per_connection=50, estimates=estimates or GlobalEstimates())


def test_ewma_hand_computed():
    s = HostStats()
    s.observe(0.10, 1.0, 0.8)            # first sample taken as it is
    assert (s.connect_s, s.response_s) == (0.10, 1.0)
    s.observe(0.20, 2.0, 0.8)            # 0.8 * 0.10 + 0.2 * 0.20 = 0.12; 0.8 * 1 + 0.2 * 2 = 1.2
    assert s.connect_s == pytest.approx(0.12) and s.response_s == pytest.approx(1.2)
    s.observe(None, 0.2, 0.8)            # reused connection: connect estimate unchanged
    assert s.connect_s == pytest.approx(0.12) and s.response_s == pytest.approx(0.8 * 1.2 + 0.2 * 0.2)
    assert s.requests_per_connection(50) == pytest.approx(3 / 2)


def test_bfs_prefers_the_oldest_url():
    p = policy("bfs")
    assert p.score(view(seq=3)) > p.score(view(seq=7))


def test_performance_is_pages_per_second_with_p_capped_by_queue_and_connection():
    p = policy("performance")
    fast = HostStats(connect_s=0.1, response_s=0.1, fetches=10, connections=1)     # 10 requests per connection
    slow = HostStats(connect_s=0.1, response_s=1.0, fetches=10, connections=1)
    # fast: P = min(10, 100) = 10, T = 0.1 + 10 * 0.1 = 1.1 -> R = 9.09
    assert p.score(view(queued=100, stats=fast)) == pytest.approx(10 / 1.1)
    # P capped by the queue: P = 2, T = 0.1 + 2 * 0.1 -> R = 6.67
    assert p.score(view(queued=2, stats=fast)) == pytest.approx(2 / 0.3)
    assert p.score(view(queued=100, stats=fast)) > p.score(view(queued=100, stats=slow))


def test_unknown_server_uses_fifty_requests_and_the_mean_estimates():
    est = GlobalEstimates()
    for c, r in ((0.1, 0.2), (0.3, 0.4)):
        est.replace(None, HostStats(connect_s=c, response_s=r))
    p = policy("performance", est)
    # P = min(50, 80) = 50; T = 0.2 + 50 * 0.3 = 15.2
    assert p.score(view(queued=80)) == pytest.approx(50 / 15.2)


def test_quality_takes_the_best_url():
    p = policy("quality")
    assert p.score(view(qmax=5.0)) > p.score(view(qmax=2.0))


def test_capability_is_quality_per_second():
    p = policy("capability")
    stats = HostStats(connect_s=0.5, response_s=0.5, fetches=4, connections=1)   # 4 per connection
    # P = 4, mean quality 2 -> quality 8; T = 0.5 + 4 * 0.5 = 2.5 -> C = 3.2
    assert p.score(view(queued=10, qsum=20.0, stats=stats)) == pytest.approx(3.2)
    # A slow host with better pages can lose to a fast one with worse pages.
    slow_good = HostStats(connect_s=1.0, response_s=5.0, fetches=4, connections=1)
    fast_poor = HostStats(connect_s=0.1, response_s=0.1, fetches=4, connections=1)
    assert p.score(view(queued=10, qsum=40.0, stats=slow_good)) < p.score(view(queued=10, qsum=10.0, stats=fast_poor))


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="bfs"):
        policy("random")


async def drain(f: Frontier, n: int) -> list[tuple[str, str]]:
    out = []
    for _ in range(n):
        host, url = await asyncio.wait_for(f.get(), 1)
        out.append((host, url))
        f.release(host, 0.0)
    return out


async def test_quality_host_policy_orders_ready_hosts():
    f = Frontier(FrontierConfig(host_policy="quality"), workers=1)
    f.add("http://a/1", "a", 1.0)
    f.add("http://b/1", "b", 9.0)
    f.add("http://c/1", "c", 5.0)
    assert [h for h, _ in await drain(f, 3)] == ["b", "c", "a"]


async def test_quality_url_policy_orders_urls_within_a_host():
    f = Frontier(FrontierConfig(url_policy="quality"), workers=1)
    for i, q in enumerate((1.0, 7.0, 3.0)):
        f.add(f"http://a/{i}", "a", q)
    assert [u for _, u in await drain(f, 3)] == ["http://a/1", "http://a/2", "http://a/0"]


async def test_performance_policy_prefers_the_fast_server_once_measured():
    f = Frontier(FrontierConfig(host_policy="performance"), workers=1)
    for i in range(4):
        f.add(f"http://slow/{i}", "slow")
        f.add(f"http://fast/{i}", "fast")
    first = await drain(f, 2)
    for host, _ in first:
        f.observe(host, 0.05, 2.0 if host == "slow" else 0.01, None)
    assert [h for h, _ in await drain(f, 3)] == ["fast", "fast", "fast"]


async def test_policy_never_breaks_politeness():
    """The best host by quality still waits its delay; others go meanwhile."""
    f = Frontier(FrontierConfig(host_policy="quality"), workers=1)
    f.add("http://best/0", "best", 9.0)
    f.add("http://best/1", "best", 9.0)
    f.add("http://other/0", "other", 1.0)
    host, _ = await f.get()
    assert host == "best"
    f.release("best", 0.2)
    host, _ = await asyncio.wait_for(f.get(), 1)
    assert host == "other"
    f.release("other", 0.0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    host, _ = await asyncio.wait_for(f.get(), 2)
    assert host == "best" and loop.time() - t0 >= 0.15


async def test_per_ip_politeness_shares_the_wait_between_hosts_on_one_address():
    f = Frontier(FrontierConfig(), workers=2, per_ip=True)
    for i in range(2):
        f.add(f"http://a/{i}", "a")
        f.add(f"http://b/{i}", "b")
    loop = asyncio.get_running_loop()
    # First contact: addresses are not known yet, both may go.
    (h1, _), (h2, _) = await f.get(), await f.get()
    f.observe(h1, 0.01, 0.01, "127.0.0.9")
    f.observe(h2, 0.01, 0.01, "127.0.0.9")
    f.release(h1, 0.2)
    f.release(h2, 0.2)
    t0 = loop.time()
    host, _ = await asyncio.wait_for(f.get(), 2)
    waiter = asyncio.ensure_future(f.get())
    await asyncio.sleep(0.3)
    assert not waiter.done()                      # the other host shares the busy address
    f.release(host, 0.1)
    other, _ = await asyncio.wait_for(waiter, 2)
    assert other != host and loop.time() - t0 >= 0.2 + 0.1 - 0.01

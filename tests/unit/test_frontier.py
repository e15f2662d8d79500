import asyncio
import random

from crawler.config.schema import FrontierConfig
from crawler.frontier import Frontier


async def test_fifo_per_host_and_one_in_flight():
    f = Frontier(FrontierConfig(), workers=4)
    for i in range(3):
        f.add(f"http://a/{i}", "a")
    f.add("http://b/0", "b")
    got = [await f.get(), await f.get()]
    assert sorted(h for h, _ in got) == ["a", "b"]
    # a is busy: nothing else of a comes out until it is released
    assert f.queued == 2
    waiter = asyncio.ensure_future(f.get())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    f.release("a", 0.0)
    assert await asyncio.wait_for(waiter, 1) == ("a", "http://a/1")


async def test_release_delay_is_waited_out():
    f = Frontier(FrontierConfig(), workers=1)
    f.add("http://a/0", "a")
    f.add("http://a/1", "a")
    loop = asyncio.get_running_loop()
    assert await f.get() == ("a", "http://a/0")
    t0 = loop.time()
    f.release("a", 0.15)
    assert await f.get() == ("a", "http://a/1")
    assert loop.time() - t0 >= 0.149


async def test_reactivated_host_keeps_its_wait():
    """A host whose queue emptied must still wait its delay when a new URL arrives."""
    f = Frontier(FrontierConfig(), workers=1)
    loop = asyncio.get_running_loop()
    f.add("http://a/0", "a")
    await f.get()
    f.release("a", 0.1)          # queue empty: host deactivated
    t0 = loop.time()
    f.add("http://a/1", "a")
    assert await f.get() == ("a", "http://a/1")
    assert loop.time() - t0 >= 0.09


async def test_spilled_queues_come_back_in_order_and_ram_stays_bounded():
    """Past memory_urls, queues go to disk chunks; every URL still comes out once, FIFO per host."""
    f = Frontier(FrontierConfig(memory_urls=40, chunk_urls=8), workers=2)
    for i in range(50):
        for h in "abcd":
            f.add(f"http://{h}/{i}", h)
        assert f.stats()["ram_urls"] <= 40
    assert f.stats()["spilled_urls"] > 0 and f.queued == 200
    seen: dict[str, list[int]] = {h: [] for h in "abcd"}
    for _ in range(200):
        host, url = await asyncio.wait_for(f.get(), 1)
        seen[host].append(int(url.rsplit("/", 1)[1]))
        f.release(host, 0.0)
    assert all(v == list(range(50)) for v in seen.values())
    assert f.idle() and f.stats()["loaded_urls"] == f.stats()["spilled_urls"]
    f.shutdown()


async def test_requeue_puts_url_first():
    f = Frontier(FrontierConfig(), workers=1)
    f.add("http://a/0", "a")
    f.add("http://a/1", "a")
    host, url = await f.get()
    f.requeue(host, url)
    f.release(host, 0.0)
    assert await f.get() == ("a", "http://a/0")


async def test_close_wakes_waiters():
    f = Frontier(FrontierConfig(), workers=2)
    waiters = [asyncio.ensure_future(f.get()) for _ in range(3)]
    await asyncio.sleep(0)
    f.close()
    assert await asyncio.gather(*waiters) == [None, None, None]
    assert await f.get() is None


async def test_many_workers_random_delays_never_overlap_per_host():
    """Simulated crawl: per host, intervals never overlap and gaps respect the delay."""
    f = Frontier(FrontierConfig(), workers=16)
    rng = random.Random(7)
    hosts = [f"h{i}" for i in range(10)]
    for n in range(200):
        h = rng.choice(hosts)
        f.add(f"http://{h}/{n}", h)
    loop = asyncio.get_running_loop()
    log: dict[str, list[tuple[float, float, float]]] = {h: [] for h in hosts}

    async def worker():
        while (item := await f.get()) is not None:
            host, url = item
            start = loop.time()
            await asyncio.sleep(rng.uniform(0, 0.004))
            end = loop.time()
            delay = rng.uniform(0, 0.01)
            log[host].append((start, end, delay))
            f.release(host, delay)
            if f.idle():
                f.close()

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(16))), 20)
    assert sum(len(v) for v in log.values()) == 200
    for host, visits in log.items():
        for (s0, e0, d0), (s1, _, _) in zip(visits, visits[1:]):
            assert s1 >= e0 + d0 - 1e-6, (host, s1 - e0, d0)

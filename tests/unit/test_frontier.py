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
    f.stop_handing_out()
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
                f.stop_handing_out()

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(16))), 20)
    assert sum(len(v) for v in log.values()) == 200
    for host, visits in log.items():
        for (_, e0, d0), (s1, _, _) in zip(visits, visits[1:]):
            assert s1 >= e0 + d0 - 1e-6, (host, s1 - e0, d0)


async def test_long_tail_hosts_keep_few_chunks():
    """Hosts spilled a few URLs at a time merge their small chunks: a host holds its full chunks
    plus at most ~log2(chunk_urls) partial ones, so RAM does not grow with the queue."""
    chunk, hosts = 64, [f"h{i}" for i in range(100)]
    f = Frontier(FrontierConfig(memory_urls=200, chunk_urls=chunk), workers=2)
    per_host = 300
    for i in range(per_host):
        f.add_many([(f"http://{h}/{i}", h, 0.0) for h in hosts])
    stats = f.stats()
    assert stats["rewritten_urls"] > 0
    full = per_host // chunk
    assert stats["chunks"] <= len(hosts) * (full + chunk.bit_length() + 1), stats["chunks"]
    assert stats["chunks"] < stats["spilled_urls"] / 8            # unmerged, a spill would be ~2 URLs
    seen: dict[str, list[int]] = {h: [] for h in hosts}
    for _ in range(per_host * len(hosts)):
        host, url = await asyncio.wait_for(f.get(), 1)
        seen[host].append(int(url.rsplit("/", 1)[1]))
        f.release(host, 0.0)
    assert all(v == list(range(per_host)) for v in seen.values())
    assert f.idle()
    f.shutdown()


async def test_sparse_segments_are_compacted_and_survive_a_restart(tmp_path):
    """Chunks of a host that waits a long time must not keep mostly-consumed segments on disk:
    they are moved (byte for byte), the old segments go, and they read back after a restart."""
    config = FrontierConfig(memory_urls=16, chunk_urls=8, resume_wait_s=0.0)
    segment = 2048
    f = Frontier(config, workers=2, directory=tmp_path, segment_bytes=segment)
    for k in range(30):                                     # slow's chunks end up in every segment
        f.add_many([(f"http://slow/{k * 8 + i}", "slow", 0.0) for i in range(8)])
        f.add_many([(f"http://fast/{k * 56 + i}", "fast", 0.0) for i in range(56)])
    first = await asyncio.wait_for(f.get(), 1)
    assert first == ("slow", "http://slow/0")
    f.release("slow", 3600.0)                               # slow now waits: its chunks stay queued
    while f._hosts["fast"].queued:
        host, _url = await asyncio.wait_for(f.get(), 1)
        assert host == "fast"
        f.release(host, 0.0)
    assert f.stats()["compactions"] == 0
    f.add_many([(f"http://fresh/{i}", "fresh", 0.0) for i in range(100)])   # a spill: compaction runs
    f.checkpoint()                                          # the old checkpoint's segments may go now
    stats = f.stats()
    assert stats["chunks_relocated"] > 0 and stats["compactions"] > 0, stats
    disk = sum(p.stat().st_size for p in tmp_path.glob("seg-*.dat"))
    live = f._store.live_bytes()
    assert disk <= 2 * live + 2 * segment, (disk, live)
    queued = f.queued
    f.shutdown()
    again = Frontier(config, workers=2, directory=tmp_path, segment_bytes=segment)
    assert again.queued == queued
    h = again._hosts["slow"]                                # its hour-long wait survived the restart; skip it
    h.ready_at = 0.0
    again._schedule(h)
    slow = []
    for _ in range(queued):
        host, url = await asyncio.wait_for(again.get(), 1)
        if host == "slow":
            slow.append(int(url.rsplit("/", 1)[1]))
        again.release(host, 0.0)
    assert slow == list(range(1, 240))
    assert again.idle() and again.stats()["chunk_errors"] == 0
    again.shutdown()


async def test_sync_soon_fsyncs_off_the_loop_and_checkpoints_hand_over_the_old_journal(tmp_path):
    """The periodic fsync runs in the writer thread on a duplicate descriptor, and a checkpoint
    hands the old journal to the writer to fsync and close: no descriptor is left open, and
    what was journaled survives a restart."""
    import os
    fds_before = len(os.listdir("/proc/self/fd"))
    config = FrontierConfig(resume_wait_s=0.0)
    f = Frontier(config, workers=1, directory=tmp_path)
    f.add_many([(f"http://a.test/{i}", "a.test", 0.0) for i in range(5)])
    f.sync_soon()
    syncing = f._syncing
    assert syncing is not None
    await asyncio.wait_for(asyncio.wrap_future(syncing), 5)
    f.sync_soon()                                  # collects the finished one; nothing new to sync
    assert f._syncing is None
    await f.checkpoint_async()
    f.add_many([(f"http://a.test/{i}", "a.test", 0.0) for i in range(5, 8)])
    f.shutdown()
    assert len(os.listdir("/proc/self/fd")) == fds_before
    again = Frontier(config, workers=1, directory=tmp_path)
    assert again.queued == 8
    again.shutdown()


async def test_a_journal_failure_while_handing_out_a_url_closes_cleanly(tmp_path):
    """Handing a URL to a waiting worker journals its start; when that write fails, the node's
    storage-error handler closes the frontier right inside the hand-out. The waiting worker gets
    None (the frontier is closed), the URL stays queued, and nothing raises in the loop's timer
    callback (it raised IndexError: the close had emptied the waiters mid-dispatch)."""
    import os
    loop = asyncio.get_running_loop()
    errors = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    config = FrontierConfig(resume_wait_s=0.0)
    f = Frontier(config, workers=1, directory=tmp_path)
    f.on_storage_error = lambda exc: f.stop_handing_out()
    f.add_many([(f"http://a.test/{i}", "a.test", 0.0) for i in range(3)])
    host, url = await asyncio.wait_for(f.get(), 2)
    f.release(host, 0.05, confirmed=True)          # the host's next URL waits out its delay
    waiting = asyncio.create_task(f.get())
    await asyncio.sleep(0)
    journal = f._journal
    real_fd, journal._fd = journal._fd, os.open(os.devnull, os.O_RDONLY)   # every write now fails
    try:
        assert await asyncio.wait_for(waiting, 2) is None
        await asyncio.sleep(0.01)
        assert errors == []
        assert f.queued == 2 and await f.get() is None
    finally:
        os.close(journal._fd)
        journal._fd = real_fd
        loop.set_exception_handler(None)
        f.shutdown()


async def test_a_journal_failure_in_a_direct_get_returns_none(tmp_path):
    """The same failure on get()'s own path (a host ready, no worker waiting): None, URL kept."""
    import os
    f = Frontier(FrontierConfig(resume_wait_s=0.0), workers=1, directory=tmp_path)
    f.on_storage_error = lambda exc: f.stop_handing_out()
    f.add_many([("http://a.test/0", "a.test", 0.0)])
    journal = f._journal
    real_fd, journal._fd = journal._fd, os.open(os.devnull, os.O_RDONLY)
    try:
        assert await asyncio.wait_for(f.get(), 2) is None
        assert f.queued == 1
    finally:
        os.close(journal._fd)
        journal._fd = real_fd
        f.shutdown()


async def test_ram_queues_restore_as_chunks_in_order_with_put_back_urls_first(tmp_path):
    """A checkpoint writes the queues held in RAM to a segment of its own: a restore loads none of
    them (they are read when their host's turn comes), hands them out in the same order, and a
    URL put back or in flight at the checkpoint still comes first."""
    config = FrontierConfig(resume_wait_s=0.0)
    f = Frontier(config, workers=2, directory=tmp_path)
    for name in ("a.test", "b.test"):
        f.add_many([(f"http://{name}/{i}", name, 0.0) for i in range(50)])
    host, url = await asyncio.wait_for(f.get(), 1)
    f.requeue(host, url)                                  # put back: first again
    in_flight = await asyncio.wait_for(f.get(), 1)        # in flight at the checkpoint
    f.checkpoint()
    f.shutdown()
    again = Frontier(config, workers=2, directory=tmp_path)
    assert again.queued == 100 and again.stats()["ram_urls"] == 2      # the put-back and in-flight URLs
    order: dict[str, list[int]] = {"a.test": [], "b.test": []}
    for _ in range(100):
        host, url = await asyncio.wait_for(again.get(), 1)
        order[host].append(int(url.rsplit("/", 1)[1]))
        again.release(host, 0.0)
    assert order == {"a.test": list(range(50)), "b.test": list(range(50))}
    assert in_flight[1].endswith("/0") and again.stats()["chunk_errors"] == 0
    again.shutdown()


async def test_a_checkpoint_with_ram_queues_as_json_rows_still_restores(tmp_path):
    """Checkpoints written before RAM queues went to a segment hold them as JSON rows: still read."""
    from crawler.frontier.journal import HostRecord, write_checkpoint
    rows = [[i, 0.0, f"http://a.test/{i}", 1 if i == 7 else 0] for i in range(10)]
    write_checkpoint(tmp_path, 1, 10, [], iter([HostRecord("a.test", ram=rows)]))
    f = Frontier(FrontierConfig(resume_wait_s=0.0), workers=1, directory=tmp_path)
    urls = []
    for _ in range(10):
        host, url = await asyncio.wait_for(f.get(), 1)
        urls.append(int(url.rsplit("/", 1)[1]))
        f.release(host, 0.0)
    assert urls == [7, 0, 1, 2, 3, 4, 5, 6, 8, 9]
    f.shutdown()

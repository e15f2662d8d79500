"""The parts of `crawler resize` that need no network: the frontier's hand-off format, the staging of
records, the plan's checks, and how many hosts each partition moves."""

from __future__ import annotations

import asyncio
import random
import tracemalloc

import pytest
from tests.support.configs import one_node_config

from crawler.config import ConfigError, from_dict
from crawler.config.schema import FrontierConfig
from crawler.frontier import Frontier
from crawler.frontier.handoff import HostHandoff, read_hosts, write_frontier
from crawler.resize.plan import ResizePlan
from crawler.resize.records import RecordError, Staging, host_line, queued_line, url_line
from crawler.splitter import Partitioner

HOSTS = [f"h{i:03d}.web.test" for i in range(6)]


def _fill(frontier: Frontier, per_host: int) -> dict[str, list[str]]:
    queued: dict[str, list[str]] = {h: [] for h in HOSTS}
    for i in range(per_host):
        for h in HOSTS:
            url = f"http://{h}/p{i} 1 a b"          # lineage-tagged, as the DUE hands them out
            frontier.add(url, h)
            queued[h].append(url)
    return queued


def _drain(frontier: Frontier, limit: int) -> list[tuple[str, str]]:
    async def take() -> list[tuple[str, str]]:
        got = []
        for _ in range(limit):
            item = await asyncio.wait_for(frontier.get(), 5)
            if item is None:
                break
            got.append(item)
            frontier.release(item[0], 0.0)
        return got
    return asyncio.run(take())


def test_hosts_round_trip_through_a_new_frontier_with_spilled_queues_in_order(tmp_path):
    config = FrontierConfig(memory_urls=40, chunk_urls=8)     # most of the queues spill to segments
    old = Frontier(config, 4, directory=tmp_path / "old")
    queued = _fill(old, 25)
    old.shutdown()
    hosts = list(read_hosts(tmp_path / "old", config, 4, max_delay_s=60))
    assert sorted(h.name for h in hosts) == HOSTS
    for h in hosts:        # every URL once, in the order a restart of this frontier takes them
        assert sorted(e[2] for e in h.entries) == sorted(queued[h.name])
    moved = [h for h in hosts if h.name in HOSTS[:3]]
    moved[0].next_ok_wall = 4_102_444_800.0                     # 2100-01-01: may not be contacted now
    assert write_frontier(tmp_path / "new", moved, chunk_urls=8) == 75
    new = Frontier(config, 4, directory=tmp_path / "new")
    assert new.queued == 75
    got = _drain(new, 50)
    assert {h for h, _ in got} == set(HOSTS[1:3])                # the host that must wait is not handed out
    assert new.queued == 25
    for name in HOSTS[1:3]:    # the URL policy (fifo here) orders a host's queue by the old sequence numbers
        assert [u for h, u in got if h == name] == queued[name]
    new.shutdown()
    with pytest.raises(FileExistsError):
        write_frontier(tmp_path / "new", moved, chunk_urls=8)


def test_staging_keeps_one_copy_per_record_and_is_complete_only_with_all(tmp_path):
    run = "r1"
    host = HostHandoff("a.test", 12.5, "127.0.0.9", [0.1, 0.2, 3, 1])
    lines = [host_line(run, 0, host), queued_line(run, 1, "a.test", 7, 0.5, "http://a.test/x 2 ab cd"),
             url_line(run, 2, "S", "http://a.test/seen"), url_line(run, 3, "T", "http://b.test/t 1 0 ef")]
    assert not any(" " in line for line in lines)               # the peer protocol counts spaces as lineage
    staging = Staging(tmp_path / "resize", run)
    staging.append(4, lines[:2])
    assert not staging.finish(4, 4, None)                       # two records still missing
    staging.append(4, lines[1:])                                # a resent batch: kept once
    staging.append(4, [url_line("old-run", 9, "S", "http://a.test/stale")])
    with (tmp_path / "resize" / "from-4.log").open("a") as f:
        f.write("r1\t5\tS\thttp://torn")                         # a crash cut this line: ignored
    assert staging.finish(4, 4, {"version": 1, "paused": False, "blocked": ["c.test"], "delays": {}})
    assert Staging(tmp_path / "resize", run).complete(4) and not Staging(tmp_path / "resize", "r2").complete(4)
    got = staging.received([4, 5])
    assert got.senders == [4] and got.counts == {"H": 1, "Q": 1, "S": 1, "T": 1}
    [moved] = list(got.hosts())
    assert moved.entries == [(7, 0.5, "http://a.test/x 2 ab cd")]
    assert (moved.name, moved.next_ok_wall, moved.ip, moved.stats) == ("a.test", 12.5, "127.0.0.9", [0.1, 0.2, 3, 1])
    assert list(got.urls("S")) == ["http://a.test/seen"] and list(got.urls("T")) == ["http://b.test/t 1 0 ef"]
    assert list(got.urls("SQ")) == ["http://a.test/x 2 ab cd", "http://a.test/seen"]
    assert got.controls[0]["blocked"] == ["c.test"]
    assert list(got.hosts()) == [moved]                          # read again from the logs, the same


def test_staging_reads_interleaved_resent_batches_in_number_order(tmp_path):
    """Batches arrive in any order and some twice (the peer layer resends what was not ACKed); the
    records come out once each, in the sender's order, hosts whole with their queues."""
    run, rng = "r1", random.Random(5)
    lines, expected = [], []
    for h in range(30):
        host = HostHandoff(f"h{h}.test", float(h))
        lines.append(host_line(run, len(lines), host))
        urls = [f"http://h{h}.test/{i} 1 0 ab" for i in range(rng.randrange(0, 20))]
        for i, url in enumerate(urls):
            lines.append(queued_line(run, len(lines), host.name, i, 0.0, url))
        lines.append(url_line(run, len(lines), "S", f"http://h{h}.test/seen"))
        expected.append((host.name, [(i, 0.0, u) for i, u in enumerate(urls)]))
    batches = [lines[i:i + 7] for i in range(0, len(lines), 7)]
    order = batches + rng.sample(batches, len(batches) // 3)
    rng.shuffle(order)
    staging = Staging(tmp_path / "resize", run)
    for batch in order:
        staging.append(1, batch)
    assert staging.finish(1, len(lines), None)
    got = staging.received([1])
    assert [(h.name, h.entries) for h in got.hosts()] == expected
    assert list(got.urls("S")) == [f"http://h{h}.test/seen" for h in range(30)]
    assert got.counts["H"] == 30 and got.counts["S"] == 30


def test_staging_refuses_a_record_past_the_count_the_sender_named(tmp_path):
    staging = Staging(tmp_path / "resize", "r1")
    staging.append(2, [url_line("r1", 0, "S", "http://a.test/"), url_line("r1", 1, "S", "http://a.test/b")])
    assert not staging.finish(2, 1, None) and not staging.complete(2)
    assert not staging.finish(2, -1, None)
    assert staging.finish(2, 2, None)
    assert staging.finish(3, 0, None)                            # a sender with nothing for this node
    got = staging.received([2, 3])
    assert list(got.urls("S")) == ["http://a.test/", "http://a.test/b"] and list(got.hosts()) == []


def _configs(tmp_path, old_nodes: int, new_nodes: int, **new_fields):
    def cfg(n: int, **fields) -> dict:
        c = one_node_config(tmp_path / "node-{node}")
        c["cluster"] = {"name": "crawl", "secret_env": "RESIZE_TEST_SECRET", "partition": "rendezvous",
                        "nodes": [{"id": i, "peer_port": 7000 + i, "metrics_port": 8000 + i} for i in range(n)]}
        for key, value in fields.items():
            section, _, name = key.partition("__")
            c.setdefault(section, {})[name] = value
        return c
    return from_dict(cfg(old_nodes)), from_dict(cfg(new_nodes, **new_fields))


def test_the_plan_lists_roles_and_refuses_what_cannot_be_resized(tmp_path, monkeypatch):
    monkeypatch.setenv("RESIZE_TEST_SECRET", "s3cret-s3cret")
    old, new = _configs(tmp_path, 3, 2)
    plan = ResizePlan.load(old, new, "old.yaml", "new.yaml")
    assert (plan.senders(), plan.receivers(), plan.participants) == ([0, 1, 2], [0, 1], 3)
    assert [n.peer_port for n in plan.nodes()] == [7000, 7001, 7002]      # the dropped node at its old address
    assert plan.run_id == ResizePlan.load(old, new, "a", "b").run_id
    with pytest.raises(ConfigError, match="nothing to resize"):
        ResizePlan.load(old, old, "old.yaml", "old.yaml")
    _, renamed = _configs(tmp_path, 3, 2, cluster__name="other")
    with pytest.raises(ConfigError, match="cluster.name 'other'"):
        ResizePlan.load(old, renamed, "old.yaml", "new.yaml")
    _, moved = _configs(tmp_path, 3, 4, crawl__data_dir=str(tmp_path / "elsewhere-{node}"))
    with pytest.raises(ConfigError, match="a kept node keeps its data_dir"):
        ResizePlan.load(old, moved, "old.yaml", "new.yaml")
    no_log, _ = _configs(tmp_path, 3, 2)
    no_log.store.crawl_log = False
    with pytest.raises(ConfigError, match="store.crawl_log is false"):
        ResizePlan.load(no_log, new, "old.yaml", "new.yaml")


def _moved(before: Partitioner, after: Partitioner, hosts: list[str]) -> list[tuple[int, int]]:
    return [(before.owner(h), after.owner(h)) for h in hosts if before.owner(h) != after.owner(h)]


def test_rendezvous_moves_only_the_added_or_dropped_nodes_hosts_and_modulo_moves_most():
    hosts = [f"host{i}.example" for i in range(8_000)]
    for n in (2, 3, 8):
        grow = _moved(Partitioner(n, "rendezvous"), Partitioner(n + 1, "rendezvous"), hosts)
        assert all(new == n for _, new in grow)                  # only to the new node
        assert abs(len(grow) / len(hosts) - 1 / (n + 1)) < 0.035
        shrink = _moved(Partitioner(n + 1, "rendezvous"), Partitioner(n, "rendezvous"), hosts)
        assert all(old == n for old, _ in shrink)                # only the dropped node's hosts
        modulo = _moved(Partitioner(n, "modulo"), Partitioner(n + 1, "modulo"), hosts)
        assert abs(len(modulo) / len(hosts) - n / (n + 1)) < 0.035


def test_reading_staged_records_holds_an_index_not_the_records(tmp_path):
    """The receiver's memory while it applies a move: 8 bytes per record and one host's queue, not the
    records (8 times that on disk here, several times more as Python objects)."""
    run, count = "r1", 40_000
    staging = Staging(tmp_path / "resize", run)
    lines = []
    for n in range(count):
        h = n // 20
        if n % 20 == 0:
            lines.append(host_line(run, n, HostHandoff(f"h{h}.test", 1.0)))
        else:
            lines.append(queued_line(run, n, f"h{h}.test", n, 0.0, f"http://h{h}.test/page/{n}.html 1 0 ab"))
    for i in range(0, count, 1000):
        staging.append(0, lines[i:i + 1000])
    assert staging.finish(0, count, None)
    size = (tmp_path / "resize" / "from-0.log").stat().st_size
    del lines
    tracemalloc.start()
    try:
        got = staging.received([0])
        hosts = queued = 0
        for host in got.hosts():
            hosts, queued = hosts + 1, queued + len(host.entries)
        seen = sum(1 for _ in got.urls("SQ"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (hosts, queued, seen) == (count // 20, count - count // 20, count - count // 20)
    assert peak < 8 * count + 64 * 1024, (peak, size)
    assert size > 8 * peak


@pytest.mark.parametrize("damage", ["host", "queued", "line", "order"])
def test_a_damaged_staged_log_is_a_clear_error(tmp_path, damage):
    """Staged records that no longer parse (a damaged disk, a hand edit) stop the apply with the file and
    the record named, never a traceback from deep in the frontier writer."""
    run = "r1"
    lines = [host_line(run, 0, HostHandoff("a.test")), queued_line(run, 1, "a.test", 3, 0.0, "http://a.test/1"),
             host_line(run, 2, HostHandoff("b.test")), queued_line(run, 3, "b.test", 4, 0.0, "http://b.test/1")]
    if damage == "host":
        lines[2] = url_line(run, 2, "H", '{"no-name": 1}')
    elif damage == "queued":
        lines[3] = url_line(run, 3, "Q", "b.test\tnot-a-number\t0.0\thttp://b.test/1")
    elif damage == "line":
        lines[1] = f"{run}\t1\tQ"
    else:
        lines[1] = queued_line(run, 1, "b.test", 3, 0.0, "http://b.test/0")      # not after its host
    staging = Staging(tmp_path / "resize", run)
    staging.append(0, lines)
    assert staging.finish(0, len(lines), None)
    with pytest.raises(RecordError) as caught:
        list(staging.received([0]).hosts())
    if damage == "line":
        assert "from-0.log" in str(caught.value)

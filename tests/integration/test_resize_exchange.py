"""`crawler resize`'s participants, in one process over real TCP, on data dirs built by the crawler's own parts.

Node 0 of a 2-node crawl holds queued hosts, crawl-log lines, a robots.txt
entry, a control block and a batch spooled for node 1; node 1 never crawled.
After a resize to 3 nodes every host is where the new partition puts it:
the new node's frontier holds exactly the moved hosts' queues with their
politeness state, its DUE calls their fetched URLs seen, the spooled URLs
come out of its DUE as new at its first merge, and the robots entry and the
block went with them. A rerun finds the resize applied and changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from tests.support.configs import SECRET, cluster_config

from crawler.config import from_dict
from crawler.control.settings import ControlSettings
from crawler.due import DiskDUE
from crawler.frontier import Frontier
from crawler.frontier.handoff import read_hosts
from crawler.node.identity import DataDir
from crawler.peers.frames import encode_batch
from crawler.peers.spool import Spool
from crawler.resize.participant import Participant, ResizeError
from crawler.resize.plan import ResizePlan
from crawler.splitter import Partitioner
from crawler.state import StateStore
from crawler.urls import fingerprints

pytestmark = pytest.mark.slow          # about 5 s each: two in-process resizes over real TCP

HOSTS = [f"h{i:02d}.web.test" for i in range(24)]
NOT_BEFORE = time.time() + 3600            # an hour from now: what the old owner's last response earned


def _configs(tmp_path):
    base = cluster_config(tmp_path, str(tmp_path / "seeds.txt"))
    base["cluster"]["partition"] = "rendezvous"
    base["cluster"]["nodes"] = base["cluster"]["nodes"][:3]
    old = json.loads(json.dumps(base))
    old["cluster"]["nodes"] = old["cluster"]["nodes"][:2]
    return from_dict(old), from_dict(base)


def _crawled_node0(old, tmp_path) -> dict:
    """Node 0's data_dir as a stopped crawl leaves it; returns what it holds."""
    d = tmp_path / "data" / "node-0"
    owner = Partitioner(2, "rendezvous").owner
    mine = [h for h in HOSTS if owner(h) == 0]
    queued = {h: [f"http://{h}/q{i} 1 a b" for i in range(5)] for h in mine}
    fetched = [f"http://{h}/done{i}" for h in mine for i in range(3)]
    frontier = Frontier(old.frontier, old.workers, directory=d / "frontier")
    for h, urls in queued.items():
        for url in urls:
            frontier.add(url, h)
    frontier.shutdown()
    due = DiskDUE(d / "due", old.due)
    urls = [u.split(" ")[0] for us in queued.values() for u in us] + fetched
    due.submit(fingerprints(urls), urls)
    due.flush()
    due.close()
    with (d / "crawl.log.jsonl").open("w") as f:
        for url in fetched:
            f.write(json.dumps({"url": url, "kind": "page", "status": 200}) + "\n")
        f.write(json.dumps({"url": f"http://{mine[0]}/robots.txt", "kind": "robots", "status": 200}) + "\n")
    spooled = [f"http://{h}/from-a-link 2 c d" for h in HOSTS if owner(h) == 1]
    Spool(d / "peers" / "peer-1").append([encode_batch(1, spooled)])
    StateStore(d / "state").write("robots", 1, [{"origin": f"http://{h}", "source": "fetched",
                                                 "expires_at": NOT_BEFORE, "text": "User-agent: *\nCrawl-delay: 2\n"}
                                                for h in mine])
    ControlSettings(blocked=["blocked.test"]).save(d / "state")
    DataDir(d, old, 0, "old.yaml").write_state(finished=False)
    return {"queued": queued, "fetched": fetched, "spooled": spooled}


def _rewrite_next_ok(old, tmp_path) -> None:
    """Give every host of node 0 a next-contact time an hour away (as a slow response would)."""
    from crawler.frontier.journal import latest_checkpoint, read_checkpoint, write_checkpoint
    d = tmp_path / "data" / "node-0" / "frontier"
    cp = read_checkpoint(latest_checkpoint(d))
    for rec in cp.hosts:
        rec.next_ok_wall = NOT_BEFORE
    write_checkpoint(d, cp.gen + 1, cp.seq, cp.done, iter(cp.hosts))


async def _resize(plan: ResizePlan) -> list[dict]:
    return await asyncio.wait_for(asyncio.gather(*(Participant(plan, i, timeout_s=30).run()
                                                  for i in range(plan.participants))), 60)


def test_a_resize_moves_queues_seen_urls_spools_robots_and_blocks(tmp_path, monkeypatch):
    for key, value in SECRET.items():
        monkeypatch.setenv(key, value)
    old, new = _configs(tmp_path)
    held = _crawled_node0(old, tmp_path)
    _rewrite_next_ok(old, tmp_path)
    plan = ResizePlan.load(old, new, "old.yaml", "new.yaml")
    rows = asyncio.run(_resize(plan))
    owner = Partitioner(3, "rendezvous").owner
    moved = sorted(h for h in held["queued"] if owner(h) == 2)
    assert moved and rows[0]["sent_hosts"] == len(moved) and rows[2]["received_hosts"] == len(moved)
    d2 = tmp_path / "data" / "node-2"
    hosts = {h.name: h for h in read_hosts(d2 / "frontier", new.frontier, new.workers, 60.0)}
    assert sorted(hosts) == moved
    for h in moved:
        assert [e[2] for e in hosts[h].entries] == held["queued"][h]          # the queue, in order, with lineage
        assert hosts[h].next_ok_wall == pytest.approx(NOT_BEFORE, abs=1)      # politeness went with it
    d0 = {h.name for h in read_hosts(tmp_path / "data" / "node-0" / "frontier", new.frontier, new.workers, 60.0)}
    assert d0 == set(held["queued"]) - set(moved)                             # node 0 kept the rest only
    due = DiskDUE(d2 / "due", new.due)
    # The spooled URLs node 2 now owns come out new at its first merge; the rest went to node 1.
    out = due.flush()
    assert sorted(out) == sorted(u for u in held["spooled"] if owner(u.split("/")[2]) == 2)
    seen = [u for u in held["fetched"] if owner(u.split("/")[2]) == 2]
    seen += [u.split(" ")[0] for h in moved for u in held["queued"][h]]
    assert due.submit(fingerprints(seen), seen) == [] and due.flush() == []
    due.close()
    d1 = DiskDUE(tmp_path / "data" / "node-1" / "due", new.due)
    assert sorted(d1.flush()) == sorted(u for u in held["spooled"] if owner(u.split("/")[2]) == 1)
    d1.close()
    robots = {r["origin"] for r in StateStore(d2 / "state").read("robots", 1)}
    assert robots == {f"http://{h}" for h in moved}
    assert ControlSettings.load(d2 / "state").blocked == ["blocked.test"]
    assert (d2 / "seen-moved.log").read_text().split() == sorted(
        u for u in held["fetched"] if owner(u.split("/")[2]) == 2)
    states = [json.loads((tmp_path / "data" / f"node-{i}" / "state.json").read_text()) for i in range(3)]
    assert [s["nodes"] for s in states] == [3, 3, 3] and all(s["resized"]["from_nodes"] == 2 for s in states)
    assert not (tmp_path / "data" / "node-0" / "peers").exists()              # the old cluster's streams
    again = asyncio.run(_resize(plan))
    assert all(r.get("already_applied") for r in again)


def test_a_resize_a_participant_missed_fails_clearly_and_the_rerun_completes_it(tmp_path, monkeypatch):
    for key, value in SECRET.items():
        monkeypatch.setenv(key, value)
    old, new = _configs(tmp_path)
    held = _crawled_node0(old, tmp_path)
    plan = ResizePlan.load(old, new, "old.yaml", "new.yaml")

    async def without_node2() -> list:
        return await asyncio.gather(*(Participant(plan, i, timeout_s=3).run() for i in (0, 1)),
                                    return_exceptions=True)
    first = asyncio.run(without_node2())
    assert all(isinstance(r, ResizeError) and "nodes [2]" in str(r) for r in first), first
    state = json.loads((tmp_path / "data" / "node-0" / "state.json").read_text())
    assert state["nodes"] == 2                                                # nothing applied anywhere
    assert len(list(read_hosts(tmp_path / "data" / "node-0" / "frontier", old.frontier, old.workers, 60.0))) \
        == len(held["queued"])
    asyncio.run(_resize(plan))
    owner = Partitioner(3, "rendezvous").owner
    moved = sorted(h for h in held["queued"] if owner(h) == 2)
    got = {h.name: [e[2] for e in h.entries]
           for h in read_hosts(tmp_path / "data" / "node-2" / "frontier", new.frontier, new.workers, 60.0)}
    assert got == {h: held["queued"][h] for h in moved}                      # once each, not twice


def test_a_participant_cut_after_its_swap_finishes_on_the_rerun(tmp_path, monkeypatch):
    """Node 2 dies between swapping in its new frontier and writing state.json: the others are done;
    the rerun finishes node 2 from its staging, the others only answer, nothing is queued twice."""
    for key, value in SECRET.items():
        monkeypatch.setenv(key, value)
    old, new = _configs(tmp_path)
    held = _crawled_node0(old, tmp_path)
    plan = ResizePlan.load(old, new, "old.yaml", "new.yaml")
    real = DataDir.write_state

    def cut(self, **extra):
        if self.node_id == 2:
            raise OSError("cut here")
        return real(self, **extra)
    monkeypatch.setattr(DataDir, "write_state", cut)

    async def first_run() -> list:
        return await asyncio.gather(*(Participant(plan, i, timeout_s=30).run() for i in range(3)),
                                    return_exceptions=True)
    first = asyncio.run(first_run())
    assert isinstance(first[2], OSError) and not isinstance(first[0], BaseException)
    monkeypatch.setattr(DataDir, "write_state", real)
    t0 = time.monotonic()
    again = asyncio.run(_resize(plan))
    assert again[0].get("already_applied") and again[1].get("already_applied") and not again[2].get("already_applied")
    assert time.monotonic() - t0 < 8            # the others stop answering once node 2 says it applied
    owner = Partitioner(3, "rendezvous").owner
    got = {h.name: [e[2] for e in h.entries]
           for h in read_hosts(tmp_path / "data" / "node-2" / "frontier", new.frontier, new.workers, 60.0)}
    assert got == {h: held["queued"][h] for h in held["queued"] if owner(h) == 2}
    due = DiskDUE(tmp_path / "data" / "node-2" / "due", new.due)
    assert sorted(due.flush()) == sorted(u for u in held["spooled"] if owner(u.split("/")[2]) == 2)
    due.close()
    assert json.loads((tmp_path / "data" / "node-2" / "state.json").read_text())["nodes"] == 3

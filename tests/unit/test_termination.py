"""The termination check over three nodes whose CONTROL messages are delivered by direct calls.

The real transport is exercised by the multi-node integration tests; here the
rounds logic is pinned: two consecutive idle rounds with unchanged activity
end the crawl, anything else does not.
"""

import asyncio

from crawler.termination import Termination


class Cluster:
    def __init__(self, n: int, round_s: float = 0.005):
        self.state = {i: {"idle": True, "activity": [0, 0, 0]} for i in range(n)}
        self.answering = {i: True for i in range(n)}
        self.done: list[int] = []
        self.nodes = [Termination(i, n, lambda i=i: dict(self.state[i]),
                                  lambda peer, msg, i=i: self.deliver(i, peer, msg),
                                  lambda msg, i=i: [self.deliver(i, p, msg) for p in range(n) if p != i],
                                  lambda i=i: self.done.append(i), round_s) for i in range(n)]
        for t in self.nodes:
            t.reply_timeout_s = 0.05

    def deliver(self, src: int, dst: int, msg: dict) -> None:
        if self.answering[dst] and self.answering[src]:
            asyncio.get_running_loop().call_soon(self.nodes[dst].on_control, src, msg)


async def test_idle_and_quiet_cluster_ends_everywhere():
    c = Cluster(3)
    await asyncio.wait_for(c.nodes[0].run_coordinator(), 2)
    await asyncio.sleep(0.01)
    assert sorted(c.done) == [0, 1, 2]
    assert c.nodes[0].rounds >= 2


async def test_busy_node_or_moving_batches_keep_it_running():
    c = Cluster(3)
    c.state[2]["idle"] = False
    coordinator = asyncio.create_task(c.nodes[0].run_coordinator())
    await asyncio.sleep(0.1)
    assert not c.done
    c.state[2]["idle"] = True

    async def churn():                      # idle at every probe, yet batches keep moving
        for i in range(20):
            c.state[1]["activity"] = [i, i, i]
            await asyncio.sleep(0.002)

    await churn()
    await asyncio.wait_for(coordinator, 2)
    assert sorted(c.done) == [0, 1, 2]


async def test_silent_node_blocks_the_decision():
    c = Cluster(3)
    c.answering[1] = False
    coordinator = asyncio.create_task(c.nodes[0].run_coordinator())
    for _ in range(300):                     # rounds go on (at most 3 s) while node 1 stays silent
        if c.nodes[0].rounds >= 2:
            break
        await asyncio.sleep(0.01)
    assert not c.done and c.nodes[0].rounds >= 2
    c.answering[1] = True
    await asyncio.wait_for(coordinator, 2)
    await asyncio.sleep(0.01)
    assert sorted(c.done) == [0, 1, 2]


async def test_single_node_needs_no_messages():
    c = Cluster(1)
    await asyncio.wait_for(c.nodes[0].run_coordinator(), 1)
    assert c.done == [0]


async def test_rounds_back_off_while_another_node_is_busy():
    """An idle coordinator polls a busy cluster ever less often (doubling the wait up to
    BUSY_BACKOFF rounds), and at the full rate again once all are idle."""
    from crawler.termination import BUSY_BACKOFF

    c = Cluster(3, round_s=0.01)
    c.state[2]["idle"] = False
    coordinator = asyncio.create_task(c.nodes[0].run_coordinator())
    await asyncio.sleep(1.0)
    busy_rounds = c.nodes[0].rounds
    # Without the back-off ~100 rounds in 1 s; with it 0.01 + 0.02 + 0.04 + 0.08 s, then one per 0.08 s.
    assert 5 <= busy_rounds <= 1.0 / (0.01 * BUSY_BACKOFF) + 6, busy_rounds
    c.state[2]["idle"] = True
    await asyncio.wait_for(coordinator, 2)
    assert sorted(c.done) == [0, 1, 2]

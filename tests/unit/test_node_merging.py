"""The early-merge rule and the prompt-lookup test (crawler/node/merging.py), pinned as the watch loop and
the worker use them: no node, no DUE, only the times and counts they hand the policy."""

import pytest

from crawler.node.merging import EARLY_MERGE_BACKOFF_MAX, EarlyMergePolicy, is_hungry

FLUSH_S = 1.0
WORKERS = 4


def policy(now: float = 0.0) -> EarlyMergePolicy:
    return EarlyMergePolicy(FLUSH_S, WORKERS, now)


def test_no_early_merge_while_no_worker_waits():
    p = policy()
    assert not p.should_start(100.0, waiting_workers=0, queued=0)


def test_a_low_frontier_merges_every_flush_interval():
    p = policy(now=10.0)
    assert not p.should_start(10.0 + FLUSH_S - 0.01, waiting_workers=1, queued=WORKERS - 1)
    assert p.should_start(10.0 + FLUSH_S, waiting_workers=1, queued=WORKERS - 1)


def test_a_frontier_with_a_queue_per_worker_waits_the_backed_off_interval():
    p = policy()
    p.started(0.0, waiting_workers=3, new_count=100)
    p.finished(new_count=101)                     # 1 new URL for 3 waiting workers: back off
    assert p.wait_s == 2 * FLUSH_S
    assert not p.should_start(2 * FLUSH_S - 0.01, waiting_workers=3, queued=WORKERS)
    assert p.should_start(2 * FLUSH_S, waiting_workers=3, queued=WORKERS)
    assert p.should_start(FLUSH_S, waiting_workers=3, queued=WORKERS - 1)     # low again: the flush interval


def test_merges_that_yield_little_double_the_wait_up_to_the_cap():
    p = policy()
    waits = []
    for i in range(6):
        p.started(float(i), waiting_workers=2, new_count=0)
        p.finished(new_count=1)
        waits.append(p.wait_s)
    assert waits == [2.0, 4.0, 8.0, 8.0, 8.0, 8.0]
    assert EARLY_MERGE_BACKOFF_MAX * FLUSH_S == 8.0


@pytest.mark.parametrize("new_urls, wait_s", [(2, FLUSH_S), (5, FLUSH_S), (1, 8.0)])
def test_a_merge_that_yields_a_url_per_waiting_worker_resets_the_wait(new_urls, wait_s):
    p = policy()
    p.wait_s = 4.0
    p.started(0.0, waiting_workers=2, new_count=10)
    p.finished(new_count=10 + new_urls)
    assert p.wait_s == wait_s and p.running is None


def test_the_interval_counts_from_the_last_merge_or_flush_even_one_the_due_declined():
    p = policy()
    p.started(5.0, waiting_workers=1, new_count=0)
    p.not_started()
    assert p.running is None and p.last_flush == 5.0 and p.wait_s == FLUSH_S
    assert not p.should_start(5.5, waiting_workers=1, queued=0)
    p.flushed(7.0)
    assert p.last_flush == 7.0
    assert not p.should_start(7.5, waiting_workers=1, queued=0)
    assert p.should_start(8.0, waiting_workers=1, queued=0)


def test_started_remembers_the_waiting_workers_and_the_due_count():
    p = policy()
    p.started(3.0, waiting_workers=2, new_count=42)
    assert p.running == (2, 42) and p.last_flush == 3.0


# --- is_hungry ---------------------------------------------------------------------------------------

def hungry(links, page_host, queued, owners=None, me=0, single=True):
    return is_hungry(links, page_host, lambda h: queued.get(h, 0), lambda u: u.split("/")[2],
                     lambda h: (owners or {}).get(h, 0), me, single)


def test_a_page_whose_host_has_nothing_queued_is_hungry():
    assert hungry([], "a.test", {})
    assert not hungry([], "a.test", {"a.test": 1})


def test_a_link_for_an_empty_host_of_ours_is_hungry():
    links = ["http://b.test/x"]
    assert hungry(links, "a.test", {"a.test": 1})
    assert not hungry(links, "a.test", {"a.test": 1, "b.test": 2})


def test_a_link_to_the_page_host_itself_does_not_count_twice():
    assert not hungry(["http://a.test/y"], "a.test", {"a.test": 1})


def test_in_a_cluster_only_hosts_this_node_owns_count():
    links = ["http://b.test/x"]
    assert not hungry(links, "a.test", {"a.test": 1}, owners={"b.test": 1}, me=0, single=False)
    assert hungry(links, "a.test", {"a.test": 1}, owners={"b.test": 0}, me=0, single=False)


def test_a_peer_batch_has_no_page_host():
    assert hungry(["http://b.test/x"], None, {})
    assert not hungry(["http://b.test/x"], None, {"b.test": 3})

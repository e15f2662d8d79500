"""crawler.replay.synthetic and `crawler synth`: the paper's model of the stream, checked from its output."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import fields

import numpy as np
import pytest
from tests.support.replay import lru_misses

from crawler.cli import main as crawler_main
from crawler.replay import ReplayOptions, load_streams, replay
from crawler.replay.synth_cli import main
from crawler.replay.synthetic import (
    GLOBAL,
    HOST,
    KIND_NAMES,
    PAGE,
    RANDOM,
    Block,
    ModelParams,
    SyntheticTrace,
    global_fingerprints,
    host_fingerprints,
    write_log,
)
from crawler.replay.traces import Stream

SMALL = ModelParams(threads=4, global_urls=50, host_urls=8, links_per_page=6, pages_per_host=5, requests=20_000)


def generate(params: ModelParams, block: int = 1 << 18) -> Block:
    """The whole stream as one Block."""
    parts = list(SyntheticTrace(params).blocks(block))
    return Block(*(np.concatenate([getattr(b, f.name) for b in parts]) for f in fields(Block)))


def with_(params: ModelParams, **changes) -> ModelParams:
    values = {k: v for k, v in params.as_dict().items() if k != "gamma"}
    return ModelParams(**(values | changes))


def test_same_seed_same_stream_whatever_the_block_size():
    for params in (SMALL, with_(SMALL, interleave="random")):
        whole = generate(params)
        for block in (997, 5000):
            other = generate(params, block)
            assert all(np.array_equal(getattr(whole, f.name), getattr(other, f.name)) for f in fields(Block))
        for block in (1, 7):
            assert np.array_equal(whole.fps[:600], generate(with_(params, requests=600), block).fps)
        assert len(whole.fps) == params.requests
        assert not np.array_equal(whole.fps, generate(with_(params, seed=1)).fps)


def own_positions(block: Block, threads: int) -> list[np.ndarray]:
    """Each thread's positions in the stream, in order; checks that its steps count up by one."""
    own = [np.flatnonzero(block.threads == t) for t in range(threads)]
    assert all((np.diff(block.steps[o]) == 1).all() for o in own)
    return own


@pytest.mark.parametrize("interleave", ["round-robin", "random"])
def test_each_kind_comes_from_its_set_in_the_stated_shares(interleave):
    params = with_(SMALL, requests=120_000, alpha=0.25, beta=0.5, interleave=interleave)
    block = generate(params)
    fps, kinds = block.fps, block.kinds
    share = np.bincount(kinds, minlength=len(KIND_NAMES)) / len(fps)
    tolerance = 0.01                      # about 3.5 standard deviations of a share at 120,000 draws
    assert abs(share[GLOBAL] - params.alpha) < tolerance
    assert abs(share[PAGE] + share[HOST] - params.beta) < tolerance
    assert abs(share[RANDOM] - params.gamma) < tolerance
    # The first link of a page cannot repeat one of the page: its page draws go to the host.
    first_free = (params.links_per_page - 1) / params.links_per_page
    assert abs(share[PAGE] - params.beta * params.page_share * first_free) < tolerance
    # The threads take turns, or each request is a random thread's.
    if interleave == "round-robin":
        assert np.array_equal(block.threads, np.arange(len(fps)) % params.threads)
    else:
        thread_share = np.bincount(block.threads) / len(fps)
        assert np.abs(thread_share - 1 / params.threads).max() < tolerance
    # Global requests are G's URLs, rank 1 the most asked (about twice rank 2 with s = 1).
    g = global_fingerprints(params.global_urls)
    assert np.isin(fps[kinds == GLOBAL], g).all()
    counts = np.array([(fps == g[r]).sum() for r in range(3)])
    assert counts[0] > counts[1] > counts[2] and 1.6 < counts[0] / counts[1] < 2.5
    # Host requests are URLs of the host the thread is on; random ones are in no model set.
    for i in np.flatnonzero(kinds == HOST)[:2000]:
        assert fps[i] in host_fingerprints(int(block.hosts[i]), params.host_urls)
    assert not np.isin(fps[kinds == RANDOM], g).any()
    assert len(np.unique(fps[kinds == RANDOM])) == (kinds == RANDOM).sum()     # a 2^62 universe: all new
    # A page repeat is a link emitted earlier on the same page by the same thread.
    own = own_positions(block, params.threads)
    for i in np.flatnonzero(kinds == PAGE)[:2000]:
        mine = own[block.threads[i]]
        at = int(np.searchsorted(mine, i))
        k = int(block.steps[i] % params.links_per_page)
        assert 0 < k <= at and fps[i] in fps[mine[at - k:at]]


@pytest.mark.parametrize("interleave", ["round-robin", "random"])
def test_run_lengths_pages_per_host_and_links_per_page(interleave):
    params = with_(SMALL, threads=3, requests=30_000, alpha=0.0, beta=1.0, page_share=0.0, interleave=interleave)
    block = generate(params)
    assert (block.kinds == HOST).all()
    run = params.links_per_page * params.pages_per_host
    for thread, mine in enumerate(own_positions(block, params.threads)):
        head = (thread * params.pages_per_host // params.threads) * params.links_per_page
        assert block.steps[mine[0]] == head
        own = block.fps[mine]
        # The thread's first host is cut short by its head start; every later one lasts `run` links.
        cuts = [0, run - head, *range(2 * run - head, len(own), run)]
        assert all(len(set(block.hosts[mine[a:b]].tolist())) == 1 for a, b in zip(cuts, cuts[1:]))
        sets = [set(own[a:b].tolist()) for a, b in zip(cuts, cuts[1:])]
        assert all(len(s) <= params.host_urls for s in sets)
        assert len(sets[1]) == params.host_urls        # 30 draws of 8 URLs: each drawn
        assert all(not (a & b) for a, b in zip(sets, sets[1:]))


def test_memory_does_not_grow_with_the_stream():
    params = with_(SMALL, requests=200_000)
    trace = SyntheticTrace(params)
    trace.next_block(1000)
    first = trace.state_bytes()
    for _ in trace.blocks(1000):
        assert trace.state_bytes() == first
    bound = 8 * (params.global_urls + params.threads * (params.links_per_page + 1) + len(KIND_NAMES))
    assert first <= bound and trace.position == params.requests


def peak_bytes(requests: int) -> int:
    """Peak memory numpy and Python allocate while the stream is made in blocks of 10,000 requests."""
    tracemalloc.start()
    try:
        for _ in SyntheticTrace(with_(SMALL, requests=requests, interleave="random")).blocks(10_000):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_is_the_same_for_a_ten_times_longer_stream():
    short, long = peak_bytes(50_000), peak_bytes(500_000)
    assert long < 1.2 * short, (short, long)


def test_replay_reads_the_written_log(tmp_path):
    params = with_(SMALL, requests=9000)
    written = write_log(params, tmp_path, rotate_bytes=40_000, block_requests=1000)      # several files
    assert len(written["files"]) > 1 and written["requests"] == 9000
    assert sum(written["kinds"].values()) == 9000
    streams = load_streams([tmp_path])
    fps = generate(params).fps
    assert len(streams) == 1 and np.array_equal(streams[0].trace("full"), fps)
    assert np.array_equal(streams[0].workers, generate(params).threads)         # the thread, as the worker
    result = replay(streams, ReplayOptions(traces=("full",), policies=("lru",), sizes=(1, 16, 64, 512)))
    assert result.tallies[("full", "lru")].misses.tolist() == [lru_misses(fps.tolist(), k) for k in (1, 16, 64, 512)]
    with pytest.raises(ValueError, match="already holds splitter"):
        write_log(params, tmp_path)


def critical_size(threads: int, interleave: str = "round-robin") -> float:
    """log2 of the size at which LRU's miss rate falls below the midpoint of its largest and smallest."""
    params = ModelParams(threads=threads, alpha=0.1, beta=0.7, global_urls=200, host_urls=32, links_per_page=10,
                         pages_per_host=20, requests=threads * 12_000, seed=3, interleave=interleave)
    fps = generate(params).fps
    sizes = tuple(1 << e for e in range(15))
    result = replay([Stream("synthetic", None, (), fps, None)],
                    ReplayOptions(traces=("full",), policies=("lru",), sizes=sizes, engine="numpy"))
    rate = result.tallies[("full", "lru")].misses / len(fps)
    middle = (rate.max() + rate.min()) / 2
    i = int(np.argmax(rate < middle))
    return i - 1 + (rate[i - 1] - middle) / (rate[i - 1] - rate[i])


@pytest.mark.parametrize("interleave", ["round-robin", "random"])
def test_the_critical_size_grows_with_the_thread_count(interleave):
    two, sixteen = critical_size(2, interleave), critical_size(16, interleave)
    # Eight times the threads: the critical size moves up by at least two doublings
    # (measured: 2.6 round robin, 2.4 random; 3 if it were exactly proportional).
    assert sixteen - two > 2.0, (two, sixteen)


def test_cli_writes_a_log_and_says_how_to_replay_it(tmp_path, capsys):
    out = tmp_path / "synth"
    assert crawler_main(["synth", str(out), "--threads", "3", "--requests", "5000", "--alpha", "0.3",
                         "--beta", "0.5", "--gamma", "0.2", "--host-urls", "10", "--universe", "2^20",
                         "--interleave", "random"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["requests"] == 5000 and line["params"]["threads"] == 3 and line["params"]["host_urls"] == 10
    assert line["params"]["universe"] == 1 << 20 and line["params"]["interleave"] == "random"
    assert line["replay"] == f"crawler replay {out} --trace full --threads 3"
    assert len(load_streams([out])[0].fps) == 5000


@pytest.mark.parametrize("extra, message", [
    (["--alpha", "0.7", "--beta", "0.5"], "alpha + beta"),
    (["--gamma", "0.5"], "is not 1 - alpha - beta"),
    (["--threads", "0"], "threads must be at least 1"),
    (["--seed", "-1"], "seed must be in"),
    (["--interleave", "fair"], "interleave must be one of round-robin, random"),
    (["--universe", "2^63"], "universe must be at most 2^62"),
])
def test_cli_usage_errors_exit_2(tmp_path, capsys, extra, message):
    assert main([str(tmp_path / "o"), "--requests", "10", *extra]) == 2
    assert message in capsys.readouterr().err

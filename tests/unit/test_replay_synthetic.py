"""crawler.replay.synthetic and `crawler synth`: the paper's model of the stream, checked from its output."""

from __future__ import annotations

import json

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
    ModelParams,
    SyntheticTrace,
    global_fingerprints,
    host_fingerprints,
    write_log,
)
from crawler.replay.traces import Stream

SMALL = ModelParams(threads=4, global_urls=50, host_urls=8, links_per_page=6, pages_per_host=5, requests=20_000)


def generate(params: ModelParams, block: int = 1 << 18) -> tuple[np.ndarray, np.ndarray]:
    trace = SyntheticTrace(params)
    parts = list(trace.blocks(block))
    return np.concatenate([f for f, _ in parts]), np.concatenate([k for _, k in parts])


def with_(params: ModelParams, **changes) -> ModelParams:
    values = {k: v for k, v in params.as_dict().items() if k != "gamma"}
    return ModelParams(**(values | changes))


def test_same_seed_same_stream_whatever_the_block_size():
    fps, kinds = generate(SMALL)
    for block in (997, 5000):
        other, other_kinds = generate(SMALL, block)
        assert np.array_equal(fps, other) and np.array_equal(kinds, other_kinds)
    for block in (1, 7):
        other, _ = generate(with_(SMALL, requests=600), block)
        assert np.array_equal(fps[:600], other)
    changed, _ = generate(with_(SMALL, seed=1))
    assert len(fps) == SMALL.requests and not np.array_equal(fps, changed)


def test_each_kind_comes_from_its_set_in_the_stated_shares():
    params = with_(SMALL, requests=120_000, alpha=0.25, beta=0.5)
    fps, kinds = generate(params)
    pos = np.arange(len(fps), dtype=np.uint64)
    share = np.bincount(kinds, minlength=len(KIND_NAMES)) / len(fps)
    tolerance = 0.01                      # about 3.5 standard deviations of a share at 120,000 draws
    assert abs(share[GLOBAL] - params.alpha) < tolerance
    assert abs(share[PAGE] + share[HOST] - params.beta) < tolerance
    assert abs(share[RANDOM] - params.gamma) < tolerance
    # The first link of a page cannot repeat one of the page: its page draws go to the host.
    first_free = (params.links_per_page - 1) / params.links_per_page
    assert abs(share[PAGE] - params.beta * params.page_share * first_free) < tolerance
    # Global requests are G's URLs, rank 1 the most asked (about twice rank 2 with s = 1).
    g = global_fingerprints(params.global_urls)
    assert np.isin(fps[kinds == GLOBAL], g).all()
    counts = np.array([(fps == g[r]).sum() for r in range(3)])
    assert counts[0] > counts[1] > counts[2] and 1.6 < counts[0] / counts[1] < 2.5
    # Host requests are URLs of the host the thread is on; random ones are in no model set.
    trace = SyntheticTrace(params)
    hosts = trace.host_of(pos)
    host_pos = np.flatnonzero(kinds == HOST)[:2000]
    for i in host_pos:
        assert fps[i] in host_fingerprints(int(hosts[i]), params.host_urls)
    assert not np.isin(fps[kinds == RANDOM], g).any()
    assert len(np.unique(fps[kinds == RANDOM])) == (kinds == RANDOM).sum()     # a 2^62 universe: all new
    # A page repeat is a link emitted earlier on the same page by the same thread.
    threads, links = params.threads, params.links_per_page
    _, step = trace.thread_step(pos)
    for i in np.flatnonzero(kinds == PAGE)[:2000]:
        k = int(step[i] % np.uint64(links))
        earlier = fps[i - k * threads:i:threads]
        assert len(earlier) == k and fps[i] in earlier


def test_run_lengths_pages_per_host_and_links_per_page():
    params = with_(SMALL, threads=3, requests=30_000, alpha=0.0, beta=1.0, page_share=0.0)
    fps, kinds = generate(params)
    assert (kinds == HOST).all()
    run = params.links_per_page * params.pages_per_host
    for thread in range(params.threads):
        own = fps[thread::params.threads]
        head = (thread * params.pages_per_host // params.threads) * params.links_per_page
        # The thread's first host is cut short by its head start; every later one lasts `run` links.
        cuts = [0, run - head, *range(2 * run - head, len(own), run)]
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
    bound = 8 * (params.global_urls + params.threads * params.links_per_page + len(KIND_NAMES))
    assert first <= bound and trace.position == params.requests


def test_replay_reads_the_written_log(tmp_path):
    params = with_(SMALL, requests=9000)
    written = write_log(params, tmp_path, rotate_bytes=40_000, block_requests=1000)      # several files
    assert len(written["files"]) > 1 and written["requests"] == 9000
    assert sum(written["kinds"].values()) == 9000
    streams = load_streams([tmp_path])
    fps, _ = generate(params)
    assert len(streams) == 1 and np.array_equal(streams[0].trace("full"), fps)
    result = replay(streams, ReplayOptions(traces=("full",), policies=("lru",), sizes=(1, 16, 64, 512)))
    assert result.tallies[("full", "lru")].misses.tolist() == [lru_misses(fps.tolist(), k) for k in (1, 16, 64, 512)]
    with pytest.raises(ValueError, match="already holds splitter"):
        write_log(params, tmp_path)


def critical_size(threads: int) -> float:
    """log2 of the size at which LRU's miss rate falls below the midpoint of its largest and smallest."""
    params = ModelParams(threads=threads, alpha=0.1, beta=0.7, global_urls=200, host_urls=32, links_per_page=10,
                         pages_per_host=20, requests=threads * 12_000, seed=3)
    fps, _ = generate(params)
    sizes = tuple(1 << e for e in range(15))
    result = replay([Stream("synthetic", None, (), fps, None)],
                    ReplayOptions(traces=("full",), policies=("lru",), sizes=sizes, engine="numpy"))
    rate = result.tallies[("full", "lru")].misses / len(fps)
    middle = (rate.max() + rate.min()) / 2
    i = int(np.argmax(rate < middle))
    return i - 1 + (rate[i - 1] - middle) / (rate[i - 1] - rate[i])


def test_the_critical_size_grows_with_the_thread_count():
    two, sixteen = critical_size(2), critical_size(16)
    # Eight times the threads: the critical size moves up by at least two doublings
    # (2.6 measured; 3 if it were exactly proportional).
    assert sixteen - two > 2.0, (two, sixteen)


def test_cli_writes_a_log_and_says_how_to_replay_it(tmp_path, capsys):
    out = tmp_path / "synth"
    assert crawler_main(["synth", str(out), "--threads", "3", "--requests", "5000", "--alpha", "0.3", "--beta", "0.5",
                 "--gamma", "0.2", "--host-urls", "10", "--universe", "2^20"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["requests"] == 5000 and line["params"]["threads"] == 3 and line["params"]["host_urls"] == 10
    assert line["params"]["universe"] == 1 << 20
    assert line["replay"] == f"crawler replay {out} --trace full --threads 3"
    assert len(load_streams([out])[0].fps) == 5000


@pytest.mark.parametrize("extra, message", [
    (["--alpha", "0.7", "--beta", "0.5"], "alpha + beta"),
    (["--gamma", "0.5"], "is not 1 - alpha - beta"),
    (["--threads", "0"], "threads must be at least 1"),
    (["--seed", "-1"], "seed must be in"),
    (["--universe", "2^63"], "universe must be at most 2^62"),
])
def test_cli_usage_errors_exit_2(tmp_path, capsys, extra, message):
    assert main([str(tmp_path / "o"), "--requests", "10", *extra]) == 2
    assert message in capsys.readouterr().err

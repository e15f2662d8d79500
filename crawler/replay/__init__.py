"""Cache replay: pick the splitter's cache policy and size from logged URL streams.

Why. A node's host splitter keeps a URL cache so that a link it already
sent to a peer is not sent again (DESIGN 2.3). Broder, Najork & Wiener
(2003) chose Mercator's policy and size by replaying logged splitter streams
through about 1,800 simulated caches: six policies (CLOCK, LRU, RANDOM,
STATIC, and the bounds MIN and INFINITE) at sizes 2^0..2^25, on the full
stream and on the cross-host sub-stream. `crawler replay` does the same with
our logs and with the very cache classes the crawler runs (crawler.cache):
`clock` is the paper's single-ring CLOCK exactly, and `clock-sets` the
set-associative CLOCK the crawler runs by default.

Data flow:

    splitter-<node>-<seq>.log ... / traces.npy
        |  traces.load_streams: one stream per node (its files in sequence
        |  order) or per .npy array; `full` = every record, `cross` = records
        |  flagged cross-host
        v
    simulate.replay: per stream and trace
        prepare    next-use times (stack.next_use, one sort), distinct count
        lru        all sizes in one pass: stack distances (stack.lru_depths:
                   a wavelet-matrix dominance count in numpy, O(n log n), or
                   its compiled Fenwick-tree twin in _jit when numba is
                   installed; identical results)
        static     all sizes in one pass: frequency ranks; pre-loaded with the
                   k most frequent fingerprints of the stream itself, loading
                   not charged (the paper's rule)
        infinite   the cold misses (distinct fingerprints)
        min        crawler.cache.min's compiled Belady per size, on the shared
                   next-use times; sizes past stack.min_saturation are cold-only
        clock,     make_cache(policy, size).check_and_add_many over 1 Mi-request
        clock-sets, batches, one run per size (the crawler's own code); sizes
        random     at which the cache provably never evicts are cold-only
        -> misses summed over streams per (trace, policy, size), optionally per
           window of requests (--over-time)
        v
    results.py: results.csv (trace, policy, size, requests, misses, miss_rate,
                relative_to_min, threads, entries_per_thread), over_time.csv,
                summary.json
    plots.py:   miss rate vs size (log2), relative to MIN, per worker thread,
                over time (PNG, matplotlib Agg)

Each node's stream gets its own cache, as in the paper (one cache per
crawling process); requests and misses are then summed. Work runs in
`--jobs` forked processes, largest task first. Library use:

    from crawler.replay import ReplayOptions, load_streams, replay
    result = replay(load_streams(["data/"]), ReplayOptions(policies=("clock", "min")))

Traces longer than RAM (by default past 5 * 10^7 requests, or with
`--streaming`) take another path, streaming.py: chunks.py reads each input
from disk a chunk at a time and every chunk is fed once to every
simulation: LRU at all sizes through a stack bounded by the largest size
(the compiled LruStackKernel), the other online policies one cache per
size, and MIN one cache per size fed next uses that min_streaming.py first
builds out of core (bucket files on disk). Memory is the caches', not the
trace's; static and infinite need the whole trace and are refused there.

The command line is crawler.replay.cli.main (`crawler replay`); figures,
file formats and measured speed: docs/replay.md; bench/replay_bench.py.
Inputs from the paper's model of crawling threads (section 5.2), to study
the critical region: synthetic.py writes them as a stream log
(`crawler synth`, synth_cli.py); bench/synthetic_bench.py measures them.
"""

from crawler.replay.results import Row, result_rows
from crawler.replay.simulate import DEFAULT_SIZES, ReplayOptions, ReplayResult, replay
from crawler.replay.traces import InputError, Stream, load_streams

__all__ = ["DEFAULT_SIZES", "InputError", "ReplayOptions", "ReplayResult", "Row", "Stream", "load_streams",
           "replay", "result_rows"]

"""Benchmark of the disk-backed DUE against a Python set and Redis (issue 4).

    python bench/due_bench.py                       # DUE on 100M distinct URLs + both baselines on 5M
    python bench/due_bench.py --only due --fingerprints 100000000
    python bench/due_bench.py --only redis --fingerprints 5000000
    python bench/due_bench.py --only budget --fingerprints 5000000   # ns per check, step by step
    python bench/due_bench.py --fingerprints 5000000 --rounds 3       # medians of 3 alternating rounds

The stream is crawl-shaped: pages whose link counts follow Broder, Najork &
Wiener's trace (log-normal, mean 62.55, median 23), each link being a new URL
or a repeat: of a link earlier on the same page (about 30% in the paper), of
a recently discovered URL (same-site navigation), of a popular URL (Zipf over
the URLs in order of discovery: home pages come first), or of any URL seen so
far (the long tail, which only the disk set catches). Fingerprints are a
bijective mix of the URL's number, so the distinct count is known exactly and
every implementation must emit exactly that many new URLs. The URL strings
come from a pool of realistic-length strings (the DUE treats them as
payload; what it emits is decoded from its journal, so their RAM is real).

The workload is generated into a scratch file first, by a child process (not
timed; `--workload PREFIX` keeps it for later runs); the timed part reads it
in chunks and calls `submit` the way a node does (`--calls`, below), then
`flush`. checks_per_s = links / time spent inside `submit`/`flush`
(background merges cost the caller only when it has to wait for one or they
hold the GIL); checks_per_s_wall also counts the loop and the making of URL
strings. On a shared VM the hypervisor takes CPU by the minute, so CPU time
is counted too (`time.thread_time` around each call plus the merge thread's;
for Redis the client's plus the server's) and reported as checks per CPU
second, with the steal share seen during the run, and the calling thread's
time is split (Linux schedstat) into CPU, waiting for a CPU (the machine's
load) and blocked (waiting for the GIL, a merge, the disk).

How a node calls the DUE (crawler/node/): once per parsed page with the
page's links that this node owns (`add_urls`, after the host splitter), and
once per batch a peer sends (`_on_batch`: the peers' cross-host links that
this node owns, `splitter.batch_size` = 1000 URLs, fewer when `batch_ms`
fires first). `--calls node` (the default) models that: each link is local
with probability `--local-share` (0.815, Broder, Najork & Wiener's host
splitter: 81.5% of links local), a page's local links are one call, and the
cross links (by symmetry, what the peers send us) are cut into calls of
`--peer-batch` links. `--calls pages`: one call per page with all its links
(the single-node crawl); `--calls N`: calls of N links. The output states
the call sizes (mean, median, share of links in peer batches). The splitter
cache, which drops repeats of cross links before they are sent, is not
modelled: peer batches carry every cross link (more repeats for the DUE's
front cache; the distinct count is the same). Peak RSS is the process's VmHWM; `--only X`
runs one implementation in this process so its peak RSS can also be
measured from outside (`/usr/bin/time -v`). The last line of output is a
JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from crawler.cache import cache_from_config  # noqa: E402
from crawler.config.schema import DueConfig  # noqa: E402
from crawler.due import submit_pass  # noqa: E402
from crawler.due.disk import DiskDUE  # noqa: E402
from crawler.due.submit_pass import COMPILED as KERNEL_COMPILED  # noqa: E402
from crawler.urls import fingerprints  # noqa: E402

try:
    from crawler.due.merge_pass import COMPILED as MERGE_COMPILED  # noqa: E402
except ImportError:                        # a checkout from before the merge kernels (old/new comparisons)
    MERGE_COMPILED = None

# Broder, Najork & Wiener (2003): links per page, mean 62.55, median 23.
LINKS_MEDIAN = 23.0
LINKS_MEAN = 62.55
MAX_LINKS_PER_PAGE = 2000
GEN_CHUNK_LINKS = 1 << 18          # links generated at a time (bounded memory)
READ_CHUNK_LINKS = 1 << 20         # links read back at a time in the timed loop
URL_POOL = 1 << 16
REDIS_PIPELINE = 1000              # SADD commands per round trip
PROGRESS_STEPS = 10                # progress lines while the seen-set grows
MIB = 1 << 20
MAX_CALL_SIZE = 4096               # call sizes above this are counted here
TIMED_CALLS = 8                    # --only due: calls timed together (see run_due)
BUDGET_REPEATS = 5                 # --only budget: median of this many timings per step
MIX_CONSTANTS = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)


@dataclass
class Mix:
    """Shares of the links: new URL or a repeat of some kind (sum to 1)."""
    new: float = 0.20
    same_page: float = 0.30
    recent: float = 0.30
    popular: float = 0.15
    any_old: float = 0.05
    recent_mean: float = 20000.0   # how far back a "recent" repeat reaches, in URLs
    zipf_a: float = 1.3            # popularity skew

    def probabilities(self) -> np.ndarray:
        p = np.array([self.new, self.same_page, self.recent, self.popular, self.any_old])
        return p / p.sum()


# --- workload ---------------------------------------------------------------------

def splitmix64(ids: np.ndarray) -> np.ndarray:
    """A bijection of uint64: distinct URL numbers give distinct fingerprints."""
    z = ids.astype(np.uint64) + np.uint64(MIX_CONSTANTS[0])
    z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX_CONSTANTS[1])
    z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX_CONSTANTS[2])
    return z ^ (z >> np.uint64(31))


def page_sizes(rng: np.random.Generator, count: int) -> np.ndarray:
    sigma = math.sqrt(2.0 * math.log(LINKS_MEAN / LINKS_MEDIAN))
    sizes = np.rint(rng.lognormal(math.log(LINKS_MEDIAN), sigma, count))
    return np.clip(sizes, 1, MAX_LINKS_PER_PAGE).astype(np.int32)


def generate(path: Path, distinct: int, mix: Mix, seed: int) -> tuple[int, int]:
    """Write the stream to `path` (.fps uint64 and .pages int32); returns (links, pages)."""
    rng = np.random.default_rng(seed)
    p = mix.probabilities()
    next_id = 0
    links = pages = 0
    with open(path.with_suffix(".fps"), "wb") as ffps, open(path.with_suffix(".pages"), "wb") as fpages:
        while next_id < distinct:
            sizes = page_sizes(rng, max(1, int(GEN_CHUNK_LINKS / LINKS_MEAN)))
            total = int(sizes.sum())
            starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
            kind = rng.choice(len(p), size=total, p=p)
            first_on_page = np.arange(total) == starts
            kind[first_on_page & (kind == 1)] = 2             # nothing earlier on the page yet
            if next_id == 0:
                kind[:] = 0                                   # the seeds
            is_new = kind == 0
            ids = np.full(total, -1, dtype=np.int64)
            new_ids = next_id + np.cumsum(is_new) - 1
            ids[is_new] = new_ids[is_new]
            seen = np.maximum(next_id + np.cumsum(is_new) - is_new, 1)  # URLs known before each link
            r = kind == 2
            back = rng.exponential(mix.recent_mean, int(r.sum())).astype(np.int64) + 1
            ids[r] = np.maximum(seen[r] - back, 0)
            z = kind == 3
            ids[z] = (rng.zipf(mix.zipf_a, int(z.sum())) - 1) % seen[z]
            o = kind == 4
            ids[o] = (rng.random(int(o.sum())) * seen[o]).astype(np.int64)
            s = np.flatnonzero(kind == 1)                      # copy an earlier link of the page
            src = starts[s] + (rng.random(len(s)) * (s - starts[s])).astype(np.int64)
            for _ in range(MAX_LINKS_PER_PAGE):
                todo = ids[s] < 0
                if not todo.any():
                    break
                ids[s[todo]] = ids[src[todo]]
            # Stop exactly at `distinct` new URLs: cut the last page after the last one needed.
            new_total = int(is_new.sum())
            if next_id + new_total > distinct:
                cut = int(np.flatnonzero(is_new)[distinct - next_id - 1]) + 1
                page_cut = int(np.searchsorted(np.cumsum(sizes), cut))
                sizes = sizes[:page_cut + 1].copy()
                sizes[-1] = cut - int(sizes[:-1].sum())
                ids, total = ids[:cut], cut
                new_total = distinct - next_id
            splitmix64(ids).tofile(ffps)
            sizes.tofile(fpages)
            next_id += new_total
            links += total
            pages += len(sizes)
    return links, pages


def url_pool(rng: np.random.Generator) -> list[str]:
    """Realistic-length URL strings (about 70 bytes) reused as payload."""
    hosts = rng.integers(0, 50000, URL_POOL)
    depth = rng.integers(0, 99999, URL_POOL)
    pool = [f"https://www.site{h}.example.com/section-{d % 97}/topic-{d % 13}/page-{i}.html"
            for i, (h, d) in enumerate(zip(hosts.tolist(), depth.tolist()))]
    return pool + pool[:MAX_LINKS_PER_PAGE]


@dataclass
class Calls:
    """How the stream is cut into submit calls (see the module docstring)."""
    mode: str = "node"            # "node", "pages" or "fixed"
    size: int = 0                 # links per call, mode "fixed"
    local_share: float = 0.815
    peer_batch: int = 1000

    @classmethod
    def parse(cls, text: str, local_share: float, peer_batch: int) -> Calls:
        if text in ("node", "pages"):
            return cls(text, 0, local_share, peer_batch)
        return cls("fixed", int(text), local_share, peer_batch)

    def describe(self) -> str:
        if self.mode == "node":
            return f"node(local_share={self.local_share}, peer_batch={self.peer_batch})"
        return "pages" if self.mode == "pages" else f"fixed({self.size})"


def batches(path: Path, calls: Calls | None = None, seed: int = 0):
    """Yields (fps, call sizes) chunks of the stream in bounded memory (the
    fingerprints of each call contiguous, in call order)."""
    calls = calls or Calls("pages")
    rng = np.random.default_rng(seed)
    carry = np.empty(0, dtype=np.uint64)         # cross links not yet in a full peer batch
    pages_per_chunk = max(1, int(READ_CHUNK_LINKS / LINKS_MEAN))
    with open(path.with_suffix(".fps"), "rb") as ffps, open(path.with_suffix(".pages"), "rb") as fpages:
        while True:
            sizes = np.fromfile(fpages, dtype=np.int32, count=pages_per_chunk)
            if not len(sizes):
                break
            n = int(sizes.sum(dtype=np.int64))
            fps = np.fromfile(ffps, dtype=np.uint64, count=n)
            if calls.mode == "fixed":
                yield fps, [calls.size] * (n // calls.size) + ([n % calls.size] if n % calls.size else [])
            elif calls.mode == "pages":
                yield fps, sizes.tolist()
            else:
                out, call_sizes, carry = node_calls(fps, sizes, rng.random(n) < calls.local_share,
                                                    calls.peer_batch, carry)
                yield out, call_sizes
    if len(carry):
        yield carry, [len(carry)]                # the last peer batch, sent when batch_ms fires


def node_calls(fps: np.ndarray, sizes: np.ndarray, local: np.ndarray, peer_batch: int,
               carry: np.ndarray) -> tuple[np.ndarray, list[int], np.ndarray]:
    """A node's calls for these pages: per page its local links, and a peer batch
    whenever `peer_batch` cross links have gathered (after the page that filled it)."""
    parts: list[np.ndarray] = []
    call_sizes: list[int] = []
    pending = [carry]
    pending_n = len(carry)
    ends = np.cumsum(sizes).tolist()
    start = 0
    for end in ends:
        page, keep = fps[start:end], local[start:end]
        mine = page[keep]
        if len(mine):
            parts.append(mine)
            call_sizes.append(len(mine))
        cross = page[~keep]
        if len(cross):
            pending.append(cross)
            pending_n += len(cross)
        while pending_n >= peer_batch:
            joined = np.concatenate(pending)
            parts.append(joined[:peer_batch])
            call_sizes.append(peer_batch)
            pending, pending_n = [joined[peer_batch:]], pending_n - peer_batch
        start = end
    out = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return out, call_sizes, np.concatenate(pending)


# --- measurement helpers ---------------------------------------------------------------

def proc_status_kb(field: str, pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def proc_cpu_s(pid: int) -> float:
    """user + system CPU seconds of another process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb() -> float:
    return proc_status_kb("VmRSS") / 1024


def peak_rss_mb() -> float:
    return proc_status_kb("VmHWM") / 1024


def cpu_steal() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs so far: how much the hypervisor took."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[7] if len(fields) > 7 else 0, sum(fields)


def steal_pct(start: tuple[int, int]) -> float:
    steal, total = cpu_steal()
    return round(100.0 * (steal - start[0]) / max(1, total - start[1]), 1)


def log(*parts) -> None:
    print(*parts, flush=True)


def thread_sched_s() -> tuple[float, float]:
    """(CPU, waiting for a CPU) seconds of the calling thread so far (Linux schedstat; zeros elsewhere)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            cpu_ns, wait_ns, _slices = f.read().split()
    except OSError:
        return 0.0, 0.0
    return int(cpu_ns) / 1e9, int(wait_ns) / 1e9


class CallSizes:
    """Distribution of the submit call sizes (links per call)."""

    def __init__(self) -> None:
        self.counts = np.zeros(MAX_CALL_SIZE + 1, dtype=np.int64)

    def add(self, sizes: list[int]) -> None:
        self.counts += np.bincount(np.minimum(sizes, MAX_CALL_SIZE), minlength=MAX_CALL_SIZE + 1)

    def summary(self, peer_batch: int) -> dict:
        calls = int(self.counts.sum())
        sizes = np.arange(len(self.counts))
        links = int((self.counts * sizes).sum())
        cumulative = np.cumsum(self.counts)
        return {"calls": calls, "mean": round(links / max(1, calls), 1),
                "median": int(np.searchsorted(cumulative, (calls + 1) // 2)),
                "share_of_links_in_calls_of_peer_batch": round(int(self.counts[peer_batch]) * peer_batch
                                                               / max(1, links), 3)
                if peer_batch <= MAX_CALL_SIZE else None}


# --- the implementations -----------------------------------------------------------------

def run_due(args, path: Path, distinct: int, links: int) -> dict:
    config = DueConfig()
    config.buffer_size = args.buffer_size
    config.cache.size = args.cache_size
    workdir = Path(tempfile.mkdtemp(prefix="due-bench-", dir=args.dir))
    pool = url_pool(np.random.default_rng(args.seed + 1))
    due = DiskDUE(workdir / "due", config, buckets=args.buckets, delta_ratio=args.delta_ratio,
                  background=not args.no_background, durable=not args.no_fsync)
    calls = args.calls
    log(f"due: buffer_size={config.buffer_size} cache={config.cache.policy}/{config.cache.size} "
        f"buckets={due.stats()['buckets']} delta_ratio={args.delta_ratio} background={not args.no_background} "
        f"calls={calls.describe()} compiled_kernel={KERNEL_COMPILED} merge_kernels={MERGE_COMPILED} dir={workdir}")
    call_sizes = CallSizes()
    rss_start = rss_mb()
    emitted = checks = 0
    k = 0
    step = max(1, distinct // PROGRESS_STEPS)
    next_report = step
    rows = []
    steal0 = cpu_steal()
    in_due = 0.0                          # seconds spent inside submit/flush
    in_due_cpu = 0.0                      # CPU seconds of this thread inside them (immune to steal)
    clock = time.perf_counter
    cpu_clock = time.thread_time
    cpu0 = os.times()
    sched0 = thread_sched_s()
    start = clock()
    for fps, sizes in batches(path, calls, args.seed):
        call_sizes.add(sizes)
        a = 0
        for g in range(0, len(sizes), TIMED_CALLS):
            # A fresh str per link, as a parser makes them: the RAM of the
            # URLs the DUE buffers is then real (a shared pool would hide it).
            # A group's calls are prepared first, then timed together: reading
            # both clocks around every call cost ~0.5 us of wall time per call
            # (measured with an empty submit) plus a system call, ~8% of the
            # DUE's time. A group of 8 pages' URLs (~500) stays in the CPU's
            # cache, as a page's links do between the parser and the DUE.
            group = []
            for size in sizes[g:g + TIMED_CALLS]:
                group.append((fps[a:a + size], "\n".join(pool[k:k + size]).split("\n")))
                k = (k + size) % URL_POOL
                a += size
            # The CPU clock is a system call (~0.5 us here): read it outside the wall interval.
            c = cpu_clock()
            t = clock()
            for page, urls in group:
                emitted += len(due.submit(page, urls))
            e = clock()
            in_due_cpu += cpu_clock() - c
            in_due += e - t
            del group
        checks += a
        if emitted >= next_report or checks >= links:
            st = due.stats()
            elapsed = clock() - start
            row = {"distinct_emitted": emitted, "checks": checks, "seconds": round(elapsed, 1),
                   "due_seconds": round(in_due, 1), "checks_per_s": round(checks / in_due),
                   "checks_per_s_wall": round(checks / elapsed), "rss_mb": round(rss_mb(), 1),
                   "peak_rss_mb": round(peak_rss_mb(), 1), "disk_fingerprints": st["disk_fingerprints"],
                   "disk_mb": round(st["disk_bytes"] / MIB, 1), "merges": st["merges"],
                   "merge_s": round(st["merge_seconds"], 1), "wait_s": round(st["merge_wait_seconds"], 1),
                   "hit_rate": round(st["cache_hits"] / max(1, st["cache_hits"] + st["cache_misses"]), 3)}
            rows.append(row)
            log("due progress", json.dumps(row))
            while next_report <= emitted:
                next_report += step
    c = cpu_clock()
    t = clock()
    emitted += len(due.flush())
    e = clock()
    in_due_cpu += cpu_clock() - c
    in_due += e - t
    elapsed = clock() - start
    sched = [b - a for a, b in zip(sched0, thread_sched_s())]
    cpu = [b - a for a, b in zip(cpu0, os.times())]
    st = due.stats()
    due.close()
    files = sum(1 for _ in (workdir / "due" / "set").iterdir())
    shutil.rmtree(workdir, ignore_errors=True)
    if emitted != distinct:
        raise SystemExit(f"due emitted {emitted} new URLs, expected {distinct}")
    result = {
        "impl": "due", "fingerprints": distinct, "checks": checks, "calls": calls.describe(),
        "call_sizes": call_sizes.summary(calls.peer_batch),
        "buffer_size": config.buffer_size, "cache_size": config.cache.size, "buckets": st["buckets"],
        "delta_ratio": args.delta_ratio, "background": not args.no_background,
        "compiled_kernel": KERNEL_COMPILED, "merge_kernels": MERGE_COMPILED, "seconds": round(elapsed, 2),
        "due_seconds": round(in_due, 2), "checks_per_s": round(checks / in_due),
        "checks_per_s_wall": round(checks / elapsed),
        "cpu_seconds": round(cpu[0] + cpu[1], 1), "due_cpu_seconds": round(in_due_cpu, 1),
        "merge_cpu_seconds": round(st["merge_cpu_seconds"], 1),
        "checks_per_cpu_s": round(checks / (in_due_cpu + st["merge_cpu_seconds"])),
        "hot_path_checks_per_cpu_s": round(checks / in_due_cpu),
        "steal_pct": steal_pct(steal0), **caller_time(elapsed, in_due, in_due_cpu, sched, checks),
        "peak_rss_mb": round(peak_rss_mb(), 1), "rss_at_start_mb": round(rss_start, 1),
        "ram_bytes_per_url": round(peak_rss_mb() * MIB / distinct, 2),
        "disk_bytes": st["disk_bytes"], "disk_bytes_per_url": round(st["disk_bytes"] / distinct, 3),
        "bucket_files": files, "merges": st["merges"], "merge_seconds": round(st["merge_seconds"], 1),
        "merge_wait_seconds": round(st["merge_wait_seconds"], 1), "durable": not args.no_fsync,
        "cache_hit_rate": round(st["cache_hits"] / max(1, checks), 3),
        "buffer_repeats": st["buffer_repeats"], "progress": rows,
    }
    return result


def caller_time(elapsed: float, in_due: float, in_due_cpu: float, sched: list[float], checks: int) -> dict:
    """The calling thread's time: CPU, waiting for a CPU (other processes' load)
    and blocked (GIL, merge waits, disk), over the run and estimated inside the DUE.

    The thread's run-queue wait is shared out in proportion to CPU time (the
    scheduler preempts wherever the thread is); `checks_per_s_no_cpu_wait` is
    then the in-DUE rate without that wait: an estimate of the rate on an
    otherwise idle machine, not a measurement."""
    thread_cpu, runqueue = sched
    if thread_cpu <= 0:
        return {}
    due_runqueue = runqueue * min(1.0, in_due_cpu / thread_cpu)
    return {"caller_cpu_s": round(thread_cpu, 1), "caller_runqueue_s": round(runqueue, 1),
            "caller_blocked_s": round(max(0.0, elapsed - thread_cpu - runqueue), 1),
            "due_runqueue_s_est": round(due_runqueue, 1),
            "due_blocked_s_est": round(max(0.0, in_due - in_due_cpu - due_runqueue), 1),
            "checks_per_s_no_cpu_wait": round(checks / max(1e-9, in_due - due_runqueue))}


def run_set(args, path: Path, distinct: int, links: int) -> dict:
    rss_start = rss_mb()
    seen: set[int] = set()
    emitted = checks = 0
    steal0 = cpu_steal()
    cpu_start = time.thread_time()
    start = time.perf_counter()
    for fps, sizes in batches(path):
        a = 0
        for size in sizes:
            new = 0
            for fp in fps[a:a + size].tolist():
                if fp not in seen:
                    seen.add(fp)
                    new += 1
            emitted += new
            a += size
        checks += a
    elapsed = time.perf_counter() - start
    cpu = time.thread_time() - cpu_start
    ram = (rss_mb() - rss_start) * MIB
    assert emitted == distinct, (emitted, distinct)
    return {"impl": "set", "fingerprints": distinct, "checks": checks, "seconds": round(elapsed, 2),
            "checks_per_s": round(checks / elapsed), "checks_per_cpu_s": round(checks / cpu),
            "steal_pct": steal_pct(steal0), "peak_rss_mb": round(peak_rss_mb(), 1),
            "ram_bytes_per_url": round(ram / distinct, 1)}


class Redis:
    """redis-server on a loopback port, persistence off; stopped by PID."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
                break
            except OSError as exc:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("redis-server did not start") from exc
                time.sleep(0.05)

    def command(self, *words: bytes) -> bytes:
        out = b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)
        self.sock.sendall(out)
        return self.sock.recv(1 << 20)

    def info_memory(self) -> dict:
        reply = self.command(b"INFO", b"memory").decode()
        return dict(line.split(":", 1) for line in reply.split("\r\n") if ":" in line)

    def stop(self) -> None:
        try:
            self.sock.close()
        except AttributeError:
            pass
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def run_redis(args, path: Path, distinct: int, links: int) -> dict:
    """Pipelined SADD of each 8-byte fingerprint (scrapy-redis's dupefilter, pipelined).

    Commands are built as fixed-size records with numpy and the replies
    (':1' added = new, ':0' = seen) parsed the same way, so the client costs
    little and the figure is Redis's, not Python's.
    """
    redis = Redis()
    try:
        prefix = b"*3\r\n$4\r\nSADD\r\n$4\r\nseen\r\n$8\r\n"
        record = len(prefix) + 8 + 2
        template = np.frombuffer((prefix + b"\0" * 8 + b"\r\n") * REDIS_PIPELINE, dtype=np.uint8)
        template = template.reshape(REDIS_PIPELINE, record).copy()
        emitted = checks = 0
        steal0 = cpu_steal()
        server_cpu0 = proc_cpu_s(redis.proc.pid)
        cpu_start = time.thread_time()
        start = time.perf_counter()
        for fps, _sizes in batches(path):
            for a in range(0, len(fps), REDIS_PIPELINE):
                part = fps[a:a + REDIS_PIPELINE]
                n = len(part)
                template[:n, len(prefix):len(prefix) + 8] = part.view(np.uint8).reshape(n, 8)
                redis.sock.sendall(template[:n].tobytes())
                need = 4 * n                     # each reply is ":0\r\n" or ":1\r\n"
                reply = bytearray()
                while len(reply) < need:
                    chunk = redis.sock.recv(need - len(reply))
                    if not chunk:
                        raise RuntimeError("redis closed the connection")
                    reply += chunk
                emitted += int(np.count_nonzero(np.frombuffer(reply, dtype=np.uint8)[1::4] == ord("1")))
            checks += len(fps)
        elapsed = time.perf_counter() - start
        cpu = time.thread_time() - cpu_start + proc_cpu_s(redis.proc.pid) - server_cpu0
        info = redis.info_memory()
        server_rss = proc_status_kb("VmRSS", redis.proc.pid) * 1024
    finally:
        redis.stop()
    assert emitted == distinct, (emitted, distinct)
    return {"impl": "redis", "fingerprints": distinct, "checks": checks, "seconds": round(elapsed, 2),
            "checks_per_s": round(checks / elapsed), "checks_per_cpu_s": round(checks / cpu),
            "steal_pct": steal_pct(steal0), "used_memory": int(info["used_memory"]),
            "server_rss_bytes": server_rss,
            "ram_bytes_per_url": round(server_rss / distinct, 1),
            "used_memory_per_url": round(int(info["used_memory"]) / distinct, 1)}


def run_budget(args, path: Path, distinct: int, links: int) -> dict:
    """Per-check CPU cost of each step of the DUE's hot path (ns per check, median of
    BUDGET_REPEATS), on the first `--budget-calls` calls of the stream, merges held off;
    then the merges' CPU per check from a full run of those calls with background merges.

    Steps, each including the ones before: the front-cache probe alone
    (check_and_add_many); the submit kernel without a journal record (probe +
    buffer append); with the record written into plain memory (+ UTF-8, copy,
    crc32); DiskDUE.submit (+ the Python around it, the journal's page cache
    and window slides). The fingerprint (computed by the node before the DUE,
    for Redis too) is measured for reference."""
    pool = url_pool(np.random.default_rng(args.seed + 1))
    calls: list[tuple[np.ndarray, list[str]]] = []
    k = 0
    for fps, sizes in batches(path, args.calls, args.seed):
        a = 0
        for size in sizes:
            calls.append((fps[a:a + size], "\n".join(pool[k:k + size]).split("\n")))
            k, a = (k + size) % URL_POOL, a + size
            if len(calls) >= args.budget_calls:
                break
        if len(calls) >= args.budget_calls:
            break
    checks = sum(len(u) for _, u in calls)
    config = DueConfig()
    config.cache.size = args.cache_size

    def timed(body) -> float:
        best = []
        for _ in range(BUDGET_REPEATS):
            state = body(None)
            c = time.thread_time()
            body(state)
            best.append(time.thread_time() - c)
        return sorted(best)[len(best) // 2] / checks * 1e9

    def probe(state):
        if state is None:
            return cache_from_config(config.cache)
        for f, _u in calls:
            state.check_and_add_many(f)

    def kernel_only(state, record: bool = False):
        if state is None:
            return (cache_from_config(config.cache), np.empty(checks, dtype=np.uint64), [],
                    bytearray(checks * 128) if record else None)
        cache, buf, kept, window = state
        n = pos = 0
        for f, u in calls:
            m, size = submit_pass.submit(cache, f, u, buf, n, kept, window, pos)
            n += m
            pos += max(size, 0)

    def due_submit(state):
        if state is None:
            directory = Path(tempfile.mkdtemp(prefix="due-budget-", dir=args.dir))
            big = DueConfig()
            big.cache.size, big.buffer_size = args.cache_size, checks + 1
            return directory, DiskDUE(directory / "due", big, background=False, durable=not args.no_fsync)
        directory, due = state
        for f, u in calls:
            due.submit(f, u)
        due.close()
        shutil.rmtree(directory, ignore_errors=True)

    def fingerprint(state):
        if state is None:
            return True
        for _f, u in calls:
            fingerprints(u)

    steps = {"fingerprint (node, before the DUE)": timed(fingerprint),
             "cache probe": timed(probe),
             "+ buffer append (kernel, no record)": timed(kernel_only),
             "+ journal record in memory (kernel)": timed(lambda st: kernel_only(st, True)),
             "+ DiskDUE.submit (Python, page cache, slides)": timed(due_submit)}
    # The merges' CPU per check: the same calls with background merges (default buffer).
    directory = Path(tempfile.mkdtemp(prefix="due-budget-", dir=args.dir))
    run = DueConfig()
    run.cache.size, run.buffer_size = args.cache_size, args.buffer_size
    due = DiskDUE(directory / "due", run, durable=not args.no_fsync)
    for f, u in calls:
        due.submit(f, u)
    due.flush()
    st = due.stats()
    due.close()
    shutil.rmtree(directory, ignore_errors=True)
    steps["merges (background thread)"] = st["merge_cpu_seconds"] / checks * 1e9
    budget = {name: round(ns, 1) for name, ns in steps.items()}
    for name, ns in budget.items():
        log(f"budget: {name:48s} {ns:7.1f} ns/check")
    return {"impl": "budget", "calls": args.calls.describe(), "budget_calls": len(calls), "checks": checks,
            "links_per_call": round(checks / max(1, len(calls)), 1), "merges": st["merges"],
            "compiled_kernel": KERNEL_COMPILED, "merge_kernels": MERGE_COMPILED, "ns_per_check": budget,
            "hot_path_ns_per_check": budget["+ DiskDUE.submit (Python, page cache, slides)"],
            "hot_path_and_merges_ns_per_check": round(budget["+ DiskDUE.submit (Python, page cache, slides)"]
                                                      + budget["merges (background thread)"], 1)}


RUNNERS = {"due": run_due, "set": run_set, "redis": run_redis, "budget": run_budget}


def run_one(args) -> dict:
    scratch = None
    if args.workload:
        path = Path(f"{args.workload}-{args.fingerprints}-{args.seed}")
        path.parent.mkdir(parents=True, exist_ok=True)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="due-workload-", dir=args.dir))
        path = scratch / "stream"
    load_before = os.getloadavg()
    try:
        t = time.perf_counter()
        if path.with_suffix(".pages").exists():
            how = f"reused {path}"
        else:
            # In a child process, so this one's peak RSS is the implementation's alone.
            subprocess.run([sys.executable, __file__, "--generate-only", str(path),
                            "--fingerprints", str(args.fingerprints), "--seed", str(args.seed)], check=True)
            how = f"generated in {time.perf_counter() - t:.1f}s"
        links = path.with_suffix(".fps").stat().st_size // 8
        pages = path.with_suffix(".pages").stat().st_size // 4
        log(f"{args.only}: workload {args.fingerprints} distinct URLs, {links} links on {pages} pages "
            f"({links / args.fingerprints:.2f} checks per URL), {how}")
        result = RUNNERS[args.only](args, path, args.fingerprints, links)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    result["links_per_page"] = round(links / pages, 2)
    result["loadavg_before_after"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
    result["cpus"] = os.cpu_count()
    return result


def run_all(args) -> dict:
    """Each implementation in its own process (so peak RSS is its own), `--rounds` times.

    With several rounds the order alternates (DUE first, then last) and each
    figure is the median over the rounds; the ratios to Redis and the set are
    the medians of each round's own ratio: a round's runs are minutes apart,
    and this VM's speed (and Redis's above all) moves between quiet stretches.
    """
    plan = [("due", args.fingerprints), ("set", args.baseline_fingerprints), ("redis", args.baseline_fingerprints)]
    rounds = []
    for r in range(args.rounds):
        if args.rounds > 1:
            log(f"round {r + 1} of {args.rounds}")
        rounds.append(run_round(args, plan if r % 2 == 0 else plan[::-1]))
    per_round = [summarize(args, res) for res in rounds]
    summary = dict(per_round[0])
    if args.rounds > 1:
        for key in ("checks_per_s", "checks_per_s_no_cpu_wait", "redis_checks_per_s", "set_checks_per_s",
                    "checks_per_cpu_s", "redis_checks_per_cpu_s", "set_checks_per_cpu_s", "cpu_speed_vs_redis",
                    "cpu_speed_vs_set", "speed_vs_redis", "speed_vs_set", "peak_rss_mb", "ram_per_url_vs_redis"):
            values = [s[key] for s in per_round if s.get(key) is not None]
            if values:
                summary[key] = round(statistics.median(values), 4)
        summary["rounds"] = [{k: s[k] for k in ("checks_per_s", "redis_checks_per_s", "speed_vs_redis",
                                                 "cpu_speed_vs_redis", "steal_pct")} for s in per_round]
        for i, s in enumerate(per_round, 1):
            log(f"round {i}: DUE {s['checks_per_s'] / 1e6:.2f}M checks/s, Redis {s['redis_checks_per_s'] / 1e6:.2f}M, "
                f"{s['speed_vs_redis']}x (per CPU second {s['cpu_speed_vs_redis']}x), steal {s['steal_pct']}%")
        log(f"median of {args.rounds} rounds: DUE is {summary['speed_vs_redis']}x Redis's checks/s "
            f"(per CPU second {summary['cpu_speed_vs_redis']}x)")
    return summary


def run_round(args, plan: list[tuple[str, int]]) -> dict:
    """One run of each implementation, each in its own process; their results by name."""
    results = {}
    for impl, n in plan:
        cmd = [sys.executable, __file__, "--only", impl, "--fingerprints", str(n), "--seed", str(args.seed),
               "--buffer-size", str(args.buffer_size), "--cache-size", str(args.cache_size),
               "--buckets", str(args.buckets), "--delta-ratio", str(args.delta_ratio), "--calls", args.calls_text,
               "--local-share", str(args.local_share), "--peer-batch", str(args.peer_batch)]
        if args.dir:
            cmd += ["--dir", args.dir]
        if args.workload:
            cmd += ["--workload", args.workload]
        if args.no_background:
            cmd.append("--no-background")
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        lines = proc.stdout.strip().splitlines()
        for line in lines[:-1]:
            log(line)
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"{impl} run failed ({proc.returncode})")
        results[impl] = json.loads(lines[-1])
        log(f"{impl}: {json.dumps({k: v for k, v in results[impl].items() if k != 'progress'})}")
    return results


def summarize(args, results: dict) -> dict:
    """The figures and ratios of one round."""
    due, redis, pyset = results["due"], results["redis"], results["set"]
    summary = {
        "calls": due["calls"], "call_sizes": due["call_sizes"],
        "checks_per_s": due["checks_per_s"], "checks_per_s_no_cpu_wait": due.get("checks_per_s_no_cpu_wait"),
        "peak_rss_mb": due["peak_rss_mb"],
        "disk_bytes_per_url": due["disk_bytes_per_url"], "fingerprints": due["fingerprints"],
        "ram_bytes_per_url": due["ram_bytes_per_url"],
        "baseline_fingerprints": args.baseline_fingerprints,
        "redis_checks_per_s": redis["checks_per_s"], "redis_ram_bytes_per_url": redis["ram_bytes_per_url"],
        "set_checks_per_s": pyset["checks_per_s"], "set_ram_bytes_per_url": pyset["ram_bytes_per_url"],
        "checks_per_cpu_s": due["checks_per_cpu_s"], "redis_checks_per_cpu_s": redis["checks_per_cpu_s"],
        "set_checks_per_cpu_s": pyset["checks_per_cpu_s"],
        "cpu_speed_vs_redis": round(due["checks_per_cpu_s"] / redis["checks_per_cpu_s"], 2),
        "cpu_speed_vs_set": round(due["checks_per_cpu_s"] / pyset["checks_per_cpu_s"], 2),
        "steal_pct": [due["steal_pct"], pyset["steal_pct"], redis["steal_pct"]],
        "speed_vs_redis": round(due["checks_per_s"] / redis["checks_per_s"], 2),
        "ram_per_url_vs_redis": round(due["ram_bytes_per_url"] / redis["ram_bytes_per_url"], 4),
        "speed_vs_set": round(due["checks_per_s"] / pyset["checks_per_s"], 2),
        "ram_per_url_vs_set": round(due["ram_bytes_per_url"] / pyset["ram_bytes_per_url"], 4),
    }
    log(f"calls: {due['calls']}, sizes {due['call_sizes']}; load average before/after "
        f"{[r['loadavg_before_after'] for r in (due, pyset, redis)]}")
    log(f"ratios: DUE is {summary['speed_vs_redis']}x Redis's checks/s (goal >= 15) at "
        f"{summary['ram_per_url_vs_redis']} of its RAM per URL (goal <= 0.125); "
        f"{summary['speed_vs_set']}x a Python set's checks/s at {summary['ram_per_url_vs_set']} of its RAM per URL "
        f"(DUE on {due['fingerprints']} URLs, baselines on {args.baseline_fingerprints}); per CPU second "
        f"(immune to the hypervisor's steal, {summary['steal_pct']}%): {summary['cpu_speed_vs_redis']}x Redis "
        f"(client + server CPU), {summary['cpu_speed_vs_set']}x the set")
    return summary


def main(argv: list[str] | None = None) -> None:
    defaults = DueConfig()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(RUNNERS), help="run one implementation in this process")
    ap.add_argument("--fingerprints", type=int, default=100_000_000, help="distinct URLs in the stream")
    ap.add_argument("--baseline-fingerprints", type=int, default=5_000_000,
                    help="distinct URLs for the set and Redis baselines (ratios are per URL)")
    ap.add_argument("--buffer-size", type=int, default=defaults.buffer_size)
    ap.add_argument("--cache-size", type=int, default=defaults.cache.size)
    ap.add_argument("--buckets", type=int, default=defaults.buckets)
    ap.add_argument("--delta-ratio", type=float, default=defaults.delta_ratio)
    ap.add_argument("--no-background", action="store_true", help="merge in the caller's thread")
    ap.add_argument("--no-fsync", action="store_true", help="DiskDUE(durable=False): no fsync at all")
    ap.add_argument("--calls", default="node",
                    help="how submit is called: node (a page's local links, and peer batches; default), "
                         "pages (one call per page), or N (calls of N links)")
    ap.add_argument("--batch", type=int, default=None, help="same as --calls N (older name)")
    ap.add_argument("--local-share", type=float, default=0.815, help="--calls node: share of a page's links it owns")
    ap.add_argument("--peer-batch", type=int, default=1000, help="--calls node: URLs per peer batch")
    ap.add_argument("--budget-calls", type=int, default=200_000,
                    help="--only budget: calls of the stream to time (held in memory)")
    ap.add_argument("--workload", default=None,
                    help="keep the generated stream at this path prefix and reuse it on later runs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every implementation this many times (order alternating); medians")
    ap.add_argument("--dir", default=None, help="scratch directory (default: the system's temp dir)")
    ap.add_argument("--generate-only", metavar="PATH", help=argparse.SUPPRESS)
    benchkit.add_kernels_option(ap)
    args = ap.parse_args(argv)
    benchkit.check_kernels(args)
    args.calls_text = str(args.batch) if args.batch else ("pages" if args.batch == 0 else args.calls)
    args.calls = Calls.parse(args.calls_text, args.local_share, args.peer_batch)
    if args.generate_only:
        generate(Path(args.generate_only), args.fingerprints, Mix(), args.seed)
        return
    result = run_one(args) if args.only else run_all(args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

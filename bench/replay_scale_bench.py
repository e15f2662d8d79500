"""`crawler replay --streaming` on a trace of 10^9 requests: time, requests/s and peak RSS per policy.

The paper's traces held 6.4-7.1 x 10^9 requests per machine; the in-memory
replay needs the whole trace (and ~100 bytes per request for its LRU pass)
in RAM. This bench checks the streaming path's promise: memory bounded by
the caches, not the trace.

1. It writes a trace of `--requests` requests (default 10^9: 8 GB of uint64
   in one .npy file) from the paper's model (crawler.replay.synthetic, the
   model `crawler synth` writes; the parameters are MODEL below: 64 threads
   round robin, a global set of 2^20 Zipf-popular URLs, alpha 0.2, beta 0.6),
   block by block, so writing it needs no more memory than a block.
2. It runs `crawler replay TRACE --streaming --jobs 1 --no-plots` once per
   policy, each in its own process (one after the other, or with --parallel
   at the same time), at the 26 sizes 2^0..2^25: LRU (all
   sizes in one pass of the bounded stack-distance kernel), CLOCK (26 caches
   fed each chunk in turn), SIEVE (the same). While each runs, the bench
   samples the process's resident memory (/proc/PID/status VmRSS, every
   SAMPLE_S) and reads its ru_maxrss when it ends; it prints per policy the
   wall time, CPU time (user + system, its workers included), requests per
   second (trace requests / wall seconds) and the
   peak RSS, and checks the target (peak RSS <= 4 GiB). `--policies min`
   runs MIN out of core (next uses built through bucket files in the
   replay's --spill-dir, here beside the trace): also the time to build
   them and the peak bytes its files took on disk; `infinite` builds the same
   next uses (it runs no cache), and `static` ranks each stream's most
   frequent fingerprints out of core first (its peak on disk is reported too). `--replay-jobs 2` splits
   a policy's sizes over two processes (RSS then summed over them).
3. Baseline, on the first `--baseline-requests` (10^7) of the same trace:
   the in-memory replay and the streaming replay of that prefix, in the same
   way (LRU, CLOCK, SIEVE and MIN, or `--baseline-policies`), with their time
   per request and a check that every (policy, size) miss count is equal.

    python bench/replay_scale_bench.py                       # 10^9 requests (~8 GB in --dir)
    python bench/replay_scale_bench.py --requests 10000000   # a quick run
    python bench/replay_scale_bench.py --dir /big/disk --keep   # keep the trace for reruns

The trace file is deleted at the end unless --keep; an existing trace of the
same length and model in --dir is reused (it is written once, in about 6
minutes for 10^9 requests).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

import benchkit  # noqa: E402  (bench/ is the script's folder: first on sys.path)

benchkit.use_installed_crawler()

from crawler.replay.synthetic import ModelParams, SyntheticTrace  # noqa: E402

REQUESTS = 10**9
BASELINE_REQUESTS = 10**7
SIZES = "2^0..2^25"
POLICIES = ("lru", "clock", "sieve")
BASELINE_POLICIES = (*POLICIES, "min")
SPILLING = {"min", "infinite", "static"}     # what streaming builds on disk first (--spill-dir)
RSS_TARGET_BYTES = 4 << 30
SAMPLE_S = 0.5
STATUS_EVERY_S = 60.0     # a long run prints its elapsed time and peak RSS so far this often
BLOCK_REQUESTS = 1 << 20
MODEL = dict(threads=64, global_urls=1 << 20, alpha=0.2, beta=0.6, seed=1)


def trace_path(directory: Path, requests: int) -> Path:
    return directory / f"scale-trace-{requests}.npy"


def write_trace(path: Path, requests: int) -> float:
    """Writes the model's first `requests` requests as a uint64 .npy file, block by block; returns seconds.
    A finished file of the right length is reused (a marker file says it was completed)."""
    done = path.with_suffix(".done")
    if path.exists() and done.exists() and done.read_text() == json.dumps(MODEL):
        print(f"reusing {path}", flush=True)
        return 0.0
    started = time.perf_counter()
    trace = SyntheticTrace(ModelParams(**MODEL, requests=requests))   # type: ignore[arg-type]
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_2_0(fh, {"descr": "<u8", "fortran_order": False, "shape": (requests,)})
        for block in trace.blocks(BLOCK_REQUESTS):
            fh.write(block.fps.astype("<u8", copy=False).tobytes())
    done.write_text(json.dumps(MODEL))
    return time.perf_counter() - started


def write_prefix(source: Path, path: Path, requests: int) -> None:
    """The first `requests` of the trace as their own .npy (the baseline's input)."""
    data = np.load(source, mmap_mode="r")
    np.save(path, np.asarray(data[:requests]))
    del data


def _vm_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _spill_bytes(spill: Path) -> int:
    """Bytes of the files a streaming MIN has in `spill` now (its next uses and bucket files)."""
    total = 0
    for root, _, files in os.walk(spill):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def run_replay(inputs: list[Path], policies: str, out: Path, streaming: bool, log: Path, jobs: int = 1) -> dict:
    """`crawler replay` in its own process; wall time, peak RSS (the larger of the sampled VmHWM and the
    child's ru_maxrss; with jobs > 1, the sum of the processes' sampled RSS) and, for MIN, the peak of
    its files on disk."""
    spill = out.with_name(out.name + "-spill")
    spill.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "crawler", "replay", *map(str, inputs), "--policies", policies,
               "--sizes", SIZES, "--trace", "full", "--jobs", str(jobs), "--no-plots", "--out", str(out),
               "--spill-dir", str(spill), "--streaming" if streaming else "--no-streaming"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(benchkit.REPO), env.get("PYTHONPATH", "")) if p)
    started = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        peak_kib = spill_peak = 0
        status_at = started + STATUS_EVERY_S
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            together = _vm_kib(proc.pid, "VmRSS") + sum(_vm_kib(c, "VmRSS") for c in _children(proc.pid))
            peak_kib = max(peak_kib, _vm_kib(proc.pid, "VmHWM"), together)
            if SPILLING & set(policies.split(",")):
                spill_peak = max(spill_peak, _spill_bytes(spill))
            if time.perf_counter() >= status_at:
                status_at += STATUS_EVERY_S
                print(f"  ... {policies}: {time.perf_counter() - started:,.0f} s, peak RSS so far "
                      f"{peak_kib / (1 << 20):.2f} GiB (progress: {log})", flush=True)
            time.sleep(SAMPLE_S)
        seconds = time.perf_counter() - started
        assert proc.stdout is not None
        stdout = proc.stdout.read()
        proc.stdout.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}); see {log}")
    peak = max(peak_kib, usage.ru_maxrss) * 1024
    spill.rmdir()                               # the replay removes its files: left ones fail here
    summary = json.loads((out / "summary.json").read_text())
    cpu = usage.ru_utime + usage.ru_stime        # with its reaped workers: robust to other load, unlike wall
    return {"policies": policies, "streaming": streaming, "seconds": round(seconds, 2), "jobs": jobs,
            "cpu_seconds": round(cpu, 1),
            "peak_rss_bytes": peak, "peak_spill_bytes": spill_peak,
            "next_use_seconds": summary["traces"]["full"].get("next_use_seconds"),
            "summary": json.loads(stdout.strip().splitlines()[-1])}


def _children(pid: int) -> list[int]:
    """The replay's worker processes (--jobs > 1 forks them)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def misses(out: Path) -> dict[tuple[str, int], int]:
    with open(out / "results.csv", newline="") as fh:
        return {(row["policy"], int(row["size"])): int(row["misses"]) for row in csv.DictReader(fh)}


def report(label: str, run: dict, requests: int) -> None:
    gib = run["peak_rss_bytes"] / (1 << 30)
    rate = requests / run["seconds"]
    verdict = "ok" if run["peak_rss_bytes"] <= RSS_TARGET_BYTES else "OVER the 4 GiB target"
    extra = ""
    if run.get("next_use_seconds") is not None:
        extra = (f"; next uses built in {run['next_use_seconds']:,.1f} s, peak on disk "
                 f"{run['peak_spill_bytes'] / (1 << 30):.2f} GiB")
    print(f"{label:<28} {run['seconds']:>9.1f} s  {rate:>12,.0f} requests/s  {1e9 / rate:>8.1f} ns/request  "
          f"CPU {run['cpu_seconds']:,.0f} s  peak RSS {gib:5.2f} GiB ({verdict}){extra}", flush=True)


def baseline(trace: Path, work: Path, requests: int, policies: tuple[str, ...] = BASELINE_POLICIES) -> dict:
    """Streaming and in-memory replay of the trace's first `requests`: time per request, equal misses
    (MIN too: in memory it needs the whole trace, streaming it builds the next uses on disk first)."""
    prefix = work / f"scale-prefix-{requests}.npy"
    write_prefix(trace, prefix, requests)
    out: dict = {"requests": requests, "policies": {}}
    try:
        for policy in policies:
            runs = {}
            for streaming in (False, True):
                label = f"{policy} {'streaming' if streaming else 'in memory'}"
                where = work / f"baseline-{policy}-{'stream' if streaming else 'memory'}"
                runs[streaming] = run_replay([prefix], policy, where, streaming, where.with_suffix(".log"))
                runs[streaming]["misses"] = misses(where)
                report(f"{label} ({requests:.0e})", runs[streaming], requests)
            equal = runs[True]["misses"] == runs[False]["misses"]
            ratio = runs[True]["seconds"] / runs[False]["seconds"]
            print(f"  {policy}: streaming / in-memory time {ratio:.2f}; misses equal at all 26 sizes: {equal}",
                  flush=True)
            out["policies"][policy] = {"equal": equal, "time_ratio": round(ratio, 3),
                                       "memory": {k: v for k, v in runs[False].items() if k != "misses"},
                                       "streaming": {k: v for k, v in runs[True].items() if k != "misses"}}
            if not equal:
                raise SystemExit(f"{policy}: the streaming and in-memory miss counts differ")
    finally:
        prefix.unlink(missing_ok=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=REQUESTS, help=f"trace length (default {REQUESTS:.0e})")
    parser.add_argument("--baseline-requests", type=int, default=BASELINE_REQUESTS,
                        help=f"prefix replayed both ways (default {BASELINE_REQUESTS:.0e}; 0: no baseline)")
    parser.add_argument("--dir", type=Path, default=Path("."), help="where the trace is written (default .)")
    parser.add_argument("--keep", action="store_true", help="keep the trace file")
    parser.add_argument("--write-only", action="store_true", help="write the trace and stop")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help=f"policies replayed over the whole trace, one process each (default {','.join(POLICIES)})")
    parser.add_argument("--baseline-policies", default=",".join(BASELINE_POLICIES),
                        help=f"policies of the baseline (default {','.join(BASELINE_POLICIES)})")
    parser.add_argument("--parallel", action="store_true",
                        help="replay the policies over the whole trace at the same time (a process each)")
    parser.add_argument("--replay-jobs", type=int, default=1,
                        help="--jobs of each replay over the whole trace (default 1: one process a policy)")
    benchkit.add_kernels_option(parser)
    args = parser.parse_args()
    benchkit.check_kernels(args)
    args.dir.mkdir(parents=True, exist_ok=True)
    path = trace_path(args.dir, args.requests)
    seconds = write_trace(path, args.requests)
    print(json.dumps({"wrote": str(path), "requests": args.requests, "bytes": path.stat().st_size,
                      "seconds": round(seconds, 1), "model": MODEL}), flush=True)
    if args.write_only:
        return 0
    line: dict = {"requests": args.requests, "sizes": SIZES, "model": MODEL, "load_average": os.getloadavg()}
    try:
        if args.baseline_requests:
            line["baseline"] = baseline(path, args.dir, min(args.baseline_requests, args.requests),
                                        tuple(p for p in args.baseline_policies.split(",") if p))
        line["full"] = {}
        policies = [p for p in args.policies.split(",") if p]

        def whole(policy: str) -> None:
            out = args.dir / f"full-{policy}"
            run = run_replay([path], policy, out, True, out.with_suffix(".log"), args.replay_jobs)
            report(f"{policy} streaming ({args.requests:.0e})", run, args.requests)
            run["misses"] = {f"2^{size.bit_length() - 1}": n for (_, size), n in misses(out).items()}
            line["full"][policy] = run

        if args.parallel:
            threads = [threading.Thread(target=whole, args=(p,)) for p in policies]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            for policy in policies:
                whole(policy)
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)
            path.with_suffix(".done").unlink(missing_ok=True)
    line["self_ru_maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(line, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

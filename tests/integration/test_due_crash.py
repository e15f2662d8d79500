"""DiskDUE killed with SIGKILL at random moments (mid-merge included), then restarted.

A child process feeds a deterministic stream of batches to a DiskDUE and
reports on stdout each URL it got back ("E url") and each batch whose submit
returned ("A n"). The parent kills it, either at a random time or at a named
point inside the DUE (a fault hook that SIGKILLs the process: after the
journal write, between every step of a merge, during a release), restarts
it from the first batch not acknowledged, and at the end checks that:

- every URL of an acknowledged batch came out at least once (nothing
  accepted is lost);
- nothing came out that was never submitted;
- URLs that came out twice are no more than the DUE's own count
  (`duplicates_emitted`), and at most one buffer per crash;
- some did come out twice (the child is also killed right after it printed
  URLs the DUE had not yet released), so the window is really exercised.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from tests.support.fixtures import REPO
from tests.support.processes import crawler_env

BATCHES = 120
BATCH_LINKS = 25
DOMAIN = 2500              # distinct URLs the stream draws from
BUFFER_SIZE = 40
FLUSH_EVERY = 17           # batches between flushes ("the frontier runs low")
ROUNDS_LIMIT = 30          # child starts per scenario, at most
MAX_NTH = 6                # a named point kills on its 1st..6th passage
MAX_KILL_DELAY_S = 0.3     # a timed kill lands this soon after the DUE is up
CHILD_TIMEOUT_S = 60.0
POINTS = [
    "submit:journaled", "merge:begin", "merge:sorted", "merge:start", "merge:written",
    "merge:positions-written", "merge:committed", "merge:adopted", "merge:urls-picked",
    "release:marker-deleted", "child:after-emit",   # (keep this one last)
]

CHILD = r'''
import json, os, signal, sys
import numpy as np
from crawler.config.schema import CacheConfig, DueConfig
from crawler.due.disk import DiskDUE

directory, start, total, background, point, nth, links, domain, buffer_size, flush_every = sys.argv[1:11]
start, total, nth, links, domain = int(start), int(total), int(nth), int(links), int(domain)
buffer_size, flush_every = int(buffer_size), int(flush_every)
hits = {"n": 0}

def hook(name):
    if name == point:
        hits["n"] += 1
        if hits["n"] == nth:
            os.kill(os.getpid(), signal.SIGKILL)

def batch(n):
    ids = np.random.default_rng(n).integers(0, domain, links)
    fps = (ids.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    return fps, [f"http://h{i % 7}.test/p/{i}" for i in ids.tolist()]

out = sys.stdout
def emit(urls):
    if urls:
        out.write("".join(f"E {u}\n" for u in urls))
        if point == "child:after-emit":   # the caller has the URLs; the DUE has not released them
            out.flush()
            hook(point)

cfg = DueConfig(cache=CacheConfig(size=16), buffer_size=buffer_size)
due = DiskDUE(directory, cfg, buckets=4, background=background == "1",
              fault_hook=hook if point != "-" else None)
out.write("R\n")
out.flush()
for n in range(start, total):
    emit(due.submit(*batch(n)))
    if n % flush_every == flush_every - 1:
        emit(due.flush())
    out.write(f"A {n}\n")
    out.flush()
emit(due.flush())
out.write("S " + json.dumps(due.stats()) + "\n")
out.flush()
due.close()
out.write("DONE\n")
out.flush()
'''


def batch_urls(n: int) -> list[str]:
    import numpy as np
    ids = np.random.default_rng(n).integers(0, DOMAIN, BATCH_LINKS)
    return [f"http://h{i % 7}.test/p/{i}" for i in ids.tolist()]


def run_child(directory: Path, start: int, background: bool, point: str, nth: int,
              kill_after_s: float | None) -> tuple[list[str], bool]:
    """Runs the child until it ends or is killed; returns its complete output lines and whether it finished."""
    env = crawler_env()
    cmd = [sys.executable, "-c", CHILD, str(directory), str(start), str(BATCHES), "1" if background else "0",
           point, str(nth), str(BATCH_LINKS), str(DOMAIN), str(BUFFER_SIZE), str(FLUSH_EVERY)]
    # Unbuffered: `readline` below must take only the first line. A buffered reader
    # would read ahead, and `communicate` reads the pipe itself, so whatever the
    # reader had taken past "R" (acks, emitted URLs, the stats) was silently dropped.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO, bufsize=0)
    head = b""
    try:
        if kill_after_s is not None:
            head = proc.stdout.readline()        # "R": recovery is done, the feeding starts
            time.sleep(kill_after_s)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    text = (head + out).decode()
    lines = text.split("\n")
    complete = lines[:-1]                    # the last piece is cut off unless it ended in "\n"
    finished = "DONE" in complete
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"child failed ({proc.returncode}): {err.decode()[-2000:]}")
    return complete, finished


@pytest.mark.slow
@pytest.mark.parametrize("background", [False, True], ids=["sync", "background"])
def test_sigkill_at_random_moments_loses_nothing(tmp_path: Path, background: bool) -> None:
    rng = random.Random(1234 + background)
    points = POINTS[:-1]
    rng.shuffle(points)                 # every point gets its turn, in a random order,
    points.insert(0, "child:after-emit")  # this one first, so a duplicate surely happens
    directory = tmp_path / "due"
    emitted: Counter[str] = Counter()
    acked: set[int] = set()
    next_batch = 0
    crashes = 0
    stats = None
    for round_no in range(ROUNDS_LIMIT):
        last = round_no == ROUNDS_LIMIT - 1
        if last:
            point, nth, kill_after = "-", 0, None           # let it finish
        elif round_no % 3 == 2:
            point, nth, kill_after = "-", 0, rng.uniform(0, MAX_KILL_DELAY_S)   # at a random time
        else:
            point, nth, kill_after = points[round_no % len(points)], rng.randint(1, MAX_NTH), None
        lines, finished = run_child(directory, next_batch, background, point, nth, kill_after)
        assert not lines or lines[0] == "R", lines[:3]
        for line in lines:
            kind, _, rest = line.partition(" ")
            if kind == "E":
                emitted[rest] += 1
            elif kind == "A":
                # Acks come in order from the first batch given: a gap means this
                # harness dropped output, which would look like the DUE losing URLs.
                assert int(rest) == next_batch, (rest, next_batch)
                acked.add(int(rest))
                next_batch = int(rest) + 1
            elif kind == "S":
                stats = json.loads(rest)
        if finished:
            break
        crashes += 1
    else:
        pytest.fail("the child never finished")
    assert stats is not None
    assert acked == set(range(BATCHES))
    submitted = {u for n in range(BATCHES) for u in batch_urls(n)}
    assert set(emitted) == submitted, "accepted URLs were lost" if submitted - set(emitted) else "unknown URLs"
    twice = sum(count - 1 for count in emitted.values())
    assert twice <= stats["duplicates_emitted"], (twice, stats["duplicates_emitted"])
    assert stats["duplicates_emitted"] <= crashes * (BUFFER_SIZE + BATCH_LINKS)
    assert crashes >= 3, "the kills did not happen"
    assert twice > 0, "no crash fell between a hand-out and its release"

"""The benches say which kernels they measure, and refuse to pass the pure-Python twins off as the crawler.

Run as a user runs them (`python bench/cache_bench.py ...`, a child process),
with the compiled kernels forced off as a machine without a compiler would
have them.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.fixtures import REPO

from crawler._native import PURE_PYTHON_ENV

SMALL = ["--requests", "2000", "--capacity", "64", "--single", "500", "--repeat", "1", "--policies", "clock",
         "--no-baselines"]
RUN_TIMEOUT_S = 120


def run_bench(*args: str, pure: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, **{PURE_PYTHON_ENV: "1" if pure else "0"})
    return subprocess.run([sys.executable, str(REPO / "bench" / "cache_bench.py"), *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def test_a_bench_on_the_python_twins_refuses_before_measuring():
    proc = run_bench(*SMALL, pure=True)
    assert proc.returncode == 3, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "kernels: the pure-Python twins" in first and PURE_PYTHON_ENV in first
    assert "--allow-python-kernels" in proc.stderr
    assert len(proc.stdout.splitlines()) == 1                   # no figure was printed


def test_a_bench_measures_the_twins_when_asked_and_says_so():
    proc = run_bench(*SMALL, "--allow-python-kernels", pure=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "kernels: the pure-Python twins" in lines[0] and len(lines) > 1

"""The crawler command's process environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.fixtures import REPO

PROBE = ("import os, crawler.cli, numpy; "
         "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))")


def probe(**env: str) -> list[str]:
    full = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    full.update(env, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.split()


def test_a_crawler_process_starts_no_blas_threads() -> None:
    """numpy's OpenBLAS thread pool spins CPU at start; the crawler never calls BLAS."""
    if not Path("/proc/self/task").is_dir():
        import pytest
        pytest.skip("no /proc/self/task to count threads on this system")
    assert probe() == ["1", "1"]                          # the main thread only
    assert probe(OPENBLAS_NUM_THREADS="2")[0] == "2"      # an operator's setting wins

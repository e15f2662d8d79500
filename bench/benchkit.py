"""What every bench does first: measure the crawler as installed, and say which kernels it measures.

A bench run from a source tree used to put the tree first on `sys.path`, so
after `pip install .` it measured the tree's pure-Python twins (no extension
built there) and printed their figures as the crawler's. Now the installed
package comes first (an editable install is this tree anyway) and the tree
is only the fallback, and the first line of every bench says which kernels
run; a bench whose figures depend on them refuses to run on the twins unless
`--allow-python-kernels` is given (the twins are 10-50x slower: their figures
are not the crawler's).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def use_installed_crawler() -> None:
    """The installed `crawler` first; this tree after site-packages (for `tests.*` helpers, and as the
    fallback when the crawler is not installed)."""
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))


def add_kernels_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-python-kernels", action="store_true",
                        help="measure even if the compiled kernels are missing (the figures are then the "
                             "pure-Python twins', 10-50x slower, not the crawler's)")


def check_kernels(args: argparse.Namespace) -> str:
    """Print which kernels run; exit (status 3) on the twins unless allowed. Returns 'compiled' or 'python'."""
    import crawler
    from crawler._native import KERNELS, PYTHON, kernels_line
    print(f"crawler {crawler.__version__} from {Path(crawler.__file__).parent}; {kernels_line()}", flush=True)
    if KERNELS == PYTHON and not getattr(args, "allow_python_kernels", False):
        print("refusing to measure the pure-Python twins as the crawler: build the extension (see above), or "
              "pass --allow-python-kernels to measure them knowingly", file=sys.stderr, flush=True)
        raise SystemExit(3)
    return KERNELS


async def loop_held(call: Callable[[], object], tick_s: float = 0.001, settle_s: float = 0.0) -> tuple[float, float]:
    """(seconds `call()` took, awaited if it returns an awaitable; the longest gap between the ticks of a
    `tick_s` ticker on the same loop meanwhile): how long the call held the event loop, the figure the
    stall benches report. `settle_s` lets the ticker run before the call starts."""
    longest = 0.0
    stop = False

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not stop:
            await asyncio.sleep(tick_s)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(settle_s)
    t0 = time.perf_counter()
    result = call()
    if inspect.isawaitable(result):
        await result
    took = time.perf_counter() - t0
    stop = True
    await task
    return took, longest


def cluster_config(tmp: Path, seeds: str, nodes: int, workers: int, name: str, secret_env: str) -> dict:
    """A cluster of `nodes` on free loopback ports, node i fetching from 127.0.0.(i+1), crawling the test
    web behind `*.web.test` (DNS overrides: no resolver needed), data under tmp/data/node-I, no progress lines."""
    from crawler.ports import free_ports
    ports = free_ports(2 * nodes)
    return {
        "cluster": {"name": name, "secret_env": secret_env, "nodes": [
            {"id": i, "host": "127.0.0.1", "peer_port": ports[2 * i], "metrics_port": ports[2 * i + 1],
             "source_address": f"127.0.0.{i + 1}"} for i in range(nodes)]},
        "crawl": {"seeds_file": seeds, "data_dir": str(tmp / "data" / "node-{node}")},
        "workers": workers,
        "fetch": {"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
        "metrics": {"progress_interval_s": 0},
    }


def start_node(config_path: Path, node: int, tmp: Path, secret_env: str, secret: str) -> subprocess.Popen:
    """`crawler run --node I` as its own process (this tree's crawler), its output appended to
    tmp/node-I.stdout and .stderr."""
    env = dict(os.environ, **{secret_env: secret})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    with (tmp / f"node-{node}.stderr").open("ab") as err, (tmp / f"node-{node}.stdout").open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "crawler", "run", "-c", str(config_path),
                                 "--node", str(node)], stdout=out, stderr=err, env=env)

"""`crawler cluster -c FILE`: run every node of the file that lives on this machine.

Each node is its own process running `crawler run -c FILE --node ID`, so a
node's crash is its own and each gets a core; the nodes are forked from one
launcher process that has imported the crawler once (crawler/launcher.py).
The supervisor forwards SIGTERM/SIGINT to the nodes, prints one combined
progress line read from the nodes' /metrics endpoints, and when every node
has exited prints each node's summary line and, last, one cluster summary
line with the totals.
It exits non-zero if any node failed.

A node that fails stops the crawl: the others could never finish it (the
termination check waits for every node, and the failed node's hosts would
not be crawled), so they are sent SIGTERM and stop cleanly with their state
saved; running the same command again resumes all of them. On Linux the
nodes also get SIGTERM if the supervisor itself dies, so none is orphaned.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from crawler.config import Config, load
from crawler.metrics.rate import Rate

PAGES_METRIC = "crawler_pages_total"
LOOKUPS_METRIC = "crawler_cache_lookups_total"
FRONTIER_METRIC = "crawler_frontier_urls"


def is_local_address(host: str) -> bool:
    """True when this machine can bind `host` (loopback or one of its own addresses)."""
    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    for family, kind, proto, _, addr in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.bind((addr[0], 0))
                return True
        except OSError:
            continue
    return False


PR_SET_PDEATHSIG = 1      # prctl(2) option: a signal for this process when its parent dies
NODE_LINE_LIMIT = 1 << 20  # longest line read from a node's standard output (its summary)


def die_with_parent() -> Callable[[], None] | None:
    """A function for the child to run before exec: SIGTERM when the supervisor dies (Linux;
    None elsewhere). libc is loaded here, in the parent: loading it after fork could deadlock."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).prctl

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    return arm


class NodeProcess:
    """A node the launcher forked (crawler/launcher.py): its pid and exit code come from the
    launcher's report, its standard output through a pipe of ours."""

    def __init__(self, node_id: int, stdout: asyncio.StreamReader) -> None:
        self.node_id = node_id
        self.stdout = stdout
        self.pid: int | None = None
        self.returncode: int | None = None
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def send_signal(self, sig: int) -> None:
        if self.pid is not None and self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def exited(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._exited.set_result(code)

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)


async def launch_nodes(config_path: str, node_ids: list[int], env: dict[str, str]
                       ) -> tuple[asyncio.Task, list[NodeProcess]]:
    """Start the launcher and wait until it has forked every node (or died trying).

    Each node's standard output is a pipe read here; the launcher's own is its report
    (`started`/`exited` lines), read by the returned task, which ends when the launcher
    has exited. Nodes the launcher never reported as exited (it was killed) get code 1.
    """
    loop = asyncio.get_running_loop()
    procs, writers = [], []
    try:
        for node_id in node_ids:
            r, w = os.pipe()
            writers.append(w)
            reader = asyncio.StreamReader(limit=NODE_LINE_LIMIT)
            await loop.connect_read_pipe(functools.partial(asyncio.StreamReaderProtocol, reader),
                                         os.fdopen(r, "rb", buffering=0))
            procs.append(NodeProcess(node_id, reader))
        args = [sys.executable, "-m", "crawler.launcher", "-c", config_path]
        for node_id, w in zip(node_ids, writers):
            args += ["--node", f"{node_id}:{w}"]
        launcher = await asyncio.create_subprocess_exec(
            *args, "--progress-interval", "0", stdout=asyncio.subprocess.PIPE, env=env,
            preexec_fn=die_with_parent(), pass_fds=writers)
    finally:
        for w in writers:
            os.close(w)                      # the launcher (and each node) holds its own copy
    by_id = {p.node_id: p for p in procs}
    all_started = loop.create_future()

    async def follow() -> None:
        assert launcher.stdout is not None
        async for raw in launcher.stdout:
            word, node_id, value = (raw.decode(errors="replace").split() + ["", "", ""])[:3]
            proc = by_id.get(int(node_id)) if node_id.isdigit() else None
            if proc is None:
                continue
            if word == "started":
                proc.pid = int(value)
                if all(p.pid is not None for p in procs) and not all_started.done():
                    all_started.set_result(None)
            elif word == "exited":
                proc.exited(int(value))
        code = await launcher.wait()
        for p in procs:
            if p.returncode is None:
                print(f"cluster: the launcher exited with code {code} before node {p.node_id} did",
                      file=sys.stderr, flush=True)
                p.exited(1)
        if not all_started.done():
            all_started.set_result(None)

    launcher_task = asyncio.create_task(follow(), name="launcher")
    await asyncio.wait([all_started, launcher_task], return_when=asyncio.FIRST_COMPLETED)
    return launcher_task, procs


@dataclass
class Child:
    node_id: int
    proc: NodeProcess
    metrics_url: str | None
    stdout: list[str] = field(default_factory=list)
    pages: int = 0
    frontier: int = 0
    lookups: dict = field(default_factory=dict)     # (cache, result) -> count


def _saved_summary(config: Config, node_id: int, code: int | None) -> dict | None:
    """A node that printed no summary (killed, or its launcher was): its totals as of its last checkpoint."""
    from crawler.node import saved_summary
    data_dir = config.crawl.data_dir.replace("{node}", str(node_id))
    summary = saved_summary(node_id, data_dir, f"no summary (exit code {code}): totals of its last checkpoint")
    if summary is not None:
        print(f"cluster: node {node_id} printed no summary (exit code {code}); its totals are those it saved at "
              f"its last checkpoint in {data_dir}", file=sys.stderr, flush=True)
    return summary


def merge_summaries(summaries: list[dict], wall_s: float) -> dict:
    """The cluster's totals; hit rates are recomputed from summed hits and lookups."""
    total: dict[str, Any] = {"nodes": len(summaries), "pages": 0, "fetches": 0, "bytes": 0, "errors": 0,
                             "robots_denied": 0, "worker_errors": 0, "peer_bytes_sent": 0, "urls_received": 0,
                             "cpu_s": 0.0}
    lookups: dict[str, list[int]] = {}
    for s in summaries:
        for key in total:
            if key != "nodes":
                total[key] += s.get(key, 0)
        for name, (hits, misses) in s.get("cache_lookups", {}).items():
            acc = lookups.setdefault(name, [0, 0])
            acc[0] += hits
            acc[1] += misses
    total["cache_hit_rates"] = {name: round(h / (h + m), 4) if h + m else None for name, (h, m) in lookups.items()}
    total["cpu_s"] = round(total["cpu_s"], 3)
    total["wall_s"] = round(wall_s, 3)
    total["pages_per_s"] = round(total["pages"] / wall_s, 2) if wall_s > 0 else 0.0
    total["stop"] = sorted({s.get("stop", "") for s in summaries})
    return total


async def _scrape(session: aiohttp.ClientSession, child: Child) -> None:
    """Refresh a child's pages, frontier size and cache lookups from its /metrics."""
    if child.metrics_url is None:
        return
    try:
        async with session.get(child.metrics_url, timeout=aiohttp.ClientTimeout(total=1)) as resp:
            text = await resp.text()
    except (TimeoutError, aiohttp.ClientError, OSError):
        return
    from prometheus_client.parser import text_string_to_metric_families

    pages, lookups = 0.0, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == PAGES_METRIC and sample.labels.get("kind") == "page":
                pages += sample.value
            elif sample.name == LOOKUPS_METRIC:
                lookups[(sample.labels["cache"], sample.labels["result"])] = sample.value
            elif sample.name == FRONTIER_METRIC:
                child.frontier = int(sample.value)
    child.pages, child.lookups = int(pages), lookups


def _hit_rates(children: list[Child]) -> str:
    sums: dict[str, list[float]] = {}
    for c in children:
        for (cache, result), n in c.lookups.items():
            acc = sums.setdefault(cache, [0.0, 0.0])
            acc[0 if result == "hit" else 1] += n
    return ", ".join(f"{cache} {100 * h / (h + m):.1f}%" for cache, (h, m) in sorted(sums.items()) if h + m) or "-"


async def run_cluster(config_path: str, *, progress_interval_s: float | None = None,
                      extra_env: dict[str, str] | None = None, out=sys.stdout,
                      on_started: Callable[[dict[int, int]], None] | None = None) -> int:
    """Run every node of the file that lives on this machine; returns 0 when all of them did.

    `on_started` gets {node id: pid} once every node runs (a benchmark uses it to give
    each node its own CPU)."""
    config: Config = load(config_path)
    local = [n for n in config.cluster.nodes if is_local_address(n.host)]
    if not local:
        print(f"crawler cluster: no node of {config_path} lives on this machine "
              f"(hosts: {sorted({n.host for n in config.cluster.nodes})})", file=sys.stderr)
        return 2
    interval = config.metrics.progress_interval_s if progress_interval_s is None else progress_interval_s
    env = dict(os.environ, **(extra_env or {}))
    package_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    started = time.monotonic()
    launcher, procs = await launch_nodes(str(config_path), [n.id for n in local], env)
    children = [Child(n.id, proc, (f"http://{config.metrics.bind}:{n.metrics_port}/metrics"
                                   if config.metrics.enabled and n.metrics_port else None))
                for n, proc in zip(local, procs)]
    print(f"cluster: started {len(children)} node(s): " +
          ", ".join(f"{c.node_id} (pid {c.proc.pid})" for c in children), file=sys.stderr, flush=True)
    if on_started is not None:
        try:
            on_started({c.node_id: c.proc.pid for c in children if c.proc.pid is not None})   # all are forked
        except Exception as exc:            # noqa: BLE001 - the nodes run on; this process must wait for them
            print(f"cluster: on_started failed: {exc!r}", file=sys.stderr, flush=True)

    loop = asyncio.get_running_loop()

    def forward(sig: signal.Signals) -> None:
        for c in children:
            if c.proc.returncode is None:
                c.proc.send_signal(sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, forward, sig)

    async def collect(child: Child) -> None:
        assert child.proc.stdout is not None
        async for raw in child.proc.stdout:
            child.stdout.append(raw.decode(errors="replace").rstrip("\n"))
        code = await child.proc.wait()
        others = [c for c in children if c.proc.returncode is None]
        if code != 0 and others:
            print(f"cluster: node {child.node_id} exited with code {code}; stopping the other nodes "
                  f"(their state is saved: run the same command again to resume)", file=sys.stderr, flush=True)
            for c in others:
                c.proc.send_signal(signal.SIGTERM)

    async def progress() -> None:
        rate = Rate(started)
        async with aiohttp.ClientSession() as session:
            while True:
                await asyncio.sleep(interval)
                for c in children:
                    if c.metrics_url and c.proc.returncode is None:
                        await _scrape(session, c)
                total = sum(c.pages for c in children)
                running = sum(c.proc.returncode is None for c in children)
                per_node = " ".join(f"{c.node_id}:{c.pages}" for c in children)
                print(f"cluster: {total} pages ({rate.text(total, time.monotonic())}), "
                      f"frontier {sum(c.frontier for c in children)} "
                      f"URLs, cache hits: {_hit_rates(children)}, {running}/{len(children)} nodes running "
                      f"[{per_node}]", file=sys.stderr, flush=True)

    reporter = asyncio.create_task(progress()) if interval else None
    try:
        await asyncio.gather(*(collect(c) for c in children))
        await launcher
    finally:
        if reporter is not None:
            reporter.cancel()
            await asyncio.gather(reporter, return_exceptions=True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)

    summaries, failed = [], []
    for c in children:
        summary = None
        if c.stdout:
            try:
                summary = json.loads(c.stdout[-1])
            except json.JSONDecodeError:
                summary = None
        if c.proc.returncode != 0 or summary is None:
            failed.append(c.node_id)
        if summary is None:
            summary = _saved_summary(config, c.node_id, c.proc.returncode)
        if summary is not None:
            summaries.append(summary)
            print(json.dumps(summary, sort_keys=True), file=out)
    cluster = merge_summaries(summaries, time.monotonic() - started)
    cluster["failed_nodes"] = failed
    print(json.dumps(cluster, sort_keys=True), file=out, flush=True)
    return 1 if failed else 0

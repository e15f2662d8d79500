"""Starts the nodes `crawler cluster` runs on this machine, forked from one interpreter.

Why. A node's interpreter start-up and imports cost ~0.7-1 CPU-s (aiohttp
builds its TLS contexts at import; numpy; prometheus_client), as much as
crawling several hundred pages. One interpreter per node paid that once per
node: with three nodes on a machine, twice more than one node pays for the
same web (bench/cluster_bench.py). The launcher pays it once: it imports the
crawler, then forks each node, which runs exactly `crawler run -c FILE
--node ID` and shares the imported code's memory with the others until it
writes to it (copy-on-write).

Fork is safe here because the launcher forks before it has any thread or
event loop (it checks): a node starts its own loop, threads and sockets.

    python -m crawler.launcher -c FILE --node ID:FD [--node ID:FD ...] [--progress-interval S]

Node ID's standard output goes to file descriptor FD (inherited from the
supervisor: its pipe for that node); standard error is shared. The
launcher's own standard output is a line protocol for the supervisor:

    started <node> <pid>
    exited <node> <exit code>           (-N for a node signal N ended, as subprocess says it)

A node names itself `crawler-node-ID` (Linux: `ps -o comm`, `top`; `crawler-nID`
from node 100 on, for the kernel's 15 bytes).
SIGTERM and SIGINT are passed on to every node still running; the launcher
exits when all of them have (code 0; it is the supervisor's job to judge the
nodes' codes). Each node gets SIGTERM if the launcher dies, and the launcher
gets it if the supervisor does (`crawler.cluster.die_with_parent`), so no
node outlives a killed supervisor.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable

_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
PR_SET_NAME = 15          # prctl(2) option: the calling thread's name (a process's main thread: its comm)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m crawler.launcher", description=__doc__.split("\n\n")[0])
    p.add_argument("-c", "--config", required=True)
    p.add_argument("--node", action="append", required=True, metavar="ID:FD",
                   type=lambda s: tuple(int(x) for x in s.split(":", 1)))
    p.add_argument("--progress-interval", type=float, default=None)
    return p.parse_args(argv)


def process_namer() -> Callable[[bytes], None] | None:
    """A function that names this process (Linux: what `ps -o comm`, `top` and /proc/PID/comm
    show; 15 bytes), or None elsewhere. A forked node would otherwise show as the launcher."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def name(title: bytes) -> None:
        prctl(PR_SET_NAME, ctypes.c_char_p(title), 0, 0, 0)
    return name


def node_name(node_id: int) -> str:
    """The process name of a node: at most 15 bytes, the kernel's limit."""
    name = f"crawler-node-{node_id}"
    return name if len(name) <= 15 else f"crawler-n{node_id}"


def node_argv(config: str, node_id: int, progress_interval: float | None) -> list[str]:
    """The `crawler` command line a forked node runs."""
    argv = ["run", "-c", config, "--node", str(node_id)]
    return argv if progress_interval is None else argv + ["--progress-interval", str(progress_interval)]


def _run_node(node_id: int, argv: list[str], out_fd: int, other_fds: list[int], parent: int, arm, name) -> None:
    """In the forked child: become `crawler run`, then leave without running the launcher's
    cleanup (os._exit: the launcher's objects are not this process's to finalise)."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)     # blocked by the launcher around fork
        if arm is not None:
            arm()
            if os.getppid() != parent:          # the launcher died before the death signal was armed
                os._exit(1)
        if name is not None:
            name(node_name(node_id).encode())
        os.dup2(out_fd, 1)
        for fd in [out_fd, *other_fds]:
            os.close(fd)
        from crawler import cli
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:                       # noqa: BLE001 - reported, and the node's code says it failed
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # What every node needs, imported once (crawler.cli also sets OPENBLAS_NUM_THREADS before numpy).
    import crawler.node  # noqa: F401
    from crawler import cli  # noqa: F401
    from crawler.cluster import die_with_parent

    if threading.active_count() != 1:
        print(f"crawler launcher: {threading.active_count()} threads after imports; forking is not safe",
              file=sys.stderr)
        return 70
    arm, name = die_with_parent(), process_namer()
    me = os.getpid()
    children: dict[int, int] = {}               # pid -> node id

    def forward(signum: int, _frame) -> None:
        for pid in children:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for i, (node_id, fd) in enumerate(args.node):
        sys.stdout.flush()
        sys.stderr.flush()
        # A stop signal waits until the new node is in `children` (then it is passed on to it
        # too); the child resets the handlers before it lets signals in.
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        pid = os.fork()
        if pid == 0:
            _run_node(node_id, node_argv(args.config, node_id, args.progress_interval), fd,
                      [f for _, f in args.node[i + 1:]], me, arm, name)     # earlier nodes' are closed already
        children[pid] = node_id
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        os.close(fd)
        print(f"started {node_id} {pid}", flush=True)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        node_id = children.pop(pid, None)
        if node_id is not None:
            code = os.waitstatus_to_exitcode(status)
            print(f"exited {node_id} {code}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

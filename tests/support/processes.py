"""Child processes of a test: crawler nodes and the daemons it runs against.

A crawler started through here has this checkout first on PYTHONPATH, so it
runs the code under test, not an installed copy. Children are stopped by
their own PID (SIGTERM, then SIGKILL if they do not go), never by name.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from tests.support.fixtures import REPO

SBIN_DIRS = "/usr/sbin:/usr/local/sbin"  # where distributions put daemons when PATH lacks them
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
POLL_S = 0.02


def find_binary(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=SBIN_DIRS)


def require_binary(name: str, package: str) -> str:
    """The path of `name`, or skip the test naming the Debian package that provides it."""
    path = find_binary(name)
    if path is None:
        reason = f"{name} not installed (Debian package {package}; scripts/test.sh installs it)"
        print(reason)
        pytest.skip(reason)
    return path


def crawler_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment with the checkout first on PYTHONPATH, plus `extra`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


def run_crawler(args: list[str], *, timeout_s: float, env: dict | None = None,
                cwd: Path | None = None) -> tuple[int, list[str], str]:
    """Run `python -m crawler ARGS` to completion; (exit code, stdout lines, stderr)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "crawler", *args], capture_output=True, text=True,
                              timeout=timeout_s, env=crawler_env(env), cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        # subprocess shows only a clipped repr of what was read; the end of stderr says why.
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise AssertionError(f"crawler {' '.join(args)} did not end within {timeout_s} s; "
                             f"end of its stderr:\n{err[-6000:]}") from None
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def start_crawler(args: list[str], *, stdout: int | IO | None, stderr: int | IO | None,
                  env: dict[str, str] | None = None) -> subprocess.Popen:
    """`python -m crawler ARGS` as a child that keeps running; stop it with `stop_process` or a signal."""
    return subprocess.Popen([sys.executable, "-m", "crawler", *args], stdout=stdout, stderr=stderr,
                            env=crawler_env(env))


def stop_process(proc: subprocess.Popen | None) -> None:
    """SIGTERM that one child by PID, SIGKILL if it does not go."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)


def accepting(proc: subprocess.Popen, port: int, host: str = "127.0.0.1",
              timeout_s: float = START_TIMEOUT_S) -> bool:
    """Poll until `host:port` accepts a connection (True); False once `proc` has ended or `timeout_s` passed.

    The caller decides what a server that never came up means (skip, fail, raise) and says why.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(POLL_S)
    return False


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, poll_s: float = POLL_S) -> None:
    """Poll `predicate` until it holds; fail the test naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll_s)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


def start_node(config: Path, log_path: Path) -> subprocess.Popen:
    """`crawler run -c CONFIG` in the background, its stderr appended to `log_path`."""
    with log_path.open("ab") as err:
        return start_crawler(["run", "-c", str(config)], stdout=subprocess.DEVNULL, stderr=err)

"""Run `python -m crawler.testweb` as a child process (tests, benchmarks, the demo).

A crawl under test should not share a CPU or an event loop with the web it
crawls, so tests and benchmarks start the server as its own process and wait
for its one JSON line on stdout:

    with TestWebProcess(out_dir, ["--hosts", "20", "--pages", "500"]) as tw:
        tw.info["port"], tw.manifest(), tw.requests()

`stop()` sends SIGTERM to that child's PID (and SIGKILL if it does not exit in
time); the server stops cleanly and closes its access log.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from .audit import Request, read_access_log
from .manifest import WebManifest

READY_TIMEOUT_S = 120.0
"""Longest wait for the ready line (a 50k-page web builds in a few seconds)."""
STOP_TIMEOUT_S = 15.0
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class TestWebProcess:
    """A `crawler testweb` child process."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, out_dir: str | Path, args: list[str] | tuple[str, ...] = (), *,
                 python: str = sys.executable, ready_timeout_s: float = READY_TIMEOUT_S,
                 command_prefix: list[str] | tuple[str, ...] = ()) -> None:
        self.out_dir = Path(out_dir)
        self.args = list(args)
        self.python = python
        self.ready_timeout_s = ready_timeout_s
        self.command_prefix = list(command_prefix)   # e.g. ["ip", "netns", "exec", NS] to serve inside a namespace
        self.proc: subprocess.Popen | None = None
        self.info: dict = {}

    def start(self) -> dict:
        """Start the child and return its ready line (port, seeds, manifest, access_log, pid)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
        stderr = open(self.out_dir / "testweb.stderr.log", "ab")
        try:
            self.proc = subprocess.Popen(
                [*self.command_prefix, self.python, "-m", "crawler.testweb", "--out", str(self.out_dir), *self.args],
                stdout=subprocess.PIPE, stderr=stderr, env=env)
        finally:
            stderr.close()
        line = self._read_line(self.ready_timeout_s)
        try:
            self.info = json.loads(line)
        except json.JSONDecodeError:
            self.stop()
            raise RuntimeError(f"testweb did not start: {line!r}; see {self.out_dir / 'testweb.stderr.log'}") from None
        return self.info

    def _read_line(self, timeout_s: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        buf = b""
        try:
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not sel.select(0):
                    break
                if sel.select(min(left, 0.5)):
                    chunk = os.read(self.proc.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    buf += chunk
        finally:
            sel.close()
        return buf.split(b"\n", 1)[0].decode(errors="replace")

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM the child (by PID), wait, SIGKILL if needed; returns its exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout_s)
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def manifest(self) -> WebManifest:
        return WebManifest.load(self.info["manifest"])

    def requests(self) -> list[Request]:
        return read_access_log(self.info["access_log"])

    def __enter__(self) -> TestWebProcess:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

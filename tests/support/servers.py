"""Real servers the integration tests start and stop by PID: dnsmasq and nginx.

Each is a Debian package that `scripts/test.sh` installs; where the binary is
absent, the fixture skips the test and prints why.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest
from tests.support.ports import free_udp_port
from tests.support.processes import POLL_S, START_TIMEOUT_S, require_binary, stop_process


class Dnsmasq:
    """A dnsmasq child answering on a loopback UDP port from its command line, logging every query.

    `records` are extra dnsmasq options such as "--address=/web.test/127.0.0.1"
    or "--host-record=a.test,127.0.0.5"; names under `local_domain` that are not
    answered get NXDOMAIN, and nothing is ever forwarded upstream.
    """

    def __init__(self, tmp: Path, records: list[str], *, local_domain: str = "test", ttl_s: int = 1) -> None:
        self.binary = require_binary("dnsmasq", "dnsmasq-base")
        self.port = free_udp_port()
        self.log_path = tmp / "dnsmasq.log"
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.args = [
            self.binary, "--no-daemon", f"--port={self.port}", "--listen-address=127.0.0.1", "--bind-interfaces",
            "--no-resolv", "--no-hosts", "--conf-file=/dev/null", f"--pid-file={tmp / 'dnsmasq.pid'}",
            "--user=root", "--group=root", "--log-queries", "--log-facility=-", "--cache-size=0",
            f"--local-ttl={ttl_s}", f"--local=/{local_domain}/", *records,
        ]

    @property
    def nameserver(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Dnsmasq:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while b"started" not in self.log_path.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.skip(f"dnsmasq did not start: {self.log_path.read_text(errors='replace')[-500:]}")
            time.sleep(POLL_S)
        return self

    def stop(self) -> None:
        stop_process(self.proc)
        if self._log is not None:
            self._log.close()
            self._log = None

    def query_lines(self) -> list[str]:
        return [line for line in self.log_path.read_text(errors="replace").splitlines() if "query[" in line]

    def queries(self, name: str) -> int:
        """How many queries for `name` dnsmasq has logged."""
        return sum(1 for line in self.query_lines() if f"] {name} from" in line)

    def __enter__(self) -> Dnsmasq:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class Nginx:
    """nginx in the foreground from a generated config; stopped by its PID."""

    def __init__(self, command: list[str], port: int) -> None:
        self.command = command
        self.port = port
        self.proc: subprocess.Popen | None = None

    def start(self) -> Nginx:
        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else "timeout"
        self.stop()
        raise RuntimeError(f"nginx did not start: {err}")

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

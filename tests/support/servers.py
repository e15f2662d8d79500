"""Real servers the tests start and stop by PID: dnsmasq, nginx, tinyproxy and microsocks.

Each is a Debian package that `scripts/test.sh` installs; where the binary is
absent, the test is skipped and says why.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest
from tests.support.ports import free_port, free_udp_port
from tests.support.processes import POLL_S, START_TIMEOUT_S, accepting, require_binary, stop_process

TINYPROXY_OUT = "127.0.0.3"                 # where tinyproxy's connections to targets come from
MICROSOCKS_OUT = "127.0.0.4"                # where microsocks' connections to targets come from
PROXY_CLIENT = "127.0.0.1"                  # the one address tinyproxy serves


def wait_for_port(proc: subprocess.Popen, port: int, what: str, log: Path) -> None:
    """Until something accepts on 127.0.0.1:port; fails the test with the end of `log` if it never does."""
    if not accepting(proc, port):
        stop_process(proc)
        pytest.fail(f"{what} did not start: {log.read_text(errors='replace')[-500:]}")


class LoggedDaemon:
    """A daemon in the foreground, its output in a log file the test reads; stopped by its PID."""

    name = "daemon"

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self._log = None

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        return self.proc

    def _wait_for_line(self, marker: bytes, give_up: Callable[[str], NoReturn]) -> None:
        """Until the log holds `marker`; else stop and `give_up` (pytest.skip or pytest.fail) with its end."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while marker not in self.log_path.read_bytes():
            if self.proc is None or self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                give_up(f"{self.name} did not start: {self.log()[-500:]}")
            time.sleep(POLL_S)

    def stop(self) -> None:
        stop_process(self.proc)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self):
        raise NotImplementedError


class Dnsmasq(LoggedDaemon):
    """A dnsmasq child answering on a loopback UDP port from its command line, logging every query.

    `records` are extra dnsmasq options such as "--address=/web.test/127.0.0.1"
    or "--host-record=a.test,127.0.0.5"; names under `local_domain` that are not
    answered get NXDOMAIN, and nothing is ever forwarded upstream.
    """

    name = "dnsmasq"

    def __init__(self, tmp: Path, records: list[str], *, local_domain: str = "test", ttl_s: int = 1) -> None:
        super().__init__(tmp / "dnsmasq.log")
        self.binary = require_binary("dnsmasq", "dnsmasq-base")
        self.port = free_udp_port()
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
        self._spawn(self.args)
        self._wait_for_line(b"started", pytest.skip)
        return self

    def query_lines(self) -> list[str]:
        return [line for line in self.log_path.read_text(errors="replace").splitlines() if "query[" in line]

    def queries(self, name: str) -> int:
        """How many queries for `name` dnsmasq has logged."""
        return sum(1 for line in self.query_lines() if f"] {name} from" in line)


class Nginx:
    """nginx in the foreground from a generated config; stopped by its PID."""

    def __init__(self, command: list[str], port: int) -> None:
        self.command = command
        self.port = port
        self.proc: subprocess.Popen | None = None

    def start(self) -> Nginx:
        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if accepting(self.proc, self.port):
            return self
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else "timeout"
        self.stop()
        raise RuntimeError(f"nginx did not start: {err}")

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class Tinyproxy(LoggedDaemon):
    """tinyproxy (http://) from a config file in tmp, outgoing connections bound to TINYPROXY_OUT."""

    name = "tinyproxy"

    def __init__(self, tmp: Path, *, connect_ports: list[int] | None = None) -> None:
        super().__init__(tmp / "tinyproxy.log")
        self.binary = require_binary("tinyproxy", "tinyproxy")
        self.port = free_port()
        self.conf = tmp / "tinyproxy.conf"
        lines = [f"Port {self.port}", "Listen 127.0.0.1", f"Bind {TINYPROXY_OUT}", "Timeout 10",
                 f"Allow {PROXY_CLIENT}", "LogLevel Info", "MaxClients 20"]
        lines += [f"ConnectPort {p}" for p in connect_ports or []]      # none: CONNECT to any port
        self.conf.write_text("\n".join(lines) + "\n")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Tinyproxy:
        self._spawn([self.binary, "-d", "-c", str(self.conf)])
        self._wait_for_line(b"Starting main loop", pytest.fail)        # no probe: it would be a client
        return self

    def clients(self) -> int:
        """Connections tinyproxy has accepted."""
        return self.log().count("Connect (file descriptor")


class Microsocks(LoggedDaemon):
    """microsocks (SOCKS5) on a loopback port, outgoing connections bound to MICROSOCKS_OUT."""

    name = "microsocks"

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp / "microsocks.log")
        self.binary = require_binary("microsocks", "microsocks")
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"socks5h://127.0.0.1:{self.port}"

    def start(self) -> Microsocks:
        proc = self._spawn([self.binary, "-i", "127.0.0.1", "-p", str(self.port), "-b", MICROSOCKS_OUT])
        wait_for_port(proc, self.port, "microsocks", self.log_path)    # a bare probe logs nothing
        return self

    def connections(self) -> list[str]:
        """The targets microsocks connected to, as it logs them ('host:port')."""
        return [line.rsplit(" ", 1)[-1] for line in self.log().splitlines() if "connected to" in line]

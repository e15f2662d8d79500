"""A network namespace of a test's own, programs and HTTP reads inside it, and the host's state to compare.

Why: the project's network tests touch loopback or namespaces they create themselves, never the
host's network. A program that changes networking (podman with a bridge network: a bridge,
10.89.x.x addresses, ip_forward, netavark's iptables rules) runs inside `own_netns`, where all of
that lives and vanishes with the namespace. `host_network_state` is what such a program would have
changed on the host, taken before and after so a test can show it did not.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.support.processes import find_binary

NETNS_DIR = Path("/run/netns")
FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
COMMAND_TIMEOUT_S = 10.0
# One GET inside the namespace: a process of its own, since the test's own sockets are in the host's.
_GET = ("import sys, urllib.request\n"
        "with urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])) as r:\n"
        "    sys.stdout.buffer.write(r.read())\n")


def command_in(netns: str | None) -> list[str]:
    """Prefix that runs a program in `netns` (only its network: mounts stay the host's); none for None."""
    return [] if netns is None else ["nsenter", f"--net={NETNS_DIR / netns}"]


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


@contextlib.contextmanager
def own_netns(name: str) -> Iterator[str]:
    """A new network namespace `name` with loopback up for the block; deleted after it."""
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=COMMAND_TIMEOUT_S)


def http_get(url: str, timeout_s: float, netns: str | None = None) -> bytes:
    """The body of a GET of `url` from inside `netns` (from here for None); OSError when it fails."""
    if netns is None:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.read()
    proc = subprocess.run([*command_in(netns), sys.executable, "-c", _GET, url, str(timeout_s)],
                          capture_output=True, timeout=timeout_s + COMMAND_TIMEOUT_S)
    if proc.returncode != 0:
        raise OSError(f"GET {url} in {netns} failed: {proc.stderr.decode(errors='replace').strip()[-500:]}")
    return proc.stdout


def link_exists(link: str, netns: str | None = None) -> bool:
    """Whether network interface `link` exists in `netns` (in the host's namespace for None)."""
    where = [] if netns is None else ["-n", netns]
    return subprocess.run(["ip", *where, "link", "show", link], capture_output=True,
                          timeout=COMMAND_TIMEOUT_S).returncode == 0


def host_network_state() -> dict[str, str]:
    """The host's net.ipv4.ip_forward and its iptables rules (`iptables-save`, without comments and counters)."""
    save = find_binary("iptables-save") or "iptables-save"
    rules = subprocess.run([save], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=True).stdout
    rules = "\n".join(re.sub(r"\s*\[\d+:\d+\]", "", line) for line in rules.splitlines()
                      if line.strip() and not line.startswith("#"))
    return {"ip_forward": FORWARD.read_text().strip(), "iptables": rules}

"""Test hosts in network namespaces the test creates itself: an isolated switch and its hosts.

    ns "<prefix>-sw" holds a bridge; every host namespace gets a veth pair whose
    other end is a port of that bridge. The /24 used exists only inside these
    namespaces: none of them is linked to the machine's own network, so no
    packet can leave. `close()` deletes every namespace (their veths go with them).
"""

from __future__ import annotations

import os
import secrets
import subprocess

SUBNET = "10.213.77"        # inside the test's own namespaces only; never reachable from outside


class NetnsError(RuntimeError):
    pass


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if proc.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


def available() -> str | None:
    """None when namespaces can be made here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"cwp-{secrets.token_hex(3)}"
    try:
        _ip("netns", "add", probe)
    except (NetnsError, FileNotFoundError, subprocess.TimeoutExpired) as exc:
        return f"ip netns cannot be used here: {exc}"
    try:
        _ip("netns", "del", probe)
    except NetnsError:
        pass
    return None


class Switch:
    """A bridge in its own namespace plus named hosts, each in a namespace with one address."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.namespaces: list[str] = []
        self.hosts: dict[str, tuple[str, str]] = {}     # name -> (namespace, address)
        self.sw = self._netns("sw")
        _ip("-n", self.sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.sw, "link", "set", "br0", "up")

    def _netns(self, name: str) -> str:
        ns = f"cw{self.tag}-{name}"
        _ip("netns", "add", ns)
        self.namespaces.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        return ns

    def add_host(self, name: str, octet: int) -> tuple[str, str]:
        ns = self._netns(name)
        inside, port = f"eth-{name}"[:15], f"p{self.tag}{name}"[:15]
        _ip("link", "add", inside, "netns", ns, "type", "veth", "peer", "name", port, "netns", self.sw)
        _ip("-n", self.sw, "link", "set", port, "master", "br0")
        _ip("-n", self.sw, "link", "set", port, "up")
        addr = f"{SUBNET}.{octet}"
        _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", inside)
        _ip("-n", ns, "link", "set", inside, "up")
        self.hosts[name] = (ns, addr)
        return ns, addr

    def prefix(self, name: str) -> list[str]:
        """Command prefix that runs a program inside host `name`."""
        return ["ip", "netns", "exec", self.hosts[name][0]]

    def close(self) -> None:
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        self.namespaces.clear()

    def __enter__(self) -> Switch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

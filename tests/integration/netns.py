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
import time
from pathlib import Path

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

    def run_each(self, names: list[str], argv: list[str], env: dict[str, str], timeout_s: float) -> list[str]:
        """`argv` inside each host of `names` at once (each gets `--node I`, I its index); every one must exit
        0 within `timeout_s`; returns their standard outputs. Leftovers are killed by PID."""
        procs = [subprocess.Popen([*self.prefix(name), *argv, "--node", str(i)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env, text=True) for i, name in enumerate(names)]
        deadline = time.monotonic() + timeout_s
        outputs = []
        try:
            for p in procs:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
                assert p.returncode == 0, err[-3000:]
                outputs.append(out)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(timeout=10)
        return outputs

    def close(self) -> None:
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        self.namespaces.clear()

    def __enter__(self) -> Switch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def cluster_config(name: str, secret_env: str, nodes: list[tuple[str, str]], web_addr: str, seeds: str,
                   data_dir: Path) -> dict:
    """A cluster file for nodes on the switch's hosts (`nodes`: (namespace, address) each), every node on
    the same ports in its own namespace, fetching from its own address, the test web at `web_addr`."""
    return {"cluster": {"name": name, "secret_env": secret_env, "nodes": [
                {"id": i, "host": addr, "peer_port": 7400, "metrics_port": 9400, "source_address": addr}
                for i, (_, addr) in enumerate(nodes)]},
            "crawl": {"seeds_file": seeds, "data_dir": str(data_dir / "node-{node}")},
            "workers": 16,
            "fetch": {"dns": {"overrides": {"*.web.test": web_addr}}, "read_timeout_s": 2, "total_timeout_s": 10},
            "splitter": {"batch_ms": 50},
            "metrics": {"bind": "0.0.0.0", "progress_interval_s": 0}}

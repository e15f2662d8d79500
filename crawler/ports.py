"""Free TCP ports for local clusters (`crawler demo`, benchmarks, tests).

Asking the kernel for port 0 gives a port from its ephemeral range, the same
range it hands out as the local port of outgoing connections. Between
choosing such a port and a node binding it, one of the many connections a
crawl opens (to the web, to peers, a scraper's) can take it, and the node
cannot listen. Ports are therefore drawn below the ephemeral range, where
the kernel never allocates on its own, and checked free by binding them.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_LOW = 32768      # Linux's default when the range cannot be read
LOWEST_PORT = 10000                # below are well-known and commonly configured services
ATTEMPTS_PER_PORT = 200


def ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports that are free on `host` now and outside the ephemeral range.

    Falls back to kernel-chosen ports when the range leaves no room below it."""
    low, high = LOWEST_PORT, ephemeral_low()
    if high - low < 10 * count:
        return _kernel_ports(count, host)
    rng = random.SystemRandom()
    chosen: list[int] = []
    for _ in range(count * ATTEMPTS_PER_PORT):
        if len(chosen) == count:
            break
        port = rng.randrange(low, high)
        if port not in chosen and _bindable(host, port):
            chosen.append(port)
    if len(chosen) < count:
        raise OSError(f"no {count} free TCP ports found on {host} between {low} and {high}")
    return chosen


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _kernel_ports(count: int, host: str) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((host, 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()

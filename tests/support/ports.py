"""Free ports for the servers and nodes a test starts.

A port the kernel picks for port 0 comes from the ephemeral range, the range
it also hands out as the local port of outgoing connections (and of the
crawler's DNS queries): between the test choosing it and a server binding
it, a connection can take it. `crawler.ports` therefore draws ports below
that range; the tests use it too, for TCP and for UDP alike.
"""

from __future__ import annotations

import socket

from crawler.ports import free_port, free_ports

__all__ = ["free_port", "free_ports", "free_udp_port"]

UDP_ATTEMPTS = 50     # a port free for TCP is nearly always free for UDP; this bounds the bad luck


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port free on `host`, below the ephemeral range like `free_port`'s TCP ports."""
    for _ in range(UDP_ATTEMPTS):
        port = free_port(host)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        return port
    raise OSError(f"no free UDP port found on {host} in {UDP_ATTEMPTS} attempts")

"""Which node owns a host: `host_fp mod N` (Mercator) or rendezvous hashing.

Both key on the host fingerprint of `crawler.urls.host_fingerprint`, so every
node, the replay tool and outside scripts agree on ownership. Rendezvous
(highest random weight) moves only ~1/N of the hosts when a node is added.
"""

from __future__ import annotations

from collections.abc import Callable

from crawler.urls import host_fingerprint

_MASK = (1 << 64) - 1


def _mix64(x: int) -> int:
    """splitmix64 finaliser: a cheap, well-spread 64-bit mix for rendezvous weights."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK
    return x ^ (x >> 31)


def modulo_owner(host_fp: int, nodes: int) -> int:
    return host_fp % nodes


def rendezvous_owner(host_fp: int, nodes: int) -> int:
    best, best_w = 0, -1
    for node in range(nodes):
        w = _mix64(host_fp ^ _mix64(node + 1))
        if w > best_w:
            best, best_w = node, w
    return best


class Partitioner:
    """`owner(host)` with a bounded memo: a page's links share few hosts."""

    MEMO_LIMIT = 1 << 16

    def __init__(self, nodes: int, scheme: str = "modulo") -> None:
        if nodes < 1:
            raise ValueError("a cluster has at least one node")
        self.nodes = nodes
        self.scheme = scheme
        self._fn: Callable[[int, int], int] = {"modulo": modulo_owner, "rendezvous": rendezvous_owner}[scheme]
        self._memo: dict[str, int] = {}

    def owner(self, host: str) -> int:
        owner = self._memo.get(host)
        if owner is None:
            if len(self._memo) >= self.MEMO_LIMIT:
                self._memo.clear()
            owner = self._memo[host] = self._fn(host_fingerprint(host), self.nodes)
        return owner

"""Per-IP politeness: hosts that share an address share its wait and its one request in flight.

Virtual hosts on one server are one server to politeness. With per-IP
politeness on, the frontier tells this book which address a host resolved to
(`seen`), which host has a request in flight to it (`claim`), and when that
request ends (`release`). A host whose address is busy with another host is
BLOCKED until that host is released (the book names the hosts to wake); a host
whose address must still wait waits as long, whatever its own delay says.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Address:
    """One address: the host with a request in flight to it, when it may next be contacted, who waits."""
    busy: str | None = None
    next_ok: float = 0.0
    blocked: list[str] | None = None


class AddressBook:
    """The addresses of hosts with something in flight or a wait still running."""

    def __init__(self) -> None:
        self._addresses: dict[str, Address] = {}

    def not_before(self, ip: str, at: float) -> float:
        """`at`, or later if the address must wait longer (monotonic time)."""
        addr = self._addresses.get(ip)
        if addr is not None and addr.next_ok > at:
            return addr.next_ok
        return at

    def block_if_busy(self, ip: str, name: str) -> bool:
        """Whether another host has a request in flight to `ip`; if so `name` waits for its release."""
        addr = self._addresses.get(ip)
        if addr is None or addr.busy is None or addr.busy == name:
            return False
        if addr.blocked is None:
            addr.blocked = []
        addr.blocked.append(name)
        return True

    def claim(self, ip: str, name: str) -> None:
        """`name` has a request in flight to `ip` now."""
        self._addresses.setdefault(ip, Address()).busy = name

    def seen(self, ip: str, name: str, busy: bool) -> None:
        """`name` was found at `ip` (a fetch went there); `busy`: its request is still in flight."""
        addr = self._addresses.setdefault(ip, Address())
        if addr.busy is None and busy:
            addr.busy = name

    def release(self, ip: str, name: str, ready_at: float) -> list[str]:
        """`name`'s request to `ip` is done and it waits until `ready_at`: so does the address. Returns
        the hosts that were blocked on it (to be scheduled again)."""
        addr = self._addresses.get(ip)
        if addr is None:
            return []
        if addr.busy == name:
            addr.busy = None
        if ready_at > addr.next_ok:
            addr.next_ok = ready_at
        if not addr.blocked:
            return []
        blocked, addr.blocked = addr.blocked, None
        return blocked

    def forget(self, now: float) -> None:
        """Drop addresses nobody uses and whose wait is over (bounds the table to those that matter)."""
        idle = [ip for ip, a in self._addresses.items() if a.busy is None and not a.blocked and a.next_ok <= now]
        for ip in idle:
            del self._addresses[ip]

"""What a sender hands a receiver, as lines that travel in BATCH frames, and how a receiver stages them.

    <run> TAB <n> TAB H TAB <host as JSON>            a host that moves: politeness state, address, estimates
    <run> TAB <n> TAB Q TAB <host> TAB <seq> TAB <quality> TAB <URL>   one of its queued URLs, in order
    <run> TAB <n> TAB S TAB <URL>                     a URL of a moved host that was seen (fetched or refused)
    <run> TAB <n> TAB R TAB <robots.txt entry as JSON>  a moved host's robots.txt rules (the robots
                                                      cache's saved form), so its Crawl-delay holds and
                                                      the new owner does not fetch the file again
    <run> TAB <n> TAB T TAB <URL>                     a URL in transit (a spooled batch, a merge not yet queued):
                                                      the new owner's DUE decides whether it is new

A record holds no space: the peer protocol reads spaces as lineage separators
(three per URL), so the lineage's spaces travel as US (0x1f), which no
canonical URL holds (it is percent-encoded).
`n` numbers a sender's records to one receiver from 0; delivery is
at-least-once, so a receiver keeps one copy per number. Each batch is
appended to `resize/from-<sender>.log` and fsynced before it is ACKed: once a
sender has its ACKs, what it sent survives the receiver's crash. The
sender's DONE names its count; when every number is there the receiver
writes `from-<sender>.done` (with the operator's control settings the sender
passed along), and only then answers GOT.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crawler.frontier.handoff import HostHandoff
from crawler.fsutil import atomic_write

HOST, QUEUED, SEEN, TRANSIT, ROBOTS = "H", "Q", "S", "T", "R"


class RecordError(ValueError):
    """A staged line that is not a record of this format."""


SPACE, SPACE_IN_TRANSIT = " ", "\x1f"


def host_line(run: str, n: int, host: HostHandoff) -> str:
    header = json.dumps(host.header(), separators=(",", ":"), ensure_ascii=False)
    return f"{run}\t{n}\t{HOST}\t{header}".replace(SPACE, SPACE_IN_TRANSIT)


def queued_line(run: str, n: int, host: str, seq: int, quality: float, url: str) -> str:
    return f"{run}\t{n}\t{QUEUED}\t{host}\t{seq}\t{quality!r}\t{url}".replace(SPACE, SPACE_IN_TRANSIT)


def url_line(run: str, n: int, kind: str, url: str) -> str:
    return f"{run}\t{n}\t{kind}\t{url}".replace(SPACE, SPACE_IN_TRANSIT)


@dataclass
class Incoming:
    """Everything the senders handed this receiver, in their order."""
    hosts: dict[str, HostHandoff] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    transit: list[str] = field(default_factory=list)
    robots: list[dict] = field(default_factory=list)
    controls: list[dict] = field(default_factory=list)

    def add(self, kind: str, rest: str) -> None:
        if kind == QUEUED:
            name, seq, quality, url = rest.split("\t", 3)
            host = self.hosts.get(name)
            if host is None:
                host = self.hosts[name] = HostHandoff(name)
            host.entries.append((int(seq), float(quality), url))
        elif kind == HOST:
            header = HostHandoff.from_header(json.loads(rest))
            host = self.hosts.get(header.name)
            if host is not None:
                header.entries = host.entries
            self.hosts[header.name] = header
        elif kind == SEEN:
            self.seen.append(rest)
        elif kind == TRANSIT:
            self.transit.append(rest)
        elif kind == ROBOTS:
            self.robots.append(json.loads(rest))
        else:
            raise RecordError(f"unknown record kind {kind!r}")


class Staging:
    """A receiver's `resize/` directory: each sender's records and whether they are complete."""

    def __init__(self, directory: Path, run: str) -> None:
        self.directory = directory
        self.run = run
        directory.mkdir(parents=True, exist_ok=True)

    def _log(self, sender: int) -> Path:
        return self.directory / f"from-{sender}.log"

    def _done(self, sender: int) -> Path:
        return self.directory / f"from-{sender}.done"

    def append(self, sender: int, lines: Iterable[str]) -> None:
        """One batch from `sender`, durable when this returns (the ACK follows)."""
        data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
        fd = os.open(self._log(sender), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _records(self, sender: int) -> dict[int, tuple[str, str]]:
        """This run's records from `sender` by number (repeats of a resent batch kept once)."""
        out: dict[int, tuple[str, str]] = {}
        path = self._log(sender)
        if not path.exists():
            return out
        with path.open(encoding="utf-8", errors="surrogatepass") as f:
            for line in f:
                if not line.endswith("\n"):
                    break                             # torn by a crash before its fsync: resent
                run, n, kind, rest = line[:-1].replace(SPACE_IN_TRANSIT, SPACE).split("\t", 3)
                if run == self.run:
                    out[int(n)] = (kind, rest)
        return out

    def complete(self, sender: int) -> bool:
        path = self._done(sender)
        if not path.exists():
            return False
        return json.loads(path.read_text(encoding="utf-8")).get("run") == self.run

    def finish(self, sender: int, count: int, control: dict | None) -> bool:
        """The sender says it sent `count` records: True (and durable) when all of them are here."""
        if self.complete(sender):
            return True
        records = self._records(sender)
        if len(records) != count or (count and max(records) != count - 1):
            return False
        atomic_write(self._done(sender), json.dumps({"run": self.run, "records": count, "control": control}))
        return True

    def incoming(self, senders: Iterable[int]) -> Incoming:
        """What the complete senders handed over, each sender's records in order."""
        result = Incoming()
        for sender in senders:
            if not self.complete(sender):
                continue
            records = self._records(sender)
            for n in sorted(records):
                result.add(*records[n])
            done = json.loads(self._done(sender).read_text(encoding="utf-8"))
            if done.get("control"):
                result.controls.append(done["control"])
        return result

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
passed along), and only then answers GOT. Applying reads the records back from
these logs in number order (`Received`), never all of them at once.
"""

from __future__ import annotations

import json
import os
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
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


def _json(text: str) -> dict:
    try:
        row = json.loads(text)
    except ValueError:
        row = None
    if not isinstance(row, dict):
        raise RecordError(f"a staged record that is not a JSON object: {text[:80]!r}")
    return row


class Received:
    """What the complete senders handed this receiver, read from their staged logs when asked, in each
    sender's order: never all of it in memory. A resize of a large crawl moves millions of records; what
    reading them holds is an index of 8 bytes per record, and one host's queue at a time."""

    def __init__(self, staging: Staging, senders: list[int]) -> None:
        self.staging = staging
        self.senders = [s for s in senders if staging.complete(s)]
        self.counts: Counter[str] = Counter()         # records by kind
        self.controls: list[dict] = []
        self._indexes: dict[int, array] = {}
        for sender in self.senders:
            done = staging.done(sender)
            index, counts = staging.index(sender, int(done["records"]))
            self._indexes[sender] = index
            self.counts.update(counts)
            if done.get("control"):
                self.controls.append(done["control"])

    def _records(self, kinds: str) -> Iterator[tuple[str, str]]:
        for sender in self.senders:
            yield from self.staging.read(sender, self._indexes[sender], kinds)

    def hosts(self) -> Iterator[HostHandoff]:
        """The moved hosts, each with its queue: a sender sends a host's H record, then its Q records."""
        host: HostHandoff | None = None
        for kind, rest in self._records(HOST + QUEUED):
            try:
                if kind == HOST:
                    header = HostHandoff.from_header(_json(rest))
                    if host is not None:
                        yield host
                    host = header
                    continue
                name, seq, quality, url = rest.split("\t", 3)
                entry = (int(seq), float(quality), url)
            except (KeyError, TypeError, ValueError) as exc:
                raise RecordError(f"a staged {kind} record that does not parse ({exc}): {rest[:80]!r}") from None
            if host is None or name != host.name:
                raise RecordError(f"a queued URL of {name!r} not after its host's record")
            host.entries.append(entry)
        if host is not None:
            yield host

    def urls(self, kinds: str) -> Iterator[str]:
        """The URLs of these record kinds (SEEN, TRANSIT; QUEUED gives the queued URL, lineage-tagged)."""
        for kind, rest in self._records(kinds):
            yield rest.split("\t", 3)[3] if kind == QUEUED else rest

    def robots(self) -> Iterator[dict]:
        for _, rest in self._records(ROBOTS):
            yield _json(rest)


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

    def index(self, sender: int, count: int) -> tuple[array, Counter[str]]:
        """Where in `sender`'s log each of this run's records 0..count-1 starts (-1: not there; repeats of
        a resent batch: the first copy), and the records by kind. A record numbered past `count` is a
        RecordError: the sender's DONE named fewer."""
        index = array("q", [-1]) * count
        counts: Counter[str] = Counter()
        path = self._log(sender)
        if not path.exists():
            return index, counts
        run = self.run.encode()
        with path.open("rb") as f:
            offset = 0
            for line in f:
                if not line.endswith(b"\n"):
                    break                             # torn by a crash before its fsync: resent
                fields = line.split(b"\t", 3)
                if fields[0] == run:
                    n = int(fields[1])
                    if n >= count:
                        raise RecordError(f"{path}: record {n} of a sender that sent {count}")
                    if index[n] < 0:
                        index[n] = offset
                        counts[fields[2].decode()] += 1
                offset += len(line)
        return index, counts

    def read(self, sender: int, index: array, kinds: str) -> Iterator[tuple[str, str]]:
        """`sender`'s records of these kinds, in number order (sent in order, they are mostly in file
        order: a seek only where a resent batch interleaved)."""
        if not index:
            return                                    # a sender with nothing for us writes no log
        with self._log(sender).open("rb") as f:
            at = 0
            for offset in index:
                if offset != at:
                    f.seek(offset)
                line = f.readline()
                at = offset + len(line)
                try:
                    _, _, kind, rest = line[:-1].decode("utf-8", "surrogatepass").split("\t", 3)
                except ValueError:
                    raise RecordError(f"{self._log(sender)}: the record at byte {offset} is not one: "
                                      f"{line[:80]!r}") from None
                if kind in kinds:
                    yield kind, rest.replace(SPACE_IN_TRANSIT, SPACE)

    def done(self, sender: int) -> dict:
        """What `from-<sender>.done` says: this run, the record count, the sender's control settings."""
        return json.loads(self._done(sender).read_text(encoding="utf-8"))

    def complete(self, sender: int) -> bool:
        return self._done(sender).exists() and self.done(sender).get("run") == self.run

    def finish(self, sender: int, count: int, control: dict | None) -> bool:
        """The sender says it sent `count` records: True (and durable) when all of them are here."""
        if self.complete(sender):
            return True
        if count < 0:
            return False
        try:
            index, _ = self.index(sender, count)
        except RecordError:
            return False
        if any(offset < 0 for offset in index):
            return False
        atomic_write(self._done(sender), json.dumps({"run": self.run, "records": count, "control": control}))
        return True

    def received(self, senders: Iterable[int]) -> Received:
        """What the complete senders handed over (read as it is used)."""
        return Received(self, list(senders))
